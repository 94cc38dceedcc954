import ChatVaultSimulator
import Foundation
import XCTest
@testable import ChatVault
import VaultStore

/// `ConversationRequest` against the simulator over the encrypted cache.
final class ConversationReadTests: XCTestCase {
    static let internet = CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE

    /// alice's conversations, most recent first:
    ///
    /// | id | with | last message | unread for alice | alice's tags | pinned | other side's tags |
    /// |-|-|-|-|-|-|-|
    /// | group_club | club (group) | alice, t+60 | 0 | — | by the system | fun |
    /// | alice_user_erin | erin, blocked by alice | alice, t+50 | 0 | — | — | vip |
    /// | alice_user_dave | dave (an agent) | dave, t+40 | 1 | — | — | bot |
    /// | group_team | team (group) | bob, t+30 | 1 | fav, work | — | work |
    /// | alice_user_carol | carol | carol, t+20 | 1 | fav | — | — |
    /// | alice_user_bob | bob | alice, t+10 | 0 | — | by alice | — |
    static func world(_ h: ReadHarness) throws {
        let s = h.simulator
        let t = s.clock.seconds - 1000
        try s.addUser(SimulatedUser(uid: "dave", tags: ["bot"], isAgentic: true))
        try s.addUser(SimulatedUser(uid: "erin", tags: ["vip"]))
        try s.addGroup("team", owner: "alice", members: ["bob"], tags: ["work"])
        try s.addGroup("club", owner: "carol", members: ["alice"], tags: ["fun"])
        try s.postText("hi bob", from: "alice", to: .user("bob"), sentAt: t + 10)
        try s.postText("hi alice", from: "carol", to: .user("alice"), sentAt: t + 20)
        try s.postText("standup", from: "bob", to: .group("team"), sentAt: t + 30)
        try s.postText("beep", from: "dave", to: .user("alice"), sentAt: t + 40)
        try s.postText("hi erin", from: "alice", to: .user("erin"), sentAt: t + 50)
        try s.postText("party", from: "alice", to: .group("club"), sentAt: t + 60)
        try s.tagConversation("alice_user_carol", for: "alice", tags: ["fav"])
        try s.tagConversation("group_team", for: "alice", tags: ["fav", "work"])
        try s.pinConversation("alice_user_bob", for: "alice")
        try s.pinConversation("group_club", for: "alice", bySystem: true)
        try s.block("erin", by: "alice")
    }

    static let everyone = ["group_club", "alice_user_erin", "alice_user_dave", "group_team", "alice_user_carol", "alice_user_bob"]
    static let listed = everyone.filter { $0 != "alice_user_erin" }

    func ids(_ conversations: [Conversation]?) -> [String]? {
        conversations?.map { $0.conversationId ?? "?" }
    }

    func newRecorder() -> LookupListRecorder<Conversation> {
        LookupListRecorder { $0.conversationId ?? "?" }
    }

    // MARK: The two-phase contract

    func testOnlineTheCachedPageComesFirstEvenWhenEmptyThenTheServerPageIsWrittenThrough() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        let recorder = newRecorder()
        h.conversations().fetchNext(onCachedConversations: recorder.onCached, onServerConversations: recorder.onServer,
                                    onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.cached([]), .server(Self.listed)])
        XCTAssertEqual(try h.cachedConversationIds(), Self.listed, "written through before delivery")
        let t = h.simulator.clock.seconds - 1000
        let team = try XCTUnwrap(try h.cachedConversationRow("group_team"))
        XCTAssertEqual(team.type, "group")
        XCTAssertEqual(team.peer, "team")
        XCTAssertEqual(team.lastMessageAt, t + 30)
        XCTAssertEqual(team.updatedAt, t + 30)
        XCTAssertEqual(team.unread, 1)
        let bob = try XCTUnwrap(try h.cachedConversationRow("alice_user_bob"))
        XCTAssertEqual(bob.type, "user")
        XCTAssertEqual(bob.peer, "bob")
        XCTAssertEqual(bob.unread, 0)
    }

    func testOfflineTheReadEndsAfterTheCachedPageWithInternetUnavailable() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        h.client.network = .offline
        let recorder = newRecorder()
        h.conversations(limit: 3).fetchNext(onCachedConversations: recorder.onCached, onServerConversations: recorder.onServer,
                                            onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.cached(Array(Self.listed.prefix(3))), .error(Self.internet)])
    }

    func testTheCachedConversationsCarryTheServersFields() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        let online = await h.conversations().fetchNext()
        h.client.network = .offline
        let offline = await h.conversations().fetchNext()
        let server = try XCTUnwrap(online.serverPage)
        let cached = try XCTUnwrap(offline.cached)
        XCTAssertEqual(ids(cached), ids(server))
        for (c, s) in zip(cached, server) {
            XCTAssertEqual(c.conversationType, s.conversationType)
            XCTAssertEqual(c.unreadMessageCount, s.unreadMessageCount)
            XCTAssertEqual(c.updatedAt, s.updatedAt)
            XCTAssertEqual(c.tags, s.tags)
            XCTAssertEqual(c.pinnedAt, s.pinnedAt)
            XCTAssertEqual(c.pinnedBy, s.pinnedBy)
            XCTAssertEqual(c.lastMessage?.id, s.lastMessage?.id)
            XCTAssertEqual((c.lastMessage as? TextMessage)?.text, (s.lastMessage as? TextMessage)?.text)
        }
        let team = try XCTUnwrap(cached.first { $0.conversationId == "group_team" })
        XCTAssertEqual((team.conversationWith as? Group)?.tags, ["work"])
        let dave = try XCTUnwrap(cached.first { $0.conversationId == "alice_user_dave" })
        XCTAssertEqual((dave.conversationWith as? User)?.isAgentic, true)
    }

    func testOfflinePagingContinuesThroughTheCache() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        h.client.network = .offline
        let request = h.conversations(limit: 2)
        let pages = [await request.fetchNext(), await request.fetchNext(), await request.fetchNext(), await request.fetchNext()]
        XCTAssertEqual(pages.map { ids($0.cached) }, [["group_club", "alice_user_dave"], ["group_team", "alice_user_carol"], ["alice_user_bob"], []])
        XCTAssertEqual(pages.map(\.failureCode), Array(repeating: Self.internet, count: 4))
    }

    func testOnlinePagesFollowTheServersOrderAndTheCacheKeepsStep() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        let request = h.conversations(limit: 2)
        var recorded: [[String]?] = []
        for _ in 0..<3 {
            let page = await request.fetchNext()
            recorded.append(ids(page.serverPage))
            // The cached phase of each page is the cached copy of the same slice (empty at first).
            XCTAssertEqual(page.cached?.count, 0)
        }
        XCTAssertEqual(recorded, [["group_club", "alice_user_dave"], ["group_team", "alice_user_carol"], ["alice_user_bob"]])
        // A second request over the now warm cache: each cached page is the slice the server then sends.
        let again = h.conversations(limit: 2)
        let first = await again.fetchNext()
        XCTAssertEqual(ids(first.cached), ids(first.serverPage))
        let second = await again.fetchNext()
        XCTAssertEqual(ids(second.cached), ["group_team", "alice_user_carol"])
        XCTAssertEqual(ids(second.serverPage), ["group_team", "alice_user_carol"])
    }

    func testAfterTheLastPageTheServerIsNotAskedAgain() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        let request = h.conversations()
        _ = await request.fetchNext()
        let calls = h.client.callCount(.conversations)
        let after = await request.fetchNext()
        XCTAssertEqual(after.cached?.count, 0)
        XCTAssertEqual(after.serverPage?.count, 0)
        XCTAssertEqual(h.client.callCount(.conversations), calls)
    }

    func testAServerErrorPassesThroughUnchanged() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        h.client.failNext(.conversations, with: .status(503, code: "ERR_UNAVAILABLE"))
        let result = await h.conversations().fetchNext()
        XCTAssertEqual(result.cached?.count, 0)
        XCTAssertEqual(result.failureCode, "ERR_UNAVAILABLE")
        guard case .failure(let error) = result.server else { return XCTFail("a server error") }
        XCTAssertEqual(error.details, "HTTP 503")
    }

    func testASecondFetchInFlightFailsWithRequestInProgress() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        h.client.failNext(.conversations, with: .delay(.milliseconds(500)))
        let request = h.conversations()
        async let first = request.fetchNext()
        try await Task.sleep(for: .milliseconds(100))
        let second = await request.fetchNext()
        XCTAssertNil(second.cached, "no cached phase for the refused fetch")
        XCTAssertEqual(second.failureCode, CometChatConstants.Errors.ERROR_REQUEST_IN_PROGRESS)
        let settled = await first
        XCTAssertEqual(ids(settled.serverPage), Self.listed)
        // The refused fetch did not move the paging: the next one is past the end.
        let next = await request.fetchNext()
        XCTAssertEqual(next.serverPage?.count, 0)
    }

    func testWithOfflineOffThereIsNoCachedPhase() async throws {
        let h = try ReadHarness(enabled: false)
        try Self.world(h)
        await h.login()
        let recorder = newRecorder()
        h.conversations().fetchNext(onCachedConversations: recorder.onCached, onServerConversations: recorder.onServer,
                                    onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.server(Self.listed)])
    }

    func testTheClassicOverloadNeverDeliversACachedResult() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        let recorder = newRecorder()
        h.conversations().fetchNext(onSuccess: recorder.onServer, onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.server(Self.listed)])
        h.client.network = .offline
        let offline = newRecorder()
        h.conversations().fetchNext(onSuccess: offline.onServer, onError: offline.onError)
        offline.wait()
        XCTAssertEqual(offline.recorded, [.error(Self.internet)])
    }

    func testTheLimitIsClampedToTheSDKsMaximum() throws {
        let h = try ReadHarness()
        XCTAssertEqual(h.conversations(limit: 500).query.limit, 50)
        XCTAssertEqual(h.conversations(limit: 0).query.limit, 1)
        XCTAssertEqual(h.conversations(limit: 10) { $0.set(limit: 80) }.query.limit, 50)
    }

    // MARK: Reconciliation

    func testTheServerPageReconcilesChangedAddedAndRemovedConversations() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        try h.simulator.addUser(SimulatedUser(uid: "frank"))
        await h.login()
        _ = await h.conversations { $0.includeBlockedUsers(true) }.fetchNext()
        _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        let bobMessages = try h.cachedIds("alice_user_bob")
        XCTAssertFalse(bobMessages.isEmpty)
        // Changed: carol writes again (moves to the top, unread 2). Added: frank. Removed: alice
        // deletes her conversation with bob.
        h.simulator.clock.advance(by: 5)
        try h.simulator.postText("again", from: "carol", to: .user("alice"))
        try h.simulator.postText("new here", from: "frank", to: .user("alice"), sentAt: h.simulator.clock.seconds - 2000)
        try h.simulator.deleteConversation("alice_user_bob", for: "alice")

        let result = await h.conversations().fetchNext()
        XCTAssertEqual(ids(result.cached), Self.listed, "the cached phase showed the old slice")
        let expected = ["alice_user_carol", "group_club", "alice_user_dave", "group_team", "alice_user_frank"]
        XCTAssertEqual(ids(result.serverPage), expected)
        XCTAssertEqual(try h.cachedConversationIds(), ["alice_user_carol", "group_club", "alice_user_erin", "alice_user_dave",
                                                       "group_team", "alice_user_frank"],
                       "replaced, not appended; the hidden blocked conversation is outside the filter and stays")
        XCTAssertEqual(try h.cachedConversationRow("alice_user_carol")?.unread, 2)
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), bobMessages, "a removed conversation's messages stay (eviction decides)")
        h.client.network = .offline
        let cached = await h.conversations().fetchNext()
        XCTAssertEqual(ids(cached.cached), expected)
        XCTAssertEqual(cached.cached?.first?.unreadMessageCount, 2)
    }

    func testReconciliationStaysWithinTheSliceThePageCovers() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        try h.simulator.deleteConversation("alice_user_bob", for: "alice")
        let request = h.conversations(limit: 2)
        let first = await request.fetchNext()
        XCTAssertEqual(ids(first.serverPage), ["group_club", "alice_user_dave"])
        XCTAssertTrue(try h.cachedConversationIds().contains("alice_user_bob"), "beyond the first page's slice: untouched")
        let second = await request.fetchNext()
        XCTAssertEqual(ids(second.serverPage), ["group_team", "alice_user_carol"])
        XCTAssertFalse(try h.cachedConversationIds().contains("alice_user_bob"), "the last page reaches to the end of the list")
    }

    func testAFilteredPageReconcilesOnlyWhatMatchesTheFilter() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        _ = await h.conversations { $0.includeBlockedUsers(true) }.fetchNext()
        // The server drops the team conversation from a groups-only page.
        h.client.failNext(.conversations, with: .page { page in
            WirePage(items: page.items.filter { $0["conversationId"]?.stringValue != "group_team" }, nextCursor: page.nextCursor)
        })
        let groups = await h.conversations { $0.setConversationType(conversationType: .group) }.fetchNext()
        XCTAssertEqual(ids(groups.serverPage), ["group_club"])
        XCTAssertEqual(try h.cachedConversationIds(), Self.everyone.filter { $0 != "group_team" },
                       "only the group slice was reconciled; user conversations stay")
    }

    // MARK: Filters

    /// Each locally computable filter, answered from the cache: fetched online (the server's
    /// answer), then offline over a cache that holds every conversation. Every filter narrows the
    /// list, so a filter the cache ignored would show more.
    func testEveryLocalFilterIsAnsweredFromTheCacheAsTheServerAnswersIt() async throws {
        let filters: [(String, (ConversationRequest.ConversationRequestBuilder) -> Void, [String])] = [
            ("users", { $0.setConversationType(conversationType: .user) }, ["alice_user_dave", "alice_user_carol", "alice_user_bob"]),
            ("groups", { $0.setConversationType(conversationType: .group) }, ["group_club", "group_team"]),
            ("unread", { $0.setUnread(true) }, ["alice_user_dave", "group_team", "alice_user_carol"]),
            ("tags", { $0.setTags(["fav"]) }, ["group_team", "alice_user_carol"]),
            ("tags, any of", { $0.setTags(["work", "nope"]) }, ["group_team"]),
            ("user tags", { $0.setUserTags(["bot"]) }, ["alice_user_dave"]),
            ("group tags", { $0.setGroupTags(["work"]) }, ["group_team"]),
            ("user or group tags", { $0.setUserTags(["bot"]).setGroupTags(["fun"]) }, ["group_club", "alice_user_dave"]),
            ("hide agentic", { $0.hideAgentic(true) }, ["group_club", "group_team", "alice_user_carol", "alice_user_bob"]),
            ("only agentic", { $0.onlyAgentic(true) }, ["alice_user_dave"]),
            ("include blocked users", { $0.includeBlockedUsers(true) }, Self.everyone),
            ("blocked users' tags", { $0.includeBlockedUsers(true).setUserTags(["vip"]) }, ["alice_user_erin"]),
            ("pinned by me", { $0.set(pinnedBy: ["me"]) }, ["alice_user_bob"]),
            ("pinned by the system", { $0.set(pinnedBy: ["system"]) }, ["group_club"]),
            ("pinned by either", { $0.set(pinnedBy: ["me", "system"]) }, ["group_club", "alice_user_bob"]),
            ("combined", { $0.setConversationType(conversationType: .user).setUnread(true).hideAgentic(true) }, ["alice_user_carol"]),
        ]
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        _ = await h.conversations { $0.includeBlockedUsers(true) }.fetchNext()
        var truth: [String: [String]] = [:]
        for (name, configure, expected) in filters {
            let online = await h.conversations(configure).fetchNext()
            XCTAssertEqual(ids(online.serverPage), expected, "the server's answer for \(name)")
            XCTAssertNotEqual(expected, Self.listed, "\(name) must narrow the list")
            truth[name] = ids(online.serverPage)
        }
        XCTAssertEqual(try h.cachedConversationIds(), Self.everyone, "filtered pages removed nothing that exists")
        h.client.network = .offline
        for (name, configure, _) in filters {
            let offline = await h.conversations(configure).fetchNext()
            XCTAssertEqual(ids(offline.cached), truth[name], name)
            XCTAssertEqual(offline.failureCode, Self.internet, name)
        }
    }

    func testABlockRecordedInTheBlockedUsersListHidesTheConversationFromTheCachedPage() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        // alice blocks carol after the list was cached: the cached payload still says not blocked,
        // the SDK's blocked-users list says she is.
        let blocked = try await h.vault.blockUsers(["carol"])
        XCTAssertEqual(blocked, ["carol": "success"])
        h.client.network = .offline
        let hidden = await h.conversations().fetchNext()
        XCTAssertEqual(ids(hidden.cached), Self.listed.filter { $0 != "alice_user_carol" })
        let shown = await h.conversations { $0.includeBlockedUsers(true).with(blockedInfo: true) }.fetchNext()
        let carol = try XCTUnwrap(shown.cached?.first { $0.conversationId == "alice_user_carol" })
        XCTAssertEqual((carol.conversationWith as? User)?.blockedByMe, true, "blocked info from the blocked-users list")
    }

    func testEnrichmentNeverBlocksTheCachedPhase() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        _ = await h.conversations { $0.includeBlockedUsers(true) }.fetchNext()
        h.client.network = .offline
        let enriched = await h.conversations { $0.withTags(true).withUserAndGroupTags(true).with(blockedInfo: true).withBlockedInfo(true) }
            .fetchNext()
        XCTAssertEqual(ids(enriched.cached), Self.listed)
        let withBlocked = await h.conversations { $0.includeBlockedUsers(true).withBlockedInfo(true) }.fetchNext()
        let erin = try XCTUnwrap(withBlocked.cached?.first { $0.conversationId == "alice_user_erin" })
        XCTAssertEqual((erin.conversationWith as? User)?.blockedByMe, true)
        XCTAssertEqual(erin.tags, [])
    }

    func testASearchKeywordEmptiesTheCachedPageButTheServerAnswers() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        _ = await h.conversations().fetchNext()
        let search = await h.conversations { $0.setSearchKeyword("car") }.fetchNext()
        XCTAssertEqual(search.cached?.count, 0)
        XCTAssertEqual(ids(search.serverPage), ["alice_user_carol"])
        XCTAssertEqual(try h.cachedConversationIds(), Self.listed, "a server-only page reconciles nothing")
        let spelled = await h.conversations { $0.set(searchKeyword: "tea") }.fetchNext()
        XCTAssertEqual(spelled.cached?.count, 0)
        XCTAssertEqual(ids(spelled.serverPage), ["group_team"])
        let blank = await h.conversations { $0.setSearchKeyword("") }.fetchNext()
        XCTAssertEqual(ids(blank.cached), Self.listed, "an empty keyword filters nothing")
        h.client.network = .offline
        let offline = await h.conversations { $0.setSearchKeyword("car") }.fetchNext()
        XCTAssertEqual(offline.cached?.count, 0)
        XCTAssertEqual(offline.failureCode, Self.internet)
    }

    // MARK: Hostile payloads

    func testAHostilePayloadIsRefusedAsAWholeAndTheCacheIsUnchanged() async throws {
        let hostile: [(String, @Sendable (JSONValue) -> JSONValue)] = [
            ("missing field", { v in JSONValue.object((v.objectValue ?? [:]).filter { $0.key != "conversationId" }) }),
            ("missing peer", { v in JSONValue.object((v.objectValue ?? [:]).filter { $0.key != "conversationWith" }) }),
            ("huge string", { v in
                var o = v.objectValue ?? [:]
                var with = o["conversationWith"]?.objectValue ?? [:]
                with["name"] = .string(String(repeating: "x", count: 300 * 1024))
                o["conversationWith"] = .object(with)
                return .object(o)
            }),
            ("wrong type", { v in
                var o = v.objectValue ?? [:]
                o["unreadMessageCount"] = "many"
                return .object(o)
            }),
            ("wrong type deep down", { v in
                var o = v.objectValue ?? [:]
                var last = o["lastMessage"]?.objectValue ?? [:]
                last["sentAt"] = ["not": "a time"]
                o["lastMessage"] = .object(last)
                return .object(o)
            }),
        ]
        for (name, corrupt) in hostile {
            let h = try ReadHarness()
            try Self.world(h)
            await h.login()
            _ = await h.conversations().fetchNext()
            let before = try h.cachedConversationIds()
            let carolBefore = try XCTUnwrap(try h.cachedConversationRow("alice_user_carol"))
            h.simulator.clock.advance(by: 5)
            try h.whileAway { try h.simulator.postText("changed", from: "carol", to: .user("alice")) }
            h.client.failNext(.conversations, with: .page { page in
                var items = page.items
                items[items.count - 1] = corrupt(items[items.count - 1])
                return WirePage(items: items, nextCursor: page.nextCursor)
            })
            let result = await h.conversations().fetchNext()
            guard case .failure(let error) = result.server else { return XCTFail(name) }
            XCTAssertEqual(error.errorCode, "ERROR_INVALID_SERVER_RESPONSE", name)
            XCTAssertFalse(error.errorDescription.contains("xxxx"), "no payload content in the error")
            XCTAssertEqual(try h.cachedConversationIds(), before, name)
            XCTAssertEqual(try h.cachedConversationRow("alice_user_carol")?.updatedAt, carolBefore.updatedAt,
                           "\(name): nothing of the refused page was cached")
            h.client.network = .offline
            let after = await h.conversations().fetchNext()
            XCTAssertEqual(ids(after.cached), Self.listed, name)
        }
    }

    // MARK: async/await and AsyncSequence

    func testTheAsyncSequenceFormYieldsBothPhases() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        var phases: [String] = []
        for try await phase in h.conversations().nextPhases() {
            switch phase {
            case .cached(let items): phases.append("cached \(items.count)")
            case .server(let items): phases.append("server \(ids(items) == Self.listed)")
            }
        }
        XCTAssertEqual(phases, ["cached 0", "server true"])
        h.client.network = .offline
        var offline: [String] = []
        do {
            for try await phase in h.conversations().nextPhases() {
                if case .cached(let items) = phase { offline.append("cached \(items.count)") }
            }
            XCTFail("the stream should end with the offline error")
        } catch let error as CometChatException {
            XCTAssertEqual(error.errorCode, Self.internet)
        }
        XCTAssertEqual(offline, ["cached 5"])
    }

    func testCallbacksArriveThroughTheConfiguredExecutor() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        let key = DispatchSpecificKey<String>()
        h.callbacks.setSpecific(key: key, value: "callbacks")
        let seen = LookupListRecorder<Conversation> { _ in DispatchQueue.getSpecific(key: key) ?? "elsewhere" }
        h.conversations().fetchNext(onCachedConversations: seen.onCached, onServerConversations: seen.onServer, onError: seen.onError)
        seen.wait()
        XCTAssertEqual(seen.recorded, [.cached([]), .server(Array(repeating: "callbacks", count: 5))])
    }

    func testTheBuilderWithoutAVaultReadsThroughTheInstalledOne() async throws {
        let h = try ReadHarness()
        try Self.world(h)
        await h.login()
        CometChat.offlineVault = h.vault
        defer { CometChat.offlineVault = nil }
        let result = await ConversationRequest.ConversationRequestBuilder(limit: 30).build().fetchNext()
        XCTAssertEqual(ids(result.serverPage), Self.listed)
        CometChat.offlineVault = nil
        let none = await ConversationRequest.ConversationRequestBuilder(limit: 30).build().fetchNext()
        XCTAssertEqual(none.failureCode, CometChatConstants.Errors.ERROR_USER_NOT_LOGGED_IN)
    }
}
