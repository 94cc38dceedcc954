import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys

/// Closing a cache (logout) while its background `quick_check` runs interrupts the check (on
/// SQLite 3.15 a quick_check under way is waited for: it ignores interrupts), and such a check
/// means "not checked": never damage, never a reset.
final class IntegrityInterruptTests: XCTestCase {
    func testClosingDuringTheBackgroundCheckInterruptsItAndChangesNothing() async throws {
        let h = Harness()
        // Large enough that its quick_check lasts well beyond the moment it is seen running.
        let cacheId = try h.createSeeded(messages: 60_000, pending: 2)
        var config = h.configuration()
        config.synchronousIntegrityCheckLimit = 0
        let manifestBefore = try Data(contentsOf: URL(fileURLWithPath: h.directory.manifest))

        let cache = try XCTUnwrap(h.open(config, expect: "ready").cache)
        XCTAssertTrue(cache.needsBackgroundIntegrityCheck)
        let check = Task.detached { await cache.verifyIntegrity() }
        let deadline = Date().addingTimeInterval(60)
        while !cache.isBackgroundCheckRunning, Date() < deadline { usleep(100) }
        XCTAssertTrue(cache.isBackgroundCheckRunning, "the check never started")
        cache.close()
        let result = await check.value
        XCTAssertEqual(result, .interrupted, "a check the cache closed under is reported unfinished, not intact or damaged")
        XCTAssertFalse(cache.needsBackgroundIntegrityCheck)

        // Nothing was reset or rewritten: the same cache opens, and is checked again in full.
        let again = h.open(config, expect: "ready")
        XCTAssertEqual(again.resets.count, 0)
        let reopened = try XCTUnwrap(again.cache)
        XCTAssertEqual(reopened.cacheId, cacheId)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: h.directory.manifest)), manifestBefore)
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.quarantine))
        XCTAssertTrue(reopened.needsBackgroundIntegrityCheck, "the next open checks again")
        let rerun = await reopened.verifyIntegrity()
        XCTAssertEqual(rerun, .intact)
        XCTAssertEqual(try reopened.reader.sync { db in try CacheRows.counts(db) }.pending, 2)
        reopened.close()
    }

    func testACheckNotYetStartedWhenTheCacheClosesDoesNotRun() async throws {
        let h = Harness()
        _ = try h.createSeeded(messages: 2_000, pending: 1)
        var config = h.configuration()
        config.synchronousIntegrityCheckLimit = 0
        let cache = try XCTUnwrap(h.open(config, expect: "ready").cache)
        cache.close()
        let result = await cache.verifyIntegrity()
        XCTAssertEqual(result, .interrupted, "a closed cache is not checked (and not opened again for it)")
        let again = h.open(config, expect: "ready")
        XCTAssertEqual(again.resets.count, 0)
        again.cache?.close()
    }
}
