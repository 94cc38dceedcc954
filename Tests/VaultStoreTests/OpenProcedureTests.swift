import Foundation
import XCTest
@testable import VaultStore
import VaultKeys

final class OpenProcedureTests: XCTestCase {
    func testFreshCacheIsCreatedEncryptedAndProven() throws {
        let h = Harness()
        let report = h.open(h.configuration(), expect: "ready")
        let cache = try XCTUnwrap(report.cache)
        XCTAssertTrue(cache.isEncrypted)
        XCTAssertEqual(cache.provenCipher, "AES-256-CBC/HMAC-SHA1")
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .opaque)
        XCTAssertTrue(report.resets.isEmpty)
        let manifest = try XCTUnwrap(h.manifest())
        XCTAssertTrue(manifest.encrypted)
        XCTAssertEqual(manifest.keyStorage, .keystore)
        XCTAssertEqual(manifest.cipherProfile?.pageSize, 4096)
        cache.close()
    }

    func testReopenKeepsRows() throws {
        let h = Harness()
        let first = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try h.seed(first, messages: 20, pending: 3)
        first.close()
        let second = h.open(h.configuration(), expect: "ready")
        XCTAssertTrue(second.resets.isEmpty)
        XCTAssertEqual(try h.counts(try XCTUnwrap(second.cache)), CacheRows.Counts(conversations: 1, messages: 20, pending: 3))
    }

    func testLostKeyResetsWithUnknownPendingCount() throws {
        let h = Harness()
        let first = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try h.seed(first, messages: 5, pending: 2)
        let oldId = first.cacheId
        first.close()
        try h.keyStore.delete(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: oldId))
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets, [CacheReset(reason: .keyLost, pendingMessagesLost: -1, quarantinedAs: report.resets.first?.quarantinedAs)])
        XCTAssertNotNil(report.resets.first?.quarantinedAs)
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).messages, 0)
        XCTAssertNotEqual(report.cache?.cacheId, oldId)
    }

    func testLockedKeyringNeverResetsTheCache() throws {
        let h = Harness()
        let first = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try h.seed(first, messages: 5, pending: 2)
        first.close()
        h.keyStore.simulate(.locked)
        let report = h.open(h.configuration(), expect: "unavailable")
        XCTAssertEqual(report.outcome, .unavailable(.keyStore(.locked)))
        XCTAssertTrue(report.resets.isEmpty)
        h.keyStore.simulate(nil)
        let again = h.open(h.configuration(), expect: "ready")
        XCTAssertTrue(again.resets.isEmpty)
        XCTAssertEqual(try h.counts(try XCTUnwrap(again.cache)).pending, 2)
    }
}
