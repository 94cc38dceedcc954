import Foundation
import XCTest
import ChatVault
import VaultKeys
import VaultStore
import ChatVaultTesting

/// `chatvault open` on a cache too large for the open's own integrity check: the audit waits for
/// the background check instead of reporting a damaged cache as healthy (ThreatModel C19).
final class OpenIntegrityTests: XCTestCase {
    let app = "org.chatvault.clitests.integrity"

    override func tearDown() {
        _ = try? SecretServiceKeyStore().deleteAll(applicationId: app)
        super.tearDown()
    }

    func testOpenWaitsForTheBackgroundCheckOfALargeDamagedCache() throws {
        let dir = TemporaryDirectory()
        XCTAssertEqual(try CLI.run(["seed", "--dir", dir.path, "--user", "gail", "--messages", "12000", "--pending", "3", "--app", app]).status, 0)
        let database = try XCTUnwrap(databasePath(dir.path))
        XCTAssertGreaterThan(Damage.fileSize(database), 1 << 20, "larger than the synchronous check limit")

        let healthy = try CLI.run(["open", "--dir", dir.path, "--user", "gail", "--app", app, "--json"]).json()
        XCTAssertEqual(healthy["integrityCheck"] as? String, "intact")
        XCTAssertEqual((healthy["resets"] as? [Any])?.count, 0)

        Damage.middlePage(database)
        let run = try CLI.run(["open", "--dir", dir.path, "--user", "gail", "--app", app, "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let report = try run.json()
        XCTAssertEqual(report["integrityCheck"] as? String, "damaged")
        XCTAssertEqual(report["outcome"] as? String, "ready", "the replacement cache")
        let resets = try XCTUnwrap(report["resets"] as? [[String: Any]])
        XCTAssertEqual(resets.map { $0["reason"] as? String }, ["corrupted"], "the damage is reported, not a plain ready")
        XCTAssertEqual(resets.first?["pendingMessagesLost"] as? Int, 0)
        XCTAssertEqual(report["pending"] as? Int, 3, "the unsent messages were salvaged")
        XCTAssertEqual(report["messages"] as? Int, 0)
    }

    private func databasePath(_ root: String) -> String? {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return names.map { "\(root)/\($0)/cache.db" }.first { FileManager.default.fileExists(atPath: $0) }
    }
}
