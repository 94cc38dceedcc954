import ChatVault
import ChatVaultSimulator
import XCTest

/// `conversations(_:)` and `conversation(with:type:)`: order, paging, every filter and the
/// per-user fields.
final class ConversationQueryTests: SimulatorTestCase {
    func conversations(_ client: SimulatedClient, _ configure: (inout ConversationQuery) -> Void = { _ in }) async throws -> [JSONValue] {
        var query = ConversationQuery()
        configure(&query)
        return try await client.conversations(query).items
    }

    func conversationIds(_ items: [JSONValue]) -> [String] { strings(items, "conversationId") }

    /// alice talks with bob (oldest), carol, the helper bot, and in "team" (newest).
    func seedAlicesConversations() throws {
        try simulator.postText("to bob", from: "alice", to: .user("bob"))
        clock.advance(by: 10)
        try simulator.postText("from carol", from: "carol", to: .user("alice"))
        clock.advance(by: 10)
        try simulator.postText("to bot", from: "alice", to: .user("helper"))
        clock.advance(by: 10)
        try simulator.postText("team news <@uid:alice>", from: "bob", to: .group("team"))
    }

    func testOrderedByLastActivityWithThePerUserFields() async throws {
        try seedAlicesConversations()
        let alice = simulator.client(for: "alice")
        let list = try await conversations(alice)
        XCTAssertEqual(conversationIds(list), ["group_team", "alice_user_helper", "alice_user_carol", "alice_user_bob"])
        let team = list[0]
        XCTAssertEqual(team["conversationType"], "group")
        XCTAssertEqual(team["conversationWith"]?["guid"], "team")
        XCTAssertEqual(team["conversationWith"]?["hasJoined"], true)
        XCTAssertEqual(team["conversationWith"]?["scope"], "admin")
        XCTAssertEqual(team["unreadMessageCount"], 1)
        XCTAssertEqual(team["unreadMentionsCount"], 1)
        XCTAssertEqual(team["lastMessage"]?["data"]?["text"], "team news <@uid:alice>")
        XCTAssertEqual(team["updatedAt"]?.intValue, Int64(clock.seconds))
        XCTAssertEqual(list[2]["conversationWith"]?["uid"], "carol")
        XCTAssertEqual(list[3]["unreadMessageCount"], 0, "alice wrote it")

        let bob = simulator.client(for: "bob")
        let bobsTeam = try await conversations(bob).first { $0["conversationId"] == "group_team" }
        XCTAssertEqual(bobsTeam?["unreadMessageCount"], 0)
        XCTAssertEqual(bobsTeam?["conversationWith"]?["scope"], "participant")
    }

    func testReadReceiptsClearUnreadCountsAndSetLastReadMessageId() async throws {
        let first = try simulator.postText("1", from: "bob", to: .user("alice"))
        let second = try simulator.postText("2", from: "bob", to: .user("alice"))
        let alice = simulator.client(for: "alice")
        await assertEqual(try await conversations(alice)[0]["unreadMessageCount"], 2)
        try simulator.markRead(upTo: first, by: "alice")
        let after = try await conversations(alice)[0]
        XCTAssertEqual(after["unreadMessageCount"], 1)
        XCTAssertEqual(after["lastReadMessageId"]?.intValue, Int64(first))
        await assertEqual(ids(try await messages(alice) { $0.unread = true }), [second])
    }

    func testPagingByCursorCoversEveryConversationOnce() async throws {
        for (i, uid) in ["bob", "carol", "dave", "helper"].enumerated() {
            clock.advance(by: Double(i))
            try simulator.postText("hi", from: "alice", to: .user(uid))
        }
        try simulator.postText("hi", from: "alice", to: .group("team"))  // same second as the last one
        let alice = simulator.client(for: "alice")
        var query = ConversationQuery()
        query.limit = 2
        var collected: [String] = []
        var pages = 0
        repeat {
            let page = try await alice.conversations(query)
            collected += conversationIds(page.items)
            query.cursor = page.nextCursor
            pages += 1
        } while query.cursor != nil
        XCTAssertEqual(pages, 3)
        await assertEqual(collected, conversationIds(try await conversations(alice) { $0.limit = 50 }))
        XCTAssertEqual(Set(collected).count, 5)
    }

    func testConversationType() async throws {
        try seedAlicesConversations()
        let alice = simulator.client(for: "alice")
        await assertEqual(conversationIds(try await conversations(alice) { $0.conversationType = .group }), ["group_team"])
        await assertEqual(try await conversations(alice) { $0.conversationType = .user }.count, 3)
    }

    func testUnreadOnly() async throws {
        try seedAlicesConversations()
        let alice = simulator.client(for: "alice")
        await assertEqual(conversationIds(try await conversations(alice) { $0.unread = true }), ["group_team", "alice_user_carol"])
    }

    func testConversationTagsAreTheUsersOwn() async throws {
        try seedAlicesConversations()
        try simulator.tagConversation("alice_user_carol", for: "alice", tags: ["archive"])
        let alice = simulator.client(for: "alice"), carol = simulator.client(for: "carol")
        await assertEqual(conversationIds(try await conversations(alice) { $0.tags = ["archive"] }), ["alice_user_carol"])
        await assertEqual(try await conversations(carol) { $0.tags = ["archive"] }.count, 0)
        await assertEqual(try await alice.conversation(with: "carol", type: .user)["tags"], ["archive"])
    }

    func testUserAndGroupTags() async throws {
        try seedAlicesConversations()
        let alice = simulator.client(for: "alice")
        await assertEqual(conversationIds(try await conversations(alice) { $0.userTags = ["vip"] }), ["alice_user_carol"])
        await assertEqual(conversationIds(try await conversations(alice) { $0.groupTags = ["work"] }), ["group_team"])
        await assertEqual(conversationIds(try await conversations(alice) { $0.userTags = ["customer"]; $0.groupTags = ["work"] }),
                       ["group_team", "alice_user_carol", "alice_user_bob"])
    }

    func testAgenticFilters() async throws {
        try seedAlicesConversations()
        let alice = simulator.client(for: "alice")
        await assertEqual(conversationIds(try await conversations(alice) { $0.onlyAgentic = true }), ["alice_user_helper"])
        await assertFalse(conversationIds(try await conversations(alice) { $0.hideAgentic = true }).contains("alice_user_helper"))
        await assertEqual(try await conversations(alice) { $0.hideAgentic = true }.count, 3)
    }

    func testConversationsWithUsersIBlockedAreHiddenUnlessIncluded() async throws {
        try seedAlicesConversations()
        try simulator.block("carol", by: "alice")
        let alice = simulator.client(for: "alice"), carol = simulator.client(for: "carol")
        await assertFalse(conversationIds(try await conversations(alice)).contains("alice_user_carol"))
        let included = try await conversations(alice) { $0.includeBlockedUsers = true; $0.withBlockedInfo = true }
        let withCarol = included.first { $0["conversationId"] == "alice_user_carol" }
        XCTAssertEqual(withCarol?["conversationWith"]?["blockedByMe"], true)
        let carols = try await conversations(carol)
        XCTAssertEqual(carols.first { $0["conversationId"] == "alice_user_carol" }?["conversationWith"]?["hasBlockedMe"], true,
                       "the blocked side still lists it")
    }

    func testPinnedByMeOrBySystem() async throws {
        try seedAlicesConversations()
        try simulator.pinConversation("alice_user_bob", for: "alice")
        try simulator.pinConversation("alice_user_carol", for: "alice", bySystem: true)
        let alice = simulator.client(for: "alice")
        await assertEqual(conversationIds(try await conversations(alice) { $0.pinnedBy = ["me"] }), ["alice_user_bob"])
        await assertEqual(conversationIds(try await conversations(alice) { $0.pinnedBy = ["system"] }), ["alice_user_carol"])
        await assertEqual(try await conversations(alice) { $0.pinnedBy = ["me", "system"] }.count, 2)
        let bob = try await alice.conversation(with: "bob", type: .user)
        XCTAssertEqual(bob["pinnedBy"], "alice")
        XCTAssertEqual(bob["pinnedAt"]?.intValue, Int64(clock.seconds))
        await assertEqual(try await alice.conversation(with: "carol", type: .user)["pinnedBy"], "app_system")
        try simulator.unpinConversation("alice_user_bob", for: "alice")
        await assertEqual(try await conversations(alice) { $0.pinnedBy = ["me"] }.count, 0)
    }

    func testSearchKeywordMatchesTheOtherSidesName() async throws {
        try seedAlicesConversations()
        let alice = simulator.client(for: "alice")
        await assertEqual(conversationIds(try await conversations(alice) { $0.searchKeyword = "BOT" }), ["alice_user_helper"])
        await assertEqual(conversationIds(try await conversations(alice) { $0.searchKeyword = "tea" }), ["group_team"])
    }

    func testCustomMessagesThatDoNotUpdateTheConversationAreNotItsLastMessage() async throws {
        let text = try simulator.postText("hello", from: "alice", to: .user("bob"))
        clock.advance(by: 5)
        try simulator.post(.custom(type: "typing-state", data: [:], updateConversation: false), from: "alice", to: .user("bob"))
        let bob = simulator.client(for: "bob")
        let conversation = try await bob.conversation(with: "alice", type: .user)
        XCTAssertEqual(conversation["lastMessage"]?["id"]?.intValue, Int64(text))
        XCTAssertEqual(conversation["updatedAt"]?.intValue, Int64(clock.seconds - 5))
    }

    func testThreadRepliesDoNotBecomeTheLastMessage() async throws {
        let parent = try simulator.postText("q", from: "alice", to: .group("team"))
        try simulator.postText("a", from: "bob", to: .group("team"), parentId: parent)
        let alice = simulator.client(for: "alice")
        await assertEqual(try await alice.conversation(with: "team", type: .group)["lastMessage"]?["id"]?.intValue, Int64(parent))
    }

    func testDeletingAConversationHidesItForOneUserUntilANewMessage() async throws {
        try simulator.postText("1", from: "alice", to: .user("bob"))
        try simulator.deleteConversation("alice_user_bob", for: "alice")
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        await assertEqual(try await conversations(alice).count, 0)
        await assertEqual(try await conversations(bob).count, 1)
        try simulator.postText("2", from: "bob", to: .user("alice"))
        await assertEqual(conversationIds(try await conversations(alice)), ["alice_user_bob"])
    }

    func testSingleLookupAnswers404WhenThereIsNoConversation() async throws {
        let alice = simulator.client(for: "alice")
        let none = await backendError(try await alice.conversation(with: "bob", type: .user))
        XCTAssertEqual(statusAndCode(none), "404 ERR_NOT_FOUND")
        let unknown = await backendError(try await alice.conversation(with: "ghost", type: .user))
        XCTAssertEqual(statusAndCode(unknown), "404 ERR_NOT_FOUND")
        let notMember = await backendError(try await alice.conversation(with: "secret", type: .group))
        XCTAssertEqual(statusAndCode(notMember), "403 ERR_GROUP_NOT_JOINED")
        try simulator.postText("hi", from: "alice", to: .user("bob"))
        await assertEqual(try await alice.conversation(with: "bob", type: .user)["conversationId"], "alice_user_bob")
    }

    func testRemovedMembersLoseTheGroupConversation() async throws {
        try simulator.postText("hello team", from: "alice", to: .group("team"))
        let bob = simulator.client(for: "bob")
        await assertEqual(try await conversations(bob).count, 1)
        try simulator.removeMember("bob", from: "team")
        await assertEqual(try await conversations(bob).count, 0)
        let error = await backendError(try await self.messages(bob) { $0.scope = .group("team") })
        XCTAssertEqual(statusAndCode(error), "403 ERR_GROUP_NOT_JOINED")
    }
}
