import Foundation
import XCTest
import VaultKeys

/// The scenario catalogue, end to end, as CI and users run it.
final class ScenarioCommandTests: XCTestCase {
    static let names = ["fresh-create", "reopen", "key-lost", "wrong-key", "damaged-header", "damaged-middle-page", "truncated-file",
                        "garbage-wal", "deleted-manifest", "encryption-on-to-off", "encryption-off-to-on", "escalation", "locked-keyring",
                        "no-secret-service-online-only", "no-secret-service-plaintext-fallback", "secret-service-gone-later", "second-process",
                        "key-rotate", "key-rotate-interrupted", "key-move", "recover-with-secret", "recover-wrong-secret", "quarantine-restore",
                        "export-import"]

    func testTheWholeCatalogueRunsAgainstTheRealSecretServiceAndCleansUp() throws {
        let run = try CLI.run(["scenarios", "--json"])
        let report = try run.json()
        XCTAssertEqual(run.status, 0, run.stdout)
        XCTAssertEqual(report["passed"] as? Bool, true)
        XCTAssertFalse((run.stdout + run.stderr).contains("chatvault-scenario-marker"), "message text printed")
        XCTAssertFalse((run.stdout + run.stderr).contains("scenario-user@"), "user id printed")
        XCTAssertEqual(report["keystore"] as? String, "secret-service")
        let scenarios = try XCTUnwrap(report["scenarios"] as? [[String: Any]])
        XCTAssertEqual(scenarios.compactMap { $0["name"] as? String }, Self.names)
        for scenario in scenarios {
            XCTAssertEqual(scenario["verdict"] as? String, "ok", "\(scenario["name"] ?? ""): \(scenario["deviations"] ?? "")")
            for field in ["expected", "observed", "listenerCalls", "rowsKept", "offlineEnabled", "milliseconds", "resetReason", "pendingMessagesLost"] {
                XCTAssertNotNil(scenario[field], "\(field) missing")
            }
        }
        let byName = Dictionary(uniqueKeysWithValues: scenarios.map { ($0["name"] as? String ?? "", $0) })
        XCTAssertEqual(byName["key-lost"]?["resetReason"] as? String, "keyLost")
        XCTAssertEqual(byName["damaged-middle-page"]?["pendingMessagesLost"] as? Int, 0)
        XCTAssertEqual((byName["locked-keyring"]?["listenerCalls"] as? [Any])?.count, 0)
        // Scenario key items were removed: nothing is left to delete under their application id.
        XCTAssertGreaterThan(report["removedKeyItems"] as? Int ?? 0, 0)
        XCTAssertEqual(try SecretServiceKeyStore().deleteAll(applicationId: "org.chatvault.scenarios"), 0)
    }

    func testTheCatalogueWithTheMemoryAndFileStores() throws {
        for store in ["memory", "file"] {
            let run = try CLI.run(["scenarios", "--keystore", store, "--json"])
            XCTAssertEqual(run.status, 0, run.stdout)
            let scenarios = try XCTUnwrap(try run.json()["scenarios"] as? [[String: Any]])
            XCTAssertEqual(scenarios.count, Self.names.count)
            let skipped = scenarios.filter { $0["verdict"] as? String == "skipped" }.count
            // Memory: key-move (a key in memory has nowhere to move); file: the Secret Service's own states.
            XCTAssertEqual(skipped, store == "memory" ? 1 : 4, store)
        }
    }

    func testADeviationMakesTheExitStatusNonZero() throws {
        // Without a reachable Secret Service the scenarios that need it cannot hold.
        let run = try CLI.run(["scenarios", "--only", "reopen", "--json"], environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(try run.json()["passed"] as? Bool, false)
    }

    func testTheTableNamesEveryScenario() throws {
        let run = try CLI.run(["scenarios", "--keystore", "memory"])
        XCTAssertEqual(run.status, 0)
        for name in Self.names { XCTAssertTrue(run.stdout.contains(name), name) }
        XCTAssertTrue(run.stdout.contains("23 ok, 0 deviating"), run.stdout)
    }
}
