import Foundation
import VaultStore

/// A failure the outbox owes the app's listeners even if the process dies before telling them:
/// a refused send (`onMessagePending` has fired; `onError` and `onOutboxMessageFailed` may not
/// have) and a message `.dropOldest` evicted (its row is gone; `onOutboxMessageFailed(.queueOverflow)`
/// may not have fired). The notice is a `kv` row written in the transaction that made the decision
/// and removed once the listeners have been called; rows a killed process left are delivered at
/// the next start (the next login that opens the cache), so a notice is heard at least once (twice
/// only if the process dies between the delivery and the removal's commit).
///
/// The cases are also the crash points of the crash tests (`OfflineVault.setOutboxNoticeHook`).
package enum OutboxNotice: String, CaseIterable, Sendable {
    /// A refused send, between its `onMessagePending` and its `onError`.
    case refusal
    /// An evicted message, between the eviction's commit and its `onOutboxMessageFailed`.
    case eviction
}

/// The notices' SQL (`kv` rows `outbox-notice|<local id>`). Every function runs on the writer.
enum OutboxNoticeRows {
    static let keyPrefix = "outbox-notice|"

    /// Records what `outcome` owes the listeners, if anything, inside the admission's transaction.
    static func record(_ outcome: EnqueueOutcome?, of row: OutboxRow, in db: Database) throws {
        switch outcome {
        case .refused(let reason)?:
            try save(row, reason, in: db)
        case .queued(let evicted?)?:
            try save(evicted, .queueOverflow, in: db)
        case .queued(nil)?, nil:
            break
        }
    }

    /// The message as the listeners will get it: its copies are deleted with the decision, so
    /// the notice keeps no files.
    static func save(_ row: OutboxRow, _ reason: MessageFailureReason, in db: Database) throws {
        let value: JSONValue = .object(["reason": .string(reason.rawValue), "conversationId": .string(row.conversationId),
                                        "kind": .string(row.kind.rawValue), "createdAt": .int(row.createdAt),
                                        "message": row.message, "sender": .string(row.senderUid)])
        try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(keyPrefix + row.localId), .blob(BinaryJSON.encode(value)))
    }

    /// Every notice not yet delivered, oldest compose time first, as failed rows. Damaged ones
    /// cannot be delivered; their local ids come back too, so they are removed with the rest.
    static func all(in db: Database) throws -> (rows: [OutboxRow], undeliverable: [String]) {
        let stmt = try db.prepare("SELECT key, value FROM kv WHERE substr(key, 1, \(keyPrefix.utf8.count)) = ? ORDER BY key")
        try stmt.bind([.text(keyPrefix)])
        var rows: [OutboxRow] = []
        var undeliverable: [String] = []
        while try stmt.step() {
            let localId = String((stmt.text(0) ?? "").dropFirst(keyPrefix.count))
            if let row = stmt.blob(1).flatMap({ try? BinaryJSON.decode($0) }).flatMap({ notice(localId, $0) }) {
                rows.append(row)
            } else {
                undeliverable.append(localId)
            }
        }
        return (rows.sorted { ($0.createdAt, $0.localId) < ($1.createdAt, $1.localId) }, undeliverable)
    }

    private static func notice(_ localId: String, _ value: JSONValue) -> OutboxRow? {
        guard !localId.isEmpty, let reason = value["reason"]?.stringValue.flatMap(MessageFailureReason.init(rawValue:)),
              let kind = value["kind"]?.stringValue.flatMap(OutboxKind.init(rawValue:)), let message = value["message"] else { return nil }
        return OutboxRow(localId: localId, seq: 0, conversationId: value["conversationId"]?.stringValue ?? "", kind: kind, state: .failed,
                         failureReason: reason, attempts: 0, createdAt: value["createdAt"]?.intValue ?? 0, message: message,
                         senderUid: value["sender"]?.stringValue ?? "", files: [])
    }

    static func delete(_ localIds: [String], in db: Database) throws {
        try db.transaction {
            for localId in localIds { try db.run("DELETE FROM kv WHERE key = ?", .text(keyPrefix + localId)) }
        }
    }
}

extension OutboxEngine {
    /// Test seam for the crash tests (`chatvault outbox-stress` with `CHATVAULT_OUTBOX_CRASH_AT`):
    /// `hook` runs on the callback executor at the moment a notice's decision is committed and the
    /// callbacks that tell it have not run (see `OutboxNotice`). Nil removes it.
    func setNoticeHook(_ hook: (@Sendable (OutboxNotice) -> Void)?) {
        noticeHook.withLock { $0 = hook }
    }

    /// Called on the callback executor right before a notice's callbacks.
    func reachNotice(_ notice: OutboxNotice) {
        noticeHook.withLock { $0 }?(notice)
    }

    /// Notices a process left undelivered: each listener hears `onOutboxMessageFailed` with the
    /// reason (the send's closures died with that process), then the notices are removed.
    func deliverLeftNotices(_ rows: [OutboxRow], undeliverable: [String]) {
        let told = state.withLock { $0.noticesTold }
        let rows = rows.filter { !told.contains($0.localId) }
        guard !rows.isEmpty || !undeliverable.isEmpty else { return }
        let notices = rows.compactMap { row -> (message: BaseMessage, reason: MessageFailureReason)? in
            guard let reason = row.failureReason, let message = pendingMessage(row, status: .failed) else { return nil }
            return (message, reason)
        }
        let listeners = listeners.live()
        settings.callbackExecutor.execute {
            for notice in notices {
                for listener in listeners { listener.onOutboxMessageFailed(notice.message, notice.reason) }
            }
            self.noticesDelivered(rows.map(\.localId) + undeliverable)
        }
    }

    /// The listeners have been told: the notices go, in one commit with whatever else was
    /// delivered meanwhile. If the cache is gone by then they stay, to be told again at the next start.
    func noticesDelivered(_ localIds: [String]) {
        let schedule = state.withLock { s -> Bool in
            s.deliveredNotices += localIds
            defer { s.noticeRemovalScheduled = true }
            return !s.noticeRemovalScheduled
        }
        guard schedule else { return }
        admission.async {
            let localIds = self.state.withLock { s -> [String] in
                defer {
                    s.deliveredNotices.removeAll()
                    s.noticeRemovalScheduled = false
                }
                return s.deliveredNotices
            }
            _ = try? self.openCache?.writer.sync { db in try OutboxNoticeRows.delete(localIds, in: db) }
            self.state.withLock { s in s.noticesTold.subtract(localIds) }
        }
    }

    /// Waits until the decisions the outbox has made so far are delivered and their notices
    /// removed (for the CLI's stress verbs, before they log out). Assumes a serial callback executor.
    func waitForNotices() async {
        // Executor (login's attach, a decision's callbacks), admission (delivery of left notices,
        // removal of delivered ones), twice: each can hand work to the other once.
        for _ in 0..<2 {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in settings.callbackExecutor.execute { done.resume() } }
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in admission.async { done.resume() } }
        }
    }
}

extension OfflineVault {
    /// Test seam for the crash tests (`chatvault outbox-stress` with `CHATVAULT_OUTBOX_CRASH_AT`):
    /// `hook` runs on the callback executor at the moment a notice's decision is committed and the
    /// callbacks that tell it have not run (see `OutboxNotice`). Nil removes it.
    package func setOutboxNoticeHook(_ hook: (@Sendable (OutboxNotice) -> Void)?) {
        outbox.setNoticeHook(hook)
    }

    /// Waits until the decisions the outbox has made so far are delivered and their notices
    /// removed (for the CLI's stress verbs, before they log out). Assumes a serial callback executor.
    package func waitForOutboxNotices() async {
        await outbox.waitForNotices()
    }
}
