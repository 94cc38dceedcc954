public import Foundation
import VaultKeys

/// One line of a cache's audit journal: what happened to the cache (an open and its outcome, a
/// reset, its delivery to the reset listeners, a transient refusal, a restore, a clear). Never any
/// message content, user id or key material: reasons, counts, ids the library chose, listener ids
/// the app chose, times.
public struct AuditEntry: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable {
        /// An open finished: `outcome` is the engine state's code, `reason` the unavailable or
        /// online-only reason.
        case opened
        /// The open procedure set a cache aside (or migrated it): `reason`, `pendingMessagesLost`.
        case reset
        /// A reset was handed to the reset listeners: `listeners` (ids called), `released` (ids
        /// whose listener had been released), `executor`, `onMainThread`, `millisecondsAfterOpen`,
        /// `readsServedBefore`.
        case delivered
        /// The open was refused for a transient reason (`reason`): nothing was touched.
        case refused
        /// A cache came back: `detail` says how (quarantine, recovery secret, import).
        case restored
        /// `clearOfflineCache`: the cached data was wiped on request.
        case cleared
        /// The key was rotated or moved to another store (`detail`).
        case keyChanged
    }

    /// Microseconds since 1970 (entries made in the same millisecond keep their order).
    public var at: Int64
    public var kind: Kind
    public var outcome: String?
    public var reason: String?
    public var pendingMessagesLost: Int?
    public var listeners: [String]?
    public var released: [String]?
    public var executor: String?
    public var onMainThread: Bool?
    public var millisecondsAfterOpen: Double?
    public var readsServedBefore: Int?
    public var cacheId: String?
    public var detail: String?

    package init(kind: Kind, at: Date = Date(), outcome: String? = nil, reason: String? = nil, pendingMessagesLost: Int? = nil,
                cacheId: String? = nil, detail: String? = nil) {
        self.at = Int64((at.timeIntervalSince1970 * 1_000_000).rounded())
        self.kind = kind
        self.outcome = outcome
        self.reason = reason
        self.pendingMessagesLost = pendingMessagesLost
        self.cacheId = cacheId
        self.detail = detail
    }

    public var date: Date { Date(timeIntervalSince1970: Double(at) / 1_000_000) }
}

/// Where the journal lives: inside the encrypted database (`kv` rows `audit.<seq>`) whenever one
/// is open, and in `audit.json` beside it (0600) for what happens while none can open (a locked
/// keyring, a busy file, a second process). The side file's entries move into the database at
/// the next open that serves. Both are bounded; the oldest entries go first.
///
///     try AuditJournal.append([entry], in: db)           // with an open cache
///     AuditJournal.appendBeside(entry, directory: dir)   // when none opens
///     let all = AuditJournal.entries(in: db) + AuditJournal.beside(dir)
package enum AuditJournal {
    package static let fileName = "audit.json"
    static let prefix = "audit."
    /// Entries kept in the database, and beside it.
    package static let databaseLimit = 1000
    package static let besideLimit = 200
    /// A side file larger than this is not read (it is ours, 0600: only damage makes it so).
    static let besideBytes = 256 * 1024

    static func rowKey(_ seq: Int64) -> String { prefix + String(format: "%012lld", seq) }

    /// Appends `entries` in one transaction (the caller's, if one is open) and drops the oldest
    /// beyond `databaseLimit`.
    package static func append(_ entries: [AuditEntry], in db: Database) throws {
        guard !entries.isEmpty else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let last = try db.scalarText("SELECT key FROM kv WHERE key LIKE 'audit.%' ORDER BY key DESC LIMIT 1")
        var seq = last.flatMap { Int64($0.dropFirst(prefix.count)) } ?? 0
        let write = { () throws in
            for entry in entries {
                seq += 1
                let bytes = try encoder.encode(entry)
                try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(rowKey(seq)), .blob(Array(bytes)))
            }
            if seq > Int64(databaseLimit) {
                try db.run("DELETE FROM kv WHERE key LIKE 'audit.%' AND key <= ?", .text(rowKey(seq - Int64(databaseLimit))))
            }
        }
        try db.savepoint("audit_journal") { try write() }
    }

    /// Entries from both places (the database's, the side file's) in time order; entries of the
    /// same microsecond keep the order given.
    package static func inTimeOrder(_ entries: [AuditEntry]) -> [AuditEntry] {
        entries.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element)
    }

    /// The database's entries, oldest first. Unreadable rows are skipped.
    package static func entries(in db: Database) throws -> [AuditEntry] {
        let stmt = try db.prepare("SELECT value FROM kv WHERE key LIKE 'audit.%' ORDER BY key")
        let decoder = JSONDecoder()
        var out: [AuditEntry] = []
        while try stmt.step() {
            if let bytes = stmt.blob(0), let entry = try? decoder.decode(AuditEntry.self, from: Data(bytes)) { out.append(entry) }
        }
        return out
    }

    /// Appends to the side file, only where a cache directory already exists (under `.onlineOnly`
    /// with no cache nothing is ever written). Best effort: a full disk loses the entry, never
    /// anything else.
    package static func appendBeside(_ entry: AuditEntry, directory: CacheDirectory) {
        guard directory.exists else { return }
        var all = beside(directory)
        all.append(entry)
        if all.count > besideLimit { all.removeFirst(all.count - besideLimit) }
        write(all, to: "\(directory.path)/\(fileName)")
    }

    /// The side file's entries, oldest first (none when it is missing, damaged or not ours).
    package static func beside(_ directory: CacheDirectory) -> [AuditEntry] {
        let path = "\(directory.path)/\(fileName)"
        guard let bytes = try? SecureFiles.read(path, limit: besideBytes) else { return [] }
        return (try? JSONDecoder().decode([AuditEntry].self, from: Data(bytes))) ?? []
    }

    /// Moves the side file's entries into the database (then removes the file), in time order
    /// with what the database holds.
    package static func absorbBeside(directory: CacheDirectory, into db: Database) throws {
        let path = "\(directory.path)/\(fileName)"
        let waiting = beside(directory)
        if !waiting.isEmpty { try append(waiting, in: db) }
        if access(path, F_OK) == 0 { unlink(path) }
    }

    private static func write(_ entries: [AuditEntry], to path: String) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        guard let data = try? encoder.encode(entries) else { return }
        try? SecureFiles.writeAtomically(path, data: Array(data))
    }
}
