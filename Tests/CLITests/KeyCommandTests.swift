import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore
import XCTest

/// The key-management verbs end to end, against real files and the real Secret Service: what they
/// print (key ids, never keys or secrets), where a secret may go, their typed failures and exit codes.
final class KeyCommandTests: XCTestCase {
    struct NoKey: Error {}
    let app = "org.chatvault.clitests.keys"

    /// Runs the CLI with `input` as standard input.
    private func run(_ args: [String], stdin input: String) throws -> CLI.Run {
        let scratch = TemporaryDirectory()
        let path = scratch.path + "/stdin"
        try input.write(toFile: path, atomically: true, encoding: .utf8)
        return try CLI.run(args, wrapper: ["/bin/sh", "-c", "exec \"$0\" \"$@\" < \"\(path)\""])
    }

    private func keyHex(_ store: any KeyStore, dir: String, user: String) throws -> String {
        let directory = CacheDirectory(root: dir, account: CacheDirectory.account(applicationId: app, userId: user))
        guard case .valid(let manifest) = ManifestFile.read(directory: directory.path),
              case .found(let key, _) = store.lookup(KeyItemID(applicationId: app, account: directory.account, cacheId: manifest.cacheId)) else {
            throw NoKey()
        }
        return key.withHexDigits { String(decoding: $0, as: UTF8.self) }
    }

    func testRotateAndMoveWithTheRealSecretService() throws {
        let dir = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let base = ["--dir", dir.path, "--user", "kim", "--app", app, "--key-dir", keys.path + "/keys"]
        XCTAssertEqual(try CLI.run(["seed"] + base + ["--messages", "40", "--pending", "2"]).status, 0)
        let oldHex = try keyHex(SecretServiceKeyStore(), dir: dir.path, user: "kim")

        let rotated = try CLI.run(["key", "rotate"] + base + ["--json"])
        XCTAssertEqual(rotated.status, 0, rotated.stderr)
        let report = try rotated.json()
        XCTAssertEqual(report["outcome"] as? String, "rotated")
        XCTAssertNotEqual(report["oldKeyId"] as? String, report["newKeyId"] as? String)
        XCTAssertEqual(report["messages"] as? Int, 40)
        XCTAssertEqual(report["pending"] as? Int, 2)
        let newHex = try keyHex(SecretServiceKeyStore(), dir: dir.path, user: "kim")
        XCTAssertNotEqual(oldHex, newHex)
        for hex in [oldHex, newHex] {
            XCTAssertFalse((rotated.stdout + rotated.stderr).lowercased().contains(hex.lowercased()), "key hex printed")
        }

        let moved = try CLI.run(["key", "move"] + base + ["--to", "file", "--json"])
        XCTAssertEqual(moved.status, 0, moved.stderr)
        XCTAssertEqual((try moved.json()["status"] as? [String: Any])?["keyStorage"] as? String, "SOFTWARE")
        // The default session (Secret Service only) no longer has the key's store: named, not reset.
        let elsewhere = try CLI.run(["open"] + base + ["--json"]).json()
        XCTAssertEqual(elsewhere["outcome"] as? String, "unavailable")
        XCTAssertEqual(elsewhere["unavailableReason"] as? String, "keyStorageNotAccepted")
        let withFile = try CLI.run(["open"] + base + ["--keystore", "file", "--json"]).json()
        XCTAssertEqual(withFile["messages"] as? Int, 40)
        XCTAssertEqual((withFile["resets"] as? [Any])?.count, 0)
        let back = try CLI.run(["key", "move"] + base + ["--to", "secret-service", "--keystore", "file", "--json"])
        XCTAssertEqual(back.status, 0, back.stderr)
        XCTAssertEqual((try back.json()["status"] as? [String: Any])?["keyStorage"] as? String, "KEYSTORE")
        let again = try CLI.run(["key", "move"] + base + ["--to", "secret-service", "--json"])
        XCTAssertEqual(again.status, 1)
        XCTAssertEqual(try again.json()["error"] as? String, "alreadyInStore")

        // Failures: no cache (exit 1, typed), usage (exit 2).
        let none = try CLI.run(["key", "rotate", "--dir", dir.path, "--user", "nobody", "--app", app, "--json"])
        XCTAssertEqual(none.status, 1)
        XCTAssertEqual(try none.json()["error"] as? String, "noCache")
        XCTAssertFalse(FileManager.default.fileExists(atPath: CacheDirectory(root: dir.path, account: CacheDirectory.account(applicationId: app, userId: "nobody")).path),
                       "no cache is created to be rotated")
        for args in [["key"], ["key", "spin"] + base, ["key", "move"] + base + ["--to", "usb-stick"], ["key", "rotate", "--user", "kim"]] {
            XCTAssertEqual(try CLI.run(args).status, 2, args.joined(separator: " "))
        }
    }

    func testARecoverySecretIsShownOnceAndBringsTheCacheBack() throws {
        let dir = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let keyDir = keys.path + "/keys"
        let base = ["--dir", dir.path, "--user", "lee", "--app", app, "--keystore", "file", "--key-dir", keyDir]
        XCTAssertEqual(try CLI.run(["seed"] + base + ["--messages", "25", "--pending", "3"]).status, 0)
        let directory = CacheDirectory(root: dir.path, account: CacheDirectory.account(applicationId: app, userId: "lee"))

        // Not to a pipe: the secret would end up in a log.
        let piped = try CLI.run(["key", "recovery-secret"] + base)
        XCTAssertEqual(piped.status, 2)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.recovery), "nothing made")

        let secretFile = keys.path + "/secret.txt"
        let made = try CLI.run(["key", "recovery-secret"] + base + ["--out", secretFile, "--json"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let secret = try String(contentsOfFile: secretFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(secret.split(separator: "-").count, 9)
        XCTAssertFalse(made.stdout.contains(secret), "the secret is not in the JSON")
        var st = stat()
        XCTAssertEqual(lstat(secretFile, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        let recoveryFile = FileManager.default.contents(atPath: directory.recovery)
        XCTAssertEqual(try CLI.run(["key", "recovery-secret"] + base + ["--out", secretFile]).status, 1, "never over an existing file")
        XCTAssertEqual(FileManager.default.contents(atPath: directory.recovery), recoveryFile, "the refused run made no new secret")

        // The key file goes: the next open resets and quarantines.
        guard case .valid(let manifest) = ManifestFile.read(directory: directory.path) else { return XCTFail("no manifest") }
        try SoftwareKeyStore(directory: keyDir).delete(KeyItemID(applicationId: app, account: directory.account, cacheId: manifest.cacheId))
        let reset = try CLI.run(["open"] + base + ["--json"]).json()
        XCTAssertEqual((reset["resets"] as? [[String: Any]])?.first?["reason"] as? String, "keyLost")
        let listed = try CLI.run(["quarantine", "list"] + base + ["--json"])
        let entries = try XCTUnwrap(try listed.json()["entries"] as? [[String: Any]])
        XCTAssertEqual(entries.count, 1)
        XCTAssertEqual(entries.first?["recoverableWithSecret"] as? Bool, true)
        XCTAssertEqual(entries.first?["keyPresent"] as? Bool, false)
        let id = try XCTUnwrap(entries.first?["id"] as? String)
        let notPresent = try CLI.run(["quarantine", "restore", id] + base + ["--json"])
        XCTAssertEqual(notPresent.status, 1)
        XCTAssertEqual(try notPresent.json()["error"] as? String, "keyNotPresent")

        let wrong = try run(["recover"] + base + ["--json"], stdin: try RecoverySecret.generate().formatted + "\n")
        XCTAssertEqual(wrong.status, 1)
        XCTAssertEqual(try wrong.json()["error"] as? String, "wrongSecret")
        let typo = try run(["recover"] + base, stdin: "AAAA-" + secret.dropFirst(5) + "\n")
        XCTAssertEqual(typo.status, 1)
        XCTAssertTrue(typo.stderr.contains("typo") || typo.stderr.contains("checksum"), typo.stderr)
        XCTAssertFalse(typo.stderr.contains(String(secret.dropFirst(5))), "the secret is not echoed")

        let recovered = try run(["recover"] + base + ["--json"], stdin: secret.lowercased() + "\n")
        XCTAssertEqual(recovered.status, 0, recovered.stderr + recovered.stdout)
        let report = try recovered.json()
        XCTAssertEqual(report["messages"] as? Int, 25)
        XCTAssertEqual(report["pending"] as? Int, 3)
        let reopened = try CLI.run(["open"] + base + ["--json"]).json()
        XCTAssertEqual(reopened["messages"] as? Int, 25)
        XCTAssertEqual((reopened["resets"] as? [Any])?.count, 0)
    }

    func testExportAndImportToAnotherMachine() throws {
        let old = TemporaryDirectory(), new = TemporaryDirectory(), keys = TemporaryDirectory()
        let from = ["--dir", old.path, "--user", "max", "--app", app, "--keystore", "file", "--key-dir", keys.path + "/old"]
        let to = ["--dir", new.path, "--user", "max", "--app", app, "--keystore", "file", "--key-dir", keys.path + "/new"]
        XCTAssertEqual(try CLI.run(["seed"] + from + ["--messages", "30", "--pending", "2"]).status, 0)
        let file = keys.path + "/max.cvx", secretFile = keys.path + "/max.secret"
        XCTAssertEqual(try CLI.run(["export"] + from + ["--to", file]).status, 2, "the secret is not printed to a pipe")
        XCTAssertFalse(FileManager.default.fileExists(atPath: file))
        let exported = try CLI.run(["export"] + from + ["--to", file, "--secret-out", secretFile, "--json"])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let secret = try String(contentsOfFile: secretFile, encoding: .utf8)
        XCTAssertFalse(exported.stdout.contains(secret.trimmingCharacters(in: .whitespacesAndNewlines)))
        XCTAssertFalse(String(decoding: FileManager.default.contents(atPath: file) ?? Data(), as: UTF8.self).contains("chatvault-seed-marker"))

        let garbage = keys.path + "/garbage.cvx"
        try Data("CHATVAULT-EXPORT\n\u{0}\u{0}\u{0}\u{5}{}{}{}".utf8).write(to: URL(fileURLWithPath: garbage))
        let refused = try run(["import"] + to + ["--from", garbage, "--json"], stdin: secret)
        XCTAssertEqual(refused.status, 1)
        XCTAssertEqual(try refused.json()["error"] as? String, "fileUnusable")

        let imported = try run(["import"] + to + ["--from", file, "--json"], stdin: secret)
        XCTAssertEqual(imported.status, 0, imported.stderr)
        let opened = try CLI.run(["open"] + to + ["--json"]).json()
        XCTAssertEqual(opened["messages"] as? Int, 30)
        XCTAssertEqual(opened["pending"] as? Int, 2)
    }
}
