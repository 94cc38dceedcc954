import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// Eviction (`Evictor`) through the engine, over the encrypted cache: each cap of the reference
/// (`maxConversations`, `maxMessagesPerConversation`, `maxStorageSize`, `cacheDurationDays`), each
/// clamp observed through what eviction does, what it must never touch (unsent messages,
/// conversations with outbox rows), and the run scheduled after a write-through.
final class EvictionTests: XCTestCase {
    // MARK: - maxMessagesPerConversation

    func testMaxMessagesPerConversationKeepsEachConversationsNewestMessages() async throws {
        let h = try EvictionHarness { $0.setMaxMessagesPerConversation(5) }
        let bob = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 20))
        let carol = Array(try h.simulator.seedConversation(between: "alice", and: "carol", count: 4))
        await h.login()
        try await h.fetchAll("bob")
        try await h.fetchAll("carol")
        XCTAssertEqual(try h.cachedIds("bob"), bob, "everything was written through first")

        let report = await h.vault.evictNow()
        XCTAssertEqual(report?.messages, 15)
        XCTAssertEqual(try h.cachedIds("bob"), Array(bob.suffix(5)), "the oldest go, the newest five stay")
        XCTAssertEqual(try h.cachedIds("carol"), carol, "a conversation within the window is untouched")
        h.client.network = .offline
        let offline = await h.vault.messagesRequest(uid: "bob", limit: 30).fetchPrevious()
        XCTAssertEqual(offline.cached?.map(\.id), Array(bob.suffix(5)))
    }

    func testMaxMessagesPerConversationClampsZeroNegativeAndOverToOneThousand() async throws {
        for value in [0, -7, 1001, 50_000] {
            let h = try EvictionHarness { $0.setMaxMessagesPerConversation(value) }
            XCTAssertEqual(h.vault.config.maxMessagesPerConversation, 1000)
            let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 1010))
            await h.login()
            try await h.fetchAll("bob")
            XCTAssertEqual(try h.cachedIds("bob").count, 1010, "\(value): all written through first")
            await h.vault.evictNow()
            XCTAssertEqual(try h.cachedIds("bob"), Array(ids.suffix(1000)), "\(value) → a 1000-message window")
        }
        // In range, the value is used as is (the smallest window holds one message).
        let h = try EvictionHarness { $0.setMaxMessagesPerConversation(1) }
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 3))
        await h.login()
        try await h.fetchAll("bob")
        await h.vault.evictNow()
        XCTAssertEqual(try h.cachedIds("bob"), [ids[2]])
    }

    // MARK: - maxConversations

    func testMaxConversationsKeepsTheMostRecentlyActiveConversations() async throws {
        let h = try EvictionHarness(peers: ["bob", "carol", "dave", "erin"]) { $0.setMaxConversations(2) }
        // Last messages: bob oldest … erin newest.
        for (i, peer) in ["bob", "carol", "dave", "erin"].enumerated() {
            try h.simulator.seedConversation(between: "alice", and: peer, count: 3, endingAt: h.clock.seconds - 3_600 * (4 - i))
        }
        await h.login()
        // One read across conversations: nothing is opened, activity is the newest message.
        _ = try await h.vault.messagesRequest(uid: nil, limit: 100).fetchPrevious().server.get()
        XCTAssertEqual(try h.cachedConversations(), ["bob", "carol", "dave", "erin"])

        let report = await h.vault.evictNow()
        XCTAssertEqual(report?.conversations, 2)
        XCTAssertEqual(try h.cachedConversations(), ["dave", "erin"], "the least recently active go first")

        // Opening a conversation is activity too: carol, opened now, outlives dave.
        _ = try await h.vault.messagesRequest(uid: nil, limit: 100).fetchPrevious().server.get()
        h.clock.advance(by: 60)
        _ = try await h.vault.messagesRequest(uid: "carol", limit: 30).fetchPrevious().server.get()
        await h.vault.evictNow()
        XCTAssertEqual(try h.cachedConversations(), ["carol", "erin"])
    }

    func testMaxConversationsClampsZeroNegativeAndOverToOneThousand() async throws {
        for value in [0, -1, 1001, 9_999] {
            let h = try EvictionHarness { $0.setMaxConversations(value) }
            XCTAssertEqual(h.vault.config.maxConversations, 1000)
            await h.login()
            // 1002 cached conversations, one message each; conversation i last active at start + i.
            try await h.insertConversations(1002)
            XCTAssertEqual(try h.distinctConversationCount(), 1002)
            let report = await h.vault.evictNow()
            XCTAssertEqual(report?.conversations, 2, "\(value) → a 1000-conversation cap")
            XCTAssertEqual(try h.distinctConversationCount(), 1000)
            XCTAssertEqual(try h.rowCount("SELECT count(*) FROM messages WHERE conversation_id IN ('c-0', 'c-1')"), 0,
                           "the two least recently active went")
        }
        // In range: one conversation.
        let h = try EvictionHarness { $0.setMaxConversations(1) }
        await h.login()
        try await h.insertConversations(3)
        await h.vault.evictNow()
        XCTAssertEqual(try h.distinctConversationCount(), 1)
        XCTAssertEqual(try h.rowCount("SELECT count(*) FROM messages WHERE conversation_id = 'c-2'"), 1)
    }

    // MARK: - maxStorageSize

    func testMaxStorageSizeEvictsTheOldestMessagesUntilThePayloadsFitAndNoMore() async throws {
        // The same history twice (same seed): once to learn the payload sizes, once under the cap.
        let probe = try EvictionHarness { _ in }
        let ids = Array(try probe.simulator.seedConversation(between: "alice", and: "bob", count: 20, text: Self.varyingText))
        await probe.login()
        try await probe.fetchAll("bob")
        let sizes = try probe.payloadSizes("bob")
        XCTAssertEqual(sizes.count, 20)
        let keep = 8
        let cap = sizes.suffix(keep).reduce(0, +)

        let h = try EvictionHarness { $0.setMaxStorageSize(Int64(cap)) }
        XCTAssertEqual(Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 20, text: Self.varyingText)), ids)
        await h.login()
        try await h.fetchAll("bob")
        XCTAssertEqual(try h.payloadSizes("bob"), sizes, "the same payloads")
        let report = await h.vault.evictNow()
        XCTAssertEqual(try h.cachedIds("bob"), Array(ids.suffix(keep)), "the oldest go until the rest fits, and no more")
        XCTAssertEqual(report?.messages, 20 - keep)
        XCTAssertLessThanOrEqual(try h.contentBytes(), Int64(cap))
    }

    func testMaxStorageSizeExcludesTheOutboxAndUnsentMessages() async throws {
        let probe = try EvictionHarness { _ in }
        try probe.simulator.seedConversation(between: "alice", and: "bob", count: 10)
        await probe.login()
        try await probe.fetchAll("bob")
        let cap = try probe.payloadSizes("bob").reduce(0, +)

        // Exactly full with sent messages; a large outbox and a large unsent message beside them.
        let h = try EvictionHarness { $0.setMaxStorageSize(Int64(cap)) }
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 10))
        await h.login()
        try await h.fetchAll("bob")
        try await h.insertOutbox(conversation: "alice_user_carol", count: 3, bytes: 200_000)
        try await h.insertUnsent(conversation: "alice_user_dave", localId: "unsent-1", sentAt: 1, payloadBytes: 300_000)
        await h.vault.evictNow()
        XCTAssertEqual(try h.cachedIds("bob"), ids, "pending content does not count against the byte budget")
        XCTAssertEqual(try h.rowCount("SELECT count(*) FROM outbox"), 3)
        XCTAssertEqual(try h.rowCount("SELECT count(*) FROM messages WHERE server_id IS NULL"), 1)

        // One byte less: now the oldest sent message goes (and only sent content).
        let tight = try EvictionHarness { $0.setMaxStorageSize(Int64(cap - 1)) }
        try tight.simulator.seedConversation(between: "alice", and: "bob", count: 10)
        await tight.login()
        try await tight.fetchAll("bob")
        try await tight.insertOutbox(conversation: "alice_user_carol", count: 3, bytes: 200_000)
        await tight.vault.evictNow()
        XCTAssertEqual(try tight.cachedIds("bob"), Array(ids.dropFirst()))
    }

    func testMaxStorageSizeZeroOrNegativeMeansUnlimited() async throws {
        for value: Int64 in [0, -1, -262_144_000] {
            let h = try EvictionHarness { $0.setMaxStorageSize(value) }
            XCTAssertEqual(h.vault.config.maxStorageSize, 0)
            let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 50))
            await h.login()
            try await h.fetchAll("bob")
            XCTAssertGreaterThan(try h.contentBytes(), 0)
            await h.vault.evictNow()
            XCTAssertEqual(try h.cachedIds("bob"), ids, "\(value): no byte cap")
        }
        // A positive value is a cap: the same history under one byte goes entirely.
        let h = try EvictionHarness { $0.setMaxStorageSize(1) }
        try h.simulator.seedConversation(between: "alice", and: "bob", count: 50)
        await h.login()
        try await h.fetchAll("bob")
        await h.vault.evictNow()
        XCTAssertEqual(try h.cachedIds("bob"), [])
    }

    // MARK: - cacheDurationDays

    func testCacheDurationDaysEvictsConversationsWithNoNewMessageThatWereNotOpened() async throws {
        let h = try EvictionHarness(peers: ["bob", "carol", "dave", "erin"]) { $0.setCacheDurationDays(2) }
        for peer in ["bob", "carol", "dave", "erin"] { try h.simulator.seedConversation(between: "alice", and: peer, count: 3) }
        await h.login()
        for peer in ["bob", "carol", "dave", "erin"] { try await h.fetchAll(peer) }  // opened now

        // A day later erin is opened; three days later bob gets a new message (read across
        // conversations, which opens nothing) and carol is opened. Dave had neither.
        h.clock.advance(by: 86_400)
        h.client.network = .offline
        _ = await h.vault.messagesRequest(uid: "erin", limit: 30).fetchPrevious()  // opening works offline too
        h.client.network = .online
        h.clock.advance(by: 2 * 86_400)
        let newest = try h.simulator.postText("still here", from: "bob", to: .user("alice"))
        _ = try await h.vault.messagesRequest(uid: nil, limit: 100).fetchPrevious().server.get()
        h.client.network = .offline
        _ = await h.vault.messagesRequest(uid: "carol", limit: 30).fetchPrevious()

        let report = await h.vault.evictNow()
        XCTAssertEqual(report?.conversations, 1)
        XCTAssertEqual(try h.cachedConversations(), ["bob", "carol", "erin"], "only dave was idle and unopened for over two days")
        XCTAssertTrue(try h.cachedIds("bob").contains(newest))

        // Two more days of silence: everything but what is opened again goes.
        h.clock.advance(by: 2 * 86_400 + 1)
        _ = await h.vault.messagesRequest(uid: "erin", limit: 30).fetchPrevious()
        await h.vault.evictNow()
        XCTAssertEqual(try h.cachedConversations(), ["erin"])
    }

    /// Reopening a chat does not commit each time (a commit empties the reader's page cache): the
    /// opening is written once per ten minutes, and again when the clock has moved on.
    func testReopeningAChatWritesItsOpeningOncePerTenMinutes() async throws {
        let h = try EvictionHarness(peers: ["bob"]) { $0.setCacheDurationDays(2) }
        try h.simulator.seedConversation(between: "alice", and: "bob", count: 3)
        await h.login()
        let cache = try XCTUnwrap(h.vault.openCache)
        func opened() throws -> Int64? {
            try cache.reader.sync { db in try db.scalarInt("SELECT opened_at FROM conversation_opened WHERE conversation_id = 'alice_user_bob'") }
        }
        func commits() throws -> Int64 { try cache.reader.sync { db in try db.scalarInt("PRAGMA data_version") ?? 0 } }
        h.client.network = .offline
        _ = await h.vault.messagesRequest(uid: "bob", limit: 30).fetchPrevious()
        let first = try XCTUnwrap(try opened(), "the first opening is recorded")
        let version = try commits()
        for _ in 0..<5 {
            h.clock.advance(by: 60)
            _ = await h.vault.messagesRequest(uid: "bob", limit: 30).fetchPrevious()
        }
        XCTAssertEqual(try opened(), first, "reopened within ten minutes: not written again")
        XCTAssertEqual(try commits(), version, "no commit at all for the reopenings")
        h.clock.advance(by: 300)
        _ = await h.vault.messagesRequest(uid: "bob", limit: 30).fetchPrevious()
        XCTAssertEqual(try opened(), first + 600, "ten minutes on, the opening is written again")
    }

    func testCacheDurationDaysZeroOrNegativeMeansNoAgeBasedPrune() async throws {
        for value in [0, -1, -30] {
            let h = try EvictionHarness { $0.setCacheDurationDays(value) }
            XCTAssertEqual(h.vault.config.cacheDurationDays, 0)
            let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 5))
            await h.login()
            try await h.fetchAll("bob")
            h.clock.advance(by: 1_000 * 86_400)
            await h.vault.evictNow()
            XCTAssertEqual(try h.cachedIds("bob"), ids, "\(value): no age-based prune")
        }
        // One day is a limit.
        let h = try EvictionHarness { $0.setCacheDurationDays(1) }
        try h.simulator.seedConversation(between: "alice", and: "bob", count: 5)
        await h.login()
        try await h.fetchAll("bob")
        h.clock.advance(by: 86_400 + 1)
        await h.vault.evictNow()
        XCTAssertEqual(try h.cachedIds("bob"), [])
    }

    // MARK: - What eviction never touches

    func testNoCapRemovesAnUnsentMessageOrTouchesAConversationWithOutboxRows() async throws {
        let caps: [(String, (OfflineConfig.Builder) -> Void)] = [
            ("maxConversations", { $0.setMaxConversations(1) }),
            ("maxMessagesPerConversation", { $0.setMaxMessagesPerConversation(2) }),
            ("maxStorageSize", { $0.setMaxStorageSize(1) }),
            ("cacheDurationDays", { $0.setCacheDurationDays(1) }),
        ]
        for (name, cap) in caps {
            let h = try EvictionHarness(peers: ["bob", "carol", "dave"], configure: cap)
            // bob: outbox rows; carol: an unsent message; dave: neither. All idle for ten days.
            let start = h.clock.seconds
            for peer in ["bob", "carol", "dave"] { try h.simulator.seedConversation(between: "alice", and: peer, count: 6, endingAt: start) }
            await h.login()
            _ = try await h.vault.messagesRequest(uid: nil, limit: 100).fetchPrevious().server.get()
            try await h.insertOutbox(conversation: "alice_user_bob", count: 2, bytes: 64)
            try await h.insertUnsent(conversation: "alice_user_carol", localId: "unsent-carol", sentAt: Int64(start - 100_000), payloadBytes: 64)
            let bob = try h.cachedIds("bob"), carol = try h.cachedIds("carol")
            XCTAssertEqual(bob.count, 6)
            h.clock.advance(by: 10 * 86_400)

            let report = await h.vault.evictNow()
            XCTAssertNotNil(report, name)
            XCTAssertEqual(try h.cachedIds("bob"), bob, "\(name): a conversation with outbox rows is untouched")
            XCTAssertEqual(try h.cachedIds("carol"), carol, "\(name): a conversation with an unsent message is untouched")
            XCTAssertEqual(try h.rowCount("SELECT count(*) FROM outbox"), 2, "\(name): outbox rows stay")
            XCTAssertEqual(try h.rowCount("SELECT count(*) FROM messages WHERE server_id IS NULL AND local_id = 'unsent-carol'"), 1,
                           "\(name): the unsent message stays")
            XCTAssertLessThan(try h.cachedIds("dave").count, 6, "\(name): the unprotected conversation is evicted")
        }
    }

    // MARK: - The scheduled run

    func testEvictionRunsByItselfShortlyAfterAWriteThrough() async throws {
        let h = try EvictionHarness(evictionDelay: .milliseconds(50)) { $0.setMaxMessagesPerConversation(5) }
        let bob = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 3))
        await h.login()
        // Over the cap, but nothing was written through: nothing runs.
        try await h.insertConversations(1, messagesEach: 12)
        h.client.network = .offline
        _ = await h.vault.messagesRequest(uid: "bob", limit: 30).fetchPrevious()
        try await Task.sleep(for: .milliseconds(400))
        XCTAssertEqual(try h.rowCount("SELECT count(*) FROM messages WHERE conversation_id = 'c-0'"), 12,
                       "no eviction without a write-through")

        // A write-through schedules a run, which trims the other conversation too.
        h.client.network = .online
        _ = try await h.vault.messagesRequest(uid: "bob", limit: 30).fetchPrevious().server.get()
        let deadline = ContinuousClock.now + .seconds(10)
        while try h.rowCount("SELECT count(*) FROM messages WHERE conversation_id = 'c-0'") != 5 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(try h.rowCount("SELECT count(*) FROM messages WHERE conversation_id = 'c-0'"), 5, "the scheduled run trimmed it")
        XCTAssertEqual(try h.cachedIds("bob"), bob)
    }

    func testABurstOfWriteThroughsSharesOneScheduledRunAndALaterBurstGetsItsOwn() async throws {
        let h = try EvictionHarness(evictionDelay: .milliseconds(1500)) { $0.setMaxMessagesPerConversation(2) }
        try h.simulator.seedConversation(between: "alice", and: "bob", count: 10)
        await h.login()
        for _ in 0..<5 { _ = try await h.vault.messagesRequest(uid: "bob", limit: 10).fetchPrevious().server.get() }
        XCTAssertEqual(try h.cachedIds("bob").count, 10, "not before the delay")
        try await h.waitUntil { try h.cachedIds("bob").count == 2 }
        XCTAssertEqual(try h.cachedIds("bob").count, 2)
        // A later write-through schedules again.
        _ = try await h.vault.messagesRequest(uid: "bob", limit: 10).fetchPrevious().server.get()
        XCTAssertEqual(try h.cachedIds("bob").count, 10)
        try await h.waitUntil { try h.cachedIds("bob").count == 2 }
        XCTAssertEqual(try h.cachedIds("bob").count, 2)
    }

    // MARK: - Support

    /// Texts of different lengths, so payload sizes differ from message to message.
    static func varyingText(_ i: Int) -> String {
        "message \(i) " + String(repeating: "x", count: (i * 37) % 90)
    }
}

/// An engine over an encrypted cache reading from a simulator, with the eviction settings a test
/// chooses (the shared `ReadHarness` postpones scheduled eviction by an hour).
final class EvictionHarness {
    let root = TemporaryDirectory()
    let keyStore = MemoryKeyStore()
    let clock = SimulatedClock()
    let simulator: ChatVaultSimulator
    let client: SimulatedClient
    let vault: OfflineVault

    init(peers: [String] = ["bob", "carol", "dave"], evictionDelay: Duration = .seconds(3600),
         configure: (OfflineConfig.Builder) -> Void) throws {
        simulator = ChatVaultSimulator(seed: 11, clock: clock)
        for user in ["alice"] + peers { try simulator.addUser(SimulatedUser(uid: user)) }
        client = simulator.client(for: "alice")
        let builder = OfflineConfig.Builder().setEnabled(true).setEncryption(true)
        configure(builder)
        var settings = VaultSettings(applicationId: "org.chatvault.evictiontests", rootDirectory: root.path,
                                     keyStorage: [.custom(keyStore)], callbackExecutor: .queue(DispatchQueue(label: "tests.eviction")),
                                     retry: .manualOnly)
        let clock = self.clock
        settings.clock = { clock.date }
        settings.evictionDelay = evictionDelay
        vault = try OfflineVault(config: builder.build(), settings: settings, backend: client)
    }

    func login() async {
        _ = await vault.login(userId: "alice")
        XCTAssertNotNil(vault.openCache, "the cache is open")
    }

    var cache: VaultCache {
        get throws { try XCTUnwrap(vault.openCache) }
    }

    /// Reads a conversation online from the newest message back to the oldest (pages of 100).
    func fetchAll(_ uid: String) async throws {
        let request = vault.messagesRequest(uid: uid, limit: 100)
        while try await request.fetchPrevious().server.get().count == 100 {}
    }

    /// The cached server ids of the conversation with `uid`, oldest first.
    func cachedIds(_ uid: String) throws -> [Int] {
        try cache.reader.sync { db in
            let stmt = try db.prepare("""
                SELECT server_id FROM messages WHERE conversation_id = ? AND server_id IS NOT NULL ORDER BY sent_at, server_id
                """)
            try stmt.bind([.text(ChatVaultSimulator.conversationId(between: "alice", and: uid))])
            var ids: [Int] = []
            while try stmt.step() { ids.append(stmt.int(0)) }
            return ids
        }
    }

    /// The payload size of each cached message with `uid`, oldest first.
    func payloadSizes(_ uid: String) throws -> [Int] {
        try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT length(payload) FROM messages WHERE conversation_id = ? ORDER BY sent_at, server_id")
            try stmt.bind([.text(ChatVaultSimulator.conversationId(between: "alice", and: uid))])
            var sizes: [Int] = []
            while try stmt.step() { sizes.append(stmt.int(0)) }
            return sizes
        }
    }

    /// The peers of the one-to-one conversations holding cached messages, sorted.
    func cachedConversations() throws -> [String] {
        try cache.reader.sync { db in
            try db.texts("SELECT DISTINCT conversation_id FROM messages").map { id in
                id.replacingOccurrences(of: "alice_user_", with: "").replacingOccurrences(of: "_user_alice", with: "")
            }.sorted()
        }
    }

    func distinctConversationCount() throws -> Int {
        try rowCount("SELECT count(DISTINCT conversation_id) FROM messages")
    }

    func rowCount(_ sql: String) throws -> Int {
        try cache.reader.sync { db in Int(try db.scalarInt(sql) ?? 0) }
    }

    /// Message payload bytes in the cache (sent messages).
    func contentBytes() throws -> Int64 {
        try cache.reader.sync { db in try db.scalarInt("SELECT coalesce(sum(length(payload)), 0) FROM messages WHERE server_id IS NOT NULL") ?? 0 }
    }

    /// `count` conversations `c-0`…, written straight to the cache (no write-through), each with
    /// `messagesEach` sent messages; conversation i's messages are older than conversation i+1's.
    func insertConversations(_ count: Int, messagesEach: Int = 1) async throws {
        let base = Int64(clock.seconds) - 1_000_000
        try await cache.writer.run { db in
            try db.transaction {
                var rows: [CacheRows.Message] = []
                for c in 0..<count {
                    for m in 0..<messagesEach {
                        let n = Int64(c * messagesEach + m)
                        rows.append(CacheRows.Message(serverId: 9_000_000 + n, localId: nil, conversationId: "c-\(c)", senderId: "bob",
                                                      receiverId: "alice", receiverType: "user", sentAt: base + n, body: nil))
                    }
                }
                try CacheRows.insert(rows, into: db)
            }
        }
    }

    func insertOutbox(conversation: String, count: Int, bytes: Int) async throws {
        let now = Int64(clock.seconds)
        try await cache.writer.run { db in
            try db.transaction {
                let first = try CacheRows.nextOutboxSeq(db)
                try CacheRows.insert((0..<count).map { i in
                    CacheRows.OutboxEntry(localId: "outbox-\(conversation)-\(i)", seq: first + Int64(i), conversationId: conversation,
                                          kind: "text", state: 0, createdAt: now, payload: Array(repeating: 0x61, count: bytes))
                }, into: db)
            }
        }
    }

    /// A message the server has not acknowledged yet (no server id), with a payload.
    func insertUnsent(conversation: String, localId: String, sentAt: Int64, payloadBytes: Int) async throws {
        try await cache.writer.run { db in
            try CacheRows.insert([CacheRows.Message(serverId: nil, localId: localId, conversationId: conversation, senderId: "alice",
                                                    receiverId: "peer", receiverType: "user", sentAt: sentAt, body: "pending")], into: db)
            try db.run("UPDATE messages SET payload = ? WHERE local_id = ?", .blob(Array(repeating: 0x62, count: payloadBytes)), .text(localId))
        }
    }

    /// Polls `condition` for up to ten seconds.
    func waitUntil(_ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while try !condition() && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

extension OfflineVault {
    /// A message request through this engine (nil uid: every conversation).
    fileprivate func messagesRequest(uid: String?, limit: Int) -> MessagesRequest {
        let builder = MessagesRequest.MessageRequestBuilder(vault: self).set(limit: limit)
        if let uid { builder.set(uid: uid) }
        return builder.build()
    }
}
