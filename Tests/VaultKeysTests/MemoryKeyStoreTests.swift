import Foundation
import XCTest
import VaultKeys

final class MemoryKeyStoreTests: XCTestCase {
    private let id = KeyItemID(applicationId: "org.example.chat", account: "0123abcd", cacheId: "cache-1")

    func testMissingKeyIsAbsent() {
        XCTAssertTrue(MemoryKeyStore().lookup(id).isAbsent)
    }

    func testStoreThenLookupRoundTrips() throws {
        let store = MemoryKeyStore()
        let key = try CacheKey.generate()
        try store.store(key, keyId: "key-1", for: id, label: "l")
        let found = try XCTUnwrap(store.lookup(id).foundKey)
        XCTAssertTrue(found.key.isEqual(to: key))
        XCTAssertEqual(found.keyId, "key-1")
        XCTAssertEqual(store.tier, .keystore)
        XCTAssertEqual(store.name, "memory")
    }

    func testSimulatedLockedKeyringAnswersLockedAndRecovers() throws {
        let store = MemoryKeyStore()
        try store.store(try CacheKey.generate(), keyId: "k", for: id, label: "l")
        store.simulate(.locked)
        XCTAssertEqual(store.lookup(id).unavailableReason, .locked)
        XCTAssertEqual(store.availability(), .unavailable(.locked))
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).unavailableReason, .locked)
        XCTAssertThrowsError(try store.store(try CacheKey.generate(), keyId: "k2", for: id, label: "l")) { error in
            XCTAssertEqual((error as? KeyStoreError)?.reason, .locked)
        }
        XCTAssertThrowsError(try store.delete(id))
        store.simulate(nil)
        XCTAssertEqual(store.lookup(id).foundKey?.keyId, "k", "nothing changed while locked")
    }

    func testItemsDeleteAndCallCount() throws {
        let store = MemoryKeyStore()
        let other = KeyItemID(applicationId: id.applicationId, account: id.account, cacheId: "cache-2")
        try store.store(try CacheKey.generate(), keyId: "a", for: id, label: "l")
        try store.store(try CacheKey.generate(), keyId: "b", for: other, label: "l")
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).summaries,
                       [KeyItemSummary(id: id, keyId: "a"), KeyItemSummary(id: other, keyId: "b")])
        try store.delete(id)
        try store.delete(id)
        XCTAssertTrue(store.lookup(id).isAbsent)
        XCTAssertEqual(store.callCount, 6)
    }
}
