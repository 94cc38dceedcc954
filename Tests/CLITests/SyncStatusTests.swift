import ChatVault
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore
import XCTest
@testable import chatvault

/// `chatvault status` reports the catch-up sync's bookkeeping: the sync point's time and age, the
/// last attempt and outcome (with the error code only), whether a token is stored — never the
/// token, never message content. The syncs are driven in this process through the library, on the
/// same cache directory with a software key store, before the CLI runs.
final class SyncStatusTests: XCTestCase {
    let app = "org.chatvault.clitests.syncstatus"
    let me = "status-alice"
    let peer = "status-bob"
    static let secretText = "STATUS-SECRET-TEXT"

    func testAFreshCacheHasNeverSynced() async throws {
        let root = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let simulator = ChatVaultSimulator(seed: 3, clock: SimulatedClock(start: Date().timeIntervalSince1970.rounded(.down)))
        try simulator.addUsers(me, peer)
        // A cache opened without any server: no sweep ever runs.
        let vault = try makeVault(root: root.path, keys: keys.path, backend: UnreachableBackend(), clock: simulator.clock)
        let attempt = await vault.login(userId: me)
        XCTAssertEqual(attempt.state, .ready, "\(attempt.notes)")
        await vault.logout()

        let run = try status(root: root.path, keys: keys.path, json: true)
        XCTAssertEqual(run.status, 0, run.stderr)
        let sync = try XCTUnwrap(try run.json()["sync"] as? [String: Any], run.stdout)
        XCTAssertEqual(sync["available"] as? Bool, true, run.stdout)
        XCTAssertEqual(sync["lastSync"] as? String, "never")
        XCTAssertEqual(sync["lastSyncAt"] as? Int, 0)
        XCTAssertTrue(sync["lastSyncAgeSeconds"] is NSNull)
        XCTAssertEqual(sync["lastAttempt"] as? String, "never")
        XCTAssertTrue(sync["lastOutcome"] is NSNull)
        XCTAssertTrue(sync["lastErrorCode"] is NSNull)
        XCTAssertEqual(sync["syncPointStored"] as? Bool, false)

        let text = try status(root: root.path, keys: keys.path, json: false)
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertTrue(text.stdout.contains("sync: last synced never; last attempt never; last outcome none; sync point stored: no"),
                      text.stdout)
    }

    func testAfterSyncsItShowsTheOutcomeAndAgeButNoTokenAndNoText() async throws {
        // The server's clock is this machine's, so the sync point's age is a few seconds.
        let (root, keys, simulator, device, vault) = try await loggedIn(secondsAgo: 120)
        let clock = simulator.clock
        // 1. The first sweep stores the sync point; 2. messages arrive; 3. the sweep catches up.
        let first = try await sync(vault)
        XCTAssertTrue(first.establishedSyncPoint)
        // Offline while they arrive (no realtime delivery): the sweep is what brings them.
        device.network = .offline
        for i in 0..<5 {
            clock.advance(by: 10)
            try simulator.postText("\(Self.secretText) \(i)", from: peer, to: .user(me))
        }
        clock.advance(by: 10)
        device.network = .online
        let second = try await sync(vault)
        XCTAssertEqual(second.outcome, .caughtUp)
        XCTAssertEqual(second.newMessageCount, 5)
        let syncedTo = Int(clock.seconds)
        let token = try XCTUnwrap(try vault.openCache?.reader.sync { db in try SyncStateRows.load(in: db).token })
        await vault.logout()

        let run = try status(root: root.path, keys: keys.path, json: true)
        XCTAssertEqual(run.status, 0, run.stderr)
        let sync = try XCTUnwrap(try run.json()["sync"] as? [String: Any], run.stdout)
        XCTAssertEqual(sync["available"] as? Bool, true, run.stdout)
        XCTAssertEqual(sync["lastOutcome"] as? String, "caughtUp")
        XCTAssertTrue(sync["lastErrorCode"] is NSNull)
        XCTAssertEqual(sync["syncPointStored"] as? Bool, true)
        XCTAssertEqual(sync["lastSyncAt"] as? Int, syncedTo)
        XCTAssertNotEqual(sync["lastSync"] as? String, "never")
        let age = try XCTUnwrap(sync["lastSyncAgeSeconds"] as? Int, run.stdout)
        XCTAssertGreaterThanOrEqual(age, 0)
        XCTAssertLessThan(age, 600)
        XCTAssertGreaterThan(sync["lastAttemptAt"] as? Int ?? 0, 0)

        let text = try status(root: root.path, keys: keys.path, json: false)
        XCTAssertEqual(text.status, 0, text.stderr)
        let line = try XCTUnwrap(text.stdout.split(separator: "\n").first { $0.hasPrefix("sync: ") }, text.stdout)
        XCTAssertTrue(line.contains("s ago"), String(line))
        XCTAssertTrue(line.contains("last outcome caughtUp"), String(line))
        XCTAssertTrue(line.contains("sync point stored: yes"), String(line))
        for output in [run, text] {
            XCTAssertFalse(output.stdout.contains(token), "the sync token was printed")
            XCTAssertFalse(output.stdout.contains(Self.secretText), "message text was printed")
            XCTAssertFalse(output.stderr.contains(token) || output.stderr.contains(Self.secretText))
        }
    }

    func testAFailedSweepShowsItsErrorCodeOnly() async throws {
        let (root, keys, simulator, device, vault) = try await loggedIn(secondsAgo: 0)
        let clock = simulator.clock
        let established = try await sync(vault)
        XCTAssertTrue(established.establishedSyncPoint)
        clock.advance(by: 10)
        device.failNext(.changes, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
        let failed = try await sync(vault)
        XCTAssertNil(failed.outcome)
        let code = try XCTUnwrap(failed.messageError?.errorCode)
        await vault.logout()

        let run = try status(root: root.path, keys: keys.path, json: true)
        XCTAssertEqual(run.status, 0, run.stderr)
        let sync = try XCTUnwrap(try run.json()["sync"] as? [String: Any], run.stdout)
        XCTAssertEqual(sync["lastOutcome"] as? String, "failed")
        XCTAssertEqual(sync["lastErrorCode"] as? String, code)
        XCTAssertEqual(sync["syncPointStored"] as? Bool, true)
        let text = try status(root: root.path, keys: keys.path, json: false)
        XCTAssertTrue(text.stdout.contains("last outcome failed (\(code))"), text.stdout)
    }

    func testAfterACrashItLeavesThePendingWriteAheadLogAlone() throws {
        let root = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let options = ["--dir", root.path, "--user", me, "--app", app, "--keystore", "file", "--key-dir", "\(keys.path)/keys",
                       "--seed", "9", "--messages", "3000", "--page-size", "20"]
        let establish = try CLI.run(["sync-stress"] + options + ["--establish"])
        XCTAssertEqual(establish.status, 0, establish.stderr)
        // Killed while it catches up: its write-ahead log is left behind, not yet folded in.
        let run = try KilledRun.start([CLI.binary, "sync-stress"] + options, killAfter: .milliseconds(0), once: "synced ")
        XCTAssertTrue(run.killed, "the catch-up finished before the kill: \(run.stdout.suffix(200))")
        let account = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: root.path).first)
        let database = "\(root.path)/\(account)/cache.db"
        let walBytes = (try? FileManager.default.attributesOfItem(atPath: database + "-wal")[.size] as? Int) ?? 0
        XCTAssertGreaterThan(walBytes, 0, "no write-ahead log was left behind")
        func contents() -> [Data?] { ["", "-wal", "-shm"].map { FileManager.default.contents(atPath: database + $0) } }
        let before = contents()

        let audit = try status(root: root.path, keys: keys.path, json: true)
        XCTAssertEqual(audit.status, 0, audit.stderr)
        let sync = try XCTUnwrap(try audit.json()["sync"] as? [String: Any], audit.stdout)
        XCTAssertEqual(sync["available"] as? Bool, false, audit.stdout)
        XCTAssertTrue((sync["detail"] as? String ?? "").contains("write-ahead log"), audit.stdout)
        XCTAssertEqual(contents(), before, "status changed the cache's files")

        // Once an open has folded the log in, the row reads (the sweep had stored a later point).
        XCTAssertEqual(try CLI.run(["open", "--dir", root.path, "--user", me, "--app", app, "--keystore", "file",
                                    "--key-dir", "\(keys.path)/keys"]).status, 0)
        let after = try XCTUnwrap(try status(root: root.path, keys: keys.path, json: true).json()["sync"] as? [String: Any])
        XCTAssertEqual(after["available"] as? Bool, true)
        XCTAssertGreaterThanOrEqual(after["lastSyncAt"] as? Int ?? 0, Int(SyncStressWorld.start))
    }

    // MARK: - Helpers

    /// `syncNow`, right after login: the engine knows the cache before `login` returns, so the
    /// sweep is never cut off as superseded.
    private func sync(_ vault: OfflineVault) async throws -> SyncReport {
        let report = try await vault.syncNow()
        XCTAssertNotEqual(report.messageError?.code, .offlineDisabled, "a sweep right after login is not superseded")
        return report
    }

    /// A vault logged in over a simulator whose clock started `secondsAgo` before this machine's.
    private func loggedIn(secondsAgo: Double) async throws
        -> (root: TemporaryDirectory, keys: TemporaryDirectory, simulator: ChatVaultSimulator, device: SimulatedClient, vault: OfflineVault) {
        let root = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let clock = SimulatedClock(start: Date().timeIntervalSince1970.rounded(.down) - secondsAgo)
        let simulator = ChatVaultSimulator(seed: 3, clock: clock)
        try simulator.addUsers(me, peer)
        let device = simulator.client(for: me)
        let vault = try makeVault(root: root.path, keys: keys.path, backend: device, clock: clock)
        let attempt = await vault.login(userId: me)
        XCTAssertEqual(attempt.state, .ready, "\(attempt.notes)")
        return (root, keys, simulator, device, vault)
    }

    private func makeVault(root: String, keys: String, backend: any ChatBackend, clock: SimulatedClock) throws -> OfflineVault {
        var settings = VaultSettings(applicationId: app, rootDirectory: root, keyStorage: [.software(directory: "\(keys)/keys")],
                                     callbackExecutor: .queue(DispatchQueue(label: "sync-status-tests")))
        settings.clock = { clock.date }
        // No automatic sweep after the connection holds: the test drives each one with syncNow.
        settings.stableConnectionDelay = .seconds(3600)
        settings.sync.forceCooldown = .zero
        return try OfflineVault(config: OfflineConfig.Builder().setEnabled(true).setEncryption(true).build(), settings: settings,
                                backend: backend)
    }

    private func status(root: String, keys: String, json: Bool) throws -> CLI.Run {
        try CLI.run(["status", "--dir", root, "--app", app, "--keystore", "file", "--key-dir", "\(keys)/keys"] + (json ? ["--json"] : []))
    }
}
