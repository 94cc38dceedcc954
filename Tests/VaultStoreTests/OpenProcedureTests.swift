import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys
import CSQLCipher

/// One test (at least) per row of the open table in ARCHITECTURE.md §5.
final class OpenProcedureTests: XCTestCase {
    // MARK: no cache yet → create

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
        XCTAssertEqual(manifest.keyStore, "memory")
        XCTAssertEqual(manifest.cipherProfile?.pageSize, 4096)
        XCTAssertEqual(manifest.cipherProfile?.keying, "raw")
        XCTAssertEqual(try cache.writer.sync { db in try db.scalarInt("PRAGMA user_version") }, Int64(Schema.currentVersion))
        cache.close()
    }

    func testFreshCacheWithEncryptionOffIsPlaintextAndSaysSo() throws {
        let h = Harness()
        let cache = try XCTUnwrap(h.open(h.configuration(encryption: false), expect: "ready").cache)
        XCTAssertFalse(cache.isEncrypted)
        XCTAssertNil(cache.provenCipher)
        XCTAssertEqual(cache.keyStorage, .none)
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .plaintext)
        XCTAssertEqual(h.keyStore.callCount, 0, "a plaintext cache never touches the key store")
        cache.close()
    }

    // MARK: key found, check matches, database reads → ready

    func testReopenKeepsRows() throws {
        let h = Harness()
        let id = try h.createSeeded(messages: 20, pending: 3)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertTrue(report.resets.isEmpty)
        let cache = try XCTUnwrap(report.cache)
        XCTAssertEqual(cache.cacheId, id)
        XCTAssertEqual(try h.counts(cache), CacheRows.Counts(conversations: 1, messages: 20, pending: 3))
    }

    // MARK: transient → unavailable, untouched

    func testLockedKeyringNeverResetsTheCache() throws {
        let h = Harness()
        try h.createSeeded(messages: 5, pending: 2)
        let before = try snapshot(h.directory.path)
        h.keyStore.simulate(.locked)
        let report = h.open(h.configuration(), expect: "unavailable")
        XCTAssertEqual(report.outcome, .unavailable(.keyStore(.locked)))
        XCTAssertTrue(report.resets.isEmpty)
        XCTAssertEqual(try snapshot(h.directory.path), before, "a transient failure touches nothing")
        h.keyStore.simulate(nil)
        let again = h.open(h.configuration(), expect: "ready")
        XCTAssertTrue(again.resets.isEmpty)
        XCTAssertEqual(try h.counts(try XCTUnwrap(again.cache)).pending, 2)
    }

    func testEveryUnavailableKeyStoreStateIsTransientForAnExistingCache() throws {
        for reason in KeyUnavailableReason.allCases {
            for behavior in EncryptionFailureBehavior.allCases {
                let h = Harness()
                try h.createSeeded(messages: 3, pending: 1)
                h.keyStore.simulate(reason)
                let report = h.open(h.configuration(behavior: behavior), expect: "unavailable")
                // A store that is missing altogether (no bus, no provider) is named: the key is elsewhere.
                let expected: UnavailableReason = reason.meansStoreMissing ? .keyStoreMissing(store: "memory", reason) : .keyStore(reason)
                XCTAssertEqual(report.outcome, .unavailable(expected), "\(reason) under \(behavior)")
                XCTAssertTrue(report.resets.isEmpty)
                XCTAssertEqual(CipherProof.header(of: h.directory.database), .opaque, "never a plaintext cache beside it")
                h.keyStore.simulate(nil)
                let again = h.open(h.configuration(behavior: behavior), expect: "ready")
                XCTAssertEqual(try h.counts(try XCTUnwrap(again.cache)).messages, 3)
            }
        }
    }

    func testBusyDatabaseIsTransient() throws {
        let h = Harness()
        try h.createSeeded(messages: 5, pending: 1)
        // Another connection takes the database in exclusive locking mode and writes.
        let other = try h.rawConnection()
        try other.sync { db in
            try db.execute("PRAGMA locking_mode = EXCLUSIVE")
            try db.execute("BEGIN EXCLUSIVE")
            try db.execute("INSERT INTO kv (key, value) VALUES ('x', 1)")
        }
        var config = h.configuration()
        config.connection.busyTimeoutMs = 50
        let report = h.open(config, expect: "unavailable")
        XCTAssertEqual(report.outcome, .unavailable(.databaseBusy))
        XCTAssertTrue(report.resets.isEmpty)
        try other.sync { db in try db.execute("ROLLBACK") }
        other.close()
        let again = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(try h.counts(try XCTUnwrap(again.cache)).messages, 5)
    }

    func testDiskFullAndReadOnlyAreTransient() throws {
        for (code, expected) in [(SQLITE_FULL, UnavailableReason.diskFull), (SQLITE_READONLY, .readOnly), (SQLITE_BUSY, .databaseBusy)] {
            let h = Harness()
            try h.createSeeded(messages: 4, pending: 1)
            var config = h.configuration()
            config.connection.faults = { point, _ in point == .probe ? code : nil }
            for _ in 0..<5 {
                XCTAssertEqual(h.open(config, expect: "unavailable").outcome, .unavailable(expected))
            }
            XCTAssertEqual(h.manifest()?.consecutiveUnclassifiedFailures, 0, "transient failures never count toward escalation")
            let again = h.open(h.configuration(), expect: "ready")
            XCTAssertEqual(try h.counts(try XCTUnwrap(again.cache)).messages, 4)
        }
    }

    func testDiskFullWhileCreatingLeavesNoHalfCache() throws {
        let h = Harness()
        var config = h.configuration()
        config.connection.faults = { point, _ in point == .probe ? SQLITE_FULL : nil }
        XCTAssertEqual(h.open(config, expect: "unavailable").outcome, .unavailable(.diskFull))
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.database))
        XCTAssertNil(h.manifest())
        XCTAssertEqual(h.open(h.configuration(), expect: "ready").resets, [])
    }

    func testSecondOpenInTheSameProcessIsRefusedAndChangesNothing() throws {
        let h = Harness()
        try h.createSeeded(messages: 3, pending: 1)
        let first = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        let before = try snapshot(h.directory.path, excluding: ["cache.db-wal", "cache.db-shm"])
        let second = h.open(h.configuration(), expect: "unavailable")
        guard case .unavailable(.cacheInUse(let pid)) = second.outcome else { return XCTFail("\(second.outcome)") }
        XCTAssertEqual(pid, getpid())
        XCTAssertEqual(try snapshot(h.directory.path, excluding: ["cache.db-wal", "cache.db-shm"]), before)
        first.close()
        XCTAssertEqual(h.open(h.configuration(), expect: "ready").resets, [])
    }

    // MARK: key absent (store unlocked) → keyLost

    func testLostKeyResetsWithUnknownPendingCount() throws {
        let h = Harness()
        let oldId = try h.createSeeded(messages: 5, pending: 2)
        try h.keyStore.delete(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: oldId))
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.keyLost])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, offlinePendingCountUnknown)
        let entry = try XCTUnwrap(report.resets.first?.quarantinedAs)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(h.directory.path)/\(entry)/cache.db"), "set aside, not deleted")
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).messages, 0)
        XCTAssertNotEqual(report.cache?.cacheId, oldId)
    }

    // MARK: key found, check differs → wrongKey

    func testWrongKeyResetsAndQuarantines() throws {
        let h = Harness()
        let oldId = try h.createSeeded(messages: 5, pending: 2)
        let item = KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: oldId)
        try h.keyStore.store(try CacheKey.generate(), keyId: "other", for: item, label: "x")
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.wrongKey])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, -1)
        XCTAssertNotNil(report.resets.first?.quarantinedAs)
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).messages, 0)
    }

    // MARK: key right, database damaged → corrupted (outbox salvaged first)

    func testDamagedHeaderIsCorrupted() throws {
        let h = Harness()
        try h.createSeeded(messages: 50, pending: 2)
        Damage.header(h.directory.database)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, -1, "page 1 is unreadable, so is the outbox")
    }

    func testDamagedMiddlePageIsCorruptedAndTheOutboxIsSalvaged() throws {
        let h = Harness()
        try h.createSeeded(messages: 3000, pending: 4)
        Damage.middlePage(h.directory.database)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, 0, "the outbox pages were intact: exact count")
        let counts = try h.counts(try XCTUnwrap(report.cache))
        XCTAssertEqual(counts.pending, 4, "salvaged unsent messages live on in the new cache")
        XCTAssertEqual(counts.messages, 0)
    }

    func testTruncatedFileIsCorrupted() throws {
        let h = Harness()
        try h.createSeeded(messages: 2000, pending: 1)
        Damage.truncateHalf(h.directory.database)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted])
    }

    func testDatabaseEmptiedOrDeletedUnderAManifestIsCorrupted() throws {
        for emptied in [true, false] {
            let h = Harness()
            try h.createSeeded(messages: 10, pending: 1)
            if emptied { truncate(h.directory.database, 0) } else { unlink(h.directory.database) }
            let report = h.open(h.configuration(), expect: "ready")
            XCTAssertEqual(report.resets.map(\.reason), [.corrupted], emptied ? "emptied" : "deleted")
            XCTAssertEqual(report.resets.first?.pendingMessagesLost, -1)
        }
    }

    func testGarbageWALIsIgnoredAndRowsAreKept() throws {
        let h = Harness()
        try h.createSeeded(messages: 30, pending: 2)
        Damage.garbageWAL(h.directory.wal)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets, [], "SQLite ignores a WAL whose header checksum is wrong")
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)), CacheRows.Counts(conversations: 1, messages: 30, pending: 2))
    }

    func testPlaintextCacheWithDamagedHeaderIsCorrupted() throws {
        let h = Harness()
        try h.createSeeded(encryption: false, messages: 50, pending: 1)
        Damage.overwrite(h.directory.database, at: 16, count: 80)
        let report = h.open(h.configuration(encryption: false), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted])
    }

    // MARK: unclassified failure recurring → escalated

    func testUnclassifiedFailuresEscalateAfterTheThreshold() throws {
        let h = Harness()
        try h.createSeeded(messages: 10, pending: 3)
        var config = h.configuration()
        config.escalationThreshold = 3
        config.connection.faults = { point, _ in point == .probe ? SQLITE_IOERR : nil }
        XCTAssertEqual(h.open(config, expect: "unavailable").outcome, .unavailable(.unclassified(code: SQLITE_IOERR, attempt: 1, of: 3)))
        XCTAssertEqual(h.manifest()?.consecutiveUnclassifiedFailures, 1)
        XCTAssertEqual(h.open(config, expect: "unavailable").outcome, .unavailable(.unclassified(code: SQLITE_IOERR, attempt: 2, of: 3)))
        // The third attempt fails the same way and escalates; salvage and the new cache then work.
        config.connection.faults = FailFirst(1, with: SQLITE_IOERR).injector
        let report = h.open(config, expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.escalated])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, 0)
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).pending, 3)
    }

    func testAResetWhoseReplacementFailedIsReportedOnTheNextOpen() throws {
        let h = Harness()
        try h.createSeeded(messages: 10, pending: 3)
        var config = h.configuration()
        config.escalationThreshold = 1
        // Every probe fails: the escalation sets the cache aside, then the new cache cannot open.
        config.connection.faults = { point, _ in point == .probe ? SQLITE_IOERR : nil }
        let failed = h.open(config, expect: "unavailable")
        XCTAssertEqual(failed.resets, [], "announced only once a replacement cache serves")
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.escalated], "the listener still hears about it, once")
        report.cache?.close()
        XCTAssertEqual(h.open(h.configuration(), expect: "ready").resets, [])
    }

    func testSchemaMismatchEscalatesWithTheOutboxSalvaged() throws {
        let h = Harness()
        try h.createSeeded(messages: 10, pending: 3)
        let raw = try h.rawConnection()
        try raw.sync { db in try db.execute("DROP TABLE list_snapshots") }
        raw.close()
        var config = h.configuration()
        config.escalationThreshold = 3
        for attempt in 1...2 {
            let report = h.open(config, expect: "unavailable")
            guard case .unavailable(.unclassified(_, let n, 3)) = report.outcome else { return XCTFail("\(report.outcome)") }
            XCTAssertEqual(n, attempt)
        }
        let report = h.open(config, expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.escalated])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, 0)
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).pending, 3)
        XCTAssertEqual(h.manifest()?.consecutiveUnclassifiedFailures, 0)
    }

    func testASuccessfulOpenClearsTheUnclassifiedCount() throws {
        let h = Harness()
        try h.createSeeded()
        var config = h.configuration()
        config.connection.faults = { point, _ in point == .probe ? SQLITE_IOERR : nil }
        _ = h.open(config, expect: "unavailable")
        _ = h.open(config, expect: "unavailable")
        XCTAssertEqual(h.manifest()?.consecutiveUnclassifiedFailures, 2)
        h.open(h.configuration(), expect: "ready").cache?.close()
        XCTAssertEqual(h.manifest()?.consecutiveUnclassifiedFailures, 0)
        _ = h.open(config, expect: "unavailable")
        XCTAssertEqual(h.manifest()?.consecutiveUnclassifiedFailures, 1, "consecutive means consecutive")
    }

    // MARK: encryption cannot run at all → onlineOnly / plaintextFallback

    func testNoKeyStoreAndNoCacheUnderOnlineOnlyWritesNothing() throws {
        for reason in [KeyUnavailableReason.noBus, .noProvider] {
            let h = Harness()
            h.keyStore.simulate(reason)
            let report = h.open(h.configuration(behavior: .onlineOnly), expect: "onlineOnly")
            XCTAssertEqual(report.outcome, .onlineOnly(.noKeyStore(["memory": reason])))
            XCTAssertNil(report.cache)
            XCTAssertFalse(h.directory.exists, "nothing written")
        }
    }

    func testNoKeyStoreAndNoCacheUnderPlaintextFallbackOpensAnHonestPlaintextCache() throws {
        let h = Harness()
        h.keyStore.simulate(.noProvider)
        let report = h.open(h.configuration(behavior: .plaintextFallback), expect: "plaintextFallback")
        let cache = try XCTUnwrap(report.cache)
        XCTAssertFalse(cache.isEncrypted)
        XCTAssertEqual(cache.keyStorage, .none)
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .plaintext)
        XCTAssertEqual(h.manifest()?.encrypted, false, "never labelled encrypted")
    }

    func testCipherNotLinkedMeansEncryptionCannotRun() throws {
        let plainSQLite = CipherEngine(version: nil, cipherName: nil, sqliteVersion: "3.15.2")
        let h = Harness()
        var config = h.configuration(behavior: .onlineOnly)
        config.cipherEngine = plainSQLite
        XCTAssertEqual(h.open(config, expect: "onlineOnly").outcome, .onlineOnly(.cipherNotProven))
        XCTAssertFalse(h.directory.exists)
        XCTAssertEqual(h.keyStore.callCount, 0)
        config.failureBehavior = .plaintextFallback
        let report = h.open(config, expect: "plaintextFallback")
        XCTAssertEqual(report.cache?.isEncrypted, false)
        XCTAssertEqual(h.manifest()?.encrypted, false)
    }

    func testCipherMissingWithAnExistingEncryptedCacheIsTransient() throws {
        let h = Harness()
        try h.createSeeded()
        var config = h.configuration(behavior: .plaintextFallback)
        config.cipherEngine = CipherEngine(version: nil, cipherName: nil, sqliteVersion: "3.15.2")
        XCTAssertEqual(h.open(config, expect: "unavailable").outcome, .unavailable(.cipherUnavailable))
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .opaque)
    }

    func testMissingKeyringFallsBackToTheSoftwareTierOnlyWhenAcceptedAndSaysSo() throws {
        let h = Harness()
        let keyDir = TemporaryDirectory()
        let software = SoftwareKeyStore(directory: "\(keyDir.path)/keys")
        h.keyStore.simulate(.noProvider)
        let report = h.open(h.configuration(stores: [h.keyStore, software]), expect: "ready")
        XCTAssertEqual(report.cache?.keyStorage, .software)
        XCTAssertTrue(report.notes.contains { $0.contains("fell back to the SOFTWARE tier") }, "\(report.notes)")
        XCTAssertEqual(h.manifest()?.keyStore, "file")
    }

    func testLockedKeyringNeverFallsBackToSoftware() throws {
        let h = Harness()
        let keyDir = TemporaryDirectory()
        h.keyStore.simulate(.locked)
        let report = h.open(h.configuration(stores: [h.keyStore, SoftwareKeyStore(directory: "\(keyDir.path)/keys")]), expect: "unavailable")
        XCTAssertEqual(report.outcome, .unavailable(.keyStore(.locked)))
    }

    // MARK: manifest missing or unreadable, database present → infer, repair

    func testDeletedManifestIsRepairedFromTheKeyItem() throws {
        let h = Harness()
        let id = try h.createSeeded(messages: 12, pending: 2)
        unlink(h.directory.manifest)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets, [])
        XCTAssertEqual(report.cache?.cacheId, id)
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).messages, 12)
        XCTAssertEqual(h.manifest()?.cacheId, id)
        XCTAssertTrue(report.notes.contains("the manifest was repaired"))
    }

    func testDamagedOrHostileManifestIsRepaired() throws {
        let bad: [String] = [
            "{ not json",
            #"{"formatVersion":1,"cacheId":"../../etc","encrypted":true}"#,
            String(repeating: "A", count: 100),
        ]
        for text in bad {
            let h = Harness()
            let id = try h.createSeeded(messages: 7, pending: 1)
            try Data(text.utf8).write(to: URL(fileURLWithPath: h.directory.manifest))
            chmod(h.directory.manifest, 0o600)
            let report = h.open(h.configuration(), expect: "ready")
            XCTAssertEqual(report.resets, [], text)
            XCTAssertEqual(report.cache?.cacheId, id)
            XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).messages, 7)
        }
    }

    func testDeletedManifestOfAPlaintextCacheIsRepaired() throws {
        let h = Harness()
        try h.createSeeded(encryption: false, messages: 6, pending: 1)
        unlink(h.directory.manifest)
        let report = h.open(h.configuration(encryption: false), expect: "ready")
        XCTAssertEqual(report.resets, [])
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).messages, 6)
        XCTAssertEqual(h.manifest()?.encrypted, false)
    }

    func testDeletedManifestAndLostKeyIsKeyLost() throws {
        let h = Harness()
        let id = try h.createSeeded()
        unlink(h.directory.manifest)
        try h.keyStore.delete(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id))
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.keyLost])
    }

    func testDeletedManifestWithTheKeyringLockedWaits() throws {
        let h = Harness()
        try h.createSeeded()
        unlink(h.directory.manifest)
        h.keyStore.simulate(.locked)
        XCTAssertEqual(h.open(h.configuration(), expect: "unavailable").outcome, .unavailable(.keyStore(.locked)))
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .opaque)
    }

    func testManifestFromANewerVersionIsLeftAlone() throws {
        let h = Harness()
        try h.createSeeded()
        try Data(#"{"formatVersion": 99}"#.utf8).write(to: URL(fileURLWithPath: h.directory.manifest))
        chmod(h.directory.manifest, 0o600)
        XCTAssertEqual(h.open(h.configuration(), expect: "unavailable").outcome, .unavailable(.newerManifest(99)))
        XCTAssertEqual(try String(contentsOfFile: h.directory.manifest, encoding: .utf8), #"{"formatVersion": 99}"#)
    }

    func testCrashAfterMigrationRenameBeforeManifestRecovers() throws {
        // The database is already encrypted but the manifest still says plaintext.
        let h = Harness()
        let id = try h.createSeeded(messages: 9, pending: 2)
        var stale = try XCTUnwrap(h.manifest())
        stale.encrypted = false
        stale.keyStorage = .none
        stale.keyStore = nil
        stale.keyCheck = nil
        stale.keyId = nil
        stale.cipherProfile = nil
        try ManifestFile.write(stale, directory: h.directory.path)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets, [])
        XCTAssertEqual(report.cache?.cacheId, id)
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).pending, 2)
        XCTAssertEqual(h.manifest()?.encrypted, true)
    }

    func testLeftoverMigrationTargetIsRemoved() throws {
        let h = Harness()
        try h.createSeeded(messages: 3)
        XCTAssertTrue(FileManager.default.createFile(atPath: h.directory.migrationTarget, contents: Data("partial".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: h.directory.migrationTarget + "-journal", contents: Data("j".utf8)))
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        XCTAssertEqual(try h.counts(cache).messages, 3)
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.migrationTarget), "removed on a normal open")
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.migrationTarget + "-journal"))
    }
}

/// File names, sizes and contents under a directory (to prove "nothing was touched").
func snapshot(_ path: String, excluding: Set<String> = []) throws -> [String: Data] {
    var out: [String: Data] = [:]
    guard let walker = FileManager.default.enumerator(atPath: path) else { return out }
    while let relative = walker.nextObject() as? String {
        let full = "\(path)/\(relative)"
        var st = stat()
        guard lstat(full, &st) == 0, st.st_mode & S_IFMT == S_IFREG, !excluding.contains(relative), relative != "lock" else { continue }
        out[relative] = FileManager.default.contents(atPath: full) ?? Data()
    }
    return out
}
