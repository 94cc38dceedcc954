import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// `login` lets the key store the cache's manifest names get ready (`KeyStore.prepare`: for the
/// Secret Service, the D-Bus connection and session) beside the open, and no other store.
final class KeyStorePrepareTests: XCTestCase {
    /// A memory store that counts `prepare` calls.
    final class CountingStore: KeyStore {
        let inner: MemoryKeyStore
        let prepared = Mutex(0)
        init(name: String) { inner = MemoryKeyStore(name: name) }
        var tier: KeyStorageTier { inner.tier }
        var name: String { inner.name }
        func availability() -> KeyStoreAvailability { inner.availability() }
        func lookup(_ id: KeyItemID) -> KeyLookup { inner.lookup(id) }
        func items(applicationId: String, account: String) -> KeyListing { inner.items(applicationId: applicationId, account: account) }
        func store(_ key: CacheKey, keyId: String, for id: KeyItemID, label: String) throws(KeyStoreError) {
            try inner.store(key, keyId: keyId, for: id, label: label)
        }
        func delete(_ id: KeyItemID) throws(KeyStoreError) { try inner.delete(id) }
        func locator(for id: KeyItemID) -> [String: String] { inner.locator(for: id) }
        func prepare() { prepared.withLock { $0 += 1 } }
        var preparedCount: Int { prepared.withLock { $0 } }
    }

    func testLoginPreparesTheStoreHoldingTheCacheKeyOnly() async throws {
        let h = EngineHarness()
        let holder = CountingStore(name: "holder")
        let other = CountingStore(name: "other")
        let vault = try h.vault(stores: [.custom(holder), .custom(other)])
        _ = await vault.login(userId: "alice")  // creates the cache: its key goes to `holder`
        await vault.logout()
        XCTAssertEqual(holder.preparedCount, 0, "no manifest yet: nothing to prepare for")

        let attempt = await vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .ready)
        h.eventually { holder.preparedCount == 1 }
        XCTAssertEqual(other.preparedCount, 0, "a store the cache does not use is not contacted")
        await vault.logout()
    }
}
