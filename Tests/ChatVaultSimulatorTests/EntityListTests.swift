import ChatVault
import ChatVaultSimulator
import XCTest

/// Users, blocked users, groups, members, banned members: filters, order and paging.
final class EntityListTests: SimulatorTestCase {
    func users(_ client: SimulatedClient, _ configure: (inout UserQuery) -> Void = { _ in }) async throws -> [String] {
        var query = UserQuery()
        configure(&query)
        return strings(try await client.users(query).items, "uid")
    }

    func testUsersAreEveryoneElseByNameCaseInsensitively() async throws {
        let alice = simulator.client(for: "alice")
        await assertEqual(try await users(alice), ["bob", "carol", "dave", "helper"])
        await assertEqual(try await users(alice) { $0.sortOrder = .desc }, ["helper", "dave", "carol", "bob"])
        await assertEqual(try await users(alice) { $0.sortBy = "status" }, ["carol", "bob", "dave", "helper"], "online first")
        let bad = await backendError(try await self.users(alice) { $0.sortBy = "shoeSize" })
        XCTAssertEqual(statusAndCode(bad), "400 ERR_INVALID_SORT_BY")
    }

    func testUserPagingByCursor() async throws {
        for i in 0..<7 { try simulator.addUser(SimulatedUser(uid: "extra\(i)", name: "Zed \(i)")) }
        let alice = simulator.client(for: "alice")
        var query = UserQuery()
        query.limit = 4
        var collected: [String] = []
        repeat {
            let page = try await alice.users(query)
            collected += strings(page.items, "uid")
            query.cursor = page.nextCursor
        } while query.cursor != nil
        await assertEqual(collected, try await users(alice) { $0.limit = 100 })
        XCTAssertEqual(collected.count, 11)
        query.cursor = "garbage"
        let error = await backendError(try await alice.users(query))
        XCTAssertEqual(statusAndCode(error), "400 ERR_INVALID_CURSOR")
    }

    func testUserFilters() async throws {
        try simulator.addUser(SimulatedUser(uid: "gone", name: "Gone", deactivatedAt: 1))
        try simulator.block("dave", by: "alice")
        try simulator.makeFriends("alice", "carol")
        try simulator.postText("hi", from: "alice", to: .user("bob"))
        let alice = simulator.client(for: "alice")

        await assertEqual(try await users(alice) { $0.searchKeyword = "BO" }, ["bob", "helper"], "uid or name")
        await assertEqual(try await users(alice) { $0.searchKeyword = "bo"; $0.searchIn = ["uid"] }, ["bob"])
        await assertEqual(try await users(alice) { $0.status = .online }, ["carol"])
        await assertEqual(try await users(alice) { $0.status = .offline }, ["bob", "dave", "helper"])
        await assertEqual(try await users(alice) { $0.hideBlockedUsers = true }, ["bob", "carol", "helper"])
        await assertEqual(try await users(alice) { $0.roles = ["moderator"] }, ["dave"])
        await assertEqual(try await users(alice) { $0.roles = ["default"] }, ["bob", "carol", "helper"])
        await assertEqual(try await users(alice) { $0.friendsOnly = true }, ["bob", "carol"], "declared, or sharing a conversation")
        await assertEqual(try await users(alice) { $0.tags = ["vip", "nope"] }, ["carol"])
        await assertEqual(try await users(alice) { $0.uids = ["dave", "bob", "ghost"] }, ["bob", "dave"])
        await assertFalse(try await users(alice).contains("gone"), "deactivated users are left out")
    }

    func testUserPerViewerBlockFlagsAndPresence() async throws {
        try simulator.block("bob", by: "alice")
        try simulator.setPresence("bob", .online)
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        var query = UserQuery()
        query.uids = ["bob"]
        let seenByAlice = try await alice.users(query).items[0]
        XCTAssertEqual(seenByAlice["blockedByMe"], true)
        XCTAssertEqual(seenByAlice["hasBlockedMe"], false)
        XCTAssertEqual(seenByAlice["status"], "online")
        XCTAssertEqual(seenByAlice["lastActiveAt"]?.intValue, Int64(clock.seconds))
        query.uids = ["alice"]
        let seenByBob = try await bob.users(query).items[0]
        XCTAssertEqual(seenByBob["hasBlockedMe"], true)
        XCTAssertEqual(seenByBob["role"], "admin")
    }

    func testBlockedUsersInEachDirection() async throws {
        try simulator.block("bob", by: "alice")
        try simulator.block("alice", by: "carol")
        try simulator.block("dave", by: "bob")
        let alice = simulator.client(for: "alice")
        func blocked(_ direction: BlockedDirection, _ keyword: String? = nil) async throws -> [String] {
            var query = BlockedUserQuery()
            query.direction = direction
            query.searchKeyword = keyword
            return strings(try await alice.blockedUsers(query).items, "uid")
        }
        await assertEqual(try await blocked(.byMe), ["bob"])
        await assertEqual(try await blocked(.me), ["carol"])
        await assertEqual(try await blocked(.both), ["bob", "carol"])
        await assertEqual(try await blocked(.both, "car"), ["carol"])
    }

    func testBlockAndUnblockThroughTheClient() async throws {
        let alice = simulator.client(for: "alice")
        await assertEqual(try await alice.blockUsers(["bob", "ghost"]), ["bob": true, "ghost": false])
        await assertEqual(strings(try await alice.blockedUsers(BlockedUserQuery()).items, "uid"), ["bob"])
        let refused = await backendError(try await alice.send(["receiver": "bob", "type": "text", "data": ["text": "x"]], localMessageId: "l1"))
        XCTAssertEqual(statusAndCode(refused), "403 ERR_BLOCKED")
        await assertEqual(try await alice.unblockUsers(["bob"]), ["bob": true])
        await assertEqual(try await alice.blockedUsers(BlockedUserQuery()).items.count, 0)
    }

    func testGroupsVisibleJoinedTaggedAndSearched() async throws {
        try simulator.addGroup("open", name: "Open Chat", tags: ["public"])
        let alice = simulator.client(for: "alice"), dave = simulator.client(for: "dave")
        func groups(_ client: SimulatedClient, _ configure: (inout GroupQuery) -> Void = { _ in }) async throws -> [String] {
            var query = GroupQuery()
            configure(&query)
            return strings(try await client.groups(query).items, "guid")
        }
        await assertEqual(try await groups(alice), ["open", "team"], "a private group only for its members")
        await assertEqual(try await groups(dave), ["open", "secret", "team"])
        await assertEqual(try await groups(alice) { $0.joinedOnly = true }, ["team"])
        await assertEqual(try await groups(alice) { $0.tags = ["work"] }, ["team"])
        await assertEqual(try await groups(dave) { $0.searchKeyword = "CLUB" }, ["secret"])
        var query = GroupQuery()
        query.searchKeyword = "Team"
        let team = try await alice.groups(query).items.first { $0["guid"] == "team" }
        XCTAssertEqual(team?["membersCount"], 3)
        XCTAssertEqual(team?["owner"], "alice")
        XCTAssertEqual(team?["type"], "public")
        let openForAlice = try await alice.groups(GroupQuery()).items.first { $0["guid"] == "open" }
        XCTAssertEqual(openForAlice?["hasJoined"], false)
        XCTAssertNil(openForAlice?["scope"])
    }

    func testGroupMembersFilteredByScopeKeywordAndPresence() async throws {
        let bob = simulator.client(for: "bob")
        func members(_ configure: (inout GroupMemberQuery) -> Void = { _ in }) async throws -> [String] {
            var query = GroupMemberQuery(guid: "team")
            configure(&query)
            return strings(try await bob.groupMembers(query).items, "uid")
        }
        await assertEqual(try await members(), ["alice", "bob", "carol"])
        await assertEqual(try await members { $0.scopes = ["admin", "moderator"] }, ["alice", "carol"])
        await assertEqual(try await members { $0.searchKeyword = "car" }, ["carol"])
        await assertEqual(try await members { $0.status = .online }, ["alice", "carol"])
        await assertEqual(try await members { $0.limit = 2 }, ["alice", "bob"])
        let first = try await bob.groupMembers(GroupMemberQuery(guid: "team")).items[0]
        XCTAssertEqual(first["scope"], "admin")
        XCTAssertEqual(first["guid"], "team")
        XCTAssertEqual(first["joinedAt"]?.intValue, Int64(clock.seconds))

        let outsider = simulator.client(for: "alice")
        let refused = await backendError(try await outsider.groupMembers(GroupMemberQuery(guid: "secret")))
        XCTAssertEqual(statusAndCode(refused), "403 ERR_NOT_A_MEMBER")
        let missing = await backendError(try await outsider.groupMembers(GroupMemberQuery(guid: "nope")))
        XCTAssertEqual(statusAndCode(missing), "404 ERR_GUID_NOT_FOUND")
    }

    func testBannedMembersAreListedApartAndLoseAccess() async throws {
        try simulator.setScope(.moderator, of: "bob", in: "team")
        try simulator.ban("bob", from: "team")
        let alice = simulator.client(for: "alice")
        let banned = try await alice.bannedGroupMembers(GroupMemberQuery(guid: "team")).items
        XCTAssertEqual(strings(banned, "uid"), ["bob"])
        XCTAssertEqual(banned[0]["scope"], "moderator")
        await assertEqual(strings(try await alice.groupMembers(GroupMemberQuery(guid: "team")).items, "uid"), ["alice", "carol"])
        XCTAssertThrowsError(try simulator.addMembers(["bob"], to: "team"))
        try simulator.unban("bob", from: "team")
        await assertEqual(try await alice.bannedGroupMembers(GroupMemberQuery(guid: "team")).items.count, 0)
    }
}
