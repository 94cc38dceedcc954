import ChatVault
import ChatVaultSimulator
import XCTest

/// `changes(since:limit:)`: the catch-up log, per user, replayed forward with paging.
final class ChangeLogTests: SimulatorTestCase {
    func upserted(_ page: ChangeLogPage) -> [Int] {
        page.changes.compactMap { change in
            if case .messageUpserted(let json) = change { return json["id"]?.intValue.map(Int.init) }
            return nil
        }
    }

    func testChangesAfterASyncPointInOrder() async throws {
        let start = clock.seconds64
        clock.advance(by: 1)
        let first = try simulator.postText("1", from: "alice", to: .user("bob"))
        clock.advance(by: 1)
        let second = try simulator.postText("2", from: "bob", to: .user("alice"))
        clock.advance(by: 1)
        try simulator.edit(first, to: .text("1!"))
        clock.advance(by: 1)
        try simulator.delete(second)
        clock.advance(by: 1)
        let alice = simulator.client(for: "alice")
        let page = try await alice.changes(since: simulator.changeToken(at: start), limit: 100)
        XCTAssertEqual(page.changes.count, 5)
        XCTAssertEqual(upserted(page), [first, second, first, second])
        XCTAssertEqual(page.changes.last, .messageDeleted(id: second, conversationId: "alice_user_bob"))
        if case .messageUpserted(let json) = page.changes[2] { XCTAssertEqual(json["data"]?["text"], "1!") }
        XCTAssertEqual(page.nextToken, simulator.changeToken(at: clock.seconds64 - 1))
        XCTAssertEqual(page.serverTime, clock.seconds64, "caught up: the server's clock")
        XCTAssertFalse(page.hasMore)
        await assertEqual(try await alice.changes(since: page.nextToken, limit: 100).changes, [])
    }

    func testTheLatestSyncPointSkipsTheHistoryAndResumesAfterIt() async throws {
        let alice = simulator.client(for: "alice")
        _ = try await alice.login(userId: "alice")
        try simulator.postText("history", from: "bob", to: .user("alice"))
        clock.advance(by: 10)
        let point = try await alice.latestSyncPoint()
        XCTAssertEqual(point.changes, [])
        XCTAssertFalse(point.hasMore)
        XCTAssertEqual(point.serverTime, clock.seconds64)
        await assertEqual(try await alice.changes(since: point.nextToken, limit: 100).changes, [], "nothing before the point")
        let now = try simulator.postText("now", from: "bob", to: .user("alice"))
        clock.advance(by: 1)
        await assertEqual(upserted(try await alice.changes(since: point.nextToken, limit: 100)), [now])
    }

    func testEachUserSeesOnlyTheirConversations() async throws {
        try simulator.postText("a→b", from: "alice", to: .user("bob"))
        try simulator.postText("team", from: "carol", to: .group("team"))
        try simulator.postText("secret", from: "dave", to: .group("secret"))
        clock.advance(by: 1)
        await assertEqual(try await simulator.client(for: "alice").changes(since: nil, limit: 100).changes.count, 2)
        await assertEqual(try await simulator.client(for: "dave").changes(since: nil, limit: 100).changes.count, 1)
        await assertEqual(try await simulator.client(for: "helper").changes(since: nil, limit: 100).changes.count, 0)
    }

    func testPagingWithNextTokenAndHasMoreReplaysEverythingOnce() async throws {
        var expected: [Int] = []
        for i in 0..<23 {
            clock.advance(by: 1)
            expected.append(try simulator.postText("m\(i)", from: "alice", to: .user("bob")))
        }
        clock.advance(by: 1)
        let bob = simulator.client(for: "bob")
        var since: String?
        var collected: [Int] = []
        var pages = 0
        while true {
            let page = try await bob.changes(since: since, limit: 10)
            pages += 1
            collected += upserted(page)
            since = page.nextToken
            if !page.hasMore { break }
        }
        XCTAssertEqual(pages, 3)
        XCTAssertEqual(collected, expected)
    }

    func testServerTimeIsThePointReachedWhilePagingThenTheClock() async throws {
        clock.advance(by: 1)
        let early = clock.seconds64
        try (0..<3).forEach { _ in try simulator.postText("e", from: "alice", to: .user("bob")) }
        clock.advance(by: 5)
        try simulator.postText("l", from: "alice", to: .user("bob"))
        clock.advance(by: 1)
        let bob = simulator.client(for: "bob")
        let first = try await bob.changes(since: nil, limit: 3)
        XCTAssertTrue(first.hasMore)
        XCTAssertEqual(first.serverTime, early, "a partial page reaches the time of its last change")
        let second = try await bob.changes(since: first.nextToken, limit: 3)
        XCTAssertFalse(second.hasMore)
        XCTAssertEqual(second.serverTime, clock.seconds64, "a caught-up page reaches the server's clock")
        let empty = try await bob.changes(since: second.nextToken, limit: 3)
        XCTAssertEqual(empty.changes, [])
        XCTAssertEqual(empty.nextToken, second.nextToken, "an empty page keeps the point it was given")
    }

    func testGarbageTokensAreATypedInvalidTokenErrorNeverACrash() async throws {
        let message = try simulator.postText("x", from: "alice", to: .user("bob"))
        clock.advance(by: 1)
        let bob = simulator.client(for: "bob")
        let valid = try await bob.changes(since: nil, limit: 10).nextToken
        var garbage = ["", ".", "..", "0", "-1", "cvs1", "cvs1..", "cvs1.0.", "cvs1.-1.00000000", "cvs2.0.00000000",
                       "cvs1.zzzzzzzzzzzzzzzzzzzz.00000000", "cvs1.0.0.0", "null", "💥", "cvs1.١٢.00000000",
                       String(repeating: "a", count: 10_000), valid + " ", " " + valid, valid.uppercased(),
                       String(valid.dropLast()), valid + "0"]
        // Every one-character change of a valid token, and random strings over its alphabet.
        let alphabet = Array("0123456789abcdefz.-+_ ")
        for index in valid.indices {
            for replacement in alphabet where replacement != valid[index] {
                var mutated = valid
                mutated.replaceSubrange(index...index, with: [replacement])
                garbage.append(mutated)
            }
        }
        var generator = SeededGenerator(seed: 8)
        for _ in 0..<300 {
            let length = Int.random(in: 0...40, using: &generator)
            garbage.append(String((0..<length).map { _ in alphabet.randomElement(using: &generator) ?? "." }))
        }
        for token in garbage where token != valid {
            let error = await backendError(try await bob.changes(since: token, limit: 10))
            XCTAssertEqual(statusAndCode(error), "400 ERR_SYNC_TOKEN_INVALID", "token \(token.prefix(40))")
            XCTAssertEqual(error?.isSyncTokenRejected, true)
        }
        await assertEqual(upserted(try await bob.changes(since: valid, limit: 10)), [], "the valid token still resumes")
        await assertEqual(upserted(try await bob.changes(since: nil, limit: 10)), [message])
    }

    func testAnExpiredTokenIsATypedGoneErrorAndNilStartsOver() async throws {
        try simulator.postText("old", from: "alice", to: .user("bob"))
        clock.advance(by: 1)
        let bob = simulator.client(for: "bob")
        let stale = try await bob.changes(since: nil, limit: 10).nextToken
        clock.advance(by: 10)
        let new = try simulator.postText("new", from: "alice", to: .user("bob"))
        clock.advance(by: 1)
        simulator.expireChangeTokens(before: clock.seconds64 - 5)
        let error = await backendError(try await bob.changes(since: stale, limit: 10))
        XCTAssertEqual(statusAndCode(error), "410 ERR_SYNC_TOKEN_EXPIRED")
        XCTAssertEqual(error?.isSyncTokenRejected, true)
        XCTAssertEqual(error?.isTransient, false, "retrying the same token cannot help")
        await assertEqual(upserted(try await bob.changes(since: nil, limit: 10)), [new], "nil starts over with what the log still holds")
        let recent = simulator.changeToken(at: clock.seconds64 - 2)
        await assertEqual(upserted(try await bob.changes(since: recent, limit: 10)), [new], "a recent token still resumes")
        // Paging after the start over never meets a 410: every token handed out is resumable.
        let more = try (0..<3).map { _ in try simulator.postText("more", from: "alice", to: .user("bob")) }
        clock.advance(by: 1)
        var token: String?
        var collected: [Int] = []
        repeat {
            let page = try await bob.changes(since: token, limit: 1)
            collected += upserted(page)
            token = page.nextToken
            if !page.hasMore { break }
        } while true
        XCTAssertEqual(collected, [new] + more)
        await assertEqual(try await bob.changes(since: token, limit: 1).changes, [])
        simulator.expireChangeTokens(before: 0)
        await assertEqual(statusAndCode(await backendError(try await bob.changes(since: stale, limit: 10))), "410 ERR_SYNC_TOKEN_EXPIRED",
                          "the floor only rises")
    }

    func testOnlyTheTwoTokenCodesCountAsARejectedToken() {
        XCTAssertFalse(BackendError.unreachable.isSyncTokenRejected)
        XCTAssertFalse(BackendError.server(status: 410, code: "ERR_URL_EXPIRED", message: "").isSyncTokenRejected)
        XCTAssertFalse(BackendError.server(status: 400, code: "ERR_INVALID_LIMIT", message: "").isSyncTokenRejected)
        XCTAssertFalse(BackendError.server(status: 500, code: BackendError.syncTokenExpiredCode, message: "").isSyncTokenRejected)
        XCTAssertTrue(BackendError.server(status: 410, code: "ERR_SYNC_TOKEN_EXPIRED", message: "").isSyncTokenRejected)
        XCTAssertTrue(BackendError.server(status: 400, code: "ERR_SYNC_TOKEN_INVALID", message: "").isSyncTokenRejected)
    }

    func testAPageNeverSplitsOneSecond() async throws {
        clock.advance(by: 1)
        let early = try (0..<3).map { try simulator.postText("e\($0)", from: "alice", to: .user("bob")) }
        clock.advance(by: 1)
        let late = try (0..<4).map { try simulator.postText("l\($0)", from: "alice", to: .user("bob")) }
        clock.advance(by: 1)
        let bob = simulator.client(for: "bob")
        let first = try await bob.changes(since: nil, limit: 5)
        XCTAssertEqual(upserted(first), early, "the later second would not fit: it waits for the next page")
        XCTAssertTrue(first.hasMore)
        let second = try await bob.changes(since: first.nextToken, limit: 2)
        XCTAssertEqual(upserted(second), late, "one second larger than the limit comes whole")
        XCTAssertFalse(second.hasMore)
    }

    func testTheCurrentSecondIsReplayedUntilTheClockMoves() async throws {
        let bob = simulator.client(for: "bob")
        let first = try simulator.postText("1", from: "alice", to: .user("bob"))
        let page = try await bob.changes(since: nil, limit: 10)
        XCTAssertEqual(upserted(page), [first])
        let second = try simulator.postText("2", from: "alice", to: .user("bob"))  // same second
        let next = try await bob.changes(since: page.nextToken, limit: 10)
        XCTAssertEqual(upserted(next), [first, second], "nothing of the current second is lost")
        let session = try await bob.login(userId: "bob")
        await assertEqual(upserted(try await bob.changes(since: simulator.changeToken(at: session.serverTime), limit: 10)), [first, second])
        clock.advance(by: 1)
        await assertEqual(try await bob.changes(since: next.nextToken, limit: 10).changes, [])
    }

    func testRepliesAlsoUpsertTheirParent() async throws {
        let parent = try simulator.postText("q", from: "alice", to: .group("team"))
        clock.advance(by: 1)
        let reply = try simulator.postText("a", from: "bob", to: .group("team"), parentId: parent)
        clock.advance(by: 1)
        let page = try await simulator.client(for: "carol").changes(since: simulator.changeToken(at: clock.seconds64 - 2), limit: 10)
        XCTAssertEqual(upserted(page), [reply, parent])
        if case .messageUpserted(let json)? = page.changes.last { XCTAssertEqual(json["replyCount"], 1) }
    }

    func testReceiptsReactionsPinsAndSavesAreUpserts() async throws {
        let id = try simulator.postText("x", from: "alice", to: .group("team"))
        clock.advance(by: 1)
        let mark = clock.seconds64 - 1
        try simulator.markRead(upTo: id, by: "bob")
        try simulator.react("👍", to: id, by: "bob")
        try simulator.pin(id, by: "alice")
        try simulator.save(id, for: "carol")
        clock.advance(by: 1)
        await assertEqual(upserted(try await simulator.client(for: "alice").changes(since: simulator.changeToken(at: mark), limit: 10)), [id, id, id])
        await assertEqual(upserted(try await simulator.client(for: "carol").changes(since: simulator.changeToken(at: mark), limit: 10)), [id, id, id, id],
                       "a save reaches only its owner")
    }

    func testConversationRemovalsReachOnlyTheirUser() async throws {
        try simulator.postText("hi", from: "alice", to: .user("bob"))
        try simulator.postText("hi", from: "alice", to: .group("team"))
        clock.advance(by: 1)
        let mark = clock.seconds64 - 1
        try simulator.deleteConversation("alice_user_bob", for: "bob")
        try simulator.removeMember("carol", from: "team")
        clock.advance(by: 1)
        await assertEqual(try await simulator.client(for: "bob").changes(since: simulator.changeToken(at: mark), limit: 10).changes,
                       [.conversationRemoved(conversationId: "alice_user_bob")])
        await assertEqual(try await simulator.client(for: "carol").changes(since: simulator.changeToken(at: mark), limit: 10).changes,
                       [.conversationRemoved(conversationId: "group_team")])
        await assertEqual(try await simulator.client(for: "alice").changes(since: simulator.changeToken(at: mark), limit: 10).changes, [])
    }

    func testSeededHistoryIsLoggedAtItsOwnTime() async throws {
        let ids = try simulator.seedConversation(between: "alice", and: "bob", count: 10, spacing: 60)
        clock.advance(by: 1)
        let bob = simulator.client(for: "bob")
        let recent = try await bob.changes(since: simulator.changeToken(at: clock.seconds64 - 1 - 60 * 3), limit: 100)
        XCTAssertEqual(upserted(recent), Array(ids.suffix(3)))
        await assertEqual(upserted(try await bob.changes(since: nil, limit: 100)), Array(ids))
    }

    func testPayloadFaultReachesUpsertedMessages() async throws {
        try simulator.postText("x", from: "alice", to: .user("bob"))
        let bob = simulator.client(for: "bob")
        bob.failNext(.changes, with: .payload { _ in ["broken": true] })
        await assertEqual(try await bob.changes(since: nil, limit: 10).changes, [.messageUpserted(["broken": true])])
    }
}

