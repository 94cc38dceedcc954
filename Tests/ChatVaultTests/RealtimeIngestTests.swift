import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest
@testable import ChatVault

/// Realtime ingest: events from the simulator's connection are validated, written to the encrypted
/// cache, then delivered to message listeners and streams in arrival order.
final class RealtimeIngestTests: XCTestCase, Polling {
    // MARK: - Support

    /// What a message listener heard, as short lines (`kind id …`), in order.
    final class MessageRecorder: CometChatMessageDelegate, @unchecked Sendable {
        private let lines = Mutex<[String]>([])
        private let sources = Mutex<[MessageSource]>([])
        let name: String

        init(_ name: String = "") { self.name = name }

        var recorded: [String] { lines.withLock { $0 } }
        var messageSources: [MessageSource] { sources.withLock { $0 } }

        private func note(_ line: String, _ message: BaseMessage? = nil) {
            lines.withLock { $0.append(line) }
            if let message { sources.withLock { $0.append(message.source) } }
        }

        func onTextMessageReceived(textMessage: TextMessage) { note("text \(textMessage.id)", textMessage) }
        func onMediaMessageReceived(mediaMessage: MediaMessage) { note("media \(mediaMessage.id)", mediaMessage) }
        func onCustomMessageReceived(customMessage: CustomMessage) { note("custom \(customMessage.id)", customMessage) }
        func onMessageEdited(message: BaseMessage) { note("edited \(message.id)", message) }
        func onMessageDeleted(message: BaseMessage) { note("deleted \(message.id)", message) }
        func onMessageReactionAdded(reactionEvent: ReactionEvent) {
            note("reacted \(reactionEvent.reaction.messageId) \(reactionEvent.reaction.reaction) \(reactionEvent.reaction.uid)")
        }
        func onMessageReactionRemoved(reactionEvent: ReactionEvent) {
            note("unreacted \(reactionEvent.reaction.messageId) \(reactionEvent.reaction.reaction) \(reactionEvent.reaction.uid)")
        }
        func onMessagesDelivered(receipt: MessageReceipt) { note("delivered \(receipt.messageId) \(receipt.sender.uid)") }
        func onMessagesRead(receipt: MessageReceipt) { note("read \(receipt.messageId) \(receipt.sender.uid)") }
    }

    /// A vault logged in as alice over the simulator, connected, with eviction runs `evictionDelay`
    /// after writes.
    func harness(configure: @escaping (OfflineConfig.Builder) -> Void = { _ in },
                 evictionDelay: Duration = .seconds(3600)) async throws -> OutboxHarness {
        try await connectedHarness(configure: configure, evictionDelay: evictionDelay)
    }

    /// Waits until `recorder` heard `count` events (after the callback queue drained).
    func heard(_ count: Int, _ recorder: MessageRecorder, _ h: OutboxHarness) async throws -> [String] {
        try await waitUntil("\(count) events") {
            h.drain()
            return recorder.recorded.count >= count
        }
        h.drain()
        return recorder.recorded
    }

    /// The cached page of the conversation with `uid`, as an offline read delivers it.
    func cachedMessages(_ h: OutboxHarness, with uid: String = "bob") async -> [BaseMessage] {
        let request = MessagesRequest.MessageRequestBuilder(vault: h.vault).set(uid: uid).set(limit: 100).build()
        return await request.fetchPrevious().cached ?? []
    }

    /// The cached conversation list (its cached phase).
    func cachedConversations(_ h: OutboxHarness) async -> [Conversation] {
        await ConversationRequest.ConversationRequestBuilder(limit: 50, vault: h.vault).build().fetchNext().cached ?? []
    }

    func rowCount(_ h: OutboxHarness, _ conversationId: String) throws -> Int {
        let cache = try XCTUnwrap(h.vault.openCache)
        return try cache.reader.sync { db in
            Int(try db.scalarInt("SELECT count(*) FROM messages WHERE conversation_id = ?", .text(conversationId)) ?? -1)
        }
    }

    func unread(_ h: OutboxHarness, _ conversationId: String) throws -> Int? {
        let cache = try XCTUnwrap(h.vault.openCache)
        return try cache.reader.sync { db in
            try db.scalarInt("SELECT unread_count FROM conversations WHERE id = ?", .text(conversationId)).map(Int.init)
        }
    }

    // MARK: - Every kind of event

    func testEveryEventKindIsCachedThenDeliveredInArrivalOrder() async throws {
        let h = try await harness()
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        let sim = h.simulator
        let conversation = h.conversationId(with: "bob")

        let text = try sim.postText("hello", from: "bob", to: .user("alice"))
        let media = try sim.postMedia(.image, [SimulatedAttachment(name: "cat.jpg", mimeType: "image/jpeg", url: "https://media.test/cat.jpg")],
                                      caption: "cat", from: "bob", to: .user("alice"))
        let custom = try sim.post(.custom(type: "location", data: ["lat": 1.5]), from: "bob", to: .user("alice"))
        _ = try await heard(3, recorder, h)
        XCTAssertEqual(try unread(h, conversation), 3, "three unread messages from bob")

        try sim.edit(text, to: .text("hello, edited"), by: "bob")
        try sim.react("👍", to: text, by: "bob")
        try sim.react("🎉", to: text, by: "bob")
        try sim.unreact("🎉", to: text, by: "bob")
        try sim.delete(media, by: "bob")
        let mine = try sim.postText("my answer", from: "alice", to: .user("bob"))
        try sim.markDelivered(upTo: mine, by: "bob")
        try sim.markRead(upTo: mine, by: "bob")
        let events = try await heard(11, recorder, h)
        XCTAssertEqual(events, [
            "text \(text)", "media \(media)", "custom \(custom)", "edited \(text)", "reacted \(text) 👍 bob", "reacted \(text) 🎉 bob",
            "unreacted \(text) 🎉 bob", "deleted \(media)", "text \(mine)", "delivered \(mine) bob", "read \(mine) bob",
        ], "arrival order")
        XCTAssertTrue(recorder.messageSources.allSatisfy { $0 == .realtime })
        XCTAssertEqual(try unread(h, conversation), 2, "the deleted unread message no longer counts")

        let page = await cachedMessages(h)
        XCTAssertEqual(page.map(\.id), [text, media, custom, mine])
        let edited = try XCTUnwrap(page.first as? TextMessage)
        XCTAssertEqual(edited.text, "hello, edited")
        XCTAssertEqual(edited.reactions, [ReactionCount(reaction: "👍", count: 1, reactedByMe: false)])
        XCTAssertTrue(page[1].deletedAt > 0)
        XCTAssertEqual((page[2] as? CustomMessage)?.type, "location")
        XCTAssertEqual(page[3].messageStatus, .read, "bob's read receipt reached the cached copy")
        XCTAssertTrue(page.allSatisfy { $0.source == .realtime })

        let conversations = await cachedConversations(h)
        let cached = try XCTUnwrap(conversations.first { $0.conversationId == conversation }, "created from the first message")
        XCTAssertEqual(cached.lastMessage?.id, mine)
        XCTAssertEqual((cached.conversationWith as? User)?.uid, "bob")

        // Alice read the conversation on another device: her read receipt clears the count.
        try sim.markRead(upTo: mine, by: "alice")
        _ = try await heard(12, recorder, h)
        XCTAssertEqual(recorder.recorded.last, "read \(mine) alice")
        XCTAssertEqual(try unread(h, conversation), 0)
        XCTAssertEqual(h.vault.droppedRealtimeEvents, 0)

        // Offline, the cached page still shows it all.
        h.client.network = .offline
        let offline = await cachedMessages(h)
        XCTAssertEqual(offline.map(\.id), [text, media, custom, mine])
        XCTAssertEqual(offline.map(\.messageStatus), [.sent, .sent, .sent, .read])
    }

    // MARK: - Listeners

    func testListenersByIdWeakOnePerIdAndTheStream() async throws {
        let h = try await harness()
        let replaced = MessageRecorder("replaced"), current = MessageRecorder("current"), removed = MessageRecorder("removed")
        h.vault.addMessageListener("screen", replaced)
        h.vault.addMessageListener("screen", current) // one per id: replaces
        h.vault.addMessageListener("gone", removed)
        h.vault.removeMessageListener("gone")
        let released = Mutex<[String]>([])
        final class Released: CometChatMessageDelegate, @unchecked Sendable {
            let sink: @Sendable (String) -> Void
            init(_ sink: @escaping @Sendable (String) -> Void) { self.sink = sink }
            func onTextMessageReceived(textMessage: TextMessage) { sink("text \(textMessage.id)") }
        }
        do {
            let transient = Released { line in released.withLock { $0.append(line) } }
            h.vault.addMessageListener("transient", transient)
        }
        let stream = h.vault.messageEvents()
        let collected = Task { () -> [String] in
            var out: [String] = []
            for await event in stream {
                switch event {
                case .received(let m): out.append("received \(m.id) \(m.source)")
                case .edited(let m): out.append("edited \(m.id)")
                default: out.append("other")
                }
                if out.count == 2 { break }
            }
            return out
        }
        let id = try h.simulator.postText("one", from: "bob", to: .user("alice"))
        try h.simulator.edit(id, to: .text("one, edited"), by: "bob")
        let heardByCurrent = try await heard(2, current, h)
        XCTAssertEqual(heardByCurrent, ["text \(id)", "edited \(id)"])
        XCTAssertEqual(replaced.recorded, [], "replaced by the second listener of the same id")
        XCTAssertEqual(removed.recorded, [], "removed")
        XCTAssertEqual(released.withLock { $0 }, [], "held weakly: a released listener hears nothing")
        let streamed = await collected.value
        XCTAssertEqual(streamed, ["received \(id) realtime", "edited \(id)"])

        // The facade registers on the shared vault.
        CometChat.offlineVault = h.vault
        defer { CometChat.offlineVault = nil }
        let viaFacade = MessageRecorder()
        CometChat.addMessageListener("facade", viaFacade)
        let second = try h.simulator.postText("two", from: "bob", to: .user("alice"))
        let heardViaFacade = try await heard(1, viaFacade, h)
        XCTAssertEqual(heardViaFacade, ["text \(second)"])
        CometChat.removeMessageListener("facade")
        let third = try h.simulator.postText("three", from: "bob", to: .user("alice"))
        _ = try await heard(4, current, h)
        XCTAssertEqual(current.recorded.last, "text \(third)")
        XCTAssertEqual(viaFacade.recorded, ["text \(second)"], "removed through the facade")
    }

    // MARK: - Hostile events

    func testHostileEventsAreDroppedAndCountedAndTheStreamGoesOn() async throws {
        let h = try await harness()
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        let good = try h.simulator.postText("first", from: "bob", to: .user("alice"))
        _ = try await heard(1, recorder, h)
        let valid = try XCTUnwrap(h.simulator.messageJSON(good, as: "alice"))
        func with(_ key: String, _ value: JSONValue?) -> JSONValue {
            guard case .object(var fields) = valid else { return valid }
            fields[key] = value
            return .object(fields)
        }
        var deep: JSONValue = "bottom"
        // Deep enough to exceed the bound several times over; not thousands of levels: releasing
        // such a value recurses in the Swift runtime, on whatever thread drops it last.
        for _ in 0..<300 { deep = .array([deep]) }
        let hostile: [RealtimeEvent] = [
            .messageReceived(["id": "not a number"]),
            .messageReceived(.array([1, 2, 3])),
            .messageReceived(with("id", .int(Int64.max))),
            .messageReceived(with("id", .double(9.3e18))),
            .messageReceived(with("id", 0)),
            .messageReceived(with("sentAt", .int(1 << 62))),
            .messageReceived(with("conversationId", nil)),
            .messageReceived(with("receiver", .int(7))),
            .messageReceived(with("data", ["text": .string(String(repeating: "x", count: WireLimits().maxTextBytes + 1))])),
            .messageReceived(with("unknownField", .string(String(repeating: "y", count: 4 << 20)))),
            .messageReceived(with("nested", deep)),
            .messageEdited(with("deletedAt", .double(-.infinity))),
            .messageDeleted(with("sender", "bob")),
            .reactionAdded(["conversationId": "alice_user_bob", "receiverId": "alice"]),
            .reactionAdded(["reaction": ["id": "1", "messageId": .int(Int64.max), "reaction": "👍", "uid": "bob"],
                            "conversationId": "alice_user_bob", "receiverId": "alice"]),
            .reactionRemoved(["reaction": ["id": "1", "messageId": .int(Int64(good)), "reaction": "👍", "uid": "bob"],
                              "conversationId": "alice_user_bob", "receiverId": "alice", "message": with("id", .int(Int64(good) + 1))]),
            .messagesRead(["messageId": 0, "sender": ["uid": "bob"], "receiverId": "alice", "conversationId": "alice_user_bob"]),
            .messagesRead(["messageId": .int(Int64(good)), "sender": ["uid": "bob"], "receiverId": "alice", "conversationId": "alice_user_bob",
                           "receiptType": "delivered"]),
            .messagesDelivered(["messageId": .int(Int64(good)), "sender": "bob", "receiverId": "alice", "conversationId": "alice_user_bob"]),
            .messagesDelivered(["messageId": .int(Int64(good)), "sender": ["uid": "bob"], "receiverId": "alice", "conversationId": "alice_user_bob",
                                "timestamp": .double(.nan)]),
        ]
        for event in hostile { h.client.deliver(event) }
        let after = try h.simulator.postText("still flowing", from: "bob", to: .user("alice"))
        let delivered = try await heard(2, recorder, h)
        XCTAssertEqual(delivered, ["text \(good)", "text \(after)"], "nothing hostile delivered; later events arrive")
        XCTAssertEqual(h.vault.droppedRealtimeEvents, hostile.count)
        XCTAssertEqual(try rowCount(h, h.conversationId(with: "bob")), 2)
        XCTAssertEqual(try unread(h, h.conversationId(with: "bob")), 2)
        let page = await cachedMessages(h)
        XCTAssertEqual(page.map(\.id), [good, after])
        XCTAssertEqual((page.first as? TextMessage)?.text, "first", "no hostile edit reached the cache")
    }

    // MARK: - Duplicates

    func testADuplicateOrAnAlreadyCachedMessageIsUpdatedNotDuplicatedNorCountedTwice() async throws {
        let h = try OutboxHarness()
        addTeardownBlock { await h.vault.logout() }
        // Sent while alice was away: a read's server phase caches it (and the conversation).
        let old = try h.simulator.postText("while away", from: "bob", to: .user("alice"))
        await h.login()
        try await waitUntil("connected") { h.client.isConnected }
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        let conversation = h.conversationId(with: "bob")
        _ = await MessagesRequest.MessageRequestBuilder(vault: h.vault).set(uid: "bob").set(limit: 30).build().fetchPrevious()
        _ = await ConversationRequest.ConversationRequestBuilder(limit: 30, vault: h.vault).build().fetchNext()
        XCTAssertEqual(try unread(h, conversation), 1)

        // The same message arrives over the connection (a redelivery): updated, not counted again.
        h.client.deliver(.messageReceived(try XCTUnwrap(h.simulator.messageJSON(old, as: "alice"))))
        let new = try h.simulator.postText("live", from: "bob", to: .user("alice"))
        h.client.deliver(.messageReceived(try XCTUnwrap(h.simulator.messageJSON(new, as: "alice"))))
        _ = try await heard(3, recorder, h)
        XCTAssertEqual(try rowCount(h, conversation), 2)
        XCTAssertEqual(try unread(h, conversation), 2, "each message counted once")
        let page = await cachedMessages(h)
        XCTAssertEqual(page.map(\.id), [old, new])

        // A conversation summary the server wrote after a message already counts it: the message's
        // event arriving after the conversation read is not counted again.
        h.client.network = .offline
        let raced = try h.simulator.postText("raced", from: "bob", to: .user("alice"))
        h.client.network = .online
        try await waitUntil("reconnected") { h.client.isConnected }
        _ = await ConversationRequest.ConversationRequestBuilder(limit: 30, vault: h.vault).build().fetchNext()
        XCTAssertEqual(try unread(h, conversation), 3)
        h.client.deliver(.messageReceived(try XCTUnwrap(h.simulator.messageJSON(raced, as: "alice"))))
        _ = try await heard(4, recorder, h)
        XCTAssertEqual(try unread(h, conversation), 3, "counted once, by the server's summary")
        XCTAssertEqual(try rowCount(h, conversation), 3)

        // A thread reply and the user's own message do not count as unread.
        _ = try h.simulator.postText("in a thread", from: "bob", to: .user("alice"), parentId: new)
        _ = try h.simulator.postText("mine", from: "alice", to: .user("bob"))
        _ = try await heard(6, recorder, h)
        XCTAssertEqual(try unread(h, conversation), 3)
    }

    func testAnEchoOfOurOwnUnackedSendIsLeftToTheOutbox() async throws {
        let h = try await harness()
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        h.client.network = .offline
        let sent = h.send(h.text("queued"))
        try await waitUntil("pending") { h.drain(); return !sent.events.isEmpty }
        let pending = try await h.pending()
        let local = try XCTUnwrap(pending.first?.localMessageId)
        // The server's copy, as an echo would carry it, arriving before the acknowledgement.
        let posted = try h.simulator.postText("queued", from: "alice", to: .user("bob"))
        guard case .object(var echo) = try XCTUnwrap(h.simulator.messageJSON(posted, as: "alice")) else { return XCTFail("an object") }
        echo["localMessageId"] = .string(local)
        h.client.deliver(.messageReceived(.object(echo)))
        // Two messages claiming the same local id (unique in the cache): both are cached.
        var claims: [Int] = []
        for body in ["one", "two"] {
            let id = try h.simulator.postText(body, from: "bob", to: .user("alice"))
            guard case .object(var claim) = try XCTUnwrap(h.simulator.messageJSON(id, as: "alice")) else { return XCTFail("an object") }
            claim["localMessageId"] = "claimed"
            h.client.deliver(.messageReceived(.object(claim)))
            claims.append(id)
        }
        _ = try await heard(3, recorder, h)
        let cache = try XCTUnwrap(h.vault.openCache)
        func rows(_ id: Int) throws -> Int64? {
            try cache.reader.sync { db in try db.scalarInt("SELECT count(*) FROM messages WHERE server_id = ?", .int(Int64(id))) }
        }
        XCTAssertEqual(try rows(posted), 0, "the outbox owns the message until it is acknowledged")
        XCTAssertEqual(try rows(claims[0]), 1)
        XCTAssertEqual(try rows(claims[1]), 1, "written without the local id the first one holds")
        XCTAssertEqual(try h.cachedLocalId(ofServerId: claims[0]), "claimed")
        XCTAssertEqual(try h.cachedLocalId(ofServerId: claims[1]), nil)
        let stillPending = try await h.pending()
        XCTAssertEqual(stillPending.map(\.localMessageId), [local], "still pending")
    }

    func testAReactionWithoutItsMessageIsDeliveredAndLeavesTheCacheAsItWas() async throws {
        let h = try await harness()
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        let id = try h.simulator.postText("vote", from: "bob", to: .user("alice"))
        _ = try await heard(1, recorder, h)
        h.client.deliver(.reactionAdded(["reaction": ["id": "r1", "messageId": .int(Int64(id)), "reaction": "🔥", "uid": "bob", "reactedAt": 5],
                                         "receiverId": "alice", "receiverType": "user", "conversationId": "alice_user_bob"]))
        let events = try await heard(2, recorder, h)
        XCTAssertEqual(events.last, "reacted \(id) 🔥 bob")
        let page = await cachedMessages(h)
        XCTAssertEqual(page.first?.reactions, [], "no counts guessed from a delta")
        XCTAssertEqual(h.vault.droppedRealtimeEvents, 0)
    }

    func testSyncedMessagesReachOnMessagesSyncedAndTheStream() async throws {
        let h = try await harness()
        final class SyncRecorder: CometChatMessageDelegate, @unchecked Sendable {
            let batches = Mutex<[[Int]]>([])
            func onMessagesSynced(_ messages: [BaseMessage]) { batches.withLock { $0.append(messages.map(\.id)) } }
        }
        let recorder = SyncRecorder()
        h.vault.addMessageListener("sync", recorder)
        let stream = h.vault.messageEvents()
        let first = Task { () -> [MessageSource] in
            for await event in stream { if case .synced(let messages) = event { return messages.map(\.source) } }
            return []
        }
        let message = try WireDecoder(limits: WireLimits()).message(try XCTUnwrap(h.simulator.messageJSON(
            try h.simulator.postText("x", from: "bob", to: .user("alice")), as: "alice")))
        h.vault.realtime.deliverSynced([message])
        try await waitUntil("synced") { h.drain(); return !recorder.batches.withLock { $0 }.isEmpty }
        XCTAssertEqual(recorder.batches.withLock { $0 }, [[message.id]])
        let sources = await first.value
        XCTAssertEqual(sources, [.sync])
    }

    func testAConversationNotYetCachedIsCreatedFromAGroupMessage() async throws {
        let h = try await harness()
        try h.simulator.addGroup("team", name: "Team", members: ["alice", "bob", "carol"])
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        let id = try h.simulator.postText("hi team <@uid:alice>", from: "carol", to: .group("team"))
        _ = try await heard(1, recorder, h)
        let cached = await cachedConversations(h)
        let team = try XCTUnwrap(cached.first { $0.conversationId == "group_team" })
        XCTAssertEqual(team.conversationType, .group)
        XCTAssertEqual((team.conversationWith as? Group)?.guid, "team")
        XCTAssertEqual(team.lastMessage?.id, id)
        XCTAssertEqual(team.unreadMessageCount, 1)
        XCTAssertEqual(team.unreadMentionsCount, 1, "it mentions alice")
        let page = await MessagesRequest.MessageRequestBuilder(vault: h.vault).set(guid: "team").set(limit: 10).build().fetchPrevious()
        XCTAssertEqual(page.cached?.map(\.id), [id])
    }

    func testARealtimeReplyCountsOnItsCachedParent() async throws {
        let h = try await harness()
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        let parent = try h.simulator.postText("question", from: "bob", to: .user("alice"))
        _ = try h.simulator.postText("answer 1", from: "bob", to: .user("alice"), parentId: parent)
        _ = try h.simulator.postText("answer 2", from: "bob", to: .user("alice"), parentId: parent)
        _ = try await heard(3, recorder, h)
        let cache = try XCTUnwrap(h.vault.openCache)
        func replies() throws -> Int? {
            try cache.reader.sync { db in try MessageRows.message(id: parent, decoder: WireDecoder(limits: WireLimits(), trusted: true), in: db) }?.replyCount
        }
        XCTAssertEqual(try replies(), 2, "each reply new to the cache counts on its parent")
        // A redelivery of a reply the cache holds does not count again.
        let again = try XCTUnwrap(h.simulator.messageJSON(parent + 1, as: "alice"))
        let parsed = try XCTUnwrap(try RealtimeWire.parse(.messageReceived(again), limits: WireLimits()))
        _ = try cache.writer.sync { db in try db.transaction { try RealtimeRows.apply(parsed, me: "alice", limits: WireLimits(), in: db) } }
        XCTAssertEqual(try replies(), 2)
        XCTAssertEqual(h.simulator.messageJSON(parent, as: "alice")?["replyCount"]?.intValue, 2, "as the server counts them")
    }

    // MARK: - Eviction

    func testEvictionCapsHoldForIngestedMessages() async throws {
        let h = try await harness(configure: { $0.setMaxMessagesPerConversation(5) }, evictionDelay: .milliseconds(20))
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        var ids: [Int] = []
        for i in 0..<12 { ids.append(try h.simulator.postText("m\(i)", from: "bob", to: .user("alice"))) }
        _ = try await heard(12, recorder, h)
        try await waitUntil("eviction ran") { try self.rowCount(h, h.conversationId(with: "bob")) <= 5 }
        XCTAssertEqual(try rowCount(h, h.conversationId(with: "bob")), 5)
        h.client.network = .offline
        let page = await cachedMessages(h)
        XCTAssertEqual(page.map(\.id), Array(ids.suffix(5)), "the newest stay")
    }

    func testTheStorageBudgetHoldsForIngestedMessages() async throws {
        let budget: Int64 = 40_000
        let h = try await harness(configure: { $0.setMaxStorageSize(budget) }, evictionDelay: .milliseconds(20))
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        let filler = String(repeating: "x", count: 900)
        var ids: [Int] = []
        for i in 0..<120 {
            h.clock.advance(by: 1)
            ids.append(try h.simulator.postText("\(i) \(filler)", from: i % 2 == 0 ? "bob" : "carol", to: .user("alice")))
        }
        _ = try await heard(120, recorder, h)
        let cache = try XCTUnwrap(h.vault.openCache)
        try await waitUntil("eviction ran") { try cache.reader.sync { db in try Evictor.contentBytes(db) } <= budget }
        let left = try cache.reader.sync { db in try db.scalarInt("SELECT count(*) FROM messages") ?? 0 }
        XCTAssertGreaterThan(left, 0)
        XCTAssertLessThan(left, 120, "the oldest went")
        h.client.network = .offline
        let newest = await cachedMessages(h, with: "carol")
        XCTAssertEqual(newest.last?.id, ids.last, "the newest message stays")
    }

    func testTheAgeLimitHoldsForConversationsIngestLeftIdle() async throws {
        let h = try await harness(configure: { $0.setCacheDurationDays(1) }, evictionDelay: .milliseconds(20))
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        _ = try h.simulator.postText("old news", from: "bob", to: .user("alice"))
        _ = try await heard(1, recorder, h)
        h.clock.advance(by: 2 * 86_400)
        // A later message elsewhere triggers the eviction run that finds bob's idle conversation.
        _ = try h.simulator.postText("fresh", from: "carol", to: .user("alice"))
        _ = try await heard(2, recorder, h)
        try await waitUntil("eviction ran") { try self.rowCount(h, h.conversationId(with: "bob")) == 0 }
        XCTAssertEqual(try rowCount(h, h.conversationId(with: "carol")), 1, "the active conversation stays")
    }

    func testTheConversationCapHoldsForConversationsCreatedByIngest() async throws {
        let h = try await harness(configure: { $0.setMaxConversations(2) }, evictionDelay: .milliseconds(20))
        let recorder = MessageRecorder()
        h.vault.addMessageListener("recorder", recorder)
        for (i, peer) in ["bob", "carol", "dave"].enumerated() {
            h.clock.advance(by: 60)
            _ = try h.simulator.postText("hello \(i)", from: peer, to: .user("alice"))
        }
        _ = try await heard(3, recorder, h)
        try await waitUntil("eviction ran") { try self.rowCount(h, h.conversationId(with: "bob")) == 0 }
        h.client.network = .offline
        let kept = await cachedConversations(h)
        XCTAssertEqual(kept.compactMap(\.conversationId).sorted(), [h.conversationId(with: "carol"), h.conversationId(with: "dave")].sorted(),
                       "the least recently active conversation went, with its messages")
        XCTAssertEqual(try rowCount(h, h.conversationId(with: "carol")), 1)
        XCTAssertEqual(try rowCount(h, h.conversationId(with: "dave")), 1)
    }
}
