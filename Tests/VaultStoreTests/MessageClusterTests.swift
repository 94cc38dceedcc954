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

    /// Schema 4's migration: rows written before clustering (SQLite's own keys, in arrival order)
    /// move into their clusters, every row kept, in time order within each conversation.
    func testTheMigrationPlacesRowsWrittenBeforeClustering() throws {
        let h = Harness()
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        defer { cache.close() }
        let conversations = (0..<7).map { "user_peer\($0)" }
        try cache.writer.sync { db in
            try db.transaction {
                // As schema 3 wrote them: keys chosen by SQLite, conversations interleaved, and
                // not in time order (a later page of history arrives after newer messages).
                let insert = try db.prepare("INSERT INTO messages (server_id, conversation_id, sender_id, receiver_id, receiver_type, category, type, sent_at) VALUES (?, ?, 'bob', 'alice', 'user', 'message', 'text', ?)")
                for i in (0..<500).reversed() {
                    try insert.bind([.int(Int64(i + 1)), .text(conversations[i % 7]), .int(Int64(1_700_000_000 + i))])
                    while try insert.step() {}
                    insert.reset()
                }
                XCTAssertLessThan(try db.scalarInt("SELECT max(row_id) FROM messages") ?? .max, MessageClusters.span)
                try MessageClusters.renumber(db)
            }
        }
        let all = try rows(cache)
        XCTAssertEqual(Set(all.map(\.serverId)), Set((1...500).map(Int64.init)), "every row kept")
        assertClustered(all)
        for c in conversations {
            let ids = all.filter { $0.conversation == c }.map(\.serverId)
            XCTAssertEqual(ids, ids.sorted(), "\(c): in time order after the migration")
        }
        XCTAssertEqual(try cache.reader.sync { db in try IntegrityCheck.problems(db) }, [])
    }

    func testClusterBasesAreStableAndInRange() {
        // FNV-1a: the same key for the same id in every process and build (a cache outlives both).
        XCTAssertEqual(MessageClusters.base(of: "alice_user_bob"), MessageClusters.base(of: "alice_user_bob"))
        XCTAssertNotEqual(MessageClusters.base(of: "alice_user_bob"), MessageClusters.base(of: "alice_user_carol"))
        for id in ["", "group_g", "alice_user_bob", String(repeating: "é", count: 300), "\u{0}"] {
            let base = MessageClusters.base(of: id)
            XCTAssertGreaterThanOrEqual(base, MessageClusters.span, "cluster 0 is where rows from before clustering were")
            XCTAssertEqual(base % MessageClusters.span, 0)
            XCTAssertLessThanOrEqual(base, Int64.max - (MessageClusters.span - 1), "every key of the cluster fits an Int64")
        }
    }
}
