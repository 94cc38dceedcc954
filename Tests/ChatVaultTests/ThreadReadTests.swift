import ChatVaultSimulator
import Foundation
import XCTest
@testable import ChatVault
import VaultStore

/// `ThreadsRequest` against the simulator over the encrypted cache.
final class ThreadReadTests: XCTestCase {
    static let internet = CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE

    /// Parents and replies (alice is the logged-in user):
    ///
    /// | parent | where | by | replies (by, time) | alice took part |
    /// |-|-|-|-|-|
    /// | p1 | team | bob, t+10 | alice t+40, carol t+45 | yes (replied, not last) |
    /// | p2 | team | carol, t+20 | bob t+50 | no |
    /// | p3 | team | alice, t+30 | bob t+60 | yes (started it) |
    /// | p4 | with bob | bob, t+70 | bob t+80 | no |
    /// | p5 | with bob | alice, t+90 | bob t+100 | yes (started it) |
    struct World {
        var p1 = 0, p2 = 0, p3 = 0, p4 = 0, p5 = 0
        var r1 = 0, r1b = 0, r2 = 0, r3 = 0, r4 = 0, r5 = 0
    }

    static func world(_ h: ReadHarness) throws -> World {
        let s = h.simulator
        let t = s.clock.seconds - 1000
        try s.addGroup("team", owner: "alice", members: ["bob", "carol"])
        var w = World()
        w.p1 = try s.postText("p1", from: "bob", to: .group("team"), sentAt: t + 10)
        w.p2 = try s.postText("p2", from: "carol", to: .group("team"), sentAt: t + 20)
        w.p3 = try s.postText("p3", from: "alice", to: .group("team"), sentAt: t + 30)
        w.r1 = try s.postText("r1", from: "alice", to: .group("team"), parentId: w.p1, sentAt: t + 40)
        w.r1b = try s.postText("r1b", from: "carol", to: .group("team"), parentId: w.p1, sentAt: t + 45)
        w.r2 = try s.postText("r2", from: "bob", to: .group("team"), parentId: w.p2, sentAt: t + 50)
        w.r3 = try s.postText("r3", from: "bob", to: .group("team"), parentId: w.p3, sentAt: t + 60)
        w.p4 = try s.postText("p4", from: "bob", to: .user("alice"), sentAt: t + 70)
        w.r4 = try s.postText("r4", from: "bob", to: .user("alice"), parentId: w.p4, sentAt: t + 80)
        w.p5 = try s.postText("p5", from: "alice", to: .user("bob"), sentAt: t + 90)
        w.r5 = try s.postText("r5", from: "bob", to: .user("alice"), parentId: w.p5, sentAt: t + 100)
        return w
    }

    func ids(_ threads: [MessageThread]?) -> [Int]? {
        threads?.map(\.parentMessageId)
    }

    func keys(_ ids: [Int]) -> [String] {
        ids.map(String.init)
    }

    func newRecorder() -> LookupListRecorder<MessageThread> {
        LookupListRecorder { String($0.parentMessageId) }
    }

    // MARK: The two-phase contract

    func testOnlineTheCachedPageComesFirstEvenWhenEmptyThenTheServerPageIsWrittenThrough() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        let recorder = newRecorder()
        h.threads { $0.set(participatedByMe: false) }
            .fetchNext(onCachedThreads: recorder.onCached, onServerThreads: recorder.onServer, onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.cached([]), .server(keys([w.p5, w.p4, w.p3, w.p2, w.p1]))])
        XCTAssertEqual(try h.allCachedMessageIds(), [w.p1, w.p2, w.p3, w.p4, w.p5, w.r1b, w.r2, w.r3, w.r4, w.r5].sorted(),
                       "each parent and its last reply, written through before delivery")
    }

    func testOfflineTheReadEndsAfterTheCachedPageWithInternetUnavailable() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        _ = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        h.client.network = .offline
        let recorder = newRecorder()
        h.threads { $0.set(participatedByMe: false).set(limit: 2) }
            .fetchNext(onCachedThreads: recorder.onCached, onServerThreads: recorder.onServer, onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.cached(keys([w.p5, w.p4])), .error(Self.internet)])
    }

    func testTheCachedThreadsCarryReplyCountsAndLastRepliesAsTheServerSentThem() async throws {
        let h = try ReadHarness()
        _ = try Self.world(h)
        await h.login()
        let online = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        h.client.network = .offline
        let offline = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        let server = try XCTUnwrap(online.serverPage)
        let cached = try XCTUnwrap(offline.cached)
        XCTAssertEqual(ids(cached), ids(server))
        for (c, s) in zip(cached, server) {
            XCTAssertEqual(c.replyCount, s.replyCount, "thread \(s.parentMessageId)")
            XCTAssertEqual(c.lastReply?.id, s.lastReply?.id)
            XCTAssertEqual((c.lastReply as? TextMessage)?.text, (s.lastReply as? TextMessage)?.text)
            XCTAssertEqual((c.parentMessage as? TextMessage)?.text, (s.parentMessage as? TextMessage)?.text)
            XCTAssertEqual(c.conversationId, s.conversationId)
            XCTAssertEqual(c.receiverType, s.receiverType)
            XCTAssertEqual(c.updatedAt, s.updatedAt)
            XCTAssertTrue(c.isSubscribed)
        }
        XCTAssertEqual(cached.last?.replyCount, 2, "p1 has two replies, only the last of them cached")
    }

    func testTheThreadsReplyCountIsCachedEvenWhenItsParentPayloadLeavesItOut() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        h.client.failNext(.threads, with: .payload { thread in
            var o = thread.objectValue ?? [:]
            o["parentMessage"] = .object((o["parentMessage"]?.objectValue ?? [:]).filter { $0.key != "replyCount" })
            return .object(o)
        })
        let online = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        XCTAssertEqual(online.serverPage?.last?.replyCount, 2)
        XCTAssertEqual(online.serverPage?.last?.parentMessage.replyCount, 0, "the parent's own copy says nothing")
        h.client.network = .offline
        let offline = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        XCTAssertEqual(ids(offline.cached)?.last, w.p1)
        XCTAssertEqual(offline.cached?.last?.replyCount, 2, "the thread's count, kept with the parent; one reply is cached")
    }

    func testTheCachedPhaseIsDerivedFromCachedMessages() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        // Only the group's messages were ever read; the threads endpoint never was.
        _ = await h.messages { $0.set(guid: "team").set(limit: 50) }.fetchPrevious()
        XCTAssertEqual(h.client.callCount(.threads), 0)
        h.client.network = .offline
        let result = await h.threads { $0.set(guid: "team").set(participatedByMe: false) }.fetchNext()
        let cached = try XCTUnwrap(result.cached)
        XCTAssertEqual(ids(cached), [w.p3, w.p2, w.p1])
        XCTAssertEqual(cached.map(\.replyCount), [1, 1, 2])
        XCTAssertEqual(cached.map { $0.lastReply?.id }, [w.r3, w.r2, w.r1b])
        let mine = await h.threads { $0.set(guid: "team") }.fetchNext()
        XCTAssertEqual(ids(mine.cached), [w.p3, w.p1], "alice's own reply to p1 is cached: she took part")
    }

    func testOfflinePagingContinuesThroughTheCache() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        _ = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        h.client.network = .offline
        let request = h.threads { $0.set(participatedByMe: false).set(limit: 2) }
        let pages = [await request.fetchNext(), await request.fetchNext(), await request.fetchNext(), await request.fetchNext()]
        XCTAssertEqual(pages.map { ids($0.cached) }, [[w.p5, w.p4], [w.p3, w.p2], [w.p1], []])
        XCTAssertEqual(pages.map(\.failureCode), Array(repeating: Self.internet, count: 4))
    }

    func testOnlinePagingAndHasMore() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        let request = h.threads { $0.set(participatedByMe: false).set(limit: 2) }
        XCTAssertTrue(request.hasMore())
        var pages: [[Int]?] = []
        while request.hasMore() {
            pages.append(ids(await request.fetchNext().serverPage))
            if pages.count > 5 { break }
        }
        XCTAssertEqual(pages, [[w.p5, w.p4], [w.p3, w.p2], [w.p1]])
        let calls = h.client.callCount(.threads)
        let after = await request.fetchNext()
        XCTAssertEqual(after.serverPage?.count, 0)
        XCTAssertEqual(h.client.callCount(.threads), calls, "past the end, the server is not asked again")
    }

    func testAServerErrorPassesThroughUnchanged() async throws {
        let h = try ReadHarness()
        _ = try Self.world(h)
        await h.login()
        h.client.failNext(.threads, with: .status(429, code: "ERR_TOO_MANY_REQUESTS"))
        let result = await h.threads().fetchNext()
        XCTAssertEqual(result.cached?.count, 0)
        XCTAssertEqual(result.failureCode, "ERR_TOO_MANY_REQUESTS")
        let unknown = await h.threads { $0.set(guid: "nowhere") }.fetchNext()
        XCTAssertEqual(unknown.failureCode, "ERR_GUID_NOT_FOUND")
    }

    func testASecondFetchInFlightFailsWithRequestInProgress() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        h.client.failNext(.threads, with: .delay(.milliseconds(500)))
        let request = h.threads()
        async let first = request.fetchNext()
        try await Task.sleep(for: .milliseconds(100))
        let recorder = newRecorder()
        request.fetchNext(onCachedThreads: recorder.onCached, onServerThreads: recorder.onServer, onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.error(CometChatConstants.Errors.ERROR_REQUEST_IN_PROGRESS)], "no cached phase")
        let settled = await first
        XCTAssertEqual(ids(settled.serverPage), [w.p5, w.p3, w.p1])
    }

    func testWithOfflineOffThereIsNoCachedPhase() async throws {
        let h = try ReadHarness(enabled: false)
        let w = try Self.world(h)
        await h.login()
        let recorder = newRecorder()
        h.threads().fetchNext(onCachedThreads: recorder.onCached, onServerThreads: recorder.onServer, onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.server(keys([w.p5, w.p3, w.p1]))])
    }

    func testTheClassicOverloadNeverDeliversACachedResult() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        _ = await h.threads().fetchNext()
        let recorder = newRecorder()
        h.threads().fetchNext(onSuccess: recorder.onServer, onError: { error in recorder.onError(error) })
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.server(keys([w.p5, w.p3, w.p1]))])
        h.client.network = .offline
        let offline = newRecorder()
        h.threads().fetchNext(onSuccess: offline.onServer, onError: { error in offline.onError(error) })
        offline.wait()
        XCTAssertEqual(offline.recorded, [.error(Self.internet)])
    }

    // MARK: Filters

    /// Scope and participation, answered from the cache as the server answered them online.
    func testEveryFilterIsAnsweredFromTheCacheAsTheServerAnswersIt() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        let filters: [(String, (ThreadsRequest.ThreadsRequestBuilder) -> Void, [Int])] = [
            ("participated (the default)", { _ in }, [w.p5, w.p3, w.p1]),
            ("group, all", { $0.set(guid: "team").set(participatedByMe: false) }, [w.p3, w.p2, w.p1]),
            ("group, participated", { $0.set(guid: "team") }, [w.p3, w.p1]),
            ("user, all", { $0.set(uid: "bob").set(participatedByMe: false) }, [w.p5, w.p4]),
            ("user, participated", { $0.set(uid: "bob") }, [w.p5]),
            ("the last scope wins", { $0.set(uid: "bob").set(guid: "team").set(participatedByMe: false) }, [w.p3, w.p2, w.p1]),
        ]
        let everything = [w.p5, w.p4, w.p3, w.p2, w.p1]
        _ = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        var truth: [String: [Int]] = [:]
        for (name, configure, expected) in filters {
            let online = await h.threads(configure).fetchNext()
            XCTAssertEqual(ids(online.serverPage), expected, "the server's answer for \(name)")
            XCTAssertNotEqual(expected, everything, "\(name) must narrow the list")
            truth[name] = ids(online.serverPage)
        }
        XCTAssertFalse(try h.allCachedMessageIds().contains(w.r1), "alice's reply to p1 is not the last one: never cached")
        h.client.network = .offline
        for (name, configure, _) in filters {
            let offline = await h.threads(configure).fetchNext()
            XCTAssertEqual(ids(offline.cached), truth[name], name)
            XCTAssertEqual(offline.failureCode, Self.internet, name)
        }
    }

    // MARK: Reconciliation

    func testTheServerPageReconcilesChangedAddedAndRemovedThreads() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        _ = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        // Changed: a new reply to p1 (moves it to the top, 3 replies). Added: a thread on a new
        // parent. Removed: the server no longer lists p4.
        let r1c = try h.simulator.postText("r1c", from: "bob", to: .group("team"), parentId: w.p1)
        let p6 = try h.simulator.postText("p6", from: "carol", to: .group("team"), sentAt: h.simulator.clock.seconds - 500)
        let r6 = try h.simulator.postText("r6", from: "carol", to: .group("team"), parentId: p6, sentAt: h.simulator.clock.seconds - 400)
        let dropped = w.p4
        h.client.failNext(.threads, with: .page { page in
            WirePage(items: page.items.filter { $0["parentMessageId"]?.intValue != Int64(dropped) }, nextCursor: page.nextCursor)
        })
        let result = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        XCTAssertEqual(ids(result.cached), [w.p5, w.p4, w.p3, w.p2, w.p1], "the cached phase showed the old slice")
        let expected = [w.p1, p6, w.p5, w.p3, w.p2]
        XCTAssertEqual(ids(result.serverPage), expected)
        XCTAssertTrue(try h.allCachedMessageIds().contains(w.p4), "the parent of a dropped thread stays: it is a message")
        XCTAssertFalse(try h.allCachedMessageIds().contains(w.r4), "its cached replies in the slice go")
        h.client.network = .offline
        let cached = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        XCTAssertEqual(ids(cached.cached), expected, "replaced, not appended")
        XCTAssertEqual(cached.cached?.first?.replyCount, 3)
        XCTAssertEqual(cached.cached?.first?.lastReply?.id, r1c)
        XCTAssertEqual(cached.cached?[1].lastReply?.id, r6)
    }

    func testReconciliationStaysWithinTheSliceThePageCovers() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        _ = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
        let dropped = w.p1
        let drop: SimulatedFault = .page { page in
            WirePage(items: page.items.filter { $0["parentMessageId"]?.intValue != Int64(dropped) }, nextCursor: page.nextCursor)
        }
        h.client.failNext(.threads, with: drop, times: 3)
        let request = h.threads { $0.set(participatedByMe: false).set(limit: 2) }
        _ = await request.fetchNext()
        _ = await request.fetchNext()
        XCTAssertTrue(try h.allCachedMessageIds().contains(w.r1b), "p1 lies beyond the first two pages' slices: untouched")
        let last = await request.fetchNext()
        XCTAssertEqual(ids(last.serverPage), [])
        XCTAssertFalse(try h.allCachedMessageIds().contains(w.r1b), "the last page reaches to the end of the list")
        h.client.clearFaults()
    }

    // MARK: Hostile payloads

    func testAHostilePayloadIsRefusedAsAWholeAndTheCacheIsUnchanged() async throws {
        let hostile: [(String, @Sendable (JSONValue) -> JSONValue)] = [
            ("missing field", { v in JSONValue.object((v.objectValue ?? [:]).filter { $0.key != "parentMessage" }) }),
            ("huge string", { v in
                var o = v.objectValue ?? [:]
                var reply = o["lastReply"]?.objectValue ?? [:]
                reply["data"] = ["text": .string(String(repeating: "x", count: 300 * 1024))]
                o["lastReply"] = .object(reply)
                return .object(o)
            }),
            ("wrong type", { v in
                var o = v.objectValue ?? [:]
                o["replyCount"] = "several"
                return .object(o)
            }),
        ]
        for (name, corrupt) in hostile {
            let h = try ReadHarness()
            let w = try Self.world(h)
            await h.login()
            _ = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
            let before = try h.allCachedMessageIds()
            let newReply = try h.whileAway { try h.simulator.postText("new", from: "bob", to: .group("team"), parentId: w.p2) }
            h.client.failNext(.threads, with: .page { page in
                var items = page.items
                items[items.count - 1] = corrupt(items[items.count - 1])
                return WirePage(items: items, nextCursor: page.nextCursor)
            })
            let result = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
            XCTAssertEqual(result.failureCode, "ERROR_INVALID_SERVER_RESPONSE", name)
            if case .failure(let error) = result.server { XCTAssertFalse(error.errorDescription.contains("xxxx")) }
            XCTAssertEqual(try h.allCachedMessageIds(), before, "\(name): nothing of the refused page was cached")
            XCTAssertFalse(before.contains(newReply))
            h.client.network = .offline
            let after = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
            XCTAssertEqual(ids(after.cached), [w.p5, w.p4, w.p3, w.p2, w.p1], name)
        }
    }

    // MARK: async/await and AsyncSequence

    func testTheAsyncSequenceFormYieldsBothPhases() async throws {
        let h = try ReadHarness()
        let w = try Self.world(h)
        await h.login()
        var phases: [String] = []
        for try await phase in h.threads().nextPhases() {
            switch phase {
            case .cached(let items): phases.append("cached \(items.count)")
            case .server(let items): phases.append("server \(ids(items) == [w.p5, w.p3, w.p1])")
            }
        }
        XCTAssertEqual(phases, ["cached 0", "server true"])
        h.client.network = .offline
        var offline: [String] = []
        do {
            for try await phase in h.threads().nextPhases() {
                if case .cached(let items) = phase { offline.append("cached \(ids(items) == [w.p5, w.p3, w.p1])") }
            }
            XCTFail("the stream should end with the offline error")
        } catch let error as CometChatException {
            XCTAssertEqual(error.errorCode, Self.internet)
        }
        XCTAssertEqual(offline, ["cached true"])
    }

    func testTheLimitIsClamped() throws {
        let h = try ReadHarness()
        XCTAssertEqual(h.threads { $0.set(limit: 5000) }.query.limit, 100)
        XCTAssertEqual(h.threads { $0.set(limit: -3) }.query.limit, 1)
        XCTAssertEqual(h.threads().query.participatedByMe, true, "the SDK's default")
    }
}
