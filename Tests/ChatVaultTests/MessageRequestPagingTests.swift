import ChatVaultSimulator
import Foundation
import XCTest
@testable import ChatVault

/// `MessagesRequest` paging across failed fetches, against the simulator: the cache and the server
/// keep separate positions, so offline paging walks on through the cache (even over a gap the cache
/// cannot see) while the server's position moves only by server pages, and the cache's realigns on
/// each server page.
///
/// Every test starts from the same cache: a 150-message conversation with bob of which the cache
/// holds messages 1–10 and 101–150, written through by two online reads of those two ranges.
final class MessageRequestPagingTests: XCTestCase {
    // MARK: - A gap in the cache

    func testAfterOfflineFetchPreviousStepsOverAGapTheServerPagesStillBringEveryMessageOnceInOrder() async throws {
        let f = try await GappedConversation()
        let request = f.request(limit: 30)
        f.h.client.network = .offline
        let offline = [await f.fetch(request, .previous), await f.fetch(request, .previous)]
        XCTAssertEqual(offline, [.offline(f.m(121...150)), .offline(f.m(1...10) + f.m(101...120))],
                       "offline, the cache pages on, over the gap it does not know of")

        f.h.client.network = .online
        let online = try await f.walkOnline(request, .previous)
        XCTAssertEqual(online.map(\.server), [f.m(121...150), f.m(91...120), f.m(61...90), f.m(31...60), f.m(1...30), []],
                       "the server pages from its own position: the newest end, as it never answered this request")
        XCTAssertEqual(online.compactMap(\.server).reversed().flatMap { $0 }, f.ids, "every server message once, in order")
        XCTAssertEqual(try f.cachedIds(), f.ids, "the gap is filled in the cache too")
    }

    func testAfterOfflineFetchNextStepsOverAGapTheServerPagesStillBringEveryMessageOnceInOrder() async throws {
        let f = try await GappedConversation()
        let request = f.request(limit: 30)
        f.h.client.network = .offline
        let offline = [await f.fetch(request, .next), await f.fetch(request, .next)]
        XCTAssertEqual(offline, [.offline(f.m(1...10) + f.m(101...120)), .offline(f.m(121...150))],
                       "offline, the cache pages on, over the gap it does not know of")

        f.h.client.network = .online
        let online = try await f.walkOnline(request, .next)
        XCTAssertEqual(online.map(\.server), [f.m(1...30), f.m(31...60), f.m(61...90), f.m(91...120), f.m(121...150), []],
                       "the server pages from its own position: the oldest end, as it never answered this request")
        XCTAssertEqual(online.compactMap(\.server).flatMap { $0 }, f.ids, "every server message once, in order")
        XCTAssertEqual(try f.cachedIds(), f.ids, "the gap is filled in the cache too")
    }

    // MARK: - Offline paging, and the realignment on a server page

    func testOfflineFetchPreviousWalksTheCacheAndRealignsOnEachServerPage() async throws {
        let f = try await GappedConversation()
        let request = f.request(limit: 30)
        var pages: [FetchOutcome] = []
        for online in [false, false, false, true, false, false, true, false] {
            f.h.client.network = online ? .online : .offline
            pages.append(await f.fetch(request, .previous))
        }
        XCTAssertEqual(pages, [
            // Offline: the cache walks to its end.
            .offline(f.m(121...150)),
            .offline(f.m(1...10) + f.m(101...120)),
            .offline([]),
            // Online: the cached page goes on from the cache's position (past its oldest
            // message), the server's from its own (the newest end).
            .online(cached: [], server: f.m(121...150)),
            // The cache realigned on the server page's far edge (message 121) and walks again.
            .offline(f.m(1...10) + f.m(101...120)),
            .offline([]),
            // The server goes on from its last page; the cache realigns on message 91.
            .online(cached: [], server: f.m(91...120)),
            .offline(f.m(1...10)),
        ])
    }

    func testOfflineFetchNextWalksTheCacheAndRealignsOnEachServerPage() async throws {
        let f = try await GappedConversation()
        let request = f.request(limit: 30)
        var pages: [FetchOutcome] = []
        for online in [false, false, true, false, true, false] {
            f.h.client.network = online ? .online : .offline
            pages.append(await f.fetch(request, .next))
        }
        XCTAssertEqual(pages, [
            .offline(f.m(1...10) + f.m(101...120)),
            .offline(f.m(121...150)),
            // The cache's position is past its newest message; the server starts at the oldest end.
            .online(cached: [], server: f.m(1...30)),
            // Realigned on message 30: the cache (now 1–30 and 101–150) walks on from there.
            .offline(f.m(101...130)),
            // The cached page goes on from the cache's position, the server's from its own.
            .online(cached: f.m(131...150), server: f.m(31...60)),
            // Realigned on message 60.
            .offline(f.m(101...130)),
        ])
    }

    // MARK: - Online, paging is as before

    /// An uninterrupted online walk pages exactly as it did when the request kept one position
    /// (these pages are what that version delivered), and a walk interrupted by offline fetches
    /// gets the same server pages.
    func testTheServerPagesAreThoseOfAnUninterruptedWalkWhateverOfflineFetchesCameBetween() async throws {
        let interruptions = [2, 1, 0, 3, 1, 2, 1, 4]
        for direction in PageDirection.allCases {
            let f = try await GappedConversation()
            let uninterrupted = try await f.walkOnline(f.request(limit: 30), direction)
            let expected: [FetchOutcome] = direction == .previous ? [
                .online(cached: f.m(121...150), server: f.m(121...150)),
                .online(cached: f.m(1...10) + f.m(101...120), server: f.m(91...120)),
                .online(cached: f.m(1...10), server: f.m(61...90)),
                .online(cached: f.m(1...10), server: f.m(31...60)),
                .online(cached: f.m(1...10), server: f.m(1...30)),
                .online(cached: [], server: []),
            ] : [
                .online(cached: f.m(1...10) + f.m(101...120), server: f.m(1...30)),
                .online(cached: f.m(101...130), server: f.m(31...60)),
                .online(cached: f.m(101...130), server: f.m(61...90)),
                .online(cached: f.m(101...130), server: f.m(91...120)),
                .online(cached: f.m(121...150), server: f.m(121...150)),
                .online(cached: [], server: []),
            ]
            XCTAssertEqual(uninterrupted, expected, "\(direction): an uninterrupted walk")

            let g = try await GappedConversation()
            let request = g.request(limit: 30)
            var served: [[Int]?] = []
            for offlineFetches in interruptions {
                g.h.client.network = .offline
                for _ in 0..<offlineFetches {
                    let page = await g.fetch(request, direction)
                    XCTAssertEqual(page.error, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE, "\(direction)")
                }
                g.h.client.network = .online
                let server = await g.fetch(request, direction).server
                served.append(server)
                if server?.isEmpty != false { break }
            }
            XCTAssertEqual(served, uninterrupted.map(\.server), "\(direction): interrupted, the same server pages")
            XCTAssertEqual(try g.cachedIds(), g.ids, "\(direction)")
        }
    }
}

/// What one fetch delivered: its cached page's ids, then its server page's or its error.
struct FetchOutcome: Equatable {
    var cached: [Int]
    /// Nil when the fetch ended with an error.
    var server: [Int]?
    var error: String?

    static func offline(_ cached: [Int]) -> FetchOutcome {
        FetchOutcome(cached: cached, server: nil, error: CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
    }

    static func online(cached: [Int], server: [Int]) -> FetchOutcome {
        FetchOutcome(cached: cached, server: server, error: nil)
    }
}

/// A 150-message conversation between alice and bob, of which alice's cache holds messages 1–10
/// and 101–150: an online `fetchPrevious` of the newest 50 and an online `fetchNext` of the oldest
/// 10 wrote them through.
final class GappedConversation {
    let h: ReadHarness
    /// The conversation's message ids, oldest first (message n is `ids[n - 1]`).
    let ids: [Int]

    init(file: StaticString = #filePath, line: UInt = #line) async throws {
        h = try ReadHarness()
        ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 150))
        await h.login()
        _ = try await request(limit: 50).fetchPrevious().server.get()
        _ = try await request(limit: 10).fetchNext().server.get()
        XCTAssertEqual(try cachedIds(), m(1...10) + m(101...150), "the cache has a gap", file: file, line: line)
    }

    /// The ids of messages `numbers` (1-based, oldest first).
    func m(_ numbers: ClosedRange<Int>) -> [Int] {
        Array(ids[(numbers.lowerBound - 1)..<numbers.upperBound])
    }

    func request(limit: Int) -> MessagesRequest {
        h.messages { $0.set(uid: "bob").set(limit: limit) }
    }

    func cachedIds() throws -> [Int] {
        try h.cachedIds("alice_user_bob")
    }

    func fetch(_ request: MessagesRequest, _ direction: PageDirection) async -> FetchOutcome {
        let result = direction == .previous ? await request.fetchPrevious() : await request.fetchNext()
        let cached = result.cached?.map(\.id) ?? []
        switch result.server {
        case .success(let items): return FetchOutcome(cached: cached, server: items.map(\.id), error: nil)
        case .failure(let error): return FetchOutcome(cached: cached, server: nil, error: error.errorCode)
        }
    }

    /// Online fetches until the server's page is empty (the end of history), at most 12.
    func walkOnline(_ request: MessagesRequest, _ direction: PageDirection,
                    file: StaticString = #filePath, line: UInt = #line) async throws -> [FetchOutcome] {
        var pages: [FetchOutcome] = []
        while pages.count < 12 {
            let page = await fetch(request, direction)
            pages.append(page)
            XCTAssertNil(page.error, "online", file: file, line: line)
            if page.server?.isEmpty != false { break }
        }
        return pages
    }
}
