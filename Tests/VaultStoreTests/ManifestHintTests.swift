import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys

/// The manifest is a hint: when it disagrees with what the database proves, the database wins,
/// the manifest is repaired, and nothing is reset for it (ThreatModel C19).
final class ManifestHintTests: XCTestCase {
    func testAnEditedPageSizeOrHMACSettingIsRepairedNotReset() throws {
        for edit in ["pageSize", "useHMAC", "both"] {
            let h = Harness()
            let id = try h.createSeeded(messages: 40, pending: 3)
            var manifest = try XCTUnwrap(h.manifest())
            if edit != "useHMAC" { manifest.cipherProfile?.pageSize = 1024 }
            if edit != "pageSize" { manifest.cipherProfile?.useHMAC = false }
            try ManifestFile.write(manifest, directory: h.directory.path)
            let report = h.open(h.configuration(), expect: "ready")
            XCTAssertEqual(report.resets, [], "\(edit): the key is right and the cache intact")
            XCTAssertEqual(report.cache?.cacheId, id, edit)
            XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)), CacheRows.Counts(conversations: 1, messages: 40, pending: 3), edit)
            XCTAssertEqual(h.manifest()?.cipherProfile?.pageSize, 4096, "\(edit): repaired from what the database proved")
            XCTAssertEqual(h.manifest()?.cipherProfile?.useHMAC, true, edit)
            XCTAssertTrue(report.notes.contains { $0.contains("cipher profile") && $0.contains("repaired") }, "\(edit): \(report.notes)")
            report.cache?.close()
            XCTAssertEqual(h.open(h.configuration(), expect: "ready").resets, [], "\(edit): and the next open is plain")
        }
    }

    func testADeletedManifestAndADamagedHeaderIsCorruptedNotWrongKey() throws {
        let h = Harness()
        try h.createSeeded(messages: 300, pending: 2)
        unlink(h.directory.manifest)
        Damage.header(h.directory.database)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted], "the key decrypts the pages: it is the right key, the header is damaged")
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, offlinePendingCountUnknown)
    }

    func testADeletedManifestAndAnotherKeyIsStillWrongKey() throws {
        let h = Harness()
        let id = try h.createSeeded(messages: 300, pending: 2)
        unlink(h.directory.manifest)
        try h.keyStore.store(try CacheKey.generate(), keyId: "other",
                            for: KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id), label: "x")
        Damage.header(h.directory.database)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.wrongKey], "another key decrypts no page into a b-tree page")
    }
}
