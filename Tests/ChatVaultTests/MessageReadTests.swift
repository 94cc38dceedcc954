import ChatVaultSimulator
import Foundation
import XCTest
@testable import ChatVault
import VaultStore

/// `MessagesRequest` against the simulator over the encrypted cache.
final class MessageReadTests: XCTestCase {
    func testOnlineTheCachedPageComesFirstEvenWhenEmptyThenTheServerPageIsWrittenThrough() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 50))
        await h.login()
        let request = h.messages { $0.set(uid: "bob").set(limit: 30) }
        let recorder = PhaseRecorder()
        request.fetchPrevious(onCachedMessages: recorder.onCached, onServerMessages: recorder.onServer, onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.cached([]), .server(Array(ids.suffix(30)))])
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), Array(ids.suffix(30)), "written through before delivery")
    }

    func testOfflineTheReadEndsAfterTheCachedPageWithInternetUnavailable() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 50))
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        h.client.network = .offline
        let recorder = PhaseRecorder()
        h.messages { $0.set(uid: "bob").set(limit: 20) }
            .fetchPrevious(onCachedMessages: recorder.onCached, onServerMessages: recorder.onServer, onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.cached(Array(ids.suffix(20))), .error(CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)])
    }

    func testOfflinePagingContinuesThroughTheCache() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 40))
        await h.login()
        let online = h.messages { $0.set(uid: "bob").set(limit: 20) }
        _ = await online.fetchPrevious()
        _ = await online.fetchPrevious()
        h.client.network = .offline
        let request = h.messages { $0.set(uid: "bob").set(limit: 15) }
        let first = await request.fetchPrevious()
        let second = await request.fetchPrevious()
        let third = await request.fetchPrevious()
        XCTAssertEqual(first.cached?.map(\.id), Array(ids[25..<40]))
        XCTAssertEqual(second.cached?.map(\.id), Array(ids[10..<25]))
        XCTAssertEqual(third.cached?.map(\.id), Array(ids[0..<10]))
        for result in [first, second, third] {
            guard case .failure(let error) = result.server else { return XCTFail("offline") }
            XCTAssertEqual(error.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
        }
    }

    func testAServerErrorPassesThroughUnchanged() async throws {
        let h = try ReadHarness()
        try h.simulator.seedConversation(between: "alice", and: "bob", count: 5)
        await h.login()
        h.client.failNext(.messages, with: .status(503, code: "ERR_UNAVAILABLE"))
        let result = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        XCTAssertEqual(result.cached?.count, 0)
        guard case .failure(let error) = result.server else { return XCTFail("a server error") }
        XCTAssertEqual(error.errorCode, "ERR_UNAVAILABLE")
    }

    func testASecondFetchInFlightFailsWithRequestInProgress() async throws {
        let h = try ReadHarness()
        try h.simulator.seedConversation(between: "alice", and: "bob", count: 5)
        await h.login()
        h.client.failNext(.messages, with: .delay(.milliseconds(500)))
        let request = h.messages { $0.set(uid: "bob") }
        async let first = request.fetchPrevious()
        try await Task.sleep(for: .milliseconds(100))
        let second = await request.fetchPrevious()
        XCTAssertNil(second.cached, "no cached phase for the refused fetch")
        guard case .failure(let error) = second.server else { return XCTFail("refused") }
        XCTAssertEqual(error.errorCode, CometChatConstants.Errors.ERROR_REQUEST_IN_PROGRESS)
        let settled = await first
        XCTAssertEqual(try settled.server.get().count, 5)
    }

    func testWithOfflineOffThereIsNoCachedPhase() async throws {
        let h = try ReadHarness(enabled: false)
        try h.simulator.seedConversation(between: "alice", and: "bob", count: 5)
        await h.login()
        let recorder = PhaseRecorder()
        h.messages { $0.set(uid: "bob") }.fetchPrevious(onCachedMessages: recorder.onCached, onServerMessages: recorder.onServer,
                                                       onError: recorder.onError)
        recorder.wait()
        guard case .server(let ids) = recorder.recorded.first, recorder.recorded.count == 1 else { return XCTFail("\(recorder.recorded)") }
        XCTAssertEqual(ids.count, 5)
    }

    func testTheClassicOverloadNeverDeliversACachedResult() async throws {
        let h = try ReadHarness()
        try h.simulator.seedConversation(between: "alice", and: "bob", count: 5)
        await h.login()
        _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        let recorder = PhaseRecorder()
        h.messages { $0.set(uid: "bob") }.fetchPrevious(onSuccess: recorder.onServer, onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded.count, 1)
        guard case .server = recorder.recorded.first else { return XCTFail("\(recorder.recorded)") }
    }

    func testTheServerPageReconcilesChangedAddedAndRemovedItems() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 10))
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), ids)
        // Changed on the server, a new one, and one the server no longer has (while away: the
        // realtime connection would otherwise bring the new one into the cache before the read).
        let added = try h.whileAway { () throws -> Int in
            try h.simulator.edit(ids[3], to: .text("edited"))
            return try h.simulator.postText("new", from: "bob", to: .user("alice"))
        }
        let removed = ids[5]
        h.client.failNext(.messages, with: .page { page in
            WirePage(items: page.items.filter { $0["id"]?.intValue != Int64(removed) }, nextCursor: page.nextCursor)
        })
        let result = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        XCTAssertEqual(result.cached?.map(\.id), ids, "the cached phase showed the old slice")
        let server = try result.server.get()
        XCTAssertEqual(server.map(\.id), ids.filter { $0 != removed } + [added])
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), ids.filter { $0 != removed } + [added], "replaced, not appended")
        h.client.network = .offline
        let cached = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        XCTAssertEqual((cached.cached?.first { $0.id == ids[3] } as? TextMessage)?.text, "edited")
    }

    func testAHostilePayloadIsRefusedAsAWholeAndTheCacheIsUnchanged() async throws {
        let hostile: [(String, @Sendable (JSONValue) -> JSONValue)] = [
            ("missing field", { v in JSONValue.object((v.objectValue ?? [:]).filter { $0.key != "sentAt" }) }),
            ("huge string", { v in
                var o = v.objectValue ?? [:]
                o["data"] = ["text": .string(String(repeating: "x", count: 300 * 1024))]
                return .object(o)
            }),
            ("wrong type", { v in
                var o = v.objectValue ?? [:]
                o["id"] = "not a number"
                return .object(o)
            }),
        ]
        for (name, corrupt) in hostile {
            let h = try ReadHarness()
            let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 6))
            await h.login()
            _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
            try h.whileAway { try h.simulator.edit(ids[0], to: .text("changed")) }
            h.client.failNext(.messages, with: .page { page in
                var items = page.items
                items[items.count - 1] = corrupt(items[items.count - 1])
                return WirePage(items: items, nextCursor: page.nextCursor)
            })
            let result = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
            guard case .failure(let error) = result.server else { return XCTFail(name) }
            XCTAssertEqual(error.errorCode, "ERROR_INVALID_SERVER_RESPONSE", name)
            XCTAssertFalse(error.errorDescription.contains("xxxx"), "no payload content in the error")
            h.client.network = .offline
            let after = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
            XCTAssertEqual(after.cached?.map(\.id), ids, name)
            XCTAssertNotEqual((after.cached?.first as? TextMessage)?.text, "changed", "\(name): nothing of the refused page was cached")
        }
    }

    func testAServerOnlyFilterEmptiesTheCachedPageButTheServerAnswers() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 6, text: { "hello \($0)" }))
        await h.login()
        _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        let search = await h.messages { $0.set(uid: "bob").set(searchKeyword: "hello 2") }.fetchPrevious()
        XCTAssertEqual(search.cached?.count, 0)
        XCTAssertEqual(try search.server.get().map(\.id), [ids[2]])
        // Enrichment never blocks the cached phase.
        let enriched = await h.messages { $0.set(uid: "bob").withTags(true).set(withParent: true).hideQuotedMessages(true) }.fetchPrevious()
        XCTAssertEqual(enriched.cached?.map(\.id), ids)
    }

    func testTheAsyncSequenceFormYieldsBothPhases() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 3))
        await h.login()
        var phases: [String] = []
        for try await phase in h.messages({ $0.set(uid: "bob") }).previousPhases() {
            switch phase {
            case .cached(let items): phases.append("cached \(items.count)")
            case .server(let items): phases.append("server \(items.map(\.id) == ids)")
            }
        }
        XCTAssertEqual(phases, ["cached 0", "server true"])
        h.client.network = .offline
        var offline: [String] = []
        do {
            for try await phase in h.messages({ $0.set(uid: "bob") }).previousPhases() {
                if case .cached(let items) = phase { offline.append("cached \(items.count)") }
            }
            XCTFail("the stream should end with the offline error")
        } catch let error as CometChatException {
            XCTAssertEqual(error.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
        }
        XCTAssertEqual(offline, ["cached 3"])
    }
}
