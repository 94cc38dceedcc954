import ChatVault
import Foundation
import VaultKeys

/// `chatvault outbox-stress --dir D --user U [--count N] [--interval-ms M] [--max-pending P]
///  [--overflow reject-newest|drop-oldest] [--keystore …] [--key-dir K]` (hidden; for the crash
/// tests): opens the cache with no server (always offline) and makes `N` persistent text sends
/// (default 100, at most 100, the outbox's largest queue), `M` ms apart (default 0: back to back),
/// into an outbox of `P` (default 100). Prints `ready` once the cache is open, then each message's
/// local id, one per line, from inside its `onMessagePending`, that is once its row is committed
/// (or, for a send the full outbox refuses, once its refusal is); beside them the `StressReport`
/// lines: `refused` and `failed` from the sends' `onError`, `outbox-failed` from an `OutboxListener`
/// registered before the login (so it also hears the notices a killed run owed). Then `done` when
/// every send has reported pending and every notice was delivered. Each line is one `write(2)` to
/// stdout (FileHandle does no buffering), so a line printed before a SIGKILL is on its way to the
/// reader. With `CHATVAULT_OUTBOX_CRASH_AT` set (`OutboxCrashPoint`) the process exits with status
/// 99 at that moment. Exit 1 when the cache cannot open or a send fails other than by the queue's
/// limits (a refusal, an eviction). Message texts are synthetic and never printed.
enum OutboxStressCommand {
    static let verb = "outbox-stress"

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let count = try args.int("count", default: OutboxLimits.maxPending, range: 0...OutboxLimits.maxPending)
        let interval = try args.int("interval-ms", default: 0, range: 0...10_000)
        let queue = try QueueOptions(&args)
        try args.rejectUnknown()

        let callbacks = DispatchQueue(label: "chatvault.stress.callbacks")
        let vault = try makeOutboxVault(common, root: root, encryption: true, callbacks: callbacks, queue: queue)
        try OutboxCrashPoint.install(on: vault)
        let report = StressReport()
        vault.addOutboxListener("outbox-stress", report)
        let attempt = await vault.login(userId: user)
        guard vault.isOfflineEnabled(), vault.openCache != nil else {
            await vault.logout()
            throw CLIError.failure("cannot stress the outbox: the cache is \(attempt.state.outcome)"
                                   + (attempt.state.unavailableReason.map { " (\($0))" } ?? ""))
        }
        emit("ready")
        let pending = Tally()
        for i in 0..<count {
            let message = TextMessage(receiverUid: "stress-peer", text: "stress message \(i)", receiverType: .user)
            vault.sendTextMessage(message: message, onMessagePending: { sent in
                emit(sent.localMessageId ?? "?")
                pending.hit()
            }, onMessageSent: { _ in }, onError: { error in report.sendError(message, error) })
            if interval > 0 { try? await Task.sleep(for: .milliseconds(interval)) }
        }
        let allPending = await pending.wait(for: count)
        await vault.waitForOutboxNotices()
        await vault.logout()
        guard allPending, report.unexpected.count == 0 else {
            throw CLIError.failure("\(pending.count) of \(count) sends reported pending; \(report.unexpected.count) failed")
        }
        emit("done")
        return 0
    }
}
