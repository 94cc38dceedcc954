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

/// `chatvault bench matrix [--messages N] [--json]`: the catch-up of N messages (default 10,000)
/// end to end, from a real Synapse (a throwaway one on 127.0.0.1; Scripts/chatvault installs it)
/// and from the in-process simulator, each into a fresh encrypted cache (key in memory): from the
/// engine's login until the cache holds all N. Where the time goes: inside the backend's
/// `changes` calls (for Matrix: waiting for answers, which is the network and the server; parsing
/// JSON; and the rest, rendering events and giving them ids) and the engine's own share (validation
/// and the cache writes: the total less the backend's calls). Also how fast Synapse took the N
/// messages in (16 sends at a time).
///
/// No budget (the issue asks for the figures side by side); exit 1 when a catch-up does not bring
/// all N messages. `--json` fields: `messages`, `seedMessagesPerSecond`, and `matrix`, `simulator`,
/// each `{ seconds, messagesPerSecond, backendSeconds, engineSeconds, requests, networkSeconds,
/// jsonSeconds, bytes, cached }` (the last four 0 for the simulator).
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

        init(_ inner: any ChatBackend, start: ChangeLogPage) {
            forwardee = inner
            self.start = start
        }

        func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
            let began = ContinuousClock.now
            defer { let d = ContinuousClock.now - began; spent.withLock { $0 += d.seconds } }
            return try await forwardee.changes(since: token, limit: limit)
        }

        func latestSyncPoint() async throws(BackendError) -> ChangeLogPage { start }
    }

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let json = args.flag("json")
        let count = try args.int("messages", default: 10_000, range: 1...1_000_000)
        try args.rejectUnknown()
        let say: @Sendable (String) -> Void = { line in if !json { emit(line) } }
        let env = ProcessInfo.processInfo.environment
        guard let python = env["CHATVAULT_SYNAPSE_PYTHON"], let root = env["CHATVAULT_ROOT"] else {
            throw CLIError.usage("bench matrix needs Scripts/chatvault (it installs Synapse): Scripts/chatvault bench matrix")
        }

        // Synapse, alice and bob in one room.
        say("starting a throwaway Synapse on 127.0.0.1")
        let server = try LocalHomeserver(repository: root, python: python)
        try await server.start()
        defer { server.stop() }
        let alicePassword = UUID().uuidString, bobPassword = UUID().uuidString
        let alice = try await server.register("alice", password: alicePassword)
        let bobId = try await server.register("bob", password: bobPassword)
        let aliceSession = try await MatrixAccount.login(homeserver: server.url, user: alice, password: alicePassword)
        let bobSession = try await MatrixAccount.login(homeserver: server.url, user: bobId, password: bobPassword)
        let bob = MatrixBackend(homeserver: server.url, session: bobSession)
        bob.attach(identities: MemoryMessageIdentities())
        let setup = MatrixBackend(homeserver: server.url, session: aliceSession)
        let room = try await bob.createRoom(name: "bench", invite: [alice])
        try await setup.joinRoom(room)
        let point = try await setup.latestSyncPoint()

        say("sending \(count) messages to Synapse (16 at a time)")
        let seedStart = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            func add() {
                let i = next
                next += 1
                group.addTask {
                    // A bare PUT (no read-back): the server's intake, not the client's, is measured.
                    var request = URLRequest(url: server.url.appendingPathComponent("_matrix/client/v3/rooms/\(room)/send/m.room.message/bench-\(i)"))
                    request.httpMethod = "PUT"
                    request.setValue("Bearer \(bobSession.accessToken)", forHTTPHeaderField: "Authorization")
                    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                    let body: JSONValue = ["msgtype": "m.text", "body": .string("bench message \(i) " + String(repeating: "x", count: 80))]
                    request.httpBody = body.jsonData()
                    let (_, response) = try await URLSession.shared.data(for: request)
                    guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw CLIError.failure("Synapse refused a bench message") }
                }
            }
            for _ in 0..<min(16, count) { add() }
            while try await group.next() != nil { if next < count { add() } }
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

        let passed = matrix.cached >= count && simulated.cached >= count
        if json {
            emit(JSON.object([
                ("benchmark", .string("matrix")), ("messages", .int(count)),
                ("seedMessagesPerSecond", .double(Double(count) / max(seedSeconds, 1e-9))),
                ("matrix", matrix.json(count)), ("simulator", simulated.json(count)), ("passed", .bool(passed)),
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
            emit(passed ? "ok" : "FAILED: a catch-up did not bring every message")
        }
        return passed ? 0 : 1
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
