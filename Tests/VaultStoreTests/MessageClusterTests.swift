import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore

/// `MessageClusters`: a conversation's rows sit together in the `messages` table whatever order
/// they were written in, on real encrypted SQLCipher caches.
final class MessageClusterTests: XCTestCase {
    private func message(_ i: Int, conversation: String) -> CacheRows.Message {
        CacheRows.Message(serverId: Int64(i + 1), localId: nil, conversationId: conversation, senderId: "bob", receiverId: "alice",
                          receiverType: "user", sentAt: Int64(1_700_000_000 + i), body: "message \(i)")
    }

    /// (row_id, conversation_id, server_id) of every row, in key order.
    private func rows(_ cache: VaultCache) throws -> [(key: Int64, conversation: String, serverId: Int64)] {
        try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT row_id, conversation_id, server_id FROM messages ORDER BY row_id")
            var out: [(Int64, String, Int64)] = []
            while try stmt.step() { out.append((stmt.int64(0), stmt.text(1) ?? "", stmt.int64(2))) }
            return out
        }.map { (key: $0.0, conversation: $0.1, serverId: $0.2) }
    }

    /// Every conversation's rows form one run of consecutive keys of its own cluster.
    private func assertClustered(_ rows: [(key: Int64, conversation: String, serverId: Int64)], file: StaticString = #filePath, line: UInt = #line) {
        var seen = Set<String>()
        var previous: String?
        for row in rows {
            XCTAssertEqual(row.key & ~(MessageClusters.span - 1), MessageClusters.base(of: row.conversation),
                           "row \(row.serverId) is outside its conversation's cluster", file: file, line: line)
            if row.conversation != previous {
                XCTAssertFalse(seen.contains(row.conversation), "\(row.conversation)'s rows are split", file: file, line: line)
                seen.insert(row.conversation)
                previous = row.conversation
            }
        }
    }

    func testInterleavedWritesLandInTheirConversationsClusters() throws {
        let h = Harness()
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        defer { cache.close() }
        let conversations = ["user_bob", "user_carol", "group_g1", "user_dave"]
        try cache.writer.sync { db in
            try db.transaction {
                try CacheRows.insert((0..<200).map { message($0, conversation: conversations[$0 % conversations.count]) }, into: db)
            }
        }
        let all = try rows(cache)
        XCTAssertEqual(all.count, 200)
        assertClustered(all)
        // Within a conversation, in the order written.
        for c in conversations {
            let ids = all.filter { $0.conversation == c }.map(\.serverId)
            XCTAssertEqual(ids, ids.sorted(), c)
        }
    }

    func testStagedRowsSettleIntoClustersKeepingEveryRow() throws {
        let h = Harness()
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        defer { cache.close() }
        let conversations = (0..<7).map { "user_peer\($0)" }
        // Some rows already placed, then a bulk write staged in cluster 0.
        try cache.writer.sync { db in
            try db.transaction { try CacheRows.insert((0..<21).map { message($0, conversation: conversations[$0 % 7]) }, into: db) }
            let insert = try db.prepare(MessageClusters.insertSQL(columns: ["server_id", "conversation_id", "sender_id", "receiver_id",
                                                                            "receiver_type", "category", "type", "sent_at"]))
            for i in 21..<500 {
                try insert.bind([.int(Int64(i + 1)), .text(conversations[i % 7]), .text("bob"), .text("alice"), .text("user"),
                                 .text("message"), .text("text"), .int(Int64(1_700_000_000 + i)), .int(MessageClusters.staged)])
                while try insert.step() {}
                insert.reset()
            }
        }
        XCTAssertTrue(try cache.reader.sync { db in try MessageClusters.hasStagedRows(db) })
        XCTAssertEqual(try rows(cache).filter { $0.key < MessageClusters.span }.count, 479, "the bulk rows wait in cluster 0, in order")

        // In batches, as the engine settles them in the background.
        var moved = 0
        while true {
            let batch = try cache.writer.sync { db in try db.transaction { try MessageClusters.settle(db, limit: 100) } }
            moved += batch
            if batch < 100 { break }
        }
        XCTAssertEqual(moved, 479)
        XCTAssertFalse(try cache.reader.sync { db in try MessageClusters.hasStagedRows(db) })
        let all = try rows(cache)
        XCTAssertEqual(Set(all.map(\.serverId)), Set((1...500).map(Int64.init)), "every row kept")
        assertClustered(all)
        for c in conversations {
            let ids = all.filter { $0.conversation == c }.map(\.serverId)
            XCTAssertEqual(ids, ids.sorted(), "\(c): staged rows follow the placed ones, oldest first")
        }
        // Nothing left: a further settle moves nothing and changes nothing.
        XCTAssertEqual(try cache.writer.sync { db in try MessageClusters.settle(db, limit: 100) }, 0)
        XCTAssertEqual(try rows(cache).map(\.key), all.map(\.key))
    }

    func testClusterBasesAreStableAndInRange() {
        // FNV-1a: the same key for the same id in every process and build (a cache outlives both).
        XCTAssertEqual(MessageClusters.base(of: "alice_user_bob"), MessageClusters.base(of: "alice_user_bob"))
        XCTAssertNotEqual(MessageClusters.base(of: "alice_user_bob"), MessageClusters.base(of: "alice_user_carol"))
        for id in ["", "group_g", "alice_user_bob", String(repeating: "é", count: 300), "\u{0}"] {
            let base = MessageClusters.base(of: id)
            XCTAssertGreaterThanOrEqual(base, MessageClusters.span, "cluster 0 is for staged rows")
            XCTAssertEqual(base % MessageClusters.span, 0)
            XCTAssertLessThanOrEqual(base, Int64.max - (MessageClusters.span - 1), "every key of the cluster fits an Int64")
        }
    }
}
