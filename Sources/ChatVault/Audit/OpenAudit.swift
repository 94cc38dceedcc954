import Foundation
import Synchronization
public import VaultStore

/// The engine's side of the audit journal (`AuditJournal`): what each open found and did, how each
/// reset reached the app's reset listeners, and what came back. It owns when and where an entry is
/// written: into the open cache (inside its encryption), or beside it when none opens.
///
/// Resets and their deliveries are written before the cache serves. The rest (the `opened` entry,
/// what waited beside the cache) is kept in memory and written when the cache closes, so an open
/// costs no extra commit; a process killed before its close loses those entries, never a reset's.
final class OpenAudit: Sendable {
    private struct State {
        var openStarted = ContinuousClock.now
        var readsServed = 0
        /// Entries made between opens (a restore, a key change), written by the next open.
        var queued: [AuditEntry] = []
        /// Entries of the open cache not written yet (written at its close).
        var unwritten: [AuditEntry] = []
    }

    private let state = Mutex(State())

    /// An open procedure is starting: times and read counts are relative to it.
    func openStarting() {
        state.withLock { s in
            s.openStarted = .now
            s.readsServed = 0
        }
    }

    /// A cached read was served (its cached phase read the open cache).
    func readServed() {
        state.withLock { $0.readsServed += 1 }
    }

    /// Keeps `entry` for the next open's write.
    func enqueue(_ entry: AuditEntry) {
        state.withLock { $0.queued.append(entry) }
    }

    /// The entries an open makes. With a cache: the resets are written now (before it serves),
    /// the rest after; without one: beside it.
    func opened(_ report: OpenReport, state newState: OfflineState, directory: CacheDirectory) {
        var resets: [AuditEntry] = []
        for reset in report.resets {
            resets.append(AuditEntry(kind: .reset, reason: reset.reason.rawValue, pendingMessagesLost: reset.pendingMessagesLost,
                                     cacheId: reset.quarantinedAs))
        }
        var entries = state.withLock { s -> [AuditEntry] in
            defer { s.queued = [] }
            return s.queued
        }
        switch newState {
        case .unavailable(let reason):
            entries.append(AuditEntry(kind: .refused, outcome: newState.code, reason: reason.code))
        case .onlineOnly(let why), .plaintextFallback(let why):
            entries.append(AuditEntry(kind: .opened, outcome: newState.code, reason: Self.code(why), cacheId: report.cache?.cacheId))
        default:
            entries.append(AuditEntry(kind: .opened, outcome: newState.code, cacheId: report.cache?.cacheId))
        }
        guard let cache = report.cache else {
            for entry in resets + entries { AuditJournal.appendBeside(entry, directory: directory) }
            return
        }
        if !resets.isEmpty { try? cache.writer.sync { db in try AuditJournal.append(resets, in: db) } }
        state.withLock { $0.unwritten = entries }
    }

    /// Writes what the open cache's journal still lacks (and what waited beside it); called just
    /// before the cache closes.
    func flush(into cache: VaultCache, directory: CacheDirectory) {
        let entries = state.withLock { s -> [AuditEntry] in
            defer { s.unwritten = [] }
            return s.unwritten
        }
        guard !entries.isEmpty || FileManager.default.fileExists(atPath: "\(directory.path)/\(AuditJournal.fileName)") else { return }
        _ = try? cache.writer.sync { db in
            try AuditJournal.absorbBeside(directory: directory, into: db)
            try AuditJournal.append(entries, in: db)
        }
    }

    /// Entries of the open cache not written yet.
    var pending: [AuditEntry] { state.withLock { $0.unwritten } }

    /// A reset was handed to `listeners` (ids) through `executor`; runs on the executor, after the
    /// calls, before the cache serves.
    func delivered(_ resets: [CacheReset], listeners: [String], released: [String], executor: String, cache: VaultCache?,
                   directory: CacheDirectory) {
        guard !resets.isEmpty else { return }
        let (started, reads) = state.withLock { ($0.openStarted, $0.readsServed) }
        let elapsed = ContinuousClock.now - started
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        let entries = resets.map { reset -> AuditEntry in
            var entry = AuditEntry(kind: .delivered, reason: reset.reason.rawValue, pendingMessagesLost: reset.pendingMessagesLost,
                                   cacheId: reset.quarantinedAs)
            entry.listeners = listeners
            entry.released = released
            entry.executor = executor
            entry.onMainThread = Thread.isMainThread
            entry.millisecondsAfterOpen = (ms * 10).rounded() / 10
            entry.readsServedBefore = reads
            return entry
        }
        if let cache, (try? cache.writer.sync({ db in try AuditJournal.append(entries, in: db) })) != nil { return }
        for entry in entries { AuditJournal.appendBeside(entry, directory: directory) }
    }

    static func code(_ why: EncryptionUnavailable) -> String {
        switch why {
        case .cipherNotProven: return "cipherNotProven"
        case .noKeyStore: return "noKeyStore"
        }
    }
}

extension OfflineVault {
    /// What happened to the logged-in user's cache over time, oldest first: opens, resets, their
    /// delivery to the reset listeners (which ids, on which executor, how long after the open
    /// began, how many cached reads came before), transient refusals, restores and clears. Read
    /// from the open cache and from the side file kept while none could open. No message
    /// content, no user id, no key material.
    public func offlineAuditJournal() -> [AuditEntry] {
        let (cache, directory) = session.withLock { ($0.state.isOfflineActive ? $0.cache : nil, $0.directory) }
        guard let directory else { return [] }
        var all = (try? cache?.reader.sync { db in try AuditJournal.entries(in: db) }) ?? []
        all += AuditJournal.beside(directory)
        if cache != nil { all += audit.pending }
        return AuditJournal.inTimeOrder(all)
    }
}
