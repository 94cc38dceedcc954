import ChatVault
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore
import XCTest

/// The outbox's durability promise under a real crash: `onMessagePending` fires only after the
/// message's row is committed, so every local id `chatvault outbox-stress` printed from inside it
/// before a SIGKILL must be in the outbox afterwards, and the cache must open cleanly (no reset).
///
/// 25 rounds; each kills the stress process at a seeded random moment between 20 and 300 ms after
/// it starts, which lands before the cache is open, while sends are being committed, or after the
/// last. The key lives in a software key store in a temporary directory (no keyring involved), so
/// the child process and this one share it.
final class OutboxCrashTests: XCTestCase {
    let app = "org.chatvault.clitests.crash"
    let user = "crash-user"
    static let rounds = 25
    static let seed: UInt64 = 0x0b0c_5eed

    func testEveryLocalIdPrintedBeforeASigkillIsInTheOutboxAndTheCacheOpensCleanly() async throws {
        let root = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let keyDirectory = "\(keys.path)/keys"
        let options = ["--dir", root.path, "--user", user, "--app", app, "--keystore", "file", "--key-dir", keyDirectory]

        // The cache exists before the first kill (creating it is not what is under test).
        let create = try CLI.run(["outbox-stress"] + options + ["--count", "0"])
        XCTAssertEqual(create.status, 0, create.stderr)
        let cacheId = try await verify(root: root.path, keyDirectory: keyDirectory, printed: [], round: 0)

        var random = SeededGenerator(seed: Self.seed)
        var killedWhileSending = 0
        var killedBeforeReady = 0
        var finished = 0
        var checked = 0
        for round in 1...Self.rounds {
            let delay = 20 + Int(random.next() % 281)
            // Sends waiting together are committed together, so back to back they all land in a few
            // milliseconds; spaced 2 ms apart they span the kill window.
            let run = try KilledRun.start([CLI.binary, "outbox-stress"] + options + ["--count", "100", "--interval-ms", "2"],
                                          killAfter: .milliseconds(delay))
            let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
            let ids = lines.filter { $0 != "ready" && $0 != "done" }
            if lines.contains("done") {
                finished += 1
            } else if lines.contains("ready") {
                killedWhileSending += 1
            } else {
                killedBeforeReady += 1
            }
            XCTAssertTrue(run.killed || run.status == 0, "round \(round): exit \(run.status): \(run.stderr)")
            XCTAssertEqual(Set(ids).count, ids.count, "round \(round): a local id printed twice")
            checked += ids.count
            let reopened = try await verify(root: root.path, keyDirectory: keyDirectory, printed: ids, round: round)
            XCTAssertEqual(reopened, cacheId, "round \(round): the cache was replaced")
            // Through the CLI too, now and then (it must list exactly what the engine sees).
            if round % 8 == 0 {
                let listing = try CLI.run(["outbox"] + options + ["--json"])
                XCTAssertEqual(listing.status, 0, listing.stderr)
                XCTAssertEqual((try listing.json()["resets"] as? [Any])?.count, 0)
                XCTAssertEqual(try listing.json()["count"] as? Int, 0, "round \(round): the verification discards everything")
            }
        }
        // The kills must have landed where it matters, not only before or after the sends.
        XCTAssertGreaterThan(killedWhileSending, 0, "no kill landed while sends were being committed")
        print("OutboxCrashTests: \(Self.rounds) rounds: \(killedWhileSending) killed while sending, \(killedBeforeReady) before the cache was open, "
              + "\(finished) finished first; \(checked) printed local ids found in the outbox")
    }

    // MARK: - Notices a kill can cut off

    /// `.rejectNewest`, an outbox of 2, three sends: the third is refused. The process dies between
    /// its `onMessagePending` and its `onError` (`CHATVAULT_OUTBOX_CRASH_AT=refusal`); the next
    /// start's `OutboxListener` hears the refusal once, the one after that nothing.
    func testARefusalAKillCutOffIsHeardOnceAtTheNextStart() throws {
        let run = try killedAtNotice("refusal", overflow: "reject-newest")
        XCTAssertEqual(run.printed.count, 3, "each send reported pending, the refused one too")
        XCTAssertEqual(run.heard, ["outbox-failed \(run.printed[2]) queueFull"])
        XCTAssertEqual(run.left, Array(run.printed.prefix(2)), "what was queued stays queued")
    }

    /// `.dropOldest`, an outbox of 2, three sends: the third evicts the oldest pending one. The
    /// process dies once the eviction has committed, before `onOutboxMessageFailed(.queueOverflow)`
    /// (`CHATVAULT_OUTBOX_CRASH_AT=eviction`); the next start hears it once, the one after nothing.
    func testAnEvictionAKillCutOffIsHeardOnceAtTheNextStart() throws {
        let run = try killedAtNotice("eviction", overflow: "drop-oldest")
        XCTAssertEqual(run.printed.count, 3)
        let evicted = try XCTUnwrap(run.heard.first.map { String($0.split(separator: " ")[1]) })
        XCTAssertEqual(run.heard, ["outbox-failed \(evicted) queueOverflow"])
        XCTAssertTrue(run.printed.prefix(2).contains(evicted), "one of the two queued first was evicted")
        XCTAssertEqual(run.left, run.printed.filter { $0 != evicted }, "the evicted message is gone, nothing else")
    }

    /// Runs `outbox-stress` into an outbox of 2 with three sends and the crash point `point`, then
    /// two plain starts. Returns the local ids the killed run printed, what the first start heard
    /// (`outbox-failed` lines: the second must hear none) and what is left in the outbox.
    private func killedAtNotice(_ point: String, overflow: String) throws -> (printed: [String], heard: [String], left: [String]) {
        let root = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let options = ["--dir", root.path, "--user", user, "--app", app, "--keystore", "file", "--key-dir", "\(keys.path)/keys"]
        let queue = ["--max-pending", "2", "--overflow", overflow]
        let killed = try CLI.run(["outbox-stress"] + options + queue + ["--count", "3"], environment: ["CHATVAULT_OUTBOX_CRASH_AT": point])
        XCTAssertEqual(killed.status, 99, "the process stopped at its crash point: \(killed.stdout) \(killed.stderr)")
        let lines = killed.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.filter { $0.contains(" ") || $0 == "done" }, [], "killed before any failure was told")
        let printed = lines.filter { $0 != "ready" && !$0.contains(" ") }

        var heard: [[String]] = []
        for start in 1...2 {
            let next = try CLI.run(["outbox-stress"] + options + queue + ["--count", "0"])
            XCTAssertEqual(next.status, 0, "start \(start): \(next.stderr)")
            XCTAssertTrue(next.stdout.contains("done"), "start \(start)")
            heard.append(next.stdout.split(separator: "\n").map(String.init).filter { $0.hasPrefix("outbox-failed ") })
        }
        XCTAssertEqual(heard[1], [], "told once: the start after it hears nothing")
        let listing = try CLI.run(["outbox"] + options + ["--json"])
        XCTAssertEqual(listing.status, 0, listing.stderr)
        let left = (try listing.json()["messages"] as? [[String: Any]])?.compactMap { $0["localId"] as? String } ?? []
        return (printed, heard[0], left)
    }

    /// Opens the cache in this process: it must be ready with no reset, and hold every printed id as
    /// a pending message. Empties the outbox (the queue holds at most 100) and returns the cache id.
    private func verify(root: String, keyDirectory: String, printed: [String], round: Int) async throws -> String {
        let settings = VaultSettings(applicationId: app, rootDirectory: root, keyStorage: [.software(directory: keyDirectory)],
                                     callbackExecutor: .queue(DispatchQueue(label: "crash-tests")))
        let vault = try OfflineVault(config: OfflineConfig.Builder().setEnabled(true).setEncryption(true).setMaxPendingMessages(100).build(),
                                     settings: settings)
        let resets = ResetCalls()
        vault.addOfflineCacheResetListener("crash-tests", resets)
        let attempt = await vault.login(userId: user)
        XCTAssertEqual(attempt.state, .ready, "round \(round): \(attempt.notes)")
        XCTAssertEqual(resets.count, 0, "round \(round): the cache was reset")
        XCTAssertEqual(attempt.resets.count, 0, "round \(round): the cache was reset")
        let pending = try await vault.pendingMessages()
        let present = Set(pending.compactMap(\.localMessageId))
        let missing = printed.filter { !present.contains($0) }
        XCTAssertEqual(missing, [], "round \(round): \(missing.count) of \(printed.count) ids reported pending are not in the outbox")
        XCTAssertTrue(pending.allSatisfy { $0.messageStatus == .pending }, "round \(round)")
        for message in pending {
            try await vault.discard(try XCTUnwrap(message.localMessageId))
        }
        let cacheId = try XCTUnwrap(attempt.cacheId)
        await vault.logout()
        return cacheId
    }
}

/// Counts reset-listener calls.
final class ResetCalls: OfflineCacheResetListener, @unchecked Sendable {
    private let lock = NSLock()
    private var calls = 0

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return calls
    }

    func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) {
        lock.lock()
        calls += 1
        lock.unlock()
    }
}

