public import VaultStore

/// Receive-side media mode (`OfflineConfig.mediaCaching`), also spelled `CometChat.MediaCachingMode`.
///
/// `getMediaCachingMode()` reports `.off` whenever offline is not active.
public enum MediaCachingMode: String, Sendable, Codable, CaseIterable {
    /// Auto-download and retain received media.
    case auto
    /// Skip auto-download; attachment metadata is still cached.
    case off
}

/// What a full outbox does (`OfflineConfig.pendingQueueOverflowPolicy`), also spelled
/// `CometChat.PendingMessageOverflowPolicy`.
public enum PendingMessageOverflowPolicy: String, Sendable, Codable, CaseIterable {
    /// Evict the oldest pending message (it fails with `.queueOverflow`, `ERROR_QUEUE_OVERFLOW`) to
    /// admit the newer send.
    case dropOldest
    /// Reject the new send (`.queueFull`, `ERROR_QUEUE_FULL`). The default.
    case rejectNewest
}

/// What happens when encryption is requested but cannot run at all: `.onlineOnly` (the default;
/// server-only, never plaintext) or `.plaintextFallback` (an unencrypted cache, reported as such).
///
/// Defined by the storage layer, which acts on it; re-exposed here (and as
/// `CometChat.EncryptionFailureBehavior`) so apps need only `import ChatVault`.
public typealias EncryptionFailureBehavior = VaultStore.EncryptionFailureBehavior

/// Why the cache was reset, as `onOfflineCacheReset(_:_:)` is told: `.keyLost`, `.wrongKey`,
/// `.corrupted`, `.escalated` (an unclassified failure recurred), `.encryptionChanged` (the
/// `encryption` setting changed between launches).
///
/// Defined by the storage layer, which decides resets; re-exposed here (and as
/// `CometChat.OfflineCacheResetReason`).
public typealias OfflineCacheResetReason = VaultStore.OfflineCacheResetReason

/// The strings `getOfflineEncryptionStatus()` reports in its `atRest` and `keyStorage` entries;
/// also spelled `CometChat.OfflineEncryptionTier`.
///
/// ```swift
/// let status = CometChat.getOfflineEncryptionStatus()
/// let encrypted = status["atRest"] as? String == CometChat.OfflineEncryptionTier.SQLCIPHER
/// ```
public enum OfflineEncryptionTier: Sendable {
    /// `atRest`: the database is encrypted with SQLCipher, proven by a keyed open.
    public static let SQLCIPHER = "SQLCIPHER"
    /// `atRest`: the cache is not encrypted. `keyStorage`: there is no key.
    public static let NONE = "NONE"
    /// `keyStorage`: the key is held by the desktop key store (the Secret Service).
    public static let KEYSTORE = "KEYSTORE"
    /// `keyStorage`: the key is held in a software key file (0600, outside the cache directory).
    public static let SOFTWARE = "SOFTWARE"
}
