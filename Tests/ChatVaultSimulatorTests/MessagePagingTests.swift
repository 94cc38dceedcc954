import ChatVault
import ChatVaultSimulator
import XCTest

/// Paging through messages in both directions: ascending pages, cursors, starting points, no gaps
/// and no duplicates.
final class MessagePagingTests: SimulatorTestCase {
    func testPreviousPagesWalkBackWithoutGapsOrDuplicates() async throws {
        let all = try postTexts(25, between: "alice", and: "bob")
        let bob = simulator.client(for: "bob")
        var seen: [[Int]] = []
        var query = MessageQuery()
        query.scope = .user("alice")
        query.limit = 10
        while true {
            let page = try await bob.messages(query)
            let pageIds = ids(page.items)
            XCTAssertEqual(pageIds, pageIds.sorted(), "each page is ascending")
            seen.append(pageIds)
            guard let first = page.items.first, page.nextCursor != nil else { break }
            query.cursor = MessageCursor(sentAt: Int(first["sentAt"]!.intValue!), id: pageIds[0])
        }
        XCTAssertEqual(seen.map(\.count), [10, 10, 5])
        XCTAssertEqual(seen.reversed().flatMap { $0 }, all, "newest page first, together: everything once")
    }

    func testNextPagesWalkForwardFromTheStart() async throws {
        let all = try postTexts(25, between: "alice", and: "bob")
        let bob = simulator.client(for: "bob")
        var collected: [Int] = []
        var query = MessageQuery()
        query.scope = .user("alice")
        query.direction = .next
        query.limit = 10
        var pages = 0
        while true {
            let page = try await bob.messages(query)
            pages += 1
            collected += ids(page.items)
            guard let last = page.items.last, page.nextCursor != nil else { break }
            query.cursor = MessageCursor(sentAt: Int(last["sentAt"]!.intValue!), id: Int(last["id"]!.intValue!))
        }
        XCTAssertEqual(pages, 3)
        XCTAssertEqual(collected, all)
    }

    func testNextCursorNamesThePagesFarEdgeAndIsNilAtTheEnd() async throws {
        let all = try postTexts(5, between: "alice", and: "bob")
        let bob = simulator.client(for: "bob")
        var query = MessageQuery()
        query.scope = .user("alice")
        query.limit = 2
        let newest = try await bob.messages(query)
        XCTAssertEqual(ids(newest.items), Array(all[3...]))
        let edge = try await bob.message(id: all[3])
        XCTAssertEqual(newest.nextCursor, "\(edge["sentAt"]!.intValue!):\(all[3])")
        query.limit = 5
        await assertNil(try await bob.messages(query).nextCursor, "everything fits: no next page")
    }

    func testMessageIdStartsStrictlyBeforeOrAfterThatMessage() async throws {
        let all = try postTexts(9, between: "alice", and: "bob")
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { $0.scope = .user("alice"); $0.messageId = all[4]; $0.limit = 3 }), Array(all[1...3]))
        await assertEqual(ids(try await messages(bob) {
            $0.scope = .user("alice"); $0.messageId = all[4]; $0.limit = 3; $0.direction = .next
        }), Array(all[5...7]))
    }

    func testTimestampSplitsTheHistoryWithoutOverlap() async throws {
        let all = try postTexts(6, between: "alice", and: "bob")
        let bob = simulator.client(for: "bob")
        let t = Int(try await bob.message(id: all[3])["sentAt"]!.intValue!)
        let before = ids(try await messages(bob) { $0.scope = .user("alice"); $0.timestamp = t })
        let after = ids(try await messages(bob) { $0.scope = .user("alice"); $0.timestamp = t; $0.direction = .next })
        XCTAssertEqual(before, Array(all[..<3]), "previous: sentAt < timestamp")
        XCTAssertEqual(after, Array(all[3...]), "next: sentAt >= timestamp")
    }

    func testCursorWinsOverMessageIdAndTimestamp() async throws {
        let all = try postTexts(6, between: "alice", and: "bob")
        let bob = simulator.client(for: "bob")
        let json = try await bob.message(id: all[2])
        let page = try await messages(bob) {
            $0.scope = .user("alice"); $0.messageId = all[5]; $0.timestamp = 0
            $0.cursor = MessageCursor(sentAt: Int(json["sentAt"]!.intValue!), id: all[2])
        }
        XCTAssertEqual(ids(page), Array(all[..<2]))
    }

    func testMessagesSharingASecondAreOrderedByIdAndPageExactly() async throws {
        // The clock stands still: every message has the same sentAt.
        let all = try (0..<7).map { try simulator.postText("m\($0)", from: "alice", to: .user("bob")) }
        let bob = simulator.client(for: "bob")
        var collected: [Int] = []
        var query = MessageQuery()
        query.scope = .user("alice")
        query.limit = 3
        while true {
            let page = try await bob.messages(query)
            collected = ids(page.items) + collected
            guard page.nextCursor != nil, let first = page.items.first else { break }
            query.cursor = MessageCursor(sentAt: Int(first["sentAt"]!.intValue!), id: Int(first["id"]!.intValue!))
        }
        XCTAssertEqual(collected, all)
    }

    func testBackdatedMessagesTakeTheirPlaceInTime() async throws {
        let now = try simulator.postText("now", from: "alice", to: .user("bob"))
        let earlier = try simulator.postText("earlier", from: "bob", to: .user("alice"), sentAt: clock.seconds - 100)
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { $0.scope = .user("alice") }), [earlier, now])
    }

    func testFiltersApplyBeforeTheLimit() async throws {
        let all = try postTexts(10, between: "alice", and: "bob")
        let fromAlice = stride(from: 0, to: 10, by: 2).map { all[$0] }
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { $0.scope = .user("alice"); $0.unread = true; $0.limit = 3 }), Array(fromAlice.suffix(3)))
    }

    func testALimitBelowOneIsRefused() async throws {
        let bob = simulator.client(for: "bob")
        let error = await backendError(try await self.messages(bob) { $0.limit = 0 })
        XCTAssertEqual(statusAndCode(error), "400 ERR_INVALID_LIMIT")
    }
}
