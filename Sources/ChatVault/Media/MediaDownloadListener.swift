import Foundation

/// Hears the background (`.auto`) media downloads: when the bytes of a received attachment land
/// in the cache, or when fetching them failed. Registered by id with `addMediaDownloadListener`,
/// held weakly, one per id; callbacks arrive on the callback executor. Explicit `downloadMedia`
/// calls report through their own closures, not here; there is no progress callback here.
///
///     final class MediaObserver: NSObject, MediaDownloadListener {
///         func onMediaDownloaded(_ messageId: String, _ url: String, _ localPath: String) { refreshTile(messageId) }
///         func onMediaDownloadFailed(_ attachment: Attachment?, _ error: CometChatException) {}
///     }
///
/// Both methods have empty defaults.
public protocol MediaDownloadListener: AnyObject, Sendable {
    /// - Parameters:
    ///   - messageId: the message's server id (its local id when it has none yet).
    ///   - url: the attachment URL without its query string or fragment.
    ///   - localPath: where the bytes can be opened (with encryption on, a decrypted view under
    ///     `$XDG_RUNTIME_DIR`).
    func onMediaDownloaded(_ messageId: String, _ url: String, _ localPath: String)
    /// `error.errorCode` is `"ERROR_MEDIA_DOWNLOAD_FAILED"`; its details say why (never a raw
    /// HTTP status, URL or content).
    func onMediaDownloadFailed(_ attachment: Attachment?, _ error: CometChatException)
}

extension MediaDownloadListener {
    /// Does nothing: a listener hears only the events it implements.
    public func onMediaDownloaded(_ messageId: String, _ url: String, _ localPath: String) {}
    /// Does nothing: a listener hears only the events it implements.
    public func onMediaDownloadFailed(_ attachment: Attachment?, _ error: CometChatException) {}
}

/// A background download's outcome, as `mediaDownloadEvents()` yields it.
public enum MediaDownloadEvent: Sendable {
    /// `onMediaDownloaded(_:_:_:)`: the message id, the URL without its query or fragment, and
    /// where the bytes can be opened.
    case downloaded(messageId: String, url: String, localPath: String)
    /// `onMediaDownloadFailed(_:_:)`: the attachment (when known) and
    /// `ERROR_MEDIA_DOWNLOAD_FAILED`.
    case failed(attachment: Attachment?, error: CometChatException)
}
