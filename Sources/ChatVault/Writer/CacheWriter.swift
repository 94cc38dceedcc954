import Foundation
import Synchronization
import VaultStore

/// The one way in for what arrives from the server: a realtime event (a batch of one) or a page of
/// the catch-up log is written here, in one transaction, by one set of rules (`MessageWriteBatch`:
/// the outbox and local-id checks, each message's status and source, its conversation), and each
/// committed batch is then published, in commit order, to the subscribers: media (views of cached
/// bytes, background downloads), the message listeners and streams, eviction. Nothing is published
/// before its transaction has committed; a failed write (a busy or full disk) leaves the cache as it
/// was and is still published (the next read brings the server's version).
///
///     writer.subscribe { committed in … }                  // at start, in the order they run
///     await writer.commit(realtime: parsed, me: me, cache: cache, limits: limits)
///     let applied = try await writer.commit(page: page, …)
///     writer.stored(serverCopies); writer.removed(gone)    // after a read's own transaction
final class CacheWriter: Sendable {
    /// A batch as committed.
    enum Committed: @unchecked Sendable {
        /// A realtime event; `wrote` is false when no cache took it (none open, or the write
        /// failed). Its messages carry their resolved status and source.
        case realtime(RealtimeWire.Parsed, wrote: Bool)
        /// A page of the catch-up log.
        case syncPage(SyncPageRows.Applied)
        /// Server copies a read, a send's acknowledgement or an edit's answer wrote (committed by
        /// their own transaction, through `MessageWriteBatch.storeServerCopy`); empty for a
        /// write-through of other entities (conversations, users, groups).
        case stored([BaseMessage])
        /// Cached messages a read removed because the server no longer has them (a page's
        /// reconcile, a thread's, a lookup answered 404), committed by the read's transaction.
        case removed([MessageID])
        /// A media file recorded as the cached bytes of `url` (`MediaCache`: a download, an adopted
        /// outgoing copy); `message` is the message it belongs to, when known.
        case media(message: MessageID?)
    }

    private let subscribers = Mutex<[@Sendable (Committed) -> Void]>([])

    /// Adds a subscriber; subscribers run in the order they were added, on the committing task.
    func subscribe(_ subscriber: @escaping @Sendable (Committed) -> Void) {
        subscribers.withLock { $0.append(subscriber) }
    }

    private func publish(_ committed: Committed) {
        for subscriber in subscribers.withLock({ $0 }) { subscriber(committed) }
    }

    /// Publishes server copies a read, an acknowledgement or an edit committed.
    func stored(_ messages: [BaseMessage]) {
        publish(.stored(messages))
    }

    /// Records a media file (the `media` row of `key`, for `messageId` when positive) in one
    /// transaction, trimming received media to `budget`, unless `current()` says the media cache's
    /// session changed meanwhile (checked inside the transaction); then publishes it.
    /// - Returns: the file the row replaced and the files the trim evicted, or nil when nothing
    ///   was written (the session changed, or the write failed).
    func commit(media row: MediaFileRow, key: String, messageId: Int, at now: Int64, budget: Int64?, cache: VaultCache,
                current: @escaping @Sendable () -> Bool) -> (replaced: String?, evicted: [String])? {
        let written: (String?, [String])? = try? cache.writer.sync { db in
            guard current() else { return nil }
            return try db.transaction {
                let replaced = try MediaRows.insert(key, messageId: messageId > 0 ? String(messageId) : nil, row: row, at: now, in: db)
                let evicted = try budget.map { try MediaRows.trim(to: $0, keep: key, in: db) } ?? []
                return (replaced, evicted)
            }
        }
        guard let written else { return nil }
        publish(.media(message: messageId > 0 ? MessageID(messageId) : nil))
        return (written.0, written.1)
    }

    /// Publishes the messages a read's transaction removed (nothing when none).
    func removed(_ ids: [MessageID]) {
        guard !ids.isEmpty else { return }
        publish(.removed(ids))
    }

    /// Writes a validated realtime event (when a cache is open), then publishes it.
    func commit(realtime parsed: RealtimeWire.Parsed, me: String, cache: VaultCache?, limits: WireLimits) async {
        var wrote = false
        if let cache {
            wrote = (try? await cache.writer.run { db -> Bool in
                _ = try db.transaction { try RealtimeRows.apply(parsed, me: me, limits: limits, in: db) }
                return true
            }) ?? false
        }
        if !wrote { Self.resolveUnwritten(parsed, me: me) }
        publish(.realtime(parsed, wrote: wrote))
    }

    /// Writes a page of the catch-up log with the sync point it reaches (and, on the sweep's last
    /// page, its outcome), in one transaction; then publishes it.
    /// - Throws: the write's error (nothing was committed, nothing published).
    func commit(page changes: [SyncChange], me: String, cache: VaultCache, limits: WireLimits, serverTime: Int64,
                nextToken: String, outcome: SyncStateRecord.Outcome?, inFlight: Set<String>) async throws -> SyncPageRows.Applied {
        let applied = try await cache.writer.run { db in
            try db.transaction { () throws -> SyncPageRows.Applied in
                let applied = try SyncPageRows.apply(changes, me: me, limits: limits, serverTime: serverTime, inFlight: inFlight, in: db)
                try SyncStateRows.advance(token: nextToken, serverTime: serverTime, in: db)
                if let outcome { try SyncStateRows.recordOutcome(outcome, errorCode: nil, in: db) }
                return applied
            }
        }
        publish(.syncPage(applied))
        return applied
    }

    /// Status and source of an event no cache took (the write resolves them otherwise).
    private static func resolveUnwritten(_ parsed: RealtimeWire.Parsed, me: String) {
        let message: BaseMessage?
        switch parsed {
        case .received(_, let m), .edited(_, let m), .deleted(_, let m): message = m
        case .reaction(_, let event, _): message = event.message
        case .receipt: message = nil
        }
        guard let message else { return }
        MessageWriteBatch.resolveStatus(message, me: me)
        message.source = .realtime
    }
}
