import ChatVault
import ChatVaultMatrix
import Foundation
import Synchronization
import VaultKeys

/// `chatvault matrix-catchup-stress --dir D --user @U:S --homeserver URL --session-file F
///  [--page-size P] [--timeout S] [--keystore …] [--key-dir K]` (hidden; for the Matrix crash
/// tests and `bench matrix`): the catch-up of a Matrix account under SIGKILL. Opens the cache in D
/// over the Matrix backend (the session read from F, a 0600 file: never an argument) and lets the
/// sweeps catch up, `P` changes a page (default 100). Prints `ready` once the cache is open,
/// `synced <k>` after each committed page that brought k new messages, and, once a sweep has
/// caught up, one `room <conversation id> <messages> <distinct texts>` line per conversation the
/// cache holds (read from the cache alone, pages of 100; counts, never content), then `done`.
/// Each line is one `write(2)`. Exit 1 when the cache cannot open, a sweep fails, or nothing
/// catches up within `--timeout` seconds (default 300).
enum MatrixCatchUpStressCommand {
    static let verb = "matrix-catchup-stress"

    /// The Matrix backend, its message pages switched off once the catch-up is done, so the count
    /// reads the cache alone.
    final class CacheOnlyPages: ForwardingBackend {
        let matrix: MatrixBackend
        var forwardee: any ChatBackend { matrix }
        let off = Mutex(false)

        init(_ matrix: MatrixBackend) { self.matrix = matrix }

        func messages(_ query: MessageQuery) async throws(BackendError) -> WirePage {
            if off.withLock({ $0 }) { throw .unreachable }
            return try await matrix.messages(query)
        }
    }

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw, switches: ["json"])
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let sessionFile = try args.required("session-file")
        guard let homeserver = URL(string: try args.required("homeserver")) else { throw CLIError.usage("--homeserver must be a URL") }
        let pageSize = try args.int("page-size", default: 100, range: 1...5000)
        let timeout = try args.int("timeout", default: 300, range: 1...7200)
        try args.rejectUnknown()

        let backend = CacheOnlyPages(MatrixBackend(homeserver: homeserver, session: try MatrixSession(stressFile: sessionFile, user: user)))
        let callbacks = DispatchQueue(label: "chatvault.matrix-catchup-stress.callbacks")
        let vault = try makeOutboxVault(common, root: root, encryption: true, backend: backend, callbacks: callbacks) { settings in
            settings.stableConnectionDelay = .milliseconds(20)
            settings.reconnect = RetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200))
            settings.sync.pageSize = pageSize
            settings.sync.forceCooldown = .zero
        }
        // Held here: the vault keeps its listeners weakly.
        let listener = SyncStressListener()
        vault.addMessageListener("chatvault-matrix-catchup-stress", listener)
        let caughtUp = Tally()
        let failed = Locked<String?>(nil)
        let events = vault.syncEvents()
        let watcher = Task {
            for await event in events {
                guard case .sweepFinished(let report) = event else { continue }
                if report.outcome == .caughtUp {
                    caughtUp.hit()
                } else if let error = report.messageError {
                    failed.withLock { $0 = error.errorCode }
                    caughtUp.hit()
                }
            }
        }
        defer { watcher.cancel() }
        let attempt = await vault.login(userId: user)
        guard vault.isOfflineEnabled(), vault.openCache != nil else {
            await vault.logout()
            throw CLIError.failure("the cache is \(attempt.state.outcome)")
        }
        emit("ready")
        // The sweeps after the connection holds, then as many more as it takes (a sweep is at most
        // `maxPagesPerSweep` pages, and the engine follows a partial one up only so many times).
        let deadline = ContinuousClock.now + .seconds(timeout)
        var finished = await caughtUp.wait(for: 1, timeout: .seconds(min(timeout, 10)))
        while !finished, failed.withLock({ $0 }) == nil, ContinuousClock.now < deadline {
            await vault.waitForSyncIdle()
            if let report = try? await vault.syncNow(), report.outcome == .caughtUp { finished = true }
        }
        callbacks.sync {}
        if let code = failed.withLock({ $0 }) {
            await vault.logout()
            throw CLIError.failure("a sweep failed: \(code)")
        }
        guard finished else {
            await vault.logout()
            throw CLIError.failure("the sync did not catch up within \(timeout) s")
        }
        backend.off.withLock { $0 = true }
        let conversations = (try? vault.openCache?.reader.sync { db -> [String] in
            let stmt = try db.prepare("SELECT DISTINCT conversation_id FROM messages ORDER BY conversation_id")
            var out: [String] = []
            while try stmt.step() { if let id = stmt.text(0) { out.append(id) } }
            return out
        }).flatMap { $0 } ?? []
        for id in conversations where id.hasPrefix("group_") {
            let request = MessagesRequest.MessageRequestBuilder(vault: vault).set(guid: String(id.dropFirst("group_".count))).set(limit: 100).build()
            var count = 0
            var texts = Set<String>()
            for _ in 0..<1000 {
                guard let page = await request.fetchPrevious().cached, !page.isEmpty else { break }
                count += page.count
                for m in page { if let text = (m as? TextMessage)?.text { texts.insert(text) } }
            }
            emit("room \(id) \(count) \(texts.count)")
        }
        watcher.cancel()
        await vault.logout()
        withExtendedLifetime(listener) {}
        emit("done")
        return 0
    }
}
