import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys

/// Edges of the storage layer's defences that the open-table tests do not reach.
final class HardeningTests: XCTestCase {
    func testAWellFormedManifestWithATraversingCacheIdIsTreatedAsDamaged() throws {
        let h = Harness()
        let id = try h.createSeeded(messages: 4, pending: 1)
        var hostile = try XCTUnwrap(h.manifest())
        hostile.cacheId = "../../../etc"
        XCTAssertFalse(hostile.isWellFormed)
        var hostileKeyId = try XCTUnwrap(h.manifest())
        hostileKeyId.keyId = "../x"
        XCTAssertFalse(hostileKeyId.isWellFormed)
        for manifest in [hostile, hostileKeyId] {
            try ManifestFile.write(manifest, directory: h.directory.path)
            if case .damaged = ManifestFile.read(directory: h.directory.path) {} else { XCTFail("accepted a traversing id") }
            let report = h.open(h.configuration(), expect: "ready")
            XCTAssertEqual(report.resets, [])
            XCTAssertEqual(report.cache?.cacheId, id, "repaired from the key item, not from the hostile field")
            report.cache?.close()
        }
        XCTAssertFalse(KeyItemNames.isSafe(KeyItemID(applicationId: "a", account: "b", cacheId: "../c")))
    }

    func testTemporaryTablesStayInMemoryOnBothConnections() throws {
        let h = Harness()
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        XCTAssertEqual(try cache.writer.sync { db in try db.scalarInt("PRAGMA temp_store") }, 2, "MEMORY")
        XCTAssertEqual(try cache.reader.sync { db in try db.scalarInt("PRAGMA temp_store") }, 2, "MEMORY")
        XCTAssertEqual(try cache.writer.sync { db in try db.scalarText("PRAGMA journal_mode") }, "wal")
        XCTAssertEqual(try cache.writer.sync { db in try db.scalarInt("PRAGMA synchronous") }, 2, "FULL")
        XCTAssertEqual(try cache.reader.sync { db in try db.scalarInt("PRAGMA query_only") }, 1)
        cache.close()
    }

    func testSymlinkedManifestWalAndLockAreRefused() throws {
        for name in ["manifest.json", "cache.db-wal", "lock"] {
            let h = Harness()
            try h.createSeeded()
            let elsewhere = TemporaryDirectory()
            let path = "\(h.directory.path)/\(name)"
            let target = "\(elsewhere.path)/target"
            if FileManager.default.fileExists(atPath: path) {
                XCTAssertEqual(rename(path, target), 0)
            } else {
                XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data()))
            }
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
            let report = h.open(h.configuration(), expect: "unavailable")
            guard case .unavailable(.unsafeFiles) = report.outcome else { return XCTFail("\(name): \(report.outcome)") }
            XCTAssertEqual(report.resets, [], name)
        }
    }

    func testAWrongKeyResetKeepsTheOldCacheReadableWithTheRightKey() throws {
        let h = Harness()
        let id = try h.createSeeded(messages: 8, pending: 2)
        let rightKey = try h.currentKey()
        try h.keyStore.store(try CacheKey.generate(), keyId: "wrong", for: KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id), label: "x")
        let report = h.open(h.configuration(), expect: "ready")
        let entry = try XCTUnwrap(report.resets.first?.quarantinedAs)
        report.cache?.close()
        let old = try DatabaseQueue(path: "\(h.directory.path)/\(entry)/cache.db", keying: .encrypted(rightKey, .standard()),
                                    options: ConnectionOptions(), label: "recover")
        XCTAssertEqual(try old.sync { db in try CacheRows.counts(db) }, CacheRows.Counts(conversations: 1, messages: 8, pending: 2))
        old.close()
    }

    func testPruningByCountDeletesThePrunedEntriesKeyItems() throws {
        let h = Harness()
        var config = h.configuration()
        config.quarantine = QuarantinePolicy(maxEntries: 1, maxAgeDays: 30)
        var wrongItems: [KeyItemID] = []
        for _ in 0..<3 {
            let id = try h.createSeeded(messages: 1, pending: 0)
            let item = KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id)
            try h.keyStore.store(try CacheKey.generate(), keyId: "wrong", for: item, label: "x")
            wrongItems.append(item)
            let report = h.open(config, expect: "ready")
            XCTAssertEqual(report.resets.map(\.reason), [.wrongKey])
            report.cache?.close()
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.directory.quarantine).count, 1)
        for item in wrongItems.dropLast() {
            if case .found = h.keyStore.lookup(item) { XCTFail("the key item of a pruned entry was kept") }
        }
        guard case .found = h.keyStore.lookup(wrongItems.last!) else { return XCTFail("the kept entry lost its key item") }
    }
}
