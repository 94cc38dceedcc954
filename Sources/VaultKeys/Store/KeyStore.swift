/// Where a cache key is kept, as reported in the encryption status's `keyStorage`.
public enum KeyStorageTier: String, Sendable, Codable, CaseIterable {
    /// The desktop's Secret Service (gnome-keyring, KWallet's Secret Service bridge, KeePassXC…).
    case keystore = "KEYSTORE"
    /// A key file (0600) in a 0700 directory outside the cache directory.
    case software = "SOFTWARE"
    /// No key: the cache is plaintext.
    case none = "NONE"
}

/// Why a key store cannot answer right now. None of these is a verdict on the key itself:
/// only `KeyLookup.absent` may lead to a `keyLost` reset.
public enum KeyUnavailableReason: String, Sendable, Codable, Equatable, CaseIterable {
    /// No D-Bus session bus could be reached.
    case noBus
    /// A session bus, but nothing owns `org.freedesktop.secrets` and nothing can be activated.
    case noProvider
    /// The collection that would hold the item is locked (libsecret reports a locked item exactly
    /// like a missing one, so this is checked on the collection itself).
    case locked
    /// An unlock prompt was shown and nobody answered before the timeout.
    case promptTimedOut
    /// The user (or policy) dismissed the unlock prompt or refused access.
    case denied
    /// The store's file or directory can be read by others, or is not ours: refused, never used.
    case insecureStorage
    /// Anything else (a D-Bus error, an I/O error, a call that never returned).
    case other

    /// The store does not exist on this system at all (as opposed to being temporarily closed).
    /// When no cache exists yet, this is what "encryption cannot run" means for this tier.
    package var meansStoreMissing: Bool { self == .noBus || self == .noProvider }
}

/// Names one cache's key item. `account` is an opaque per-user identifier (a hash), never a user id.
public struct KeyItemID: Sendable, Hashable, Codable, CustomStringConvertible {
    public var applicationId: String
    public var account: String
    public var cacheId: String

    public init(applicationId: String, account: String, cacheId: String) {
        self.applicationId = applicationId
        self.account = account
        self.cacheId = cacheId
    }

    public var description: String { "key item (application \(applicationId), cache \(cacheId))" }
}

/// A key item found by listing an account's items (used when a manifest has to be rebuilt).
public struct KeyItemSummary: Sendable, Hashable {
    public var id: KeyItemID
    public var keyId: String

    public init(id: KeyItemID, keyId: String) {
        self.id = id
        self.keyId = keyId
    }
}

/// The typed answer of a key lookup.
public enum KeyLookup: Sendable, CustomStringConvertible {
    /// The key, and the key id recorded with it.
    case found(CacheKey, keyId: String)
    /// Definitely not there: the store answered and the collection that would hold it is unlocked.
    case absent
    /// The store could not answer now. Transient: never a reason to reset a cache.
    case unavailable(KeyUnavailableReason)

    public var description: String {
        switch self {
        case .found(_, let keyId): return "found (key id \(keyId))"
        case .absent: return "absent"
        case .unavailable(let reason): return "unavailable (\(reason.rawValue))"
        }
    }
}

/// The answer of listing an account's key items.
public enum KeyListing: Sendable {
    case items([KeyItemSummary])
    case unavailable(KeyUnavailableReason)
}

/// Whether a store can hold a new key right now.
public enum KeyStoreAvailability: Sendable, Equatable {
    case available
    case unavailable(KeyUnavailableReason)
}

/// A key store operation failed. Carries a reason and a description free of key material.
public struct KeyStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: KeyUnavailableReason
    public var detail: String

    public init(_ reason: KeyUnavailableReason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { "key store \(reason.rawValue): \(detail)" }
}

/// A place that keeps cache keys. Implementations: `SecretServiceKeyStore`, `SoftwareKeyStore`,
/// `MemoryKeyStore`. Every call may block (D-Bus, disk); none of them prompts on the caller's thread.
public protocol KeyStore: Sendable {
    /// The tier reported in the encryption status.
    var tier: KeyStorageTier { get }
    /// A short name for reports (`secret-service`, `file`, `memory`).
    var name: String { get }

    /// Whether a new key could be stored now.
    func availability() -> KeyStoreAvailability
    /// Looks up one cache's key.
    func lookup(_ id: KeyItemID) -> KeyLookup
    /// Lists the key items of one account (every cache id with a key).
    func items(applicationId: String, account: String) -> KeyListing
    /// Stores (or replaces) a cache's key.
    func store(_ key: CacheKey, keyId: String, for id: KeyItemID, label: String) throws(KeyStoreError)
    /// Deletes a cache's key. Deleting a missing item succeeds.
    func delete(_ id: KeyItemID) throws(KeyStoreError)
    /// The attributes (or file path) that find the item with the store's own tools
    /// (`secret-tool search …`). Contains no key material.
    func locator(for id: KeyItemID) -> [String: String]
    /// Gets ready for a lookup that is about to come (opens a connection), so that the slow part
    /// of a first lookup can overlap other work. Reads and changes no item; failures are left for
    /// the lookup to report. Blocks like the other calls: call it off the critical path.
    func prepare()
}

extension KeyStore {
    /// Nothing to prepare (files, memory).
    public func prepare() {}
}
