import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

/// The one way in (`CacheWriter`): a realtime event and a page of the catch-up log are written by
/// the same rules, each message's status and source resolved once, and every committed batch
/// published to the subscribers in commit order.
final class CacheWriterTests: XCTestCase, Polling {
    func harness() async throws -> OutboxHarness {
        try await connectedHarness()
    }

    final class Heard: CometChatMessageDelegate, @unchecked Sendable {
        let edited = Mutex<[BaseMessage]>([])
        func onMessageEdited(message: BaseMessage) { edited.withLock { $0.append(message) } }
    }

    /// A message the catch-up cached (`.sync`) and then edited in realtime: the delivered edit says
    /// how its cached row arrived, as a read of the cache does (it said `.realtime` before the one
    /// writer resolved it).
    func testARealtimeChangeIsDeliveredWithTheSourceOfItsCachedRow() async throws {
        let h = try await harness()
        // Offline while it is posted: only the page below caches it.
        h.client.network = .offline
        try await waitUntil("disconnected") { !h.client.isConnected }
        let id = try h.simulator.postText("first words", from: "bob", to: .user("alice"))
        let wire = try XCTUnwrap(h.simulator.messageJSON(id, as: "alice"))
        let message = try WireDecoder(limits: WireLimits()).message(wire)
        let cache = try XCTUnwrap(h.vault.openCache)
        let applied = try await h.vault.incoming.commit(page: [.upsert(wire, message, encoded: BinaryJSON.encode(wire))], me: "alice",
                                                        cache: cache, limits: WireLimits(), serverTime: 1, nextToken: "t1",
                                                        outcome: nil, inFlight: [])
        XCTAssertEqual(applied.inserted.map(\.source), [.sync])
        h.client.network = .online
        try await waitUntil("connected again") { h.client.isConnected }
        await h.vault.waitForSyncIdle()

        let heard = Heard()
        h.vault.addMessageListener("edits", heard)
        try h.simulator.edit(id, to: .text("new words"))
        try await waitUntil("the edit heard") { h.drain(); return !heard.edited.withLock { $0 }.isEmpty }
        let delivered = try XCTUnwrap(heard.edited.withLock { $0.first })
        XCTAssertEqual(delivered.source, .sync, "the delivery says how the cached row arrived")
        let cached = await MessagesRequest.MessageRequestBuilder(vault: h.vault).set(uid: "bob").set(limit: 10).build().fetchPrevious().cached
        XCTAssertEqual(cached?.first { $0.id == id }?.source, .sync)
        XCTAssertEqual((cached?.first { $0.id == id } as? TextMessage)?.text, "new words")
        XCTAssertEqual(delivered.messageStatus, cached?.first { $0.id == id }?.messageStatus, "one status for both")
    }

    /// Every committed batch reaches a subscriber once, in commit order, after its commit (its
    /// rows are readable when the subscriber runs).
    func testSubscribersSeeEachCommittedBatchAfterItsCommit() async throws {
        let h = try await harness()
        let seen = Mutex<[String]>([])
        let cache = try XCTUnwrap(h.vault.openCache)
        h.vault.incoming.subscribe { committed in
            let line: String
            switch committed {
            case .realtime(let parsed, let wrote):
                if case .received(_, let m) = parsed {
                    let stored = (try? cache.reader.sync { db in try db.scalarInt("SELECT count(*) FROM messages WHERE server_id = ?", .int(Int64(m.id))) }) ?? nil
                    line = "realtime \(m.id) wrote=\(wrote) stored=\(stored ?? -1)"
                } else {
                    line = "realtime other"
                }
            case .syncPage(let applied):
                line = "page \(applied.inserted.map(\.id))"
            case .stored(let messages):
                line = "stored \(messages.map(\.id))"
            case .removed(let ids):
                line = "removed \(ids)"
            case .media(let message):
                line = "media \(message.map(\.description) ?? "-")"
            }
            seen.withLock { $0.append(line) }
        }
        let first = try h.simulator.postText("one", from: "bob", to: .user("alice"))
        try await waitUntil("the realtime message") { seen.withLock { $0.contains { $0.hasPrefix("realtime \(first)") } } }
        let second = try h.simulator.postText("two", from: "bob", to: .user("alice"))
        let wire = try XCTUnwrap(h.simulator.messageJSON(second, as: "alice"))
        let message = try WireDecoder(limits: WireLimits()).message(wire)
        _ = try await h.vault.incoming.commit(page: [.upsert(wire, message, encoded: BinaryJSON.encode(wire))], me: "alice", cache: cache,
                                              limits: WireLimits(), serverTime: 2, nextToken: "t2", outcome: nil, inFlight: [])
        let lines = seen.withLock { $0 }
        XCTAssertEqual(lines.first { $0.hasPrefix("realtime \(first)") }, "realtime \(first) wrote=true stored=1")
        XCTAssertTrue(lines.contains("page []") || lines.contains("page [\(second)]"), "\(lines)")
    }

    /// What the app's own calls store (a read's page, a send's acknowledgement) is published too,
    /// after its commit: the hook a search index (and eviction) subscribes to.
    func testServerCopiesOfReadsAndSendsArePublishedAfterTheirCommit() async throws {
        let h = try await harness()
        let stored = Mutex<[[Int]]>([])
        let cache = try XCTUnwrap(h.vault.openCache)
        h.vault.incoming.subscribe { committed in
            guard case .stored(let messages) = committed else { return }
            // Committed already: every published message is readable.
            let readable = messages.allSatisfy { m in
                ((try? cache.reader.sync { db in try db.scalarInt("SELECT count(*) FROM messages WHERE server_id = ?", .int(Int64(m.id))) }) ?? nil) == 1
            }
            stored.withLock { $0.append(readable ? messages.map(\.id) : [-1]) }
        }
        let posted = try h.simulator.postText("a page", from: "bob", to: .user("alice"))
        _ = await MessagesRequest.MessageRequestBuilder(vault: h.vault).set(uid: "bob").set(limit: 30).build().fetchPrevious()
        XCTAssertTrue(stored.withLock { $0 }.contains { $0.contains(posted) }, "the read's page: \(stored.withLock { $0 })")

        let sent = Mutex<Int?>(nil)
        for await step in h.vault.send(TextMessage(receiverUid: "bob", text: "an answer", receiverType: .user)) {
            if case .sent(let m) = step { sent.withLock { $0 = m.id } }
        }
        let id = try XCTUnwrap(sent.withLock { $0 })
        try await waitUntil("the acknowledgement published") { stored.withLock { $0 }.contains { $0 == [id] } }
        XCTAssertFalse(stored.withLock { $0 }.contains([-1]), "nothing published before its commit")
    }

    /// A read that finds a cached message gone from the server (its page's reconcile, a lookup's
    /// 404) removes it and publishes the removal, after the commit, once: what an index of the
    /// cache (the search index) must drop.
    func testRemovalsByReadsArePublishedAfterTheirCommit() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 6))
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        let cache = try XCTUnwrap(h.vault.openCache)
        let removed = Mutex<[[Int]]>([])
        h.vault.incoming.subscribe { committed in
            guard case .removed(let gone) = committed else { return }
            // Committed already: none of them is still cached.
            let stillCached = gone.contains { id in
                ((try? cache.reader.sync { db in try db.scalarInt("SELECT count(*) FROM messages WHERE server_id = ?", .int(Int64(id.rawValue))) }) ?? nil) != 0
            }
            removed.withLock { $0.append(stillCached ? [-1] : gone.map(\.rawValue)) }
        }
        // The server's page no longer holds ids[2].
        let goneFromPage = ids[2]
        h.client.failNext(.messages, with: .page { page in
            WirePage(items: page.items.filter { $0["id"]?.intValue != Int64(goneFromPage) }, nextCursor: page.nextCursor)
        })
        _ = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        XCTAssertEqual(removed.withLock { $0 }, [[goneFromPage]])
        // A page that removes nothing publishes no removal (it brings ids[2] back: only the
        // first page hid it).
        _ = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        XCTAssertEqual(removed.withLock { $0 }, [[goneFromPage]])
        // A lookup the server answers 404.
        h.client.failNext(.message, with: .status(404, code: "ERR_NOT_FOUND"))
        _ = await h.vault.getMessageDetails(ids[0])
        XCTAssertEqual(removed.withLock { $0 }, [[goneFromPage], [ids[0]]])
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), Array(ids.dropFirst()))
    }
}
