import ChatVaultTesting
import Foundation
import XCTest

/// `chatvault demo --matrix`: the reconnect story against a real homeserver, a throwaway local
/// Synapse the binary starts and stops, or any homeserver given with `--homeserver` (here the
/// Synapse Scripts/test started), the password from a file and never printed.
final class MatrixDemoTests: XCTestCase {
    func testTheLocalStorySendsOnceAndCatchesUp() throws {
        let run = try CLI.run(["demo", "--matrix", "--messages", "4", "--json"])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        let summary = try run.json()
        XCTAssertEqual(summary["passed"] as? Bool, true, run.stdout)
        XCTAssertEqual(summary["queued"] as? Int, 4)
        XCTAssertEqual(summary["sent"] as? Int, 4)
        XCTAssertEqual(summary["serverCopies"] as? Int, 4)
        XCTAssertEqual(summary["duplicates"] as? Int, 0)
        XCTAssertEqual(summary["caughtUp"] as? Int, 2, "bob's two messages came with the catch-up")
        XCTAssertEqual(summary["outboxAfter"] as? Int, 0)
    }

    func testAGivenHomeserverWithThePasswordFromAFile() async throws {
        let env = ProcessInfo.processInfo.environment
        let url = try XCTUnwrap(env["CHATVAULT_SYNAPSE_URL"].flatMap(URL.init(string:)), "run with Scripts/test (it starts Synapse)")
        let secret = try XCTUnwrap(env["CHATVAULT_SYNAPSE_SECRET"])
        let password = "pw-" + UUID().uuidString
        let user = try await LocalHomeserver.register(on: url, secret: secret, name: "demo" + String(UInt32.random(in: 0...UInt32.max)),
                                                      password: password)
        let dir = TemporaryDirectory()
        let file = dir.path + "/password"
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data(password.utf8), attributes: [.posixPermissions: 0o600]))
        let run = try CLI.run(["demo", "--matrix", "--homeserver", url.absoluteString, "--user", user, "--password-file", file])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertEqual(run.stdout.split(separator: "\n").last, "ok")
        XCTAssertTrue(run.stdout.contains("duplicates: 0"), run.stdout)
        XCTAssertFalse((run.stdout + run.stderr).contains(password), "the password is never printed")
        XCTAssertFalse((run.stdout + run.stderr).contains("demo "), "no message text is printed")
    }

    func testUsageErrors() throws {
        XCTAssertEqual(try CLI.run(["demo", "--matrix", "--homeserver", "http://127.0.0.1:9"]).status, 2, "--user is needed")
        XCTAssertEqual(try CLI.run(["demo", "--matrix", "--homeserver", "ftp://x", "--user", "@a:b"]).status, 2)
        XCTAssertEqual(try CLI.run(["demo", "--matrix", "--user", "@a:b"]).status, 2, "--user goes with --homeserver")
        XCTAssertEqual(try CLI.run(["demo", "--matrix", "--homeserver", "http://127.0.0.1:9", "--user", "alice"]).status, 2)
    }
}
