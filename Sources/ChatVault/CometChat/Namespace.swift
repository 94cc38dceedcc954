public import VaultStore

/// The seeds' `CometChat.` namespace, so code written against the SDK's spellings compiles:
/// `CometChat.MessageStatus`, `CometChat.SyncState`, `CometChat.offlinePendingCountUnknown`, …
///
/// The types themselves are top-level in this module (`MessageStatus` is `CometChat.MessageStatus`).
/// The static facade functions of the seeds (`CometChat.isOfflineEnabled()`, …) are added in an
/// extension elsewhere; this file holds only the namespace and its aliases.
///
/// The aliases name their targets through the module (`ChatVault.MediaCachingMode`), because inside
/// this enum an unqualified `MediaCachingMode` would be the alias itself. That relies on the module
/// having no type of its own named `ChatVault`.
public enum CometChat {
    /// See ``ChatVault/MediaCachingMode``.
    public typealias MediaCachingMode = ChatVault.MediaCachingMode
    /// See ``ChatVault/PendingMessageOverflowPolicy``.
    public typealias PendingMessageOverflowPolicy = ChatVault.PendingMessageOverflowPolicy
    /// See ``ChatVault/EncryptionFailureBehavior`` (defined by the storage layer).
    public typealias EncryptionFailureBehavior = VaultStore.EncryptionFailureBehavior
    /// See ``ChatVault/MessageStatus``.
    public typealias MessageStatus = ChatVault.MessageStatus
    /// See ``ChatVault/MessageSource``.
    public typealias MessageSource = ChatVault.MessageSource
    /// See ``ChatVault/MessageFailureReason``.
    public typealias MessageFailureReason = ChatVault.MessageFailureReason
    /// See ``ChatVault/SyncOutcome``.
    public typealias SyncOutcome = ChatVault.SyncOutcome
    /// See ``ChatVault/SyncState``.
    public typealias SyncState = ChatVault.SyncState
    /// See ``ChatVault/OfflineCacheResetReason`` (defined by the storage layer).
    public typealias OfflineCacheResetReason = VaultStore.OfflineCacheResetReason
    /// See ``ChatVault/OfflineEncryptionTier``.
    public typealias OfflineEncryptionTier = ChatVault.OfflineEncryptionTier

    /// The `pendingMessagesLost` value of `onOfflineCacheReset(_:_:)` when the number of unsent
    /// messages lost is unknown (the old outbox could not be read): `-1`, the storage layer's value.
    public static let offlinePendingCountUnknown: Int = VaultStore.offlinePendingCountUnknown
}
