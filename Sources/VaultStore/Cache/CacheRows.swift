import Foundation

/// Row-level access to the schema for seeding, audits and counts. Chat semantics (models,
/// requests, the outbox lifecycle) live in the engine above; this only reads and writes rows.
package enum CacheRows {
    /// A conversation row.
    package struct Conversation: Sendable {
        package var id: String
        package var type: String
        package var peerId: String
        package var lastMessageAt: Int64

        package init(id: String, type: String, peerId: String, lastMessageAt: Int64) {
            self.id = id
            self.type = type
            self.peerId = peerId
            self.lastMessageAt = lastMessageAt
        }
    }

    /// A message row.
    package struct Message: Sendable {
        package var serverId: Int64?
        package var localId: String?
        package var conversationId: String
        package var senderId: String
        package var receiverId: String
        package var receiverType: String
        package var category: String
        package var type: String
        package var sentAt: Int64
        package var body: String?
        /// The engine's encoded message (nil: a row the engine's reads cannot decode).
        package var payload: [UInt8]?

        package init(serverId: Int64?, localId: String?, conversationId: String, senderId: String, receiverId: String,
                    receiverType: String, category: String = "message", type: String = "text", sentAt: Int64, body: String?,
                    payload: [UInt8]? = nil) {
            self.payload = payload
            self.serverId = serverId
            self.localId = localId
            self.conversationId = conversationId
            self.senderId = senderId
            self.receiverId = receiverId
            self.receiverType = receiverType
            self.category = category
            self.type = type
            self.sentAt = sentAt
            self.body = body
        }
    }

    /// An outbox row (an unsent message).
    package struct OutboxEntry: Sendable {
        package var localId: String
        package var seq: Int64
        package var conversationId: String
        package var kind: String
        package var state: Int
        package var createdAt: Int64
        package var payload: [UInt8]

        package init(localId: String, seq: Int64, conversationId: String, kind: String, state: Int, createdAt: Int64, payload: [UInt8]) {
            self.localId = localId
            self.seq = seq
            self.conversationId = conversationId
            self.kind = kind
            self.state = state
            self.createdAt = createdAt
            self.payload = payload
        }
    }

    /// Row counts of the chat tables.
    package struct Counts: Sendable, Equatable {
        package var conversations: Int
        package var messages: Int
        package var pending: Int

        package init(conversations: Int, messages: Int, pending: Int) {
            self.conversations = conversations
            self.messages = messages
            self.pending = pending
        }
    }

    package static func insert(_ conversations: [Conversation], into db: Database) throws {
        for c in conversations {
            try db.run("UPDATE conversations SET type = ?, peer_id = ?, last_message_at = max(last_message_at, ?) WHERE id = ?",
                       .text(c.type), .text(c.peerId), .int(c.lastMessageAt), .text(c.id))
            if db.changes == 0 {
                try db.run("INSERT INTO conversations (id, type, peer_id, last_message_at) VALUES (?, ?, ?, ?)",
                           .text(c.id), .text(c.type), .text(c.peerId), .int(c.lastMessageAt))
            }
        }
    }

    private static let messageInsertSQL = MessageClusters.insertSQL(columns: [
        "server_id", "local_id", "conversation_id", "sender_id", "receiver_id", "receiver_type", "category", "type", "sent_at", "body", "payload",
    ])

    package static func insert(_ messages: [Message], into db: Database) throws {
        for m in messages {
            try db.run(messageInsertSQL,
                m.serverId.map { .int($0) } ?? .null, m.localId.map { .text($0) } ?? .null, .text(m.conversationId),
                .text(m.senderId), .text(m.receiverId), .text(m.receiverType), .text(m.category), .text(m.type),
                .int(m.sentAt), m.body.map { .text($0) } ?? .null, m.payload.map { .blob($0) } ?? .null,
                .int(MessageClusters.base(of: m.conversationId)))
        }
    }

    package static func insert(_ entries: [OutboxEntry], into db: Database) throws {
        for e in entries {
            try db.run("""
                INSERT INTO outbox (local_id, seq, conversation_id, kind, state, created_at, payload)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                .text(e.localId), .int(e.seq), .text(e.conversationId), .text(e.kind), .int(Int64(e.state)),
                .int(e.createdAt), .blob(e.payload))
        }
    }

    /// The next compose-order number for the outbox.
    package static func nextOutboxSeq(_ db: Database) throws -> Int64 {
        (try db.scalarInt("SELECT max(seq) FROM outbox") ?? 0) + 1
    }

    package static func counts(_ db: Database) throws -> Counts {
        Counts(conversations: Int(try db.scalarInt("SELECT count(*) FROM conversations") ?? 0),
               messages: Int(try db.scalarInt("SELECT count(*) FROM messages") ?? 0),
               pending: Int(try db.scalarInt("SELECT count(*) FROM outbox") ?? 0))
    }

    /// Empties every chat table (the outbox too) in one transaction, then compacts the file so
    /// deleted content does not linger in free pages. Throws only if the delete itself failed
    /// (then nothing changed); the compaction is best effort (VACUUM needs free space).
    package static func clearAll(_ db: Database) throws {
        // `message_refs` stays: an id an app may still hold must never name another message. So
        // does the recovery key (`RecoveryFile`): the user's recovery secret keeps working.
        try db.transaction {
            // The index first: emptied at once, so no deleted row's words have to be read back.
            try SearchIndexSchema.empty(db)
            for table in ["messages", "conversations", "outbox", "media", "list_snapshots", "blocked_users", "conversation_opened", "sync_state"] {
                try db.execute("DELETE FROM \(table)")
            }
            try db.execute("DELETE FROM kv WHERE key NOT LIKE 'recovery.key.%' AND key NOT LIKE 'audit.%' AND key != '\(SearchIndexSchema.formatKey)'")
        }
        try? db.execute("VACUUM")
        try? db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }
}
