import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys

/// `encryptionChanged`: a readable cache is migrated both ways (the outbox kept), and the reset is
/// still reported with `pendingMessagesLost = 0`; an unreadable one is rebuilt.
final class EncryptionChangeTests: XCTestCase {
    func testTurningEncryptionOnMigratesEverythingAndLeavesNoPlaintext() throws {
        let h = Harness()
        let id = try h.createSeeded(encryption: false, messages: 40, pending: 5, marker: "SECRET-PLAIN-1")
        XCTAssertFalse(filesContaining("SECRET-PLAIN-1", under: h.directory.path).isEmpty, "control: the scan finds plaintext")
        let report = h.open(h.configuration(encryption: true), expect: "ready")
        XCTAssertEqual(report.resets, [CacheReset(reason: .encryptionChanged, pendingMessagesLost: 0, quarantinedAs: nil)])
        let cache = try XCTUnwrap(report.cache)
        XCTAssertTrue(cache.isEncrypted)
        XCTAssertEqual(cache.cacheId, id)
        XCTAssertEqual(try h.counts(cache), CacheRows.Counts(conversations: 1, messages: 40, pending: 5))
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .opaque)
        XCTAssertEqual(filesContaining("SECRET-PLAIN-1", under: h.directory.path), [], "no plaintext copy anywhere")
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.migrationTarget))
        cache.close()
        XCTAssertEqual(filesContaining("SECRET-PLAIN-1", under: h.directory.path), [])
        let again = h.open(h.configuration(encryption: true), expect: "ready")
        XCTAssertEqual(again.resets, [], "the migration happens once")
        XCTAssertEqual(try h.counts(try XCTUnwrap(again.cache)).pending, 5)
    }

    func testTurningEncryptionOffMigratesAndDeletesTheKey() throws {
        let h = Harness()
        let id = try h.createSeeded(encryption: true, messages: 25, pending: 4)
        let report = h.open(h.configuration(encryption: false), expect: "ready")
        XCTAssertEqual(report.resets, [CacheReset(reason: .encryptionChanged, pendingMessagesLost: 0, quarantinedAs: nil)])
        let cache = try XCTUnwrap(report.cache)
        XCTAssertFalse(cache.isEncrypted)
        XCTAssertEqual(try h.counts(cache), CacheRows.Counts(conversations: 1, messages: 25, pending: 4))
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .plaintext)
        XCTAssertEqual(h.manifest()?.keyStorage, KeyStorageTier.none)
        guard case .absent = h.keyStore.lookup(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id)) else {
            return XCTFail("the key of a cache that is no longer encrypted is deleted")
        }
    }

    func testTurningEncryptionOffWhileTheKeyringIsLockedWaits() throws {
        let h = Harness()
        try h.createSeeded(encryption: true, messages: 5, pending: 1)
        h.keyStore.simulate(.locked)
        XCTAssertEqual(h.open(h.configuration(encryption: false), expect: "unavailable").outcome, .unavailable(.keyStore(.locked)))
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .opaque)
        h.keyStore.simulate(nil)
        let report = h.open(h.configuration(encryption: false), expect: "ready")
        XCTAssertEqual(report.resets.map(\.pendingMessagesLost), [0])
    }

    func testTurningEncryptionOffWithTheKeyLostRebuilds() throws {
        let h = Harness()
        let id = try h.createSeeded(encryption: true, messages: 5, pending: 2)
        try h.keyStore.delete(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id))
        let report = h.open(h.configuration(encryption: false), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.encryptionChanged])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, -1)
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).messages, 0)
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .plaintext)
    }

    func testTurningEncryptionOnForADamagedPlaintextCacheRebuildsWithoutKeepingPlaintext() throws {
        let h = Harness()
        try h.createSeeded(encryption: false, messages: 50, pending: 2, marker: "SECRET-PLAIN-2")
        Damage.overwrite(h.directory.database, at: 16, count: 80)
        let report = h.open(h.configuration(encryption: true), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.encryptionChanged])
        XCTAssertTrue(report.cache?.isEncrypted ?? false)
        XCTAssertEqual(filesContaining("SECRET-PLAIN-2", under: h.directory.path), [], "a plaintext copy is scrubbed, not quarantined")
    }

    func testTurningEncryptionOnPurgesPlaintextQuarantineEntries() throws {
        let h = Harness()
        try h.createSeeded(encryption: false, messages: 50, pending: 1, marker: "SECRET-PLAIN-3")
        Damage.overwrite(h.directory.database, at: 16, count: 80)
        // A plaintext cache reset while encryption is off keeps its copy in quarantine…
        let reset = h.open(h.configuration(encryption: false), expect: "ready")
        XCTAssertEqual(reset.resets.map(\.reason), [.corrupted])
        let cache = try XCTUnwrap(reset.cache)
        try h.seed(cache, messages: 3, pending: 0, marker: "SECRET-PLAIN-3")
        cache.close()
        XCTAssertFalse(filesContaining("SECRET-PLAIN-3", under: "\(h.directory.path)/quarantine").isEmpty)
        // …until encryption is turned on.
        _ = h.open(h.configuration(encryption: true), expect: "ready")
        XCTAssertEqual(filesContaining("SECRET-PLAIN-3", under: h.directory.path), [])
    }

    func testEncryptionOnWithoutAnyKeyStoreKeepsThePlaintextCacheUntouched() throws {
        let h = Harness()
        try h.createSeeded(encryption: false, messages: 8, pending: 1)
        let before = try snapshot(h.directory.path)
        h.keyStore.simulate(.noBus)
        let online = h.open(h.configuration(encryption: true, behavior: .onlineOnly), expect: "onlineOnly")
        XCTAssertNil(online.cache)
        XCTAssertEqual(try snapshot(h.directory.path), before)
        let fallback = h.open(h.configuration(encryption: true, behavior: .plaintextFallback), expect: "plaintextFallback")
        XCTAssertEqual(fallback.resets, [])
        XCTAssertEqual(try h.counts(try XCTUnwrap(fallback.cache)).messages, 8)
        fallback.cache?.close()
        h.keyStore.simulate(nil)
        let migrated = h.open(h.configuration(encryption: true, behavior: .plaintextFallback), expect: "ready")
        XCTAssertEqual(migrated.resets.map(\.reason), [.encryptionChanged], "migrates once a key store appears")
        XCTAssertEqual(try h.counts(try XCTUnwrap(migrated.cache)).messages, 8)
    }

    func testMigratedCacheKeepsThePinnedCipherProfile() throws {
        let h = Harness()
        try h.createSeeded(encryption: false, messages: 200, pending: 1)
        h.open(h.configuration(encryption: true), expect: "ready").cache?.close()
        // Open with the key and the profile's page size, as a 4.x engine would be told to.
        let raw = try h.rawConnection()
        XCTAssertEqual(try raw.sync { db in try db.scalarInt("PRAGMA cipher_page_size") }, 4096)
        XCTAssertEqual(try raw.sync { db in try db.scalarInt("SELECT count(*) FROM messages") }, 200)
        raw.close()
        // And the file size is a multiple of the 4096-byte page.
        XCTAssertEqual(Damage.fileSize(h.directory.database) % 4096, 0)
    }
}
