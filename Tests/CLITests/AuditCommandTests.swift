import ChatVault
import ChatVaultAudit
import ChatVaultTesting
import Foundation
import XCTest

/// `chatvault audit`: a cache's history from its journal (read-only, with the key), as text, JSON
/// and a page a browser renders, with the kit's and `chatvault scenarios`' runs beside it.
final class AuditCommandTests: XCTestCase {
    func testTheHistoryOfACacheWithTheRunsAsTextJSONAndAPage() async throws {
        let dir = try TemporaryDirectory.create(prefix: "chatvault-audit-cli")
        let keys = ["--keystore", "file", "--key-dir", dir.path + "/keys"]
        let cache = ["--dir", dir.path + "/caches", "--user", "alice@example.org"]
        XCTAssertEqual(try CLI.run(["seed"] + cache + keys + ["--messages", "40", "--pending", "3", "--marker", "AUDIT-MARKER"]).status, 0)
        for file in try FileManager.default.contentsOfDirectory(atPath: dir.path + "/keys") where file.hasSuffix(".key") {
            unlink(dir.path + "/keys/" + file)
        }
        let reset = try CLI.run(["open"] + cache + keys)
        XCTAssertEqual(reset.status, 0, reset.stderr)
        XCTAssertEqual(try CLI.run(["open"] + cache + keys).status, 0)

        // The kit's report (an app's run) and the CLI's own scenarios, as files.
        let kit = try await ResetAudit { env in try ReferenceAuditedApp(env) }.run(["key-lost", "locked-keyring"])
        XCTAssertEqual(kit.findings, [], kit.text)
        let kitFile = dir.path + "/kit.json"
        try kit.json().write(to: URL(fileURLWithPath: kitFile))
        let scenarios = try CLI.run(["scenarios", "--keystore", "memory", "--only", "wrong-key", "--json"])
        XCTAssertEqual(scenarios.status, 0, scenarios.stderr)
        let scenariosFile = dir.path + "/scenarios.json"
        try Data(scenarios.stdout.utf8).write(to: URL(fileURLWithPath: scenariosFile))

        let page = dir.path + "/audit.html"
        let run = try CLI.run(["audit"] + cache + keys + ["--json", "--html", page, "--runs", "\(kitFile),\(scenariosFile)"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        let summary = try XCTUnwrap(object["summary"] as? [String: Any])
        XCTAssertEqual(summary["resets"] as? [String: Int], ["keyLost": 1])
        XCTAssertEqual(summary["deliveries"] as? Int, 1)
        XCTAssertEqual(summary["deliveredToNoListener"] as? Int, 0)
        XCTAssertEqual(summary["opens"] as? Int, 2, "both opens of the new cache")
        XCTAssertEqual((object["journal"] as? [String: Any])?["database"] as? String, "read")
        let timeline = try XCTUnwrap(object["timeline"] as? [[String: Any]])
        XCTAssertEqual(timeline.map { $0["kind"] as? String }, ["reset", "opened", "delivered", "opened"])
        let delivered = try XCTUnwrap(timeline.first { $0["kind"] as? String == "delivered" })
        XCTAssertEqual(delivered["listeners"] as? [String], ["chatvault-open"])
        XCTAssertEqual(delivered["readsServedBefore"] as? Int, 0)
        let runs = try XCTUnwrap(object["runs"] as? [[String: Any]])
        XCTAssertEqual(runs.compactMap { ($0["rows"] as? [[String: Any]])?.compactMap { $0["name"] as? String } },
                       [["key-lost", "locked-keyring"], ["wrong-key"]])
        for text in [run.stdout, try String(contentsOfFile: page, encoding: .utf8)] {
            XCTAssertFalse(text.contains("alice"), "no user id")
            XCTAssertFalse(text.contains("AUDIT-MARKER"), "no message text")
        }
        var info = stat()
        XCTAssertEqual(stat(page, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600, "the page is private")
        XCTAssertFalse(try String(contentsOfFile: page, encoding: .utf8).contains("<script"), "nothing runs")

        let text = try HeadlessBrowser(profile: dir.path + "/profile").render(page, screenshot: dir.path + "/audit.png")
        for fact in ["Timeline", "keyLost; unsent messages lost: unknown", "keyLost told to 1 listener (chatvault-open)", "0 cached reads before",
                     "ResetAudit runs (kit.json)", "locked-keyring", "chatvault scenarios (scenarios.json)", "wrongKey(unknown)",
                     "resets: keyLost 1"] {
            XCTAssertTrue(text.contains(fact), "\(fact) is not in the rendered page")
        }

        // The text form says the same.
        let plain = try CLI.run(["audit"] + cache + keys)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertTrue(plain.stdout.contains("resets: keyLost 1; delivered 1 (to no listener: 0"), plain.stdout)
    }

    func testWithoutItsKeyTheAuditSaysWhyTheJournalInsideIsNotRead() throws {
        let dir = try TemporaryDirectory.create(prefix: "chatvault-audit-cli")
        let keys = ["--keystore", "file", "--key-dir", dir.path + "/keys"]
        let cache = ["--dir", dir.path + "/caches", "--user", "bob"]
        XCTAssertEqual(try CLI.run(["seed"] + cache + keys + ["--messages", "5"]).status, 0)
        // The key out of reach (its directory moved away): the audit cannot read inside, says
        // so, and changes nothing.
        XCTAssertEqual(rename(dir.path + "/keys", dir.path + "/keys.away"), 0)
        let run = try CLI.run(["audit"] + cache + keys + ["--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        let journal = try XCTUnwrap(object["journal"] as? [String: Any])
        XCTAssertEqual(journal["database"] as? String, "the cache's key is not at hand")
    }

    func testBadArgumentsAreRefusedWithTheVerbsUsage() throws {
        let missing = try CLI.run(["audit", "--dir", "/nonexistent", "--runs", "/nonexistent/runs.json"])
        XCTAssertNotEqual(missing.status, 0)
        XCTAssertTrue(missing.stderr.contains("--runs"), missing.stderr)
        let nowhere = try CLI.run(["audit", "--dir", "/tmp", "--html", "/nonexistent/dir/a.html"])
        XCTAssertEqual(nowhere.status, 2, nowhere.stderr)
        XCTAssertTrue(nowhere.stderr.contains("--html"), nowhere.stderr)
    }
}
