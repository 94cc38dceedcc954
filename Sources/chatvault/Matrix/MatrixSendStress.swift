import ChatVault
import ChatVaultMatrix
import Foundation
import VaultKeys

/// `chatvault matrix-send-stress --dir D --user @U:S --homeserver URL --session-file F --room R
///  [--count N] [--interval-ms M] [--max-pending P] [--overflow reject-newest|drop-oldest]
///  [--leave-queued] [--keystore …] [--key-dir K]` (hidden; for the Matrix crash tests): opens the
/// cache online over the Matrix backend (the session, access token included, read from F, a 0600
/// file the test wrote: never an argument) and makes `N` persistent text sends to room R, `M` ms
/// apart, into an outbox of `P` (default 100). Prints `ready` once the cache is open, `pending
/// <local id>` from inside each `onMessagePending` (its row is committed, unless a `refused` line
/// for it follows), the `StressReport` lines (`refused` and `failed` from the sends' `onError`;
/// `sent` and `outbox-failed` as the `OutboxListener` hears them, this run's and earlier runs'
/// alike), and `done` once the outbox is empty (at most 120 s), or with `--leave-queued` (a
/// homeserver that cannot be reached) once every send has reported pending and every refusal or
/// eviction was told. Each line is one `write(2)`. Message texts are synthetic and never printed.
enum MatrixSendStressCommand {
    static let verb = "matrix-send-stress"

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw, switches: ["json", "leave-queued"])
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let room = try args.required("room")
        let sessionFile = try args.required("session-file")
        guard let homeserver = URL(string: try args.required("homeserver")) else { throw CLIError.usage("--homeserver must be a URL") }
        let count = try args.int("count", default: 10, range: 0...OutboxLimits.maxPending)
        let interval = try args.int("interval-ms", default: 0, range: 0...10_000)
        let queue = try QueueOptions(&args)
        let leaveQueued = args.flag("leave-queued")
        try args.rejectUnknown()

        let backend = MatrixBackend(homeserver: homeserver, session: try MatrixSession(stressFile: sessionFile, user: user))
        let callbacks = DispatchQueue(label: "chatvault.matrix-stress.callbacks")
        let vault = try makeOutboxVault(common, root: root, encryption: true, backend: backend, callbacks: callbacks, queue: queue) { settings in
            settings.stableConnectionDelay = .milliseconds(20)
            settings.reconnect = RetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200))
        }
        let report = StressReport()
        vault.addOutboxListener("matrix-stress", report)
        let attempt = await vault.login(userId: user)
        guard vault.isOfflineEnabled(), vault.openCache != nil else {
            await vault.logout()
            throw CLIError.failure("the cache is \(attempt.state.outcome)")
        }
        emit("ready")
        let pending = Tally()
        for i in 0..<count {
            let message = TextMessage(receiverUid: room, text: "stress \(i)", receiverType: .group)
            vault.sendTextMessage(message: message, onMessagePending: { m in
                emit("pending \(m.localMessageId ?? "?")")
                pending.hit()
            }, onMessageSent: { _ in }, onError: { error in report.sendError(message, error) })
            if interval > 0 { try? await Task.sleep(for: .milliseconds(interval)) }
        }
        _ = await pending.wait(for: count, timeout: .seconds(30))
        var left = 0
        if !leaveQueued {
            let deadline = ContinuousClock.now + .seconds(120)
            while ContinuousClock.now < deadline {
                if let unsent = try? await vault.pendingMessages(), unsent.isEmpty { break }
                try? await Task.sleep(for: .milliseconds(50))
            }
            left = (try? await vault.pendingMessages())?.count ?? -1
        }
        await vault.waitForOutboxNotices()
        await vault.logout()
        guard left == 0 else { throw CLIError.failure("\(left) messages still unsent after 120 s") }
        emit("done")
        return 0
    }
}

extension MatrixSession {
    /// The session a stress verb runs as, read from its `--session-file` (a 0600 file holding
    /// `{"deviceId", "accessToken"}`: a token is never an argument).
    init(stressFile path: String, user: String) throws {
        guard let data = FileManager.default.contents(atPath: path), let json = try? JSONValue(jsonData: data),
              let device = json["deviceId"]?.stringValue, let token = json["accessToken"]?.stringValue else {
            throw CLIError.usage("--session-file must hold {\"deviceId\", \"accessToken\"}")
        }
        self.init(userId: user, deviceId: device, accessToken: token)
    }
}
