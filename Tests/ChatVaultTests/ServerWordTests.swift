import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

/// A read's server phase is the server's word (`ChatBackend`'s contract): an empty page empties the
/// slice it covers, so a backend must throw when it does not know; and a rendering that lacks what
/// only the cache learnt (receipt times) never takes a message back.
final class ServerWordTests: XCTestCase {
    /// The simulator's client with one rule applied to what it answers.
    final class RuledBackend: ForwardingBackend {
        enum Rule: Sendable {
            case none
            /// Pages of this conversation come back empty (a backend that answers "nothing" for "I don't know").
            case emptyPages(MessageScope)
            /// Pages of this conversation throw `.unreachable` (what such a backend must do).
            case unreachable(MessageScope)
            /// Every message rendered without receipt times (a backend that cannot tell them).
            case withoutReceipts
        }

        let client: SimulatedClient
        var forwardee: any ChatBackend { client }
        let rule = Mutex(Rule.none)

        init(_ client: SimulatedClient) { self.client = client }

        static func stripped(_ m: JSONValue) -> JSONValue {
            .object((m.objectValue ?? [:]).filter { !["deliveredAt", "readAt", "deliveredToMeAt", "readByMeAt"].contains($0.key) })
        }

        func messages(_ q: MessageQuery) async throws(BackendError) -> WirePage {
            switch rule.withLock({ $0 }) {
            case .emptyPages(let scope) where q.scope == scope:
                return WirePage(items: [], nextCursor: nil)
            case .unreachable(let scope) where q.scope == scope:
                throw .unreachable
            case .withoutReceipts:
                let page = try await client.messages(q)
                return WirePage(items: page.items.map(Self.stripped), nextCursor: page.nextCursor)
            default:
                return try await client.messages(q)
            }
        }

        func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
            var page = try await client.changes(since: token, limit: limit)
            if case .withoutReceipts = rule.withLock({ $0 }) {
                page.changes = page.changes.map { change in
                    if case .messageUpserted(let m) = change { return .messageUpserted(Self.stripped(m)) }
                    return change
                }
            }
            return page
        }

        func latestSyncPoint() async throws(BackendError) -> ChangeLogPage { try await client.latestSyncPoint() }
    }

    func harness() throws -> (ReadHarness, RuledBackend) {
        let made = Mutex<RuledBackend?>(nil)
        let h = try ReadHarness(backend: { client in
            let backend = RuledBackend(client)
            made.withLock { $0 = backend }
            return backend
        }, settings: { $0.sync.forceCooldown = .zero })
        return (h, try XCTUnwrap(made.withLock { $0 }))
    }

    func primed() async throws -> (ReadHarness, RuledBackend, bob: [Int], carol: [Int]) {
        let (h, backend) = try harness()
        let bob = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 30))
        let carol = Array(try h.simulator.seedConversation(between: "alice", and: "carol", count: 10))
        await h.login()
        _ = try await h.messages { $0.set(uid: "bob").set(limit: 50) }.fetchPrevious().server.get()
        _ = try await h.messages { $0.set(uid: "carol").set(limit: 50) }.fetchPrevious().server.get()
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), bob)
        XCTAssertEqual(try h.cachedIds("alice_user_carol"), carol)
        return (h, backend, bob, carol)
    }

    func testAnEmptyServerPageEmptiesTheSliceItCoversAndNothingElse() async throws {
        let (h, backend, bob, carol) = try await primed()
        backend.rule.withLock { $0 = .emptyPages(.user("bob")) }

        // The newest 20 from the cache, then the server's word: nothing in that slice. The seeds'
        // reconcile drops cached items the slice omits; a short page reaches the start of the
        // conversation, so the slice is the whole conversation.
        let result = await h.messages { $0.set(uid: "bob").set(limit: 20) }.fetchPrevious()
        XCTAssertEqual(result.cached?.map(\.id), Array(bob.suffix(20)))
        XCTAssertEqual(try result.server.get().count, 0)
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), [], "the server said the slice is empty")
        XCTAssertEqual(try h.cachedIds("alice_user_carol"), carol, "another conversation is not touched")
        let cache = try XCTUnwrap(h.vault.openCache)
        XCTAssertEqual(try cache.reader.sync { db in try db.scalarInt("SELECT count(*) FROM messages") }, Int64(carol.count),
                       "nothing else is deleted")
    }

    func testABackendThatDoesNotKnowThrowsAndTheCacheKeepsEveryMessage() async throws {
        let (h, backend, bob, carol) = try await primed()
        backend.rule.withLock { $0 = .unreachable(.user("bob")) }
        for _ in 0..<2 {
            let result = await h.messages { $0.set(uid: "bob").set(limit: 20) }.fetchPrevious()
            XCTAssertEqual(result.cached?.map(\.id), Array(bob.suffix(20)))
            guard case .failure(let error) = result.server else { return XCTFail("the server phase fails") }
            XCTAssertEqual(error.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
        }
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), bob, "every cached message is still there")
        XCTAssertEqual(try h.cachedIds("alice_user_carol"), carol)
    }

    func testAPageOrACatchUpWithoutReceiptsNeverTakesAReadMessageBackToSent() async throws {
        let (h, backend) = try harness()
        let mine = try h.simulator.postText("read by bob", from: "alice", to: .user("bob"))
        let other = try h.simulator.postText("to alice", from: "bob", to: .user("alice"))
        try h.simulator.markRead(upTo: mine, by: "bob")
        await h.login()
        let deadline = Date().addingTimeInterval(10)
        while h.vault.getLastSyncTimestamp() == 0 && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        await h.vault.waitForSyncIdle()
        XCTAssertGreaterThan(h.vault.getLastSyncTimestamp(), 0, "the first sweep set the sync point")
        let first = try await h.messages { $0.set(uid: "bob").set(limit: 50) }.fetchPrevious().server.get()
        XCTAssertEqual(first.first { $0.id == mine }?.messageStatus, .read, "the simulator renders the receipt")
        let readAt = try XCTUnwrap(first.first { $0.id == mine }?.readAt)
        XCTAssertGreaterThan(readAt, 0)

        // A server page that lacks the receipt: delivered and cached, the message stays read.
        backend.rule.withLock { $0 = .withoutReceipts }
        let second = await h.messages { $0.set(uid: "bob").set(limit: 50) }.fetchPrevious()
        let delivered = try XCTUnwrap(try second.server.get().first { $0.id == mine })
        XCTAssertEqual(delivered.readAt, readAt)
        XCTAssertEqual(delivered.messageStatus, .read)
        let cachedAfter = await h.messages { $0.set(uid: "bob").set(limit: 50) }.fetchPrevious()
        XCTAssertEqual(cachedAfter.cached?.first { $0.id == mine }?.messageStatus, .read, "read after the server phase wrote over it")

        // The same through the catch-up: a change of the message (an edit) logged without receipts.
        h.clock.advance(by: 2)
        try h.whileAway { try h.simulator.edit(mine, to: .text("edited while away"), by: "alice") }
        h.clock.advance(by: 1)
        let report = try await h.vault.syncNow()
        XCTAssertEqual(report.outcome, .caughtUp)
        await h.vault.waitForSyncIdle()
        h.client.network = .offline
        let offline = await h.messages { $0.set(uid: "bob").set(limit: 50) }.fetchPrevious()
        let row = try XCTUnwrap(offline.cached?.first { $0.id == mine } as? TextMessage)
        XCTAssertEqual(row.text, "edited while away", "the catch-up wrote the row")
        XCTAssertEqual(row.readAt, readAt)
        XCTAssertEqual(row.messageStatus, .read)
        XCTAssertNotNil(offline.cached?.first { $0.id == other })
    }
}
