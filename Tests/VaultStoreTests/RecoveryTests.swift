import ChatVaultTesting
import Foundation
import VaultKeys
@testable import VaultStore
import XCTest

/// Recovery secrets and restores from `quarantine/`, on real SQLCipher files: the key comes back
/// through the user's secret or through a store that holds it again, the unsent messages of the
/// cache that took its place are merged in, a wrong secret changes nothing, and a stop at any step
/// is finished or abandoned by the next open without losing a row.
final class RecoveryTests: XCTestCase {
    private func item(_ h: Harness, _ cacheId: String) -> KeyItemID {
        KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: cacheId)
    }

    /// A cache with 40 messages and 3 unsent ones; returns its id.
    private func seeded(_ h: Harness) throws -> String {
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try h.seed(cache, messages: 40, pending: 3)
        defer { cache.close() }
        return cache.cacheId
    }

    /// Loses the key and opens: the reset sets the cache aside, a fresh one takes its place and gets
    /// `fresh` unsent messages of its own. Returns the fresh cache's id and the entry's name.
    private func loseKey(_ h: Harness, _ cacheId: String, fresh: Int = 2) throws -> (String, String) {
        try h.keyStore.delete(item(h, cacheId))
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.keyLost])
        let cache = try XCTUnwrap(report.cache)
        defer { cache.close() }
        try cache.writer.sync { db in
            try CacheRows.insert((0..<fresh).map { i in
                CacheRows.OutboxEntry(localId: "fresh-\(i)", seq: Int64(i + 1), conversationId: "user_bob", kind: "text", state: 0,
                                      createdAt: Int64(1_800_000_000 + i), payload: Array("composed after the reset \(i)".utf8))
            }, into: db)
        }
        let entry = try XCTUnwrap(report.resets.first?.quarantinedAs).replacingOccurrences(of: "quarantine/", with: "")
        return (cache.cacheId, entry)
    }

    private func counts(_ h: Harness) throws -> (CacheRows.Counts, String, [CacheReset]) {
        let report = h.open(h.configuration(), expect: "ready")
        let cache = try XCTUnwrap(report.cache)
        defer { cache.close() }
        return (try h.counts(cache), cache.cacheId, report.resets)
    }

    func testARecoverySecretBringsBackACacheWhoseKeyWasLostAndMergesWhatWasComposedSince() throws {
        let h = Harness()
        let cacheId = try seeded(h)
        let made = try KeyManager.createRecoverySecret(h.configuration())
        XCTAssertEqual(made.cacheId, cacheId)
        XCTAssertGreaterThan(made.kdfSeconds, 0.05, "the key derivation is slow on purpose")
        var st = stat()
        XCTAssertEqual(lstat(h.directory.recovery, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        let text = try String(contentsOfFile: h.directory.recovery, encoding: .utf8)
        XCTAssertFalse(text.contains(made.secret.formatted) || text.contains(made.secret.formatted.replacingOccurrences(of: "-", with: "")))
        guard case .found(let key, _) = h.keyStore.lookup(item(h, cacheId)) else { return XCTFail("no key") }
        let hex = key.withHexDigits { String(decoding: $0, as: UTF8.self) }
        XCTAssertFalse(text.lowercased().contains(hex.lowercased()), "no key hex in the recovery file")

        let (freshId, entry) = try loseKey(h, cacheId)
        XCTAssertNotEqual(freshId, cacheId)
        let listed = KeyManager.quarantined(h.configuration())
        XCTAssertEqual(listed.map(\.id), [entry])
        XCTAssertEqual(listed.first?.recoverableWithSecret, true)
        XCTAssertEqual(listed.first?.keyPresent, false)
        XCTAssertEqual(listed.first?.reason, "keyLost")

        // Typed back with another case and spacing.
        let typed = try RecoverySecret(parsing: made.secret.formatted.lowercased().replacingOccurrences(of: "-", with: " "))
        let report = try KeyManager.recover(h.configuration(), secret: typed)
        XCTAssertEqual(report.cacheId, cacheId)
        XCTAssertEqual(report.restoredEntry, entry)
        XCTAssertEqual(report.mergedPending, 2)
        XCTAssertEqual(report.messages, 40)
        XCTAssertEqual(report.pending, 5)
        let replaced = try XCTUnwrap(report.replacedAs)

        let (after, openedId, resets) = try counts(h)
        XCTAssertEqual(openedId, cacheId, "the old cache is the current one again")
        XCTAssertEqual(after.messages, 40)
        XCTAssertEqual(after.pending, 5, "its own 3 unsent messages and the 2 composed since")
        XCTAssertEqual(resets, [], "a restore is not a reset")
        guard case .found = h.keyStore.lookup(item(h, cacheId)) else { return XCTFail("the key was not stored again") }
        let now = KeyManager.quarantined(h.configuration())
        XCTAssertEqual(now.map(\.id), [(replaced as NSString).lastPathComponent])
        XCTAssertEqual(now.first?.reason, "replaced")
        // The secret still opens the restored cache's recovery file.
        XCTAssertTrue(FileManager.default.fileExists(atPath: h.directory.recovery))
    }

    func testAWrongSecretChangesNothingAndNoSecretFileMeansNothingToRecover() throws {
        let h = Harness()
        let cacheId = try seeded(h)
        let (freshId, _) = try loseKey(h, cacheId)
        XCTAssertThrowsError(try KeyManager.recover(h.configuration(), secret: try RecoverySecret.generate())) {
            XCTAssertEqual($0 as? KeyManagementError, .noRecoverableCache)
        }

        let h2 = Harness()
        let id2 = try seeded(h2)
        _ = try KeyManager.createRecoverySecret(h2.configuration())
        let (fresh2, entry2) = try loseKey(h2, id2)
        let before = try snapshot(h2.root.path)
        XCTAssertThrowsError(try KeyManager.recover(h2.configuration(), secret: try RecoverySecret.generate())) {
            XCTAssertEqual($0 as? KeyManagementError, .wrongSecret)
        }
        XCTAssertEqual(try snapshot(h2.root.path), before, "a wrong secret touches nothing")
        let (_, current, _) = try counts(h2)
        XCTAssertEqual(current, fresh2)
        XCTAssertEqual(KeyManager.quarantined(h2.configuration()).map(\.id), [entry2])
        _ = freshId
    }

    func testTheRecoverySecretFollowsRotationsAndSurvivesAClearedCache() throws {
        let h = Harness()
        let cacheId = try seeded(h)
        let made = try KeyManager.createRecoverySecret(h.configuration())
        _ = try KeyManager.rotate(h.configuration())
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try cache.writer.sync { db in try CacheRows.clearAll(db) }
        try h.seed(cache, messages: 7, pending: 1)
        cache.close()
        let last = try KeyManager.rotate(h.configuration())
        let file = try XCTUnwrap(RecoveryFile.read(h.directory.recovery))
        XCTAssertEqual(file.cacheKeys.map(\.keyId), [last.newKeyId], "only the key in use is sealed")

        _ = try loseKey(h, cacheId, fresh: 0)
        let report = try KeyManager.recover(h.configuration(), secret: made.secret)
        XCTAssertEqual(report.cacheId, cacheId)
        let (after, _, _) = try counts(h)
        XCTAssertEqual(after.messages, 7)
        XCTAssertEqual(after.pending, 1)
    }

    func testAStopAtEveryStepOfARecoveryLosesNoUnsentMessage() throws {
        for point in RestoreCrashPoint.allCases {
            let h = Harness()
            let cacheId = try seeded(h)
            let made = try KeyManager.createRecoverySecret(h.configuration())
            let (freshId, _) = try loseKey(h, cacheId)
            XCTAssertThrowsError(try KeyManager.recover(h.configuration(), secret: made.secret, crashAt: point)) {
                XCTAssertEqual($0 as? KeyManagementError, .simulatedCrash, "\(point)")
            }
            let (after, openedId, resets) = try counts(h)
            XCTAssertEqual(resets, [], "\(point)")
            switch point {
            case .afterMerge, .afterMarked:
                // Not yet set aside: the fresh cache stays (a marked restore is abandoned).
                XCTAssertEqual(openedId, freshId, "\(point)")
                XCTAssertEqual(after.pending, 2, "\(point)")
            case .afterReplacedSetAside:
                XCTAssertEqual(openedId, cacheId, "\(point): the open finished the restore")
                XCTAssertEqual(after.pending, 5, "\(point)")
            }
            // Whatever happened, recovering (again) ends with every unsent message once.
            if openedId != cacheId {
                let report = try KeyManager.recover(h.configuration(), secret: made.secret)
                XCTAssertEqual(report.pending, 5, "\(point): merged once, never twice")
            }
            let (final, finalId, _) = try counts(h)
            XCTAssertEqual(finalId, cacheId, "\(point)")
            XCTAssertEqual(final.pending, 5, "\(point)")
            XCTAssertEqual(final.messages, 40, "\(point)")
        }
    }

    func testAQuarantinedCacheIsRestoredWhenItsKeyComesBack() throws {
        let h = Harness()
        let cacheId = try seeded(h)
        guard case .found(let key, let keyId) = h.keyStore.lookup(item(h, cacheId)) else { return XCTFail("no key") }
        let (_, entry) = try loseKey(h, cacheId)
        XCTAssertThrowsError(try KeyManager.restore(h.configuration(), entry: entry)) {
            XCTAssertEqual($0 as? KeyManagementError, .keyNotPresent(entry))
        }
        XCTAssertThrowsError(try KeyManager.restore(h.configuration(), entry: "no-such-entry")) {
            XCTAssertEqual($0 as? KeyManagementError, .noSuchEntry("no-such-entry"))
        }
        XCTAssertEqual(h.open(h.configuration(), expect: "ready").restorable, [], "nothing to restore yet")

        // The keyring comes back from a backup.
        try h.keyStore.store(key, keyId: keyId, for: item(h, cacheId), label: "restored from backup")
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.restorable, [entry], "the open says the old cache can come back")
        XCTAssertTrue(report.notes.contains { $0.contains("can be restored") }, "\(report.notes)")
        report.cache?.close()
        XCTAssertEqual(KeyManager.quarantined(h.configuration()).first?.restorable, true)

        let restored = try KeyManager.restore(h.configuration(), entry: entry)
        XCTAssertEqual(restored.cacheId, cacheId)
        let (after, openedId, _) = try counts(h)
        XCTAssertEqual(openedId, cacheId)
        XCTAssertEqual(after.messages, 40)
        XCTAssertEqual(after.pending, 5)
    }

    func testARestorableCacheIsNeverTheFirstOneEvicted() throws {
        let h = Harness()
        let first = try seeded(h)
        _ = try KeyManager.createRecoverySecret(h.configuration())
        var (current, restorableEntry) = try loseKey(h, first, fresh: 0)
        // Three more key losses: four entries for a limit of three.
        for _ in 0..<3 {
            (current, _) = try loseKey(h, current, fresh: 0)
        }
        let names = KeyManager.quarantined(h.configuration()).map(\.id)
        XCTAssertEqual(names.count, 3)
        XCTAssertTrue(names.contains(restorableEntry), "the oldest entry stays: its recovery secret can still bring it back")
    }

    private func snapshot(_ path: String) throws -> [String: Data] {
        var out: [String: Data] = [:]
        let walker = FileManager.default.enumerator(atPath: path)
        while let relative = walker?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let full = "\(path)/\(relative)"
            if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue, !relative.hasSuffix("lock") {
                out[relative] = FileManager.default.contents(atPath: full)
            }
        }
        return out
    }
}
