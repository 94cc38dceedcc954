import ChatVaultTesting
import Foundation
import VaultKeys
@testable import VaultStore
import XCTest

/// Rotation and key moves on real SQLCipher files: the change itself, each failure that must
/// change nothing, and a stop at every step (as if the process were killed there) followed by an
/// open that must finish or roll back the change: ready, no reset, every row there.
final class KeyChangeTests: XCTestCase {
    private func seeded(_ h: Harness, messages: Int = 40, pending: Int = 3, config: StoreConfiguration? = nil) throws {
        let cache = try XCTUnwrap(h.open(config ?? h.configuration(), expect: "ready").cache)
        try h.seed(cache, messages: messages, pending: pending)
        cache.close()
    }

    private func key(_ store: any KeyStore, _ h: Harness, cacheId: String, suffix: String = "") -> CacheKey? {
        if case .found(let key, _) = store.lookup(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: cacheId + suffix)) {
            return key
        }
        return nil
    }

    /// Opens; asserts ready, no reset, the seeded rows; returns the manifest.
    @discardableResult
    private func assertOpensIntact(_ h: Harness, _ config: StoreConfiguration, messages: Int = 40, pending: Int = 3,
                                   _ context: String, line: UInt = #line) throws -> Manifest {
        let report = h.open(config, expect: "ready", line: line)
        let cache = try XCTUnwrap(report.cache, context, line: line)
        defer { cache.close() }
        XCTAssertEqual(report.resets, [], "\(context): \(report.notes)", line: line)
        let counts = try h.counts(cache)
        XCTAssertEqual(counts.messages, messages, context, line: line)
        XCTAssertEqual(counts.pending, pending, context, line: line)
        let manifest = try XCTUnwrap(h.manifest(), context, line: line)
        XCTAssertNil(manifest.keyChange, context, line: line)
        return manifest
    }

    private func opens(_ path: String, with key: CacheKey, profile: CipherProfile?) -> Bool {
        var options = ConnectionOptions()
        options.readOnly = true
        guard let queue = try? DatabaseQueue(path: path, keying: .encrypted(key, profile ?? .standard()), options: options, label: "probe") else {
            return false
        }
        defer { queue.close() }
        return (try? queue.sync { db in try db.scalarInt("SELECT count(*) FROM messages") }) != nil
    }

    // MARK: - Rotation

    func testRotationRewritesTheCacheUnderANewKeyAndTheOldKeyOpensNothing() throws {
        let h = Harness()
        try seeded(h)
        let before = try XCTUnwrap(h.manifest())
        let oldKey = try XCTUnwrap(key(h.keyStore, h, cacheId: before.cacheId))

        let report = try KeyManager.rotate(h.configuration())
        XCTAssertEqual(report.oldKeyId, before.keyId)
        XCTAssertNotEqual(report.newKeyId, before.keyId)
        XCTAssertEqual(report.cacheId, before.cacheId)
        XCTAssertGreaterThan(report.peakBytes, report.databaseBytes, "old and new side by side")

        let after = try assertOpensIntact(h, h.configuration(), "after rotation")
        XCTAssertEqual(after.keyId, report.newKeyId)
        XCTAssertNotEqual(after.keyCheck, before.keyCheck)
        XCTAssertEqual(after.cacheId, before.cacheId)
        let newKey = try XCTUnwrap(key(h.keyStore, h, cacheId: before.cacheId))
        XCTAssertFalse(newKey.isEqual(to: oldKey))
        XCTAssertEqual(newKey.checkValue(cacheId: before.cacheId), after.keyCheck)
        XCTAssertNil(key(h.keyStore, h, cacheId: before.cacheId, suffix: KeyChange.stagingSuffix), "the staging item is gone")
        XCTAssertFalse(opens(h.directory.database, with: oldKey, profile: after.cipherProfile), "the old key opens nothing")
        XCTAssertTrue(opens(h.directory.database, with: newKey, profile: after.cipherProfile))
        XCTAssertEqual(filesContaining("MARKER-7f3a", under: h.root.path), [], "no plaintext anywhere")
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.migrationTarget))
        // And again: a rotated cache rotates.
        let second = try KeyManager.rotate(h.configuration())
        XCTAssertEqual(second.oldKeyId, report.newKeyId)
        try assertOpensIntact(h, h.configuration(), "after a second rotation")
    }

    func testAStopAtEveryStepOfARotationIsFinishedOrRolledBackByTheNextOpen() throws {
        let points = KeyChangeCrashPoint.allCases.filter { $0.rawValue.hasPrefix("rotate") }
        XCTAssertEqual(points.count, 8)
        for point in points {
            let h = Harness()
            try seeded(h)
            let before = try XCTUnwrap(h.manifest())
            XCTAssertThrowsError(try KeyManager.rotate(h.configuration(), crashAt: point)) { error in
                XCTAssertEqual(error as? KeyManagementError, .simulatedCrash)
            }
            let stopped = try XCTUnwrap(h.manifest(), "\(point)")
            XCTAssertNotNil(stopped.keyChange, "\(point): the manifest records the change")
            XCTAssertEqual(stopped.formatVersion, 2, "\(point): older versions keep away")
            let after = try assertOpensIntact(h, h.configuration(), "\(point)")
            let pastTheSwap = [KeyChangeCrashPoint.rotateAfterRename, .rotateAfterManifestSwitch, .rotateAfterMainKeyStored,
                               .rotateAfterStagingRemoved].contains(point)
            let swapReady = point == .rotateAfterSwappingMarked
            if pastTheSwap || swapReady {
                XCTAssertNotEqual(after.keyId, before.keyId, "\(point): finished forward")
            } else {
                XCTAssertEqual(after.keyId, before.keyId, "\(point): rolled back")
                XCTAssertEqual(after.keyCheck, before.keyCheck, "\(point)")
            }
            XCTAssertEqual(after.formatVersion, 1, "\(point)")
            XCTAssertNil(key(h.keyStore, h, cacheId: before.cacheId, suffix: KeyChange.stagingSuffix), "\(point): no staging item left")
            XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.migrationTarget), "\(point)")
            // The settled cache rotates again.
            XCTAssertNoThrow(try KeyManager.rotate(h.configuration()), "\(point)")
            try assertOpensIntact(h, h.configuration(), "\(point), rotated again")
        }
    }

    func testALockedStoreOrAStoreThatRefusesTheNewKeyChangesNothing() throws {
        let h = Harness()
        try seeded(h)
        let before = try XCTUnwrap(h.manifest())
        let bytes = FileManager.default.contents(atPath: h.directory.database)
        h.keyStore.simulate(.locked)
        XCTAssertThrowsError(try KeyManager.rotate(h.configuration())) { error in
            XCTAssertEqual(error as? KeyManagementError, .unavailable(.keyStore(.locked)))
        }
        XCTAssertEqual(h.manifest(), before)
        XCTAssertEqual(FileManager.default.contents(atPath: h.directory.database), bytes, "untouched")
        h.keyStore.simulate(nil)

        // Locked after the open proved the key: the new key cannot be stored.
        let refusing = RefusingStore(h.keyStore, refuse: { $0.cacheId.hasSuffix(KeyChange.stagingSuffix) })
        XCTAssertThrowsError(try KeyManager.rotate(h.configuration(stores: [refusing]))) { error in
            XCTAssertEqual(error as? KeyManagementError, .unavailable(.keyStore(.locked)))
        }
        var unchanged = try XCTUnwrap(h.manifest())
        unchanged.formatVersion = before.formatVersion
        XCTAssertEqual(unchanged.keyId, before.keyId)
        XCTAssertNil(unchanged.keyChange)
        try assertOpensIntact(h, h.configuration(), "after the refused rotation")

        // Refused at the very end (the main item): past the point of no return, finished by the open.
        let late = RefusingStore(h.keyStore, refuse: { !$0.cacheId.hasSuffix(KeyChange.stagingSuffix) })
        XCTAssertThrowsError(try KeyManager.rotate(h.configuration(stores: [late]))) { error in
            XCTAssertEqual(error as? KeyManagementError, .unfinished(.keyStore(.locked)))
        }
        XCTAssertEqual(h.manifest()?.keyChange?.phase, .storing)
        let finished = try assertOpensIntact(h, h.configuration(), "the open finishes the rotation")
        XCTAssertNotEqual(finished.keyId, before.keyId)
    }

    func testRotationRefusesACacheInUseAPlaintextCacheAndNoCache() throws {
        let h = Harness()
        XCTAssertThrowsError(try KeyManager.rotate(h.configuration())) { XCTAssertEqual($0 as? KeyManagementError, .noCache) }
        XCTAssertFalse(h.directory.exists, "nothing created")
        try seeded(h)
        let open = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        XCTAssertThrowsError(try KeyManager.rotate(h.configuration())) { error in
            guard case .unavailable(.cacheInUse) = error as? KeyManagementError else { return XCTFail("\(error)") }
        }
        open.close()

        let plain = Harness()
        try seeded(plain, config: plain.configuration(encryption: false))
        XCTAssertThrowsError(try KeyManager.rotate(plain.configuration(encryption: false))) {
            XCTAssertEqual($0 as? KeyManagementError, .notEncrypted)
        }
        XCTAssertEqual(plain.manifest()?.encrypted, false, "a rotation never encrypts or decrypts")
    }

    func testAnOlderManifestReaderKeepsAwayFromAChangeInProgress() throws {
        let h = Harness()
        try seeded(h)
        XCTAssertThrowsError(try KeyManager.rotate(h.configuration(), crashAt: .rotateAfterRename))
        let text = try String(contentsOfFile: h.directory.manifest, encoding: .utf8)
        XCTAssertTrue(text.contains(#""formatVersion" : 2"#), text)
        XCTAssertFalse(text.contains("MARKER"), text)
        try assertOpensIntact(h, h.configuration(), "the current reader finishes it")
    }

    // MARK: - Moving the key

    func testMovingTheKeyToTheFileStoreAndBack() throws {
        let h = Harness()
        let keys = TemporaryDirectory()
        let file = SoftwareKeyStore(directory: keys.path + "/keys")
        let both: [any KeyStore] = [h.keyStore, file]
        try seeded(h, config: h.configuration(stores: both))
        let before = try XCTUnwrap(h.manifest())

        let report = try KeyManager.move(h.configuration(stores: both), to: "file")
        XCTAssertEqual(report.fromStore, "memory")
        XCTAssertEqual(report.toStore, "file")
        XCTAssertEqual(report.newKeyId, before.keyId, "the same key")
        let moved = try assertOpensIntact(h, h.configuration(stores: both), "moved to file")
        XCTAssertEqual(moved.keyStore, "file")
        XCTAssertEqual(moved.keyStorage, .software)
        XCTAssertEqual(moved.keyCheck, before.keyCheck)
        XCTAssertNil(key(h.keyStore, h, cacheId: before.cacheId), "the old copy is gone")
        XCTAssertNotNil(key(file, h, cacheId: before.cacheId))
        let report2 = h.open(h.configuration(stores: [file]), expect: "ready")
        XCTAssertEqual(report2.cache?.keyStorage, .software)
        report2.cache?.close()

        XCTAssertThrowsError(try KeyManager.move(h.configuration(stores: both), to: "file")) {
            XCTAssertEqual($0 as? KeyManagementError, .alreadyInStore("file"))
        }
        XCTAssertThrowsError(try KeyManager.move(h.configuration(stores: both), to: "kwallet")) {
            XCTAssertEqual($0 as? KeyManagementError, .unknownStore("kwallet"))
        }
        _ = try KeyManager.move(h.configuration(stores: both), to: "memory")
        let back = try assertOpensIntact(h, h.configuration(stores: both), "moved back")
        XCTAssertEqual(back.keyStore, "memory")
        XCTAssertNil(key(file, h, cacheId: before.cacheId))
    }

    func testAStopAtEveryStepOfAMoveLeavesTheKeyInExactlyTheStoreTheManifestNames() throws {
        let points = KeyChangeCrashPoint.allCases.filter { $0.rawValue.hasPrefix("move") }
        for point in points {
            let h = Harness()
            let keys = TemporaryDirectory()
            let file = SoftwareKeyStore(directory: keys.path + "/keys")
            let both: [any KeyStore] = [h.keyStore, file]
            try seeded(h, config: h.configuration(stores: both))
            let cacheId = try XCTUnwrap(h.manifest()?.cacheId)
            XCTAssertThrowsError(try KeyManager.move(h.configuration(stores: both), to: "file", crashAt: point))
            let after = try assertOpensIntact(h, h.configuration(stores: both), "\(point)")
            let inMemory = key(h.keyStore, h, cacheId: cacheId) != nil
            let inFile = key(file, h, cacheId: cacheId) != nil
            XCTAssertNotEqual(inMemory, inFile, "\(point): one copy, memory \(inMemory) file \(inFile)")
            XCTAssertEqual(after.keyStore, inFile ? "file" : "memory", "\(point)")
        }
    }

    func testAManifestNamingAStoreThisSessionLacksIsUnavailableNamingIt() throws {
        let h = Harness()
        try seeded(h)
        // Another store of the same tier, not the one holding the key: the key is elsewhere.
        let other = MemoryKeyStore(tier: .keystore, name: "kwallet")
        let report = h.open(h.configuration(stores: [other]), expect: "unavailable")
        XCTAssertEqual(report.outcome, .unavailable(.keyStoreMissing(store: "memory", nil)))
        XCTAssertTrue(UnavailableReason.keyStoreMissing(store: "memory", nil).description.contains("chatvault key move"))
        // The store is there but reports itself missing (no provider on this desktop).
        h.keyStore.simulate(.noProvider)
        XCTAssertEqual(h.open(h.configuration(), expect: "unavailable").outcome, .unavailable(.keyStoreMissing(store: "memory", .noProvider)))
        h.keyStore.simulate(nil)
        try assertOpensIntact(h, h.configuration(), "with its store back")
    }
}

/// A store that refuses to store some items (a keyring that locked mid-change).
final class RefusingStore: KeyStore, @unchecked Sendable {
    let inner: MemoryKeyStore
    let refuse: @Sendable (KeyItemID) -> Bool

    init(_ inner: MemoryKeyStore, refuse: @escaping @Sendable (KeyItemID) -> Bool) {
        self.inner = inner
        self.refuse = refuse
    }

    var tier: KeyStorageTier { inner.tier }
    var name: String { inner.name }
    func availability() -> KeyStoreAvailability { inner.availability() }
    func lookup(_ id: KeyItemID) -> KeyLookup { inner.lookup(id) }
    func items(applicationId: String, account: String) -> KeyListing { inner.items(applicationId: applicationId, account: account) }
    func store(_ key: CacheKey, keyId: String, for id: KeyItemID, label: String) throws(KeyStoreError) {
        if refuse(id) { throw KeyStoreError(.locked, "the collection locked") }
        try inner.store(key, keyId: keyId, for: id, label: label)
    }
    func delete(_ id: KeyItemID) throws(KeyStoreError) { try inner.delete(id) }
    func locator(for id: KeyItemID) -> [String: String] { inner.locator(for: id) }
}

extension KeyChangeTests {
    /// A record the rotation never wrote (edited by hand, or its staging item lost before the swap)
    /// does not cost the cache: the old key still opens it, so the record goes.
    func testAForgedOrOrphanedRotationRecordDoesNotCostTheCache() throws {
        for phase in [KeyChange.Phase.exporting, .swapping, .storing] {
            let h = Harness()
            let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
            try h.seed(cache, messages: 12, pending: 2)
            cache.close()
            var manifest = try XCTUnwrap(h.manifest())
            let before = manifest
            manifest.keyChange = KeyChange(kind: .rotate, phase: phase, fromKeyId: manifest.keyId ?? "", toKeyId: "forged-key-id",
                                           toKeyCheck: String(repeating: "ab", count: 32), fromStore: "memory", toStore: "memory")
            try ManifestFile.write(manifest, directory: h.directory.path)
            let report = h.open(h.configuration(), expect: "ready")
            XCTAssertEqual(report.resets, [], "\(phase): \(report.notes)")
            XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).messages, 12, "\(phase)")
            report.cache?.close()
            XCTAssertEqual(h.manifest()?.keyId, before.keyId, "\(phase)")
            XCTAssertNil(h.manifest()?.keyChange, "\(phase)")
        }
    }
}

/// Media files and rotation: the media key is rotated too, and every encrypted media file is
/// rewritten under the new one; whatever step a rotation stops at, the files open under the media
/// key the database holds after the next open.
extension KeyChangeTests {
    static let mediaPayload = Data((0..<150_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    static let plainPayload = Data("a plain copy of a file being sent".utf8)

    /// A media key in the cache and three files: a received attachment and an outgoing copy
    /// encrypted under it, and a plain outgoing copy. Returns the media key.
    private func addMedia(_ h: Harness) throws -> MediaKey {
        let key = try MediaKey.generate()
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try cache.writer.sync { db in try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES ('media.key', ?)", .blob(key.raw)) }
        cache.close()
        let received = try MediaFileWriter(directory: h.directory.media + "/ab", key: key)
        try received.append(Self.mediaPayload)
        try received.commit(as: "attachment")
        let outgoing = try MediaFileWriter(directory: h.directory.outgoing + "/local-1", key: key)
        try outgoing.append(Self.mediaPayload)
        try outgoing.commit(as: "0")
        let plain = try MediaFileWriter(directory: h.directory.outgoing + "/local-2", key: nil)
        try plain.append(Self.plainPayload)
        try plain.commit(as: "0")
        return key
    }

    private func currentMediaKey(_ h: Harness) throws -> MediaKey? {
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        defer { cache.close() }
        return try cache.reader.sync { db in try MediaRekey.storedKey(in: db) }
    }

    private func assertMediaOpens(_ h: Harness, under key: MediaKey, _ context: String, line: UInt = #line) {
        for path in [h.directory.media + "/ab/attachment", h.directory.outgoing + "/local-1/0"] {
            XCTAssertEqual(try? MediaFileReader.read(path, key: key, maxBytes: 1 << 20), Self.mediaPayload, "\(context): \(path)", line: line)
        }
        XCTAssertEqual(FileManager.default.contents(atPath: h.directory.outgoing + "/local-2/0"), Self.plainPayload, context, line: line)
        for tree in ["media", "outgoing"] {
            for suffix in [".next", ".old"] {
                XCTAssertFalse(FileManager.default.fileExists(atPath: "\(h.directory.path)/\(tree)\(suffix)"), "\(context): \(tree)\(suffix) left", line: line)
            }
        }
    }

    func testRotationRewritesTheMediaFilesUnderANewMediaKey() throws {
        let h = Harness()
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try h.seed(cache, messages: 5, pending: 1)
        cache.close()
        let old = try addMedia(h)
        _ = try KeyManager.rotate(h.configuration())
        let new = try XCTUnwrap(try currentMediaKey(h))
        XCTAssertNotEqual(new, old, "a new media key")
        assertMediaOpens(h, under: new, "after the rotation")
        XCTAssertThrowsError(try MediaFileReader.read(h.directory.media + "/ab/attachment", key: old, maxBytes: 1 << 20),
                             "the old media key opens nothing")
    }

    func testAStopAtEveryStepLeavesTheMediaReadableUnderTheDatabasesMediaKey() throws {
        for point in KeyChangeCrashPoint.allCases where point.rawValue.hasPrefix("rotate") {
            let h = Harness()
            let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
            try h.seed(cache, messages: 5, pending: 1)
            cache.close()
            let old = try addMedia(h)
            XCTAssertThrowsError(try KeyManager.rotate(h.configuration(), crashAt: point))
            let now = try XCTUnwrap(try currentMediaKey(h), "\(point)")
            assertMediaOpens(h, under: now, "\(point)")
            let rolledBack = [KeyChangeCrashPoint.rotateAfterJournal, .rotateAfterStagingKey, .rotateAfterExport].contains(point)
            XCTAssertEqual(now == old, rolledBack, "\(point)")
        }
    }
}
