import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// `MessagesRequest` over a flaky network (`client.network = .flaky(failureRate:)`, drawn from a
/// generator seeded by the simulator's seed): every read settles, with a server page or
/// `ERROR_INTERNET_UNAVAILABLE` after its cached page, and never hangs; request objects keep
/// working after a failed fetch; the cache only ever holds what the server sent, in the version it
/// last sent; and a run is reproducible under its seed.
final class FlakyReadTests: XCTestCase {
    func testUnderAFlakyNetworkEveryReadSettlesAndTheCacheHoldsOnlyWhatTheServerSent() async throws {
        let run = try await FlakyRun(seed: 7).play(fetches: 150, failureRate: 0.4)
        XCTAssertEqual(run.transcript.count, 150)
        XCTAssertGreaterThan(run.served, 40, "many reads reached the server")
        XCTAssertGreaterThan(run.failed, 20, "many reads were dropped by the network")
        XCTAssertGreaterThan(run.cachedOnFailure, 10, "dropped reads still delivered cached messages first")
    }

    func testTheSameSeedReplaysTheSameRunAndAnotherSeedAnotherOne() async throws {
        let first = try await FlakyRun(seed: 7).play(fetches: 80, failureRate: 0.5)
        let again = try await FlakyRun(seed: 7).play(fetches: 80, failureRate: 0.5)
        XCTAssertEqual(first.transcript, again.transcript, "same seed, same calls: the same outcomes, pages and cache")
        XCTAssertEqual(first.finalCache, again.finalCache)
        let other = try await FlakyRun(seed: 8).play(fetches: 80, failureRate: 0.5)
        XCTAssertNotEqual(first.outcomes, other.outcomes, "another seed drops other calls")
    }

    func testANetworkThatDropsEveryCallStillSettlesEachReadWithTheCachedPage() async throws {
        let run = try await FlakyRun(seed: 3).play(fetches: 40, failureRate: 1.0, warmUpOnline: true)
        XCTAssertEqual(run.served, 0)
        XCTAssertEqual(run.failed, 40)
        XCTAssertGreaterThan(run.cachedOnFailure, 10, "the warm-up's pages were served from the cache")
    }
}

/// One scripted run of reads and server-side changes under a flaky network. `play` checks, after
/// every fetch, that it settled in the allowed shape and that the cache holds only server-sent
/// messages in their latest server-sent version; it returns what happened.
final class FlakyRun {
    struct Outcome {
        /// One line per fetch: which read, its cached page, and its server page or error.
        var transcript: [String] = []
        /// Just the network's verdicts, one character per fetch ("s" served, "x" dropped).
        var outcomes = ""
        var served = 0
        var failed = 0
        /// Dropped fetches whose cached page was not empty.
        var cachedOnFailure = 0
        /// The cached messages at the end: "id:text:deletedAt", in id order.
        var finalCache: [String] = []
    }

    /// What a closure-form fetch delivered, in order.
    final class Probe: Sendable {
        enum Event: Sendable {
            case cached([BaseMessage])
            case server([BaseMessage])
            case error(String)
        }

        let events = Mutex<[Event]>([])
        var onCached: @Sendable ([BaseMessage]) -> Void { { [self] m in events.withLock { $0.append(.cached(m)) } } }
        var onServer: @Sendable ([BaseMessage]) -> Void { { [self] m in events.withLock { $0.append(.server(m)) } } }
        var onError: @Sendable (CometChatException?) -> Void { { [self] e in events.withLock { $0.append(.error(e?.errorCode ?? "nil")) } } }

        var settled: Bool {
            events.withLock { events in events.contains { if case .cached = $0 { return false } else { return true } } }
        }
    }

    let root = TemporaryDirectory()
    let keyStore = MemoryKeyStore()
    let clock = SimulatedClock()
    let simulator: ChatVaultSimulator
    let client: SimulatedClient
    let vault: OfflineVault
    let callbacks = DispatchQueue(label: "tests.flaky")
    /// What the realtime connection brought (written to the cache before it is heard).
    let realtime = RealtimeVersions()
    private var bobIds: [Int] = []
    private var teamIds: [Int] = []

    init(seed: UInt64) throws {
        simulator = ChatVaultSimulator(seed: seed, clock: clock)
        try simulator.addUsers("alice", "bob", "carol", "dave")
        try simulator.addGroup("team", owner: "alice", members: ["bob", "carol", "dave"])
        let start = clock.seconds
        bobIds = Array(try simulator.seedConversation(between: "alice", and: "bob", count: 150, endingAt: start - 10_000))
        try simulator.seedConversation(between: "alice", and: "carol", count: 40, endingAt: start - 5_000)
        teamIds = Array(try simulator.seedConversation(inGroup: "team", count: 90, endingAt: start - 1_000))
        client = simulator.client(for: "alice")
        var settings = VaultSettings(applicationId: "org.chatvault.flakytests", rootDirectory: root.path,
                                     keyStorage: [.custom(keyStore)], callbackExecutor: .queue(callbacks),
                                     retry: .manualOnly)
        let clock = self.clock
        settings.clock = { clock.date }
        settings.evictionDelay = .seconds(3600)
        vault = try OfflineVault(config: OfflineConfig.Builder().setEnabled(true).setEncryption(true).build(), settings: settings, backend: client)
        vault.addMessageListener("realtime", realtime)
    }

    /// Records the version of each message the realtime connection delivered: the cache holds
    /// what the server sent through reads and through the connection.
    final class RealtimeVersions: CometChatMessageDelegate, @unchecked Sendable {
        let versions = Mutex<[Int: String]>([:])
        private func note(_ m: BaseMessage) { versions.withLock { $0[m.id] = FlakyRun.version(m) } }
        func onTextMessageReceived(textMessage: TextMessage) { note(textMessage) }
        func onMessageEdited(message: BaseMessage) { note(message) }
        func onMessageDeleted(message: BaseMessage) { note(message) }
    }

    /// Waits until the engine has ingested the realtime event of a server change (if the
    /// connection is up) and its listeners heard it.
    private func settleRealtime(after count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(1)
        while vault.realtime.ingestedEvents <= count && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        callbacks.sync {}
    }

    func play(fetches: Int, failureRate: Double, warmUpOnline: Bool = false,
              file: StaticString = #filePath, line: UInt = #line) async throws -> Outcome {
        _ = await vault.login(userId: "alice")
        XCTAssertNotNil(vault.openCache, file: file, line: line)
        // The server session starts in the background at login (and refreshes what it keeps at
        // login): wait until those calls are over, so the flaky draws go to the reads alone.
        try await waitForQuietBackend()

        var received: [Int: String] = [:]  // id → the version the server last sent
        if warmUpOnline {
            for scope in [MessageScope.user("bob"), .user("carol"), .group("team")] {
                let page = await request(scope, limit: 60).fetchPrevious()
                for m in try page.server.get() { received[m.id] = Self.version(m) }
            }
        }
        client.network = .flaky(failureRate: failureRate)

        // Requests kept across fetches page on; the others are made afresh each time.
        let olderWithBob = request(.user("bob"), limit: 25)
        let newerInTeam = request(.group("team"), limit: 20, from: .timestamp(clock.seconds - 50_000))
        var outcome = Outcome()
        var probes: [(Int, Probe)] = []

        for i in 0..<fetches {
            // The server changes now and then (through the simulator: no network involved).
            if i % 9 == 4 {
                clock.advance(by: 30)
                let ingested = vault.realtime.ingestedEvents
                switch (i / 9) % 3 {
                case 0: try simulator.postText("new \(i)", from: "bob", to: .user("alice"))
                case 1: try simulator.edit(bobIds[bobIds.count - 1 - (i % 40)], to: .text("edited \(i)"))
                default: try simulator.delete(teamIds[teamIds.count - 1 - (i % 30)])
                }
                // Over the realtime connection the change reaches the cache without a read (a
                // new message is cached; a change to a message the cache lacks is not).
                try await settleRealtime(after: ingested)
                let cachedNow = try cachedVersions()
                for (id, version) in realtime.versions.withLock({ $0 }) where cachedNow[id] != nil { received[id] = version }
            }
            let (name, request, direction): (String, MessagesRequest, PageDirection) = switch i % 5 {
            case 0: ("older with bob", olderWithBob, .previous)
            case 1: ("newer in team", newerInTeam, .next)
            case 2: ("newest with carol", self.request(.user("carol"), limit: 30), .previous)
            case 3: ("bob, text not deleted, from a time", self.request(.user("bob"), limit: 10, from: .timestamp(clock.seconds - 20_000),
                                                                        filter: { $0.set(types: ["text"]).hideDeletedMessages(hide: true) }), .next)
            default: ("newest everywhere", self.request(nil, limit: 50), .previous)
            }
            let probe = Probe()
            if direction == .previous {
                request.fetchPrevious(onCachedMessages: probe.onCached, onServerMessages: probe.onServer, onError: probe.onError)
            } else {
                request.fetchNext(onCachedMessages: probe.onCached, onServerMessages: probe.onServer, onError: probe.onError)
            }
            let deadline = ContinuousClock.now + .seconds(10)
            while !probe.settled && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
            guard probe.settled else {
                XCTFail("fetch \(i) (\(name)) never settled", file: file, line: line)
                return outcome
            }
            probes.append((i, probe))

            let events = probe.events.withLock { $0 }
            guard events.count == 2, case .cached(let cached) = events[0] else {
                XCTFail("fetch \(i) (\(name)): the cached phase first, then one ending: \(events)", file: file, line: line)
                return outcome
            }
            // The cached page holds what the server sent before this fetch, as it last sent it.
            for m in cached {
                XCTAssertEqual(Self.version(m), received[m.id], "fetch \(i) (\(name)): cached message \(m.id) is not what the server last sent",
                               file: file, line: line)
            }
            var entry = "\(i) \(name): cached \(cached.map(\.id))"
            switch events[1] {
            case .server(let page):
                outcome.served += 1
                outcome.outcomes += "s"
                entry += " server \(page.map(\.id))"
                for m in page { received[m.id] = Self.version(m) }
            case .error(let code):
                XCTAssertEqual(code, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE, "fetch \(i) (\(name))", file: file, line: line)
                outcome.failed += 1
                outcome.outcomes += "x"
                if !cached.isEmpty { outcome.cachedOnFailure += 1 }
                entry += " \(code)"
            case .cached:
                XCTFail("fetch \(i) (\(name)): two cached phases", file: file, line: line)
            }
            outcome.transcript.append(entry)

            // The whole cache holds what the server sent, as it last sent it, and nothing else.
            if i % 10 == 9 || i == fetches - 1 {
                let stored = try cachedVersions()
                for (id, version) in stored {
                    XCTAssertEqual(version, received[id], "after fetch \(i): cached message \(id)", file: file, line: line)
                }
                // And nothing the server sent is lost: no message leaves a slice in this script (the
                // deletions are soft, and the one filtered read is of a conversation with none).
                XCTAssertEqual(Set(stored.keys), Set(received.keys), "after fetch \(i): the cache holds every message the server sent",
                               file: file, line: line)
                outcome.finalCache = stored.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }
            }
        }
        // Nothing arrived late on a settled fetch.
        try await Task.sleep(for: .milliseconds(50))
        for (i, probe) in probes {
            XCTAssertEqual(probe.events.withLock { $0.count }, 2, "fetch \(i) delivered more afterwards", file: file, line: line)
        }
        client.network = .online
        return outcome
    }

    enum Start {
        case timestamp(Int)
    }

    func request(_ scope: MessageScope?, limit: Int, from start: Start? = nil,
                 filter: (MessagesRequest.MessageRequestBuilder) -> Void = { _ in }) -> MessagesRequest {
        let builder = MessagesRequest.MessageRequestBuilder(vault: vault).set(limit: limit)
        switch scope {
        case .user(let uid)?: builder.set(uid: uid)
        case .group(let guid)?: builder.set(guid: guid)
        case nil: break
        }
        if case .timestamp(let time)? = start { builder.set(timeStamp: time) }
        filter(builder)
        return builder.build()
    }

    /// What identifies a version of a message: its text and whether and when it was deleted.
    static func version(_ m: BaseMessage) -> String {
        "\((m as? TextMessage)?.text ?? "-"):\(Int(m.deletedAt)):\(Int(m.editedAt))"
    }

    /// Every cached message, decoded from the cache.
    func cachedVersions() throws -> [Int: String] {
        let cache = try XCTUnwrap(vault.openCache)
        let decoder = WireDecoder(limits: vault.wireLimits, trusted: true)
        return try cache.reader.sync { db in
            let ids = try db.texts("SELECT server_id FROM messages WHERE server_id IS NOT NULL").compactMap { Int($0) }
            var out: [Int: String] = [:]
            for id in ids {
                guard let m = try MessageRows.message(id: id, decoder: decoder, in: db) else { continue }
                out[id] = Self.version(m)
            }
            return out
        }
    }

    /// Waits until the login call was made and no call has been made for 300 ms.
    private func waitForQuietBackend() async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        var last = -1
        var quietSince = ContinuousClock.now
        while ContinuousClock.now < deadline {
            let count = client.totalCallCount
            if count != last {
                last = count
                quietSince = ContinuousClock.now
            } else if client.callCount(.login) > 0 && ContinuousClock.now - quietSince > .milliseconds(300) {
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTFail("the background calls after login never ended")
    }
}
