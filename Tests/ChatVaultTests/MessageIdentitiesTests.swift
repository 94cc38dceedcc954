import ChatVaultTesting
import Foundation
import XCTest
@testable import ChatVault
import VaultStore

/// The engine's map from a server's string message names to whole-number ids (`message_refs`):
/// exact (one id per name, never reused), stable across a relaunch, ordered by server time,
/// bounded to the wire's 2^53, and in memory only while no cache is open.
final class MessageIdentitiesTests: XCTestCase {
    let t0: Int64 = 1_780_000_000_000 // ms

    func testIdsAreExactOrderedByTimeAndKeptAcrossARelaunch() async throws {
        let h = try OutboxHarness()
        await h.login()
        let map = CacheMessageIdentities(cache: { h.vault.openCache })
        let ids = try map.ids(for: [MessageRef("$b", timeMs: t0 + 1), MessageRef("$a", timeMs: t0), MessageRef("$c", timeMs: t0 + 5000)])
        XCTAssertEqual(Set(ids.values).count, 3, "one id per name")
        XCTAssertLessThan(try XCTUnwrap(ids["$a"]) >> 16, try XCTUnwrap(ids["$c"]) >> 16, "later time, later id")
        XCTAssertNotEqual(ids["$a"], ids["$b"], "two names in the same 16 ms get two ids")
        XCTAssertEqual(try map.id(for: MessageRef("$a", timeMs: 0)), ids["$a"], "a known name keeps its id whatever time is given")
        XCTAssertEqual(map.ref(for: try XCTUnwrap(ids["$c"])), "$c")
        XCTAssertNil(map.ref(for: 42))
        XCTAssertNil(map.existingId(for: "$never"))

        try await h.restart()
        let fresh = CacheMessageIdentities(cache: { h.vault.openCache })
        XCTAssertEqual(fresh.existingId(for: "$b"), ids["$b"], "read back from the cache after a relaunch")
        XCTAssertEqual(fresh.ref(for: try XCTUnwrap(ids["$a"])), "$a")
        let more = try fresh.ids(for: [MessageRef("$d", timeMs: t0)])
        XCTAssertFalse(ids.values.contains(try XCTUnwrap(more["$d"])), "a new name never gets an id given before")

        try await h.vault.clearOfflineCacheAndWait()
        let afterClear = CacheMessageIdentities(cache: { h.vault.openCache })
        XCTAssertEqual(afterClear.existingId(for: "$a"), ids["$a"], "clearing the cache keeps ids: an app may still hold one")
        await h.vault.logout()
    }

    func testIdsStayWithinTheWireAndRefuseUnusableNames() throws {
        let map = MemoryMessageIdentities()
        let ids = try map.ids(for: [MessageRef("$old", timeMs: -5), MessageRef("$far", timeMs: .max)])
        XCTAssertEqual(ids["$old"], 1, "before 1970 counts as 1970")
        XCTAssertLessThanOrEqual(Int64(try XCTUnwrap(ids["$far"])), WireLimits.maxWireNumber)
        XCTAssertGreaterThan(try XCTUnwrap(ids["$far"]), 0)
        for bad in ["", "$a\u{0}b", String(repeating: "x", count: 2000)] {
            XCTAssertThrowsError(try map.ids(for: [MessageRef(bad, timeMs: t0)])) { error in
                XCTAssertEqual(error as? MessageIdentityError, .unusableRef)
            }
        }
    }

    func testAFullSixteenMillisecondsSpillsIntoTheNext() {
        var table = IdentityTable()
        let base = IdentityTable.bucketBase(t0)
        for n in 0..<65_535 { _ = table.id(for: MessageRef("$e\(n)", timeMs: t0)) }
        XCTAssertEqual(table.ids.count, 65_535)
        XCTAssertEqual(Set(table.ids.values).count, 65_535)
        XCTAssertTrue(table.ids.values.allSatisfy { $0 >> 16 == base >> 16 })
        let spilled = table.id(for: MessageRef("$one-more", timeMs: t0))
        XCTAssertEqual(spilled >> 16, (base >> 16) + 1)
    }

    func testWithoutAnOpenCacheIdsLiveInMemory() throws {
        let map = CacheMessageIdentities(cache: { nil })
        let id = try map.id(for: MessageRef("$m", timeMs: t0))
        XCTAssertEqual(try map.id(for: MessageRef("$m", timeMs: t0 + 99_999)), id)
        XCTAssertEqual(map.ref(for: id), "$m")
    }
}

/// The media cache keys Matrix content URIs as they are, beside http(s) URLs.
final class MediaURLKeyTests: XCTestCase {
    func testContentURIsAreKeysAndOtherSchemesAreNot() {
        XCTAssertEqual(MediaURL.key("mxc://example.org/AbC"), "mxc://example.org/AbC")
        XCTAssertEqual(MediaURL.key("https://Example.org/a/b?sig=1"), "https://example.org/a/b")
        for bad in ["mxc://example.org/a/b", "mxc://example.org/", "mxc://example.org/a?x=1", "mxc://example.org:8/a", "file:///etc/passwd", "ftp://h/x"] {
            XCTAssertNil(MediaURL.key(bad), bad)
        }
    }
}
