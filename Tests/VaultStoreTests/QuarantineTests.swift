import Foundation
import Synchronization
import XCTest
@testable import VaultStore
import VaultKeys

final class QuarantineTests: XCTestCase {
    func testQuarantineIsBoundedByCount() throws {
        let h = Harness()
        var config = h.configuration()
        config.quarantine = QuarantinePolicy(maxEntries: 2, maxAgeDays: 30)
        for _ in 0..<4 {
            let id = try h.createSeeded(messages: 2, pending: 0)
            try h.keyStore.delete(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id))
            let report = h.open(config, expect: "ready")
            XCTAssertEqual(report.resets.map(\.reason), [.keyLost])
            report.cache?.close()
        }
        let entries = try FileManager.default.contentsOfDirectory(atPath: h.directory.quarantine)
        XCTAssertEqual(entries.count, 2)
    }

    func testQuarantineIsBoundedByAgeAndPrunedEntriesLoseTheirKeyItem() throws {
        let h = Harness()
        let clock = Clock()
        var config = h.configuration()
        config.now = { clock.now }
        let item = try h.cacheWithAReplacedKey()
        let report = h.open(config, expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.wrongKey])
        report.cache?.close()
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.directory.quarantine).count, 1)
        guard case .found = h.keyStore.lookup(item) else { return XCTFail("kept while its cache is quarantined") }
        clock.advance(days: 31)
        h.open(config, expect: "ready").cache?.close()
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.directory.quarantine).count, 0)
        guard case .absent = h.keyStore.lookup(item) else { return XCTFail("pruned with its quarantined cache") }
    }

    func testQuarantinedCacheCanBeReadWithTheKeyThatCameBack() throws {
        // The point of quarantine: a key restored later still opens the set-aside cache.
        let h = Harness()
        let id = try h.createSeeded(messages: 6, pending: 1)
        let key = try h.currentKey()
        let item = KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id)
        try h.keyStore.delete(item)
        let report = h.open(h.configuration(), expect: "ready")
        let entry = try XCTUnwrap(report.resets.first?.quarantinedAs)
        let old = try DatabaseQueue(path: "\(h.directory.path)/\(entry)/cache.db", keying: .encrypted(key, .standard()),
                                    options: ConnectionOptions(), label: "recover")
        XCTAssertEqual(try old.sync { db in try db.scalarInt("SELECT count(*) FROM messages") }, 6)
        old.close()
    }
}

/// A controllable clock for age limits.
final class Clock: Sendable {
    private let current = Mutex(Date())
    var now: Date { current.withLock { $0 } }
    func advance(days: Int) { current.withLock { $0 = $0.addingTimeInterval(TimeInterval(days) * 86_400) } }
}

/// Quarantine housekeeping after ready: an engine opens with `pruneQuarantineDuringOpen` off and
/// prunes from the open cache afterwards.
final class DeferredQuarantinePruneTests: XCTestCase {
    func testPruningCanWaitUntilAfterTheOpenAndStopsWithTheCache() throws {
        let h = Harness()
        let clock = Clock()
        var config = h.configuration()
        config.now = { clock.now }
        let item = try h.cacheWithAReplacedKey()
        h.open(config, expect: "ready").cache?.close()  // a wrongKey reset: one entry, key item kept
        clock.advance(days: 31)
        config.pruneQuarantineDuringOpen = false

        let cache = try XCTUnwrap(h.open(config, expect: "ready").cache)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.directory.quarantine).count, 1,
                       "the expired entry is left for after the open")
        guard case .found = h.keyStore.lookup(item) else { return XCTFail("its key item too") }
        cache.close()
        cache.pruneQuarantine(config)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.directory.quarantine).count, 1,
                       "a closed cache prunes nothing")

        let open = try XCTUnwrap(h.open(config, expect: "ready").cache)
        open.pruneQuarantine(config)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.directory.quarantine).count, 0)
        guard case .absent = h.keyStore.lookup(item) else { return XCTFail("pruned with its quarantined cache") }
        open.close()
    }
}

extension Harness {
    /// A seeded, closed cache whose key item now holds another key: its next open is a `wrongKey`
    /// reset that quarantines it. Returns the key item.
    func cacheWithAReplacedKey() throws -> KeyItemID {
        let item = KeyItemID(applicationId: applicationId, account: account, cacheId: try createSeeded(messages: 2, pending: 0))
        try keyStore.store(try CacheKey.generate(), keyId: "other", for: item, label: "x")
        return item
    }
}
