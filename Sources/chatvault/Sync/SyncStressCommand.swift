import ChatVault
import ChatVaultSimulator
import Foundation

/// `chatvault sync-stress --dir D --user U [--seed S] [--messages N] [--page-size P] [--establish]
/// [--keystore …] [--key-dir K]` (hidden; for the crash tests): the catch-up sync under SIGKILL.
///
/// Builds the seed's server (`SyncStressWorld`, identical on every run), opens the cache in D
/// (encrypted; the key in the chosen store, a software one for the tests), connects, and lets the
/// sweep that follows the stable connection catch up page by page (`--page-size`, default 100; a
/// bounded sweep's follow-ups go on). With `--establish` the server has no messages yet: the run
/// is a new cache's first sweep, which stores the sync point at the clock's start, so that later
/// runs have the whole history to catch up on.
///
/// Prints `ready` once the cache is open; `from <t>` as the first sweep starts (the stored sync
/// point's server time it resumes from); `synced <k>` from inside `onMessagesSynced`, that is
/// after each committed page that brought k new messages; `sweep <outcome>` as each sweep's
/// messages phase ends; `done` once a sweep has caught up. Each line is one `write(2)`. Exit 1 when
/// the cache cannot open, a sweep fails, or nothing catches up within `--timeout` seconds
/// (default 120). Message texts are synthetic and never printed.
enum SyncStressCommand {
    static let verb = "sync-stress"

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw, switches: ["json", "establish"])
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let seed = UInt64(try args.int("seed", default: 1, range: 0...Int(Int32.max)))
        let count = try args.int("messages", default: 2000, range: 0...20_000)
        let pageSize = try args.int("page-size", default: 100, range: 1...5000)
        let timeout = try args.int("timeout", default: 120, range: 1...3600)
        let establish = args.flag("establish")
        try args.rejectUnknown()

        let world = SyncStressWorld(me: user, seed: seed, messages: count)
        let simulator: ChatVaultSimulator
        do {
            simulator = establish ? try world.empty() : try world.full()
        } catch {
            throw CLIError.failure("the simulated server refused its seed: \(error)")
        }
        let clock = simulator.clock
        let callbacks = DispatchQueue(label: "chatvault.sync-stress.callbacks")
        let vault = try makeOutboxVault(common, root: root, encryption: true, backend: simulator.client(for: user),
                                        callbacks: callbacks) { settings in
            settings.clock = { clock.date }
            settings.stableConnectionDelay = .milliseconds(20)
            settings.reconnect = RetryPolicy(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(20))
            settings.sync.pageSize = pageSize
        }
        let listener = SyncStressListener()
        vault.addMessageListener("chatvault-sync-stress", listener)
        let caughtUp = Tally()
        let failed = Locked<String?>(nil)
        // Subscribed before login: the sweep starts once the connection has held.
        let events = vault.syncEvents()
        let watcher = Task {
            var first = true
            for await event in events {
                switch event {
                case .conversationSyncStarted where first:
                    first = false
                    emit("from \(vault.getLastSyncTimestamp())")
                case .messageSyncCompleted(_, let outcome): emit("sweep \(outcome == .caughtUp ? "caughtUp" : "partial")")
                case .messageSyncError(let error): emit("sweep failed \(error.errorCode)")
                case .sweepFinished(let report):
                    if report.outcome == .caughtUp {
                        caughtUp.hit()
                    } else if let error = report.messageError {
                        failed.withLock { $0 = error.errorCode }
                        caughtUp.hit()
                    }
                default: break
                }
            }
        }
        defer { watcher.cancel() }

        let attempt = await vault.login(userId: user)
        guard vault.isOfflineEnabled(), vault.openCache != nil else {
            await vault.logout()
            throw CLIError.failure("cannot stress the sync: the cache is \(attempt.state.outcome)"
                                   + (attempt.state.unavailableReason.map { " (\($0))" } ?? ""))
        }
        emit("ready")
        let finished = await caughtUp.wait(for: 1, timeout: .seconds(timeout))
        callbacks.sync {}
        // What failed before this run decided to end: a later sweep that the logout below cuts
        // off reports itself superseded (ERROR_OFFLINE_DISABLED), which is not a failure.
        let failure = failed.withLock { $0 }
        watcher.cancel()
        await vault.logout()
        if let code = failure { throw CLIError.failure("a sweep failed: \(code)") }
        guard finished else { throw CLIError.failure("the sync did not catch up within \(timeout) s") }
        emit("done")
        return 0
    }
}

/// Prints each committed page's new messages (their count, never their content).
final class SyncStressListener: CometChatMessageDelegate {
    func onMessagesSynced(_ messages: [BaseMessage]) {
        emit("synced \(messages.count)")
    }
}
