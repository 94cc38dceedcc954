import ChatVault
import Foundation
import VaultKeys

/// `chatvault outbox-stress --dir D --user U [--count N] [--interval-ms M] [--keystore …] [--key-dir K]`
/// (hidden; for the crash tests): opens the cache with no server (always offline) and makes `N`
/// persistent text sends (default 100, at most 100, the outbox's largest queue), `M` ms apart
/// (default 0: back to back). Prints `ready` once the cache is open, then each message's local id,
/// one per line, from inside its `onMessagePending`, that is once its row is committed; then `done`
/// when every send has reported pending. Each line is one `write(2)` to stdout (FileHandle does no
/// buffering), so a line printed before a SIGKILL is on its way to the reader. Exit 1 when the
/// cache cannot open or a send is not queued. Message texts are synthetic and never printed.
enum OutboxStressCommand {
    static let verb = "outbox-stress"

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let count = try args.int("count", default: OutboxLimits.maxPending, range: 0...OutboxLimits.maxPending)
        let interval = try args.int("interval-ms", default: 0, range: 0...10_000)
        try args.rejectUnknown()

        let callbacks = DispatchQueue(label: "chatvault.stress.callbacks")
        let vault = try makeOutboxVault(common, root: root, encryption: true, callbacks: callbacks)
        let attempt = await vault.login(userId: user)
        guard vault.isOfflineEnabled(), vault.openCache != nil else {
            await vault.logout()
            throw CLIError.failure("cannot stress the outbox: the cache is \(attempt.state.outcome)"
                                   + (attempt.state.unavailableReason.map { " (\($0))" } ?? ""))
        }
        emit("ready")
        let pending = Tally()
        let failures = Tally()
        for i in 0..<count {
            let message = TextMessage(receiverUid: "stress-peer", text: "stress message \(i)", receiverType: .user)
            vault.sendTextMessage(message: message, onMessagePending: { sent in
                emit(sent.localMessageId ?? "?")
                pending.hit()
            }, onMessageSent: { _ in }, onError: { error in
                // Offline, the only expected notice is "queued, not failed".
                if error?.code != .internetUnavailable { failures.hit() }
            })
            if interval > 0 { try? await Task.sleep(for: .milliseconds(interval)) }
        }
        let allPending = await pending.wait(for: count)
        await vault.logout()
        guard allPending, failures.count == 0 else {
            throw CLIError.failure("\(pending.count) of \(count) sends reported pending; \(failures.count) failed")
        }
        emit("done")
        return 0
    }
}
