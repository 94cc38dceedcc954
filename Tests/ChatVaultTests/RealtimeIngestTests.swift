import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest
@testable import ChatVault

/// Realtime ingest: events from the simulator's connection are validated, written to the encrypted
/// cache, then delivered to message listeners and streams in arrival order.
final class RealtimeIngestTests: XCTestCase {
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
        let h = try OutboxHarness(configure: configure) { $0.evictionDelay = evictionDelay }
        await h.login()
        try await waitUntil("connected") { h.client.isConnected }
        return h
    }

    func waitUntil(_ what: String, timeout: Duration = .seconds(5), _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else { return XCTFail("timed out waiting: \(what)") }
            try await Task.sleep(for: .milliseconds(5))
        }
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
}
