import Foundation
import VaultStore

/// What a validated realtime event does to the cache, inside the caller's transaction.
///
/// - A received message is written (`source == .realtime`) or, when the cache already has its
///   server id (a read's server phase, or an echo), updated in place; only a message new to the
///   cache, and newer than the conversation's cached last message (a summary the server wrote
///   later already counts it), moves the unread count. A message that is still an outbox row (an echo
///   of our own send before its acknowledgement) is left to the outbox, which writes it on the
///   acknowledgement; a local id that another cached message holds is not taken over.
/// - An edit, a deletion or a reaction's message replaces the cached copy only when the cache
///   holds it (inserted alone, an old message would show in a cached page without its
///   neighbours), keeping how the copy first arrived.
/// - The conversation: its last message (the newest top-level message that updates it), its
///   activity, its unread count; a conversation not yet cached is created from what the message
///   says (its other side as the message names it).
/// - Receipts: the logged-in user's own read receipt (from another device) marks the cached
///   messages from others up to that message read and lowers the unread count; someone else's
///   receipt in a one-to-one conversation marks the user's own messages delivered or read. Group
///   receipts are per member and change no cached row (listeners hear them).
enum RealtimeRows {
    /// - Parameter source: how a message new to the cache arrived (`.realtime` here; the catch-up
    ///   sync can reuse this path with `.sync`).
    /// What `apply` did to the message rows.
    enum Written: Sendable, Equatable {
        /// Nothing (an echo the outbox owns, a change to a message the cache does not hold, a receipt).
        case nothing
        /// A message new to the cache was written.
        case inserted
        /// A cached message was rewritten in place (keeping how it first arrived).
        case updated
    }

    @discardableResult
    static func apply(_ parsed: RealtimeWire.Parsed, me: String, limits: WireLimits, source: MessageSource = .realtime,
                      in db: Database) throws -> Written {
        // A batch of one: the same checks, status, source and conversation rules as a sync page.
        let batch = try MessageWriteBatch(me: me, limits: limits, in: db)
        switch parsed {
        case .received(let wire, let m):
            let written = try batch.received(wire, m, source: source)
            try batch.flush(limits: limits)
            return written
        case .edited(let wire, let m), .deleted(let wire, let m):
            let written: Written = try batch.changed(wire, m) == nil ? .nothing : .updated
            try batch.flush(limits: limits)
            return written
        case .reaction(_, let event, let wire):
            guard let wire, let m = event.message else { return .nothing }
            let written: Written = try batch.changed(wire, m) == nil ? .nothing : .updated
            try batch.flush(limits: limits)
            return written
        case .receipt(let receipt):
            try applyReceipt(receipt, me: me, limits: limits, in: db)
            return .nothing
        }
    }

    /// A reply new to the cache counts on its cached parent (`replyCount` + 1), until the server's
    /// own rendering of the parent (a read, or the catch-up log's upsert of it) replaces the count.
    /// The parent's copy as a conversation's last message keeps its count until then.
    static func countReply(toParent parentId: Int, me: String, limits: WireLimits, in db: Database) throws {
        let stmt = try db.cached("SELECT payload FROM messages WHERE server_id = ?")
        try stmt.bind([.int(Int64(parentId))])
        let payload: JSONValue? = try {
            defer { stmt.reset() }
            guard try stmt.step(), let bytes = stmt.blob(0) else { return nil }
            return try? BinaryJSON.decode(bytes)
        }()
        guard case .object(var fields)? = payload else { return }
        let count = fields["replyCount"]?.intValue ?? 0
        guard count >= 0, count < WireLimits.maxWireNumber else { return }
        fields["replyCount"] = .int(count + 1)
        let wire = JSONValue.object(fields)
        guard (try? WireDecoder(limits: limits, trusted: true).message(wire)) != nil else { return }
        // Only the payload: a reply count moves no column (status, flags and times come from fields
        // it leaves alone), and an UPDATE naming every column rewrites every index's entry, each
        // page of which the search index's trigger makes the statement journal (and encrypt).
        try db.run("UPDATE messages SET payload = ? WHERE server_id = ?", .blob(BinaryJSON.encode(wire)), .int(Int64(parentId)))
    }

    struct CachedRow {
        var source: MessageSource
        var flags: Int64
    }

    static func cachedRow(_ serverId: Int, in db: Database) throws -> CachedRow? {
        let stmt = try db.cached("SELECT source, flags FROM messages WHERE server_id = ?")
        try stmt.bind([.int(Int64(serverId))])
        defer { stmt.reset() }
        guard try stmt.step() else { return nil }
        return CachedRow(source: MessageSource(stmt, at: 0) ?? .realtime, flags: stmt.int64(1))
    }

    /// Whether a message becomes its conversation's last message (as the server lists it).
    static func updatesConversation(_ m: BaseMessage) -> Bool {
        guard m.parentMessageId == 0 else { return false }
        if let custom = m as? CustomMessage, !custom.updateConversation { return false }
        return true
    }

    /// Counts toward the conversation's unread count (the server's rule): top-level, from someone
    /// else, not read by the user, not deleted.
    static func countsAsUnread(_ m: BaseMessage, me: String) -> Bool {
        m.parentMessageId == 0 && m.senderUid != me && m.readByMeAt == 0 && m.deletedAt == 0
    }

    /// Updates (or creates) the conversation of a message the cache just wrote.
    static func touchConversation(_ wire: JSONValue, _ m: BaseMessage, newlyCached: Bool, previousFlags: Int64?, me: String,
                                  limits: WireLimits, in db: Database) throws {
        guard let fields = touched(try conversationFields(m.conversationId, in: db), wire, m, newlyCached: newlyCached,
                                   previousFlags: previousFlags, me: me) else { return }
        try write(fields, limits: limits, in: db)
    }

    /// What a message the cache just wrote does to its conversation's payload fields (`cached`:
    /// nil when the conversation is not cached): the new fields, or nil when nothing changes (the
    /// conversation is then not written).
    static func touched(_ cached: [String: JSONValue]?, _ wire: JSONValue, _ m: BaseMessage, newlyCached: Bool,
                        previousFlags: Int64?, me: String) -> [String: JSONValue]? {
        var fields = cached
        return touch(&fields, wire, m, newlyCached: newlyCached, previousFlags: previousFlags, me: me) ? fields : nil
    }

    /// `touched` in place, for the catch-up sync, which moves the fields it holds for a page
    /// (`SyncPageBatch`) through the page's messages in turn and then writes each conversation
    /// once. True when the fields changed; `conversation` (nil: not cached) is left as it was
    /// otherwise.
    static func touch(_ conversation: inout [String: JSONValue]?, _ wire: JSONValue, _ m: BaseMessage, newlyCached: Bool,
                      previousFlags: Int64?, me: String) -> Bool {
        guard var fields = conversation else {
            // Not cached: created from what a new message says; nothing else creates one.
            guard newlyCached, updatesConversation(m) else { return false }
            var created = newConversation(wire, m, me: me)
            guard move(&created, wire, m, newlyCached: newlyCached, previousFlags: previousFlags, me: me) else { return false }
            conversation = created
            return true
        }
        // Out of the optional while it changes, so the dictionary is not copied.
        conversation = nil
        let changed = move(&fields, wire, m, newlyCached: newlyCached, previousFlags: previousFlags, me: me)
        conversation = fields
        return changed
    }

    /// The rule itself: a message's effect on its (cached or just created) conversation's fields.
    private static func move(_ fields: inout [String: JSONValue], _ wire: JSONValue, _ m: BaseMessage, newlyCached: Bool,
                             previousFlags: Int64?, me: String) -> Bool {
        var changed = false
        let last = fields["lastMessage"]
        let lastId = last?["id"]?.intValue ?? 0
        let lastSentAt = last?["sentAt"]?.intValue ?? 0
        // A conversation summary the server wrote after this message (its last message is this one
        // or a newer one) already counts it as unread: a read's server phase may race the event.
        let newerThanSummary = (Int64(m.sentAt), Int64(m.id)) > (lastSentAt, lastId)
        if updatesConversation(m) {
            if lastId == Int64(m.id) || newerThanSummary {
                fields["lastMessage"] = wire
                changed = true
            }
            if Double(m.sentAt) > (fields["updatedAt"]?.doubleValue ?? 0) && lastId != Int64(m.id) {
                fields["updatedAt"] = .int(Int64(m.sentAt))
                changed = true
            }
        } else if fields["lastMessage"]?["id"]?.intValue == Int64(m.id) {
            fields["lastMessage"] = wire
            changed = true
        }
        let unread = fields["unreadMessageCount"]?.intValue ?? 0
        var newUnread = unread
        if newlyCached {
            if countsAsUnread(m, me: me) && newerThanSummary { newUnread += 1 }
        } else if let previousFlags, previousFlags & MessageFlags.unread != 0, previousFlags & MessageFlags.deleted == 0,
                  m.parentMessageId == 0, m.senderUid != me, !countsAsUnread(m, me: me) {
            // Was unread, now deleted (or read): one fewer.
            newUnread = max(unread - 1, 0)
        }
        if newUnread != unread {
            fields["unreadMessageCount"] = .int(newUnread)
            if newUnread > unread && m.mentionedMe {
                fields["unreadMentionsCount"] = .int((fields["unreadMentionsCount"]?.intValue ?? 0) + 1)
            }
            changed = true
        }
        return changed
    }

    /// A conversation as a message describes it: the other side is the message's sender (its
    /// receiver for the user's own messages), or the group.
    static func newConversation(_ wire: JSONValue, _ m: BaseMessage, me: String) -> [String: JSONValue] {
        let with: JSONValue
        switch m.receiverType {
        case .group:
            if let receiver = wire["receiver"], receiver["guid"] != nil { with = receiver } else { with = ["guid": .string(m.receiverUid)] }
        case .user:
            if m.senderUid == me {
                if let receiver = wire["receiver"], receiver["uid"] != nil { with = receiver } else { with = ["uid": .string(m.receiverUid)] }
            } else if let sender = wire["sender"], sender["uid"] != nil {
                with = sender
            } else {
                with = ["uid": .string(m.senderUid)]
            }
        }
        return [
            "conversationId": .string(m.conversationId),
            "conversationType": .string(m.receiverType.rawValue),
            "conversationWith": with,
            "unreadMessageCount": 0,
            "updatedAt": .int(Int64(m.sentAt)),
        ]
    }

    /// Validates a conversation built from cached and event fields, and writes it.
    /// - Parameter trusted: the fields are a cached payload moved only by messages validated
    ///   already (the catch-up batch): decoded as cached rows are, without measuring the whole
    ///   payload again (it is bounded by what it was built from: the cached conversation and one
    ///   validated message).
    static func write(_ fields: [String: JSONValue], limits: WireLimits, trusted: Bool = false, in db: Database) throws {
        let wire = JSONValue.object(fields)
        let conversation = try WireDecoder(limits: limits, trusted: trusted).conversation(wire)
        try ConversationRows.upsert(wire, conversation, in: db)
    }

    // MARK: - Receipts

    static func applyReceipt(_ receipt: MessageReceipt, me: String, limits: WireLimits, in db: Database) throws {
        let at = receipt.receiptType == .read ? receipt.readAt : receipt.deliveredAt
        let time: JSONValue = .double(at > 0 ? at : receipt.timestamp)
        if receipt.sender.uid == me {
            // The user's own receipt, from another device.
            guard receipt.receiptType == .read else { return }
            let rows = try select("""
                SELECT payload, source FROM messages WHERE conversation_id = ? AND server_id IS NOT NULL AND server_id <= ?
                    AND sender_id <> ? AND (flags & \(MessageFlags.unread)) <> 0
                """, [.text(receipt.conversationId), .int(Int64(receipt.messageId)), .text(me)], in: db)
            let read = try rewrite(rows, me: me, limits: limits, in: db) { fields in
                fields["readByMeAt"] = time
                if fields["deliveredToMeAt"]?.doubleValue ?? 0 == 0 { fields["deliveredToMeAt"] = time }
            }
            let nowRead = read.filter { $0.parentMessageId == 0 && $0.deletedAt == 0 }.count
            guard var fields = try conversationFields(receipt.conversationId, in: db) else { return }
            let unread = fields["unreadMessageCount"]?.intValue ?? 0
            let lastId = fields["lastMessage"]?["id"]?.intValue ?? 0
            let newUnread = receipt.messageId >= lastId ? 0 : max(unread - Int64(nowRead), 0)
            guard newUnread != unread else { return }
            fields["unreadMessageCount"] = .int(newUnread)
            fields["unreadMentionsCount"] = newUnread == 0 ? 0 : fields["unreadMentionsCount"]
            try write(fields, limits: limits, in: db)
            return
        }
        // Someone else received or read the user's messages (one-to-one conversations only).
        guard receipt.receiverType == .user else { return }
        let target = (receipt.receiptType == .read ? MessageStatus.read : .delivered).storedCode
        let rows = try select("""
            SELECT payload, source FROM messages WHERE conversation_id = ? AND server_id IS NOT NULL AND server_id <= ?
                AND sender_id = ? AND status < ?
            """, [.text(receipt.conversationId), .int(Int64(receipt.messageId)), .text(me), .int(target)], in: db)
        _ = try rewrite(rows, me: me, limits: limits, in: db) { fields in
            if receipt.receiptType == .read { fields["readAt"] = time }
            if fields["deliveredAt"]?.doubleValue ?? 0 == 0 { fields["deliveredAt"] = time }
        }
    }

    /// Rewrites cached messages (`rows` as `select` reads them) with `change` applied to their
    /// payload fields, keeping each one's source, and their conversation's last message with them.
    /// Returns the rewritten messages.
    private static func rewrite(_ rows: [(JSONValue, MessageSource)], me: String, limits: WireLimits, in db: Database,
                                _ change: (inout [String: JSONValue]) -> Void) throws -> [BaseMessage] {
        let trusted = WireDecoder(limits: limits, trusted: true)
        var rewritten: [BaseMessage] = []
        for (payload, source) in rows {
            guard case .object(var fields) = payload else { continue }
            change(&fields)
            let wire = JSONValue.object(fields)
            let m = try trusted.message(wire)
            try MessageRows.upsert(wire, m, me: me, source: source, in: db)
            try refreshLastMessage(wire, m, limits: limits, in: db)
            rewritten.append(m)
        }
        return rewritten
    }

    private static func select(_ sql: String, _ values: [DatabaseValue], in db: Database) throws -> [(JSONValue, MessageSource)] {
        let stmt = try db.prepare(sql)
        try stmt.bind(values)
        var out: [(JSONValue, MessageSource)] = []
        while try stmt.step() {
            guard let bytes = stmt.blob(0), let payload = try? BinaryJSON.decode(bytes) else { continue }
            out.append((payload, MessageSource(stmt, at: 1) ?? .realtime))
        }
        return out
    }

    /// The cached conversation's payload fields; nil when it is not cached (or does not decode).
    static func conversationFields(_ id: String, in db: Database) throws -> [String: JSONValue]? {
        let stmt = try db.cached("SELECT payload FROM conversations WHERE id = ? AND payload IS NOT NULL")
        try stmt.bind([.text(id)])
        defer { stmt.reset() }
        guard try stmt.step(), let bytes = stmt.blob(0), let stored = try? BinaryJSON.decode(bytes),
              case .object(let fields) = stored else { return nil }
        return fields
    }

    /// A changed message that is its conversation's last message is changed there too.
    private static func refreshLastMessage(_ wire: JSONValue, _ m: BaseMessage, limits: WireLimits, in db: Database) throws {
        guard var fields = try conversationFields(m.conversationId, in: db),
              fields["lastMessage"]?["id"]?.intValue == Int64(m.id) else { return }
        fields["lastMessage"] = wire
        try write(fields, limits: limits, in: db)
    }
}
