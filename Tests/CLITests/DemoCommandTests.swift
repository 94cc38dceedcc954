import Foundation
import XCTest

/// `chatvault demo`: offline sends, a restart, a reconnect and the drain, against the in-process
/// simulator; it must exit 0 with every message sent once.
final class DemoCommandTests: XCTestCase {
    func testTheDemoSendsEverythingOnceAfterARestart() throws {
        let run = try CLI.run(["demo", "--messages", "8", "--json"])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        let summary = try run.json()
        XCTAssertEqual(summary["passed"] as? Bool, true)
        XCTAssertEqual(summary["messages"] as? Int, 8)
        XCTAssertEqual(summary["queued"] as? Int, 8)
        XCTAssertEqual(summary["queuedNotices"] as? Int, 8)
        XCTAssertEqual(summary["pendingAfterRestart"] as? Int, 8)
        XCTAssertEqual(summary["sent"] as? Int, 8)
        XCTAssertEqual(summary["failed"] as? Int, 0)
        XCTAssertEqual(summary["serverMessages"] as? Int, 8)
        XCTAssertEqual(summary["duplicates"] as? Int, 0)
        XCTAssertEqual(summary["outboxAfter"] as? Int, 0)
        XCTAssertGreaterThanOrEqual(summary["sendCalls"] as? Int ?? 0, 8)
        XCTAssertNotNil(summary["milliseconds"] as? Double)
    }

    func testTheNarrationTellsEachStepAndNoMessageText() throws {
        let run = try CLI.run(["demo"])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        func index(_ prefix: String) -> Int? { lines.firstIndex { $0.hasPrefix(prefix) } }
        let offline = try XCTUnwrap(index("device offline"), run.stdout)
        let restart = try XCTUnwrap(index("restart:"), run.stdout)
        let reconnect = try XCTUnwrap(index("reconnect:"), run.stdout)
        let summary = try XCTUnwrap(index("summary:"), run.stdout)
        XCTAssertLessThan(offline, restart)
        XCTAssertLessThan(restart, reconnect)
        XCTAssertLessThan(reconnect, summary)
        XCTAssertEqual(lines.filter { $0.contains("pending: committed") }.count, 5)
        XCTAssertEqual(lines.filter { $0.contains("queued, not failed: ERROR_INTERNET_UNAVAILABLE") }.count, 5)
        XCTAssertEqual(lines.filter { $0.contains("outbox: sent") }.count, 5)
        XCTAssertTrue(lines[summary].contains("duplicates: 0"), lines[summary])
        XCTAssertEqual(lines.last, "ok")
        XCTAssertFalse((run.stdout + run.stderr).contains("demo message"), "message text printed")
        XCTAssertEqual(run.stderr, "")
    }

    func testUsageErrors() throws {
        XCTAssertEqual(try CLI.run(["demo", "--messages", "0"]).status, 2)
        XCTAssertEqual(try CLI.run(["demo", "--messages", "101"]).status, 2)
        XCTAssertEqual(try CLI.run(["demo", "--keystore", "file"]).status, 2)
    }
}
