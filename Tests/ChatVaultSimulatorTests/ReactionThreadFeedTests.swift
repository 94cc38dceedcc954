import ChatVault
import ChatVaultSimulator
import XCTest

/// Reactions by message (both directions), threads, and the notification feed.
final class ReactionThreadFeedTests: SimulatorTestCase {
    // MARK: Reactions

    func reactedMessage() throws -> Int {
        let id = try simulator.postText("vote", from: "alice", to: .group("team"))
        for (uid, emoji) in [("alice", "👍"), ("bob", "👍"), ("carol", "🎉"), ("bob", "🎉"), ("carol", "👍")] {
            clock.advance(by: 1)
            try simulator.react(emoji, to: id, by: uid)
        }
        return id
    }

    func testReactionsPageForwardAndBackWithoutGaps() async throws {
        let id = try reactedMessage()
        let bob = simulator.client(for: "bob")
        var query = ReactionQuery(messageId: id)
        query.limit = 2
        var forward: [String] = []
        repeat {
            let page = try await bob.reactions(query)
            forward += page.items.map { "\($0["uid"]!.stringValue!)\($0["reaction"]!.stringValue!)" }
            query.cursor = page.nextCursor
        } while query.cursor != nil
        XCTAssertEqual(forward, ["alice👍", "bob👍", "carol🎉", "bob🎉", "carol👍"], "oldest first")

        query = ReactionQuery(messageId: id)
        query.direction = .previous
        query.limit = 2
        var backward: [[String]] = []
        repeat {
            let page = try await bob.reactions(query)
            backward.append(page.items.map { "\($0["uid"]!.stringValue!)\($0["reaction"]!.stringValue!)" })
            query.cursor = page.nextCursor
        } while query.cursor != nil
        XCTAssertEqual(backward, [["bob🎉", "carol👍"], ["bob👍", "carol🎉"], ["alice👍"]], "newest page first, each ascending")
    }

    func testReactionsFilteredByEmojiWithTheReactingUser() async throws {
        let id = try reactedMessage()
        let alice = simulator.client(for: "alice")
        var query = ReactionQuery(messageId: id)
        query.reaction = "🎉"
        let items = try await alice.reactions(query).items
        XCTAssertEqual(strings(items, "uid"), ["carol", "bob"])
        XCTAssertEqual(items[0]["messageId"]?.intValue, Int64(id))
        XCTAssertEqual(items[0]["reactedBy"]?["name"], "Carol")
        let hidden = await backendError(try await self.simulator.client(for: "dave").reactions(ReactionQuery(messageId: id)))
        XCTAssertEqual(statusAndCode(hidden), "404 ERR_NOT_FOUND", "dave is not in team")
    }

    // MARK: Threads

    func testThreadsByLastReplyAndParticipation() async throws {
        let aliceAsks = try simulator.postText("alice asks", from: "alice", to: .group("team"))
        let carolAsks = try simulator.postText("carol asks", from: "carol", to: .group("team"))
        let bobAsksAlice = try simulator.postText("bob asks", from: "bob", to: .user("alice"))
        clock.advance(by: 1)
        try simulator.postText("re", from: "carol", to: .group("team"), parentId: aliceAsks)
        clock.advance(by: 1)
        try simulator.postText("re", from: "carol", to: .group("team"), parentId: carolAsks)
        clock.advance(by: 1)
        let lastReply = try simulator.postText("re", from: "alice", to: .user("bob"), parentId: bobAsksAlice)
        let alice = simulator.client(for: "alice")

        func threads(_ configure: (inout ThreadQuery) -> Void = { _ in }) async throws -> [JSONValue] {
            var query = ThreadQuery()
            configure(&query)
            return try await alice.threads(query).items
        }
        let mine = try await threads()
        XCTAssertEqual(mine.map { $0["parentMessage"]?["id"]?.intValue }, [Int64(bobAsksAlice), Int64(aliceAsks)],
                       "participated: asked or replied; newest reply first")
        XCTAssertEqual(mine[0]["lastReply"]?["id"]?.intValue, Int64(lastReply))
        XCTAssertEqual(mine[0]["replyCount"], 1)
        XCTAssertEqual(mine[0]["updatedAt"]?.intValue, Int64(clock.seconds))
        let all = try await threads { $0.participatedByMe = false }
        XCTAssertEqual(all.count, 3)
        let inTeam = try await threads { $0.participatedByMe = false; $0.scope = .group("team") }
        XCTAssertEqual(inTeam.map { $0["parentMessage"]?["id"]?.intValue }, [Int64(carolAsks), Int64(aliceAsks)])
        let paged = try await threads { $0.participatedByMe = false; $0.limit = 2 }
        XCTAssertEqual(paged.count, 2)
    }

    // MARK: Notification feed

    func testFeedFilters() async throws {
        let first = try simulator.postFeedItem(to: "alice", category: "promo", categoryId: "spring", content: ["title": "Sale"],
                                               tags: ["sale"], sentAt: 1_700_000_000)
        let second = try simulator.postFeedItem(to: "alice", category: "news", categoryId: "weekly", channelId: "email",
                                                sentAt: 1_700_086_400)
        let third = try simulator.postFeedItem(to: "alice", category: "promo", categoryId: "summer", tags: ["sale", "vip"],
                                               sentAt: 1_700_172_800)
        try simulator.postFeedItem(to: "bob", category: "promo")
        try simulator.markFeedItemRead(second)
        let alice = simulator.client(for: "alice")
        func feed(_ configure: (inout FeedQuery) -> Void = { _ in }) async throws -> [String] {
            var query = FeedQuery()
            configure(&query)
            return strings(try await alice.notificationFeed(query).items, "id")
        }
        await assertEqual(try await feed(), [third, second, first], "newest first, only mine")
        await assertEqual(try await feed { $0.readState = "read" }, [second])
        await assertEqual(try await feed { $0.readState = "unread" }, [third, first])
        await assertEqual(try await feed { $0.category = "promo" }, [third, first])
        await assertEqual(try await feed { $0.categoryId = "weekly" }, [second])
        await assertEqual(try await feed { $0.channelId = "email" }, [second])
        await assertEqual(try await feed { $0.tags = ["vip"] }, [third])
        await assertEqual(try await feed { $0.dateFrom = "2023-11-15T00:00:00Z" }, [third, second])
        await assertEqual(try await feed { $0.dateTo = "2023-11-15" }, [first])
        await assertEqual(try await feed { $0.limit = 2 }, [third, second])
        let bad = await backendError(try await feed { $0.dateFrom = "yesterday" })
        XCTAssertEqual(statusAndCode(bad), "400 ERR_INVALID_DATE")
        let badState = await backendError(try await feed { $0.readState = "maybe" })
        XCTAssertEqual(statusAndCode(badState), "400 ERR_INVALID_READ_STATE")

        var query = FeedQuery()
        query.categoryId = "weekly"
        let item = try await alice.notificationFeed(query).items[0]
        XCTAssertEqual(item["readAt"]?.intValue, Int64(clock.seconds))
        XCTAssertEqual(item["receiver"], "alice")
    }
}
