import Foundation
import VaultStore

/// A position in the conversation list (most recent activity first, ties by id): strictly after
/// this conversation.
struct ConversationCursor: ListCursor, Hashable {
    /// `conversations.updated_at`: the conversation's `updatedAt`, whole seconds.
    var updatedAt: Int64
    var id: String

    init(updatedAt: Int64, id: String) {
        self.updatedAt = updatedAt
        self.id = id
    }

    init(_ conversation: Conversation) {
        self.init(updatedAt: ConversationRows.activity(of: conversation), id: conversation.conversationId ?? "")
    }

    /// Whether `self` comes later in the list than `other` (older activity, or the same with a
    /// greater id), the list's own order.
    func isAfter(_ other: ConversationCursor) -> Bool {
        updatedAt != other.updatedAt ? updatedAt < other.updatedAt : id > other.id
    }
}

/// The cached form of a `ConversationQuery`: the part SQL answers (type, unread) and the part
/// Swift checks on the decoded conversation (tags, the other side's tags, agentic, blocked,
/// pinned). Built only when every active filter is locally computable; `searchKeyword` is not.
struct CachedConversationFilter: Sendable {
    var type: ConversationType?
    var unread = false
    var tags: Set<String> = []
    var userTags: Set<String> = []
    var groupTags: Set<String> = []
    var hideAgentic = false
    var onlyAgentic = false
    var includeBlockedUsers = false
    var pinnedBy: Set<String> = []

    /// The cached filter for a query, or nil when a server-only predicate is active (then the
    /// cached page is empty).
    init?(_ q: ConversationQuery) {
        if let keyword = q.searchKeyword, !keyword.isEmpty { return nil }
        type = q.conversationType == .none ? nil : q.conversationType
        unread = q.unread
        tags = Set(q.tags)
        userTags = Set(q.userTags)
        groupTags = Set(q.groupTags)
        hideAgentic = q.hideAgentic
        onlyAgentic = q.onlyAgentic
        includeBlockedUsers = q.includeBlockedUsers
        pinnedBy = Set(q.pinnedBy)
        // `withTags`, `withUserAndGroupTags`, `withBlockedInfo`: enrichment, never a filter.
    }

    /// The WHERE clause (without the cursor) and its values.
    func sql() -> (String, [DatabaseValue]) {
        var clauses = ["payload IS NOT NULL"]
        var values: [DatabaseValue] = []
        if let type {
            clauses.append("type = ?")
            values.append(.text(type.rawValue))
        }
        if unread { clauses.append("unread_count > 0") }
        return (clauses.joined(separator: " AND "), values)
    }

    /// The checks SQL cannot make, on the decoded conversation; the same rules as the server's.
    /// - Parameter blocked: uids the logged-in user blocked (`blocked_users`).
    func admits(_ c: Conversation, blocked: Set<String>) -> Bool {
        let user = c.conversationWith as? User
        let group = c.conversationWith as? Group
        if !tags.isEmpty, Set(c.tags ?? []).isDisjoint(with: tags) { return false }
        if !userTags.isEmpty || !groupTags.isEmpty {
            let byUser = user.map { !userTags.isEmpty && !Set($0.tags).isDisjoint(with: userTags) } ?? false
            let byGroup = group.map { !groupTags.isEmpty && !Set($0.tags).isDisjoint(with: groupTags) } ?? false
            if !byUser && !byGroup { return false }
        }
        if hideAgentic && user?.isAgentic == true { return false }
        if onlyAgentic && user?.isAgentic != true { return false }
        if !includeBlockedUsers, let user, user.blockedByMe || blocked.contains(user.uid) { return false }
        if !pinnedBy.isEmpty {
            guard c.pinnedAt > 0 else { return false }
            let bySystem = c.pinnedBy == ConversationRows.systemPinner
            guard (pinnedBy.contains("me") && !bySystem) || (pinnedBy.contains("system") && bySystem) else { return false }
        }
        return true
    }
}

/// Rows of the `conversations` table: one per conversation, the validated wire object in
/// `payload`, and the columns the list orders and filters by.
enum ConversationRows {
    /// The `pinnedBy` of a conversation the app (not the user) pinned; `set(pinnedBy: ["system"])`.
    static let systemPinner = "app_system"

    /// The SDK's id of the conversation with a user or a group; nil for `.none`.
    static func conversationId(with id: String, type: ConversationType, me: String) -> String? {
        switch type {
        case .user: return MessageRows.conversationId(for: .user(id), me: me)
        case .group: return MessageRows.conversationId(for: .group(id), me: me)
        case .none: return nil
        }
    }

    /// The activity the list orders by, in whole seconds.
    static func activity(of c: Conversation) -> Int64 {
        Int64(clampingWire: c.updatedAt)
    }

    /// Inserts or updates a conversation (by id), keeping when it was last opened.
    static func upsert(_ wire: JSONValue, _ c: Conversation, in db: Database) throws {
        guard let id = c.conversationId else { return }
        let peer: String
        switch c.conversationWith {
        case let user as User: peer = user.uid
        case let group as Group: peer = group.guid
        default: peer = ""
        }
        let values: [DatabaseValue] = [
            .text(c.conversationType.rawValue), .text(peer), .int(Int64(c.lastMessage?.sentAt ?? 0)), .int(activity(of: c)),
            .int(Int64(c.unreadMessageCount)), .blob(BinaryJSON.encode(wire)),
        ]
        let update = try db.cached("""
            UPDATE conversations SET type = ?, peer_id = ?, last_message_at = ?, updated_at = ?, unread_count = ?, payload = ?
            WHERE id = ?
            """)
        try update.bind(values + [.text(id)])
        while try update.step() {}
        if db.changes > 0 { return }
        let insert = try db.cached("""
            INSERT INTO conversations (type, peer_id, last_message_at, updated_at, unread_count, payload, id)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """)
        try insert.bind(values + [.text(id)])
        while try insert.step() {}
    }

    /// Removes one conversation's row (not its messages: eviction decides about those).
    static func remove(id: String, in db: Database) throws {
        try db.run("DELETE FROM conversations WHERE id = ?", .text(id))
    }

    /// The uids the logged-in user blocked, from the SDK's blocked-users list. A row whose payload
    /// says `blockedByMe: false` (someone who blocked me) does not count.
    static func blockedByMe(_ db: Database) throws -> Set<String> {
        let stmt = try db.prepare("SELECT uid, payload FROM blocked_users")
        var out = Set<String>()
        while try stmt.step() {
            guard let uid = stmt.text(0) else { continue }
            if let bytes = stmt.blob(1), let payload = try? BinaryJSON.decode(bytes), payload["blockedByMe"]?.boolValue == false { continue }
            out.insert(uid)
        }
        return out
    }

    /// The columns a cached read of conversations selects, in order.
    enum Column: String, RowColumns {
        case payload, updatedAt = "updated_at", id
    }

    static let columns = Column.list
    /// Each column's index, resolved once (a list read decodes many rows).
    private static let payloadAt = Column.payload.index, updatedAtAt = Column.updatedAt.index, idAt = Column.id.index

    /// Decodes a row selected with `columns`. The blocked-users list, kept fresher than the
    /// payload by `blockUsers` and each sync, marks the other side as blocked by me.
    static func decode(_ stmt: Statement, _ decoder: WireDecoder, me: String, blocked: Set<String>) throws -> Conversation {
        guard let bytes = stmt.blob(payloadAt) else { throw BinaryJSON.Malformed() }
        let conversation = try decoder.conversation(try BinaryJSON.decode(bytes))
        finish(conversation, me: me, blocked: blocked)
        return conversation
    }

    /// What every conversation handed out gets: its last message's lifecycle status, and the
    /// blocked flag from the blocked-users list.
    static func finish(_ c: Conversation, me: String, blocked: Set<String>) {
        if let last = c.lastMessage { MessageWriteBatch.resolveStatus(last, me: me) }
        if let user = c.conversationWith as? User, blocked.contains(user.uid) { user.blockedByMe = true }
    }

    /// The range clause of a slice: strictly after `start`, and up to `end` included.
    private static func range(after start: ConversationCursor?, through end: ConversationCursor?) -> (String, [DatabaseValue]) {
        var clause = ""
        var args: [DatabaseValue] = []
        if let start {
            clause += " AND (updated_at < ? OR (updated_at = ? AND id > ?))"
            args += [.int(start.updatedAt), .int(start.updatedAt), .text(start.id)]
        }
        if let end {
            clause += " AND (updated_at > ? OR (updated_at = ? AND id <= ?))"
            args += [.int(end.updatedAt), .int(end.updatedAt), .text(end.id)]
        }
        return (clause, args)
    }

    /// One cached page: up to `limit` conversations strictly after `cursor`, most recent activity
    /// first (ties by id), matching `filter`.
    static func page(_ filter: CachedConversationFilter, after cursor: ConversationCursor?, limit: Int, me: String,
                     decoder: WireDecoder, in db: Database) throws -> [Conversation] {
        guard limit > 0 else { return [] }
        let (whereClause, values) = filter.sql()
        let blocked = try blockedByMe(db)
        var bound = cursor
        var out: [Conversation] = []
        // Swift-side checks may reject rows: read in batches until the page is full.
        let batch = max(limit.multipliedReportingOverflow(by: 2).overflow ? Int.max : limit * 2, 32)
        while out.count < limit {
            let (rangeClause, rangeArgs) = range(after: bound, through: nil)
            let stmt = try db.cached("SELECT \(columns) FROM conversations WHERE \(whereClause)\(rangeClause) ORDER BY updated_at DESC, id ASC LIMIT \(batch)")
            try stmt.bind(values + rangeArgs)
            var read = 0
            while try stmt.step() {
                read += 1
                bound = ConversationCursor(updatedAt: stmt.int64(updatedAtAt), id: stmt.text(idAt) ?? "")
                let conversation = try decode(stmt, decoder, me: me, blocked: blocked)
                if filter.admits(conversation, blocked: blocked) {
                    out.append(conversation)
                    if out.count == limit { break }
                }
            }
            stmt.reset()
            if read < batch { break }
        }
        return out
    }

    /// Deletes cached conversations the server's page shows are not (or no longer) in the slice:
    /// every cached conversation strictly after `start` and up to `end` (nil: to the end of the
    /// list) that matches the same filter and is not in the page. Their messages stay.
    static func reconcile(_ filter: CachedConversationFilter, after start: ConversationCursor?, through end: ConversationCursor?,
                          keep: Set<String>, me: String, decoder: WireDecoder, in db: Database) throws {
        let (whereClause, values) = filter.sql()
        let (rangeClause, rangeArgs) = range(after: start, through: end)
        let blocked = try blockedByMe(db)
        let stmt = try db.prepare("SELECT \(columns) FROM conversations WHERE \(whereClause)\(rangeClause)")
        try stmt.bind(values + rangeArgs)
        var gone: [String] = []
        while try stmt.step() {
            guard let id = stmt.text(idAt), !keep.contains(id) else { continue }
            // A row that no longer decodes is stale whatever the filter says.
            if let conversation = try? decode(stmt, decoder, me: me, blocked: blocked), !filter.admits(conversation, blocked: blocked) {
                continue
            }
            gone.append(id)
        }
        for id in gone { try remove(id: id, in: db) }
    }

    /// The cached conversation with this id.
    static func conversation(id: String, me: String, decoder: WireDecoder, in db: Database) throws -> Conversation? {
        let stmt = try db.cached("SELECT \(columns) FROM conversations WHERE id = ? AND payload IS NOT NULL")
        try stmt.bind([.text(id)])
        defer { stmt.reset() }
        guard try stmt.step() else { return nil }
        return try decode(stmt, decoder, me: me, blocked: try blockedByMe(db))
    }
}
