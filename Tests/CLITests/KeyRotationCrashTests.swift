import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore
import XCTest

/// Rotation under real crashes: `chatvault key rotate` is SIGKILLed at random instants of the
/// change (counted from the moment it is logged in and about to start), at least 200 times
/// (`CHATVAULT_ROTATION_KILLS` raises it: `Scripts/rotation-crash` runs 2,000). After every kill
/// the cache must open `ready` with no reset, the same cache id, every seeded message and unsent
/// message, and no key-change record left; a rotation that reported success must have left the
/// key id it reported. The kills must land inside the change (a manifest still recording it),
/// both before and after the swap.
final class KeyRotationCrashTests: XCTestCase {
    let app = "org.chatvault.clitests.rotation"
    let user = "rotating-user"
    static let seed: UInt64 = 0x2077_a7e5
    static var kills: Int {
        Int(ProcessInfo.processInfo.environment["CHATVAULT_ROTATION_KILLS"] ?? "") ?? 200
    }
    static let messages = 1500
    static let pending = 6

    func testEveryAcknowledgedRowSurvivesRotationsKilledAtRandomInstants() throws {
        try crashLoop(keystore: "file", kills: Self.kills)
    }

    /// The same with the real Secret Service (fewer rounds: each login asks the keyring).
    func testRotationsKilledWithTheKeyInTheSecretService() throws {
        try crashLoop(keystore: "secret-service", kills: 20)
    }

    private func crashLoop(keystore: String, kills target: Int) throws {
        let root = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let keyDirectory = "\(keys.path)/keys"
        let options = ["--dir", root.path, "--user", user, "--app", app, "--keystore", keystore, "--key-dir", keyDirectory]
        let seed = try CLI.run(["seed"] + options + ["--messages", "\(Self.messages)", "--pending", "\(Self.pending)"])
        XCTAssertEqual(seed.status, 0, seed.stderr)
        let directory = CacheDirectory(root: root.path, account: CacheDirectory.account(applicationId: app, userId: user))
        let stores: [any KeyStore] = keystore == "file" ? [SoftwareKeyStore(directory: keyDirectory)] : [SecretServiceKeyStore()]
        let cacheId = try verify(directory, stores: stores, round: 0)

        // How long a whole rotation takes here, so the kills spread over it.
        let timed = try CLI.run(["key", "rotate"] + options + ["--json"])
        XCTAssertEqual(timed.status, 0, timed.stderr)
        let seconds = try XCTUnwrap(try timed.json()["seconds"] as? Double)
        let window = max(5, Int(seconds * 1300))

        var random = SeededGenerator(seed: Self.seed)
        var killed = 0, finished = 0, rounds = 0
        var phases: [String: Int] = [:]
        while killed < target && rounds < target * 3 {
            rounds += 1
            let delay = Int(random.next() % UInt64(window))
            let run = try KilledRun.start([CLI.binary, "key", "rotate"] + options + ["--json", "--announce"],
                                          killAfter: .milliseconds(delay), once: "changing")
            var reportedKeyId: String?
            if run.killed {
                killed += 1
                if case .valid(let manifest) = ManifestFile.read(directory: directory.path) {
                    let phase = manifest.keyChange.map { "\($0.phase.rawValue)" } ?? "none"
                    phases[phase, default: 0] += 1
                }
            } else {
                XCTAssertEqual(run.status, 0, "round \(rounds): \(run.stderr)")
                finished += 1
                let json = run.stdout.split(separator: "\n").drop { $0 != "{" }.joined(separator: "\n")
                let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
                reportedKeyId = object?["newKeyId"] as? String
                XCTAssertNotNil(reportedKeyId, "round \(rounds): \(run.stdout)")
            }
            XCTAssertEqual(try verify(directory, stores: stores, round: rounds, keyId: reportedKeyId), cacheId, "round \(rounds): the cache was replaced")
        }
        XCTAssertGreaterThanOrEqual(killed, target, "only \(killed) of \(rounds) rounds were killed")
        let midChange = phases.filter { $0.key != "none" }.values.reduce(0, +)
        XCTAssertGreaterThan(midChange, 0, "no kill landed inside a change: \(phases)")
        if target >= 100 {
            XCTAssertGreaterThan(phases["exporting", default: 0], 0, "no kill before the swap: \(phases)")
        }
        print("KeyRotationCrashTests[\(keystore)]: \(rounds) rounds, \(killed) killed (phases found: \(phases.sorted { $0.key < $1.key })), \(finished) finished; every round opened ready with \(Self.messages) messages and \(Self.pending) unsent")
    }

    /// Opens the cache in this process: ready, no reset, every row, no change in progress.
    private func verify(_ directory: CacheDirectory, stores: [any KeyStore], round: Int, keyId: String? = nil) throws -> String {
        let config = StoreConfiguration(directory: directory, applicationId: app, account: directory.account, keyLabel: "chatvault offline cache key",
                                        encryption: true, failureBehavior: .onlineOnly, keyStores: stores)
        let report = CacheOpener.open(config)
        XCTAssertEqual(report.outcome, .ready, "round \(round): \(report.notes)")
        XCTAssertEqual(report.resets, [], "round \(round): \(report.notes)")
        let cache = try XCTUnwrap(report.cache, "round \(round)")
        defer { cache.close() }
        let counts = try cache.reader.sync { db in try CacheRows.counts(db) }
        XCTAssertEqual(counts.messages, Self.messages, "round \(round)")
        XCTAssertEqual(counts.pending, Self.pending, "round \(round)")
        XCTAssertNil(cache.manifest.keyChange, "round \(round)")
        if let keyId { XCTAssertEqual(cache.manifest.keyId, keyId, "round \(round): the reported rotation did not stick") }
        return cache.cacheId
    }
}
