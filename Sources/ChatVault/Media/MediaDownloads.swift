import Foundation
import Synchronization
import VaultStore

/// The media cache's downloads: resolving a URL to cached bytes, one download per URL key shared
/// by every caller, the fetch itself (bounded, stall-checked, re-signed once when expired), and
/// recording the file.
extension MediaCache {
    // MARK: - Resolving a URL

    /// The path an app can open for the cached bytes of `key`, or nil (not cached, the file went
    /// missing or fails its check — then its row goes, so it downloads again — or, encrypted, no
    /// safe place for a decrypted view).
    func cachedPath(key: String, in cache: VaultCache, touch: Bool) -> String? {
        guard let row = try? cache.reader.sync({ db in try MediaRows.row(key, in: db) }) else { return nil }
        let path: String
        switch openable(row, in: cache) {
        case .path(let p): path = p
        case .damaged:
            forget(key, name: row.name, in: cache)
            return nil
        case .noView:
            return nil
        }
        if touch {
            let now = Int64(settings.clock().timeIntervalSince1970 * 1000)
            _ = try? cache.writer.sync { db in try MediaRows.touch(key, at: now, in: db) }
        }
        return path
    }

    enum Openable {
        case path(String)
        /// Missing, the wrong size, or failing authentication: forget it, download again.
        case damaged
        /// Encrypted, and no safe place for a decrypted view (or no media key).
        case noView
    }

    /// The file itself (plain) or its decrypted view (made now if missing or stale).
    func openable(_ row: MediaFileRow, in cache: VaultCache) -> Openable {
        let file = "\(cache.directory.media)/\(row.name)"
        let (key, views) = state.withLock { ($0.key, $0.views) }
        guard cache.isEncrypted else {
            return Self.regularFileSize(file) == row.bytes ? .path(file) : .damaged
        }
        guard Self.regularFileSize(file) != nil else { return .damaged }
        guard let key, case .success(let directory)? = views else { return .noView }
        let view = "\(directory.path)/\(row.name)"
        if Self.regularFileSize(view) == row.bytes { return .path(view) }
        do {
            // A view is disposable (removed at the next start anyway): no fsync.
            try MediaFileReader.decrypt(file, key: key, to: view, durable: false)
            guard Self.regularFileSize(view) == row.bytes else {
                unlink(view)
                return .damaged
            }
            return .path(view)
        } catch {
            unlink(view)
            if case .damaged = error { return .damaged }
            return .noView
        }
    }

    static func regularFileSize(_ path: String) -> Int64? {
        var st = stat()
        guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
        return Int64(st.st_size)
    }

    /// Drops a row whose file is gone or damaged, and the file.
    func forget(_ key: String, name: String, in cache: VaultCache) {
        _ = try? cache.writer.sync { db in try MediaRows.remove(key, in: db) }
        unlink("\(cache.directory.media)/\(name)")
    }

    // MARK: - Downloads

    /// The bytes of `url` in the cache: from the cache, else downloaded (sharing a download of
    /// the same URL already in flight), re-signed once when the server says the URL expired.
    /// Returns the openable path.
    /// - Parameter touch: an explicit access (refreshes the file's recency).
    func resolve(url: String, messageServerId: Int, touch: Bool,
                 progress: (@Sendable (Int) -> Void)?) async -> Result<String, CometChatException> {
        guard let (_, cache) = current() else {
            return .failure(CometChatException(.offlineDisabled, "Offline support is not enabled, or nobody is logged in."))
        }
        guard let key = MediaURL.key(url) else {
            return .failure(CometChatException(.offlineMediaUnresolvable, "The attachment URL is not an http(s) or mxc URL."))
        }
        if let path = cachedPath(key: key, in: cache, touch: touch) { return .success(path) }
        let noViews: MediaFileError? = {
            guard cache.isEncrypted, case .failure(let why)? = state.withLock({ $0.views }) else { return nil }
            return why
        }()
        // Without a place for views, cached bytes are still there for `cachedMediaData`.
        if let noViews, (try? cache.reader.sync({ db in try MediaRows.row(key, in: db) })) ?? nil != nil {
            return .failure(Self.noViewException(noViews))
        }
        let (job, token) = joinDownload(key: key, url: url, messageServerId: messageServerId, cache: cache, progress: progress)
        let result = await job.value()
        if let token { job.stopObserving(token) }
        switch result {
        case .failure(let error):
            return .failure(error)
        case .success(let row):
            switch openable(row, in: cache) {
            case .path(let path): return .success(path)
            case .noView:
                return .failure(Self.noViewException(noViews ?? .noSafeRuntimeDirectory("the view could not be written")))
            case .damaged:
                forget(key, name: row.name, in: cache)
                return .failure(CometChatException(.offlineMediaUnresolvable, "The downloaded file could not be read back."))
            }
        }
    }

    static func noViewException(_ why: MediaFileError) -> CometChatException {
        CometChatException(.offlineMediaViewUnavailable,
                           "The bytes are encrypted and there is no safe runtime directory for a decrypted view; read them with cachedMediaData(url:).",
                           details: why.description)
    }

    /// The download of `key` in flight, or a new one.
    /// - Returns: the job, and the token of `progress` among its observers (observing from before
    ///   the first byte when this call starts the download).
    private func joinDownload(key: String, url: String, messageServerId: Int, cache: VaultCache,
                              progress: (@Sendable (Int) -> Void)?) -> (MediaJob, Int?) {
        state.withLock { s -> (MediaJob, Int?) in
            if let job = s.jobs[key] { return (job, progress.map { job.observe($0) }) }
            let job = MediaJob()
            let token = progress.map { job.observe($0) }
            let generation = s.generation
            // Started before it is published: a caller that joins it always finds its task.
            // (The task runs later, on another thread: taking the lock again there is fine.)
            job.start { job in
                let result = await self.download(key: key, url: url, messageServerId: messageServerId, cache: cache, generation: generation, job: job)
                self.state.withLock { s in
                    if s.jobs[key] === job { s.jobs[key] = nil }
                }
                return result
            }
            s.jobs[key] = job
            return (job, token)
        }
    }

    /// Downloads, then on 401/403/410 re-signs once (with the message id) and downloads again.
    private func download(key: String, url: String, messageServerId: Int, cache: VaultCache, generation: Int,
                          job: MediaJob) async -> Result<MediaFileRow, CometChatException> {
        do throws(MediaDownloadFailure) {
            return .success(try await fetch(key: key, url: url, messageId: messageServerId, cache: cache, generation: generation, job: job))
        } catch {
            guard case .server(let status) = error, [401, 403, 410].contains(status) else { return .failure(error.exception) }
        }
        guard messageServerId > 0 else {
            return .failure(CometChatException(.offlineMediaUnresolvable, "The URL was refused and there is no message id to re-sign it with."))
        }
        let fresh: String
        do {
            fresh = try await backend.resignMediaURL(url, messageId: messageServerId)
        } catch {
            if error == .unreachable || error == .timedOut {
                return .failure(CometChatException(.offlineMediaNotCached, "The bytes are not cached and the server cannot be reached."))
            }
            return .failure(CometChatException(.offlineMediaUnresolvable, "The URL was refused and could not be re-signed."))
        }
        guard MediaURL.key(fresh) != nil else {
            return .failure(CometChatException(.offlineMediaUnresolvable, "The re-signed URL is not an http(s) or mxc URL."))
        }
        do throws(MediaDownloadFailure) {
            return .success(try await fetch(key: key, url: fresh, messageId: messageServerId, cache: cache, generation: generation, job: job))
        } catch {
            return .failure(error.exception)
        }
    }

    /// One download into a new file, then its row (and the budget trimmed).
    private func fetch(key: String, url: String, messageId: Int, cache: VaultCache, generation: Int,
                       job: MediaJob) async throws(MediaDownloadFailure) -> MediaFileRow {
        let limits = settings.media
        let maxBytes = max(limits.maxFileBytes, 1)
        let stream: MediaStream
        do {
            stream = try await backend.downloadMedia(url: url)
        } catch {
            switch error {
            case .unreachable, .timedOut: throw .offline
            case .server(let status, _, _): throw .server(status)
            }
        }
        if let announced = stream.contentLength {
            guard announced >= 0 else { throw .refused("the server announced a negative length") }
            guard announced <= maxBytes else { throw .refused("the server announced more than maxFileBytes") }
        }
        guard let mediaKey = state.withLock({ s -> MediaKey?? in s.generation == generation ? .some(s.key) : nil }) else {
            throw .refused("the user logged out")
        }
        if cache.isEncrypted && mediaKey == nil { throw .refused("the media key could not be read") }
        let name = MediaRows.newName()
        let length = stream.contentLength
        let directory = cache.directory.media
        // Encrypted: the plaintext also goes straight to its view as it arrives (one pass, no
        // decryption of the file just written); a view that cannot be written is made later.
        let viewDirectory: String? = cache.isEncrypted ? (try? state.withLock { $0.views }?.get())?.path : nil
        let watch = DownloadWatch()
        let consumer = Task { () throws -> Int64 in
            let writer = try MediaFileWriter(directory: directory, key: mediaKey, maxBytes: maxBytes)
            var view = viewDirectory.flatMap { try? MediaFileWriter(directory: $0, key: nil, maxBytes: maxBytes) }
            defer { view?.abort() }
            do {
                for try await piece in stream.chunks {
                    try Task.checkCancellation()
                    try writer.append(piece)
                    if let v = view {
                        do { try v.append(piece) } catch {
                            v.abort()
                            view = nil
                        }
                    }
                    watch.lastByte.withLock { $0 = .now }
                    if let length, length > 0 {
                        // In floating point: no product can overflow, whatever the server announced.
                        job.report(Int(Double(min(writer.plaintextBytes, length)) * 100 / Double(length)))
                    }
                }
                // A cancelled stream may end without an error: not a complete download.
                try Task.checkCancellation()
                if let length, writer.plaintextBytes != length { throw MediaDownloadFailure.refused("the download did not match its announced length") }
                try writer.commit(as: name)
                if let v = view {
                    _ = try? v.commit(as: name, durable: false)
                    view = nil
                }
                return writer.plaintextBytes
            } catch {
                writer.abort()
                throw error
            }
        }
        let idle = limits.idleTimeout
        let watchdog = Task {
            let step = min(idle / 4, .milliseconds(500))
            while !Task.isCancelled {
                try? await Task.sleep(for: step)
                if ContinuousClock.now - watch.lastByte.withLock({ $0 }) > idle {
                    watch.stalled.withLock { $0 = true }
                    consumer.cancel()
                    return
                }
            }
        }
        let bytes: Int64
        do {
            bytes = try await withTaskCancellationHandler { try await consumer.value } onCancel: { consumer.cancel() }
            watchdog.cancel()
        } catch {
            watchdog.cancel()
            if watch.stalled.withLock({ $0 }) { throw .refused("the download stalled") }
            switch error {
            case let failure as MediaDownloadFailure: throw failure
            case MediaFileError.tooLarge: throw .refused("the download is larger than maxFileBytes")
            case let file as MediaFileError: throw .local(file.description)
            case is CancellationError: throw .refused("the download was cancelled")
            case BackendError.unreachable, BackendError.timedOut: throw .interrupted
            default: throw .interrupted
            }
        }
        let row = MediaFileRow(name: name, bytes: bytes, mime: stream.mimeType.map { String($0.prefix(255)) })
        guard record(row, key: key, messageId: messageId, cache: cache, generation: generation) else {
            throw .local("the cache could not record the file")
        }
        if let length, length > 0 { job.report(100) }
        return row
    }

    /// Records a file now under `media/` as the cached bytes of `key` (replacing an older file of
    /// the key) and trims received media to the budget, in one transaction; then removes the
    /// replaced and evicted files. False (and the new file removed) when the cache was detached
    /// meanwhile or refused the write.
    func record(_ row: MediaFileRow, key: String, messageId: Int, cache: VaultCache, generation: Int) -> Bool {
        let now = Int64(settings.clock().timeIntervalSince1970 * 1000)
        let budget = config.maxMediaCacheSize > 0 ? config.maxMediaCacheSize : nil
        let folder = cache.directory.media
        let written = writer.commit(media: row, key: key, messageId: messageId, at: now, budget: budget, cache: cache) {
            self.state.withLock { $0.generation == generation }
        }
        guard let written else {
            unlink("\(folder)/\(row.name)")
            return false
        }
        for old in [written.replaced].compactMap({ $0 }) + written.evicted { unlink("\(folder)/\(old)") }
        return true
    }
}

/// When a download last received bytes, and whether its watchdog gave up on it.
private final class DownloadWatch: Sendable {
    let lastByte = Mutex(ContinuousClock.now)
    let stalled = Mutex(false)
}
