extension OfflineConfig {
    /// Builds an ``OfflineConfig`` with the reference's setter names; set only what you change.
    ///
    /// ```swift
    /// let offlineConfig = OfflineConfig.Builder()
    ///     .setEnabled(true)
    ///     .setMaxConversations(100)
    ///     .setMaxMessagesPerConversation(500)
    ///     .setMaxPendingMessages(50)
    ///     .setMediaCaching(.auto)
    ///     .setEncryption(false)
    ///     .build()
    /// ```
    ///
    /// Setters keep the raw value; ``build()`` passes everything through the ``OfflineConfig``
    /// initializer, so the builder and the initializer normalise identically. A builder is a mutable
    /// reference and is not `Sendable`: build on one thread, then share the immutable config.
    public final class Builder {
        private var enabled: Bool
        private var cacheDurationDays: Int
        private var maxStorageSize: Int64
        private var maxMessagesPerConversation: Int
        private var maxConversations: Int
        private var maxPendingMessages: Int
        private var autoSendPendingOnReconnect: Bool
        private var pendingQueueOverflowPolicy: PendingMessageOverflowPolicy
        private var maxMediaCacheSize: Int64
        private var mediaCaching: MediaCachingMode
        private var encryption: Bool
        private var encryptionFailureBehavior: EncryptionFailureBehavior
        private var maxSnapshotQueries: Int
        private var snapshotTtlDays: Int

        /// A builder holding the reference table's defaults.
        public convenience init() {
            self.init(OfflineConfig())
        }

        /// A builder starting from an existing configuration, to derive a changed copy.
        public init(_ config: OfflineConfig) {
            enabled = config.enabled
            cacheDurationDays = config.cacheDurationDays
            maxStorageSize = config.maxStorageSize
            maxMessagesPerConversation = config.maxMessagesPerConversation
            maxConversations = config.maxConversations
            maxPendingMessages = config.maxPendingMessages
            autoSendPendingOnReconnect = config.autoSendPendingOnReconnect
            pendingQueueOverflowPolicy = config.pendingQueueOverflowPolicy
            maxMediaCacheSize = config.maxMediaCacheSize
            mediaCaching = config.mediaCaching
            encryption = config.encryption
            encryptionFailureBehavior = config.encryptionFailureBehavior
            maxSnapshotQueries = config.maxSnapshotQueries
            snapshotTtlDays = config.snapshotTtlDays
        }

        /// Master gate for the offline engine. Default `false`.
        @discardableResult
        public func setEnabled(_ enabled: Bool) -> Builder {
            self.enabled = enabled
            return self
        }

        /// Days to keep an idle, unopened conversation. Default `0` (no age-based prune);
        /// negative → `0`.
        @discardableResult
        public func setCacheDurationDays(_ days: Int) -> Builder {
            cacheDurationDays = days
            return self
        }

        /// Byte budget for cached content, outbox excluded. Default `262144000` (250 MB);
        /// `0` or negative → `0` (unlimited).
        @discardableResult
        public func setMaxStorageSize(_ bytes: Int64) -> Builder {
            maxStorageSize = bytes
            return self
        }

        /// Per-conversation cached-message window. Default `500`; clamped `[1, 1000]`,
        /// `0`/negative/over → `1000`.
        @discardableResult
        public func setMaxMessagesPerConversation(_ count: Int) -> Builder {
            maxMessagesPerConversation = count
            return self
        }

        /// Cached-conversation cap. Default `100`; clamped `[1, 1000]`, `0`/negative/over → `1000`.
        @discardableResult
        public func setMaxConversations(_ count: Int) -> Builder {
            maxConversations = count
            return self
        }

        /// Pending-send outbox capacity. Default `50`; clamped `[1, 100]`,
        /// `0`/negative/over → `100`.
        @discardableResult
        public func setMaxPendingMessages(_ count: Int) -> Builder {
            maxPendingMessages = count
            return self
        }

        /// Auto-flush the outbox on reconnect. Default `true`; the sync sweep runs regardless.
        @discardableResult
        public func setAutoSendPendingOnReconnect(_ autoSend: Bool) -> Builder {
            autoSendPendingOnReconnect = autoSend
            return self
        }

        /// What a full outbox does. Default `.rejectNewest`.
        @discardableResult
        public func setPendingQueueOverflowPolicy(_ policy: PendingMessageOverflowPolicy) -> Builder {
            pendingQueueOverflowPolicy = policy
            return self
        }

        /// Media-only byte budget (LRU). Default `524288000` (500 MB); `0` or negative → `0`
        /// (unlimited).
        @discardableResult
        public func setMaxMediaCacheSize(_ bytes: Int64) -> Builder {
            maxMediaCacheSize = bytes
            return self
        }

        /// Receive-side media mode, fixed at initialisation. Default `.auto`.
        @discardableResult
        public func setMediaCaching(_ mode: MediaCachingMode) -> Builder {
            mediaCaching = mode
            return self
        }

        /// Encrypt the cache database at rest. Default `false`.
        @discardableResult
        public func setEncryption(_ encryption: Bool) -> Builder {
            self.encryption = encryption
            return self
        }

        /// What happens when encryption cannot run at all. Default `.onlineOnly`.
        @discardableResult
        public func setEncryptionFailureBehavior(_ behavior: EncryptionFailureBehavior) -> Builder {
            encryptionFailureBehavior = behavior
            return self
        }

        /// Most entity-list snapshots kept (LRU). Default `100`; `0` or negative → `100`.
        @discardableResult
        public func setMaxSnapshotQueries(_ count: Int) -> Builder {
            maxSnapshotQueries = count
            return self
        }

        /// Days an entity-list snapshot is kept. Default `7`; `0` or negative → `7`.
        @discardableResult
        public func setSnapshotTtlDays(_ days: Int) -> Builder {
            snapshotTtlDays = days
            return self
        }

        /// The immutable, normalised configuration. The builder can be reused afterwards.
        public func build() -> OfflineConfig {
            OfflineConfig(
                enabled: enabled,
                encryption: encryption,
                cacheDurationDays: cacheDurationDays,
                maxStorageSize: maxStorageSize,
                maxMessagesPerConversation: maxMessagesPerConversation,
                maxConversations: maxConversations,
                maxPendingMessages: maxPendingMessages,
                autoSendPendingOnReconnect: autoSendPendingOnReconnect,
                pendingQueueOverflowPolicy: pendingQueueOverflowPolicy,
                maxMediaCacheSize: maxMediaCacheSize,
                mediaCaching: mediaCaching,
                encryptionFailureBehavior: encryptionFailureBehavior,
                maxSnapshotQueries: maxSnapshotQueries,
                snapshotTtlDays: snapshotTtlDays)
        }
    }
}

/// A builder is a mutable reference: confine it to one thread and share the built config instead.
@available(*, unavailable)
extension OfflineConfig.Builder: Sendable {}
