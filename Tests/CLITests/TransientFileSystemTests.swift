import ChatVaultTesting
import Foundation
import VaultStore
import XCTest

/// Transient file-system conditions on real files (C11): a read-only database file or cache
/// directory is `unavailable(readOnly)`, never a reset, and leaves nothing behind that outlives
/// the condition. Modes only bind an unprivileged user, and CI runs the tests as root: there the
/// CLI runs as `nobody` through `setpriv` (a copy of the binary it can execute, in a directory
/// it owns); run as anyone else, it runs as that user. Never skipped.
final class TransientFileSystemTests: XCTestCase {
    let app = "org.chatvault.fstests"

    /// A work directory the unprivileged user owns, and how to run the CLI as that user.
    struct Unprivileged {
        let scratch = TemporaryDirectory()
        let work: String
        let binary: String
        let prefix: [String]
        let environment: [String: String]

        init() throws {
            work = scratch.path + "/work"
            XCTAssertEqual(mkdir(work, 0o700), 0)
            var uid = getuid(), gid = getgid()
            var prefix: [String] = []
            if geteuid() == 0 {
                let setpriv = try XCTUnwrap(Subprocess.which("setpriv"), "setpriv (util-linux) is needed to drop root")
                let nobody = try XCTUnwrap(getpwnam("nobody"), "no user nobody")
                uid = nobody.pointee.pw_uid
                gid = nobody.pointee.pw_gid
                prefix = [setpriv, "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups"]
                chmod(scratch.path, 0o711)
                XCTAssertEqual(chown(work, uid, gid), 0)
            }
            // A copy of the CLI the user can certainly execute (the build directory may be private).
            binary = work + "/chatvault"
            try FileManager.default.copyItem(atPath: CLI.binary, toPath: binary)
            chmod(binary, 0o755)
            XCTAssertEqual(chown(binary, uid, gid), 0)
            self.prefix = prefix
            var environment = ProcessInfo.processInfo.environment
            for name in ["DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"] {
                environment[name] = nil
            }
            environment["HOME"] = work
            environment["TMPDIR"] = work
            self.environment = environment
        }

        var root: String { work + "/root" }
        var keys: String { work + "/keys" }

        /// Runs `chatvault verb … --json` as the user; the JSON report.
        func run(_ verb: String, _ arguments: [String], app: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
            let common = ["--dir", root, "--user", "u", "--keystore", "file", "--key-dir", keys, "--app", app, "--json"]
            let result = try Subprocess.run(prefix + [binary, verb] + arguments + common, environment: environment)
            let object = try? JSONSerialization.jsonObject(with: result.stdout) as? [String: Any]
            return try XCTUnwrap(object, "chatvault \(verb) (status \(result.status)): \(String(decoding: result.stderr.suffix(400), as: UTF8.self))",
                                 file: file, line: line)
        }

        /// The one cache directory under the root.
        func cacheDirectory() throws -> String {
            root + "/" + (try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: root).first))
        }
    }

    private func names(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    private func bytes(_ directory: String) -> [Data?] {
        ["cache.db", "manifest.json"].map { FileManager.default.contents(atPath: "\(directory)/\($0)") }
    }

    private func assertReadyWithEverything(_ report: [String: Any], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(report["outcome"] as? String, "ready", "\(report)", file: file, line: line)
        XCTAssertEqual(report["messages"] as? Int, 30, file: file, line: line)
        XCTAssertEqual(report["pending"] as? Int, 2, file: file, line: line)
        XCTAssertEqual((report["resets"] as? [Any])?.count, 0, "\(report)", file: file, line: line)
    }

    func testAReadOnlyDatabaseFileIsReadOnlyAndLeavesNoUnusableShmBehind() throws {
        let user = try Unprivileged()
        XCTAssertEqual(try user.run("seed", ["--messages", "30", "--pending", "2"], app: app)["messages"] as? Int, 30)
        let dir = try user.cacheDirectory()
        let files = names(dir)
        XCTAssertFalse(files.contains("cache.db-shm"), "closed cleanly: \(files)")
        let before = bytes(dir)
        XCTAssertEqual(chmod("\(dir)/cache.db", 0o400), 0)

        let readOnly = try user.run("open", [], app: app)
        XCTAssertEqual(readOnly["outcome"] as? String, "unavailable", "\(readOnly)")
        XCTAssertEqual(readOnly["unavailableReason"] as? String, "readOnly", "\(readOnly)")
        XCTAssertEqual((readOnly["resets"] as? [Any])?.count, 0)
        // The refusal is journalled beside the cache (audit.json, moved inside at the next open);
        // nothing else appears.
        XCTAssertEqual(names(dir), (files + [AuditJournal.fileName]).sorted(),
                       "no -shm or -wal left behind (one with the file's 0400 would outlive the condition)")
        XCTAssertEqual(bytes(dir), before, "the database and manifest are untouched")

        XCTAssertEqual(chmod("\(dir)/cache.db", 0o600), 0)
        assertReadyWithEverything(try user.run("open", [], app: app))
        XCTAssertFalse(names(dir).contains("quarantine"))
    }

    func testAReadOnlyCacheDirectoryIsReadOnlyNotUnclassified() throws {
        let user = try Unprivileged()
        XCTAssertEqual(try user.run("seed", ["--messages", "30", "--pending", "2"], app: app)["messages"] as? Int, 30)
        let dir = try user.cacheDirectory()
        let files = names(dir)
        let before = bytes(dir)
        XCTAssertEqual(chmod(dir, 0o500), 0)

        for _ in 0..<3 {
            let readOnly = try user.run("open", [], app: app)
            XCTAssertEqual(readOnly["outcome"] as? String, "unavailable", "\(readOnly)")
            XCTAssertEqual(readOnly["unavailableReason"] as? String, "readOnly", "\(readOnly)")
            XCTAssertEqual((readOnly["resets"] as? [Any])?.count, 0)
        }
        XCTAssertEqual(names(dir), files)
        XCTAssertEqual(bytes(dir), before)

        XCTAssertEqual(chmod(dir, 0o700), 0)
        let status = try user.run("status", [], app: app)
        XCTAssertEqual((status["manifest"] as? [String: Any])?["consecutiveUnclassifiedFailures"] as? Int, 0,
                       "a read-only directory never counts toward escalation: \(status)")
        assertReadyWithEverything(try user.run("open", [], app: app))
        XCTAssertFalse(names(dir).contains("quarantine"))
    }
}
