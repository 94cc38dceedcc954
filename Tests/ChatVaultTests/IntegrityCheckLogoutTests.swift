import ChatVaultTesting
import Foundation
import XCTest
@testable import ChatVault
@testable import VaultStore

/// `logout` while the background integrity check of a large cache runs: the check is interrupted
/// and reported unfinished; nothing is reset, and the next login checks again. (No timing is
/// asserted: on SQLite 3.15 a quick_check under way ignores the interrupt and is waited for.)
final class IntegrityCheckLogoutTests: XCTestCase {
    func testLogoutDuringTheBackgroundCheckInterruptsItWithoutAReset() async throws {
        let h = EngineHarness()
        let vault = try h.vault(integrityLimit: 0)
        let listener = RecordingResetListener()
        vault.addOfflineCacheResetListener("R", listener)
        _ = await vault.login(userId: "alice")
        // Large enough (tens of MiB) that its quick_check is still running when logout comes.
        try h.seed(vault, messages: 100_000, pending: 2)
        let cacheId = try XCTUnwrap(vault.openCache?.cacheId)
        await vault.logout()

        let attempt = await vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .ready)
        let cache = try XCTUnwrap(vault.openCache)
        let deadline = Date().addingTimeInterval(60)
        while !cache.isBackgroundCheckRunning, Date() < deadline { usleep(100) }
        XCTAssertTrue(cache.isBackgroundCheckRunning, "the check never started")
        await vault.logout()
        let stopped = await vault.waitForIntegrityCheck(timeout: .seconds(60))
        XCTAssertEqual(stopped.result, .interrupted, "logout interrupted the check; it is neither intact nor damaged")
        XCTAssertNil(stopped.reopen, "an interrupted check never reopens (resets) the cache")

        let next = await vault.login(userId: "alice")
        XCTAssertEqual(next.state, .ready)
        XCTAssertEqual(next.cacheId, cacheId, "the same cache, not a replacement")
        XCTAssertEqual(next.resets.count, 0)
        let rerun = await vault.waitForIntegrityCheck(timeout: .seconds(60))
        XCTAssertEqual(rerun.result, .intact, "the next open checks it again, to the end")
        XCTAssertEqual(try h.counts(vault).pending, 2)
        XCTAssertEqual(try h.counts(vault).messages, 100_000)
        XCTAssertTrue(listener.recorded.isEmpty, "no reset was announced")
        await vault.logout()
    }
}
