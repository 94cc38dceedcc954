import ChatVaultTesting
import Foundation
import XCTest

/// `chatvault scenarios --report FILE.html`: a page a person can read, checked in a real headless
/// browser (Debian's chromium, from Scripts/setup): it renders, a screenshot is taken, and the key
/// facts (names, verdicts, the reset reasons the listener heard) are in the page's text.
final class ScenarioReportTests: XCTestCase {
    func testTheReportRendersInAHeadlessBrowserWithTheKeyFacts() throws {
        let dir = try TemporaryDirectory.create(prefix: "chatvault-report")
        let report = dir.path + "/report.html"
        let run = try CLI.run(["scenarios", "--keystore", "memory", "--only", "fresh-create,key-lost,wrong-key", "--report", report])
        XCTAssertEqual(run.status, 0, run.stderr)
        var info = stat()
        XCTAssertEqual(stat(report, &info), 0, "the report exists")
        XCTAssertEqual(info.st_mode & 0o777, 0o600, "the report is private")
        let page = try String(contentsOfFile: report, encoding: .utf8)
        XCTAssertFalse(page.contains("chatvault-scenario-marker"), "no message text")
        XCTAssertFalse(page.contains("scenario-user@"), "no user id")
        XCTAssertFalse(page.contains("<script"), "nothing runs")
        XCTAssertFalse(page.contains("http"), "nothing is fetched")

        let text = try HeadlessBrowser(profile: dir.path + "/profile").render(report, screenshot: dir.path + "/report.png")
        XCTAssertTrue(text.contains("3 ok, 0 deviating, 0 skipped"), text.prefix(400).description)
        for fact in ["fresh-create", "key-lost", "keyLost", "wrong-key", "wrongKey", "<th>resets (listener)</th>"] {
            XCTAssertTrue(text.contains(fact), "\(fact) is not in the rendered page")
        }
    }

    func testAReportWithNowhereToGoIsRefusedBeforeAnyScenarioRuns() throws {
        let run = try CLI.run(["scenarios", "--keystore", "memory", "--report", "/nonexistent/dir/report.html"])
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(run.stderr.contains("--report"), run.stderr)
        XCTAssertEqual(run.stdout, "", "nothing ran")
    }
}
