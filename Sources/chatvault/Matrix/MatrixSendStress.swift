import ChatVault
import ChatVaultMatrix
import Foundation
import VaultKeys

/// `chatvault matrix-send-stress --dir D --user @U:S --homeserver URL --session-file F --room R
///  [--count N] [--interval-ms M] [--keystore …] [--key-dir K]` (hidden; for the Matrix crash
/// test): opens the cache online over the Matrix backend (the session, access token included, read
/// from F, a 0600 file the test wrote: never an argument) and makes `N` persistent text sends to
/// room R, `M` ms apart. Prints `ready` once the cache is open, `pending <local id>` from inside each
/// `onMessagePending` (its row is committed), `sent <local id>` as the outbox reports each one
/// sent (this run's and earlier runs' leftovers alike), and `done` once the outbox is empty
/// (at most 120 s). Each line is one `write(2)`. Message texts are synthetic and never printed.
enum MatrixSendStressCommand {
    static let verb = "matrix-send-stress"

    final class Listener: OutboxListener {
        let sent = Tally()
        func onOutboxMessageSent(_ message: BaseMessage) {
            emit("sent \(message.localMessageId ?? "?")")
            sent.hit()
        }
    }

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let room = try args.required("room")
        let sessionFile = try args.required("session-file")
        guard let homeserver = URL(string: try args.required("homeserver")) else { throw CLIError.usage("--homeserver must be a URL") }
        let count = try args.int("count", default: 10, range: 0...OutboxLimits.maxPending)
        let interval = try args.int("interval-ms", default: 0, range: 0...10_000)
        try args.rejectUnknown()

        guard let data = FileManager.default.contents(atPath: sessionFile), let json = try? JSONValue(jsonData: data),
              let device = json["deviceId"]?.stringValue, let token = json["accessToken"]?.stringValue else {
            throw CLIError.usage("--session-file must hold {\"deviceId\", \"accessToken\"}")
        }
        let backend = MatrixBackend(homeserver: homeserver, session: MatrixSession(userId: user, deviceId: device, accessToken: token))
        let callbacks = DispatchQueue(label: "chatvault.matrix-stress.callbacks")
        let vault = try makeOutboxVault(common, root: root, encryption: true, backend: backend, callbacks: callbacks) { settings in
            settings.stableConnectionDelay = .milliseconds(20)
            settings.reconnect = RetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200))
        }
        let listener = Listener()
        vault.addOutboxListener("matrix-stress", listener)
        let attempt = await vault.login(userId: user)
        guard vault.isOfflineEnabled(), vault.openCache != nil else {
            await vault.logout()
            throw CLIError.failure("the cache is \(attempt.state.outcome)")
        }
        emit("ready")
        let pending = Tally()
        for i in 0..<count {
            vault.sendTextMessage(message: TextMessage(receiverUid: room, text: "stress \(i)", receiverType: .group), onMessagePending: { m in
                emit("pending \(m.localMessageId ?? "?")")
                pending.hit()
            }, onMessageSent: { _ in }, onError: { _ in })
            if interval > 0 { try? await Task.sleep(for: .milliseconds(interval)) }
        }
        _ = await pending.wait(for: count, timeout: .seconds(30))
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if let left = try? await vault.pendingMessages(), left.isEmpty { break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        let left = (try? await vault.pendingMessages())?.count ?? -1
        await vault.logout()
        guard left == 0 else { throw CLIError.failure("\(left) messages still unsent after 120 s") }
        emit("done")
        return 0
    }
}
