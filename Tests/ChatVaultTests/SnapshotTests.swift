import ChatVaultSimulator
import Foundation
import XCTest
@testable import ChatVault
import VaultStore

/// The entity-list snapshots: their keys, `maxSnapshotQueries` (LRU across every kind),
/// `snapshotTtlDays` under the simulated clock, and both clamps.
final class SnapshotTests: XCTestCase {
    static let day: Double = 86_400

    /// Users, groups and the feed on one server, so one harness can record every kind.
    static func harness(_ configure: @escaping (OfflineConfig.Builder) -> Void = { _ in }) async throws -> ReadHarness {
        let h = try ReadHarness(configure: configure)
        try ListProbe.users.seed(h)
        try ListProbe.groups.seed(h)
        try ListProbe.notificationFeed.seed(h)
        await h.login()
        return h
    }

    func users(_ h: ReadHarness, limit: Int = 2) -> ListHandle { ListProbe.users.make(h, .base(limit: limit)) }
    func groups(_ h: ReadHarness, limit: Int = 2) -> ListHandle { ListProbe.groups.make(h, .base(limit: limit)) }
    func feed(_ h: ReadHarness, limit: Int = 2) -> ListHandle { ListProbe.notificationFeed.make(h, .base(limit: limit)) }

    // MARK: Keys

    func testEqualSettingsShareOneSnapshotHoweverTheyWereSet() async throws {
        let h = try await Self.harness()
        let recorded = await UsersRequest.UsersRequestBuilder(vault: h.vault)
            .set(roles: ["default", "admin"]).set(UIDs: ["u2", "bob", "u1"]).set(limit: 30).build().fetchNext()
        let page = try XCTUnwrap(ListOutcome(recorded, id: \.uid).serverIds)
        XCTAssertEqual(page, ["bob", "u1", "u2"])
        h.client.network = .offline
        // Default limit (30) left unset, set-like lists in another order and with repeats.
        let replayed = await UsersRequest.UsersRequestBuilder(vault: h.vault)
            .set(UIDs: ["u1", "u2", "bob", "u1"]).set(roles: ["admin", "default", "admin"]).build().fetchNext()
        XCTAssertEqual(replayed.cached?.map(\.uid), page)
        XCTAssertEqual(try h.snapshotKeys().count, 1)
        // But a different value is a different snapshot.
        let other = await UsersRequest.UsersRequestBuilder(vault: h.vault).set(UIDs: ["u1", "u2"]).set(roles: ["default", "admin"]).build().fetchNext()
        XCTAssertEqual(other.cached?.count, 0)
    }

    func testEachKindKeepsItsOwnSnapshotsAndMembersAreKeyedByGroup() async throws {
        let h = try await ReadHarness.seeded(.groupMembers)
        try h.simulator.addGroup("other", name: "Other", owner: "alice", members: ["m1"])
        let team = try await ListProbe.groupMembers.make(h, .base(limit: 2)).serverIds("team")
        h.client.network = .offline
        let other = await GroupMembersRequest.GroupMembersRequestBuilder(guid: "other", vault: h.vault).set(limit: 2).build().fetchNext()
        XCTAssertEqual(other.cached?.count, 0, "another group's members are another snapshot")
        let banned = await BannedGroupMembersRequest.BannedGroupMembersRequestBuilder(guid: "team", vault: h.vault).set(limit: 2).build().fetchNext()
        XCTAssertEqual(banned.cached?.count, 0, "banned members are not members")
        let same = await GroupMembersRequest.GroupMembersRequestBuilder(guid: "team", vault: h.vault).set(limit: 2).build().fetchNext()
        XCTAssertEqual(same.cached?.map(\.uid), team)
    }

    func testAPageThatEndsTheListDropsPagesRecordedBeyondIt() async throws {
        let h = try await Self.harness()
        let long = users(h)
        for _ in 0..<3 { _ = try await long.serverIds("recording") }
        XCTAssertEqual(try h.snapshotRows().map(\.page), [0, 1, 2])
        // Two users leave: the list now ends on page 1.
        try h.simulator.updateUser("u2") { $0.deactivatedAt = 1 }
        try h.simulator.updateUser("u3") { $0.deactivatedAt = 1 }
        let short = users(h)
        _ = try await short.serverIds("page 0")
        let last = try await short.serverIds("page 1")
        XCTAssertEqual(last, ["u1"])
        XCTAssertEqual(try h.snapshotRows().map(\.page), [0, 1], "page 2 no longer exists on the server")
        h.client.network = .offline
        let offline = users(h)
        _ = await offline.fetch()
        _ = await offline.fetch()
        let third = await offline.fetch()
        XCTAssertEqual(third.cached, [])
    }

    // MARK: maxSnapshotQueries

    func testAtMostMaxSnapshotQueriesSnapshotsAreKeptLeastRecentlyUsedFirstAcrossKinds() async throws {
        let h = try await Self.harness { $0.setMaxSnapshotQueries(2) }
        let usersPage = try await users(h).serverIds("users")
        let groupsPage = try await groups(h).serverIds("groups")
        XCTAssertEqual(try h.snapshotKeys().count, 2)
        // Replaying the users snapshot (offline) makes it the most recently used.
        h.client.network = .offline
        let usersReplayed = await users(h).fetch().cached
        XCTAssertEqual(usersReplayed, usersPage)
        h.client.network = .online
        let feedPage = try await feed(h).serverIds("feed")
        let kinds = Set(try h.snapshotRows().map(\.kind))
        XCTAssertEqual(kinds, ["users", "notificationFeed"], "the groups snapshot was the least recently used")
        h.client.network = .offline
        let groupsReplayed = await groups(h).fetch().cached
        XCTAssertEqual(groupsReplayed, [], "evicted")
        let usersAgain = await users(h).fetch().cached
        XCTAssertEqual(usersAgain, usersPage)
        let feedReplayed = await feed(h).fetch().cached
        XCTAssertEqual(feedReplayed, feedPage)
        XCTAssertNotEqual(groupsPage, [])
    }

    func testALimitOfOneKeepsOnlyTheLatestSnapshotWithAllItsPages() async throws {
        let h = try await Self.harness { $0.setMaxSnapshotQueries(1) }
        let request = users(h)
        let pages = [try await request.serverIds("0"), try await request.serverIds("1")]
        XCTAssertEqual(try h.snapshotRows().map(\.page), [0, 1], "the pages of one key count as one snapshot")
        _ = try await groups(h).serverIds("groups")
        XCTAssertEqual(Set(try h.snapshotRows().map(\.kind)), ["groups"])
        h.client.network = .offline
        let usersReplayed = await users(h).fetch().cached
        XCTAssertEqual(usersReplayed, [], "\(pages) were evicted")
    }

    func testMaxSnapshotQueriesOfZeroOrLessMeansTheDefaultOfOneHundred() async throws {
        for setting in [0, -5] {
            let h = try await Self.harness { $0.setMaxSnapshotQueries(setting) }
            XCTAssertEqual(h.vault.config.maxSnapshotQueries, 100)
            // 101 distinct settings: the limit makes each one its own key.
            for limit in 1...100 { _ = try await users(h, limit: limit).serverIds("limit \(limit)") }
            _ = try await groups(h).serverIds("groups")
            let kept = try h.snapshotRows()
            XCTAssertEqual(Set(kept.map(\.key)).count, 100, "setting \(setting)")
            XCTAssertFalse(kept.contains { $0.key.contains("\"limit\":1,") }, "setting \(setting): the oldest went")
            XCTAssertTrue(kept.contains { $0.key.contains("\"limit\":2,") }, "setting \(setting): the second oldest stayed")
        }
    }

    // MARK: snapshotTtlDays

    func testAPageOlderThanTheTtlIsNeitherReplayedNorKept() async throws {
        let h = try await Self.harness()
        XCTAssertEqual(h.vault.config.snapshotTtlDays, 7)
        let page = try await users(h).serverIds("users")
        h.client.network = .offline
        h.clock.advance(by: 7 * Self.day)
        let sevenDaysOld = await users(h).fetch().cached
        XCTAssertEqual(sevenDaysOld, page, "exactly seven days old: still fresh")
        h.clock.advance(by: 1)
        let expired = await users(h).fetch()
        XCTAssertEqual(expired.cached, [])
        XCTAssertEqual(expired.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
        XCTAssertEqual(try h.snapshotRows().count, 0, "pruned on read")
    }

    func testExpiredPagesArePrunedOnWriteToo() async throws {
        let h = try await Self.harness()
        _ = try await users(h).serverIds("users")
        h.clock.advance(by: 8 * Self.day)
        _ = try await groups(h).serverIds("groups")
        XCTAssertEqual(Set(try h.snapshotRows().map(\.kind)), ["groups"], "the stale users pages went with the groups write")
    }

    func testTheTtlCountsFromEachPagesOwnRecording() async throws {
        let h = try await Self.harness()
        let request = users(h)
        let first = try await request.serverIds("page 0")
        h.clock.advance(by: 5 * Self.day)
        let second = try await request.serverIds("page 1")
        h.clock.advance(by: 3 * Self.day)
        h.client.network = .offline
        let offline = users(h)
        let page0 = await offline.fetch()
        XCTAssertEqual(page0.cached, [], "page 0 is eight days old: \(first)")
        XCTAssertEqual(try h.snapshotRows().map(\.page), [1], "page 1 is three days old and stays")
        XCTAssertNotEqual(second, [])
    }

    func testACustomTtlIsHonoured() async throws {
        let h = try await Self.harness { $0.setSnapshotTtlDays(1) }
        let page = try await feed(h).serverIds("feed")
        h.client.network = .offline
        h.clock.advance(by: 23 * 3600)
        let after23Hours = await feed(h).fetch().cached
        XCTAssertEqual(after23Hours, page)
        h.clock.advance(by: 2 * 3600)
        let after25Hours = await feed(h).fetch().cached
        XCTAssertEqual(after25Hours, [])
    }

    func testSnapshotTtlDaysOfZeroOrLessMeansTheDefaultOfSevenDays() async throws {
        for setting in [0, -3] {
            let h = try await Self.harness { $0.setSnapshotTtlDays(setting) }
            XCTAssertEqual(h.vault.config.snapshotTtlDays, 7)
            let page = try await groups(h).serverIds("groups")
            h.client.network = .offline
            h.clock.advance(by: 6 * Self.day)
            let after6Days = await groups(h).fetch().cached
            XCTAssertEqual(after6Days, page, "setting \(setting): not 0 days")
            h.clock.advance(by: 2 * Self.day)
            let after8Days = await groups(h).fetch().cached
            XCTAssertEqual(after8Days, [], "setting \(setting): not unlimited")
        }
    }

    func testAHugeTtlNeverOverflows() async throws {
        let h = try await Self.harness { $0.setSnapshotTtlDays(Int.max) }
        let page = try await users(h).serverIds("users")
        h.clock.advance(by: 3650 * Self.day)
        h.client.network = .offline
        let after10Years = await users(h).fetch().cached
        XCTAssertEqual(after10Years, page)
    }

    // MARK: Storage

    func testSnapshotsLiveInTheEncryptedCacheAndAreClearedWithIt() async throws {
        let h = try await Self.harness()
        _ = try await users(h).serverIds("users")
        XCTAssertEqual(h.vault.offlineEncryptionStatus().atRest, OfflineEncryptionTier.SQLCIPHER)
        XCTAssertEqual(try h.snapshotRows().count, 1)
        try await h.vault.clearOfflineCacheAndWait()
        h.client.network = .offline
        let afterClear = await users(h).fetch().cached
        XCTAssertEqual(afterClear, [])
    }
}
