package import VaultStore

/// What the cache remembers of the catch-up sync: the row of `sync_state` (schema version 3).
/// Package-visible (read-only use) so `chatvault status` can report it; only this file writes it.
package struct SyncStateRecord: Sendable, Equatable {
    /// How the last sweep ended, as `sync_state.last_outcome` spells it.
    package enum Outcome: String, Sendable {
        /// The change log was replayed to its end.
        case caughtUp
        /// Pages were ingested but more remained (a bounded sweep).
        case partial
        /// The sweep stopped on an error (`lastErrorCode` says which).
        case failed
    }

    /// The backend's sync token (`ChangeLogPage.nextToken`) of the last committed page, stored as
    /// it came and never parsed; nil: no sync point yet (a new or cleared cache, or a token the
    /// backend refused).
    package var token: String?
    /// Server time, epoch seconds, of the point `token` stands for (`ChangeLogPage.serverTime`):
    /// what `getLastSyncTimestamp()` reports; 0 if never.
    package var lastSyncAt: Int64 = 0
    /// Local clock, epoch seconds, when the last sweep started; 0 if never.
    package var lastAttemptAt: Int64 = 0
    /// nil if no sweep has finished, or the stored text is not one this build knows.
    package var lastOutcome: Outcome?
    /// The error code that stopped the last sweep (a `BackendError` server code or an
    /// `ERROR_…` code), never a message, so no content reaches the cache's bookkeeping.
    package var lastErrorCode: String?

    package static let empty = SyncStateRecord()
}

/// Reads and writes the single row of `sync_state` inside the caller's transaction, so the sync
/// engine advances the token in the same transaction as the rows of the page it covers: a crash
/// at any instant leaves the token and the rows in agreement.
///
/// The row may be missing (a cache cleared by `CacheRows.clearAll`, a fresh migration): it reads
/// as `SyncStateRecord.empty` and the writers create it. Nothing read back from disk can crash:
/// a value of the wrong type reads as absent.
package enum SyncStateRows {
    /// The longest token stored. Real servers' cursors are tens of bytes (a Matrix `next_batch`
    /// about 50); a longer one is a backend fault, refused before it reaches the cache.
    static let maxTokenBytes = 4096

    /// Why a sync point is refused before it is written.
    enum Problem: Error, Sendable, Equatable, CustomStringConvertible {
        case emptyToken
        case tokenTooLong(bytes: Int)

        var description: String {
            switch self {
            case .emptyToken: return "the backend answered an empty sync token"
            case .tokenTooLong(let bytes): return "the backend answered a sync token of \(bytes) bytes (at most \(SyncStateRows.maxTokenBytes))"
            }
        }
    }

    package static func load(in db: Database) throws -> SyncStateRecord {
        let stmt = try db.cached("""
            SELECT token, last_sync_at, last_attempt_at, last_outcome, last_error_code FROM sync_state WHERE id = 1
            """)
        defer { stmt.reset() }
        guard try stmt.step() else { return .empty }
        let token = stmt.text(0).flatMap { (try? validated($0)) }
        return SyncStateRecord(token: token, lastSyncAt: max(stmt.int64(1), 0), lastAttemptAt: max(stmt.int64(2), 0),
                               lastOutcome: stmt.text(3).flatMap(SyncStateRecord.Outcome.init(rawValue:)),
                               lastErrorCode: stmt.text(4))
    }

    /// Moves the sync point to the page just ingested: call in the transaction that wrote it.
    static func advance(token: String, serverTime: Int64, in db: Database) throws {
        let token = try validated(token)
        try ensureRow(db)
        try db.run("UPDATE sync_state SET token = ?, last_sync_at = ? WHERE id = 1", .text(token), .int(clampedTime(serverTime)))
    }

    /// Forgets the sync point (a token the backend refused): the next sweep starts over from nil.
    /// `getLastSyncTimestamp()` keeps its value until a page is committed again.
    static func forgetToken(in db: Database) throws {
        try ensureRow(db)
        try db.run("UPDATE sync_state SET token = NULL WHERE id = 1")
    }

    /// A sweep starts (local clock, epoch seconds).
    static func recordAttempt(at time: Int64, in db: Database) throws {
        try ensureRow(db)
        try db.run("UPDATE sync_state SET last_attempt_at = ? WHERE id = 1", .int(max(time, 0)))
    }

    /// A sweep ended: how, and the code of the error that stopped it (nil unless `.failed`).
    static func recordOutcome(_ outcome: SyncStateRecord.Outcome, errorCode: String?, in db: Database) throws {
        try ensureRow(db)
        let code: DatabaseValue = errorCode.map { .text(String($0.prefix(64))) } ?? .null
        try db.run("UPDATE sync_state SET last_outcome = ?, last_error_code = ? WHERE id = 1", .text(outcome.rawValue), code)
    }

    /// A server time as stored: within 0...2^53 (a hostile server's clock cannot overflow what
    /// reads it back).
    static func clampedTime(_ time: Int64) -> Int64 {
        min(max(time, 0), WireLimits.maxWireNumber)
    }

    private static func ensureRow(_ db: Database) throws {
        try db.run("INSERT OR IGNORE INTO sync_state (id) VALUES (1)")
    }

    private static func validated(_ token: String) throws(Problem) -> String {
        guard !token.isEmpty else { throw .emptyToken }
        guard token.utf8.count <= maxTokenBytes else { throw .tokenTooLong(bytes: token.utf8.count) }
        return token
    }
}
