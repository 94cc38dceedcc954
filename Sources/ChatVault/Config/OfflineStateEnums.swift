/// Lifecycle status of a message (`BaseMessage.messageStatus`), also spelled
/// `CometChat.MessageStatus`. Not the same as the legacy `status` string.
public enum MessageStatus: String, Sendable, Codable, CaseIterable {
    /// Committed to the outbox, not yet handed to the server.
    case pending
    /// Being sent now.
    case sending
    /// Acknowledged by the server.
    case sent
    /// Delivered to the recipient.
    case delivered
    /// Read by the recipient.
    case read
    /// Could not be sent; `failureReason` says why.
    case failed
}

/// How a message reached the app (`BaseMessage.source`), also spelled `CometChat.MessageSource`.
public enum MessageSource: String, Sendable, Codable, CaseIterable {
    /// Arrived over the realtime connection.
    case realtime
    /// Arrived via the reconnect catch-up sweep (and reached `onMessagesSynced`).
    case sync
}

/// Why a failed message last failed (`BaseMessage.failureReason`), also spelled
/// `CometChat.MessageFailureReason`. Device-only, never sent to the server.
public enum MessageFailureReason: String, Sendable, Codable, CaseIterable {
    /// A retry is likely to help.
    case transient
    /// A retry will not help.
    case permanent
    /// Evicted from a full outbox to admit a newer send (`.dropOldest`; `ERROR_QUEUE_OVERFLOW`).
    case queueOverflow
    /// The new send was rejected because the outbox is full (`.rejectNewest`; `ERROR_QUEUE_FULL`).
    case queueFull
    /// Outgoing media exceeded the media byte budget (`ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW`).
    case byteOverflow
    /// Removed before it could send (`ERROR_OFFLINE_MESSAGE_DISCARDED`).
    case discarded
}

/// How a message catch-up phase ended (`onMessageSyncCompleted(_:_:)`), also spelled
/// `CometChat.SyncOutcome`.
public enum SyncOutcome: String, Sendable, Codable, CaseIterable {
    /// The gap was replayed exactly.
    case caughtUp
    /// A page was ingested but more remains; the next sweep continues.
    case partial
}

/// Whether a catch-up sweep is running (`getSyncState()`), also spelled `CometChat.SyncState`.
public enum SyncState: String, Sendable, Codable, CaseIterable {
    /// No sweep is running.
    case idle
    /// A sweep is running: from the moment it was accepted to the end of its last phase.
    case syncing
}

/// The state of one file of an upload batch (`UploadFileItemStatus.state`).
public enum UploadFileState: String, Sendable, Codable, CaseIterable {
    /// Waiting for its turn.
    case queued
    /// Being uploaded now.
    case uploading
    /// Uploaded; its attachment is known.
    case uploaded
    /// The upload failed; `retryAttachment(fileId:)` retries it.
    case failed
    /// Refused (for example over the media byte budget); a retry will not help.
    case rejected
}
