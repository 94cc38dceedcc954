import ChatVaultTesting
import Foundation
import XCTest

/// `chatvault bench media --quick`, run as the built binary: the report's shape and its internal
/// consistency. Never a timed assertion (the machines are shared and noisy, and a debug build is
/// slower than the budget is written for).
final class MediaBenchTests: XCTestCase {
    func testQuickJSONHasTheDocumentedFields() throws {
        let scratch = TemporaryDirectory()
        let run = try CLI.run(["bench", "media", "--quick", "--json"], environment: ["TMPDIR": scratch.path])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status) (0 within budget, 1 over); stderr: \(run.stderr)")
        let report = try run.json()
        XCTAssertEqual(report["benchmark"] as? String, "media")
        XCTAssertEqual(report["quick"] as? Bool, true)

        let download = try XCTUnwrap(report["download"] as? [String: Any])
        XCTAssertEqual(number(download["fileBytes"]), 1_048_576)
        XCTAssertEqual(number(download["files"]), 4)
        var medians: [String: Double] = [:]
        for cache in ["encrypted", "plaintext"] {
            let rates = try XCTUnwrap(download[cache] as? [String: Any], cache)
            let median = try XCTUnwrap(number(rates["medianMiBPerSecond"]))
            XCTAssertGreaterThan(median, 0)
            XCTAssertTrue((number(rates["minMiBPerSecond"]) ?? 0) <= median && median <= (number(rates["maxMiBPerSecond"]) ?? 0))
            medians[cache] = median
        }
        let ratio = try XCTUnwrap(number(download["encryptedOverPlaintext"]))
        XCTAssertEqual(ratio, try XCTUnwrap(medians["plaintext"]) / XCTUnwrap(medians["encrypted"]), accuracy: ratio * 0.01)
        let plaintextRate = try XCTUnwrap(medians["plaintext"])

        let hydration = try XCTUnwrap(report["hydration"] as? [String: Any])
        XCTAssertEqual(number(hydration["pageMessages"]), 30)
        XCTAssertEqual(number(hydration["cachedMessages"]), 2000)
        var hydratedPage = 0.0
        for cache in ["encrypted", "plaintext"] {
            let h = try XCTUnwrap(hydration[cache] as? [String: Any], cache)
            let page = try XCTUnwrap(number(h["pageMedianMs"]))
            let whole = try XCTUnwrap(number(h["hydratedPageMedianMs"]))
            XCTAssertGreaterThan(page, 0)
            XCTAssertGreaterThanOrEqual(whole, page * 0.5, "the hydrated page includes the read")
            if cache == "encrypted" { hydratedPage = whole }
        }

        // The floors, measured beside the downloads: AES-256-GCM and a tmpfs write of 1 MiB.
        let floors = try XCTUnwrap(report["floors"] as? [String: Any])
        XCTAssertEqual(floors["cipher"] as? String, "AES-256-GCM")
        XCTAssertEqual(number(floors["samples"]), 4, "one of each per file of each run")
        let cipher = try XCTUnwrap(number(floors["cipherMedianMs"]))
        let viewWrite = try XCTUnwrap(number(floors["viewWriteMedianMs"]))
        XCTAssertGreaterThan(cipher, 0)
        XCTAssertGreaterThan(viewWrite, 0)

        let budget = try XCTUnwrap(report["budget"] as? [String: Any])
        let plainMs = try XCTUnwrap(number(budget["plaintextMsPerFile"]))
        XCTAssertEqual(plainMs, 1_000 / plaintextRate, accuracy: plainMs * 0.01, "a 1 MiB file at the plaintext median rate")
        XCTAssertEqual(number(budget["cipherMs"]), cipher)
        XCTAssertEqual(number(budget["viewWriteMs"]), viewWrite)
        XCTAssertEqual(number(budget["marginOverFloor"]), 0.1)
        let ceiling = try XCTUnwrap(number(budget["maxEncryptedOverPlaintext"]))
        XCTAssertEqual(ceiling, 1 + (cipher + viewWrite) / plainMs + 0.1, accuracy: 0.01)
        XCTAssertEqual(number(budget["maxHydratedPageMs"]), 1)
        XCTAssertEqual(budget["ratioWithinBudget"] as? Bool, ratio <= ceiling)
        XCTAssertEqual(budget["hydrationWithinBudget"] as? Bool, hydratedPage <= 1)
        let within = try XCTUnwrap(budget["withinBudget"] as? Bool)
        XCTAssertEqual(within, (try XCTUnwrap(budget["failures"] as? [Any])).isEmpty)
        XCTAssertEqual(run.status, within ? 0 : 1, "the exit status must follow budget.withinBudget")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path), [], "the benchmark's caches are removed")
    }

    func testTheTableNamesBothMeasurements() throws {
        let run = try CLI.run(["bench", "media", "--quick"])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status); stderr: \(run.stderr)")
        for expected in ["chatvault bench media", "download and cache", "hydration", "floors, beside the runs", "AES-256-GCM", "budget:"] {
            XCTAssertTrue(run.stdout.contains(expected), "the table lacks '\(expected)':\n\(run.stdout)")
        }
        XCTAssertEqual(try CLI.run(["bench", "media", "--files", "0"]).status, 2)
    }
}
