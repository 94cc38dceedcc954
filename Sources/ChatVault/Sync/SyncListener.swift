/// Hears the catch-up sync that runs after a reconnect (and on `forceSyncNow`): first the
/// conversations phase (one fresh page of the conversation list), then the messages phase (the
/// server's change log replayed forward from the last sync point). Held weakly, one per id
/// (`OfflineVault.addSyncListener(_:_:)`); delivered on the callback executor, in order.
///
///     final class SyncBanner: SyncListener {
///         func onMessageSyncStarted() { show("Catching up…") }
///         func onMessageSyncCompleted(_ messages: [BaseMessage], _ outcome: CometChat.SyncOutcome) { hide() }
///     }
///     let banner = SyncBanner()                  // keep a strong reference
///     CometChat.addSyncListener("BANNER", banner)
///
/// Every method has an empty default.
public protocol SyncListener: AnyObject, Sendable {
    /// The conversations phase of a sweep began.
    func onConversationSyncStarted()
    /// The fresh page of conversations, as now cached.
    func onConversationSyncCompleted(_ conversations: [Conversation])
    /// The conversations phase failed (for example `ERROR_INTERNET_UNAVAILABLE`, or
    /// `ERROR_INVALID_SERVER_RESPONSE` for a page that failed validation); the messages phase still
    /// runs.
    func onConversationSyncError(_ error: CometChatException)
    /// The messages phase of a sweep began.
    func onMessageSyncStarted()
    /// The messages this sweep wrote (new ones and cached ones it changed), in log order, and
    /// whether the gap was replayed exactly (`.caughtUp`) or more remains (`.partial`: the engine
    /// goes on with a follow-up sweep while the connection holds).
    func onMessageSyncCompleted(_ messages: [BaseMessage], _ outcome: CometChat.SyncOutcome)
    /// The messages phase failed; the sync point stays at the last committed page, so the next
    /// sweep resumes there.
    func onMessageSyncError(_ error: CometChatException)
}

extension SyncListener {
    /// Does nothing: a listener hears only the events it implements.
    public func onConversationSyncStarted() {}
    /// Does nothing: a listener hears only the events it implements.
    public func onConversationSyncCompleted(_ conversations: [Conversation]) {}
    /// Does nothing: a listener hears only the events it implements.
    public func onConversationSyncError(_ error: CometChatException) {}
    /// Does nothing: a listener hears only the events it implements.
    public func onMessageSyncStarted() {}
    /// Does nothing: a listener hears only the events it implements.
    public func onMessageSyncCompleted(_ messages: [BaseMessage], _ outcome: CometChat.SyncOutcome) {}
    /// Does nothing: a listener hears only the events it implements.
    public func onMessageSyncError(_ error: CometChatException) {}
}

/// One event of `OfflineVault.syncEvents()`: what a `SyncListener` hears, as values.
public enum SyncEvent: Sendable {
    /// `onConversationSyncStarted()`.
    case conversationSyncStarted
    /// `onConversationSyncCompleted(_:)`: the fresh page of conversations, as now cached.
    case conversationSyncCompleted([Conversation])
    /// `onConversationSyncError(_:)`.
    case conversationSyncError(CometChatException)
    /// `onMessageSyncStarted()`.
    case messageSyncStarted
    /// `onMessageSyncCompleted(_:_:)`: the messages written, and `.caughtUp` or `.partial`.
    case messageSyncCompleted([BaseMessage], SyncOutcome)
    /// `onMessageSyncError(_:)`.
    case messageSyncError(CometChatException)
    /// The sweep is over (after its last phase event); `getSyncState()` is `.idle` again unless
    /// a follow-up sweep starts.
    case sweepFinished(SyncReport)
}

/// How one sweep went (`OfflineVault.syncNow()`, `SyncEvent.sweepFinished`).
public struct SyncReport: Sendable {
    /// The fresh conversations page; nil when the conversations phase failed.
    public let conversations: [Conversation]?
    /// Why the conversations phase failed; nil when it succeeded.
    public let conversationError: CometChatException?
    /// The messages the sweep wrote (new and changed), in log order.
    public let messages: [BaseMessage]
    /// How many of `messages` were new to the cache (they reached `onMessagesSynced`).
    public let newMessageCount: Int
    /// nil when the messages phase failed (`messageError` says why).
    public let outcome: SyncOutcome?
    /// Why the messages phase failed; nil when it succeeded.
    public let messageError: CometChatException?
    /// Changes the server sent that failed validation and were skipped.
    public let droppedChanges: Int
    /// Whether this sweep established the first sync point of a new cache (the messages phase
    /// then has nothing to replay).
    public let establishedSyncPoint: Bool
    /// The server time the cache is now synced to (`getLastSyncTimestamp()`), epoch seconds.
    public let lastSyncTimestamp: Int
}
