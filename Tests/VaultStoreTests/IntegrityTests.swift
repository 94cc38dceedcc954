import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys

final class IntegrityTests: XCTestCase {
    func testLargeCachesAreCheckedInTheBackground() async throws {
        let h = Harness()
        try h.createSeeded(messages: 3000, pending: 1)
        var config = h.configuration()
        config.synchronousIntegrityCheckLimit = 0
        let healthy = try XCTUnwrap(h.open(config, expect: "ready").cache)
        XCTAssertTrue(healthy.needsBackgroundIntegrityCheck)
        let healthyResult = await healthy.verifyIntegrity()
        XCTAssertEqual(healthyResult, .intact)
        healthy.close()

        Damage.middlePage(h.directory.database)
        let damaged = try XCTUnwrap(h.open(config, expect: "ready").cache)
        let damagedResult = await damaged.verifyIntegrity()
        XCTAssertEqual(damagedResult, .damaged, "the background check catches what the fast open skipped")
        damaged.close()
    }

    func testSmallCachesAreCheckedDuringOpen() throws {
        let h = Harness()
        try h.createSeeded(messages: 3000, pending: 1)
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        XCTAssertFalse(cache.needsBackgroundIntegrityCheck)
    }
}
