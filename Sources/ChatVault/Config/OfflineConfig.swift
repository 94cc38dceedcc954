public import VaultStore

/// The offline engine's settings, immutable once built.
///
/// Every option of the reference's "OfflineConfig options" table is here, with the table's default
/// and its "Range / clamp" rule. Values are **normalised, never rejected**: an out-of-range value
/// becomes the value the table names (see ``OfflineConfig/Builder`` and
/// `OfflineConfig+Normalisation.swift`, the one place both construction paths go through).
///
/// ```swift
/// let config = OfflineConfig(enabled: true, encryption: true, maxPendingMessages: 20)
/// // or
/// let same = OfflineConfig.Builder()
///     .setEnabled(true)
///     .setEncryption(true)
///     .setMaxPendingMessages(20)
///     .build()
/// assert(config == same)
/// ```
///
/// Byte caps (`maxStorageSize`, `maxMediaCacheSize`) and the conversation age limit
/// (`cacheDurationDays`) read `0` as **unlimited**: that dimension's eviction is disabled. The count
/// caps have no "unlimited".
public struct OfflineConfig: Sendable, Equatable, Hashable {
    /// Master gate for the whole offline engine. Default `false`. With it off the library behaves
    /// as if there were no offline support.
    public let enabled: Bool

    /// Days to keep a conversation that has had no new message and has not been opened.
    /// Default `0` (no age-based prune; eviction is by the byte and count caps).
    /// Clamp: `>= 0`; a negative value is stored as `0`.
    public let cacheDurationDays: Int

    /// Byte budget for cached content (messages, entity snapshots, stored lists); the outbox is
    /// excluded. Default `262144000` (250 MB). `0` = unlimited; a negative value is stored as `0`.
    public let maxStorageSize: Int64

    /// Per-conversation cached-message window. Default `500`.
    /// Clamp: `[1, 1000]`; `0`, negative or over `1000` → `1000`.
    public let maxMessagesPerConversation: Int

    /// Cached-conversation cap. Default `100`.
    /// Clamp: `[1, 1000]`; `0`, negative or over `1000` → `1000`.
    public let maxConversations: Int

    /// Pending-send outbox capacity. Default `50`.
    /// Clamp: `[1, 100]`; `0`, negative or over `100` → `100`.
    public let maxPendingMessages: Int

    /// Auto-flush queued pending sends on reconnect. Default `true`. Gates only the outbox flush;
    /// the reconnect sync sweep runs regardless.
    public let autoSendPendingOnReconnect: Bool

    /// What the outbox does when it is full. Default ``PendingMessageOverflowPolicy/rejectNewest``.
    public let pendingQueueOverflowPolicy: PendingMessageOverflowPolicy

    /// Media-only byte budget (LRU). Default `524288000` (500 MB).
    /// `0` = unlimited; a negative value is stored as `0`.
    public let maxMediaCacheSize: Int64

    /// Receive-side media mode, fixed at initialisation. Default ``MediaCachingMode/auto``.
    public let mediaCaching: MediaCachingMode

    /// Encrypt the cache database at rest (SQLCipher). Default `false`. Media files are not covered
    /// (the encryption status's `leakage` says so).
    public let encryption: Bool

    /// What happens when encryption is requested but cannot run at all (no cipher engine, no
    /// acceptable key store). Default `.onlineOnly`: no cache, never plaintext. A transient failure
    /// (a locked keyring) is not governed by this; it is retried.
    public let encryptionFailureBehavior: EncryptionFailureBehavior

    /// Most entity-list snapshots kept for offline replay (users, groups, group members, banned
    /// members, reactions, notification feed), LRU. Default `100`. `0` or negative → `100`.
    public let maxSnapshotQueries: Int

    /// Days an entity-list snapshot is kept. Default `7`. `0` or negative → `7`.
    public let snapshotTtlDays: Int

    /// Creates a configuration; every argument defaults to the reference table's default, and every
    /// value is normalised by the table's "Range / clamp" rule (never rejected).
    ///
    /// ```swift
    /// let config = OfflineConfig(enabled: true, encryption: true)
    /// config.maxConversations   // 100
    /// OfflineConfig(maxConversations: 0).maxConversations   // 1000
    /// ```
    public init(
        enabled: Bool = false,
        encryption: Bool = false,
        cacheDurationDays: Int = 0,
        maxStorageSize: Int64 = 262_144_000,
        maxMessagesPerConversation: Int = 500,
        maxConversations: Int = 100,
        maxPendingMessages: Int = 50,
        autoSendPendingOnReconnect: Bool = true,
        pendingQueueOverflowPolicy: PendingMessageOverflowPolicy = .rejectNewest,
        maxMediaCacheSize: Int64 = 524_288_000,
        mediaCaching: MediaCachingMode = .auto,
        encryptionFailureBehavior: EncryptionFailureBehavior = .onlineOnly,
        maxSnapshotQueries: Int = 100,
        snapshotTtlDays: Int = 7
    ) {
        self.enabled = enabled
        self.encryption = encryption
        self.cacheDurationDays = Normalise.cacheDurationDays(cacheDurationDays)
        self.maxStorageSize = Normalise.byteCap(maxStorageSize)
        self.maxMessagesPerConversation = Normalise.maxMessagesPerConversation(maxMessagesPerConversation)
        self.maxConversations = Normalise.maxConversations(maxConversations)
        self.maxPendingMessages = Normalise.maxPendingMessages(maxPendingMessages)
        self.autoSendPendingOnReconnect = autoSendPendingOnReconnect
        self.pendingQueueOverflowPolicy = pendingQueueOverflowPolicy
        self.maxMediaCacheSize = Normalise.byteCap(maxMediaCacheSize)
        self.mediaCaching = mediaCaching
        self.encryptionFailureBehavior = encryptionFailureBehavior
        self.maxSnapshotQueries = Normalise.maxSnapshotQueries(maxSnapshotQueries)
        self.snapshotTtlDays = Normalise.snapshotTtlDays(snapshotTtlDays)
    }
}
