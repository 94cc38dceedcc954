/// The offline error codes as a Swift enum, so code can `switch` on them; each raw value is the
/// code string (`OfflineErrorCode.queueFull.rawValue == "ERROR_QUEUE_FULL"`).
///
/// ```swift
/// switch exception.code {
/// case .queueFull?: showOutboxFull()
/// case .internetUnavailable?: showQueuedBadge()
/// default: showGenericError(exception.errorDescription)
/// }
/// ```
///
/// Every case but ``mediaDownloadFailed`` mirrors a ``CometChatConstants/Errors`` constant; see
/// ``isCometChatConstantsError``.
public enum OfflineErrorCode: String, Sendable, Codable, CaseIterable {
    /// `ERROR_INTERNET_UNAVAILABLE`
    case internetUnavailable = "ERROR_INTERNET_UNAVAILABLE"
    /// `ERROR_REQUEST_IN_PROGRESS`
    case requestInProgress = "ERROR_REQUEST_IN_PROGRESS"
    /// `ERROR_USER_NOT_LOGGED_IN`
    case userNotLoggedIn = "ERROR_USER_NOT_LOGGED_IN"
    /// `ERROR_OFFLINE_SYNC_IN_PROGRESS`
    case offlineSyncInProgress = "ERROR_OFFLINE_SYNC_IN_PROGRESS"
    /// `ERROR_OFFLINE_SYNC_COOLDOWN`
    case offlineSyncCooldown = "ERROR_OFFLINE_SYNC_COOLDOWN"
    /// `ERROR_OFFLINE_DISABLED`
    case offlineDisabled = "ERROR_OFFLINE_DISABLED"
    /// `ERROR_OFFLINE_MESSAGE_DISCARDED`
    case offlineMessageDiscarded = "ERROR_OFFLINE_MESSAGE_DISCARDED"
    /// `ERROR_OFFLINE_MESSAGE_IN_FLIGHT`
    case offlineMessageInFlight = "ERROR_OFFLINE_MESSAGE_IN_FLIGHT"
    /// `ERROR_OFFLINE_MESSAGE_NOT_FOUND`
    case offlineMessageNotFound = "ERROR_OFFLINE_MESSAGE_NOT_FOUND"
    /// `ERROR_OFFLINE_MESSAGE_PERSIST_FAILED`
    case offlineMessagePersistFailed = "ERROR_OFFLINE_MESSAGE_PERSIST_FAILED"
    /// `ERROR_QUEUE_FULL`
    case queueFull = "ERROR_QUEUE_FULL"
    /// `ERROR_QUEUE_OVERFLOW`
    case queueOverflow = "ERROR_QUEUE_OVERFLOW"
    /// `ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW`
    case offlineMediaByteOverflow = "ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW"
    /// `ERROR_OFFLINE_MEDIA_COPY_FAILED`
    case offlineMediaCopyFailed = "ERROR_OFFLINE_MEDIA_COPY_FAILED"
    /// `ERROR_OFFLINE_MEDIA_NOT_CACHED`
    case offlineMediaNotCached = "ERROR_OFFLINE_MEDIA_NOT_CACHED"
    /// `ERROR_OFFLINE_MEDIA_UNRESOLVABLE`
    case offlineMediaUnresolvable = "ERROR_OFFLINE_MEDIA_UNRESOLVABLE"
    /// `ERROR_MEDIA_DOWNLOAD_FAILED`: a background media download failed. Not a
    /// `CometChatConstants.Errors` constant (see ``MediaDownloadErrors``).
    case mediaDownloadFailed = "ERROR_MEDIA_DOWNLOAD_FAILED"
    /// `ERROR_OFFLINE_MEDIA_VIEW_UNAVAILABLE` (a ChatVault addition, not a `CometChatConstants.Errors`
    /// constant): the bytes are cached encrypted, but there is no safe `$XDG_RUNTIME_DIR` to put
    /// a decrypted view in, so there is no path to hand out. Read the bytes with
    /// `cachedMediaData(url:)` / `cachedMediaChunks(url:)` instead.
    case offlineMediaViewUnavailable = "ERROR_OFFLINE_MEDIA_VIEW_UNAVAILABLE"
    /// ChatVault's own: the server answered with a payload the engine refused (a missing field,
    /// a huge string, a wrong type). Nothing of it reached the cache.
    case invalidServerResponse = "ERROR_INVALID_SERVER_RESPONSE"
    /// ChatVault's own: a send was refused before anything was stored (empty text, a custom
    /// message without data, a missing receiver, an oversized field), or an edit, delete or
    /// reaction before anything was sent (no server id, empty text, a reaction out of bounds).
    case invalidMessage = "ERROR_INVALID_MESSAGE"
    /// ChatVault's own: a queued message got no answer from the server after 5 automatic
    /// attempts and failed `.transient` (retry it with `retryMessage`); or an edit, delete or
    /// reaction (never queued) got no answer, so the server may or may not have applied it.
    case requestTimedOut = "ERROR_REQUEST_TIMEOUT"
    /// ChatVault's own: a local search (`searchCachedMessages`) could not be asked: no word to
    /// look for, only exclusions, longer than 1,024 characters or more than 32 terms. `details`
    /// names which (`empty`, `onlyExclusions`, `tooLong`, `tooManyTerms`).
    case invalidSearchQuery = "ERROR_INVALID_SEARCH_QUERY"

    /// Whether the code is one of `CometChatConstants.Errors` (every case but
    /// ``mediaDownloadFailed`` and ChatVault's own ``invalidServerResponse``, ``invalidMessage``,
    /// ``requestTimedOut``, ``offlineMediaViewUnavailable``, ``invalidSearchQuery``).
    public var isCometChatConstantsError: Bool {
        ![.mediaDownloadFailed, .invalidServerResponse, .invalidMessage, .requestTimedOut, .offlineMediaViewUnavailable,
          .invalidSearchQuery].contains(self)
    }
}
