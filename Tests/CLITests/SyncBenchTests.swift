import ChatVaultTesting
import Foundation
import XCTest

/// `chatvault bench sync --quick`, run as the built binary: the report's shape and its internal
/// consistency. Never a timed assertion (the machines are shared and noisy, and a debug build is
/// slower than the budget is written for).
final class SyncBenchTests: XCTestCase {
    func testQuickJSONHasTheDocumentedFields() throws {
        let scratch = TemporaryDirectory()
        let run = try CLI.run(["bench", "sync", "--quick", "--json"], environment: ["TMPDIR": scratch.path])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status) (0 within budget, 1 over); stderr: \(run.stderr)")
        let report = try run.json()

        XCTAssertEqual(report["benchmark"] as? String, "sync")
        XCTAssertEqual(report["quick"] as? Bool, true)
        XCTAssertTrue(["debug", "release"].contains(report["build"] as? String ?? ""))
        let engine = try XCTUnwrap(report["engine"] as? [String: Any])
        XCTAssertNotNil(engine["cipher"] as? String, "an encrypted cache needs SQLCipher")
        XCTAssertEqual(number(report["conversations"]), 100)
        let defaultPageSize = try XCTUnwrap(number(report["defaultPageSize"]))

        let sizes = try XCTUnwrap(report["pageSizes"] as? [[String: Any]])
        XCTAssertEqual(sizes.compactMap { number($0["pageSize"]) }, [100, 500, 2000])
        var defaultRate: Double?
        var defaultRatio: Double?
        for size in sizes {
            let pageSize = number(size["pageSize"]) ?? 0
            XCTAssertEqual(number(size["messages"]), 2000, "pageSizes[\(pageSize)].messages")
            XCTAssertEqual(number(size["runs"]), 1)
            var medians: [String: Double] = [:]
            for cache in ["encrypted", "plaintext"] {
                let rate = try XCTUnwrap(size[cache] as? [String: Any], "pageSizes[\(pageSize)].\(cache)")
                let median = try XCTUnwrap(number(rate["medianMessagesPerSecond"]))
                let min = try XCTUnwrap(number(rate["minMessagesPerSecond"]))
                let max = try XCTUnwrap(number(rate["maxMessagesPerSecond"]))
                XCTAssertGreaterThan(min, 0)
                XCTAssertTrue(min <= median && median <= max, "pageSizes[\(pageSize)].\(cache): min ≤ median ≤ max")
                XCTAssertGreaterThan(number(rate["medianPageMs"]) ?? 0, 0)
                medians[cache] = median
            }
            let ratio = try XCTUnwrap(number(size["encryptedOverPlaintext"]))
            XCTAssertEqual(ratio, try XCTUnwrap(medians["plaintext"]) / XCTUnwrap(medians["encrypted"]), accuracy: ratio * 0.01,
                           "a time ratio: plaintext rate over encrypted rate")
            if pageSize == defaultPageSize {
                defaultRate = medians["encrypted"]
                defaultRatio = ratio
            }
        }

        let growth = try XCTUnwrap(report["growth"] as? [String: Any])
        XCTAssertEqual(number(growth["pageSize"]), defaultPageSize)
        let window = try XCTUnwrap(number(growth["windowMessages"]))
        XCTAssertGreaterThanOrEqual(window, defaultPageSize, "a window holds whole pages")
        let checkpoints = try XCTUnwrap(growth["checkpoints"] as? [[String: Any]])
        XCTAssertEqual(checkpoints.compactMap { number($0["cachedMessages"]) }, [window, 3 * window, 5 * window])
        var encryptedRates: [Double] = []
        for point in checkpoints {
            let encrypted = try XCTUnwrap(number(point["encryptedMessagesPerSecond"]))
            XCTAssertGreaterThan(encrypted, 0)
            XCTAssertGreaterThan(number(point["plaintextMessagesPerSecond"]) ?? 0, 0)
            encryptedRates.append(encrypted)
        }
        let flatness = try XCTUnwrap(number(growth["encryptedSlowestOverFastest"]))
        XCTAssertEqual(flatness, (encryptedRates.min() ?? 0) / (encryptedRates.max() ?? 1), accuracy: 0.001)

        // SQLite's own rate for the same rows: measured on both caches, a ratio of the two.
        let floor = try XCTUnwrap(report["sqliteFloor"] as? [String: Any])
        XCTAssertEqual(number(floor["pageSize"]), defaultPageSize)
        let floorEncrypted = try XCTUnwrap(number(floor["encryptedMessagesPerSecond"]))
        let floorPlaintext = try XCTUnwrap(number(floor["plaintextMessagesPerSecond"]))
        XCTAssertGreaterThan(floorEncrypted, 0)
        XCTAssertGreaterThan(floorPlaintext, 0)
        XCTAssertEqual(try XCTUnwrap(number(floor["encryptedOverPlaintext"])), floorPlaintext / floorEncrypted, accuracy: 0.01)

        let memory = try XCTUnwrap(report["memory"] as? [String: Any])
        XCTAssertGreaterThanOrEqual(number(memory["messages"]) ?? 0, 2000)
        let baseline = try XCTUnwrap(number(memory["baselineKiB"]))
        let peak = try XCTUnwrap(number(memory["peakKiB"]))
        XCTAssertGreaterThan(baseline, 0, "read from /proc/self/status")
        XCTAssertEqual(number(memory["peakAboveBaselineKiB"]), Swift.max(peak - baseline, 0))

        let budget = try XCTUnwrap(report["budget"] as? [String: Any])
        XCTAssertEqual(number(budget["minShareOfFloor"]), 0.85)
        XCTAssertEqual(number(budget["maxOverFloorRatio"]), 0.1)
        XCTAssertEqual(number(budget["minSlowestOverFastest"]), 0.8)
        XCTAssertEqual(number(budget["maxPeakAboveBaselineMiB"]), 64)
        XCTAssertEqual(number(budget["floorMessagesPerSecond"]), floorEncrypted)
        let share = try XCTUnwrap(number(budget["shareOfFloor"]))
        XCTAssertEqual(share, try XCTUnwrap(defaultRate) / floorEncrypted, accuracy: share * 0.01)
        let floorRatio = floorPlaintext / floorEncrypted
        XCTAssertEqual(try XCTUnwrap(number(budget["maxEncryptedOverPlaintext"])), floorRatio + 0.1, accuracy: 0.01)
        let checks = try ["rateWithinBudget", "ratioWithinBudget", "growthWithinBudget", "memoryWithinBudget"].map { field in
            try XCTUnwrap(budget[field] as? Bool, "budget.\(field)")
        }
        let within = try XCTUnwrap(budget["withinBudget"] as? Bool)
        XCTAssertEqual(within, !checks.contains(false))
        XCTAssertEqual(within, (try XCTUnwrap(budget["failures"] as? [Any])).isEmpty)
        XCTAssertEqual(checks[0], share >= 0.85, "rateWithinBudget follows the default page size's share of SQLite alone")
        XCTAssertEqual(checks[1], try XCTUnwrap(defaultRatio) <= floorRatio + 0.1)
        XCTAssertEqual(run.status, within ? 0 : 1, "the exit status must follow budget.withinBudget")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path), [], "the benchmark's caches are removed")
        for output in [run.stdout, run.stderr] {
            XCTAssertFalse(output.contains("lorem"), "no message text")
        }
    }

    func testTableAndUsageErrors() throws {
        let run = try CLI.run(["bench", "sync", "--quick"])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status); stderr: \(run.stderr)")
        for expected in ["chatvault bench sync", "page size", "(default)", "as the cache grows", "SQLite alone, the same rows", "memory:", "budget:", "encrypted / plaintext"] {
            XCTAssertTrue(run.stdout.contains(expected), "the table lacks '\(expected)':\n\(run.stdout)")
        }
        XCTAssertTrue(run.stdout.contains(run.status == 0 ? "within budget" : "NOT within budget"), run.stdout)
        for arguments in [["--runs", "0"], ["--messages", "x"], ["--quick=1"], ["--pages", "3"]] {
            XCTAssertEqual(try CLI.run(["bench", "sync"] + arguments).status, 2, arguments.joined(separator: " "))
        }
        XCTAssertTrue(try CLI.run(["bench", "nonsense"]).stderr.contains("sync"), "the usage lists the sync benchmark")
    }

}
