import ChatVault
import ChatVaultMatrix
import ChatVaultTesting
import Foundation
import VaultKeys

/// `chatvault demo --matrix [--messages N] [--json]` and
/// `chatvault demo --matrix --homeserver URL --user @U:SERVER [--password-file F] [--messages N] [--json]`:
/// the reconnect story against a real Matrix homeserver. Without `--homeserver` a throwaway Synapse
/// is started on 127.0.0.1 (Scripts/chatvault installs it; the binary needs
/// `CHATVAULT_SYNAPSE_PYTHON` and `CHATVAULT_ROOT`) with two users, alice and bob, and stopped at the
/// end. With `--homeserver` the password comes from `--password-file` (a file, read once) or from
/// standard input, never from an argument; the story then runs in a new private room of that user.
///
/// 1. online: sign in, open the encrypted cache (key in memory, temporary directory), first sweep;
/// 2. offline: the engine restarts with the network down (its backend reaches nothing); N sends are
///    committed as pending and told queued; meanwhile bob (local server only) writes twice;
/// 3. back online: the engine restarts with the network back; the outbox drains once and the
///    catch-up brings bob's messages (`source == .sync`);
/// 4. summary: sent, the server's copies of each (duplicates must be 0), caught up, outbox left.
///
/// No message text, token or password is printed. Exit 0 when every message reached the server
/// exactly once, nothing is left unsent and (local server) bob's messages were caught up.
enum MatrixDemo {
    struct Summary {
        var messages = 0, queued = 0, sent = 0, failed = 0, serverCopies = 0, duplicates = 0, caughtUp = 0, expectedCatchUp = 0, outboxAfter = -1
        var milliseconds = 0.0

        var passed: Bool {
            queued == messages && sent == messages && failed == 0 && serverCopies == messages && duplicates == 0
                && caughtUp >= expectedCatchUp && outboxAfter == 0
        }

        var json: JSON {
            .object([
                ("messages", .int(messages)), ("queued", .int(queued)), ("sent", .int(sent)), ("failed", .int(failed)),
                ("serverCopies", .int(serverCopies)), ("duplicates", .int(duplicates)), ("caughtUp", .int(caughtUp)),
                ("expectedCatchUp", .int(expectedCatchUp)), ("outboxAfter", .int(outboxAfter)), ("milliseconds", .double(milliseconds)),
                ("passed", .bool(passed)),
            ])
        }
    }

    static func run(_ args: inout Arguments, json: Bool) async throws -> Int32 {
        let count = try args.int("messages", default: 3, range: 1...OutboxLimits.maxPending)
        let homeserver = args.string("homeserver")
        let user = args.string("user")
        let passwordFile = args.string("password-file")
        try args.rejectUnknown()
        let say: @Sendable (String) -> Void = { line in if !json { emit(line) } }

        // The server and the users.
        var local: LocalHomeserver?
        let url: URL
        let me: String, password: String
        var bob: MatrixBackend?
        if let homeserver {
            guard let parsed = URL(string: homeserver), parsed.scheme == "https" || parsed.scheme == "http" else {
                throw CLIError.usage("--homeserver must be an http(s) URL")
            }
            guard let user, user.hasPrefix("@"), user.contains(":") else { throw CLIError.usage("--user must be a full Matrix id (@name:server)") }
            url = parsed
            me = user
            password = try readPassword(passwordFile)
        } else {
            guard user == nil, passwordFile == nil else { throw CLIError.usage("--user and --password-file go with --homeserver") }
            let env = ProcessInfo.processInfo.environment
            guard let python = env["CHATVAULT_SYNAPSE_PYTHON"], let root = env["CHATVAULT_ROOT"] else {
                throw CLIError.usage("a local homeserver needs Scripts/chatvault (it installs Synapse): Scripts/chatvault demo --matrix")
            }
            say("starting a throwaway Synapse on 127.0.0.1")
            let server = try LocalHomeserver(repository: root, python: python)
            try await server.start()
            local = server
            url = server.url
            password = UUID().uuidString
            me = try await server.register("alice", password: password)
            let bobPassword = UUID().uuidString
            let bobId = try await server.register("bob", password: bobPassword)
            let bobSession = try await MatrixAccount.login(homeserver: url, user: bobId, password: bobPassword)
            let b = MatrixBackend(homeserver: url, session: bobSession)
            b.attach(identities: MemoryMessageIdentities())
            bob = b
        }
        defer { local?.stop() }

        let session: MatrixSession
        do {
            session = try await MatrixAccount.login(homeserver: url, user: me, password: password, deviceName: "ChatVault demo")
        } catch {
            throw CLIError.failure("signing in failed: \(error)")
        }
        say("signed in as \(session.userId) on device \(session.deviceId)")
        let online = MatrixBackend(homeserver: url, session: session)
        let room: String
        if let bob {
            room = try await bob.createRoom(name: "ChatVault demo", invite: [session.userId])
            try await online.joinRoom(room)
        } else {
            room = try await online.createRoom(name: "ChatVault demo \(Int(Date().timeIntervalSince1970))")
        }
        say("room \(room)")

        let scratch = try ScenariosCommand.makePrivateDirectory()
        let memory = MemoryKeyStore()
        var defaults = try Arguments([])
        var common = try CommonOptions(&defaults)
        common.keystore = "memory"
        let callbacks = DispatchQueue(label: "chatvault.matrix-demo.callbacks")
        let timings: (inout VaultSettings) -> Void = { settings in
            settings.stableConnectionDelay = .milliseconds(100)
            settings.reconnect = RetryPolicy(initialDelay: .milliseconds(50), maximumDelay: .milliseconds(500))
            settings.sync.forceCooldown = .zero
        }
        var summary = Summary(messages: count, expectedCatchUp: bob == nil ? 0 : 2)
        let started = ContinuousClock.now

        // 1. Online: the cache and the sync point.
        let first = try makeOutboxVault(common, root: scratch.path, encryption: true, memory: memory, backend: online, callbacks: callbacks, adjust: timings)
        guard await first.login(userId: session.userId).state == .ready else { throw CLIError.failure("the demo cache did not open") }
        _ = try? await first.syncNow()
        await first.waitForSyncIdle()
        say("online: cache open (encrypted, key in memory), sync point set at the server's present")
        await first.logout()

        // 2. Offline: the engine restarts with the network down.
        guard let unreachable = URL(string: "http://127.0.0.1:9") else { throw CLIError.failure("no URL") }
        let nowhere = MatrixBackend(homeserver: unreachable, session: session)
        let offline = try makeOutboxVault(common, root: scratch.path, encryption: true, memory: memory, backend: nowhere, callbacks: callbacks, adjust: timings)
        _ = await offline.login(userId: session.userId)
        say("offline: the network is down; sending \(count) message\(count == 1 ? "" : "s")")
        let pending = Tally(), notices = Tally()
        let runId = UUID().uuidString.prefix(8)
        for i in 1...count {
            offline.sendTextMessage(message: TextMessage(receiverUid: room, text: "demo \(runId) \(i)", receiverType: .group),
                                    onMessagePending: { m in pending.hit(); say("  [\(i)] pending as \(m.localMessageId ?? "?")") },
                                    onMessageSent: { _ in }, onError: { e in notices.hit(); say("  [\(i)] \(e?.errorCode ?? "?")") })
        }
        _ = await pending.wait(for: count, timeout: .seconds(20))
        _ = await notices.wait(for: count, timeout: .seconds(20))
        summary.queued = pending.count
        if let bob {
            for i in 1...2 {
                _ = try await bob.send(["receiver": .string(room), "receiverType": "group", "category": "message", "type": "text",
                                        "data": ["text": .string("bob \(runId) \(i)")]], localMessageId: "bob-\(runId)-\(i)")
            }
            say("meanwhile bob wrote 2 messages")
        }
        await offline.logout()

        // 3. Back online.
        say("back online: the engine restarts; the outbox drains and the catch-up runs")
        let back = MatrixBackend(homeserver: url, session: session)
        let listener = DemoListener(say: say, number: { _ in nil })
        let second = try makeOutboxVault(common, root: scratch.path, encryption: true, memory: memory, backend: back, callbacks: callbacks, adjust: timings)
        second.addOutboxListener("chatvault-matrix-demo", listener)
        let synced = Tally()
        let stream = second.messageEvents()
        let watching = Task {
            for await event in stream {
                if case .synced(let messages) = event { for m in messages where m.source == .sync && m.senderUid != session.userId { _ = m; synced.hit() } }
            }
        }
        guard await second.login(userId: session.userId).state == .ready else { throw CLIError.failure("the demo cache did not reopen") }
        _ = await listener.sent.wait(for: count, timeout: .seconds(60))
        if summary.expectedCatchUp > 0 { _ = await synced.wait(for: summary.expectedCatchUp, timeout: .seconds(30)) }
        summary.milliseconds = (ContinuousClock.now - started).milliseconds
        summary.sent = listener.sent.count
        summary.failed = listener.failed.count
        summary.caughtUp = synced.count
        summary.outboxAfter = (try? await second.pendingMessages())?.count ?? -1
        watching.cancel()

        // 4. What the server holds.
        var query = MessageQuery()
        query.scope = .group(room)
        query.limit = 100
        let page = (try? await back.messages(query))?.items ?? []
        var copies: [String: Int] = [:]
        for item in page {
            if let text = item["data"]?["text"]?.stringValue, text.hasPrefix("demo \(runId) ") { copies[text, default: 0] += 1 }
        }
        summary.serverCopies = copies.values.reduce(0, +)
        summary.duplicates = copies.values.reduce(0) { $0 + max(0, $1 - 1) }
        await second.logout()

        if json {
            emit(summary.json.render())
        } else {
            emit("summary: \(summary.queued) queued offline, \(summary.sent) sent on reconnect, \(summary.failed) failed; the server holds "
                 + "\(summary.serverCopies) (duplicates: \(summary.duplicates)); caught up \(summary.caughtUp) of \(summary.expectedCatchUp); "
                 + "outbox left: \(summary.outboxAfter)")
            emit(summary.passed ? "ok" : "FAILED")
        }
        return summary.passed ? 0 : 1
    }

    /// The password from a file (its first line) or from standard input; never an argument.
    static func readPassword(_ file: String?) throws -> String {
        let text: String?
        if let file {
            text = (try? String(contentsOfFile: file, encoding: .utf8))?.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init)
        } else {
            text = readLine(strippingNewline: true)
        }
        guard let text, !text.isEmpty else { throw CLIError.usage("no password: give --password-file F or write it to standard input") }
        return text
    }
}
