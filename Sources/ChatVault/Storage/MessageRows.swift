import Foundation
package import VaultStore

/// Bits of `messages.flags`, computed when a message is written, so the cache can answer the
/// boolean filters in SQL.
enum MessageFlags {
    static let hasAttachments: Int64 = 1
    static let mentionsMe: Int64 = 2
    static let hasMentions: Int64 = 4
    static let hasReactions: Int64 = 8
    static let unread: Int64 = 16
    static let pinned: Int64 = 32
    static let saved: Int64 = 64
    static let deleted: Int64 = 128

    static func of(_ m: BaseMessage, me: String) -> Int64 {
        var flags: Int64 = 0
        if let media = m as? MediaMessage, !media.attachments.isEmpty { flags |= hasAttachments }
        if m.mentionedMe { flags |= mentionsMe }
        if !m.mentionedUsers.isEmpty { flags |= hasMentions }
        if !m.reactions.isEmpty { flags |= hasReactions }
        if m.readByMeAt == 0 && m.senderUid != me { flags |= unread }
        if m.pinnedAt > 0 { flags |= pinned }
        if m.savedAt > 0 { flags |= saved }
        if m.deletedAt > 0 { flags |= deleted }
        return flags
    }
}

/// The cached form of a `MessageQuery`: the part SQL answers, and the part Swift checks on the
/// decoded message. Built only when every active filter is locally computable.
struct CachedMessageFilter: Sendable {
    var conversationId: String?
    var parentId: Int?
    var hideReplies = false
    var categories: [String] = []
    var types: [String] = []
    var requiredFlags: Int64 = 0
    var excludedFlags: Int64 = 0
    var tags: Set<String> = []
    var mentionedUIDs: Set<String> = []
    var attachmentTypes: Set<String> = []
    var hideMessagesFromBlockedUsers = false

    var needsSwiftCheck: Bool {
        !tags.isEmpty || !mentionedUIDs.isEmpty || !attachmentTypes.isEmpty || hideMessagesFromBlockedUsers
    }

    /// The cached filter for a query, or nil when a server-only predicate is active (then the
    /// cached page is empty).
    init?(_ q: MessageQuery, me: String) {
        if q.searchKeyword.map({ !$0.isEmpty }) == true || q.hasLinks || q.updatesOnly || q.updatedAfter != nil
            || q.interactionGoalCompletedOnly { return nil }
        if case .group = q.scope, q.senderUid != nil { return nil }
        conversationId = q.scope.map { MessageRows.conversationId(for: $0, me: me) }
        parentId = q.parentMessageId
        hideReplies = q.hideReplies
        categories = q.categories
        types = q.types
        if q.unread { requiredFlags |= MessageFlags.unread }
        if q.hasMentions { requiredFlags |= MessageFlags.hasMentions }
        if q.myMentionsOnly { requiredFlags |= MessageFlags.mentionsMe }
        if q.hasAttachments { requiredFlags |= MessageFlags.hasAttachments }
        if q.hasReactions { requiredFlags |= MessageFlags.hasReactions }
        if q.pinned { requiredFlags |= MessageFlags.pinned }
        if q.saved { requiredFlags |= MessageFlags.saved }
        if q.hideDeleted { excludedFlags |= MessageFlags.deleted }
        tags = Set(q.tags)
        mentionedUIDs = Set(q.mentionedUIDs)
        attachmentTypes = Set(q.attachmentTypes.map(\.rawValue))
        hideMessagesFromBlockedUsers = q.hideMessagesFromBlockedUsers
    }

    /// The WHERE clause (without the cursor) and its values.
    func sql() -> (String, [DatabaseValue]) {
        var clauses = ["server_id IS NOT NULL"]
        var values: [DatabaseValue] = []
        if let conversationId {
            clauses.append("conversation_id = ?")
            values.append(.text(conversationId))
        }
        if let parentId {
            clauses.append("parent_id = ?")
            values.append(.int(Int64(parentId)))
        } else if hideReplies {
            clauses.append("parent_id = 0")
        }
        if !categories.isEmpty {
            clauses.append("category IN (\(Array(repeating: "?", count: categories.count).joined(separator: ",")))")
            values += categories.map { .text($0) }
        }
        if !types.isEmpty {
            clauses.append("type IN (\(Array(repeating: "?", count: types.count).joined(separator: ",")))")
            values += types.map { .text($0) }
        }
        if requiredFlags != 0 {
            clauses.append("(flags & ?) = ?")
            values += [.int(requiredFlags), .int(requiredFlags)]
        }
        if excludedFlags != 0 {
            clauses.append("(flags & ?) = 0")
            values.append(.int(excludedFlags))
        }
        return (clauses.joined(separator: " AND "), values)
    }

    /// The checks SQL cannot make, on the decoded message.
    func admits(_ m: BaseMessage, blocked: Set<String>) -> Bool {
        if !tags.isEmpty, Set(m.tags ?? []).isDisjoint(with: tags) { return false }
        if !mentionedUIDs.isEmpty, Set(m.mentionedUsers.map(\.uid)).isDisjoint(with: mentionedUIDs) { return false }
        if !attachmentTypes.isEmpty {
            guard m is MediaMessage, attachmentTypes.contains(m.messageType.rawValue) else { return false }
        }
        if hideMessagesFromBlockedUsers, blocked.contains(m.senderUid) { return false }
        return true
    }
}

/// Rows of the `messages` table. Package-visible for the package's tools (see `cachedPage` and
/// `writeThrough`); everything else in it is internal.
package enum MessageRows {
    /// The SDK's conversation id (`ConversationID`) of `scope`, for `me`.
    static func conversationId(for scope: MessageScope, me: String) -> String {
        ConversationID(scope, me: me).rawValue
    }

    /// The lifecycle status of a server message as the logged-in user sees it.
    static func status(of m: BaseMessage, me: String) -> MessageStatus {
        guard m.senderUid == me else { return .sent }
        if m.readAt > 0 { return .read }
        if m.deliveredAt > 0 { return .delivered }
        return .sent
    }

    /// Inserts or updates a server message (by server id), keeping its local id when it has one.
    static func upsert(_ wire: JSONValue, _ m: BaseMessage, me: String, source: MessageSource, in db: Database) throws {
        let wire = try keepingProgress(wire, m, me: me, in: db) ?? wire
        let row = MessageRow(wire, m, me: me, source: source)
        let update = try db.cached(updateSQL)
        try row.bindUpdate(to: update)
        while try update.step() {}
        if db.changes > 0 { return }
        let insert = try db.cached(insertSQL)
        try row.bindInsert(to: insert)
        while try insert.step() {}
    }

    /// The receipt times that never go back: a message's delivery and read by its other side,
    /// and by the user's own devices.
    static let progressFields = ["deliveredAt", "readAt", "deliveredToMeAt", "readByMeAt"]

    /// `wire` with the receipt times of the cached copy of `m` where they are later (and `m`
    /// updated to match, its status too), or nil when the cache holds no later ones. A rendering
    /// of the same message that lacks a receipt (a backend that cannot tell, such as a Matrix page)
    /// never takes a delivered or read message back to sent.
    static func keepingProgress(_ wire: JSONValue, _ m: BaseMessage, me: String, in db: Database) throws -> JSONValue? {
        guard case .object(var fields) = wire else { return nil }
        let stmt = try db.cached("SELECT payload FROM messages WHERE server_id = ?")
        try stmt.bind([.int(Int64(m.id))])
        let cached: JSONValue? = try {
            defer { stmt.reset() }
            guard try stmt.step(), let bytes = stmt.blob(0) else { return nil }
            return try? BinaryJSON.decode(bytes)
        }()
        guard let cached else { return nil }
        var changed = false
        for key in progressFields {
            guard let old = cached[key]?.doubleValue, old > 0, old.isFinite, old > (fields[key]?.doubleValue ?? 0) else { continue }
            fields[key] = .double(old)
            changed = true
            switch key {
            case "deliveredAt": m.deliveredAt = old
            case "readAt": m.readAt = old
            case "deliveredToMeAt": m.deliveredToMeAt = old
            default: m.readByMeAt = old
            }
        }
        guard changed else { return nil }
        if [.sent, .delivered, .read].contains(m.messageStatus) { m.messageStatus = status(of: m, me: me) }
        return .object(fields)
    }

    /// Rewrites the cached row of a server message (its local id kept), with `updateSQL`
    /// prepared by the caller (a batch reuses one statement).
    /// - Parameter encoded: `BinaryJSON.encode(wire)` when the caller has it already (the catch-up
    ///   sync encodes a page's payloads before its transaction, off the writer).
    static func update(_ wire: JSONValue, _ m: BaseMessage, me: String, source: MessageSource, encoded: [UInt8]? = nil,
                       statement update: Statement) throws {
        try MessageRow(wire, m, me: me, source: source, encoded: encoded).bindUpdate(to: update)
        while try update.step() {}
    }

    /// Writes a server message the cache does not hold, with `insertSQL` prepared by the caller.
    static func insert(_ wire: JSONValue, _ m: BaseMessage, me: String, source: MessageSource, encoded: [UInt8]? = nil,
                       statement insert: Statement) throws {
        try MessageRow(wire, m, me: me, source: source, encoded: encoded).bindInsert(to: insert)
        while try insert.step() {}
    }

    /// Parameter n is `MessageRow.updated[n - 1]`.
    static let updateSQL = MessageRow.updateSQL

    /// Parameter n is `MessageRow.inserted[n - 1]` (the cluster key last: `MessageClusters`).
    static let insertSQL = MessageRow.insertSQL

    /// What a cached read selects (`MessageRow.read`), in that order.
    static let columns = MessageRow.read.map(\.rawValue).joined(separator: ", ")

    /// Decodes a row selected with `columns`.
    static func decode(_ stmt: Statement, _ decoder: WireDecoder) throws -> BaseMessage {
        guard let bytes = stmt.blob(MessageRow.at.payload), let object = try BinaryObject(payload: bytes) else { throw BinaryJSON.Malformed() }
        let message = try decoder.message(stored: object)
        message.messageStatus = MessageStatus(stmt, at: MessageRow.at.status) ?? .sent
        message.source = MessageSource(stmt, at: MessageRow.at.source) ?? .realtime
        if let local = stmt.text(MessageRow.at.localId) { message.localMessageId = local }
        return message
    }

    /// The blocked users' uids (for "hide messages from blocked users").
    static func blockedUids(_ db: Database) throws -> Set<String> {
        Set(try db.texts("SELECT uid FROM blocked_users"))
    }

    /// One cached page: up to `limit` messages strictly beyond `cursor` in `direction`, in
    /// ascending time order, matching `filter`.
    static func page(_ filter: CachedMessageFilter, direction: PageDirection, cursor: MessageCursor?, limit: Int,
                     decoder: WireDecoder, in db: Database) throws -> [BaseMessage] {
        guard limit > 0 else { return [] }
        let (whereClause, values) = filter.sql()
        let blocked = filter.hideMessagesFromBlockedUsers ? try blockedUids(db) : []
        let older = direction == .previous
        let order = older ? "DESC" : "ASC"
        var bound = cursor
        var out: [BaseMessage] = []
        // Swift-side filters may reject rows: read in batches until the page is full.
        let batch = filter.needsSwiftCheck ? max(limit.multipliedReportingOverflow(by: 4).overflow ? Int.max : limit * 4, 64) : limit
        while out.count < limit {
            var clauses = whereClause
            var args = values
            if let bound {
                clauses += older ? " AND (sent_at < ? OR (sent_at = ? AND server_id < ?))" : " AND (sent_at > ? OR (sent_at = ? AND server_id > ?))"
                args += [.int(Int64(bound.sentAt)), .int(Int64(bound.sentAt)), .int(Int64(bound.id))]
            }
            let stmt = try db.cached("SELECT \(columns) FROM messages WHERE \(clauses) ORDER BY sent_at \(order), server_id \(order) LIMIT \(batch)")
            try stmt.bind(args)
            var read = 0
            while try stmt.step() {
                read += 1
                bound = MessageCursor(sentAt: stmt.int(MessageRow.at.sentAt), id: stmt.int(MessageRow.at.serverId))
                let message = try decode(stmt, decoder)
                if !filter.needsSwiftCheck || filter.admits(message, blocked: blocked) {
                    out.append(message)
                    if out.count == limit { break }
                }
            }
            stmt.reset()
            if read < batch { break }
        }
        return older ? out.reversed() : out
    }

    /// Deletes cached messages the server's page shows no longer exist: within the slice the page
    /// covers (from the request's cursor to the page's far end, or to the end of history when the
    /// page was short), every cached message that matches the same filter and is not in the page.
    /// Returns the ids removed.
    static func reconcile(_ filter: CachedMessageFilter, direction: PageDirection, cursor: MessageCursor?, limit: Int,
                          server: [BaseMessage], decoder: WireDecoder, in db: Database) throws -> [MessageID] {
        let keep = Set(server.map(\.id))
        let full = server.count >= limit
        let older = direction == .previous
        var clauses = filter.sql().0
        var args = filter.sql().1
        if let cursor {
            clauses += older ? " AND (sent_at < ? OR (sent_at = ? AND server_id < ?))" : " AND (sent_at > ? OR (sent_at = ? AND server_id > ?))"
            args += [.int(Int64(cursor.sentAt)), .int(Int64(cursor.sentAt)), .int(Int64(cursor.id))]
        }
        if full, let edge = older ? server.min(by: { ($0.sentAt, $0.id) < ($1.sentAt, $1.id) }) : server.max(by: { ($0.sentAt, $0.id) < ($1.sentAt, $1.id) }) {
            clauses += older ? " AND (sent_at > ? OR (sent_at = ? AND server_id >= ?))" : " AND (sent_at < ? OR (sent_at = ? AND server_id <= ?))"
            args += [.int(Int64(edge.sentAt)), .int(Int64(edge.sentAt)), .int(Int64(edge.id))]
        }
        let blocked = filter.hideMessagesFromBlockedUsers ? try blockedUids(db) : []
        let stmt = try db.prepare("SELECT \(columns) FROM messages WHERE \(clauses)")
        try stmt.bind(args)
        var gone: [Int64] = []
        while try stmt.step() {
            let id = stmt.int(MessageRow.at.serverId)
            guard !keep.contains(id) else { continue }
            if filter.needsSwiftCheck, let message = try? decode(stmt, decoder), !filter.admits(message, blocked: blocked) { continue }
            gone.append(Int64(id))
        }
        for id in gone { try db.run("DELETE FROM messages WHERE server_id = ?", .int(id)) }
        return gone.map { MessageID(Int(truncatingIfNeeded: $0)) }
    }

    /// The cached message with this server id.
    static func message(id: Int, decoder: WireDecoder, in db: Database) throws -> BaseMessage? {
        let stmt = try db.cached("SELECT \(columns) FROM messages WHERE server_id = ?")
        try stmt.bind([.int(Int64(id))])
        defer { stmt.reset() }
        return try stmt.step() ? try decode(stmt, decoder) : nil
    }

    /// The sent time of a cached message (a starting point for `set(messageID:)`).
    static func sentAt(ofMessage id: Int, in db: Database) throws -> Int? {
        try db.scalarInt("SELECT sent_at FROM messages WHERE server_id = ?", .int(Int64(id))).map(Int.init)
    }

    /// Records that a conversation was opened now (for `cacheDurationDays`).
    static func markOpened(_ conversationId: String, at time: Date, in db: Database) throws {
        try db.run("INSERT OR REPLACE INTO conversation_opened (conversation_id, opened_at) VALUES (?, ?)",
                   .text(conversationId), .int(Int64(time.timeIntervalSince1970)))
    }
}

// MARK: - The cached phase, and writes for the package's tools

extension MessageRows {
    /// Where a page starts in the cache: after the cursor, or at the message or time the request
    /// was built with. Nil when that message is not cached (the cache cannot place it).
    struct Start {
        var cursor: MessageCursor?
    }

    static func startCursor(_ q: MessageQuery, direction: PageDirection, in db: Database) throws -> Start? {
        if let cursor = q.cursor { return Start(cursor: cursor) }
        if let id = q.messageId {
            guard let sentAt = try sentAt(ofMessage: id, in: db) else { return nil }
            return Start(cursor: MessageCursor(sentAt: sentAt, id: id))
        }
        if let timestamp = q.timestamp {
            // Before every message of that second: `.previous` reads strictly earlier seconds,
            // `.next` reads that second on, as the server does.
            return Start(cursor: MessageCursor(sentAt: timestamp, id: Int.min))
        }
        return Start(cursor: nil)
    }

    /// The cached phase of a `MessagesRequest` fetch: the page `fetchPrevious` / `fetchNext`
    /// deliver from the cache for `query` before asking the server; empty when a server-only
    /// predicate is active or the message the request starts at is not cached.
    static func cachedPage(_ query: MessageQuery, direction: PageDirection, me: String, decoder: WireDecoder,
                           in db: Database) throws -> [BaseMessage] {
        guard let filter = CachedMessageFilter(query, me: me),
              let start = try startCursor(query, direction: direction, in: db) else { return [] }
        return try page(filter, direction: direction, cursor: start.cursor, limit: query.limit, decoder: decoder, in: db)
    }

    /// The same cached phase with the trusted decoder a request uses, for the package's tools
    /// (`chatvault bench reads` times it).
    package static func cachedPage(_ query: MessageQuery, direction: PageDirection, me: String, limits: WireLimits,
                                   in db: Database) throws -> [BaseMessage] {
        try cachedPage(query, direction: direction, me: me, decoder: WireDecoder(limits: limits, trusted: true), in: db)
    }

    /// Validates server messages and writes them through, as a read's server phase does before
    /// delivering them (without reconciling a slice), for the package's tools that build caches
    /// (`chatvault bench reads`). Call it inside a transaction: a message that fails validation
    /// throws, and the transaction then leaves the cache as it was.
    package static func writeThrough(_ wire: [JSONValue], me: String, limits: WireLimits, in db: Database) throws {
        let decoder = WireDecoder(limits: limits)
        for value in wire {
            try upsert(value, try decoder.message(value), me: me, source: .realtime, in: db)
        }
    }
}
