import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// The engine's lifecycle under retries, a stuck callback executor and recurring failures.
final class LifecycleTests: XCTestCase {
    func testRetryOpenDoesNotMultiplyBackgroundRetries() async throws {
        let h = EngineHarness()
        let vault = try h.vault(retry: RetryPolicy(initialDelay: .milliseconds(400), maximumDelay: .milliseconds(400)))
        h.keyStore.simulate(.locked)
        _ = await vault.login(userId: "alice")
        for _ in 0..<5 { _ = await vault.retryOpen() }
        let before = h.keyStore.callCount
        try await Task.sleep(for: .milliseconds(1300))
        let during = h.keyStore.callCount - before
        // One timer chain at 400 ms gives about 3 attempts in 1.3 s (one availability probe each);
        // six chains would give 15 or more.
        XCTAssertLessThanOrEqual(during, 8, "retries: \(during)")
        XCTAssertGreaterThanOrEqual(during, 1, "the background retry keeps going")
        await vault.logout()
    }

    func testBackgroundRetriesNeverCountTowardEscalation() async throws {
        let h = EngineHarness()
        let first = try h.vault()
        let opened = await first.login(userId: "alice")
        try h.seed(first, messages: 5, pending: 1)
        let directory = try XCTUnwrap(first.cacheDirectory)
        await first.logout()
        // Damage the schema in place: every open fails the same unclassified way.
        let cacheId = try XCTUnwrap(opened.cacheId)
        guard case .found(let key, _) = h.keyStore.lookup(KeyItemID(applicationId: "org.chatvault.tests", account: directory.account, cacheId: cacheId)) else {
            return XCTFail("no key")
        }
        let raw = try DatabaseQueue(path: directory.database, keying: .encrypted(key, .standard()), options: ConnectionOptions(), label: "raw")
        try raw.sync { db in try db.execute("DROP TABLE kv") }
        raw.close()

        let vault = try h.vault(retry: RetryPolicy(initialDelay: .milliseconds(30), maximumDelay: .milliseconds(30)))
        let attempt = await vault.login(userId: "alice")
        guard case .unavailable(.unclassified(_, 1, _)) = attempt.state else { return XCTFail("\(attempt.state)") }
        let calls = h.keyStore.callCount
        try await Task.sleep(for: .milliseconds(600))
        XCTAssertGreaterThan(h.keyStore.callCount, calls + 3, "the cache was retried in the background")
        guard case .valid(let manifest) = ManifestFile.read(directory: directory.path) else { return XCTFail("no manifest") }
        XCTAssertEqual(manifest.consecutiveUnclassifiedFailures, 1, "only the login's own open counted")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.quarantine), "no reset from retries")
        await vault.logout()
    }

    func testAStuckCallbackExecutorDoesNotBlockLogoutOrHoldTheCache() async throws {
        let h = EngineHarness()
        let parked = Mutex<[@Sendable () -> Void]>([])
        let stuck = CallbackExecutor.custom { work in parked.withLock { $0.append(work) } }
        let config = OfflineConfig.Builder().setEnabled(true).setEncryption(true).build()
        let vault = try OfflineVault(config: config, settings: VaultSettings(applicationId: "org.chatvault.tests", rootDirectory: h.root.path,
                                                                             keyStorage: [.custom(h.keyStore)], callbackExecutor: stuck,
                                                                             retry: .manualOnly))
        let login = Task { await vault.login(userId: "alice") }
        // Wait until the open has run and its delivery is parked on the executor.
        let deadline = Date().addingTimeInterval(10)
        while parked.withLock({ $0.isEmpty }) && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        XCTAssertFalse(vault.isOfflineEnabled(), "not serving before the listeners ran")
        let loggedOut = expectation(description: "logout returns")
        Task {
            await vault.logout()
            loggedOut.fulfill()
        }
        await fulfillment(of: [loggedOut], timeout: 10)
        // The cache the stuck delivery held was closed: another instance can open it.
        let other = try h.vault()
        let reopened = await other.login(userId: "alice")
        XCTAssertEqual(reopened.state, .ready)
        await other.logout()
        // Running the parked delivery late changes nothing and ends the first login.
        for work in parked.withLock({ $0 }) { work() }
        let late = await login.value
        XCTAssertFalse(vault.isOfflineEnabled())
        XCTAssertTrue(late.notes.contains { $0.contains("superseded") }, "\(late.notes)")
    }

    func testKeyLabelsCarryNoControlCharactersAndStayShort() {
        XCTAssertEqual(OfflineVault.labelSafe("alice"), "alice")
        XCTAssertEqual(OfflineVault.labelSafe("a\u{0}b\nc\u{7f}"), "abc")
        let long = OfflineVault.labelSafe(String(repeating: "x", count: 5000))
        XCTAssertEqual(long.count, 128)
        XCTAssertTrue(long.hasSuffix("…"))
    }
}
