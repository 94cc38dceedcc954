import ChatVault
import ChatVaultMatrix
import ChatVaultTesting
import Foundation
import Synchronization
import VaultKeys
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `bench matrix`'s rooms workload (`--rooms R`, default 300; `--room-messages M`, default 20,000;
/// `--kills K`, default 50; `--rooms 0` leaves it out): a real account's return after being away.
///
/// - The conversation list of R rooms through a connected `MatrixBackend`: cold (its first read,
///   every window) and warm (read again, nothing new): time and requests. Budget: warm ≤ 5 ms and
///   no request.
/// - The catch-up of M messages spread over the R rooms (a few rooms past a `/sync` timeline),
///   from the engine's login until the cache holds all M: time, requests (and per 1,000 events),
///   the time spent waiting for Synapse's answers, this process's CPU time (the client's share:
///   CPU ÷ total; budget ≤ 10 %), and the peak resident memory above the level before the login
///   (budget ≤ +64 MiB).
/// - The same catch-up into a second cache by `chatvault matrix-catchup-stress`, SIGKILLed a
///   moment after a committed page again and again (at least K kills while it has work left),
///   then left to finish: every room must hold exactly its messages.
enum MatrixRoomsBenchmark {
    struct Figures {
        var rooms = 0, messages = 0
        var coldListSeconds = 0.0, coldListRequests = 0, warmListMs = 0.0, warmListRequests = 0, listed = 0
        var seconds = 0.0, requests = 0, waitingSeconds = 0.0, jsonSeconds = 0.0, cpuSeconds = 0.0, rssMiB = 0.0, cached = 0
        var kills = 0, launches = 0, killedPages = 0, exactRooms = 0
        var seedMessagesPerSecond = 0.0

        var clientShare: Double { seconds > 0 ? cpuSeconds / seconds : 0 }
        var budgetsMet: Bool { warmListMs <= 5 && warmListRequests == 0 && clientShare <= 0.10 && rssMiB <= 64 }
        var complete: Bool { cached >= messages && listed == rooms && exactRooms == rooms }

        var json: JSON {
            .object([
                ("rooms", .int(rooms)), ("messages", .int(messages)), ("seedMessagesPerSecond", .double(seedMessagesPerSecond)),
                ("list", .object([("coldSeconds", .double(coldListSeconds)), ("coldRequests", .int(coldListRequests)),
                                  ("warmMs", .double(warmListMs)), ("warmRequests", .int(warmListRequests)), ("listed", .int(listed))])),
                ("catchUp", .object([("seconds", .double(seconds)), ("requests", .int(requests)),
                                     ("requestsPer1000Events", .double(Double(requests) * 1000 / Double(max(messages, 1)))),
                                     ("waitingSeconds", .double(waitingSeconds)), ("jsonSeconds", .double(jsonSeconds)),
                                     ("cpuSeconds", .double(cpuSeconds)),
                                     ("clientShare", .double(clientShare)), ("peakRssMiB", .double(rssMiB)), ("cached", .int(cached))])),
                ("kills", .object([("kills", .int(kills)), ("launches", .int(launches)), ("pagesBetweenKills", .int(killedPages)),
                                   ("exactRooms", .int(exactRooms))])),
                ("budgetsMet", .bool(budgetsMet)),
            ])
        }
    }

    /// This process's user + system CPU seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    static func run(server: LocalHomeserver, rooms roomCount: Int, messages: Int, kills: Int,
                    say: @escaping @Sendable (String) -> Void) async throws -> Figures {
        var figures = Figures(rooms: roomCount, messages: messages)
        let (alice, aliceSession, _, bobSession) = try await users(on: server, "roomsalice", "roomsbob")
        let bob = MatrixBackend(homeserver: server.url, session: bobSession)
        let aliceSide = MatrixBackend(homeserver: server.url, session: aliceSession)

        say("creating \(roomCount) rooms, each with a first message")
        let rooms = try await concurrently(roomCount, width: 8) { i in
            let room = try await bob.createRoom(name: "bench room \(i)", invite: [alice])
            try await aliceSide.joinRoom(room)
            try await put(server, bobSession, room: room, txn: "first", body: "room \(i) opens")
            return room
        }

        // The list, cold then warm, through a connected backend.
        let lister = MatrixBackend(homeserver: server.url, session: aliceSession)
        lister.attach(identities: MemoryMessageIdentities())
        _ = try await lister.login(userId: alice)
        try await lister.connect()
        func list() async throws -> Int {
            var query = ConversationQuery()
            query.limit = 100
            var count = 0
            for _ in 0..<100 {
                let page = try await lister.conversations(query)
                count += page.items.count
                guard let next = page.nextCursor else { break }
                query.cursor = next
            }
            return count
        }
        var before = lister.statistics.requests
        var began = ContinuousClock.now
        figures.listed = try await list()
        figures.coldListSeconds = (ContinuousClock.now - began).seconds
        figures.coldListRequests = lister.statistics.requests - before
        var warm: [Double] = []
        before = lister.statistics.requests
        for _ in 0..<11 {
            began = ContinuousClock.now
            _ = try await list()
            warm.append((ContinuousClock.now - began).seconds * 1000)
        }
        figures.warmListRequests = lister.statistics.requests - before
        figures.warmListMs = warm.sorted()[warm.count / 2]
        await lister.disconnect()

        // Two caches whose sync points stand before the messages: one timed in process, one for the kills.
        let timedRoot = try ScenariosCommand.makePrivateDirectory()
        let killedRoot = try ScenariosCommand.makePrivateDirectory()
        let keys = try ScenariosCommand.makePrivateDirectory()
        let sessionFile = keys.path + "/session.json"
        let sessionJSON: JSONValue = ["deviceId": .string(aliceSession.deviceId), "accessToken": .string(aliceSession.accessToken)]
        guard FileManager.default.createFile(atPath: sessionFile, contents: sessionJSON.jsonData(), attributes: [.posixPermissions: 0o600]) else {
            throw CLIError.failure("the bench could not write its session file")
        }
        let stress = [Subprocess.selfPath, MatrixCatchUpStressCommand.verb, "--dir", killedRoot.path, "--user", alice,
                      "--app", "org.chatvault.bench.matrixrooms", "--keystore", "file", "--key-dir", keys.path + "/keys",
                      "--homeserver", server.url.absoluteString, "--session-file", sessionFile, "--page-size", "20"]
        let established = try Subprocess.run(stress, environment: ProcessInfo.processInfo.environment)
        guard established.status == 0 else { throw CLIError.failure("the kill bench's cache could not be set up") }
        let memory = MemoryKeyStore()
        let timedBackend = MatrixBackend(homeserver: server.url, session: aliceSession)
        var vault = try roomsVault(root: timedRoot.path, memory: memory, backend: timedBackend)
        guard await vault.login(userId: alice).state == .ready else { throw CLIError.failure("the bench cache did not open") }
        // The first sweep (after the connection holds) stores the sync point the catch-up starts from.
        for _ in 0..<1500 where vault.getLastSyncTimestamp() == 0 { try await Task.sleep(for: .milliseconds(20)) }
        guard vault.getLastSyncTimestamp() > 0 else { throw CLIError.failure("the bench cache's first sweep did not finish") }
        await vault.waitForSyncIdle()
        let baseline = try await count(vault)
        await vault.logout()

        // Away: M messages over the rooms, most rooms a few, every tenth room ten times as many.
        let weights = (0..<roomCount).map { $0 % 10 == 0 ? 10 : 1 }
        let unit = Double(messages) / Double(weights.reduce(0, +))
        var counts = weights.map { Int(Double($0) * unit) }
        counts[0] += messages - counts.reduce(0, +)
        let perRoom = counts
        let roomIds = rooms
        say("sending \(messages) messages over \(roomCount) rooms (16 rooms at a time)")
        let seedBegan = ContinuousClock.now
        _ = try await concurrently(roomCount, width: 16) { i in
            for n in 0..<perRoom[i] {
                try await put(server, bobSession, room: roomIds[i], txn: "m\(n)", body: "bench \(i).\(n) " + String(repeating: "x", count: 60))
            }
        }
        figures.seedMessagesPerSecond = Double(messages) / max((ContinuousClock.now - seedBegan).seconds, 1e-9)

        say("catching up \(roomCount) rooms")
        let catchUpBackend = MatrixBackend(homeserver: server.url, session: aliceSession)
        vault = try roomsVault(root: timedRoot.path, memory: memory, backend: catchUpBackend)
        let rssBefore = ResidentMemory.read()?.rssKiB ?? 0
        _ = ResidentMemory.resetPeak()
        let cpuBefore = cpuSeconds()
        began = ContinuousClock.now
        guard await vault.login(userId: alice).state == .ready else { throw CLIError.failure("the bench cache did not reopen") }
        var cached = 0
        // Counted between sweeps, not while they write (a count of every row costs CPU of its own).
        for _ in 0..<6000 {
            await vault.waitForSyncIdle()
            cached = try await count(vault) - baseline
            if cached >= messages { break }
            try await Task.sleep(for: .milliseconds(50))
            if vault.getSyncState() != .syncing { _ = try? await vault.syncNow() }
        }
        figures.seconds = (ContinuousClock.now - began).seconds
        figures.cpuSeconds = cpuSeconds() - cpuBefore
        figures.rssMiB = Double(max((ResidentMemory.read()?.peakKiB ?? rssBefore) - rssBefore, 0)) / 1024
        figures.cached = cached
        figures.requests = catchUpBackend.statistics.requests
        figures.waitingSeconds = catchUpBackend.statistics.networkSeconds
        figures.jsonSeconds = catchUpBackend.statistics.jsonSeconds
        await vault.logout()

        say("the same catch-up under SIGKILL (at least \(kills) kills)")
        var launches = 0
        while figures.kills < kills && launches < 4 * kills {
            launches += 1
            let run = try KilledRun.start(stress, killAfter: .milliseconds(Int.random(in: 0..<100)), once: "synced ")
            figures.killedPages += run.stdout.split(separator: "\n").filter { $0.hasPrefix("synced ") }.count
            if run.killed { figures.kills += 1 } else if run.stdout.contains("done") { break }
        }
        figures.launches = launches
        let last = try Subprocess.run(stress, environment: ProcessInfo.processInfo.environment)
        let out = String(decoding: last.stdout, as: UTF8.self)
        var held: [String: (Int, Int)] = [:]
        for line in out.split(separator: "\n") where line.hasPrefix("room ") {
            let f = line.split(separator: " ")
            if f.count == 4, let n = Int(f[2]), let d = Int(f[3]) { held[String(f[1])] = (n, d) }
        }
        figures.exactRooms = rooms.indices.filter { i in
            guard let (n, d) = held["group_\(rooms[i])"] else { return false }
            // The room's opening message came before the cache's sync point: cached too only when
            // the list's phase wrote it as the room's last message.
            return (n == perRoom[i] || n == perRoom[i] + 1) && d == n
        }.count
        withExtendedLifetime((timedRoot, killedRoot, keys)) {}
        return figures
    }

    /// Two users registered on `server` and logged in (no refresh tokens: a bench session must not expire).
    static func users(on server: LocalHomeserver, _ first: String, _ second: String) async throws
        -> (first: String, firstSession: MatrixSession, second: String, secondSession: MatrixSession) {
        let firstPassword = UUID().uuidString, secondPassword = UUID().uuidString
        let a = try await server.register(first, password: firstPassword)
        let b = try await server.register(second, password: secondPassword)
        return (a, try await MatrixAccount.login(homeserver: server.url, user: a, password: firstPassword),
                b, try await MatrixAccount.login(homeserver: server.url, user: b, password: secondPassword))
    }

    /// `work(0)` … `work(count - 1)`, at most `width` at a time; the results in the order they end.
    static func concurrently<T: Sendable>(_ count: Int, width: Int, _ work: @escaping @Sendable (Int) async throws -> T) async throws -> [T] {
        try await withThrowingTaskGroup(of: T.self) { group in
            var next = 0
            var results: [T] = []
            func add() {
                guard next < count else { return }
                let i = next
                next += 1
                group.addTask { try await work(i) }
            }
            for _ in 0..<width { add() }
            while let result = try await group.next() {
                results.append(result)
                add()
            }
            return results
        }
    }

    static func roomsVault(root: String, memory: MemoryKeyStore, backend: MatrixBackend) throws -> OfflineVault {
        var defaults = try Arguments([])
        var common = try CommonOptions(&defaults)
        common.keystore = "memory"
        return try makeOutboxVault(common, root: root, encryption: true, memory: memory, backend: backend,
                                   callbacks: DispatchQueue(label: "chatvault.bench.matrix.rooms")) { settings in
            settings.stableConnectionDelay = .milliseconds(10)
            settings.sync.forceCooldown = .zero
        }
    }

    static func count(_ vault: OfflineVault) async throws -> Int {
        (try vault.openCache?.reader.sync { db in try db.scalarInt("SELECT count(*) FROM messages") }).flatMap { $0 }.map { Int($0) } ?? 0
    }

    static func put(_ server: LocalHomeserver, _ session: MatrixSession, room: String, txn: String, body: String) async throws {
        var request = URLRequest(url: server.url.appendingPathComponent("_matrix/client/v3/rooms/\(room)/send/m.room.message/\(txn)"))
        request.httpMethod = "PUT"
        request.setValue("Bearer \(session.accessToken)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = JSONValue.object(["msgtype": "m.text", "body": .string(body)]).jsonData()
        request.timeoutInterval = 120
        // A busy Synapse may not answer in time: the same transaction id again is the same event.
        for attempt in 1...3 {
            do {
                let (_, response) = try await URLSession.shared.data(for: request)
                guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw CLIError.failure("Synapse refused a bench message") }
                return
            } catch let error as URLError where error.code == .timedOut && attempt < 3 {
                continue
            }
        }
    }
}
