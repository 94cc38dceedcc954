public import Foundation
import VaultStore

/// The media cache's public surface; the work is done by `MediaCache` (MediaEngine.swift and beside it).
extension OfflineVault {
    /// The receive-side media mode in effect: the configured `mediaCaching` while offline support
    /// is active for the logged-in user, `.off` otherwise (before login, after logout, while the
    /// cache cannot open, with offline support disabled), so a UI can rely on it alone.
    public func getMediaCachingMode() -> MediaCachingMode {
        isOfflineEnabled() ? config.mediaCaching : .off
    }

    /// A path to the cached bytes of `url` (matched without its query or fragment, so a
    /// re-signed URL finds the same bytes), or nil when they are not cached. With encryption on,
    /// the path is a decrypted view under `$XDG_RUNTIME_DIR` (made now if needed; nil when there
    /// is no safe runtime directory). An explicit access: the file becomes the most recently used.
    ///
    ///     let path = vault.getCachedMediaPath(attachment.fileUrl)   // nil if not cached
    public func getCachedMediaPath(_ url: String) -> String? {
        guard isOfflineEnabled(), let me = userId, let cache = openCache(of: me), let key = MediaURL.key(url) else { return nil }
        return media.cachedPath(key: key, in: cache, touch: true)
    }

    /// Fetches and caches an attachment's bytes: the cache first, then the URL, then, when the
    /// server refuses the URL as expired or forbidden (401, 403, 410), one re-signed URL (asked
    /// for with `messageServerId`). Requests for the same URL share one download. Works in both
    /// caching modes (it is an explicit request).
    ///
    /// `onError` carries `ERROR_OFFLINE_MEDIA_NOT_CACHED` (not cached, no connection),
    /// `ERROR_OFFLINE_MEDIA_UNRESOLVABLE` (the download failed and re-signing gave nothing usable,
    /// or the URL is not http(s), or the server's file breaks the bounds of `VaultSettings.media`),
    /// `ERROR_OFFLINE_DISABLED`, or `ERROR_OFFLINE_MEDIA_VIEW_UNAVAILABLE` (encrypted bytes, no
    /// safe place for a decrypted view); never an HTTP status. Closures run on the callback executor.
    public func downloadMedia(url: String, messageServerId: Int, onSuccess: @escaping @Sendable (String) -> Void,
                              onError: @escaping @Sendable (CometChatException) -> Void) {
        startDownload(url: url, messageServerId: messageServerId, onProgress: nil, onSuccess: onSuccess, onError: onError)
    }

    /// `downloadMedia` with progress: 0...100, best-effort, never backwards, only when the server
    /// announces the length (an unknown-length download goes straight to `onSuccess`).
    ///
    ///     vault.downloadMedia(url: attachment.fileUrl, messageServerId: message.id,
    ///                         onProgress: { percent in bar.value = percent },
    ///                         onSuccess: { path in show(path) }, onError: { error in print(error.errorCode) })
    public func downloadMedia(url: String, messageServerId: Int, onProgress: @escaping @Sendable (Int) -> Void,
                              onSuccess: @escaping @Sendable (String) -> Void, onError: @escaping @Sendable (CometChatException) -> Void) {
        startDownload(url: url, messageServerId: messageServerId, onProgress: onProgress, onSuccess: onSuccess, onError: onError)
    }

    /// The async form: the path, or the `CometChatException` `onError` would get. `progress`
    /// is called on the callback executor, as `onProgress`.
    ///
    ///     let path = try await vault.downloadMedia(url: attachment.fileUrl, messageServerId: message.id)
    public func downloadMedia(url: String, messageServerId: Int, progress: (@Sendable (Int) -> Void)? = nil) async throws(CometChatException) -> String {
        return try await media.resolve(url: url, messageServerId: messageServerId, touch: true, progress: relay(progress)).get()
    }

    /// A progress closure that runs on the callback executor.
    private func relay(_ progress: (@Sendable (Int) -> Void)?) -> (@Sendable (Int) -> Void)? {
        guard let progress else { return nil }
        let executor = settings.callbackExecutor
        return { @Sendable (percent: Int) -> Void in executor.execute { progress(percent) } }
    }

    private func startDownload(url: String, messageServerId: Int, onProgress: (@Sendable (Int) -> Void)?,
                               onSuccess: @escaping @Sendable (String) -> Void, onError: @escaping @Sendable (CometChatException) -> Void) {
        let executor = settings.callbackExecutor
        let progress = relay(onProgress)
        Task {
            let result = await self.media.resolve(url: url, messageServerId: messageServerId, touch: true, progress: progress)
            executor.execute {
                switch result {
                case .success(let path): onSuccess(path)
                case .failure(let error): onError(error)
                }
            }
        }
    }

    /// The cached bytes of `url`, decrypted in memory, without any file: for apps that render
    /// from memory (and for encrypted caches with no safe runtime directory). Throws
    /// `ERROR_OFFLINE_MEDIA_NOT_CACHED` when not cached (or the file failed its check; it is then
    /// forgotten and downloads again), `ERROR_OFFLINE_MEDIA_UNRESOLVABLE` when larger than `maxBytes`.
    public func cachedMediaData(url: String, maxBytes: Int64 = 256 << 20) async throws(CometChatException) -> Data {
        let (file, key) = try cachedFile(url)
        do {
            return try MediaFileReader.read(file.path, key: key, maxBytes: maxBytes)
        } catch {
            if case .tooLarge = error { throw CometChatException(.offlineMediaUnresolvable, "The cached file is larger than maxBytes.") }
            forgetDamaged(file)
            throw CometChatException(.offlineMediaNotCached, "The cached file failed its check and was dropped.")
        }
    }

    /// The cached bytes of `url` as chunks (64 KiB, each authenticated before it is yielded):
    /// nothing decrypted touches the disk and a large file never sits in memory whole. A chunk
    /// that fails its check ends the stream with an error.
    public func cachedMediaChunks(url: String) throws(CometChatException) -> AsyncThrowingStream<Data, any Error> {
        let (file, key) = try cachedFile(url)
        return MediaFileReader.chunks(file.path, key: key)
    }

    private struct CachedFile {
        let key: String
        let name: String
        let path: String
        let cache: VaultCache
    }

    private func cachedFile(_ url: String) throws(CometChatException) -> (CachedFile, MediaKey?) {
        guard isOfflineEnabled(), let me = userId, let cache = openCache(of: me) else {
            throw CometChatException(.offlineDisabled, "Offline support is not enabled, or nobody is logged in.")
        }
        guard let key = MediaURL.key(url) else { throw CometChatException(.offlineMediaUnresolvable, "The attachment URL is not an http(s) or mxc URL.") }
        guard let row = try? cache.reader.sync({ db in try MediaRows.row(key, in: db) }) else {
            throw CometChatException(.offlineMediaNotCached, "The bytes are not cached.")
        }
        let mediaKey = media.state.withLock { $0.key }
        if cache.isEncrypted && mediaKey == nil { throw CometChatException(.offlineMediaNotCached, "The media key could not be read.") }
        return (CachedFile(key: key, name: row.name, path: "\(cache.directory.media)/\(row.name)", cache: cache), mediaKey)
    }

    private func forgetDamaged(_ file: CachedFile) {
        media.forget(file.key, name: file.name, in: file.cache)
    }

    /// Sets `localPath` on the attachments whose bytes are cached (`MediaCache.hydrate`), for the
    /// package's tools (`chatvault bench media`).
    package func hydrateMedia(_ messages: [BaseMessage]) {
        media.hydrate(messages)
    }

    /// Registers a background-download listener (held weakly; one per id). Works before login
    /// and across logout and login.
    ///
    ///     vault.addMediaDownloadListener("MEDIA_LISTENER", observer)
    public func addMediaDownloadListener(_ id: String, _ listener: any MediaDownloadListener) {
        media.listeners.add(id, listener)
    }

    /// Removes the background-download listener registered under `id`, if any.
    public func removeMediaDownloadListener(_ id: String) {
        media.listeners.remove(id)
    }

    /// The background downloads' outcomes as an `AsyncSequence` (after the listeners heard them).
    public func mediaDownloadEvents() -> AsyncStream<MediaDownloadEvent> {
        media.streams.make()
    }

    /// Returns once no background download is queued or running (tests, tools, an app that
    /// wants its media settled before going offline).
    public func waitForMediaDownloads() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = media.state.withLock { s -> Bool in
                guard s.running > 0 || !s.queued.isEmpty else { return true }
                s.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }
}

extension CometChat {
    /// The media mode in effect on the shared vault (`.off` without one).
    public static func getMediaCachingMode() -> CometChat.MediaCachingMode {
        offlineVault?.getMediaCachingMode() ?? .off
    }

    /// See `OfflineVault.getCachedMediaPath(_:)`.
    public static func getCachedMediaPath(_ url: String) -> String? {
        offlineVault?.getCachedMediaPath(url)
    }

    /// See `OfflineVault.downloadMedia(url:messageServerId:onSuccess:onError:)`.
    public static func downloadMedia(url: String, messageServerId: Int, onSuccess: @escaping @Sendable (String) -> Void,
                                     onError: @escaping @Sendable (CometChatException) -> Void) {
        guard let vault = offlineVault else {
            return onError(CometChatException(.offlineDisabled, "Offline support is not enabled, or nobody is logged in."))
        }
        vault.downloadMedia(url: url, messageServerId: messageServerId, onSuccess: onSuccess, onError: onError)
    }

    /// See `OfflineVault.downloadMedia(url:messageServerId:onProgress:onSuccess:onError:)`.
    public static func downloadMedia(url: String, messageServerId: Int, onProgress: @escaping @Sendable (Int) -> Void,
                                     onSuccess: @escaping @Sendable (String) -> Void, onError: @escaping @Sendable (CometChatException) -> Void) {
        guard let vault = offlineVault else {
            return onError(CometChatException(.offlineDisabled, "Offline support is not enabled, or nobody is logged in."))
        }
        vault.downloadMedia(url: url, messageServerId: messageServerId, onProgress: onProgress, onSuccess: onSuccess, onError: onError)
    }

    /// Registers a background-download listener on the shared vault (held weakly; one per id); does
    /// nothing without a vault.
    public static func addMediaDownloadListener(_ id: String, _ listener: any MediaDownloadListener) {
        offlineVault?.addMediaDownloadListener(id, listener)
    }

    /// Removes the shared vault's background-download listener registered under `id`, if any.
    public static func removeMediaDownloadListener(_ id: String) {
        offlineVault?.removeMediaDownloadListener(id)
    }
}
