import Foundation
import VaultStore

/// The entity lists served from snapshots (the `kind` column of `list_snapshots`).
enum SnapshotKind: String, Sendable, CaseIterable {
    case users
    case groups
    case groupMembers
    case bannedGroupMembers
    case reactions
    case notificationFeed
}

/// Names one recorded list: the request kind and a canonical encoding of every builder setting
/// (the limit included; for reactions, the paging direction too).
///
/// Canonical means equal settings give equal keys however they were set: a setting left at its
/// default and the same value set explicitly are one key, and set-like settings (tags, uids,
/// roles, scopes, `searchIn`) are sorted and deduplicated, since the server treats them as sets.
struct SnapshotKey: Sendable, Hashable, CustomStringConvertible {
    let kind: SnapshotKind
    /// The settings as compact JSON with sorted keys.
    let settings: String

    init(_ kind: SnapshotKind, _ settings: SnapshotSettings) {
        self.kind = kind
        self.settings = String(decoding: JSONValue.object(settings.fields).jsonData(), as: UTF8.self)
    }

    /// The `query_key` column.
    var queryKey: String { "\(kind.rawValue):\(settings)" }

    var description: String { queryKey }
}

/// Collects a builder's settings for a `SnapshotKey`.
struct SnapshotSettings: Sendable {
    fileprivate(set) var fields: [String: JSONValue] = [:]

    mutating func put(_ name: String, _ value: Int) { fields[name] = .int(Int64(value)) }
    mutating func put(_ name: String, _ value: Bool) { fields[name] = .bool(value) }
    mutating func put(_ name: String, _ value: String?) { fields[name] = value.map(JSONValue.string) ?? .null }
    /// A set-like list: order and repeats do not matter.
    mutating func put(_ name: String, set value: [String]) { fields[name] = .array(Set(value).sorted().map(JSONValue.string)) }
}

/// One recorded page: the server's items as received, and the cursor that followed them (so an
/// offline walk through the pages leaves the request where the online one would have been).
struct SnapshotPage: Sendable, Equatable {
    var items: [JSONValue]
    var next: String?

    var encoded: [UInt8] {
        BinaryJSON.encode(.object(["items": .array(items), "next": next.map(JSONValue.string) ?? .null]))
    }

    init(items: [JSONValue], next: String?) {
        self.items = items
        self.next = next
    }

    init?(decoding bytes: [UInt8]) {
        guard let value = try? BinaryJSON.decode(bytes), let items = value["items"]?.arrayValue else { return nil }
        self.items = items
        next = value["next"]?.stringValue
    }
}

/// Rows of `list_snapshots(query_key, page, kind, recorded_at, last_used, payload)`.
///
/// - `recorded_at`: when the server returned the page, in clock seconds; a page older than
///   `snapshotTtlDays` is neither replayed nor kept.
/// - `last_used`: a use stamp shared by every page of a key, for the LRU over keys
///   (`maxSnapshotQueries`, and the `maxStorageSize` eviction). It is the clock in milliseconds,
///   moved past the newest stamp when needed, so uses within one clock tick (or under a frozen
///   test clock) keep their order.
///
/// Every function runs on the writer connection, inside the caller's transaction.
enum SnapshotRows {
    /// The oldest `recorded_at` still fresh at `now`.
    static func freshSince(now: Date, ttlDays: Int) -> Int64 {
        let (span, overflow) = Int64(ttlDays).multipliedReportingOverflow(by: 86_400)
        guard !overflow else { return Int64.min }
        let (cutoff, under) = seconds(now).subtractingReportingOverflow(span)
        return under ? Int64.min : cutoff
    }

    static func seconds(_ date: Date) -> Int64 {
        let t = date.timeIntervalSince1970
        guard t.isFinite else { return 0 }
        return Int64(max(min(t, 9e15), -9e15).rounded(.down))
    }

    /// A use stamp after every stamp already stored.
    static func stamp(now: Date, in db: Database) throws -> Int64 {
        let t = now.timeIntervalSince1970
        let ms = t.isFinite ? Int64(max(min(t * 1000, 9e18), -9e18).rounded(.down)) : 0
        guard let newest = try db.scalarInt("SELECT max(last_used) FROM list_snapshots") else { return ms }
        return newest < Int64.max ? max(ms, newest + 1) : newest
    }

    /// Deletes every page older than the TTL.
    @discardableResult
    static func pruneExpired(now: Date, ttlDays: Int, in db: Database) throws -> Int {
        try db.run("DELETE FROM list_snapshots WHERE recorded_at < ?", .int(freshSince(now: now, ttlDays: ttlDays)))
        return db.changes
    }

    /// The fresh page `page` of `key`, after pruning expired pages; the key counts as used now.
    /// Nil when that page was never recorded, has expired, or cannot be read (then it is dropped).
    static func replay(_ key: SnapshotKey, page: Int, now: Date, config: OfflineConfig, in db: Database) throws -> SnapshotPage? {
        try pruneExpired(now: now, ttlDays: config.snapshotTtlDays, in: db)
        try db.run("UPDATE list_snapshots SET last_used = ? WHERE query_key = ?", .int(try stamp(now: now, in: db)), .text(key.queryKey))
        let stmt = try db.prepare("SELECT payload FROM list_snapshots WHERE query_key = ? AND page = ?")
        try stmt.bind([.text(key.queryKey), .int(Int64(page))])
        guard try stmt.step() else { return nil }
        let bytes = stmt.blob(0) ?? []
        stmt.reset()
        guard let recorded = SnapshotPage(decoding: bytes) else {
            try db.run("DELETE FROM list_snapshots WHERE query_key = ? AND page = ?", .text(key.queryKey), .int(Int64(page)))
            return nil
        }
        return recorded
    }

    /// Records the server's page `page` of `key` (replacing what was there), stamps the key as
    /// used now, and keeps the limits: expired pages go; when the server says the list ends here,
    /// pages recorded beyond it go; beyond `maxSnapshotQueries` keys, the least recently used go.
    static func record(_ key: SnapshotKey, page: Int, _ recorded: SnapshotPage, now: Date, config: OfflineConfig,
                       in db: Database) throws {
        try pruneExpired(now: now, ttlDays: config.snapshotTtlDays, in: db)
        let stamp = try stamp(now: now, in: db)
        try db.run("""
            INSERT OR REPLACE INTO list_snapshots (query_key, page, kind, recorded_at, last_used, payload)
            VALUES (?, ?, ?, ?, ?, ?)
            """, .text(key.queryKey), .int(Int64(page)), .text(key.kind.rawValue), .int(seconds(now)), .int(stamp),
            .blob(recorded.encoded))
        try db.run("UPDATE list_snapshots SET last_used = ? WHERE query_key = ?", .int(stamp), .text(key.queryKey))
        if recorded.next == nil {
            try db.run("DELETE FROM list_snapshots WHERE query_key = ? AND page > ?", .text(key.queryKey), .int(Int64(page)))
        }
        try keepMostRecent(config.maxSnapshotQueries, in: db)
    }

    /// Deletes every key but the `count` most recently used.
    static func keepMostRecent(_ count: Int, in db: Database) throws {
        let stmt = try db.prepare("""
            SELECT query_key FROM list_snapshots GROUP BY query_key ORDER BY max(last_used) DESC, query_key LIMIT -1 OFFSET ?
            """)
        try stmt.bind([.int(Int64(max(count, 0)))])
        var stale: [String] = []
        while try stmt.step() { stale.append(stmt.text(0) ?? "") }
        stmt.reset()
        for key in stale { try db.run("DELETE FROM list_snapshots WHERE query_key = ?", .text(key)) }
    }

    /// The recorded keys, most recently used first (audits and tests).
    static func keys(in db: Database) throws -> [String] {
        try db.texts("SELECT query_key FROM list_snapshots GROUP BY query_key ORDER BY max(last_used) DESC, query_key")
    }
}
