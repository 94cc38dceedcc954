import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// The blocked-users exception: `BlockedUserRequest`'s cached page is the SDK's own list,
/// refreshed at login (and by the sync), changed by `blockUsers` / `unblockUsers` once the server
/// accepts; the first cached page holds the whole list and later pages are empty.
final class BlockedUsersTests: XCTestCase {
    /// alice, bob, carol plus dave, erin, frank, gina; alice blocked bob and carol; frank blocked alice.
    static func harness(enabled: Bool = true) throws -> ReadHarness {
        let h = try ReadHarness(enabled: enabled)
        for uid in ["dave", "erin", "frank", "gina"] { try h.simulator.addUser(SimulatedUser(uid: uid, name: uid.capitalized)) }
        try h.simulator.block("bob", by: "alice")
        try h.simulator.block("carol", by: "alice")
        try h.simulator.block("alice", by: "frank")
        return h
    }

    func blocked(_ h: ReadHarness, limit: Int = 30, _ configure: (BlockedUserRequest.BlockedUserRequestBuilder) -> Void = { _ in }) -> BlockedUserRequest {
        let builder = BlockedUserRequest.BlockedUserRequestBuilder(limit: limit, vault: h.vault)
        configure(builder)
        return builder.build()
    }

    // MARK: Login refresh

    func testLoginRefreshesTheListWithTheUsersIBlocked() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        XCTAssertEqual(try h.blockedNames(), ["Bob", "Carol"], "with their profiles")
        h.client.network = .offline
        let offline = await blocked(h).fetchNext()
        XCTAssertEqual(offline.cached?.map(\.uid), ["bob", "carol"], "a list never read online is served at once")
        XCTAssertEqual(ListOutcome(offline, id: \.uid).errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
    }

    func testTheLoginRefreshReplacesTheOldListFetchingEveryPage() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        await h.vault.logout()
        h.simulator.unblock("bob", by: "alice")
        for uid in ["dave", "erin", "gina"] { try h.simulator.block(uid, by: "alice") }
        for i in 1...150 {
            try h.simulator.addUser(SimulatedUser(uid: "z\(i)", name: "Zed \(1000 + i)"))
            try h.simulator.block("z\(i)", by: "alice")
        }
        let calls = h.client.callCount(.blockedUsers)
        await h.login()
        let expected = ["carol", "dave", "erin", "gina"] + (1...150).map { "z\($0)" }
        try h.waitForBlockedList(expected)
        XCTAssertEqual(h.client.callCount(.blockedUsers) - calls, 2, "two pages of 100")
    }

    func testAFailedRefreshKeepsTheOldList() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        h.simulator.unblock("bob", by: "alice")
        let failures: [(String, SimulatedFault?, NetworkCondition)] = [
            ("offline", nil, .offline),
            ("server error", .status(500, code: "ERR_INTERNAL"), .online),
            ("hostile page", .payload { _ in ["uid": .int(7)] }, .online),
            ("endless paging", .page { page in WirePage(items: page.items, nextCursor: "offset:0") }, .online),
        ]
        for (name, fault, network) in failures {
            if let fault { h.client.failNext(.blockedUsers, with: fault, times: 5) }
            h.client.network = network
            let replaced = await h.vault.refreshBlockedUsers()
            h.client.network = .online
            h.client.clearFaults()
            XCTAssertFalse(replaced, name)
            XCTAssertEqual(try h.blockedUids(), ["bob", "carol"], "\(name): the old list stays")
        }
        let replaced = await h.vault.refreshBlockedUsers()
        XCTAssertTrue(replaced)
        XCTAssertEqual(try h.blockedUids(), ["carol"])
    }

    func testALoginWhoseRefreshFailsKeepsTheOldList() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        await h.vault.logout()
        h.simulator.unblock("bob", by: "alice")
        h.simulator.unblock("carol", by: "alice")
        let calls = h.client.serverCallCount(.blockedUsers)
        h.client.failNext(.blockedUsers, with: .status(503, code: "ERR_UNAVAILABLE"))
        await h.login()
        h.waitForServerCalls(.blockedUsers, moreThan: calls)
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol"])
    }

    func testWithOfflineOffNothingIsRefreshedAndThereIsNoCachedPhase() async throws {
        let h = try Self.harness(enabled: false)
        await h.login()
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(h.client.callCount(.blockedUsers), 0)
        let recorder = ListRecorder()
        blocked(h).fetchNext(onCachedUsers: { recorder.onCached($0.map(\.uid)) }, onServerUsers: { recorder.onServer($0.map(\.uid)) },
                             onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.server(["bob", "carol", "frank"])])
        let result = try await h.vault.blockUsers(["dave"])
        XCTAssertEqual(result, ["dave": "success"], "blocking works without a cache")
    }

    // MARK: The cached page

    func testTheFirstCachedPageHoldsTheWholeListAndLaterPagesAreEmpty() async throws {
        let h = try Self.harness()
        for uid in ["dave", "erin", "gina"] { try h.simulator.block(uid, by: "alice") }
        await h.login()
        let all = ["bob", "carol", "dave", "erin", "gina"]
        try h.waitForBlockedList(all)

        let online = blocked(h, limit: 2) { $0.set(direction: .byMe) }
        let first = ListOutcome(await online.fetchNext(), id: \.uid)
        XCTAssertEqual(first.cached, all, "the whole list, whatever the limit")
        XCTAssertEqual(first.serverIds, ["bob", "carol"])
        let second = ListOutcome(await online.fetchNext(), id: \.uid)
        XCTAssertEqual(second.cached, [])
        XCTAssertEqual(second.serverIds, ["dave", "erin"])

        h.client.network = .offline
        let offline = blocked(h, limit: 2)
        let page0 = ListOutcome(await offline.fetchNext(), id: \.uid)
        let page1 = ListOutcome(await offline.fetchNext(), id: \.uid)
        XCTAssertEqual(page0.cached, all)
        XCTAssertEqual(page1.cached, [], "offline paging moved past the whole list")
        XCTAssertEqual(page1.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
    }

    func testByMeAndBothShowTheUsersIBlockedButMeAndSearchHaveNoCachedPage() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        let both = ListOutcome(await blocked(h).fetchNext(), id: \.uid)
        XCTAssertEqual(both.cached, ["bob", "carol"], "the default direction is .both")
        XCTAssertEqual(both.serverIds, ["bob", "carol", "frank"], "the server adds who blocked me")
        let byMe = await blocked(h) { $0.set(direction: CometChat.Blocked.byMe) }.fetchNext()
        XCTAssertEqual(byMe.cached?.map(\.uid), ["bob", "carol"])
        let me = ListOutcome(await blocked(h) { $0.set(direction: .me) }.fetchNext(), id: \.uid)
        XCTAssertEqual(me.cached, [], "the cache does not know who blocked me")
        XCTAssertEqual(me.serverIds, ["frank"])
        let search = ListOutcome(await blocked(h) { $0.set(searchKeyword: "bo") }.fetchNext(), id: \.uid)
        XCTAssertEqual(search.cached, [])
        XCTAssertEqual(search.serverIds, ["bob"])
    }

    func testTheServerPageRefreshesListedProfilesButNeverTheListItself() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        try h.simulator.updateUser("bob") { $0.name = "Robert" }
        h.simulator.unblock("carol", by: "alice")
        try h.simulator.block("dave", by: "alice")
        let online = ListOutcome(await blocked(h).fetchNext(), id: \.uid)
        XCTAssertEqual(online.serverIds, ["dave", "frank", "bob"], "by name: Dave, Frank, Robert")
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol"], "the list changes at login, sync, block and unblock only")
        XCTAssertEqual(try h.blockedNames(), ["Robert", "Carol"], "bob's profile was written through")
    }

    func testASecondFetchInFlightReturnsAnEmptyServerResult() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        h.client.failNext(.blockedUsers, with: .delay(.milliseconds(500)))
        let request = blocked(h, limit: 2)
        async let first = request.fetchNext()
        try await Task.sleep(for: .milliseconds(100))
        let second = await request.fetchNext()
        XCTAssertNil(second.cached)
        XCTAssertEqual(try second.server.get().count, 0)
        let settled = await first
        XCTAssertEqual(try settled.server.get().map(\.uid), ["bob", "carol"])
    }

    func testAHostileServerPageIsRefusedAndTheListIsUnchanged() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        let before = try h.blockedRows()
        try h.simulator.updateUser("bob") { $0.name = "Robert" }
        let corruptions: [@Sendable (JSONValue) -> JSONValue] = [
            { _ in ["name": "no uid"] },
            { v in .object((v.objectValue ?? [:]).merging(["name": .string(String(repeating: "x", count: 300 * 1024))]) { $1 }) },
            { v in .object((v.objectValue ?? [:]).merging(["blockedByMe": "yes"]) { $1 }) },
        ]
        for corrupt in corruptions {
            h.client.failNext(.blockedUsers, with: .payload(corrupt))
            let outcome = ListOutcome(await blocked(h).fetchNext(), id: \.uid)
            XCTAssertEqual(outcome.cached, ["bob", "carol"])
            XCTAssertEqual(outcome.errorCode, "ERROR_INVALID_SERVER_RESPONSE")
            XCTAssertEqual(try h.blockedRows(), before)
        }
    }

    func testTheClassicOverloadHandsTheServerPageOnly() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        let recorder = ListRecorder()
        blocked(h).fetchNext(onSuccess: { recorder.onServer(($0 ?? []).map(\.uid)) }, onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.server(["bob", "carol", "frank"])])
        let phases = await phasesOf(blocked(h).nextPhases())
        XCTAssertEqual(phases, ["cached 2", "server 3"])
    }

    // MARK: blockUsers / unblockUsers

    func testBlockingAddsTheUserOnlyOnceTheServerAccepts() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        h.client.failNext(.blockUsers, with: .delay(.milliseconds(400)))
        let vault = h.vault
        async let result = vault.blockUsers(["dave"])
        try await Task.sleep(for: .milliseconds(150))
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol"], "not before the server answers")
        let answer = try await result
        XCTAssertEqual(answer, ["dave": "success"])
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol", "dave"])
        XCTAssertEqual(try h.blockedNames().last, "Dave", "with the profile the server has")
        h.client.network = .offline
        let offline = await blocked(h).fetchNext()
        XCTAssertEqual(offline.cached?.map(\.uid), ["bob", "carol", "dave"])
        XCTAssertEqual(offline.cached?.last?.blockedByMe, true)
    }

    func testUnblockingRemovesTheUserOnlyOnceTheServerAccepts() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        h.client.failNext(.unblockUsers, with: .status(500, code: "ERR_INTERNAL"))
        do {
            _ = try await h.vault.unblockUsers(["bob"])
            XCTFail("the server refused")
        } catch {
            XCTAssertEqual(error.errorCode, "ERR_INTERNAL", "a server error arrives unchanged")
        }
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol"])
        let recorder = Mutex<[String: String]?>(nil)
        let done = DispatchSemaphore(value: 0)
        h.vault.unblockUsers(["bob"], onSuccess: { result in
            let strings = result.compactMapValues { $0 as? String }
            recorder.withLock { $0 = strings }
            done.signal()
        }, onError: { _ in done.signal() })
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(recorder.withLock { $0?["bob"] }, "success")
        XCTAssertEqual(try h.blockedUids(), ["carol"])
    }

    func testOfflineBlockingFailsAndChangesNothingNowOrLater() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        h.client.network = .offline
        let failure = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        h.vault.blockUsers(["dave"], onSuccess: { _ in done.signal() }, onError: { error in
            failure.withLock { $0 = error?.errorCode }
            done.signal()
        })
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(failure.withLock { $0 }, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
        do {
            _ = try await h.vault.unblockUsers(["bob"])
            XCTFail("offline")
        } catch {
            XCTAssertEqual(error.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
        }
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol"])
        h.client.network = .online
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(h.client.callCount(.blockUsers), 1, "never queued, never retried")
        XCTAssertEqual(h.client.callCount(.unblockUsers), 1)
        let truth = try await h.client.blockedUsers(BlockedUserQuery()).items.compactMap { $0["uid"]?.stringValue }
        XCTAssertEqual(truth, ["bob", "carol", "frank"])
    }

    func testAnUnansweredBlockChangesNothing() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        h.client.failNext(.blockUsers, with: .ackLost)
        do {
            _ = try await h.vault.blockUsers(["dave"])
            XCTFail("no answer")
        } catch {
            XCTAssertEqual(error.code, .requestTimedOut, "no answer is not the same as no connection")
        }
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol"], "the server may have blocked dave; the next refresh will tell")
        let replaced = await h.vault.refreshBlockedUsers()
        XCTAssertTrue(replaced)
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol", "dave"])
    }

    func testNobodyLoggedInIsRefusedBeforeAnyServerCall() async throws {
        let h = try Self.harness()
        for block in [true, false] {
            do {
                _ = block ? try await h.vault.blockUsers(["dave"]) : try await h.vault.unblockUsers(["dave"])
                XCTFail("nobody is logged in")
            } catch {
                XCTAssertEqual(error.code, .userNotLoggedIn)
            }
        }
        XCTAssertEqual(h.client.callCount(.blockUsers) + h.client.callCount(.unblockUsers), 0)
    }

    func testEachUidMapsToSuccessOrFailAndOnlyAcceptedOnesChangeTheList() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        let result = try await h.vault.blockUsers(["dave", "nobody", "alice"])
        XCTAssertEqual(result, ["dave": "success", "nobody": "fail", "alice": "fail"])
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol", "dave"])
        // A user the server does not describe is still listed, by uid.
        try h.simulator.updateUser("erin") { $0.deactivatedAt = 1 }
        _ = try await h.vault.blockUsers(["erin"])
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol", "dave", "erin"])
        let unblocked = try await h.vault.unblockUsers(["carol", "nobody"])
        XCTAssertEqual(unblocked, ["carol": "success", "nobody": "fail"])
        XCTAssertEqual(try h.blockedUids(), ["bob", "dave", "erin"])
    }

    func testTheStaticFacadeForwardsToTheSharedVault() async throws {
        let h = try Self.harness()
        await h.login()
        try h.waitForBlockedList(["bob", "carol"])
        CometChat.offlineVault = h.vault
        defer { CometChat.offlineVault = nil }
        let outcome = Mutex<[String: String]?>(nil)
        let done = DispatchSemaphore(value: 0)
        CometChat.blockUsers(["dave"], onSuccess: { result in
            let strings = result.compactMapValues { $0 as? String }
            outcome.withLock { $0 = strings }
            done.signal()
        }, onError: { _ in done.signal() })
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(outcome.withLock { $0?["dave"] }, "success")
        XCTAssertEqual(try h.blockedUids(), ["bob", "carol", "dave"])
        let unblocked = try await CometChat.unblockUsers(["bob"])
        XCTAssertEqual(unblocked, ["bob": "success"])
        XCTAssertEqual(try h.blockedUids(), ["carol", "dave"])
        CometChat.offlineVault = nil
        do {
            _ = try await CometChat.blockUsers(["erin"])
            XCTFail("no vault")
        } catch {
            XCTAssertEqual(error.errorCode, CometChatConstants.Errors.ERROR_USER_NOT_LOGGED_IN)
        }
    }

    func testARefreshNeverUndoesABlockThatLandedWhileItWasFetching() async throws {
        let h = try HookedHarness()
        await h.vault.login(userId: "alice")
        try h.waitForBlockedList(["bob"])
        // The refresh's page is taken before dave is blocked, and arrives after the block was
        // recorded in the list.
        let vault = h.vault
        h.backend.afterBlockedPage { _ = try? await vault.blockUsers(["dave"]) }
        let replaced = await h.vault.refreshBlockedUsers()
        XCTAssertTrue(replaced)
        XCTAssertEqual(try h.blockedUids(), ["bob", "dave"])
        XCTAssertEqual(h.client.callCount(.blockedUsers), 3, "login, the stale page, the fresh one")
    }
}

// MARK: - Support

extension ReadHarness {
    func blockedRows() throws -> [BlockedUserRow] {
        try Self.blockedRows(in: try XCTUnwrap(vault.openCache))
    }

    func blockedUids() throws -> [String] { try blockedRows().map(\.uid) }

    func blockedNames() throws -> [String] { try blockedRows().map { $0.wire["name"]?.stringValue ?? "?" } }

    static func blockedRows(in cache: VaultCache) throws -> [BlockedUserRow] {
        try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT uid, payload FROM blocked_users ORDER BY position")
            var rows: [BlockedUserRow] = []
            while try stmt.step() { rows.append(BlockedUserRow(uid: stmt.text(0) ?? "", wire: try BinaryJSON.decode(stmt.blob(1) ?? []))) }
            return rows
        }
    }

    /// Waits until the login refresh has written this list.
    func waitForBlockedList(_ uids: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let deadline = Date().addingTimeInterval(10)
        while (try? blockedUids()) != uids {
            if Date() > deadline { return XCTFail("the blocked list is \(String(describing: try? blockedUids())), not \(uids)", file: file, line: line) }
            usleep(10_000)
        }
    }

    /// Waits until more than `count` calls of `method` reached the server.
    func waitForServerCalls(_ method: SimulatedMethod, moreThan count: Int, file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(10)
        while client.serverCallCount(method) <= count {
            if Date() > deadline { return XCTFail("no \(method) call reached the server", file: file, line: line) }
            usleep(10_000)
        }
    }
}

/// A backend that runs a hook once, after the server answered a blocked-users page and before
/// the engine gets it: the page is then stale.
final class HookedBackend: ForwardingBackend {
    let client: SimulatedClient
    var forwardee: any ChatBackend { client }
    private let hook = Mutex<(@Sendable () async -> Void)?>(nil)

    init(_ client: SimulatedClient) { self.client = client }

    func afterBlockedPage(_ body: @escaping @Sendable () async -> Void) { hook.withLock { $0 = body } }

    func blockedUsers(_ query: BlockedUserQuery) async throws(BackendError) -> WirePage {
        let page = try await client.blockedUsers(query)
        if let body = hook.withLock({ h -> (@Sendable () async -> Void)? in defer { h = nil }; return h }) { await body() }
        return page
    }

    /// Answers `changes` in the simulator's place while set (hostile change logs).
    let scriptedChanges = Mutex<(@Sendable (String?, Int) -> ChangeLogPage)?>(nil)

    func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
        if let script = scriptedChanges.withLock({ $0 }) { return script(token, limit) }
        return try await client.changes(since: token, limit: limit)
    }
    /// Pages this backend's own `changes` (scripted or not) to the log's end, as before.
    func latestSyncPoint() async throws(BackendError) -> ChangeLogPage { try await pagedLatestSyncPoint() }
}

/// An engine over a `HookedBackend`, otherwise as `ReadHarness`; alice blocked bob.
final class HookedHarness {
    let root = TemporaryDirectory()
    let keyStore = MemoryKeyStore()
    let clock = SimulatedClock()
    let simulator: ChatVaultSimulator
    let client: SimulatedClient
    let backend: HookedBackend
    let vault: OfflineVault

    init() throws {
        simulator = ChatVaultSimulator(seed: 7, clock: clock)
        for user in ["alice", "bob", "carol", "dave"] { try simulator.addUser(SimulatedUser(uid: user, name: user.capitalized)) }
        try simulator.block("bob", by: "alice")
        client = simulator.client(for: "alice")
        backend = HookedBackend(client)
        var settings = VaultSettings(applicationId: "org.chatvault.readtests", rootDirectory: root.path,
                                     keyStorage: [.custom(keyStore)], callbackExecutor: .queue(DispatchQueue(label: "tests.hooked")),
                                     retry: .manualOnly)
        let clock = self.clock
        settings.clock = { clock.date }
        vault = try OfflineVault(config: OfflineConfig.Builder().setEnabled(true).setEncryption(true).build(), settings: settings,
                                 backend: backend)
    }

    func blockedUids() throws -> [String] { try ReadHarness.blockedRows(in: try XCTUnwrap(vault.openCache)).map(\.uid) }

    func waitForBlockedList(_ uids: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let deadline = Date().addingTimeInterval(10)
        while (try? blockedUids()) != uids {
            if Date() > deadline { return XCTFail("the blocked list is \(String(describing: try? blockedUids())), not \(uids)", file: file, line: line) }
            usleep(10_000)
        }
    }
}
