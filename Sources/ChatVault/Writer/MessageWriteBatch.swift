import Foundation
import VaultStore

/// Messages written as a batch inside the writer's transaction (`CacheWriter`): a page of the
/// catch-up log, or a realtime event (a batch of one). The one place where an arriving message is
/// checked against the outbox and the local ids, gets its status and source, and moves its
/// conversation. For a page, less work per message:
///
/// - each statement is looked up once per page, not once per message;
/// - a message row is written with one statement: the cached-row check already says whether it is
///   an UPDATE or an INSERT;
/// - a conversation is read (and decoded) once per page and written (validated, encoded) once, at
///   `flush()`, after every message of the page has moved it in turn through the same rule
///   (`RealtimeRows.touched`) on the fields held here. So its last message, activity and unread
///   counts end as they would after one write per message.
///
/// Message rows are written at once, so a later change of the page (a re-delivery, an edit, a
/// deletion) sees them as the per-message path does. Whatever else reads conversation rows within
/// the page must `flush()` first, and `forget()` what it changes (a removed conversation).
final class MessageWriteBatch {
    private let db: Database
    private let me: String
    private let cachedRow: Statement
    private let update: Statement
    private let insert: Statement

    /// Conversations read or changed by this page: nil fields when not cached; `dirty` when
    /// changed since read (written by `flush`), in the order first changed.
    private var conversations: [ConversationID: (fields: [String: JSONValue]?, dirty: Bool)] = [:]
    private var dirtyOrder: [ConversationID] = []

    private let limits: WireLimits

    init(me: String, limits: WireLimits = WireLimits(), in db: Database) throws {
        self.db = db
        self.me = me
        self.limits = limits
        cachedRow = try db.cached("SELECT source, flags FROM messages WHERE server_id = ?")
        update = try db.cached(MessageRows.updateSQL)
        insert = try db.cached(MessageRows.insertSQL)
    }

    /// A message that arrived (new, or a new rendering of one the cache holds): written, or updated
    /// in place keeping how the cached copy first arrived. `m.messageStatus` is resolved here and
    /// `m.source` set to how the row now stands (`source` when new). A message that is still an
    /// outbox row (an echo of our own send before its acknowledgement) is left to the outbox; a
    /// local id another cached message holds is not taken over.
    /// - Parameter encoded: the payload already encoded (`BinaryJSON.encode(wire)`), when the
    ///   caller has it.
    func received(_ wire: JSONValue, _ m: BaseMessage, source: MessageSource, encoded: [UInt8]? = nil) throws -> RealtimeRows.Written {
        Self.resolveStatus(m, me: me)
        if let local = m.localMessageId {
            // An echo of our own send before its acknowledgement: the outbox writes it.
            if m.senderUid == me, try db.scalarInt("SELECT 1 FROM outbox WHERE local_id = ?", .text(local)) != nil { return .nothing }
            // A local id another cached message holds is not taken over (it is unique).
            if try db.scalarInt("SELECT 1 FROM messages WHERE local_id = ? AND server_id IS NOT ?", .text(local), .int(Int64(m.id))) != nil {
                m.localMessageId = nil
            }
        }
        let existing = try row(m.id)
        m.source = existing?.source ?? source
        if let existing {
            let kept = try MessageRows.keepingProgress(wire, m, me: me, in: db)
            try MessageRows.update(kept ?? wire, m, me: me, source: existing.source, encoded: kept == nil ? encoded : nil, statement: update)
        } else {
            try MessageRows.insert(wire, m, me: me, source: source, encoded: encoded, statement: insert)
        }
        try touch(wire, m, newlyCached: existing == nil, previousFlags: existing?.flags)
        if existing == nil, m.parentMessageId > 0 { try RealtimeRows.countReply(toParent: m.parentMessageId, me: me, limits: limits, in: db) }
        return existing == nil ? .inserted : .updated
    }

    /// A change to a message (an edit, a deletion, a reaction's new counts): the cached copy
    /// replaced, keeping how it first arrived (`m.source` set to that, its status resolved); nil
    /// when the cache does not hold it (inserted alone, an old message would show in a cached
    /// page without its neighbours), else that source.
    func changed(_ wire: JSONValue, _ m: BaseMessage) throws -> MessageSource? {
        Self.resolveStatus(m, me: me)
        guard let existing = try row(m.id) else { return nil }
        m.source = existing.source
        try MessageRows.update(try MessageRows.keepingProgress(wire, m, me: me, in: db) ?? wire, m, me: me, source: existing.source, statement: update)
        try touch(wire, m, newlyCached: false, previousFlags: existing.flags)
        return existing.source
    }

    /// The cached row's source and flags (`RealtimeRows.cachedRow`).
    func row(_ serverId: Int) throws -> RealtimeRows.CachedRow? {
        try cachedRow.bind(.int(Int64(serverId)), at: 1)
        defer { cachedRow.reset() }
        guard try cachedRow.step() else { return nil }
        return RealtimeRows.CachedRow(source: MessageSource(cachedRow, at: 0) ?? .realtime, flags: cachedRow.int64(1))
    }

    private func touch(_ wire: JSONValue, _ m: BaseMessage, newlyCached: Bool, previousFlags: Int64?) throws {
        let id = ConversationID(rawValue: m.conversationId)
        if conversations[id] == nil {
            // Read once per page (nil: not cached, or a payload that no longer decodes).
            conversations[id] = (try RealtimeRows.conversationFields(id.rawValue, in: db), false)
        }
        // In place (the dictionary's modify accessor): the fields are not copied per message.
        guard RealtimeRows.touch(&conversations[id, default: (nil, false)].fields, wire, m, newlyCached: newlyCached,
                                 previousFlags: previousFlags, me: me) else { return }
        if conversations[id]?.dirty == false {
            conversations[id]?.dirty = true
            dirtyOrder.append(id)
        }
    }

    /// Writes every conversation the page changed (decoded as `RealtimeRows.write` does, trusted:
    /// the cached payload and the page's messages, each validated already).
    func flush(limits: WireLimits) throws {
        for id in dirtyOrder {
            guard let entry = conversations[id], entry.dirty, let fields = entry.fields else { continue }
            try RealtimeRows.write(fields, limits: limits, trusted: true, in: db)
            conversations[id] = (fields, false)
        }
        dirtyOrder.removeAll(keepingCapacity: true)
    }

    /// The lifecycle status of a server message as the logged-in user sees it: the one place it is
    /// resolved (every decoded server message passes here before it is stored or delivered).
    static func resolveStatus(_ m: BaseMessage, me: String) {
        m.messageStatus = MessageRows.status(of: m, me: me)
    }

    /// A server copy of a message the app asked for (a read's page or lookup, a thread, a send's
    /// acknowledgement, an edit's answer), stored inside the caller's transaction: inserted or
    /// updated by server id under `source`, receipt progress kept. It moves no conversation (the
    /// server's conversation rendering does that). Publish it with `CacheWriter.stored` after the
    /// commit.
    static func storeServerCopy(_ wire: JSONValue, _ m: BaseMessage, me: String, source: MessageSource, in db: Database) throws {
        try MessageRows.upsert(wire, m, me: me, source: source, in: db)
    }

    /// Drops what is held (after something else changed conversation rows): read again when needed.
    func forget() {
        conversations.removeAll(keepingCapacity: true)
        dirtyOrder.removeAll(keepingCapacity: true)
    }
}
