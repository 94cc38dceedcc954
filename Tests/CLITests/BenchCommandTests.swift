import ChatVaultTesting
import Foundation
import XCTest

/// `chatvault bench open`, run as the built binary. These tests never assert on speed (the machines
/// are shared and noisy) with one exception that is a property of the design, not of the machine:
/// an open that pays PBKDF2 × 256,000 is slower than one with a raw key (by about 100×).
final class BenchCommandTests: XCTestCase {
    func testOpenJSONHasTheDocumentedFields() throws {
        let run = try runChatvault(["bench", "open", "--runs", "3", "--process-runs", "2", "--large-messages", "8000", "--json"])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status) (0 within budget, 1 over); stderr: \(run.stderr)")
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any],
                                   "stdout is not a JSON object: \(String(decoding: run.stdout, as: UTF8.self))")

        XCTAssertEqual(report["benchmark"] as? String, "open")
        XCTAssertEqual(number(report["runs"]), 3)
        XCTAssertEqual(number(report["messages"]), 1000)
        XCTAssertEqual(report["keystore"] as? String, "memory")
        XCTAssertGreaterThan(number(report["warmupRuns"]) ?? 0, 0)
        XCTAssertGreaterThan(number(report["conversations"]) ?? 0, 0)
        XCTAssertEqual(number(report["firstPageRows"]), 30)
        XCTAssertTrue(["debug", "release"].contains(report["build"] as? String ?? ""))
        let engine = try XCTUnwrap(report["engine"] as? [String: Any])
        XCTAssertNotNil(engine["cipher"] as? String)
        XCTAssertNotNil(engine["sqlite"] as? String)

        let designs = try XCTUnwrap(report["designs"] as? [String: Any])
        var medians: [String: Double] = [:]
        for name in ["rawKey", "rawKeyFullProcedure", "passphrase256k", "plaintext"] {
            let design = try XCTUnwrap(designs[name] as? [String: Any], "designs.\(name) is missing")
            for field in ["runs", "medianMs", "p90Ms", "minMs", "maxMs", "databasePages"] {
                let value = try XCTUnwrap(number(design[field]), "designs.\(name).\(field) is missing or not a number")
                XCTAssertGreaterThan(value, 0, "designs.\(name).\(field)")
            }
            XCTAssertLessThanOrEqual(number(design["runs"]) ?? 0, 3, "designs.\(name).runs")
            XCTAssertGreaterThanOrEqual(number(design["p90Ms"]) ?? 0, number(design["medianMs"]) ?? .infinity, "designs.\(name): p90 below the median")
            let phases = try XCTUnwrap(design["phasesMedianMs"] as? [String: Any], "designs.\(name).phasesMedianMs")
            XCTAssertNotNil(number(phases["firstPage"]), "designs.\(name) has no firstPage phase")
            medians[name] = number(design["medianMs"])
        }
        let passphrase = try XCTUnwrap(designs["passphrase256k"] as? [String: Any])
        XCTAssertEqual(number(passphrase["kdfIterations"]), 256_000)
        XCTAssertEqual(number(passphrase["pageSize"]), 4096)
        XCTAssertNotNil((designs["rawKeyFullProcedure"] as? [String: Any])?["quickCheck"] as? Bool)

        let ratios = try XCTUnwrap(report["ratios"] as? [String: Any])
        for field in ["passphraseOverRawKey", "rawKeyOverPlaintext", "fullProcedureOverRawKey"] {
            XCTAssertGreaterThan(number(ratios[field]) ?? 0, 0, "ratios.\(field)")
        }

        // The app-facing half: a fresh process per run, on a small and a large cache.
        let fresh = try XCTUnwrap(report["freshProcess"] as? [String: Any])
        XCTAssertEqual(number(fresh["runs"]), 2)
        let caches = try XCTUnwrap(fresh["caches"] as? [[String: Any]])
        XCTAssertEqual(caches.map { number($0["messages"]) }, [1000, 8000])
        XCTAssertEqual(caches.map { $0["quickCheckDuringOpen"] as? Bool }, [true, false],
                       "the large cache is over the 1 MiB limit: checked in the background")
        for cache in caches {
            let designs = try XCTUnwrap(cache["designs"] as? [String: Any])
            XCTAssertEqual(Set(designs.keys), ["rawKey", "secretServiceLookup", "loginSecretService", "loginFile"])
            for (name, value) in designs {
                let design = try XCTUnwrap(value as? [String: Any])
                XCTAssertEqual(number(design["runs"]), 2, "\(name).runs")
                XCTAssertGreaterThan(number(design["medianMs"]) ?? 0, 0, "\(name).medianMs")
                XCTAssertGreaterThanOrEqual(number(design["p90Ms"]) ?? 0, number(design["medianMs"]) ?? .infinity)
                XCTAssertEqual(number(design["logoutMedianMs"]) != nil, name.hasPrefix("login"), "\(name): logout is timed after logins only")
            }
            let ratios = try XCTUnwrap(cache["ratios"] as? [String: Any])
            XCTAssertGreaterThan(number(ratios["loginSecretServiceOverRawKey"]) ?? 0, 0)
            XCTAssertGreaterThan(number(ratios["loginFileOverRawKey"]) ?? 0, 0)
        }

        // The budgets: each cache's logins against their floors measured in the same run.
        let budget = try XCTUnwrap(report["budget"] as? [String: Any])
        XCTAssertEqual(number(budget["maxLoginFileOverRawKey"]), 3)
        XCTAssertEqual(number(budget["secretServiceAllowanceMs"]), 2)
        XCTAssertEqual(number(budget["maxFirstLoginMs"]), 25)
        let checked = try XCTUnwrap(budget["caches"] as? [[String: Any]])
        XCTAssertEqual(checked.map { number($0["messages"]) }, [1000, 8000])
        for (cache, figures) in zip(caches, checked) {
            let designs = try XCTUnwrap(cache["designs"] as? [String: Any])
            func median(_ name: String) throws -> Double { try XCTUnwrap(number((designs[name] as? [String: Any])?["medianMs"]), name) }
            let raw = try median("rawKey"), lookup = try median("secretServiceLookup")
            let file = try median("loginFile"), secretService = try median("loginSecretService")
            XCTAssertEqual(try XCTUnwrap(number(figures["loginFileOverRawKey"])), file / raw, accuracy: file / raw * 0.01)
            XCTAssertEqual(try XCTUnwrap(number(figures["maxLoginSecretServiceMs"])), file + lookup + 2, accuracy: 0.01)
            XCTAssertEqual(figures["fileWithinBudget"] as? Bool, file / raw <= 3)
            XCTAssertEqual(figures["secretServiceWithinBudget"] as? Bool, secretService <= file + lookup + 2)
            XCTAssertEqual(figures["absoluteWithinBudget"] as? Bool, file <= 25 && secretService <= 25)
        }
        let checks = try ["fileWithinBudget", "secretServiceWithinBudget", "absoluteWithinBudget"].map { field in
            try XCTUnwrap(budget[field] as? Bool, "budget.\(field)")
        }
        let within = try XCTUnwrap(budget["withinBudget"] as? Bool)
        XCTAssertEqual(within, !checks.contains(false))
        let failures = try XCTUnwrap(budget["failures"] as? [Any])
        XCTAssertEqual(within, failures.isEmpty, "withinBudget disagrees with failures")
        XCTAssertEqual(run.status, within ? 0 : 1, "the exit status must follow budget.withinBudget")

        // A property of the design, with a margin of about 100×: never a timing budget.
        XCTAssertGreaterThan(try XCTUnwrap(medians["passphrase256k"]), try XCTUnwrap(medians["rawKey"]),
                             "a PBKDF2 × 256,000 open measured faster than a raw-key open")
    }

    func testTableOutputLeavesNothingBehindAndPrintsNoSecrets() throws {
        let scratch = TemporaryDirectory()
        let tmp = scratch.path
        let run = try runChatvault(["bench", "open", "--runs", "1", "--messages", "40", "--large-messages", "2000"], environment: ["TMPDIR": tmp])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status); stderr: \(run.stderr)")
        let text = String(decoding: run.stdout, as: UTF8.self)
        for expected in ["passphrase / raw key", "raw key / plaintext", "budget (", "plaintext", "first login → ready, Secret Service",
                         "first login → ready, file key store", "floor: bare raw-key open", "floor: a lone Secret Service key lookup",
                         "fresh subprocess"] {
            XCTAssertTrue(text.contains(expected), "the table lacks '\(expected)':\n\(text)")
        }
        // No message text (the synthetic bodies) and no key hex anywhere in the output.
        for output in [text, run.stderr] {
            XCTAssertFalse(output.contains("bench message"), output)
            XCTAssertNil(output.range(of: "[0-9a-fA-F]{32,}", options: .regularExpression), output)
        }
        // The temporary directory the benchmark made under TMPDIR is gone.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: tmp), [])
    }

    /// `bench outbox` with small counts: the documented fields and a consistent verdict, never the
    /// timings themselves.
    func testOutboxJSONHasTheDocumentedFields() throws {
        let run = try runChatvault(["bench", "outbox", "--runs", "3", "--batch-runs", "1", "--flush-messages", "120", "--flush-runs", "1", "--json"])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status) (0 within budget, 1 over); stderr: \(run.stderr)")
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any],
                                   "stdout is not a JSON object: \(String(decoding: run.stdout, as: UTF8.self))")
        XCTAssertEqual(report["benchmark"] as? String, "outbox")
        XCTAssertEqual(report["keystore"] as? String, "memory")
        XCTAssertTrue(["debug", "release"].contains(report["build"] as? String ?? ""))
        XCTAssertNotNil((report["engine"] as? [String: Any])?["cipher"] as? String)

        func checkSummary(_ object: [String: Any], _ name: String, runs: Int) {
            for field in ["medianMs", "p90Ms", "minMs", "maxMs"] {
                XCTAssertGreaterThan(number(object[field]) ?? 0, 0, "\(name).\(field)")
            }
            XCTAssertEqual(number(object["runs"]), Double(runs), "\(name).runs")
            XCTAssertGreaterThanOrEqual(number(object["p90Ms"]) ?? 0, number(object["medianMs"]) ?? .infinity, "\(name): p90 below the median")
        }
        let enqueue = try XCTUnwrap(report["enqueue"] as? [String: Any])
        XCTAssertEqual(number(enqueue["runs"]), 3)
        XCTAssertGreaterThan(number(enqueue["warmupRuns"]) ?? 0, 0)
        let designs = try XCTUnwrap(enqueue["designs"] as? [String: Any])
        XCTAssertEqual(Set(designs.keys), ["encrypted", "plaintext", "encryptedSynchronousOff"])
        for (name, value) in designs {
            let design = try XCTUnwrap(value as? [String: Any])
            checkSummary(design, "enqueue.designs.\(name)", runs: 3)
            XCTAssertGreaterThan(number(design["commitOnlyMedianMs"]) ?? 0, 0, "enqueue.designs.\(name).commitOnlyMedianMs")
        }
        XCTAssertGreaterThan(number(enqueue["encryptedOverPlaintext"]) ?? 0, 0)
        let profile = try XCTUnwrap(enqueue["profile"] as? [String: Any])
        for field in ["fsyncMedianMs", "fsyncP90Ms", "commitOnlyMedianMs", "durableCommitShareMs", "engineWithoutFsyncMedianMs"] {
            XCTAssertNotNil(number(profile[field]), "enqueue.profile.\(field)")
        }

        let batch = try XCTUnwrap(report["batch"] as? [String: Any])
        XCTAssertEqual(number(batch["sends"]), 50)
        XCTAssertEqual(number(batch["runs"]), 1)
        let batchDesigns = try XCTUnwrap(batch["designs"] as? [String: Any])
        XCTAssertEqual(Set(batchDesigns.keys), ["encrypted", "plaintext", "encryptedSynchronousOff"])
        for (name, value) in batchDesigns {
            let design = try XCTUnwrap(value as? [String: Any])
            checkSummary(design, "batch.designs.\(name)", runs: 1)
            XCTAssertGreaterThan(number(design["perSendMedianMs"]) ?? 0, 0)
        }
        XCTAssertGreaterThan(number(batch["encryptedOverPlaintext"]) ?? 0, 0)

        let flush = try XCTUnwrap(report["flush"] as? [String: Any])
        checkSummary(flush, "flush", runs: 1)
        XCTAssertEqual(number(flush["messages"]), 120)
        XCTAssertEqual(number(flush["batchSize"]), 100)
        XCTAssertGreaterThan(number(flush["messagesPerSecond"]) ?? 0, 0)
        XCTAssertGreaterThan(number(flush["drainMessagesPerSecond"]) ?? 0, 0)
        XCTAssertNotNil(number(flush["reconnectToFirstSentMedianMs"]))
        // One warm-up batch of 100, then the measured 120: every one stored once.
        XCTAssertEqual(number(flush["serverMessages"]), 220)
        XCTAssertEqual(number(flush["duplicates"]), 0)

        let budget = try XCTUnwrap(report["budget"] as? [String: Any])
        XCTAssertEqual(number(budget["enqueueMedianMs"]), 1)
        XCTAssertEqual(number(budget["batchMedianMs"]), 50)
        XCTAssertNotNil(budget["enqueueWithinBudget"] as? Bool)
        XCTAssertNotNil(budget["batchWithinBudget"] as? Bool)
        let within = try XCTUnwrap(budget["withinBudget"] as? Bool)
        XCTAssertEqual(within, (try XCTUnwrap(budget["failures"] as? [Any])).isEmpty, "withinBudget disagrees with failures")
        XCTAssertEqual(run.status, within ? 0 : 1, "the exit status must follow budget.withinBudget")
        XCTAssertFalse(run.stderr.contains("bench message"))
        XCTAssertFalse(String(decoding: run.stdout, as: UTF8.self).contains("bench message"))
    }

    /// The kit's benchmark runs the whole catalogue over its built-in app: every scenario timed,
    /// no finding, the floor (the private sessions alone) measured beside it. No timing asserted.
    func testKitJSONHasEveryScenarioAndTheFloor() throws {
        let run = try CLI.run(["bench", "kit", "--runs", "1", "--json"])
        XCTAssertTrue([0, 1].contains(run.status), "exit status \(run.status) (0 within budget, 1 over); stderr: \(run.stderr)")
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(report["findings"] as? Int, 0)
        XCTAssertEqual(report["scenarios"] as? Int, 17)
        let medians = try XCTUnwrap(report["scenarioMedianMs"] as? [String: Double])
        XCTAssertEqual(medians.count, 17)
        XCTAssertTrue(medians.values.allSatisfy { $0 > 0 }, "\(medians)")
        let total = try XCTUnwrap(report["totalMedianMs"] as? Double)
        let floor = try XCTUnwrap(report["floorMs"] as? Double)
        XCTAssertGreaterThan(floor, 0)
        XCTAssertGreaterThan(total, floor / 2, "the run includes its sessions")
    }

    func testUsageErrors() throws {
        XCTAssertEqual(try runChatvault(["bench"]).status, 2)
        XCTAssertEqual(try runChatvault(["bench", "nonsense"]).status, 2)
        XCTAssertEqual(try runChatvault(["bench", "open", "--runs", "0"]).status, 2)
        XCTAssertEqual(try runChatvault(["bench", "open", "--keystore", "nowhere"]).status, 2)
        XCTAssertEqual(try runChatvault(["bench", "open", "--no-such-option", "1"]).status, 2)
        XCTAssertEqual(try runChatvault(["bench", "outbox", "--runs", "0"]).status, 2)
        XCTAssertEqual(try runChatvault(["bench", "outbox", "--flush-messages", "x"]).status, 2)
    }

    // MARK: - Support

    struct Run {
        var status: Int32
        var stdout: Data
        var stderr: String
    }

    /// Runs the built binary (see `CLI.run`), with extra environment variables.
    func runChatvault(_ arguments: [String], environment extra: [String: String] = [:]) throws -> Run {
        let run = try CLI.run(arguments, environment: extra.mapValues { Optional($0) })
        return Run(status: run.status, stdout: Data(run.stdout.utf8), stderr: run.stderr)
    }

}
