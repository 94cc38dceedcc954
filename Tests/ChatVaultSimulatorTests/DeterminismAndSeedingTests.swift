import ChatVault
import ChatVaultSimulator
import XCTest

/// The same seed and calls give the same answers; bulk seeding is fast enough for benchmarks.
final class DeterminismAndSeedingTests: XCTestCase {
    /// A scripted session on a flaky network: every answer and every failure, as text.
    func transcript(seed: UInt64) async throws -> [String] {
        let simulator = ChatVaultSimulator(seed: seed)
        try simulator.addUsers("alice", "bob", "carol")
        try simulator.addGroup("g", owner: "alice", members: ["bob", "carol"])
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        alice.network = .flaky(failureRate: 0.3)
        bob.network = .flaky(failureRate: 0.3)
        var lines: [String] = []
        for i in 0..<40 {
            simulator.clock.advance(by: 1)
            try simulator.postText("m\(i)", from: i % 2 == 0 ? "bob" : "carol", to: .group("g"))
            do {
                let sent = try await alice.send(["receiver": "g", "receiverType": "group", "type": "text", "data": ["text": .string("r\(i)")]],
                                                localMessageId: "l\(i)")
                lines.append("sent \(sent.jsonData().count) \(String(decoding: sent.jsonData(), as: UTF8.self))")
            } catch {
                lines.append("send failed \(error)")
            }
            do {
                var query = MessageQuery()
                query.scope = .group("g")
                query.limit = 5
                let page = try await bob.messages(query)
                lines.append(page.items.map { String(decoding: $0.jsonData(), as: UTF8.self) }.joined(separator: ",") + (page.nextCursor ?? "-"))
            } catch {
                lines.append("read failed \(error)")
            }
        }
        return lines
    }

    func testTheSameSeedGivesTheSameTranscript() async throws {
        let first = try await transcript(seed: 1234)
        let second = try await transcript(seed: 1234)
        XCTAssertEqual(first, second)
        XCTAssertTrue(first.contains { $0.hasPrefix("send failed") }, "the flaky network did fail some calls")
        let other = try await transcript(seed: 4321)
        XCTAssertNotEqual(first, other)
    }

    func testSeedingAHundredThousandMessagesTakesSeconds() async throws {
        let simulator = ChatVaultSimulator()
        let uids = (0..<101).map { "user\($0)" }
        for uid in uids { try simulator.addUser(SimulatedUser(uid: uid)) }
        let start = ContinuousClock.now
        for i in 1...100 {
            try simulator.seedConversation(between: "user0", and: uids[i], count: 1000, spacing: 30)
        }
        let elapsed = ContinuousClock.now - start
        XCTAssertEqual(simulator.messageCount, 100_000)
        XCTAssertLessThan(elapsed, .seconds(20), "seeding took \(elapsed)")

        let client = simulator.client(for: "user0")
        var query = MessageQuery()
        query.scope = .user("user7")
        let page = try await client.messages(query)
        XCTAssertEqual(page.items.count, 30)
        XCTAssertNotNil(page.nextCursor)
        let conversations = try await client.conversations(ConversationQuery())
        XCTAssertEqual(conversations.items.count, 30)
        let log = try await client.changes(since: nil, limit: 500)
        XCTAssertEqual(log.changes.count, 500, "seeded seconds are distinct per conversation; pages fill")
    }

    func testSeededGroupHistoryAlternatesSendersAndEndsNow() async throws {
        let simulator = ChatVaultSimulator()
        try simulator.addUsers("a", "b", "c")
        try simulator.addGroup("g", members: ["a", "b", "c"])
        let ids = try simulator.seedConversation(inGroup: "g", count: 6, spacing: 10) { "line \($0)" }
        XCTAssertEqual(ids, 1..<7)
        let a = simulator.client(for: "a")
        var query = MessageQuery()
        query.scope = .group("g")
        let items = try await a.messages(query).items
        XCTAssertEqual(items.map { $0["sender"]?["uid"]?.stringValue }, ["a", "b", "c", "a", "b", "c"])
        XCTAssertEqual(items.last?["sentAt"]?.intValue, Int64(simulator.clock.seconds))
        XCTAssertEqual(items.first?["sentAt"]?.intValue, Int64(simulator.clock.seconds - 50))
        XCTAssertEqual(items.first?["data"]?["text"], "line 0")
    }

    func testTruthMistakesAreReported() throws {
        let simulator = ChatVaultSimulator()
        try simulator.addUsers("a", "b")
        XCTAssertThrowsError(try simulator.addUsers("a"))
        XCTAssertThrowsError(try simulator.postText("x", from: "ghost", to: .user("a")))
        XCTAssertThrowsError(try simulator.postText("x", from: "a", to: .group("none")))
        XCTAssertThrowsError(try simulator.postText("", from: "a", to: .user("b")))
        XCTAssertThrowsError(try simulator.edit(99, to: .text("x")))
        XCTAssertThrowsError(try simulator.markRead(upTo: 1, by: "a"))
        let id = try simulator.postText("x", from: "a", to: .user("b"))
        XCTAssertThrowsError(try simulator.edit(id, to: .custom(type: "t", data: [:])), "an edit keeps the category")
        XCTAssertThrowsError(try simulator.postText("r", from: "a", to: .user("b"), parentId: 42))
        do {
            try simulator.postText("x", from: "ghost", to: .user("a"))
        } catch {
            XCTAssertTrue(error.description.contains("ERR_UID_NOT_FOUND"))
        }
    }
}
