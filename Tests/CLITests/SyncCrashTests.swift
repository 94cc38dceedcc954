import ChatVault
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore
import XCTest
@testable import chatvault

/// The catch-up sync's atomicity promise under a real crash: each page of the change log is
/// written in one transaction with the sync point it reaches, so a SIGKILL at any instant leaves
/// rows and sync point in agreement, and the next run resumes from the stored point with no gap
/// and no duplicate.
///
/// `chatvault sync-stress` rebuilds the same seeded server on every run (`SyncStressWorld`: 5000
/// messages in 50 conversations, with edits and deletions) and catches up 20 changes a page. An
/// establishing run first stores a sync point from before the history. Then 30 rounds each kill the
/// child at a seeded random instant 0–150 ms after it printed `ready` (the cache is open; the sweep
/// starts once the connection has held 20 ms: the kill lands before a page, between pages, or
/// inside one). Each run must say it started from the sync point the previous run left stored;
/// after each, the cache is opened in this process: it must open with no reset, hold every message
/// the child printed as synced, and agree with the server's truth up to its stored sync point and
/// hold nothing past it. A last run finishes, and the cache must then
/// equal the truth row for row. The key lives in a software key store in a temporary directory.
final class SyncCrashTests: XCTestCase {
    let app = "org.chatvault.clitests.synccrash"
    let user = "sync-crash-user"
    static let rounds = 30
    static let seed: UInt64 = 0x5c_5eed
    static let messages = 5000

    /// One message as the server has it (for `user`) or as the cache holds it.
    struct Row: Equatable, CustomStringConvertible {
        var id: Int
        var sentAt: Int
        var text: String?
        var editedAt: Double
        var deletedAt: Double

        var description: String { "#\(id) sent \(sentAt) edited \(editedAt) deleted \(deletedAt)" }
    }

    func testTheCatchUpResumesAfterEverySigkillWithNoGapAndNoDuplicate() async throws {
        let root = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let keyDirectory = "\(keys.path)/keys"
        let options = ["--dir", root.path, "--user", user, "--app", app, "--keystore", "file", "--key-dir", keyDirectory,
                       "--seed", String(Self.seed), "--messages", String(Self.messages), "--page-size", "20"]
        let truth = try Self.truth(for: SyncStressWorld(me: user, seed: Self.seed, messages: Self.messages))
        XCTAssertEqual(truth.count, Self.messages)
        XCTAssertGreaterThan(truth.values.filter { $0.editedAt > 0 }.count, 100, "the history must hold edits")
        XCTAssertGreaterThan(truth.values.filter { $0.deletedAt > 0 }.count, 50, "the history must hold deletions")

        // The sync point is stored before the history exists (that first sweep is not under test).
        let establish = try CLI.run(["sync-stress"] + options + ["--establish"])
        XCTAssertEqual(establish.status, 0, establish.stderr)
        let first = try await verify(root: root.path, keyDirectory: keyDirectory, truth: truth, printed: 0, round: 0)
        XCTAssertEqual(first.syncedTo, Int64(SyncStressWorld.start), "the establishing sweep stores the clock's start")
        XCTAssertEqual(first.rows, 0)

        var random = SeededGenerator(seed: Self.seed)
        var printed = 0
        var killedMidSweep = 0
        var killedBeforeAPage = 0
        var finished = 0
        var resumptions = 0
        var lastSyncedTo = first.syncedTo
        for round in 1...Self.rounds {
            let delay = Int(random.next() % 151)
            let run = try KilledRun.start([CLI.binary, "sync-stress"] + options, killAfter: .milliseconds(delay), once: "ready")
            let lines = run.stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
            let synced = lines.compactMap { line -> Int? in line.hasPrefix("synced ") ? Int(line.dropFirst(7)) : nil }
            printed += synced.reduce(0, +)
            if lines.contains("done") {
                finished += 1
            } else if synced.isEmpty {
                killedBeforeAPage += 1
            } else {
                killedMidSweep += 1
            }
            XCTAssertTrue(run.killed || run.status == 0, "round \(round): exit \(run.status): \(run.stderr)")
            // The run resumed from the point the previous one had stored (not from the start).
            if let from = Self.resumedFrom(lines) {
                resumptions += 1
                XCTAssertEqual(from, lastSyncedTo, "round \(round): the sweep did not start from the stored sync point")
            }
            let state = try await verify(root: root.path, keyDirectory: keyDirectory, truth: truth, printed: printed, round: round)
            XCTAssertEqual(state.cacheId, first.cacheId, "round \(round): the cache was replaced")
            XCTAssertGreaterThanOrEqual(state.syncedTo, lastSyncedTo, "round \(round): the sync point went back")
            lastSyncedTo = state.syncedTo
        }

        // The last run is left to finish.
        let last = try CLI.run(["sync-stress"] + options)
        XCTAssertEqual(last.status, 0, last.stderr)
        XCTAssertEqual(Self.resumedFrom(last.stdout.split(separator: "\n").map(String.init)), lastSyncedTo)
        XCTAssertEqual(last.stdout.split(separator: "\n").last, "done")
        printed += last.stdout.split(separator: "\n").compactMap { $0.hasPrefix("synced ") ? Int($0.dropFirst(7)) : nil }.reduce(0, +)
        let end = try await verify(root: root.path, keyDirectory: keyDirectory, truth: truth, printed: printed, round: Self.rounds + 1,
                                   complete: true)
        XCTAssertEqual(end.rows, Self.messages)
        // Every message reached onMessagesSynced at most once (a duplicate insert would count twice).
        XCTAssertLessThanOrEqual(printed, Self.messages, "more new messages reported than exist")
        XCTAssertGreaterThan(killedMidSweep, 3, "too few kills landed while pages were being committed")
        XCTAssertGreaterThan(resumptions, Self.rounds / 2, "too few runs said where they resumed")
        print("SyncCrashTests: \(Self.rounds) rounds: \(killedMidSweep) killed mid-sweep, \(killedBeforeAPage) before a page, "
              + "\(finished) finished first; \(resumptions) resumed from the stored point; \(printed) synced messages printed; sync point reached \(end.syncedTo)")
    }

    /// The sync point a run said its first sweep started from (`from <t>`).
    static func resumedFrom(_ lines: [String]) -> Int64? {
        lines.first { $0.hasPrefix("from ") }.flatMap { Int64($0.dropFirst(5)) }
    }

    /// The server's truth for the world's user: every message of its 50 conversations.
    static func truth(for world: SyncStressWorld) throws -> [Int: Row] {
        let simulator = try world.full()
        var rows: [Int: Row] = [:]
        for conversation in world.conversationIds {
            for id in simulator.messageIds(in: conversation) {
                let json = try XCTUnwrap(simulator.messageJSON(id, as: world.me))
                rows[id] = Row(id: id, sentAt: Int(json["sentAt"]?.intValue ?? -1), text: json["data"]?["text"]?.stringValue,
                               editedAt: json["editedAt"]?.doubleValue ?? 0, deletedAt: json["deletedAt"]?.doubleValue ?? 0)
            }
        }
        return rows
    }

    struct CacheState {
        var cacheId: String
        var syncedTo: Int64
        var rows: Int
    }

    /// Opens the cache in this process (no server: nothing syncs): it must be ready with no reset,
    /// hold at least the `printed` messages the child reported committed, and agree with the truth
    /// up to its sync point: every message sent by then is cached, every edit and deletion made
    /// by then is applied, and nothing later is cached (rows and sync point were committed
    /// together). `complete`: the cache must equal the truth.
    private func verify(root: String, keyDirectory: String, truth: [Int: Row], printed: Int, round: Int,
                        complete: Bool = false) async throws -> CacheState {
        let settings = VaultSettings(applicationId: app, rootDirectory: root, keyStorage: [.software(directory: keyDirectory)],
                                     callbackExecutor: .queue(DispatchQueue(label: "sync-crash-tests")))
        let vault = try OfflineVault(config: OfflineConfig.Builder().setEnabled(true).setEncryption(true).build(), settings: settings)
        let resets = ResetCalls()
        vault.addOfflineCacheResetListener("sync-crash-tests", resets)
        let attempt = await vault.login(userId: user)
        XCTAssertEqual(attempt.state, .ready, "round \(round): \(attempt.notes)")
        XCTAssertEqual(resets.count, 0, "round \(round): the cache was reset")
        XCTAssertEqual(attempt.resets.count, 0, "round \(round): the cache was reset")
        let cache = try XCTUnwrap(vault.openCache, "round \(round)")
        let (record, messages, total) = try cache.reader.sync { db in
            (try SyncStateRows.load(in: db), try MessageRows.allWithServerIds(limits: WireLimits(), in: db),
             try db.scalarInt("SELECT count(*) FROM messages"))
        }
        let cacheId = try XCTUnwrap(attempt.cacheId)
        await vault.logout()

        let cached = messages.map { m in
            Row(id: m.id, sentAt: m.sentAt, text: (m as? TextMessage)?.text, editedAt: m.editedAt, deletedAt: m.deletedAt)
        }
        XCTAssertEqual(total, Int64(cached.count), "round \(round): rows without a server id")
        XCTAssertGreaterThanOrEqual(cached.count, printed, "round \(round): messages reported synced are missing after the kill")
        let point = record.lastSyncAt
        let byId = Dictionary(cached.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var problems: [String] = []
        for row in cached {
            guard let expected = truth[row.id] else {
                problems.append("cached \(row) is not on the server")
                continue
            }
            if Int64(expected.sentAt) > point { problems.append("cached \(row) is past the sync point \(point)") }
        }
        for expected in truth.values.sorted(by: { $0.id < $1.id }) where complete || Int64(expected.sentAt) <= point {
            guard let row = byId[expected.id] else {
                problems.append("missing \(expected) (sync point \(point))")
                continue
            }
            // An edit or deletion made by the sync point is applied (later ones may not be yet).
            if complete || expected.editedAt <= Double(point) {
                if row.text != expected.text || row.editedAt != expected.editedAt {
                    problems.append("cached \(row) differs from \(expected) (text equal: \(row.text == expected.text))")
                }
            }
            if expected.deletedAt > 0 && (complete || expected.deletedAt <= Double(point)) {
                // The log names a deletion by id only: the cache stamps it with the page's server
                // time, which is not before the deletion.
                if row.deletedAt < expected.deletedAt { problems.append("cached \(row) is not deleted as \(expected) is") }
            } else if expected.deletedAt == 0 && row.deletedAt != 0 {
                problems.append("cached \(row) is deleted; the server's is not")
            }
        }
        XCTAssertEqual(problems.count, 0, "round \(round): \(problems.prefix(10).joined(separator: "; "))")
        if complete {
            XCTAssertEqual(record.lastOutcome, .caughtUp, "round \(round)")
            XCTAssertNotNil(record.token, "round \(round)")
        }
        return CacheState(cacheId: cacheId, syncedTo: point, rows: cached.count)
    }
}
