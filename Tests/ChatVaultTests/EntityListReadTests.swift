import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

// MARK: - Support shared by the entity-list, snapshot and blocked-users tests

/// Both phases of one fetch, reduced to item ids.
struct ListOutcome: Sendable {
    var cached: [String]?
    var server: Result<[String], CometChatException>

    var serverIds: [String]? { try? server.get() }
    var errorCode: String? {
        if case .failure(let error) = server { return error.errorCode }
        return nil
    }

    init<Item>(_ result: TwoPhaseResult<Item>, id: (Item) -> String) {
        cached = result.cached?.map(id)
        server = result.server.map { $0.map(id) }
    }
}

/// Records the callbacks of a closure-form fetch, in order.
final class ListRecorder: Sendable {
    enum Event: Equatable {
        case cached([String])
        case server([String])
        case error(String)
    }

    private let events = Mutex<[Event]>([])
    private let done = DispatchSemaphore(value: 0)
    /// Runs inside the server callback, before it is recorded (to look at the cache then).
    private let beforeServer: (@Sendable () -> Void)?

    init(beforeServer: (@Sendable () -> Void)? = nil) {
        self.beforeServer = beforeServer
    }

    var recorded: [Event] { events.withLock { $0 } }

    var onCached: @Sendable ([String]) -> Void { { [self] ids in events.withLock { $0.append(.cached(ids)) } } }

    var onServer: @Sendable ([String]) -> Void {
        { [self] ids in
            beforeServer?()
            events.withLock { $0.append(.server(ids)) }
            done.signal()
        }
    }

    var onError: @Sendable (CometChatException?) -> Void {
        { [self] error in
            events.withLock { $0.append(.error(error?.errorCode ?? "nil")) }
            done.signal()
        }
    }

    func wait(file: StaticString = #filePath, line: UInt = #line) {
        if done.wait(timeout: .now() + 10) == .timedOut { XCTFail("the read never settled", file: file, line: line) }
    }
}

/// One request object of any entity-list type, driven through its public API (each form maps
/// the items to their ids: uid, guid, reaction id, feed item id).
struct ListHandle: Sendable {
    let fetch: @Sendable () async -> ListOutcome
    /// The two-phase closure overload, with the type's own labels.
    let twoPhase: @Sendable (ListRecorder) -> Void
    /// The classic `fetchNext(onSuccess:onError:)`.
    let classic: @Sendable (ListRecorder) -> Void
    /// The AsyncSequence form, reduced to "cached n" / "server n" strings (or the error code).
    let phases: @Sendable () async -> [String]
}

extension ListHandle {
    /// Fetches, and fails the test unless the server answered.
    func serverIds(_ context: String, file: StaticString = #filePath, line: UInt = #line) async throws -> [String] {
        let outcome = await fetch()
        return try XCTUnwrap(outcome.serverIds, "\(context): \(outcome.server)", file: file, line: line)
    }
}

/// Which settings a probe builds a request with.
enum ListSettings: Sendable {
    /// The base settings (with a page size).
    case base(limit: Int)
    /// Other settings the server answers identically: they must not replay the base snapshot.
    case different(limit: Int)
    /// A server-only setting (index into the probe's list of them).
    case serverOnly(Int)
}

/// One entity-list request type with its truth on the server, the settings to try, and the
/// fields of its payload to corrupt.
struct ListProbe: Sendable {
    let name: String
    let method: SimulatedMethod
    /// Puts five items on the server for the base settings.
    let seed: @Sendable (ReadHarness) throws -> Void
    let serverOnlyCount: Int
    let make: @Sendable (ReadHarness, ListSettings) -> ListHandle
    /// A required field, a string field, and a field with a value of the wrong type.
    let required: String
    let stringField: String
    let wrongType: (String, JSONValue)
    let kind: String
}

func phasesOf<Item>(_ stream: AsyncThrowingStream<ReadPhase<Item>, any Error>) async -> [String] {
    var out: [String] = []
    do {
        for try await phase in stream {
            switch phase {
            case .cached(let items): out.append("cached \(items.count)")
            case .server(let items): out.append("server \(items.count)")
            }
        }
    } catch let error as CometChatException {
        out.append(error.errorCode)
    } catch {
        out.append("\(error)")
    }
    return out
}

extension ListProbe {
    static var all: [ListProbe] { [users, groups, groupMembers, bannedGroupMembers, reactions, notificationFeed] }

    static let users = ListProbe(
        name: "users", method: .users,
        seed: { h in
            for i in 1...3 { try h.simulator.addUser(SimulatedUser(uid: "u\(i)", name: "User \(i)")) }
        },
        serverOnlyCount: 2,
        make: { h, settings in
            let b = UsersRequest.UsersRequestBuilder(vault: h.vault)
            switch settings {
            case .base(let limit): b.set(limit: limit)
            case .different(let limit): b.set(limit: limit).hideBlockedUsers(true)
            case .serverOnly(0): b.set(searchKeyword: "user")
            case .serverOnly: b.set(status: .offline)
            }
            let r = b.build()
            return ListHandle(
                fetch: { ListOutcome(await r.fetchNext(), id: \.uid) },
                twoPhase: { rec in r.fetchNext(onCachedUsers: { rec.onCached($0.map(\.uid)) }, onServerUsers: { rec.onServer($0.map(\.uid)) }, onError: rec.onError) },
                classic: { rec in r.fetchNext(onSuccess: { rec.onServer($0.map(\.uid)) }, onError: rec.onError) },
                phases: { await phasesOf(r.nextPhases()) })
        },
        required: "uid", stringField: "name", wrongType: ("uid", .int(42)), kind: "users")

    static let groups = ListProbe(
        name: "groups", method: .groups,
        seed: { h in
            for i in 1...5 { try h.simulator.addGroup("g\(i)", name: "Group \(i)") }
        },
        serverOnlyCount: 1,
        make: { h, settings in
            let b: GroupsRequest.GroupsRequestBuilder
            switch settings {
            case .base(let limit): b = GroupsRequest.GroupsRequestBuilder(limit: limit, vault: h.vault)
            case .different(let limit): b = GroupsRequest.GroupsRequestBuilder(limit: limit, vault: h.vault).withTags(true)
            case .serverOnly: b = GroupsRequest.GroupsRequestBuilder(limit: 30, vault: h.vault).set(searchKeyword: "group")
            }
            let r = b.build()
            return ListHandle(
                fetch: { ListOutcome(await r.fetchNext(), id: \.guid) },
                twoPhase: { rec in r.fetchNext(onCachedGroups: { rec.onCached($0.map(\.guid)) }, onServerGroups: { rec.onServer($0.map(\.guid)) }, onError: rec.onError) },
                classic: { rec in r.fetchNext(onSuccess: { rec.onServer($0.map(\.guid)) }, onError: rec.onError) },
                phases: { await phasesOf(r.nextPhases()) })
        },
        required: "guid", stringField: "name", wrongType: ("guid", .bool(true)), kind: "groups")

    static let groupMembers = ListProbe(
        name: "group members", method: .groupMembers,
        seed: { h in
            for i in 1...4 { try h.simulator.addUser(SimulatedUser(uid: "m\(i)", name: "Member \(i)")) }
            try h.simulator.addGroup("team", name: "Team", owner: "alice", members: ["m1", "m2", "m3", "m4"])
        },
        serverOnlyCount: 2,
        make: { h, settings in
            let b = GroupMembersRequest.GroupMembersRequestBuilder(guid: "team", vault: h.vault)
            switch settings {
            case .base(let limit): b.set(limit: limit)
            case .different(let limit): b.set(limit: limit).set(scopes: ["admin", "participant"])
            case .serverOnly(0): b.set(searchKeyword: "member")
            case .serverOnly: b.set(status: .offline)
            }
            let r = b.build()
            return ListHandle(
                fetch: { ListOutcome(await r.fetchNext(), id: \.uid) },
                twoPhase: { rec in
                    r.fetchNext(onCachedGroupMembers: { rec.onCached($0.map(\.uid)) }, onServerGroupMembers: { rec.onServer($0.map(\.uid)) },
                                onError: rec.onError)
                },
                classic: { rec in r.fetchNext(onSuccess: { rec.onServer($0.map(\.uid)) }, onError: rec.onError) },
                phases: { await phasesOf(r.nextPhases()) })
        },
        required: "uid", stringField: "name", wrongType: ("scope", .int(3)), kind: "groupMembers")

    static let bannedGroupMembers = ListProbe(
        name: "banned members", method: .bannedGroupMembers,
        seed: { h in
            for i in 1...5 { try h.simulator.addUser(SimulatedUser(uid: "x\(i)", name: "Banned \(i)")) }
            try h.simulator.addGroup("club", name: "Club", owner: "alice", members: ["x1", "x2", "x3", "x4", "x5"])
            for i in 1...5 { try h.simulator.ban("x\(i)", from: "club") }
        },
        serverOnlyCount: 1,
        make: { h, settings in
            let b = BannedGroupMembersRequest.BannedGroupMembersRequestBuilder(guid: "club", vault: h.vault)
            switch settings {
            case .base(let limit): b.set(limit: limit)
            case .different(let limit): b.set(limit: limit).set(scopes: ["participant"])
            case .serverOnly: b.set(searchKeyword: "banned")
            }
            let r = b.build()
            return ListHandle(
                fetch: { ListOutcome(await r.fetchNext(), id: \.uid) },
                twoPhase: { rec in
                    r.fetchNext(onCachedBannedGroupMembers: { rec.onCached($0.map(\.uid)) },
                                onServerBannedGroupMembers: { rec.onServer($0.map(\.uid)) }, onError: rec.onError)
                },
                classic: { rec in r.fetchNext(onSuccess: { rec.onServer($0.map(\.uid)) }, onError: rec.onError) },
                phases: { await phasesOf(r.nextPhases()) })
        },
        required: "uid", stringField: "name", wrongType: ("scope", .int(3)), kind: "bannedGroupMembers")

    /// The message the reactions probe reads (the first message of group "fans").
    static let reactedMessage = 1

    static let reactions = ListProbe(
        name: "reactions", method: .reactions,
        seed: { h in
            for i in 1...5 { try h.simulator.addUser(SimulatedUser(uid: "r\(i)", name: "Reactor \(i)")) }
            try h.simulator.addGroup("fans", name: "Fans", owner: "alice", members: ["r1", "r2", "r3", "r4", "r5"])
            let id = try h.simulator.postText("react to me", from: "alice", to: .group("fans"))
            XCTAssertEqual(id, reactedMessage)
            for i in 1...5 {
                h.clock.advance(by: 1)
                try h.simulator.react("👍", to: id, by: "r\(i)")
            }
        },
        serverOnlyCount: 0,
        make: { h, settings in
            let b = ReactionsRequestBuilder(vault: h.vault).set(messageId: reactedMessage)
            switch settings {
            case .base(let limit): b.set(limit: limit)
            case .different(let limit): b.set(limit: limit).set(reaction: "👍")
            case .serverOnly: XCTFail("reactions have no server-only setting")
            }
            let r = b.build()
            return ListHandle(
                fetch: { ListOutcome(await r.fetchNext(), id: \.id) },
                twoPhase: { rec in r.fetchNext(onCachedReactions: { rec.onCached($0.map(\.id)) }, onServerReactions: { rec.onServer($0.map(\.id)) }, onError: rec.onError) },
                classic: { rec in r.fetchNext(onSuccess: { rec.onServer($0.map(\.id)) }, onError: rec.onError) },
                phases: { await phasesOf(r.nextPhases()) })
        },
        required: "reaction", stringField: "reaction", wrongType: ("messageId", .string("x")), kind: "reactions")

    static let notificationFeed = ListProbe(
        name: "notification feed", method: .notificationFeed,
        seed: { h in
            for i in 1...5 {
                h.clock.advance(by: 1)
                try h.simulator.postFeedItem(to: "alice", category: "promo", content: ["title": .string("Item \(i)")])
            }
        },
        serverOnlyCount: 0,
        make: { h, settings in
            let b = NotificationFeedRequest.NotificationFeedRequestBuilder(vault: h.vault)
            switch settings {
            case .base(let limit): b.set(limit: limit)
            case .different(let limit): b.set(limit: limit).set(category: "promo")
            case .serverOnly: XCTFail("the feed has no server-only setting")
            }
            let r = b.build()
            return ListHandle(
                fetch: { ListOutcome(await r.fetchNext(), id: \.id) },
                twoPhase: { rec in
                    r.fetchNext(onCachedNotificationFeedItems: { rec.onCached($0.map(\.id)) },
                                onServerNotificationFeedItems: { rec.onServer($0.map(\.id)) }, onError: rec.onError)
                },
                classic: { rec in r.fetchNext(onSuccess: { rec.onServer($0.map(\.id)) }, onError: rec.onError) },
                phases: { await phasesOf(r.nextPhases()) })
        },
        required: "id", stringField: "category", wrongType: ("tags", .string("x")), kind: "notificationFeed")
}

/// A recorded snapshot row, straight from the cache.
struct SnapshotRow: Equatable, Sendable {
    var key: String
    var page: Int
    var kind: String
    var recordedAt: Int64
    var lastUsed: Int64
    var payload: [UInt8]

    /// The row without its use stamp (a replay touches it, and nothing else).
    var content: SnapshotRow {
        var row = self
        row.lastUsed = 0
        return row
    }
}

extension ReadHarness {
    /// Every row of `list_snapshots`, by key and page.
    func snapshotRows() throws -> [SnapshotRow] {
        try Self.snapshotRows(in: try XCTUnwrap(vault.openCache))
    }

    static func snapshotRows(in cache: VaultCache) throws -> [SnapshotRow] {
        try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT query_key, page, kind, recorded_at, last_used, payload FROM list_snapshots ORDER BY query_key, page")
            var rows: [SnapshotRow] = []
            while try stmt.step() {
                rows.append(SnapshotRow(key: stmt.text(0) ?? "", page: stmt.int(1), kind: stmt.text(2) ?? "", recordedAt: stmt.int64(3),
                                        lastUsed: stmt.int64(4), payload: stmt.blob(5) ?? []))
            }
            return rows
        }
    }

    /// The recorded keys.
    func snapshotKeys() throws -> Set<String> {
        Set(try snapshotRows().map(\.key))
    }

    /// A harness with the probe's truth on the server, logged in.
    static func seeded(_ probe: ListProbe, configure: (OfflineConfig.Builder) -> Void = { _ in }) async throws -> ReadHarness {
        let h = try ReadHarness(configure: configure)
        try probe.seed(h)
        await h.login()
        return h
    }
}

// MARK: - The two-phase contract on every entity list

/// Users, groups, group members, banned members, reactions and the notification feed against the
/// simulator over the encrypted cache: each contract test runs once per request type.
final class EntityListReadTests: XCTestCase {
    func testTheCachedPhaseComesFirstEvenWhenTheListWasNeverFetchedOnline() async throws {
        for probe in ListProbe.all {
            let h = try await ReadHarness.seeded(probe)
            let recorder = ListRecorder()
            probe.make(h, .base(limit: 2)).twoPhase(recorder)
            recorder.wait()
            guard recorder.recorded.count == 2, case .server(let ids) = recorder.recorded[1] else {
                return XCTFail("\(probe.name): \(recorder.recorded)")
            }
            XCTAssertEqual(recorder.recorded[0], .cached([]), probe.name)
            XCTAssertEqual(ids.count, 2, probe.name)
        }
    }

    func testTheServerPageIsWrittenThroughBeforeItIsDelivered() async throws {
        for probe in ListProbe.all {
            let h = try await ReadHarness.seeded(probe)
            let seenAtDelivery = Mutex<[SnapshotRow]?>(nil)
            let cache = try XCTUnwrap(h.vault.openCache)
            let recorder = ListRecorder(beforeServer: { seenAtDelivery.withLock { $0 = try? ReadHarness.snapshotRows(in: cache) } })
            probe.make(h, .base(limit: 3)).twoPhase(recorder)
            recorder.wait()
            guard case .server(let ids)? = recorder.recorded.last else { return XCTFail("\(probe.name): \(recorder.recorded)") }
            let rows = try XCTUnwrap(seenAtDelivery.withLock { $0 }, probe.name)
            XCTAssertEqual(rows.count, 1, "\(probe.name): page 0 was recorded before the callback ran")
            XCTAssertEqual(rows.first?.page, 0, probe.name)
            XCTAssertEqual(rows.first?.kind, probe.kind, probe.name)
            let stored = try XCTUnwrap(rows.first.flatMap { SnapshotPage(decoding: $0.payload) }, probe.name)
            XCTAssertEqual(stored.items.count, ids.count, probe.name)
            XCTAssertNotNil(stored.next, "\(probe.name): more pages follow")
        }
    }

    func testOfflineTheSameSettingsReplayPageByPageAndEachFetchEndsWithInternetUnavailable() async throws {
        for probe in ListProbe.all {
            let h = try await ReadHarness.seeded(probe)
            let online = probe.make(h, .base(limit: 2))
            var pages: [[String]] = []
            for _ in 0..<3 { pages.append(try await online.serverIds(probe.name)) }
            XCTAssertEqual(pages.map(\.count), [2, 2, 1], probe.name)
            h.client.network = .offline
            let offline = probe.make(h, .base(limit: 2))
            for page in pages {
                let outcome = await offline.fetch()
                XCTAssertEqual(outcome.cached, page, "\(probe.name): page by page")
                XCTAssertEqual(outcome.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE, probe.name)
            }
            let beyond = await offline.fetch()
            XCTAssertEqual(beyond.cached, [], "\(probe.name): nothing recorded past the end")
            XCTAssertEqual(beyond.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE, probe.name)
        }
    }

    func testOfflineDifferentSettingsReplayNothingEvenWhenTheServerWouldAnswerTheSame() async throws {
        for probe in ListProbe.all {
            let h = try await ReadHarness.seeded(probe)
            let base = try await probe.make(h, .base(limit: 2)).serverIds(probe.name)
            h.client.network = .offline
            let different = await probe.make(h, .different(limit: 2)).fetch()
            XCTAssertEqual(different.cached, [], probe.name)
            let otherLimit = await probe.make(h, .base(limit: 3)).fetch()
            XCTAssertEqual(otherLimit.cached, [], "\(probe.name): the limit is a setting too")
            let same = await probe.make(h, .base(limit: 2)).fetch()
            XCTAssertEqual(same.cached, base, probe.name)
            h.client.network = .online
            let online = await probe.make(h, .different(limit: 2)).fetch()
            XCTAssertEqual(online.serverIds, base, "\(probe.name): the server answers both settings alike")
        }
    }

    func testAServerErrorPassesThroughUnchangedAfterTheCachedPage() async throws {
        for probe in ListProbe.all {
            let h = try await ReadHarness.seeded(probe)
            let page = try await probe.make(h, .base(limit: 2)).serverIds(probe.name)
            let before = try h.snapshotRows()
            h.client.failNext(probe.method, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
            let outcome = await probe.make(h, .base(limit: 2)).fetch()
            XCTAssertEqual(outcome.cached, page, probe.name)
            XCTAssertEqual(outcome.errorCode, "ERR_SERVICE_UNAVAILABLE", probe.name)
            XCTAssertEqual(try h.snapshotRows().map(\.payload), before.map(\.payload), "\(probe.name): the snapshot is unchanged")
        }
    }

    func testASecondFetchInFlightReturnsAnEmptyServerResultOnTheEntityLists() async throws {
        for probe in ListProbe.all where probe.method != .reactions {
            let h = try await ReadHarness.seeded(probe)
            let all = try await probe.make(h, .base(limit: 30)).serverIds(probe.name)
            h.client.failNext(probe.method, with: .delay(.milliseconds(500)))
            let request = probe.make(h, .base(limit: 2))
            async let first = request.fetch()
            try await Task.sleep(for: .milliseconds(100))
            let second = await request.fetch()
            XCTAssertNil(second.cached, "\(probe.name): no cached phase for the refused fetch")
            XCTAssertEqual(second.serverIds, [], probe.name)
            let settled = await first
            XCTAssertEqual(settled.serverIds, Array(all.prefix(2)), probe.name)
            let next = await request.fetch()
            XCTAssertEqual(next.serverIds, Array(all[2..<4]), "\(probe.name): the refused fetch did not move the request")
        }
    }

    func testASecondReactionsFetchInFlightFailsWithRequestInProgressInEitherDirection() async throws {
        let h = try await ReadHarness.seeded(.reactions)
        let request = ReactionsRequestBuilder(vault: h.vault).set(messageId: ListProbe.reactedMessage).set(limit: 2).build()
        h.client.failNext(.reactions, with: .delay(.milliseconds(500)))
        async let first = request.fetchNext()
        try await Task.sleep(for: .milliseconds(100))
        for second in [await request.fetchNext(), await request.fetchPrevious()] {
            XCTAssertNil(second.cached, "no cached phase for the refused fetch")
            guard case .failure(let error) = second.server else { return XCTFail("refused") }
            XCTAssertEqual(error.errorCode, CometChatConstants.Errors.ERROR_REQUEST_IN_PROGRESS)
        }
        let settled = await first
        XCTAssertEqual(try settled.server.get().count, 2)
    }

    func testWithOfflineOffThereIsNoCachedPhase() async throws {
        for probe in ListProbe.all {
            let h = try ReadHarness(enabled: false)
            try probe.seed(h)
            await h.login()
            let recorder = ListRecorder()
            probe.make(h, .base(limit: 2)).twoPhase(recorder)
            recorder.wait()
            guard recorder.recorded.count == 1, case .server(let ids) = recorder.recorded[0] else {
                return XCTFail("\(probe.name): \(recorder.recorded)")
            }
            XCTAssertEqual(ids.count, 2, probe.name)
            let outcome = await probe.make(h, .base(limit: 2)).fetch()
            XCTAssertNil(outcome.cached, probe.name)
        }
    }

    func testTheClassicOverloadNeverDeliversACachedResult() async throws {
        for probe in ListProbe.all {
            let h = try await ReadHarness.seeded(probe)
            _ = await probe.make(h, .base(limit: 2)).fetch()
            let recorder = ListRecorder()
            probe.make(h, .base(limit: 2)).classic(recorder)
            recorder.wait()
            guard recorder.recorded.count == 1, case .server(let ids) = recorder.recorded[0] else {
                return XCTFail("\(probe.name): \(recorder.recorded)")
            }
            XCTAssertEqual(ids.count, 2, probe.name)
            h.client.network = .offline
            let offline = ListRecorder()
            probe.make(h, .base(limit: 2)).classic(offline)
            offline.wait()
            XCTAssertEqual(offline.recorded, [.error(CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)], probe.name)
        }
    }

    func testServerOnlySettingsHaveAnEmptyCachedPageAndAreNeverRecorded() async throws {
        for probe in ListProbe.all where probe.serverOnlyCount > 0 {
            let h = try await ReadHarness.seeded(probe)
            _ = await probe.make(h, .base(limit: 30)).fetch()
            for variant in 0..<probe.serverOnlyCount {
                let online = await probe.make(h, .serverOnly(variant)).fetch()
                XCTAssertEqual(online.cached, [], "\(probe.name) #\(variant)")
                XCTAssertFalse(try XCTUnwrap(online.serverIds).isEmpty, "\(probe.name) #\(variant): the server answers in full")
                h.client.network = .offline
                let offline = await probe.make(h, .serverOnly(variant)).fetch()
                XCTAssertEqual(offline.cached, [], "\(probe.name) #\(variant)")
                h.client.network = .online
            }
            XCTAssertEqual(try h.snapshotKeys().count, 1, "\(probe.name): only the base settings were recorded")
        }
    }

    func testAHostilePayloadIsRefusedAsAWholeAndTheSnapshotIsUnchanged() async throws {
        for probe in ListProbe.all {
            let required = probe.required, stringField = probe.stringField, wrongType = probe.wrongType
            let corruptions: [(String, @Sendable (JSONValue) -> JSONValue)] = [
                ("missing \(required)", { v in .object((v.objectValue ?? [:]).filter { $0.key != required }) }),
                ("huge \(stringField)", { v in
                    var o = v.objectValue ?? [:]
                    o[stringField] = .string(String(repeating: "x", count: 300 * 1024))
                    return .object(o)
                }),
                ("\(wrongType.0) of the wrong type", { v in
                    var o = v.objectValue ?? [:]
                    o[wrongType.0] = wrongType.1
                    return .object(o)
                }),
            ]
            for (name, corrupt) in corruptions {
                let h = try await ReadHarness.seeded(probe)
                let first = try await probe.make(h, .base(limit: 2)).serverIds(probe.name)
                let before = try h.snapshotRows()
                h.clock.advance(by: 60)
                h.client.failNext(probe.method, with: .page { page in
                    var items = page.items
                    items[items.count - 1] = corrupt(items[items.count - 1])
                    return WirePage(items: items, nextCursor: page.nextCursor)
                })
                let refused = await probe.make(h, .base(limit: 2)).fetch()
                XCTAssertEqual(refused.cached, first, "\(probe.name), \(name)")
                XCTAssertEqual(refused.errorCode, "ERROR_INVALID_SERVER_RESPONSE", "\(probe.name), \(name)")
                if case .failure(let error) = refused.server {
                    XCTAssertFalse(error.errorDescription.contains("xxxx"), "no payload content in the error")
                }
                XCTAssertEqual(try h.snapshotRows().map(\.content), before.map(\.content), "\(probe.name), \(name): the snapshot is unchanged")
            }
        }
    }

    func testTheAsyncSequenceFormYieldsBothPhasesAndEndsWithTheOfflineError() async throws {
        for probe in ListProbe.all {
            let h = try await ReadHarness.seeded(probe)
            let online = await probe.make(h, .base(limit: 2)).phases()
            XCTAssertEqual(online, ["cached 0", "server 2"], probe.name)
            h.client.network = .offline
            let offline = await probe.make(h, .base(limit: 2)).phases()
            XCTAssertEqual(offline, ["cached 2", CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE], probe.name)
        }
    }

    func testPastTheEndTheServerAnswersAnEmptyPageAndOfflineTheReadStillFails() async throws {
        for probe in ListProbe.all {
            let h = try await ReadHarness.seeded(probe)
            let request = probe.make(h, .base(limit: 3))
            let pages = [await request.fetch().serverIds, await request.fetch().serverIds]
            XCTAssertEqual(pages.map { $0?.count }, [3, 2], probe.name)
            let calls = h.client.callCount(probe.method)
            let beyond = await request.fetch()
            XCTAssertEqual(beyond.cached, [], probe.name)
            XCTAssertEqual(beyond.serverIds, [], "\(probe.name): the end of the list, not its first page again")
            XCTAssertEqual(h.client.callCount(probe.method), calls + 1, "\(probe.name): a genuine round trip")
            h.client.network = .offline
            let offline = await request.fetch()
            XCTAssertEqual(offline.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE, probe.name)
        }
    }

    func testOfflinePagingLeavesTheRequestWhereTheOnlineOneWouldBe() async throws {
        for probe in ListProbe.all {
            let h = try await ReadHarness.seeded(probe)
            let recorder = probe.make(h, .base(limit: 2))
            let pages = [await recorder.fetch().serverIds, await recorder.fetch().serverIds, await recorder.fetch().serverIds]
            h.client.network = .offline
            let request = probe.make(h, .base(limit: 2))
            let offline = await request.fetch()
            XCTAssertEqual(offline.cached, pages[0], probe.name)
            h.client.network = .online
            let resumed = await request.fetch()
            XCTAssertEqual(resumed.cached, pages[1], probe.name)
            XCTAssertEqual(resumed.serverIds, pages[1], "\(probe.name): the server phase is the same slice as the cached one")
        }
    }

    func testReactionsKeepEachDirectionsPagesSeparately() async throws {
        let h = try await ReadHarness.seeded(.reactions)
        func request() -> ReactionsRequest {
            ReactionsRequestBuilder(vault: h.vault).set(messageId: ListProbe.reactedMessage).set(limit: 2).build()
        }
        let forward = request()
        let oldest = try await forward.fetchNext().server.get().map(\.id)
        let older = try await forward.fetchNext().server.get().map(\.id)
        h.client.network = .offline
        let notYet = await request().fetchPrevious()
        XCTAssertEqual(notYet.cached?.count, 0, "fetchPrevious never replays what fetchNext recorded")
        h.client.network = .online
        let backward = request()
        let newest = try await backward.fetchPrevious().server.get().map(\.id)
        XCTAssertNotEqual(newest, oldest)
        XCTAssertEqual(try h.snapshotRows().filter { $0.kind == "reactions" }.count, 3, "two pages of next, one of previous")

        h.client.network = .offline
        let both = request()
        let previous = await both.fetchPrevious()
        let next = await both.fetchNext()
        let next2 = await both.fetchNext()
        XCTAssertEqual(previous.cached?.map(\.id), newest)
        XCTAssertEqual(next.cached?.map(\.id), oldest)
        XCTAssertEqual(next2.cached?.map(\.id), older, "each direction pages on its own")
        let previous2 = await both.fetchPrevious()
        XCTAssertEqual(previous2.cached?.count, 0, "only one previous page was recorded")
        // The classic overloads of both directions.
        h.client.network = .online
        let recorder = ListRecorder()
        request().fetchPrevious(onSuccess: { recorder.onServer($0.map(\.id)) }, onError: recorder.onError)
        recorder.wait()
        XCTAssertEqual(recorder.recorded, [.server(newest)])
        let twoPhase = ListRecorder()
        request().fetchPrevious(onCachedReactions: { twoPhase.onCached($0.map(\.id)) }, onServerReactions: { twoPhase.onServer($0.map(\.id)) },
                                onError: twoPhase.onError)
        twoPhase.wait()
        XCTAssertEqual(twoPhase.recorded, [.cached(newest), .server(newest)])
        let phases = await phasesOf(request().previousPhases())
        XCTAssertEqual(phases, ["cached 2", "server 2"])
    }

    func testTheDeprecatedFeedOverloadStillDeliversBothPhases() async throws {
        let h = try await ReadHarness.seeded(.notificationFeed)
        _ = await ListProbe.notificationFeed.make(h, .base(limit: 2)).fetch()
        let recorder = ListRecorder()
        let request = NotificationFeedRequest.NotificationFeedRequestBuilder(vault: h.vault).set(limit: 2).build()
        (request as any DeprecatedFeedSpelling).fetchWithOldLabels(recorder)
        recorder.wait()
        guard recorder.recorded.count == 2, case .cached(let cached) = recorder.recorded[0], case .server(let server) = recorder.recorded[1] else {
            return XCTFail("\(recorder.recorded)")
        }
        XCTAssertEqual(cached, server)
        XCTAssertEqual(cached.count, 2)
    }

    func testBuildersClampTheLimitAndUseTheSharedVault() async throws {
        let h = try await ReadHarness.seeded(.users)
        XCTAssertEqual(UsersRequest.UsersRequestBuilder(limit: 0, vault: h.vault).build().query.limit, 1)
        XCTAssertEqual(UsersRequest.UsersRequestBuilder(vault: h.vault).set(limit: 5000).build().query.limit, 100)
        XCTAssertEqual(GroupsRequest.GroupsRequestBuilder(limit: -3, vault: h.vault).build().query.limit, 1)
        XCTAssertEqual(NotificationFeedRequest.NotificationFeedRequestBuilder().build().query.limit, 20)
        // Without a vault passed to the builder, the request reads through CometChat.offlineVault.
        CometChat.offlineVault = h.vault
        defer { CometChat.offlineVault = nil }
        let shared = await UsersRequest.UsersRequestBuilder(limit: 2).build().fetchNext()
        XCTAssertEqual(shared.cached?.count, 0)
        XCTAssertEqual(try shared.server.get().count, 2)
        CometChat.offlineVault = nil
        let none = await UsersRequest.UsersRequestBuilder(limit: 2).build().fetchNext()
        XCTAssertEqual(ListOutcome(none, id: \.uid).errorCode, CometChatConstants.Errors.ERROR_USER_NOT_LOGGED_IN)
    }
}

/// Calls the deprecated feed overload from a deprecated context, so the test target builds
/// without warnings.
protocol DeprecatedFeedSpelling {
    func fetchWithOldLabels(_ recorder: ListRecorder)
}

extension NotificationFeedRequest: DeprecatedFeedSpelling {
    @available(*, deprecated)
    func fetchWithOldLabels(_ recorder: ListRecorder) {
        fetchNext(onCachedFeedItems: { recorder.onCached($0.map(\.id)) }, onServerFeedItems: { recorder.onServer($0.map(\.id)) },
                  onError: recorder.onError)
    }
}
