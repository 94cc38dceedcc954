import Foundation
import Synchronization

/// Keys held in process memory, for tests and in-process scenarios.
///
/// It reports tier `.keystore` by default so the open procedure can be exercised exactly as with the
/// Secret Service, and it can be told to behave like a locked or missing keyring:
///
///     let store = MemoryKeyStore()
///     store.simulate(.locked)      // lookups answer .unavailable(.locked)
///     store.simulate(nil)          // back to normal
///
/// - Warning: keys vanish with the process; a cache keyed from here cannot be reopened by another one.
public final class MemoryKeyStore: KeyStore {
    private struct Entry {
        var key: CacheKey
        var keyId: String
    }

    private struct State {
        var entries: [KeyItemID: Entry] = [:]
        var failure: KeyUnavailableReason?
        var calls = 0
    }

    private let state = Mutex(State())
    /// Credentials (`CredentialStore`), beside the keys.
    let credentials = Mutex<[CredentialItemID: String]>([:])
    public let tier: KeyStorageTier
    public let name: String

    /// - Parameter name: the store name recorded in manifests; a test can stand in for another
    ///   store (`"secret-service"`) to open caches that name it.
    public init(tier: KeyStorageTier = .keystore, name: String = "memory") {
        self.tier = tier
        self.name = name
    }

    /// Makes every call answer `.unavailable(reason)` (or behave normally again with `nil`).
    public func simulate(_ reason: KeyUnavailableReason?) {
        state.withLock { $0.failure = reason }
    }

    /// Counts a call; the simulated failure, if any.
    func failure() -> KeyUnavailableReason? {
        state.withLock { s in
            s.calls += 1
            return s.failure
        }
    }

    /// How many store calls were made (tests use it to prove a path never consulted the store).
    public var callCount: Int { state.withLock { $0.calls } }

    public func availability() -> KeyStoreAvailability {
        state.withLock { s in
            s.calls += 1
            return s.failure.map { .unavailable($0) } ?? .available
        }
    }

    public func lookup(_ id: KeyItemID) -> KeyLookup {
        state.withLock { s in
            s.calls += 1
            if let failure = s.failure { return .unavailable(failure) }
            guard let entry = s.entries[id] else { return .absent }
            return .found(entry.key, keyId: entry.keyId)
        }
    }

    public func items(applicationId: String, account: String) -> KeyListing {
        state.withLock { s in
            s.calls += 1
            if let failure = s.failure { return .unavailable(failure) }
            let found = s.entries
                .filter { $0.key.applicationId == applicationId && $0.key.account == account }
                .map { KeyItemSummary(id: $0.key, keyId: $0.value.keyId) }
                .sorted { $0.id.cacheId < $1.id.cacheId }
            return .items(found)
        }
    }

    public func store(_ key: CacheKey, keyId: String, for id: KeyItemID, label: String) throws(KeyStoreError) {
        let failure: KeyUnavailableReason? = state.withLock { s in
            s.calls += 1
            if let failure = s.failure { return failure }
            s.entries[id] = Entry(key: key, keyId: keyId)
            return nil
        }
        if let failure { throw KeyStoreError(failure, "memory store simulates \(failure.rawValue)") }
    }

    public func delete(_ id: KeyItemID) throws(KeyStoreError) {
        let failure: KeyUnavailableReason? = state.withLock { s in
            s.calls += 1
            if let failure = s.failure { return failure }
            s.entries[id] = nil
            return nil
        }
        if let failure { throw KeyStoreError(failure, "memory store simulates \(failure.rawValue)") }
    }

    public func locator(for id: KeyItemID) -> [String: String] {
        ["store": "memory", "application": id.applicationId, "cache-id": id.cacheId]
    }
}
