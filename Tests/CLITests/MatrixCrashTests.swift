import ChatVault
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The outbox against a real homeserver under SIGKILL: `chatvault matrix-send-stress` sends
/// through the Matrix backend and is killed at random moments, many of them between a send and
/// its answer; each relaunch (same cache, key, device and access token) finishes what was left.
/// In the end every local id that was committed as pending is on the server exactly once, found by
/// its transaction id (the device sees its own), and nothing is left unsent. A send the full
/// outbox refused reported pending too, but was never committed: it is counted out by its
/// `refused` line, or, when the kill fell between its pending and its refusal, by the notice the
/// next launch's `OutboxListener` hears (`outbox-failed <id> queueFull`).
final class MatrixCrashTests: XCTestCase {
    static let rounds = 20
    static let seed: UInt64 = 0x3a7_5eed

    func testSendsKilledBetweenTheRequestAndItsAnswerLandExactlyOnce() async throws {
        let account = try await Account.make()
        let (url, session, room) = (account.url, account.session, try await account.newRoom())
        let root = TemporaryDirectory()
        let options = account.options(root: root, homeserver: url, room: room)

        var random = SeededGenerator(seed: Self.seed)
        var outcomes = SendOutcomes()
        var inFlightAtKill = 0
        var reachedServerUnacknowledged = 0
        // At least `rounds` kills; up to as many again while none has yet fallen between a send
        // reaching the server and its answer (a narrow window a slow server's timing can miss),
        // after one undisturbed run that sends the backlog.
        var round = 0
        // A round whose six sends all finished before its kill: the server is quick today, so the
        // next kill comes sooner (the window a kill must hit moves with the server's speed).
        var quick = false
        while round < Self.rounds || ((reachedServerUnacknowledged == 0 || inFlightAtKill <= Self.rounds) && round < 3 * Self.rounds) {
            round += 1
            if round == Self.rounds + 1 {
                let drain = try CLI.run(["matrix-send-stress"] + options + ["--count", "0"])
                XCTAssertEqual(drain.status, 0, drain.stdout + drain.stderr)
                outcomes.add(drain.stdout)
            }
            // Counted from the open cache: the outbox flushes once the connection holds (after
            // ~100-200 ms), one send at a time, so these kills land before, during and after it.
            let delay = quick ? 20 + Int(random.next() % 200) : 100 + Int(random.next() % 400)
            // Ten a round: on a slow server (2-6 sends per round's window on this VM) the backlog
            // reaches the outbox's cap of 100, where new sends are refused (ERROR_QUEUE_FULL, their
            // own test is testAFullOutboxRefusesOrEvictsAndTellsEachAndNothingElseGoesMissing):
            // each is told, and none is counted as committed.
            let run = try KilledRun.start([CLI.binary, "matrix-send-stress"] + options + ["--count", "10"],
                                          killAfter: .milliseconds(delay), once: "ready")
            let (pending, sent) = outcomes.add(run.stdout)
            let refused = outcomes.refused
            inFlightAtKill += pending.filter { !sent.contains($0) && !refused.contains($0) }.count
            quick = !pending.isEmpty && pending.allSatisfy(sent.contains)
            XCTAssertTrue(run.killed || run.status == 0, "round \(round): exit \(run.status): \(run.stderr)")
            // Sends the server took whose answer the killed process never reported: killed between
            // the request and its answer (or just after). The relaunch must not send them twice.
            let onServer = try await serverCopies(url, session.token, room)
            reachedServerUnacknowledged += pending.filter { onServer[$0] != nil && !sent.contains($0) }.count
        }
        // The last launch, left alone, sends whatever the killed ones left.
        let last = try CLI.run(["matrix-send-stress"] + options + ["--count", "0"])
        XCTAssertEqual(last.status, 0, last.stdout + last.stderr)
        XCTAssertTrue(last.stdout.contains("done"))
        outcomes.add(last.stdout)
        let committed = outcomes.committed
        XCTAssertEqual(outcomes.untoldRefusals, [], "every refusal reported pending, then its refusal")
        print("MatrixCrashTests: \(round) kills, \(committed.count) messages committed, \(outcomes.refused.count) refused, "
              + "\(inFlightAtKill) unsent when killed")
        XCTAssertGreaterThan(committed.count, 0)
        XCTAssertGreaterThan(inFlightAtKill, Self.rounds, "kills landed while messages were still unsent")

        // The server: each committed local id once, as the device's own transaction id (a
        // message committed just before a kill, its line unprinted, may be there too: once).
        let copies = try await serverCopies(url, session.token, room)
        XCTAssertTrue(committed.isSubset(of: Set(copies.keys)), "every committed message reached the server: missing \(committed.subtracting(copies.keys))")
        XCTAssertTrue(outcomes.refused.isDisjoint(with: copies.keys), "no refused send reached the server")
        XCTAssertEqual(copies.values.filter { $0 > 1 }.count, 0, "no message twice: \(copies.filter { $0.value > 1 })")
        XCTAssertGreaterThan(reachedServerUnacknowledged, 0, "some kills fell between a send reaching the server and its answer being handled")
        print("MatrixCrashTests: \(reachedServerUnacknowledged) sends reached the server before their process died unanswered")
    }

    /// A full outbox over Matrix, the homeserver out of reach while the sends are made (nothing can
    /// leave): five sends into an outbox of three. With `.rejectNewest` the last two are refused,
    /// each reporting pending then `ERROR_QUEUE_FULL`, and the `OutboxListener` hears them; with
    /// `.dropOldest` two queued ones are evicted, each told `ERROR_QUEUE_OVERFLOW` on its own
    /// closures and `.queueOverflow` to the listener. Then, the homeserver reachable, the three
    /// kept go, each exactly once, and nothing else reaches it: nothing went missing.
    func testAFullOutboxRefusesOrEvictsAndTellsEachAndNothingElseGoesMissing() async throws {
        let account = try await Account.make()
        let unreachable = try XCTUnwrap(URL(string: "http://127.0.0.1:9"))
        for overflow in ["reject-newest", "drop-oldest"] {
            let room = try await account.newRoom()
            let root = TemporaryDirectory()
            let offline = try CLI.run(["matrix-send-stress"] + account.options(root: root, homeserver: unreachable, room: room)
                                      + ["--count", "5", "--max-pending", "3", "--overflow", overflow, "--leave-queued"])
            XCTAssertEqual(offline.status, 0, "\(overflow): \(offline.stdout) \(offline.stderr)")
            var outcomes = SendOutcomes()
            let (pending, _) = outcomes.add(offline.stdout)
            XCTAssertEqual(pending.count, 5, "\(overflow): every send reported pending")
            let lines = offline.stdout.split(separator: "\n").map(String.init)
            func line(_ text: String) -> Int? { lines.firstIndex(of: text) }
            if overflow == "reject-newest" {
                XCTAssertEqual(outcomes.refused, Set(pending.suffix(2)), "the sends past the cap were refused")
                XCTAssertEqual(outcomes.evicted, [])
                for id in pending.suffix(2) {
                    let refusal = try XCTUnwrap(line("refused \(id) ERROR_QUEUE_FULL"), "\(id): its onError was told")
                    XCTAssertLessThan(try XCTUnwrap(line("pending \(id)")), refusal, "\(id): pending first")
                    XCTAssertNotNil(line("outbox-failed \(id) queueFull"), "\(id): the listener heard it")
                }
            } else {
                XCTAssertEqual(outcomes.refused, [], "room was made for every send")
                XCTAssertEqual(outcomes.evicted.count, 2)
                XCTAssertTrue(outcomes.evicted.isSubset(of: Set(pending.prefix(3))), "queued ones were evicted, never a newcomer")
                for id in outcomes.evicted {
                    XCTAssertNotNil(line("failed \(id) ERROR_QUEUE_OVERFLOW"), "\(id): its own onError was told")
                    XCTAssertNotNil(line("outbox-failed \(id) queueOverflow"), "\(id): the listener heard it")
                }
            }
            XCTAssertEqual(outcomes.untoldRefusals, [])
            XCTAssertEqual(outcomes.committed.count, 3, "\(overflow): the outbox held its cap")

            let online = try CLI.run(["matrix-send-stress"] + account.options(root: root, homeserver: account.url, room: room) + ["--count", "0"])
            XCTAssertEqual(online.status, 0, "\(overflow): \(online.stdout) \(online.stderr)")
            XCTAssertTrue(online.stdout.contains("done"))
            outcomes.add(online.stdout)
            let copies = try await serverCopies(account.url, account.session.token, room)
            XCTAssertEqual(Set(copies.keys), outcomes.committed, "\(overflow): the kept sends and nothing else reached the server")
            XCTAssertEqual(copies.values.filter { $0 != 1 }.count, 0, "\(overflow): each once")
        }
    }

    /// Transaction id → copies, over the room's history (the device sees its own ids).
    func serverCopies(_ url: URL, _ token: String, _ room: String) async throws -> [String: Int] {
        var copies: [String: Int] = [:]
        var from: String?
        for _ in 0..<50 {
            var query = [("dir", "b"), ("limit", "100")]
            if let from { query.append(("from", from)) }
            let page = try await call(url, token, "GET", "_matrix/client/v3/rooms/\(room)/messages", nil, query: query)
            for event in page["chunk"]?.arrayValue ?? [] where event["type"]?.stringValue == "m.room.message" {
                if let txn = event["unsigned"]?["transaction_id"]?.stringValue { copies[txn, default: 0] += 1 }
            }
            guard let end = page["end"]?.stringValue, !(page["chunk"]?.arrayValue ?? []).isEmpty else { break }
            from = end
        }
        return copies
    }

    func login(_ url: URL, user: String, password: String) async throws -> (token: String, device: String) {
        try await RawMatrix.login(url, user: user, password: password)
    }

    func call(_ url: URL, _ token: String?, _ method: String, _ path: String, _ body: JSONValue?, query: [(String, String)] = []) async throws -> JSONValue {
        try await RawMatrix.call(url, token, method, path, body, query: query)
    }
}

/// Plain client-server calls to the test homeserver (another client's side of a test).
enum RawMatrix {
    static func login(_ url: URL, user: String, password: String) async throws -> (token: String, device: String) {
        let answer = try await call(url, nil, "POST", "_matrix/client/v3/login", [
            "type": "m.login.password", "identifier": ["type": "m.id.user", "user": .string(user)], "password": .string(password),
        ])
        return (try XCTUnwrap(answer["access_token"]?.stringValue), try XCTUnwrap(answer["device_id"]?.stringValue))
    }

    static func call(_ url: URL, _ token: String?, _ method: String, _ path: String, _ body: JSONValue?, query: [(String, String)] = []) async throws -> JSONValue {
        var components = try XCTUnwrap(URLComponents(url: url.appendingPathComponent(path), resolvingAgainstBaseURL: false))
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        var request = URLRequest(url: try XCTUnwrap(components.url))
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = body.jsonData()
        }
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSONValue(jsonData: data)
    }
}

/// A user registered on the test homeserver (`Scripts/test` starts it), logged in once: the
/// session the stress verb reads from a 0600 file.
struct Account {
    let url: URL
    let user: String
    let session: (token: String, device: String)
    let keys = TemporaryDirectory()

    var sessionFile: String { keys.path + "/session.json" }

    static func make() async throws -> Account {
        let env = ProcessInfo.processInfo.environment
        let url = try XCTUnwrap(env["CHATVAULT_SYNAPSE_URL"].flatMap(URL.init(string:)), "run with Scripts/test (it starts Synapse)")
        let secret = try XCTUnwrap(env["CHATVAULT_SYNAPSE_SECRET"])
        let password = UUID().uuidString
        let user = try await LocalHomeserver.register(on: url, secret: secret, name: "crash" + String(UInt32.random(in: 0...UInt32.max)),
                                                      password: password)
        let account = Account(url: url, user: user, session: try await RawMatrix.login(url, user: user, password: password))
        let sessionJSON: JSONValue = ["deviceId": .string(account.session.device), "accessToken": .string(account.session.token)]
        XCTAssertTrue(FileManager.default.createFile(atPath: account.sessionFile, contents: sessionJSON.jsonData(),
                                                    attributes: [.posixPermissions: 0o600]))
        return account
    }

    /// A new private room of this user's.
    func newRoom() async throws -> String {
        let created = try await RawMatrix.call(url, session.token, "POST", "_matrix/client/v3/createRoom", ["preset": "private_chat"])
        return try XCTUnwrap(created["room_id"]?.stringValue)
    }

    /// `matrix-send-stress`'s options for a cache under `root` (its key beside the session).
    func options(root: TemporaryDirectory, homeserver: URL, room: String) -> [String] {
        ["--dir", root.path, "--user", user, "--app", "org.chatvault.clitests.matrixcrash", "--keystore", "file",
         "--key-dir", keys.path + "/keys-" + (root.path as NSString).lastPathComponent, "--homeserver", homeserver.absoluteString,
         "--session-file", sessionFile, "--room", room]
    }
}

/// What `matrix-send-stress` runs printed, over every run: each local id reported pending, which
/// of them were refused (their send's `refused` line, or the `outbox-failed … queueFull` notice a
/// later run's listener heard when a kill cut the refusal off) or evicted, and any refusal told
/// without a pending line before it in its run (the seeds: pending, then the refusal).
struct SendOutcomes {
    private(set) var pending: Set<String> = []
    private(set) var refused: Set<String> = []
    private(set) var evicted: Set<String> = []
    private(set) var untoldRefusals: [String] = []

    /// Reported pending, and neither refused nor evicted: committed to be sent.
    var committed: Set<String> { pending.subtracting(refused).subtracting(evicted) }

    /// Adds one run's output; returns the ids it reported pending (in order) and sent.
    @discardableResult
    mutating func add(_ stdout: String) -> (pending: [String], sent: Set<String>) {
        var pendingHere: [String] = []
        var sent = Set<String>()
        for line in stdout.split(separator: "\n") {
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count >= 2 else { continue }
            let id = fields[1]
            switch (fields[0], fields.count > 2 ? fields[2] : "") {
            case ("pending", _):
                pendingHere.append(id)
            case ("sent", _):
                sent.insert(id)
            case ("refused", _):
                if !pendingHere.contains(id) { untoldRefusals.append(id) }
                refused.insert(id)
            case ("outbox-failed", "queueFull"), ("outbox-failed", "byteOverflow"):
                refused.insert(id)
            case ("outbox-failed", "queueOverflow"), ("failed", "ERROR_QUEUE_OVERFLOW"):
                evicted.insert(id)
            default:
                break
            }
        }
        pending.formUnion(pendingHere)
        return (pendingHere, sent)
    }
}
