/// String constants with the seeds' spellings.
///
/// ```swift
/// if exception.errorCode == CometChatConstants.Errors.ERROR_QUEUE_FULL { … }
/// ```
public enum CometChatConstants {
    /// The error codes of the reference's "Error codes" table. Compare
    /// ``CometChatException/errorCode`` against these; each constant equals its own name.
    /// Swift code can also switch on ``OfflineErrorCode``.
    public enum Errors {
        /// A read reached the server phase with no connection (after the cached page of a
        /// two-phase fetch), or a send was queued offline (the "queued, not failed" notice).
        public static let ERROR_INTERNET_UNAVAILABLE = "ERROR_INTERNET_UNAVAILABLE"
        /// A two-phase fetch on a messages, threads or reactions request was called while its
        /// previous fetch is still in flight.
        public static let ERROR_REQUEST_IN_PROGRESS = "ERROR_REQUEST_IN_PROGRESS"
        /// `forceSyncNow(onSuccess:onError:)` was called with nobody logged in.
        public static let ERROR_USER_NOT_LOGGED_IN = "ERROR_USER_NOT_LOGGED_IN"
        /// `forceSyncNow(onSuccess:onError:)` was called while a sync is already running.
        public static let ERROR_OFFLINE_SYNC_IN_PROGRESS = "ERROR_OFFLINE_SYNC_IN_PROGRESS"
        /// `forceSyncNow(onSuccess:onError:)` was called within the throttle cooldown.
        public static let ERROR_OFFLINE_SYNC_COOLDOWN = "ERROR_OFFLINE_SYNC_COOLDOWN"
        /// An offline-only operation was called while offline support is not active.
        public static let ERROR_OFFLINE_DISABLED = "ERROR_OFFLINE_DISABLED"
        /// A queued message was removed before it could send.
        public static let ERROR_OFFLINE_MESSAGE_DISCARDED = "ERROR_OFFLINE_MESSAGE_DISCARDED"
        /// `retryMessage` / `discardLocalMessage` targeted a message that is still being sent.
        public static let ERROR_OFFLINE_MESSAGE_IN_FLIGHT = "ERROR_OFFLINE_MESSAGE_IN_FLIGHT"
        /// `retryMessage` / `discardLocalMessage` found no unsent message with that local id.
        public static let ERROR_OFFLINE_MESSAGE_NOT_FOUND = "ERROR_OFFLINE_MESSAGE_NOT_FOUND"
        /// The local cache was briefly unavailable, so `getPendingMessages`, `retryMessage` or
        /// `discardLocalMessage` changed nothing. Try again.
        public static let ERROR_OFFLINE_MESSAGE_PERSIST_FAILED = "ERROR_OFFLINE_MESSAGE_PERSIST_FAILED"
        /// A new send was refused because the outbox is full (`.rejectNewest`).
        public static let ERROR_QUEUE_FULL = "ERROR_QUEUE_FULL"
        /// A queued message was evicted to admit a newer send (`.dropOldest`).
        public static let ERROR_QUEUE_OVERFLOW = "ERROR_QUEUE_OVERFLOW"
        /// Outgoing media would exceed `maxMediaCacheSize`.
        public static let ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW = "ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW"
        /// An outgoing media file could not be copied for offline send.
        public static let ERROR_OFFLINE_MEDIA_COPY_FAILED = "ERROR_OFFLINE_MEDIA_COPY_FAILED"
        /// `downloadMedia`: no cached bytes and the device is offline.
        public static let ERROR_OFFLINE_MEDIA_NOT_CACHED = "ERROR_OFFLINE_MEDIA_NOT_CACHED"
        /// `downloadMedia`: the cache missed, the download failed and re-signing produced nothing
        /// usable.
        public static let ERROR_OFFLINE_MEDIA_UNRESOLVABLE = "ERROR_OFFLINE_MEDIA_UNRESOLVABLE"

        /// Every code above, in the reference table's order. `ERROR_MEDIA_DOWNLOAD_FAILED` is not
        /// among them (see ``MediaDownloadErrors``).
        public static let allCodes: [String] = [
            ERROR_INTERNET_UNAVAILABLE,
            ERROR_REQUEST_IN_PROGRESS,
            ERROR_USER_NOT_LOGGED_IN,
            ERROR_OFFLINE_SYNC_IN_PROGRESS,
            ERROR_OFFLINE_SYNC_COOLDOWN,
            ERROR_OFFLINE_DISABLED,
            ERROR_OFFLINE_MESSAGE_DISCARDED,
            ERROR_OFFLINE_MESSAGE_IN_FLIGHT,
            ERROR_OFFLINE_MESSAGE_NOT_FOUND,
            ERROR_OFFLINE_MESSAGE_PERSIST_FAILED,
            ERROR_QUEUE_FULL,
            ERROR_QUEUE_OVERFLOW,
            ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW,
            ERROR_OFFLINE_MEDIA_COPY_FAILED,
            ERROR_OFFLINE_MEDIA_NOT_CACHED,
            ERROR_OFFLINE_MEDIA_UNRESOLVABLE,
        ]
    }
}

/// The error code a failed **background** media download reports to
/// `onMediaDownloadFailed(_:_:)`.
///
/// In the SDK this string is deliberately **not** a `CometChatConstants.Errors` constant (the
/// reference says so), so it lives here rather than in ``CometChatConstants/Errors`` and is not in
/// its `allCodes`. Its typed form is ``OfflineErrorCode/mediaDownloadFailed``.
public enum MediaDownloadErrors {
    /// A background download of an attachment's bytes failed.
    public static let ERROR_MEDIA_DOWNLOAD_FAILED = "ERROR_MEDIA_DOWNLOAD_FAILED"
}
