public import Foundation
public import VaultKeys

/// What happens when encryption is requested but cannot run at all (no cipher engine, or no
/// acceptable key store on this system). A transient failure (a locked keyring) is not governed
/// by this: it is retried.
public enum EncryptionFailureBehavior: String, Sendable, Codable, CaseIterable {
    /// Server-only: no cache, offline inactive, nothing written. Never plaintext. The default.
    case onlineOnly
    /// Open an unencrypted cache, reported as such by the status.
    case plaintextFallback
}

/// Why a cache was reset (set aside and replaced by an empty one).
public enum OfflineCacheResetReason: String, Sendable, Codable, CaseIterable {
    /// The cache was encrypted and its key is definitely gone from an unlocked store.
    case keyLost
    /// A key was found but it is not the cache's key (the key-check value differs).
    case wrongKey
    /// The key is right but the database is damaged (unreadable page, failed check, bad header).
    case corrupted
    /// An unclassified failure recurred on consecutive opens and was escalated.
    case escalated
    /// The `encryption` setting changed between launches.
    case encryptionChanged
}

/// The value of `pendingMessagesLost` when the old outbox could not be read.
package let offlinePendingCountUnknown = -1

/// One reset, as the reset listener is told.
public struct CacheReset: Sendable, Equatable {
    public let reason: OfflineCacheResetReason
    /// Unsent messages that did not survive; `offlinePendingCountUnknown` (-1) when unknown.
    public let pendingMessagesLost: Int
    /// The quarantine entry holding the old files (relative to the cache directory), if kept.
    public let quarantinedAs: String?

    package init(reason: OfflineCacheResetReason, pendingMessagesLost: Int, quarantinedAs: String?) {
        self.reason = reason
        self.pendingMessagesLost = pendingMessagesLost
        self.quarantinedAs = quarantinedAs
    }
}

/// Why encryption cannot run at all on this system.
public enum EncryptionUnavailable: Sendable, Equatable, CustomStringConvertible {
    /// No SQLCipher engine is linked (or it did not prove itself on a keyed file).
    case cipherNotProven
    /// Every acceptable key store is missing (no bus, no provider…), by store name.
    case noKeyStore([String: KeyUnavailableReason])

    public var description: String {
        switch self {
        case .cipherNotProven: return "no cipher engine is linked or it could not be proven"
        case .noKeyStore(let reasons):
            if reasons.isEmpty { return "no key store is configured" }
            return "no acceptable key store exists (" + reasons.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.rawValue)" }.joined(separator: ", ") + ")"
        }
    }
}

/// Why a cache is temporarily unavailable. None of these ever resets or touches the cache;
/// the engine retries with backoff and on demand.
public enum UnavailableReason: Sendable, Equatable, CustomStringConvertible {
    /// The key store could not answer (locked keyring, no bus, prompt pending…).
    case keyStore(KeyUnavailableReason)
    /// Another connection holds a database lock.
    case databaseBusy
    /// No space left on the device.
    case diskFull
    /// The file or file system refuses writes: a read-only mount, or a cache directory or
    /// database file whose mode does not let this user write it (checked before SQLite opens it).
    case readOnly
    /// Another process (or instance) has this cache open.
    case cacheInUse(pid: Int32?)
    /// A file or directory is a symlink, belongs to someone else, others can read it, or it is
    /// not of the expected kind (a directory where the `lock` file belongs): a person must look.
    case unsafeFiles(String)
    /// An encrypted cache exists but no cipher engine is linked: never opened as plaintext.
    case cipherUnavailable
    /// The key is in a tier the app no longer accepts.
    case keyStorageNotAccepted(KeyStorageTier)
    /// The manifest names a key store this session does not have: none of that name is
    /// configured, or it reports itself missing (no bus, no Secret Service provider: the desktop
    /// changed). The key is not lost, it is elsewhere: configure that store again, or move the key
    /// from a session that has it (`chatvault key move`). Never a reset.
    case keyStoreMissing(store: String, KeyUnavailableReason?)
    /// The manifest was written by a newer ChatVault.
    case newerManifest(Int)
    /// The database schema was written by a newer ChatVault (an app downgrade): left alone.
    case newerSchema(Int)
    /// Changing the encryption setting failed although the cache is readable; it stays as it was
    /// and the change is tried again at the next open.
    case migrationFailed(code: Int32)
    /// Memory or another resource ran out.
    case resources
    /// A failure we cannot classify; it escalates to a reset after `of` consecutive attempts.
    case unclassified(code: Int32, attempt: Int, of: Int)

    /// The stable name used by the CLI (`unavailableReason`).
    public var code: String {
        switch self {
        case .keyStore(let reason): return reason.rawValue
        case .databaseBusy: return "databaseBusy"
        case .diskFull: return "diskFull"
        case .readOnly: return "readOnly"
        case .cacheInUse: return "cacheInUse"
        case .unsafeFiles: return "unsafeFiles"
        case .cipherUnavailable: return "cipherUnavailable"
        case .keyStorageNotAccepted: return "keyStorageNotAccepted"
        case .keyStoreMissing: return "keyStoreMissing"
        case .newerManifest: return "newerManifest"
        case .newerSchema: return "newerSchema"
        case .migrationFailed: return "migrationFailed"
        case .resources: return "resources"
        case .unclassified: return "unclassified"
        }
    }

    public var description: String {
        switch self {
        case .keyStore(let reason): return "the key store is unavailable (\(reason.rawValue))"
        case .databaseBusy: return "the database is locked by another connection"
        case .diskFull: return "the disk is full"
        case .readOnly: return "the cache files cannot be written"
        case .cacheInUse(let pid): return "the cache is in use by another process" + (pid.map { " (pid \($0))" } ?? "")
        case .unsafeFiles(let why): return "refused unsafe cache files: \(why)"
        case .cipherUnavailable: return "the cache is encrypted but no cipher engine is linked"
        case .keyStorageNotAccepted(let tier): return "the key is kept in the \(tier.rawValue) tier, which the app does not accept"
        case .keyStoreMissing(let store, let reason):
            return "the key is kept in the \(store) key store, which this session does not have" + (reason.map { " (\($0.rawValue))" } ?? "")
                + "; configure it again, or move the key with 'chatvault key move' where it is reachable"
        case .newerManifest(let v): return "the cache was written by a newer ChatVault (manifest format \(v))"
        case .newerSchema(let v): return "the cache was written by a newer ChatVault (schema version \(v))"
        case .migrationFailed(let code): return "changing the cache's encryption failed (SQLite \(code)); the cache is unchanged"
        case .resources: return "out of memory or resources"
        case .unclassified(let code, let attempt, let of): return "unclassified failure (SQLite \(code)), attempt \(attempt) of \(of) before escalation"
        }
    }
}

/// How many quarantined caches are kept, and for how long.
public struct QuarantinePolicy: Sendable, Equatable {
    public var maxEntries: Int
    public var maxAge: TimeInterval

    public init(maxEntries: Int = 3, maxAgeDays: Int = 30) {
        self.maxEntries = max(0, maxEntries)
        maxAge = TimeInterval(max(0, maxAgeDays)) * 86_400
    }
}

/// Everything the open procedure needs to know. (`@usableFromInline`: `VaultSettings.init`'s
/// public default argument reads `defaultSynchronousIntegrityCheckLimit`.)
@usableFromInline package struct StoreConfiguration: Sendable {
    package var directory: CacheDirectory
    package var applicationId: String
    /// The opaque per-user name (see `CacheDirectory.account`).
    package var account: String
    /// The key item's human label, e.g. "Example Chat offline cache key (alice)".
    package var keyLabel: String
    /// Encrypt the cache (the app's configuration).
    package var encryption: Bool
    package var failureBehavior: EncryptionFailureBehavior
    /// The key stores the app accepts, in order of preference. Falling back to a later one is
    /// reported in `OpenReport.notes` and by the status's `keyStorage`, never silent.
    package var keyStores: [any KeyStore]
    /// Consecutive unclassified failures (the same failure, once per login) before an
    /// `.escalated` reset.
    package var escalationThreshold: Int = 3
    /// Whether an unclassified failure of this open counts toward escalation. The engine counts
    /// the first open of a login only: its own background retries and `retryOpen()` never push a
    /// cache toward a reset.
    package var countsTowardEscalation = true
    package var quarantine = QuarantinePolicy()
    /// Whether the open prunes old quarantine entries (and deletes their key items) before it
    /// answers. The engine turns it off and prunes after the cache is ready
    /// (`VaultCache.pruneQuarantine`): housekeeping that can wait does not delay `login`. A reset
    /// still prunes as part of the reset.
    package var pruneQuarantineDuringOpen = true
    /// Databases up to this size get `PRAGMA quick_check` during open; larger ones are checked
    /// in the background right after (`VaultCache.verifyIntegrity`). `quick_check` reads and
    /// decrypts every page (about 1.6 ms per MiB here), so 1 MiB keeps an open within its 5 ms.
    package var synchronousIntegrityCheckLimit: Int64 = StoreConfiguration.defaultSynchronousIntegrityCheckLimit
    @usableFromInline package static let defaultSynchronousIntegrityCheckLimit: Int64 = 1 << 20
    package var connection = ConnectionOptions()
    package var now: @Sendable () -> Date = { Date() }
    /// Test seam: pretend the linked engine is this one (e.g. plain SQLite, no cipher).
    package var cipherEngine: CipherEngine?

    package init(directory: CacheDirectory, applicationId: String, account: String, keyLabel: String,
                encryption: Bool, failureBehavior: EncryptionFailureBehavior, keyStores: [any KeyStore]) {
        self.directory = directory
        self.applicationId = applicationId
        self.account = account
        self.keyLabel = keyLabel
        self.encryption = encryption
        self.failureBehavior = failureBehavior
        self.keyStores = keyStores
    }
}

/// The result of opening a cache.
package struct OpenReport: Sendable {
    package enum Outcome: Sendable, Equatable {
        /// The cache is open (encrypted if configured).
        case ready
        /// Encryption was requested but cannot run; an unencrypted cache is open, reported as such.
        case plaintextFallback(EncryptionUnavailable)
        /// Transient: nothing was touched; retry later.
        case unavailable(UnavailableReason)
        /// Encryption was requested but cannot run; no cache, nothing written.
        case onlineOnly(EncryptionUnavailable)

        /// The stable name used by the CLI (`outcome`).
        package var code: String {
            switch self {
            case .ready: return "ready"
            case .plaintextFallback: return "plaintextFallback"
            case .unavailable: return "unavailable"
            case .onlineOnly: return "onlineOnly"
            }
        }
    }

    package let outcome: Outcome
    /// The resets to tell the reset listener about, oldest first: this open's, and any an earlier
    /// run performed but did not deliver. Empty unless the outcome is `.ready` or
    /// `.plaintextFallback` (a reset is only announced once its replacement cache serves). Call
    /// `CacheOpener.acknowledge(_:in:)` once they have been delivered.
    package let resets: [CacheReset]
    /// The open cache for `.ready` and `.plaintextFallback`.
    package let cache: VaultCache?
    /// Things worth telling the app or the audit (a repaired manifest, a key-tier fallback…).
    package let notes: [String]
    /// Quarantined caches set aside for a lost or wrong key whose key is in its store again (a
    /// keyring restored from backup): `KeyManager.restore(_:entry:)` brings one back.
    package internal(set) var restorable: [String] = []
}
