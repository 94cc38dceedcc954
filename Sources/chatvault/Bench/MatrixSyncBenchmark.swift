import ChatVault
import ChatVaultMatrix
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import VaultKeys
import VaultStore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `chatvault bench matrix [--messages N] [--relations R] [--rooms R] [--room-messages M] [--kills K] [--json]`: the catch-up of N messages (default 10,000)
/// end to end, from a real Synapse (a throwaway one on 127.0.0.1; Scripts/chatvault installs it)
/// and from the in-process simulator, each into a fresh encrypted cache (key in memory): from the
/// engine's login until the cache holds all N. Where the time goes: inside the backend's
/// `changes` calls (for Matrix: waiting for answers, which is the network and the server; parsing
/// JSON; and the rest, rendering events and giving them ids) and the engine's own share (validation
/// and the cache writes: the total less the backend's calls). Also how fast Synapse took the N
/// messages in (16 sends at a time).
///
/// Then the relations workload (`--relations R`, default 400): R messages cached by two engines,
/// then, while both are away, Element-shaped edits (some edited twice), reactions (some taken
/// back) and redactions of them; each engine catches up, one resolving relations from its cache
/// (the default), one asking the homeserver for each as the catch-up did before (issue 23); the
/// requests its `changes` calls made per 1,000 caught-up events, for both.
///
/// Then the rooms workload (`MatrixRoomsBenchmark`: `--rooms R`, default 300, 0 leaves it out;
/// `--room-messages M`, default 20,000; `--kills K`, default 50): the conversation list of R rooms
/// cold and warm, the catch-up of M messages over them (the client's share, peak RSS), and the
/// same catch-up under K SIGKILLs.
///
/// Exit 1 when a catch-up does not bring all N messages, the two relation catch-ups leave
/// different rows, or the rooms workload misses a budget or leaves a room inexact. `--json` fields:
/// `messages`, `seedMessagesPerSecond`, and `matrix`, `simulator`, each `{ seconds,
/// messagesPerSecond, backendSeconds, engineSeconds, requests, networkSeconds, jsonSeconds, bytes,
/// cached }` (the last four 0 for the simulator); `relations: { messages, events, local, asking }`,
/// the last two `{ requests, requestsPer1000Events, seconds }`; `rooms` (`MatrixRoomsBenchmark.Figures.json`).
enum MatrixSyncBenchCommand {
    struct Figures {
        var seconds = 0.0, backendSeconds = 0.0, networkSeconds = 0.0, jsonSeconds = 0.0
        var requests = 0, bytes = 0, cached = 0

        func json(_ messages: Int) -> JSON {
            .object([
                ("seconds", .double(seconds)), ("messagesPerSecond", .double(seconds > 0 ? Double(messages) / seconds : 0)),
                ("backendSeconds", .double(backendSeconds)), ("engineSeconds", .double(max(seconds - backendSeconds, 0))),
                ("requests", .int(requests)), ("networkSeconds", .double(networkSeconds)), ("jsonSeconds", .double(jsonSeconds)),
                ("bytes", .int(bytes)), ("cached", .int(cached)),
            ])
        }
    }

    /// Forwards to a backend and counts the time spent in its change-log calls; a fixed sync point
    /// stands for the "latest" one, so the engine's first sweep starts just before the messages.
    final class TimedBackend: ForwardingBackend {
        let forwardee: any ChatBackend
        let start: ChangeLogPage
        let spent = Mutex(0.0)
        /// Requests made inside `changes` calls, when `requestCount` tells the backend's total.
        let requests = Mutex(0)
        let requestCount: (@Sendable () -> Int)?

        init(_ inner: any ChatBackend, start: ChangeLogPage, requestCount: (@Sendable () -> Int)? = nil) {
            forwardee = inner
            self.start = start
            self.requestCount = requestCount
        }

        func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
            let began = ContinuousClock.now
            let before = requestCount?() ?? 0
            defer {
                let d = ContinuousClock.now - began
                spent.withLock { $0 += d.seconds }
                let made = (requestCount?() ?? 0) - before
                requests.withLock { $0 += made }
            }
            return try await forwardee.changes(since: token, limit: limit)
        }

        func latestSyncPoint() async throws(BackendError) -> ChangeLogPage { start }
    }

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let json = args.flag("json")
        let count = try args.int("messages", default: 10_000, range: 1...1_000_000)
        let relationCount = try args.int("relations", default: 400, range: 8...100_000)
        let roomCount = try args.int("rooms", default: 300, range: 0...2000)
        let roomMessages = try args.int("room-messages", default: 20_000, range: 1...1_000_000)
        let killCount = try args.int("kills", default: 50, range: 0...10_000)
        try args.rejectUnknown()
        let say: @Sendable (String) -> Void = { line in if !json { emit(line) } }
        let env = ProcessInfo.processInfo.environment
        guard let python = env["CHATVAULT_SYNAPSE_PYTHON"], let root = env["CHATVAULT_ROOT"] else {
            throw CLIError.usage("bench matrix needs Scripts/chatvault (it installs Synapse): Scripts/chatvault bench matrix")
        }

        // Synapse, alice and bob in the rooms of the messages.
        say("starting a throwaway Synapse on 127.0.0.1")
        let server = try LocalHomeserver(repository: root, python: python)
        try await server.start()
        defer { server.stop() }
        let (alice, aliceSession, _, bobSession) = try await MatrixRoomsBenchmark.users(on: server, "alice", "bob")
        let bob = MatrixBackend(homeserver: server.url, session: bobSession)
        bob.attach(identities: MemoryMessageIdentities())
        let setup = MatrixBackend(homeserver: server.url, session: aliceSession)
        // Rooms of 400 messages: a room's catch-up reads at most the cache's
        // maxMessagesPerConversation (500 here) back, so every one of the N is cached.
        var benchRooms: [String] = []
        for r in 0..<max(1, (count + 399) / 400) {
            let room = try await bob.createRoom(name: "bench \(r)", invite: [alice])
            try await setup.joinRoom(room)
            benchRooms.append(room)
        }
        let point = try await setup.latestSyncPoint()
        let roomIds = benchRooms

        say("sending \(count) messages to Synapse (16 at a time)")
        let seedStart = ContinuousClock.now
        _ = try await MatrixRoomsBenchmark.concurrently(count, width: 16) { i in
            // A bare PUT (no read-back): the server's intake, not the client's, is measured.
            // (A send Synapse is too busy to answer in time is sent again, same transaction.)
            try await MatrixRoomsBenchmark.put(server, bobSession, room: roomIds[i % roomIds.count], txn: "bench-\(i)",
                                               body: "bench message \(i) " + String(repeating: "x", count: 80))
        }
        let seedSeconds = (ContinuousClock.now - seedStart).seconds

        say("catching up from Synapse")
        let matrixBackend = MatrixBackend(homeserver: server.url, session: aliceSession)
        var matrix = try await catchUp(TimedBackend(matrixBackend, start: point), user: alice, count: count)
        let stats = matrixBackend.statistics
        matrix.requests = stats.requests
        matrix.networkSeconds = stats.networkSeconds
        matrix.jsonSeconds = stats.jsonSeconds
        matrix.bytes = stats.bytes

        say("catching up from the simulator")
        let simulator = ChatVaultSimulator(seed: 3)
        try simulator.addUsers("alice", "bob")
        let device = simulator.client(for: "alice")
        let simulatedPoint = try await device.latestSyncPoint()
        for i in 0..<count {
            try simulator.postText("bench message \(i) " + String(repeating: "x", count: 80), from: "bob", to: .user("alice"))
        }
        let simulated = try await catchUp(TimedBackend(device, start: simulatedPoint), user: "alice", count: count)

        say("the relations workload: \(relationCount) messages, then their edits, reactions and redactions")
        let relations = try await relationsCatchUp(server: server, alice: alice, aliceSession: aliceSession, bob: bob,
                                                   bobSession: bobSession, setup: setup, messages: relationCount)

        var rooms: MatrixRoomsBenchmark.Figures?
        if roomCount > 0 {
            say("the rooms workload: \(roomCount) rooms, \(roomMessages) messages while away")
            rooms = try await MatrixRoomsBenchmark.run(server: server, rooms: roomCount, messages: roomMessages, kills: killCount, say: say)
        }

        let passed = matrix.cached >= count && simulated.cached >= count && relations.same
            && (rooms.map { $0.complete && $0.budgetsMet && $0.kills >= killCount } ?? true)
        if json {
            emit(JSON.object([
                ("benchmark", .string("matrix")), ("messages", .int(count)),
                ("seedMessagesPerSecond", .double(Double(count) / max(seedSeconds, 1e-9))),
                ("matrix", matrix.json(count)), ("simulator", simulated.json(count)), ("relations", relations.json),
                ("rooms", rooms?.json ?? .null),
                ("passed", .bool(passed)),
            ]).render())
        } else {
            emit("")
            emit("catch-up of \(count) messages into a fresh encrypted cache, from login until all are cached")
            emit("source     total s  msg/s    backend s  engine s  requests  waiting s  JSON s  MiB")
            for (name, f) in [("Synapse", matrix), ("simulator", simulated)] {
                emit(String(format: "%-9@  %7.2f  %7.0f  %9.2f  %8.2f  %8d  %9.2f  %6.2f  %5.1f", name as NSString, f.seconds,
                            Double(count) / max(f.seconds, 1e-9), f.backendSeconds, max(f.seconds - f.backendSeconds, 0), f.requests,
                            f.networkSeconds, f.jsonSeconds, Double(f.bytes) / 1_048_576))
            }
            emit(String(format: "Synapse took the messages in at %.0f msg/s (16 sends at a time)", Double(count) / max(seedSeconds, 1e-9)))
            emit("")
            emit("catch-up of \(relations.events) relation events (edits, reactions, redactions) on \(relations.messages) cached messages")
            emit("relations            requests  per 1,000 caught-up events  seconds")
            for (name, r) in [("resolved from cache", relations.local), ("asked (before)", relations.asking)] {
                emit(String(format: "%-19@  %8d  %26.0f  %7.2f", name as NSString, r.requests,
                            Double(r.requests) * 1000 / Double(max(relations.events, 1)), r.seconds))
            }
            if !relations.same { emit("FAILED: the two relation catch-ups left different rows") }
            if let r = rooms {
                emit("")
                emit("\(r.rooms) rooms: the conversation list through a connected backend (\(r.listed) listed)")
                emit(String(format: "cold (first read, every window)  %7.3f s  %4d requests", r.coldListSeconds, r.coldListRequests))
                emit(String(format: "warm (read again, median of 11)  %7.3f ms %4d requests   budget ≤ 5 ms and none: %@",
                            r.warmListMs, r.warmListRequests, (r.warmListMs <= 5 && r.warmListRequests == 0 ? "met" : "MISSED") as NSString))
                emit("the catch-up of \(r.messages) messages over \(r.rooms) rooms (Synapse took them in at \(Int(r.seedMessagesPerSecond)) msg/s)")
                emit(String(format: "total %.2f s · %d requests (%.1f per 1,000 events) · waiting for Synapse %.2f s · this process's CPU %.2f s, of which parsing JSON %.2f s",
                            r.seconds, r.requests, Double(r.requests) * 1000 / Double(max(r.messages, 1)), r.waitingSeconds, r.cpuSeconds,
                            r.jsonSeconds))
                emit(String(format: "client share (CPU ÷ total) %.1f %%   budget ≤ 10 %%: %@ · the server's (waiting ÷ total) %.1f %%",
                            r.clientShare * 100, (r.clientShare <= 0.10 ? "met" : "MISSED") as NSString,
                            r.seconds > 0 ? r.waitingSeconds / r.seconds * 100 : 0))
                emit(String(format: "peak RSS above the login's level %.1f MiB   budget ≤ 64: %@", r.rssMiB, (r.rssMiB <= 64 ? "met" : "MISSED") as NSString))
                emit("under SIGKILL: \(r.kills) kills in \(r.launches) launches, \(r.killedPages) pages committed between them; "
                     + "\(r.exactRooms) of \(r.rooms) rooms hold exactly their messages")
            }
            emit(passed ? "ok" : "FAILED: a catch-up did not bring every message, a room is not exact, or a budget was missed (above)")
        }
        return passed ? 0 : 1
    }

    /// The relations workload's figures.
    struct RelationFigures {
        struct Side {
            var requests = 0
            var seconds = 0.0
        }

        var messages = 0, events = 0
        var local = Side(), asking = Side()
        /// Both catch-ups left the same rows (per message: edited time, deleted or not).
        var same = false

        var json: JSON {
            func side(_ s: Side) -> JSON {
                .object([("requests", .int(s.requests)), ("requestsPer1000Events", .double(Double(s.requests) * 1000 / Double(max(events, 1)))),
                         ("seconds", .double(s.seconds))])
            }
            return .object([("messages", .int(messages)), ("events", .int(events)), ("local", side(local)), ("asking", side(asking)),
                             ("same", .bool(same))])
        }
    }

    /// `messages` messages from bob in a new room, cached by two engines of alice; while both are
    /// logged out, bob edits every fourth (every eighth twice), reacts to the next, reacts to the
    /// third and takes it back, and redacts the fourth; then each engine catches up, one resolving
    /// relations from its cache, one asking (`MatrixBackend.resolvesRelationsLocally` off).
    static func relationsCatchUp(server: LocalHomeserver, alice: String, aliceSession: MatrixSession, bob: MatrixBackend,
                                 bobSession: MatrixSession, setup: MatrixBackend, messages: Int) async throws -> RelationFigures {
        let room = try await bob.createRoom(name: "bench relations", invite: [alice])
        try await setup.joinRoom(room)
        let point = try await setup.latestSyncPoint()
        @Sendable func put(_ type: String, _ content: JSONValue, _ txn: String) async throws -> String {
            var request = URLRequest(url: server.url.appendingPathComponent("_matrix/client/v3/rooms/\(room)/send/\(type)/\(txn)"))
            request.httpMethod = "PUT"
            request.setValue("Bearer \(bobSession.accessToken)", forHTTPHeaderField: "Authorization")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = content.jsonData()
            let (data, response) = try await URLSession.shared.data(for: request)
            guard (response as? HTTPURLResponse)?.statusCode == 200, let id = (try? JSONValue(jsonData: data))?["event_id"]?.stringValue else {
                throw CLIError.failure("Synapse refused a bench event")
            }
            return id
        }
        @Sendable func redact(_ event: String, _ txn: String) async throws {
            var request = URLRequest(url: server.url.appendingPathComponent("_matrix/client/v3/rooms/\(room)/redact/\(event)/\(txn)"))
            request.httpMethod = "PUT"
            request.setValue("Bearer \(bobSession.accessToken)", forHTTPHeaderField: "Authorization")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = JSONValue.object([:]).jsonData()
            let (_, response) = try await URLSession.shared.data(for: request)
            guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw CLIError.failure("Synapse refused a bench redaction") }
        }
        // In 16 lanes, each lane's events in order.
        func lanes(_ work: @escaping @Sendable (Int) async throws -> Void) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<16 {
                    group.addTask { for i in stride(from: lane, to: messages, by: 16) { try await work(i) } }
                }
                try await group.waitForAll()
            }
        }
        let events = Mutex<[Int: String]>([:])
        try await lanes { i in
            let id = try await put("m.room.message", ["msgtype": "m.text", "body": .string("relations bench \(i)")], "rel-\(i)")
            events.withLock { $0[i] = id }
        }
        let ids = events.withLock { $0 }

        // Two engines cache the messages, and their sync points move past them.
        var sides: [(vault: OfflineVault, backend: TimedBackend, scratch: TemporaryDirectory)] = []
        for local in [true, false] {
            let matrix = MatrixBackend(homeserver: server.url, session: aliceSession)
            matrix.resolvesRelationsLocally = local
            let timed = TimedBackend(matrix, start: point, requestCount: { matrix.statistics.requests })
            let scratch = try ScenariosCommand.makePrivateDirectory()
            var defaults = try Arguments([])
            var common = try CommonOptions(&defaults)
            common.keystore = "memory"
            let vault = try makeOutboxVault(common, root: scratch.path, encryption: true, memory: MemoryKeyStore(), backend: timed,
                                            callbacks: DispatchQueue(label: "chatvault.bench.matrix.relations")) { settings in
                settings.stableConnectionDelay = .milliseconds(10)
                settings.sync.forceCooldown = .zero
            }
            guard await vault.login(userId: alice).state == .ready else { throw CLIError.failure("the bench cache did not open") }
            guard try await waitFor(vault, { $0.messages >= messages }) else { throw CLIError.failure("the relations bench's messages were not cached") }
            _ = try? await vault.syncNow()
            await vault.waitForSyncIdle()
            await vault.logout()
            sides.append((vault, timed, scratch))
        }

        // While both are away: edits (an edit of an edit), reactions (one taken back), redactions.
        let posted = Mutex(0)
        try await lanes { i in
            guard let target = ids[i] else { return }
            var n = 0
            func edit(_ text: String, _ k: Int) async throws {
                _ = try await put("m.room.message", ["msgtype": "m.text", "body": .string("* " + text),
                                                     "m.new_content": ["msgtype": "m.text", "body": .string(text)],
                                                     "m.relates_to": ["rel_type": "m.replace", "event_id": .string(target)]], "rel-edit-\(k)-\(i)")
                n += 1
            }
            func react(_ key: String) async throws -> String {
                n += 1
                return try await put("m.reaction", ["m.relates_to": ["rel_type": "m.annotation", "event_id": .string(target), "key": .string(key)]],
                                     "rel-react-\(key.unicodeScalars.first?.value ?? 0)-\(i)")
            }
            switch i % 4 {
            case 0:
                try await edit("relations bench \(i), edited", 1)
                if i % 8 == 0 { try await edit("relations bench \(i), edited twice", 2) }
            case 1:
                _ = try await react("👍")
            case 2:
                let party = try await react("🎉")
                try await redact(party, "rel-unreact-\(i)")
                n += 1
            default:
                try await redact(target, "rel-redact-\(i)")
                n += 1
            }
            posted.withLock { $0 += n }
        }
        var figures = RelationFigures(messages: messages, events: posted.withLock { $0 })
        let redacted = messages / 4
        var rows: [[String]] = []
        for (index, side) in sides.enumerated() {
            let began = ContinuousClock.now
            side.backend.requests.withLock { $0 = 0 }
            guard await side.vault.login(userId: alice).state == .ready else { throw CLIError.failure("the bench cache did not reopen") }
            let done = try await waitFor(side.vault) { $0.deleted >= redacted && $0.edited >= (messages + 3) / 4 }
            let seconds = (ContinuousClock.now - began).seconds
            let made = side.backend.requests.withLock { $0 }
            if index == 0 { figures.local = .init(requests: made, seconds: seconds) } else { figures.asking = .init(requests: made, seconds: seconds) }
            let state = try side.vault.openCache?.reader.sync { db -> [String] in
                var out: [String] = []
                let stmt = try db.cached("SELECT server_id, updated_at, deleted_at > 0 FROM messages ORDER BY server_id")
                defer { stmt.reset() }
                while try stmt.step() { out.append("\(stmt.int64(0)) \(stmt.int64(1)) \(stmt.int64(2))") }
                return out
            }
            rows.append(done ? state ?? [] : [])
            await side.vault.logout()
        }
        figures.same = rows.count == 2 && !rows[0].isEmpty && rows[0] == rows[1]
        withExtendedLifetime(sides) {}
        return figures
    }

    /// What a bench cache holds: messages, those marked deleted, those edited (`updated_at`).
    struct CacheCounts {
        var messages = 0, deleted = 0, edited = 0
    }

    /// Syncs until `enough` holds of the cache (up to 600 sweeps); false when it never did.
    static func waitFor(_ vault: OfflineVault, _ enough: (CacheCounts) -> Bool) async throws -> Bool {
        for _ in 0..<600 {
            await vault.waitForSyncIdle()
            let counts = (try? vault.openCache?.reader.sync { db -> CacheCounts in
                let all = try db.scalarInt("SELECT count(*) FROM messages") ?? 0
                let deleted = try db.scalarInt("SELECT count(*) FROM messages WHERE deleted_at > 0") ?? 0
                let edited = try db.scalarInt("SELECT count(*) FROM messages WHERE updated_at > 0 AND deleted_at = 0") ?? 0
                return CacheCounts(messages: Int(all), deleted: Int(deleted), edited: Int(edited))
            }).flatMap { $0 } ?? CacheCounts()
            if enough(counts) { return true }
            _ = try? await vault.syncNow()
        }
        return false
    }

    /// Logs a fresh engine in over `backend` and waits until its cache holds `count` messages.
    static func catchUp(_ backend: TimedBackend, user: String, count: Int) async throws -> Figures {
        let scratch = try ScenariosCommand.makePrivateDirectory()
        var defaults = try Arguments([])
        var common = try CommonOptions(&defaults)
        common.keystore = "memory"
        let vault = try makeOutboxVault(common, root: scratch.path, encryption: true, memory: MemoryKeyStore(), backend: backend,
                                        callbacks: DispatchQueue(label: "chatvault.bench.matrix")) { settings in
            settings.stableConnectionDelay = .milliseconds(10)
            settings.sync.forceCooldown = .zero
        }
        let started = ContinuousClock.now
        guard await vault.login(userId: user).state == .ready else { throw CLIError.failure("the bench cache did not open") }
        var cached = 0
        for _ in 0..<600 {
            await vault.waitForSyncIdle()
            cached = (try? vault.openCache?.reader.sync { db in try db.scalarInt("SELECT count(*) FROM messages") }).flatMap { $0 }.map { Int($0) } ?? 0
            if cached >= count { break }
            _ = try? await vault.syncNow()
        }
        let seconds = (ContinuousClock.now - started).seconds
        await vault.logout()
        withExtendedLifetime(scratch) {}
        return Figures(seconds: seconds, backendSeconds: backend.spent.withLock { $0 }, cached: cached)
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
