import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

/// Records a lookup's callbacks in order, as "cached <id>", "server <id>", "error <code>".
final class LookupRecorder: ConversationDetailsListener, MessageDetailsListener {
    private let log = Mutex<[String]>([])
    private let settled = DispatchSemaphore(value: 0)

    var recorded: [String] { log.withLock { $0 } }

    private func append(_ event: String, final: Bool) {
        log.withLock { $0.append(event) }
        if final { settled.signal() }
    }

    func onCachedConversation(_ conversation: Conversation) { append("cached \(conversation.conversationId ?? "?")", final: false) }
    func onServerConversation(_ conversation: Conversation?) { append("server \(conversation?.conversationId ?? "nil")", final: true) }
    func onCachedMessage(_ message: BaseMessage) { append("cached \(message.id)", final: false) }
    func onServerMessage(_ message: BaseMessage?) { append("server \(message.map { String($0.id) } ?? "nil")", final: true) }
    func onError(_ error: CometChatException?) { append("error \(error?.errorCode ?? "nil")", final: true) }

    /// Waits until the lookup settled (a server copy or an error).
    func wait(file: StaticString = #filePath, line: UInt = #line) {
        if settled.wait(timeout: .now() + 10) == .timedOut { XCTFail("the lookup never settled", file: file, line: line) }
    }
}

/// Listeners that implement nothing: every callback is optional.
final class SilentConversationListener: ConversationDetailsListener {}
final class SilentMessageListener: MessageDetailsListener {}

/// A log the test keeps while the listener writing to it is let go.
final class EventLog: Sendable {
    private let entries = Mutex<[String]>([])

    func append(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// Records the callbacks of a listener the test does not keep: only the shared log and semaphore.
final class DetachedRecorder: ConversationDetailsListener, MessageDetailsListener {
    let log: EventLog
    let settled: DispatchSemaphore
    let released: DispatchSemaphore

    init(log: EventLog, settled: DispatchSemaphore, released: DispatchSemaphore) {
        self.log = log
        self.settled = settled
        self.released = released
    }

    deinit { released.signal() }

    func onCachedConversation(_ conversation: Conversation) { log.append("cached \(conversation.conversationId ?? "?")") }
    func onServerConversation(_ conversation: Conversation?) {
        log.append("server \(conversation?.conversationId ?? "nil")")
        settled.signal()
    }
    func onCachedMessage(_ message: BaseMessage) { log.append("cached \(message.id)") }
    func onServerMessage(_ message: BaseMessage?) {
        log.append("server \(message.map { String($0.id) } ?? "nil")")
        settled.signal()
    }
    func onError(_ error: CometChatException?) {
        log.append("error \(error?.errorCode ?? "nil")")
        settled.signal()
    }
}

/// `getConversation` and `getMessageDetails`: the cached callback only on a hit.
final class SingleItemReadTests: XCTestCase {
    static let internet = CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE

    override func tearDown() {
        CometChat.offlineVault = nil
        super.tearDown()
    }

    /// alice and bob talk; alice is in the team group. Returns the one-to-one message ids.
    @discardableResult
    func world(_ h: ReadHarness) throws -> [Int] {
        try h.simulator.addGroup("team", owner: "carol", members: ["alice"])
        try h.simulator.postText("standup", from: "carol", to: .group("team"))
        return Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 3))
    }

    func lookUp(_ h: ReadHarness, _ with: String, _ type: ConversationType) -> [String] {
        let recorder = LookupRecorder()
        h.vault.getConversation(conversationWith: with, conversationType: type, listener: recorder)
        recorder.wait()
        return recorder.recorded
    }

    func lookUp(_ h: ReadHarness, message id: Int) -> [String] {
        let recorder = LookupRecorder()
        h.vault.getMessageDetails(id, listener: recorder)
        recorder.wait()
        return recorder.recorded
    }

    // MARK: getConversation

    func testAConversationCacheHitOnlineDeliversTheCachedCopyThenTheServers() async throws {
        let h = try ReadHarness()
        try world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        XCTAssertEqual(lookUp(h, "bob", .user), ["cached alice_user_bob", "server alice_user_bob"])
        XCTAssertEqual(lookUp(h, "team", .group), ["cached group_team", "server group_team"])
    }

    func testAConversationCacheMissOnlineGoesStraightToTheServerAndIsWrittenThrough() async throws {
        let h = try ReadHarness()
        try world(h)
        await h.login()
        XCTAssertEqual(lookUp(h, "bob", .user), ["server alice_user_bob"], "no cached callback on a miss, not even an empty one")
        XCTAssertEqual(try h.cachedConversationIds(), ["alice_user_bob"], "written through")
        XCTAssertEqual(lookUp(h, "bob", .user), ["cached alice_user_bob", "server alice_user_bob"], "now a hit")
    }

    func testOfflineAConversationHitEndsWithInternetUnavailableAndAMissGoesStraightToIt() async throws {
        let h = try ReadHarness()
        try world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        try await h.onCache { db in try db.run("DELETE FROM conversations WHERE id = 'group_team'") }
        h.client.network = .offline
        XCTAssertEqual(lookUp(h, "bob", .user), ["cached alice_user_bob", "error \(Self.internet)"])
        XCTAssertEqual(lookUp(h, "team", .group), ["error \(Self.internet)"])
    }

    func testTheServersConversationReplacesTheCachedCopyBeforeDelivery() async throws {
        let h = try ReadHarness()
        try world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        h.simulator.clock.advance(by: 10)
        // Away, so only the lookup brings it (a realtime event could otherwise update the cached
        // conversation before the lookup's cached phase: seen once in a clean-clone run).
        let newest = try h.whileAway { try h.simulator.postText("later", from: "bob", to: .user("alice")) }
        let (cached, server) = await h.vault.getConversation(conversationWith: "bob", conversationType: .user)
        XCTAssertNotEqual(cached?.lastMessage?.id, newest, "the cached phase is the old copy")
        XCTAssertEqual(try server.get()?.lastMessage?.id, newest)
        XCTAssertEqual(try h.cachedConversationRow("alice_user_bob")?.unread, 2)
        h.client.network = .offline
        let (offline, failure) = await h.vault.getConversation(conversationWith: "bob", conversationType: .user)
        XCTAssertEqual(offline?.lastMessage?.id, newest)
        guard case .failure(let error) = failure else { return XCTFail("offline") }
        XCTAssertEqual(error.errorCode, Self.internet)
    }

    func testAServerErrorReachesOnErrorUnchangedAndANotFoundForgetsTheCachedCopy() async throws {
        let h = try ReadHarness()
        try world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        h.client.failNext(.conversation, with: .status(500, code: "ERR_INTERNAL"))
        XCTAssertEqual(lookUp(h, "bob", .user), ["cached alice_user_bob", "error ERR_INTERNAL"])
        XCTAssertTrue(try h.cachedConversationIds().contains("alice_user_bob"), "a server failure leaves the cache alone")
        try h.simulator.deleteConversation("alice_user_bob", for: "alice")
        XCTAssertEqual(lookUp(h, "bob", .user), ["cached alice_user_bob", "error ERR_NOT_FOUND"])
        XCTAssertFalse(try h.cachedConversationIds().contains("alice_user_bob"), "the server says it is gone")
        XCTAssertEqual(try h.cachedIds("alice_user_bob").count, 0, "(no messages were cached for it)")
        XCTAssertEqual(lookUp(h, "nobody", .user), ["error ERR_NOT_FOUND"])
    }

    func testAHostileConversationIsRefusedAndTheCacheIsUnchanged() async throws {
        let hostile: [(String, @Sendable (JSONValue) -> JSONValue)] = [
            ("missing field", { v in JSONValue.object((v.objectValue ?? [:]).filter { $0.key != "conversationType" }) }),
            ("huge string", { v in
                var o = v.objectValue ?? [:]
                o["tags"] = [.string(String(repeating: "x", count: 4096))]
                return .object(o)
            }),
            ("wrong type", { v in
                var o = v.objectValue ?? [:]
                o["updatedAt"] = "yesterday"
                return .object(o)
            }),
            ("another conversation", { v in
                var o = v.objectValue ?? [:]
                o["conversationId"] = "alice_user_carol"
                return .object(o)
            }),
        ]
        for (name, corrupt) in hostile {
            let h = try ReadHarness()
            try world(h)
            await h.login()
            _ = await h.conversations().fetchNext()
            let ids = try h.cachedConversationIds()
            let before = try XCTUnwrap(try h.cachedConversationRow("alice_user_bob"))
            h.simulator.clock.advance(by: 10)
            try h.whileAway { try h.simulator.postText("later", from: "bob", to: .user("alice")) }
            h.client.failNext(.conversation, with: .payload(corrupt))
            XCTAssertEqual(lookUp(h, "bob", .user), ["cached alice_user_bob", "error ERROR_INVALID_SERVER_RESPONSE"], name)
            XCTAssertEqual(try h.cachedConversationIds(), ids, name)
            XCTAssertEqual(try h.cachedConversationRow("alice_user_bob")?.updatedAt, before.updatedAt, "\(name): cache unchanged")
        }
    }

    /// Runs one classic call and returns everything it delivered, waiting a moment past the first
    /// callback so that a stray second one would be seen.
    func classic(_ call: (@escaping @Sendable (String) -> Void) -> Void) -> [String] {
        let log = EventLog()
        let first = DispatchSemaphore(value: 0)
        call { entry in
            log.append(entry)
            first.signal()
        }
        XCTAssertEqual(first.wait(timeout: .now() + 10), .success, "the call settled")
        Thread.sleep(forTimeInterval: 0.3)
        return log.all
    }

    func classicConversation(_ h: ReadHarness, _ with: String, _ type: ConversationType) -> [String] {
        classic { record in
            h.vault.getConversation(conversationWith: with, conversationType: type, onSuccess: { c in
                record("success \(c?.conversationId ?? "nil")")
            }, onError: { e in record("error \(e?.errorCode ?? "nil")") })
        }
    }

    func classicMessage(_ h: ReadHarness, _ id: Int) -> [String] {
        classic { record in
            h.vault.getMessageDetails(id, onSuccess: { m in record("success \(m.id)") }, onError: { e in record("error \(e?.errorCode ?? "nil")") })
        }
    }

    func testTheClassicGetConversationNeverDeliversTheCachedCopy() async throws {
        let h = try ReadHarness()
        try world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        h.client.failNext(.conversation, with: .delay(.milliseconds(100)))
        XCTAssertEqual(classicConversation(h, "bob", .user), ["success alice_user_bob"], "the server's copy only")
        h.client.network = .offline
        XCTAssertEqual(classicConversation(h, "bob", .user), ["error \(Self.internet)"], "the cached copy is never delivered")
    }

    func testWithOfflineOffAConversationLookupHasNoCachedPhase() async throws {
        let h = try ReadHarness(enabled: false)
        try world(h)
        await h.login()
        XCTAssertEqual(lookUp(h, "bob", .user), ["server alice_user_bob"])
        XCTAssertEqual(lookUp(h, "bob", .user), ["server alice_user_bob"])
        let (cached, server) = await h.vault.getConversation(conversationWith: "team", conversationType: .group)
        XCTAssertNil(cached)
        XCTAssertEqual(try server.get()?.conversationId, "group_team")
    }

    // MARK: getMessageDetails

    func testAMessageCacheHitOnlineDeliversTheCachedCopyThenTheServers() async throws {
        let h = try ReadHarness()
        let ids = try world(h)
        await h.login()
        _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        XCTAssertEqual(lookUp(h, message: ids[1]), ["cached \(ids[1])", "server \(ids[1])"])
    }

    func testAMessageCacheMissOnlineGoesStraightToTheServerAndIsWrittenThrough() async throws {
        let h = try ReadHarness()
        let ids = try world(h)
        await h.login()
        XCTAssertEqual(lookUp(h, message: ids[0]), ["server \(ids[0])"])
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), [ids[0]], "written through")
        h.client.network = .offline
        XCTAssertEqual(lookUp(h, message: ids[0]), ["cached \(ids[0])", "error \(Self.internet)"])
        XCTAssertEqual(lookUp(h, message: ids[2]), ["error \(Self.internet)"], "offline, a miss goes straight to onError")
    }

    func testTheServersMessageReplacesTheCachedCopy() async throws {
        let h = try ReadHarness()
        let ids = try world(h)
        await h.login()
        _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        try h.simulator.edit(ids[2], to: .text("edited"))
        let (cached, server) = await h.vault.getMessageDetails(ids[2])
        XCTAssertNotEqual((cached as? TextMessage)?.text, "edited")
        XCTAssertEqual((try server.get() as? TextMessage)?.text, "edited")
        h.client.network = .offline
        let (after, _) = await h.vault.getMessageDetails(ids[2])
        XCTAssertEqual((after as? TextMessage)?.text, "edited", "written through")
        XCTAssertEqual(after?.messageStatus, .sent)
    }

    func testAMessageServerErrorIsUnchangedAndANotFoundForgetsTheCachedCopy() async throws {
        let h = try ReadHarness()
        let ids = try world(h)
        await h.login()
        _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        h.client.failNext(.message, with: .status(503, code: "ERR_UNAVAILABLE"))
        XCTAssertEqual(lookUp(h, message: ids[0]), ["cached \(ids[0])", "error ERR_UNAVAILABLE"])
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), ids)
        h.client.failNext(.message, with: .status(404, code: "ERR_NOT_FOUND"))
        XCTAssertEqual(lookUp(h, message: ids[0]), ["cached \(ids[0])", "error ERR_NOT_FOUND"])
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), Array(ids.dropFirst()))
    }

    func testAHostileMessageIsRefusedAndTheCacheIsUnchanged() async throws {
        let hostile: [(String, @Sendable (JSONValue) -> JSONValue)] = [
            ("missing field", { v in JSONValue.object((v.objectValue ?? [:]).filter { $0.key != "sentAt" }) }),
            ("huge string", { v in
                var o = v.objectValue ?? [:]
                o["data"] = ["text": .string(String(repeating: "x", count: 300 * 1024))]
                return .object(o)
            }),
            ("wrong type", { v in
                var o = v.objectValue ?? [:]
                o["conversationId"] = 12
                return .object(o)
            }),
            ("another message", { v in
                var o = v.objectValue ?? [:]
                o["id"] = .int((o["id"]?.intValue ?? 0) + 1)
                return .object(o)
            }),
        ]
        for (name, corrupt) in hostile {
            let h = try ReadHarness()
            let ids = try world(h)
            await h.login()
            _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
            try h.whileAway { try h.simulator.edit(ids[0], to: .text("changed")) }
            h.client.failNext(.message, with: .payload(corrupt))
            XCTAssertEqual(lookUp(h, message: ids[0]), ["cached \(ids[0])", "error ERROR_INVALID_SERVER_RESPONSE"], name)
            h.client.network = .offline
            let (cached, _) = await h.vault.getMessageDetails(ids[0])
            XCTAssertNotEqual((cached as? TextMessage)?.text, "changed", "\(name): cache unchanged")
            XCTAssertEqual(try h.cachedIds("alice_user_bob"), ids, name)
        }
    }

    func testTheClassicGetMessageDetailsNeverDeliversTheCachedCopy() async throws {
        let h = try ReadHarness()
        let ids = try world(h)
        await h.login()
        _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        h.client.failNext(.message, with: .delay(.milliseconds(100)))
        XCTAssertEqual(classicMessage(h, ids[0]), ["success \(ids[0])"], "the server's copy only")
        h.client.network = .offline
        XCTAssertEqual(classicMessage(h, ids[0]), ["error \(Self.internet)"], "the cached copy is never delivered")
    }

    // MARK: The listener's lifetime

    func testTheEngineHoldsTheListenerUntilTheLookupEnds() async throws {
        let h = try ReadHarness()
        let ids = try world(h)
        await h.login()
        _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        // Slow answers, so the lookups are still running when the app's reference is gone.
        h.client.failNext(.conversation, with: .delay(.milliseconds(300)))
        h.client.failNext(.message, with: .delay(.milliseconds(300)))
        let log = EventLog()
        let settled = DispatchSemaphore(value: 0)
        let released = DispatchSemaphore(value: 0)
        do {
            let conversationListener = DetachedRecorder(log: log, settled: settled, released: released)
            h.vault.getConversation(conversationWith: "bob", conversationType: .user, listener: conversationListener)
            let messageListener = DetachedRecorder(log: log, settled: settled, released: released)
            h.vault.getMessageDetails(ids[1], listener: messageListener)
        }
        // The test's own references ended with the scope; both lookups still deliver.
        XCTAssertEqual(settled.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(settled.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(Set(log.all), ["server alice_user_bob", "cached \(ids[1])", "server \(ids[1])"])
        // ... and lets them go once they have.
        XCTAssertEqual(released.wait(timeout: .now() + 10), .success, "released after the lookup ended")
        XCTAssertEqual(released.wait(timeout: .now() + 10), .success)
    }

    func testEveryListenerMethodIsOptional() async throws {
        let h = try ReadHarness()
        let ids = try world(h)
        await h.login()
        h.vault.getConversation(conversationWith: "bob", conversationType: .user, listener: SilentConversationListener())
        h.vault.getMessageDetails(ids[0], listener: SilentMessageListener())
        // Both lookups complete (and write through) with a listener that implements nothing.
        for _ in 0..<500 {
            if try !h.cachedIds("alice_user_bob").isEmpty && !h.cachedConversationIds().isEmpty { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), [ids[0]])
        XCTAssertEqual(try h.cachedConversationIds(), ["alice_user_bob"])
    }

    // MARK: The static facade

    func testTheStaticSpellingForwardsToTheInstalledVault() async throws {
        let h = try ReadHarness()
        let ids = try world(h)
        await h.login()
        _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        _ = await h.conversations().fetchNext()
        CometChat.offlineVault = h.vault
        let conversation = LookupRecorder()
        CometChat.getConversation(conversationWith: "bob", conversationType: .user, listener: conversation)
        conversation.wait()
        XCTAssertEqual(conversation.recorded, ["cached alice_user_bob", "server alice_user_bob"])
        let message = LookupRecorder()
        CometChat.getMessageDetails(ids[2], listener: message)
        message.wait()
        XCTAssertEqual(message.recorded, ["cached \(ids[2])", "server \(ids[2])"])

        let log = Mutex<[String]>([])
        let settled = DispatchSemaphore(value: 0)
        CometChat.getConversation(conversationWith: "team", conversationType: .group, onSuccess: { c in
            log.withLock { $0.append("success \(c?.conversationId ?? "nil")") }
            settled.signal()
        }, onError: { _ in settled.signal() })
        XCTAssertEqual(settled.wait(timeout: .now() + 10), .success)
        CometChat.getMessageDetails(ids[0]) { m in
            log.withLock { $0.append("success \(m.id)") }
            settled.signal()
        } onError: { _ in
            settled.signal()
        }
        XCTAssertEqual(settled.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(log.withLock { $0 }, ["success group_team", "success \(ids[0])"])
    }

    func testWithoutAVaultTheStaticLookupsReportNotLoggedIn() {
        CometChat.offlineVault = nil
        let log = Mutex<[String]>([])
        let settled = DispatchSemaphore(value: 0)
        let onError: @Sendable (CometChatException?) -> Void = { e in
            log.withLock { $0.append(e?.errorCode ?? "nil") }
            settled.signal()
        }
        // The facade reports on the main queue; this test's thread is not it, so run it briefly.
        CometChat.getConversation(conversationWith: "bob", conversationType: .user, onSuccess: { _ in }, onError: onError)
        CometChat.getMessageDetails(1, onSuccess: { _ in }, onError: onError)
        let deadline = Date().addingTimeInterval(10)
        while log.withLock({ $0.count }) < 2 && Date() < deadline {
            RunLoop.main.run(until: Date().addingTimeInterval(0.01))
        }
        XCTAssertEqual(log.withLock { $0 }, Array(repeating: CometChatConstants.Errors.ERROR_USER_NOT_LOGGED_IN, count: 2))
    }
}
