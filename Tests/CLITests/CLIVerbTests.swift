import Foundation
import XCTest
import ChatVault
import VaultKeys
import VaultStore
import ChatVaultTesting

/// Every verb of the CLI, run as a separate process against real files and the test keyring.
final class CLIVerbTests: XCTestCase {
    let app = "org.chatvault.clitests"

    override func tearDown() {
        _ = try? SecretServiceKeyStore().deleteAll(applicationId: app)
        super.tearDown()
    }

    func testSeedThenStatusShowsAnEncryptedPrivateCacheWithoutTheMarker() throws {
        let dir = TemporaryDirectory()
        let seed = try CLI.run(["seed", "--dir", dir.path, "--user", "alice", "--messages", "500", "--pending", "7",
                                "--marker", "CANARY-CLI-1", "--app", app, "--json"])
        XCTAssertEqual(seed.status, 0, seed.stderr)
        let seeded = try seed.json()
        XCTAssertEqual(seeded["messages"] as? Int, 500)
        XCTAssertEqual(seeded["pending"] as? Int, 7)
        XCTAssertEqual(seeded["encrypted"] as? Bool, true)
        XCTAssertEqual(seeded["keyStorage"] as? String, "KEYSTORE")
        let cacheId = try XCTUnwrap(seeded["cacheId"] as? String)

        let status = try CLI.run(["status", "--dir", dir.path, "--marker", "CANARY-CLI-1", "--app", app, "--json"])
        XCTAssertEqual(status.status, 0, status.stderr)
        let report = try status.json()
        XCTAssertEqual(report["cacheId"] as? String, cacheId)
        XCTAssertEqual(report["encrypted"] as? Bool, true)
        XCTAssertEqual(report["databaseHeader"] as? String, "encrypted")
        XCTAssertEqual(report["keyStorage"] as? String, "KEYSTORE")
        XCTAssertEqual(report["keyPresent"] as? Bool, true)
        XCTAssertEqual(report["plaintextHits"] as? [String], [])
        XCTAssertEqual(report["inUse"] as? Bool, false)
        let attributes = try XCTUnwrap(report["keyItemAttributes"] as? [String: String])
        XCTAssertEqual(attributes["xdg:schema"], "org.chatvault.CacheKey")
        XCTAssertEqual(attributes["application"], app)
        XCTAssertEqual(attributes["cache-id"], cacheId)
        let files = try XCTUnwrap(report["files"] as? [[String: Any]])
        XCTAssertTrue(files.contains { $0["path"] as? String == "cache.db" })
        for file in files {
            let expected = (file["kind"] as? String) == "directory" ? "0700" : "0600"
            XCTAssertEqual(file["mode"] as? String, expected, "\(file["path"] ?? "")")
        }
        // The attributes find the item with the desktop's own tool.
        let search = try Subprocess.run(["/usr/bin/secret-tool", "search", "--all", "application", app, "cache-id", cacheId],
                                        environment: ProcessInfo.processInfo.environment)
        XCTAssertTrue(String(decoding: search.stdout + search.stderr, as: UTF8.self).contains(cacheId))
    }

    func testStatusFindsTheMarkerInAPlaintextCache() throws {
        let dir = TemporaryDirectory()
        XCTAssertEqual(try CLI.run(["seed", "--dir", dir.path, "--user", "bob", "--encryption", "off", "--marker", "CANARY-CLI-2",
                                    "--app", app]).status, 0)
        let report = try CLI.run(["status", "--dir", dir.path, "--marker", "CANARY-CLI-2", "--app", app, "--json"]).json()
        XCTAssertEqual(report["encrypted"] as? Bool, false)
        XCTAssertEqual(report["keyStorage"] as? String, "NONE")
        XCTAssertEqual(report["plaintextHits"] as? [String], ["cache.db"])
    }

    func testOpenReportsReadyWithRowsAndTheSixStatusKeys() throws {
        let dir = TemporaryDirectory()
        XCTAssertEqual(try CLI.run(["seed", "--dir", dir.path, "--user", "carol", "--messages", "40", "--pending", "3", "--app", app]).status, 0)
        let run = try CLI.run(["open", "--dir", dir.path, "--user", "carol", "--app", app, "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let report = try run.json()
        XCTAssertEqual(report["outcome"] as? String, "ready")
        XCTAssertTrue(report["unavailableReason"] is NSNull)
        XCTAssertEqual((report["resets"] as? [Any])?.count, 0)
        XCTAssertEqual(report["offlineEnabled"] as? Bool, true)
        XCTAssertEqual(report["messages"] as? Int, 40)
        XCTAssertEqual(report["pending"] as? Int, 3)
        XCTAssertNotNil(report["cacheId"] as? String)
        let status = try XCTUnwrap(report["status"] as? [String: Any])
        XCTAssertEqual(Set(status.keys), ["enabled", "atRest", "keyStorage", "cipherAvailable", "cipher", "leakage"])
        XCTAssertEqual(status["atRest"] as? String, "SQLCIPHER")
        XCTAssertEqual(status["cipher"] as? String, "AES-256-CBC/HMAC-SHA1")
    }

    func testOpenReportsAKeyLostResetWithTheListenerCall() throws {
        let dir = TemporaryDirectory()
        let seeded = try CLI.run(["seed", "--dir", dir.path, "--user", "dave", "--pending", "2", "--app", app, "--json"]).json()
        let cacheId = try XCTUnwrap(seeded["cacheId"] as? String)
        let account = CacheDirectory.account(applicationId: app, userId: "dave")
        try SecretServiceKeyStore().delete(KeyItemID(applicationId: app, account: account, cacheId: cacheId))
        let report = try CLI.run(["open", "--dir", dir.path, "--user", "dave", "--app", app, "--json"]).json()
        XCTAssertEqual(report["outcome"] as? String, "ready")
        let resets = try XCTUnwrap(report["resets"] as? [[String: Any]])
        XCTAssertEqual(resets.count, 1)
        XCTAssertEqual(resets.first?["reason"] as? String, "keyLost")
        XCTAssertEqual(resets.first?["pendingMessagesLost"] as? Int, -1)
        XCTAssertEqual(report["listenerCalls"] as? Int, 1)
        XCTAssertNotEqual(report["cacheId"] as? String, cacheId)
    }

    func testOpenWithoutASessionBus() throws {
        let dir = TemporaryDirectory()
        let noBus: [String: String?] = ["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(dir.path)/no-such-socket", "DISPLAY": nil]
        // No cache yet: encryption cannot run.
        let online = try CLI.run(["open", "--dir", dir.path, "--user", "erin", "--app", app, "--json"], environment: noBus).json()
        XCTAssertEqual(online["outcome"] as? String, "onlineOnly")
        XCTAssertEqual(online["offlineEnabled"] as? Bool, false)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), [], "onlineOnly writes nothing")
        let fallback = try CLI.run(["open", "--dir", dir.path, "--user", "erin", "--app", app, "--failure-behavior", "plaintextFallback",
                                    "--json"], environment: noBus).json()
        XCTAssertEqual(fallback["outcome"] as? String, "plaintextFallback")
        XCTAssertEqual((fallback["status"] as? [String: Any])?["atRest"] as? String, "NONE")
        XCTAssertEqual((fallback["status"] as? [String: Any])?["enabled"] as? Bool, true)
    }

    func testAnEncryptedCacheWithoutItsSecretServiceIsUnavailableNotReset() throws {
        let dir = TemporaryDirectory()
        XCTAssertEqual(try CLI.run(["seed", "--dir", dir.path, "--user", "frank", "--messages", "9", "--app", app]).status, 0)
        let before = FileManager.default.contents(atPath: try XCTUnwrap(databasePath(dir.path)))
        for (name, wrapper, env) in [
            ("no bus", [String](), ["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(dir.path)/none"] as [String: String?]),
            ("no provider", try CLI.withoutSecretService(dir.path), [:]),
        ] {
            for behavior in ["onlineOnly", "plaintextFallback"] {
                let report = try CLI.run(["open", "--dir", dir.path, "--user", "frank", "--app", app, "--failure-behavior", behavior, "--json"],
                                         wrapper: wrapper, environment: env).json()
                XCTAssertEqual(report["outcome"] as? String, "unavailable", "\(name) \(behavior)")
                XCTAssertEqual(report["unavailableReason"] as? String, "keyStoreMissing")
                let detail = report["detail"] as? String ?? ""
                XCTAssertTrue(detail.contains("secret-service") && detail.contains(name == "no bus" ? "noBus" : "noProvider"), detail)
                XCTAssertEqual((report["resets"] as? [Any])?.count, 0)
            }
        }
        XCTAssertEqual(FileManager.default.contents(atPath: try XCTUnwrap(databasePath(dir.path))), before, "untouched")
        let back = try CLI.run(["open", "--dir", dir.path, "--user", "frank", "--app", app, "--json"]).json()
        XCTAssertEqual(back["messages"] as? Int, 9)
    }

    func testNoProviderWithoutACacheUnderOnlineOnlyAndPlaintextFallback() throws {
        let dir = TemporaryDirectory()
        let wrapper = try CLI.withoutSecretService(dir.path)
        let root = "\(dir.path)/root"
        let online = try CLI.run(["open", "--dir", root, "--user", "gina", "--app", app, "--json"], wrapper: wrapper).json()
        XCTAssertEqual(online["outcome"] as? String, "onlineOnly")
        XCTAssertFalse(FileManager.default.fileExists(atPath: root))
        let fallback = try CLI.run(["open", "--dir", root, "--user", "gina", "--app", app, "--failure-behavior", "plaintextFallback", "--json"],
                                   wrapper: wrapper).json()
        XCTAssertEqual(fallback["outcome"] as? String, "plaintextFallback")
        XCTAssertEqual(fallback["offlineEnabled"] as? Bool, true)
    }

    func testASecondProcessGetsAClearErrorAndChangesNothing() async throws {
        let dir = TemporaryDirectory()
        XCTAssertEqual(try CLI.run(["seed", "--dir", dir.path, "--user", "hank", "--messages", "12", "--app", app]).status, 0)
        let config = OfflineConfig.Builder().setEnabled(true).setEncryption(true).build()
        let vault = try OfflineVault(config: config, settings: VaultSettings(applicationId: app, rootDirectory: dir.path,
                                                                             callbackExecutor: .queue(DispatchQueue(label: "t"))))
        let held = await vault.login(userId: "hank")
        XCTAssertEqual(held.state, .ready)
        let database = try XCTUnwrap(databasePath(dir.path))
        let manifest = (database as NSString).deletingLastPathComponent + "/manifest.json"
        let before = [FileManager.default.contents(atPath: database), FileManager.default.contents(atPath: manifest)]
        let second = try CLI.run(["open", "--dir", dir.path, "--user", "hank", "--app", app, "--json"])
        XCTAssertEqual(second.status, 0)
        let report = try second.json()
        XCTAssertEqual(report["outcome"] as? String, "unavailable")
        XCTAssertEqual(report["unavailableReason"] as? String, "cacheInUse")
        XCTAssertTrue((report["detail"] as? String ?? "").contains("pid \(getpid())"))
        XCTAssertEqual([FileManager.default.contents(atPath: database), FileManager.default.contents(atPath: manifest)], before)
        let status = try CLI.run(["status", "--dir", dir.path, "--app", app, "--json"]).json()
        XCTAssertEqual(status["inUse"] as? Bool, true)
        await vault.logout()
    }

    func testNoKeyMaterialOrMessageTextInAnyOutput() throws {
        let dir = TemporaryDirectory()
        let marker = "CANARY-NEVER-PRINTED"
        let seeded = try CLI.run(["seed", "--dir", dir.path, "--user", "ivy", "--pending", "2", "--marker", marker, "--app", app, "--json"])
        let cacheId = try XCTUnwrap(try seeded.json()["cacheId"] as? String)
        let account = CacheDirectory.account(applicationId: app, userId: "ivy")
        guard case .found(let key, _) = SecretServiceKeyStore().lookup(KeyItemID(applicationId: app, account: account, cacheId: cacheId)) else {
            return XCTFail("no key item")
        }
        let hex = key.withHexDigits { String(decoding: $0, as: UTF8.self) }
        var outputs = [seeded]
        for args in [["open", "--dir", dir.path, "--user", "ivy"], ["status", "--dir", dir.path, "--marker", marker],
                     ["open", "--dir", dir.path, "--user", "ivy", "--encryption", "off"]] {
            outputs.append(try CLI.run(args + ["--app", app]))
            outputs.append(try CLI.run(args + ["--app", app, "--json"]))
        }
        for run in outputs {
            let text = run.stdout + run.stderr
            XCTAssertFalse(text.contains(hex), "key hex printed")
            XCTAssertFalse(text.contains(hex.prefix(16)), "part of the key printed")
            XCTAssertFalse(text.contains(marker), "message text printed")
            XCTAssertFalse(text.contains("ivy"), "user id printed in clear")
        }
    }

    func testErrorsAreOneClearLineAndANonZeroExit() throws {
        let cases: [([String], Int32, String)] = [
            (["frobnicate"], 2, "unknown verb"),
            (["seed", "--user", "x"], 2, "--dir is required"),
            (["open", "--dir", "/tmp", "--user", "x", "--encryption", "maybe"], 2, "--encryption must be one of"),
            (["seed", "--dir", "/tmp/x", "--user", "x", "--messages", "-4"], 2, "--messages must be"),
            (["open", "--dir", "/tmp", "--user", "x", "--colour", "red"], 2, "unknown option --colour"),
            (["status", "--dir", "/nonexistent/chatvault"], 1, "no cache found"),
            (["seed", "--dir", "/tmp/x", "--user", "x", "--app", "../evil"], 2, "--app must be"),
        ]
        for (args, status, text) in cases {
            let run = try CLI.run(args)
            XCTAssertEqual(run.status, status, args.joined(separator: " "))
            XCTAssertTrue(run.stderr.contains(text), "\(args): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, "one line: \(run.stderr)")
            XCTAssertEqual(run.stdout, "")
        }
    }

    func testSeedRefusesWhenEncryptionCannotRun() throws {
        let dir = TemporaryDirectory()
        let run = try CLI.run(["seed", "--dir", dir.path, "--user", "jo", "--app", app],
                              environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(dir.path)/none"])
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.stderr.contains("onlineOnly"), run.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), [])
    }

    private func databasePath(_ root: String) -> String? {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return names.map { "\(root)/\($0)/cache.db" }.first { FileManager.default.fileExists(atPath: $0) }
    }
}
