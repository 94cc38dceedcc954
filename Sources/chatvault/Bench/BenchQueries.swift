import Foundation
import VaultStore

/// The reads every design of `chatvault bench open` performs after keying, written once so the
/// designs differ only in how the database is keyed. `schema` names the database on the connection
/// (`main`, or the attached passphrase database).
enum BenchQueries {
    /// `Schema.requiredColumns` in a fixed order.
    static let requiredColumns: [(table: String, columns: [String])] =
        Schema.requiredColumns.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }

    /// The schema check the open procedure does on an existing cache (`Schema.prepare` with
    /// nothing to migrate): the version this build writes, tables present, every required column
    /// present.
    static func checkSchema(_ db: Database, schema: String) throws {
        let version = try db.scalarInt("PRAGMA \(schema).user_version") ?? 0
        let tables = try db.scalarInt("SELECT count(*) FROM \(schema).sqlite_master WHERE type = 'table'") ?? 0
        guard version == Int64(Schema.currentVersion), tables > 0 else {
            throw CLIError.failure("benchmark database \(schema): schema version \(version) with \(tables) tables, expected version \(Schema.currentVersion)")
        }
        for (table, columns) in requiredColumns {
            let stmt = try db.prepare("PRAGMA \(schema).table_info(\(table))")
            var present = Set<String>()
            while try stmt.step() { present.insert(stmt.text(1) ?? "") }
            if let missing = columns.first(where: { !present.contains($0) }) {
                throw CLIError.failure("benchmark database \(schema): column \(table).\(missing) is missing")
            }
        }
    }

    /// The first page of a conversation: its `limit` newest top-level messages, every column
    /// decoded by index (the hot-path rule), walking `messages_by_conversation` backwards.
    static func firstPage(_ db: Database, schema: String, conversationId: String, limit: Int) throws -> PageDigest {
        let stmt = try db.prepare("""
            SELECT row_id, server_id, local_id, conversation_id, parent_id, sender_id, receiver_id, receiver_type,
                   category, type, sent_at, updated_at, deleted_at, status, source, flags, body, payload
            FROM \(schema).messages
            WHERE conversation_id = ? AND parent_id = 0
            ORDER BY sent_at DESC, row_id DESC
            LIMIT ?
            """)
        try stmt.bind([.text(conversationId), .int(Int64(limit))])
        var digest = PageDigest()
        while try stmt.step() {
            digest.add(PageMessage(stmt))
        }
        return digest
    }
}

/// One decoded row of the first page.
struct PageMessage {
    var rowId: Int64
    var serverId: Int64?
    var localId: String?
    var conversationId: String
    var parentId: Int64
    var senderId: String
    var receiverId: String
    var receiverType: String
    var category: String
    var type: String
    var sentAt: Int64
    var updatedAt: Int64
    var deletedAt: Int64
    var status: Int
    var source: Int
    var flags: Int64
    var body: String?
    var payload: [UInt8]?

    init(_ s: Statement) {
        rowId = s.int64(0)
        serverId = s.isNull(1) ? nil : s.int64(1)
        localId = s.text(2)
        conversationId = s.text(3) ?? ""
        parentId = s.int64(4)
        senderId = s.text(5) ?? ""
        receiverId = s.text(6) ?? ""
        receiverType = s.text(7) ?? ""
        category = s.text(8) ?? ""
        type = s.text(9) ?? ""
        sentAt = s.int64(10)
        updatedAt = s.int64(11)
        deletedAt = s.int64(12)
        status = s.int(13)
        source = s.int(14)
        flags = s.int64(15)
        body = s.text(16)
        payload = s.blob(17)
    }
}

/// What a design read: the row count and a checksum over the decoded rows, compared across the
/// designs (they must read the same page) and kept so the decoding cannot be optimised away.
/// Carries no message text.
struct PageDigest: Equatable {
    var rows = 0
    var checksum: Int64 = 0

    mutating func add(_ m: PageMessage) {
        rows += 1
        var h = checksum &* 31 &+ m.rowId
        h = h &* 31 &+ (m.serverId ?? -1) &+ m.sentAt &+ m.updatedAt &+ m.deletedAt &+ m.parentId &+ m.flags
        h = h &* 31 &+ Int64(m.status &+ m.source)
        for text in [m.localId ?? "", m.conversationId, m.senderId, m.receiverId, m.receiverType, m.category, m.type, m.body ?? ""] {
            h = h &* 31 &+ Int64(text.utf8.count)
        }
        checksum = h &* 31 &+ Int64(m.payload?.count ?? -1)
    }
}
