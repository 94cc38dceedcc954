import ChatVaultTesting
import Foundation
import XCTest

/// `chatvault bench reads`, run as the built binary, on small caches (`--messages`,
/// `--conversations`) so the suite stays quick. These tests check the report's shape and that its
/// figures are plausible and consistent; they never assert on speed (the machines are shared and
/// noisy, and a debug build is slower than the budget is written for).
final class ReadBenchTests: XCTestCase {
    func testReadsJSONHasTheDocumentedFields() throws {
        let run = try CLI.run(["bench", "reads", "--runs", "3", "--messages", "600", "--conversations", "6", "--json"])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status) (0 within budget, 1 over); stderr: \(run.stderr)")
        let report = try run.json()

        XCTAssertEqual(report["benchmark"] as? String, "reads")
        XCTAssertEqual(number(report["runs"]), 3)
        XCTAssertEqual(number(report["warmupRuns"]), 12, "two passes over the conversations")
        XCTAssertEqual(number(report["messages"]), 600)
        XCTAssertEqual(number(report["conversations"]), 6)
        XCTAssertEqual(number(report["pageRows"]), 30)
        XCTAssertTrue(["debug", "release"].contains(report["build"] as? String ?? ""))
        let engine = try XCTUnwrap(report["engine"] as? [String: Any])
        XCTAssertNotNil(engine["cipher"] as? String, "an encrypted cache needs SQLCipher")
        XCTAssertNotNil(engine["sqlite"] as? String)

        let caches = try XCTUnwrap(report["caches"] as? [String: Any])
        for (name, encrypted) in [("encrypted", true), ("plaintext", false)] {
            let cache = try XCTUnwrap(caches[name] as? [String: Any], "caches.\(name) is missing")
            XCTAssertEqual(cache["encrypted"] as? Bool, encrypted, "caches.\(name).encrypted")
            for field in ["pageSize", "databasePages", "bytesOnDisk"] {
                XCTAssertGreaterThan(number(cache[field]) ?? 0, 0, "caches.\(name).\(field)")
            }
            XCTAssertGreaterThanOrEqual(number(cache["seedSeconds"]) ?? -1, 0, "caches.\(name).seedSeconds")
        }

        let designs = try XCTUnwrap(report["designs"] as? [String: Any])
        XCTAssertEqual(report["layout"] as? String, "sync", "the default fixture is written in sync order")
        for name in ["bareSQLite", "cachedPage", "fetchPreviousCachedPhase", "filteredPage", "bareSQLiteCold", "cachedPageCold", "fetchPreviousCold"] {
            let design = try XCTUnwrap(designs[name] as? [String: Any], "designs.\(name) is missing")
            var medians: [String: Double] = [:]
            for cache in ["encrypted", "plaintext"] {
                let timing = try XCTUnwrap(design[cache] as? [String: Any], "designs.\(name).\(cache) is missing")
                XCTAssertEqual(number(timing["runs"]), 3, "designs.\(name).\(cache).runs")
                let values = try ["medianMs", "p90Ms", "minMs", "maxMs"].map { field in
                    try XCTUnwrap(number(timing[field]), "designs.\(name).\(cache).\(field) is missing or not a number")
                }
                let (median, p90, min, max) = (values[0], values[1], values[2], values[3])
                XCTAssertGreaterThan(min, 0, "designs.\(name).\(cache): a read takes some time")
                XCTAssertTrue(min <= median && median <= p90 && p90 <= max, "designs.\(name).\(cache): min ≤ median ≤ p90 ≤ max: \(values)")
                medians[cache] = median
                XCTAssertNotNil(number(timing["pagesRead"]), "designs.\(name).\(cache).pagesRead")
            }
            let rows = try XCTUnwrap(number(design["rows"]), "designs.\(name).rows")
            if name == "filteredPage" {
                XCTAssertTrue((1...30).contains(rows), "a filtered page holds what the filter leaves: \(rows)")
            } else {
                XCTAssertEqual(rows, 30, "designs.\(name).rows")
            }
            let ratio = try XCTUnwrap(number(design["encryptedOverPlaintext"]), "designs.\(name).encryptedOverPlaintext")
            XCTAssertEqual(ratio, try XCTUnwrap(medians["encrypted"]) / XCTUnwrap(medians["plaintext"]), accuracy: ratio * 0.01,
                           "designs.\(name).encryptedOverPlaintext is the ratio of the medians")
        }

        // A cold design reads database pages again; a warm one finds them in SQLite's cache.
        func pages(_ design: String, _ cache: String) -> Double? {
            number(((designs[design] as? [String: Any])?[cache] as? [String: Any])?["pagesRead"])
        }
        for cache in ["encrypted", "plaintext"] {
            XCTAssertEqual(pages("cachedPage", cache), 0, "a warm page reads nothing from the file (\(cache))")
            XCTAssertGreaterThan(pages("cachedPageCold", cache) ?? 0, 0, "a cold page reads from the file (\(cache))")
        }

        let budget = try XCTUnwrap(report["budget"] as? [String: Any])
        XCTAssertEqual(budget["pageDesign"] as? String, "cachedPage")
        XCTAssertEqual(budget["publicDesign"] as? String, "fetchPreviousCachedPhase")
        XCTAssertEqual(budget["coldFloorDesign"] as? String, "bareSQLiteCold")
        XCTAssertEqual(number(budget["maxPageMs"]), 1)
        XCTAssertEqual(number(budget["maxPublicOverPage"]), 2)
        XCTAssertEqual(number(budget["maxOverFloorRatio"]), 0.1)
        let pageOK = try XCTUnwrap(budget["pageWithinBudget"] as? Bool)
        let publicOK = try XCTUnwrap(budget["publicWithinBudget"] as? Bool)
        let coldPageOK = try XCTUnwrap(budget["coldPageWithinBudget"] as? Bool)
        let coldPublicOK = try XCTUnwrap(budget["coldPublicWithinBudget"] as? Bool)
        let within = try XCTUnwrap(budget["withinBudget"] as? Bool)
        let failures = try XCTUnwrap(budget["failures"] as? [Any])
        XCTAssertEqual(within, pageOK && publicOK && coldPageOK && coldPublicOK)
        XCTAssertEqual(within, failures.isEmpty, "withinBudget disagrees with failures")
        func median(_ design: String, _ cache: String) throws -> Double {
            try XCTUnwrap(number(((designs[design] as? [String: Any])?[cache] as? [String: Any])?["medianMs"]))
        }
        func ratio(_ design: String) throws -> Double { try median(design, "encrypted") / median(design, "plaintext") }
        let page = try median("cachedPage", "encrypted")
        XCTAssertEqual(try XCTUnwrap(number(budget["pageMedianMs"])), page, accuracy: page * 0.01)
        XCTAssertEqual(pageOK, page <= 1, "pageWithinBudget follows the encrypted cachedPage median")
        let publicOverPage = try XCTUnwrap(number(budget["publicOverPage"]))
        XCTAssertEqual(publicOverPage, try median("fetchPreviousCachedPhase", "encrypted") / page, accuracy: publicOverPage * 0.01)
        XCTAssertEqual(publicOK, publicOverPage <= 2)
        // The cold floor: SQLCipher reading the same pages cold (the bare read), its own ratio.
        let floor = try XCTUnwrap(number(budget["coldFloorEncryptedOverPlaintext"]))
        XCTAssertEqual(floor, try ratio("bareSQLiteCold"), accuracy: floor * 0.01)
        XCTAssertEqual(try XCTUnwrap(number(budget["maxColdEncryptedOverPlaintext"])), floor + 0.1, accuracy: 0.001)
        let coldPage = try XCTUnwrap(number(budget["coldPageEncryptedOverPlaintext"]))
        XCTAssertEqual(coldPage, try ratio("cachedPageCold"), accuracy: coldPage * 0.01)
        XCTAssertEqual(coldPageOK, coldPage <= floor + 0.1)
        let coldPublic = try XCTUnwrap(number(budget["coldPublicEncryptedOverPlaintext"]))
        XCTAssertEqual(coldPublic, try ratio("fetchPreviousCold"), accuracy: coldPublic * 0.01)
        XCTAssertEqual(coldPublicOK, coldPublic <= floor + 0.1)
        XCTAssertEqual(run.status, within ? 0 : 1, "the exit status must follow budget.withinBudget")
    }

    func testPagesAreAsLongAsTheConversationsAllow() throws {
        let run = try CLI.run(["bench", "reads", "--runs", "2", "--messages", "40", "--conversations", "4", "--json"])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status); stderr: \(run.stderr)")
        let report = try run.json()
        XCTAssertEqual(number(report["pageRows"]), 10, "ten messages per conversation: pages of ten")
        XCTAssertEqual(number(report["warmupRuns"]), 8)
    }

    func testTableOutputLeavesNothingBehindAndPrintsNoMessageText() throws {
        let scratch = TemporaryDirectory()
        let tmp = scratch.path
        let run = try CLI.run(["bench", "reads", "--runs", "2", "--messages", "120", "--conversations", "4"], environment: ["TMPDIR": tmp])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status); stderr: \(run.stderr)")
        for expected in ["chatvault bench reads", "cached page", "fetchPrevious", "encrypted / plaintext", "budget:", "plaintext", "encrypted"] {
            XCTAssertTrue(run.stdout.contains(expected), "the table lacks '\(expected)':\n\(run.stdout)")
        }
        XCTAssertTrue(run.stdout.contains(run.status == 0 ? "within budget" : "NOT within budget"), run.stdout)
        for output in [run.stdout, run.stderr] {
            XCTAssertFalse(output.contains("bench message"), output)
            XCTAssertFalse(output.contains("lorem"), output)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: tmp), [], "the benchmark's caches are removed")
    }

    func testUsageErrorsNameTheOptionAtFault() throws {
        for (arguments, complaint) in [
            (["--runs", "0"], "--runs"),
            (["--conversations", "0"], "--conversations"),
            (["--messages", "5", "--conversations", "10"], "--messages must be at least --conversations"),
            (["--messages", "5000", "--conversations", "2"], "1000 messages per conversation"),
            (["--keystore", "memory"], "unknown option --keystore"),
            (["--layout", "random"], "--layout must be one of: sync, conversation"),
            (["--json=yes"], "--json takes no value"),
        ] {
            let run = try CLI.run(["bench", "reads"] + arguments)
            XCTAssertEqual(run.status, 2, arguments.joined(separator: " "))
            XCTAssertTrue(run.stderr.contains(complaint), "\(arguments): \(run.stderr)")
        }
        let unknown = try CLI.run(["bench", "nonsense"])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("open, reads"), "the usage lists the reads benchmark: \(unknown.stderr)")
    }

}
