import ChatVaultTesting
import CSQLCipher
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys

/// Regressions for paths where a transient or hostile condition could once cost data.
final class ReviewRegressionTests: XCTestCase {
    // MARK: Reset announcements

    func testAnUnacknowledgedResetIsAnnouncedAgainUntilDelivered() throws {
        let h = Harness()
        let id = try h.createSeeded()
        try h.keyStore.delete(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id))
        let first = h.open(h.configuration(), expect: "ready", acknowledge: false)
        XCTAssertEqual(first.resets.map(\.reason), [.keyLost])
        first.cache?.close()
        // The process died before the listener ran: the next open announces it again.
        let second = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(second.resets, first.resets)
        second.cache?.close()
        XCTAssertEqual(h.open(h.configuration(), expect: "ready").resets, [], "acknowledged: never again")
    }

    // MARK: Escalation counting

    func testADifferentFailureStartsTheCountAgain() throws {
        let h = Harness()
        try h.createSeeded()
        var config = h.configuration()
        config.escalationThreshold = 3
        for (code, expected) in [(SQLITE_IOERR, 1), (SQLITE_IOERR, 2), (SQLITE_PROTOCOL, 1), (SQLITE_IOERR, 1), (SQLITE_IOERR, 2)] {
            config.connection.faults = { point, _ in point == .probe ? code : nil }
            let report = h.open(config, expect: "unavailable")
            XCTAssertEqual(report.outcome, .unavailable(.unclassified(code: code, attempt: expected, of: 3)))
        }
        XCTAssertEqual(h.manifest()?.lastFailureCode, SQLITE_IOERR)
    }

    func testOpensThatDoNotCountNeverEscalate() throws {
        let h = Harness()
        try h.createSeeded(messages: 4, pending: 1)
        var config = h.configuration()
        config.escalationThreshold = 2
        config.countsTowardEscalation = false
        config.connection.faults = { point, _ in point == .probe ? SQLITE_IOERR : nil }
        for _ in 0..<10 { XCTAssertEqual(h.open(config, expect: "unavailable").resets, []) }
        XCTAssertEqual(h.manifest()?.consecutiveUnclassifiedFailures, 0, "background retries leave the count alone")
        XCTAssertEqual(try h.counts(try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)).messages, 4)
    }

    func testANewerSchemaIsLeftAloneNotEscalated() throws {
        let h = Harness()
        try h.createSeeded(messages: 5)
        let raw = try h.rawConnection()
        try raw.sync { db in try db.execute("PRAGMA user_version = \(Schema.currentVersion + 1)") }
        raw.close()
        var config = h.configuration()
        config.escalationThreshold = 1
        for _ in 0..<3 {
            XCTAssertEqual(h.open(config, expect: "unavailable").outcome, .unavailable(.newerSchema(Schema.currentVersion + 1)))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.quarantine), "an app downgrade never resets the cache")
    }

    // MARK: Inference never guesses

    func testAMissingManifestWithABusyDatabaseWaits() throws {
        let h = Harness()
        try h.createSeeded(messages: 6)
        let other = try h.rawConnection()
        try other.sync { db in
            try db.execute("PRAGMA locking_mode = EXCLUSIVE")
            try db.execute("BEGIN EXCLUSIVE")
            try db.execute("INSERT INTO kv (key, value) VALUES ('x', 1)")
        }
        unlink(h.directory.manifest)
        var config = h.configuration()
        config.connection.busyTimeoutMs = 50
        let report = h.open(config, expect: "unavailable")
        XCTAssertEqual(report.outcome, .unavailable(.databaseBusy))
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.quarantine), "busy is not a wrong key")
        try other.sync { db in try db.execute("ROLLBACK") }
        other.close()
        XCTAssertEqual(try h.counts(try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)).messages, 6)
    }

    // MARK: Quarantine

    func testAResetInterruptedMidMoveIsFinishedByTheNextOpen() throws {
        let h = Harness()
        let id = try h.createSeeded(messages: 7)
        // What a crash after moving only cache.db leaves behind.
        let entry = "\(h.directory.quarantine)/20260101T000000.000Z-keyLost-abc"
        try SecureFiles.ensureDirectory(h.directory.quarantine)
        try SecureFiles.ensureDirectory(entry)
        let notice = Quarantine.Notice(reason: .keyLost, pendingMessagesLost: -1, at: Date().timeIntervalSince1970,
                                       reported: false, moving: true, scrubPlaintext: false)
        try Quarantine.write(notice, to: entry)
        XCTAssertEqual(rename(h.directory.database, "\(entry)/cache.db"), 0)
        try h.keyStore.delete(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id))
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.keyLost], "reported once, as the interrupted reset")
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(entry)/manifest.json"), "the rest of the old cache followed it")
        XCTAssertEqual(Quarantine.readNotice("\(entry)/reset.json")?.moving, false)
        XCTAssertNotEqual(report.cache?.cacheId, id)
    }

    func testASymlinkedQuarantineIsNeverUsedOrPruned() throws {
        let h = Harness()
        let id = try h.createSeeded(messages: 3)
        let elsewhere = TemporaryDirectory()
        for name in ["a", "b", "c", "d", "e"] {
            try FileManager.default.createDirectory(atPath: "\(elsewhere.path)/\(name)", withIntermediateDirectories: false)
            XCTAssertTrue(FileManager.default.createFile(atPath: "\(elsewhere.path)/\(name)/file", contents: Data("keep".utf8)))
        }
        try FileManager.default.createSymbolicLink(atPath: h.directory.quarantine, withDestinationPath: elsewhere.path)
        try h.keyStore.delete(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id))
        var config = h.configuration()
        config.quarantine = QuarantinePolicy(maxEntries: 1, maxAgeDays: 30)
        let report = h.open(config, expect: "unavailable")
        guard case .unavailable(.unsafeFiles) = report.outcome else { return XCTFail("\(report.outcome)") }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).sorted(), ["a", "b", "c", "d", "e"])
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .opaque, "the reset was abandoned, nothing deleted")
    }

    func testAResetThatCannotSetTheCacheAsideIsAbandoned() throws {
        let h = Harness()
        let id = try h.createSeeded(messages: 9, pending: 2)
        // A regular file where the quarantine directory should be: no entry can be made.
        XCTAssertTrue(FileManager.default.createFile(atPath: h.directory.quarantine, contents: Data()))
        chmod(h.directory.quarantine, 0o600)
        try h.keyStore.delete(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id))
        let before = try snapshot(h.directory.path)
        let report = h.open(h.configuration(), expect: "unavailable")
        XCTAssertEqual(report.resets, [])
        XCTAssertEqual(try snapshot(h.directory.path), before, "never a deletion instead of a quarantine")
    }

    // MARK: Manifest contents never become SQL

    func testACipherProfileWithInjectedSQLIsRejected() throws {
        let h = Harness()
        let id = try h.createSeeded(messages: 5)
        let evil = "\(h.root.path)/stolen.db"
        var manifest = try XCTUnwrap(h.manifest())
        manifest.cipherProfile?.hmacAlgorithm = "HMAC_SHA1; ATTACH '\(evil)' AS x KEY ''; CREATE TABLE x.t AS SELECT * FROM messages"
        XCTAssertFalse(manifest.isWellFormed)
        try ManifestFile.write(manifest, directory: h.directory.path)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets, [])
        XCTAssertEqual(report.cache?.cacheId, id, "repaired from the key item")
        XCTAssertFalse(FileManager.default.fileExists(atPath: evil))
        XCTAssertEqual(h.manifest()?.cipherProfile?.hmacAlgorithm, "HMAC_SHA1")
    }

    func testExecuteSingleRefusesASecondStatement() throws {
        let h = Harness()
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        XCTAssertThrowsError(try cache.writer.sync { db in try db.executeSingle("PRAGMA cache_size = 10; DROP TABLE kv") })
        XCTAssertNoThrow(try cache.writer.sync { db in try db.executeSingle("PRAGMA cache_size = 10;") })
        XCTAssertNotNil(try cache.reader.sync { db in try db.scalarInt("SELECT count(*) FROM kv") }, "kv still exists")
        cache.close()
    }

    // MARK: Encryption changes never reset a readable cache

    func testAFailedExportLeavesTheReadableCacheAsItWas() throws {
        let h = Harness()
        try h.createSeeded(encryption: false, messages: 40, pending: 4, marker: "EXPORT-FAIL")
        let before = try snapshot(h.directory.path)
        var config = h.configuration(encryption: true)
        config.connection.faults = { point, sql in point == .step && sql.contains("sqlcipher_export") ? SQLITE_FULL : nil }
        let report = h.open(config, expect: "unavailable")
        XCTAssertEqual(report.outcome, .unavailable(.diskFull))
        XCTAssertEqual(report.resets, [])
        XCTAssertEqual(try snapshot(h.directory.path), before, "the plaintext cache is untouched")
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.migrationTarget))
        guard case .items(let keys) = h.keyStore.items(applicationId: h.applicationId, account: h.account) else { return XCTFail() }
        XCTAssertEqual(keys, [], "the new key is withdrawn with the abandoned change")
        let migrated = h.open(h.configuration(encryption: true), expect: "ready")
        XCTAssertEqual(migrated.resets.map(\.reason), [.encryptionChanged])
        XCTAssertEqual(try h.counts(try XCTUnwrap(migrated.cache)).pending, 4)
    }

    func testAnUnclassifiedExportFailureIsReportedNotReset() throws {
        let h = Harness()
        try h.createSeeded(encryption: true, messages: 12, pending: 1)
        var config = h.configuration(encryption: false)
        config.connection.faults = { point, sql in point == .step && sql.contains("sqlcipher_export") ? SQLITE_IOERR : nil }
        XCTAssertEqual(h.open(config, expect: "unavailable").outcome, .unavailable(.migrationFailed(code: SQLITE_IOERR)))
        XCTAssertEqual(CipherProof.header(of: h.directory.database), .opaque)
        XCTAssertEqual(h.open(h.configuration(encryption: false), expect: "ready").resets.map(\.pendingMessagesLost), [0])
    }
}
