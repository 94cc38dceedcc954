import Foundation
import Synchronization
import VaultStore

/// The media cache's live state: the attached cache's media key and view directory, the
/// downloads in flight (one per URL key, shared by every caller that asks for it), and the queue
/// of background (`.auto`) downloads. The files and their rows live in the cache (`MediaRows`).
///
/// Files: `media/<32 hex>` under the cache directory, 0600, written atomically
/// (`MediaFileWriter`); with encryption on, in the authenticated chunked format under a random
/// media key kept in the encrypted database (`kv` row `media.key`), and opened through decrypted
/// views (`MediaViewDirectory`, under `$XDG_RUNTIME_DIR`), made on demand and removed at logout,
/// clear, reset and the next start.
final class MediaCore: Sendable {
    struct State {
        /// Bumped when a cache is attached or detached: a download of an older generation writes nothing.
        var generation = 0
        /// The media key (nil: plain files, the cache is not encrypted).
        var key: MediaKey?
        /// Where decrypted views go (encrypted caches), or why there is no such place.
        var views: Result<MediaViewDirectory, MediaFileError>?
        var jobs: [String: MediaJob] = [:]
        /// Background downloads waiting for a slot, oldest first, and how many run.
        var queued: [BackgroundItem] = []
        var queuedKeys: Set<String> = []
        var running = 0
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    struct BackgroundItem: Sendable {
        let key: String
        let url: String
        let messageServerId: Int
        let messageId: String
        let attachment: Attachment
    }

    let listeners = ListenerRegistry<any MediaDownloadListener>()
    let state = Mutex(State())
    let streams = EventStreams<MediaDownloadEvent>()
}

/// One download in flight: its task, and the progress of it that every caller sees.
final class MediaJob: Sendable {
    private struct Progress {
        var percent = -1
        var observers: [Int: @Sendable (Int) -> Void] = [:]
        var next = 0
    }

    private let progress = Mutex(Progress())
    private let task = Mutex<Task<Result<MediaFileRow, CometChatException>, Never>?>(nil)

    func start(_ body: @escaping @Sendable (MediaJob) async -> Result<MediaFileRow, CometChatException>) {
        let t = Task { await body(self) }
        task.withLock { $0 = t }
    }

    func value() async -> Result<MediaFileRow, CometChatException> {
        guard let t = task.withLock({ $0 }) else { return .failure(CometChatException(.offlineMediaUnresolvable, "The download did not start.")) }
        return await t.value
    }

    func cancel() { task.withLock { $0?.cancel() } }

    /// Adds a progress observer; returns its token.
    func observe(_ observer: @escaping @Sendable (Int) -> Void) -> Int {
        progress.withLock { p in
            p.next += 1
            p.observers[p.next] = observer
            return p.next
        }
    }

    func stopObserving(_ token: Int) { progress.withLock { _ = $0.observers.removeValue(forKey: token) } }

    /// Reports `percent` (0...100) to every observer, only when it moved forward.
    func report(_ percent: Int) {
        let observers = progress.withLock { p -> [@Sendable (Int) -> Void] in
            guard percent > p.percent else { return [] }
            p.percent = percent
            return Array(p.observers.values)
        }
        for observer in observers { observer(percent) }
    }
}

extension OfflineVault {
    // MARK: - Lifecycle

    /// A cache became active: its media key is loaded (made on first use with encryption on),
    /// leftovers of killed writers and files no row names are removed, and old decrypted views
    /// are cleared.
    func mediaAttached(_ cache: VaultCache) {
        let key: MediaKey? = cache.isEncrypted ? (try? cache.writer.sync { db in try MediaKeyRow.load(in: db) }) ?? nil : nil
        var views: Result<MediaViewDirectory, MediaFileError>? = nil
        if cache.isEncrypted {
            // Views of an earlier session (a crash skipped its logout) go first.
            if case .success(let old) = resolveViews(account: cache.directory.account) { old.removeAll() }
            views = resolveViews(account: cache.directory.account)
        }
        let media = cache.directory.media
        MediaFileWriter.removeLeftovers(in: media)
        if let names = try? cache.reader.sync({ db in try MediaRows.names(in: db) }),
           let present = try? FileManager.default.contentsOfDirectory(atPath: media) {
            for name in present where !names.contains(name) && !name.hasPrefix(".") { unlink("\(media)/\(name)") }
        }
        let old = self.media.state.withLock { s -> [MediaJob] in
            s.generation += 1
            s.key = key
            s.views = views
            return Array(s.jobs.values)
        }
        for job in old { job.cancel() }
    }

    private func resolveViews(account: String) -> Result<MediaViewDirectory, MediaFileError> {
        var environment = ProcessInfo.processInfo.environment
        if let runtime = settings.media.runtimeDirectory { environment["XDG_RUNTIME_DIR"] = runtime }
        return Result { () throws(MediaFileError) -> MediaViewDirectory in
            try MediaViewDirectory.resolve(applicationId: settings.applicationId, account: account, environment: environment)
        }
    }

    /// Logout (or a cache closed): downloads stop, queued ones are forgotten, decrypted views go.
    func mediaDetached() {
        let (jobs, views, waiters) = media.state.withLock { s -> ([MediaJob], MediaViewDirectory?, [CheckedContinuation<Void, Never>]) in
            s.generation += 1
            s.key = nil
            let views = try? s.views?.get()
            s.views = nil
            let jobs = Array(s.jobs.values)
            s.jobs.removeAll()
            s.queued.removeAll()
            s.queuedKeys.removeAll()
            let waiters = s.running == 0 ? s.idleWaiters : []
            if s.running == 0 { s.idleWaiters.removeAll() }
            return (jobs, views, waiters)
        }
        for job in jobs { job.cancel() }
        views?.removeAll()
        for waiter in waiters { waiter.resume() }
    }

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
        let (key, views) = media.state.withLock { ($0.key, $0.views) }
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
    func resolveMedia(url: String, messageServerId: Int, touch: Bool,
                      progress: (@Sendable (Int) -> Void)?) async -> Result<String, CometChatException> {
        guard let me = userId, let cache = cache(of: me), isOfflineEnabled() else {
            return .failure(CometChatException(.offlineDisabled, "Offline support is not enabled, or nobody is logged in."))
        }
        guard let key = MediaURL.key(url) else {
            return .failure(CometChatException(.offlineMediaUnresolvable, "The attachment URL is not an http(s) or mxc URL."))
        }
        if let path = cachedPath(key: key, in: cache, touch: touch) { return .success(path) }
        let noViews: MediaFileError? = {
            guard cache.isEncrypted, case .failure(let why)? = media.state.withLock({ $0.views }) else { return nil }
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
        media.state.withLock { s -> (MediaJob, Int?) in
            if let job = s.jobs[key] { return (job, progress.map { job.observe($0) }) }
            let job = MediaJob()
            let token = progress.map { job.observe($0) }
            let generation = s.generation
            // Started before it is published: a caller that joins it always finds its task.
            // (The task runs later, on another thread: taking the lock again there is fine.)
            job.start { job in
                let result = await self.download(key: key, url: url, messageServerId: messageServerId, cache: cache, generation: generation, job: job)
                self.media.state.withLock { s in
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
        guard let mediaKey = media.state.withLock({ s -> MediaKey?? in s.generation == generation ? .some(s.key) : nil }) else {
            throw .refused("the user logged out")
        }
        if cache.isEncrypted && mediaKey == nil { throw .refused("the media key could not be read") }
        let name = MediaRows.newName()
        let length = stream.contentLength
        let directory = cache.directory.media
        // Encrypted: the plaintext also goes straight to its view as it arrives (one pass, no
        // decryption of the file just written); a view that cannot be written is made later.
        let viewDirectory: String? = cache.isEncrypted ? (try? media.state.withLock { $0.views }?.get())?.path : nil
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
        let written: (String?, [String])? = try? cache.writer.sync { db in
            guard self.media.state.withLock({ $0.generation == generation }) else { return nil }
            return try db.transaction {
                let replaced = try MediaRows.insert(key, messageId: messageId > 0 ? String(messageId) : nil, row: row, at: now, in: db)
                let evicted = try budget.map { try MediaRows.trim(to: $0, keep: key, in: db) } ?? []
                return (replaced, evicted)
            }
        }
        guard let written else {
            unlink("\(folder)/\(row.name)")
            return false
        }
        for old in [written.0].compactMap({ $0 }) + written.1 { unlink("\(folder)/\(old)") }
        return true
    }

    // MARK: - Background downloads (.auto)

    /// Queues the attachments of `messages` whose bytes are not cached (`.auto` only, on the live
    /// paths: a realtime message, a read's server phase).
    func autoDownload(_ messages: [BaseMessage]) {
        guard config.mediaCaching == .auto, isOfflineEnabled(), let me = userId, let cache = cache(of: me) else { return }
        var items: [MediaCore.BackgroundItem] = []
        for case let m as MediaMessage in messages {
            let messageId = m.id > 0 ? String(m.id) : (m.muid.isEmpty ? "" : m.muid)
            for attachment in Self.attachments(of: m) {
                guard let key = MediaURL.key(attachment.fileUrl) else { continue }
                items.append(MediaCore.BackgroundItem(key: key, url: attachment.fileUrl, messageServerId: m.id, messageId: messageId,
                                                      attachment: attachment))
            }
        }
        guard !items.isEmpty else { return }
        let keys = Set(items.map(\.key))
        let cached = (try? cache.reader.sync { db in try MediaRows.rows(keys, in: db) }) ?? [:]
        media.state.withLock { s in
            for item in items where cached[item.key] == nil && !s.queuedKeys.contains(item.key) {
                s.queued.append(item)
                s.queuedKeys.insert(item.key)
            }
        }
        pumpBackground()
    }

    static func attachments(of m: MediaMessage) -> [Attachment] {
        m.attachments.isEmpty ? [m.attachment].compactMap { $0 } : m.attachments
    }

    private func pumpBackground() {
        let limit = min(max(settings.media.backgroundConcurrency, 1), 8)
        while let item = media.state.withLock({ s -> MediaCore.BackgroundItem? in
            guard s.running < limit, !s.queued.isEmpty else { return nil }
            s.running += 1
            return s.queued.removeFirst()
        }) {
            Task {
                let result = await self.resolveMedia(url: item.url, messageServerId: item.messageServerId, touch: false, progress: nil)
                self.media.state.withLock { _ = $0.queuedKeys.remove(item.key) }
                self.reportBackground(item, result)
                let waiters = self.media.state.withLock { s -> [CheckedContinuation<Void, Never>] in
                    s.running -= 1
                    guard s.running == 0, s.queued.isEmpty else { return [] }
                    defer { s.idleWaiters.removeAll() }
                    return s.idleWaiters
                }
                self.pumpBackground()
                for waiter in waiters { waiter.resume() }
            }
        }
    }

    private func reportBackground(_ item: MediaCore.BackgroundItem, _ result: Result<String, CometChatException>) {
        let listeners = media.listeners.live()
        let streams = media.streams
        let event: MediaDownloadEvent
        switch result {
        case .success(let path):
            item.attachment.localPath = path
            event = .downloaded(messageId: item.messageId, url: item.key, localPath: path)
        case .failure(let error):
            // Offline or logged out: nothing failed, the bytes come on a later live path.
            if error.errorCode == OfflineErrorCode.offlineDisabled.rawValue { return }
            event = .failed(attachment: item.attachment,
                            error: CometChatException(.mediaDownloadFailed, "A background media download failed.", details: error.errorCode))
        }
        settings.callbackExecutor.execute {
            for listener in listeners {
                switch event {
                case .downloaded(let id, let url, let path): listener.onMediaDownloaded(id, url, path)
                case .failed(let attachment, let error): listener.onMediaDownloadFailed(attachment, error)
                }
            }
            streams.yield(event)
        }
    }

    // MARK: - Hydration

    /// Sets `localPath` on every attachment of `messages` whose bytes are cached (each attachment
    /// on its own). Does not refresh recency.
    package func hydrateMedia(_ messages: [BaseMessage]) {
        var attachments: [(String, Attachment)] = []
        for case let m as MediaMessage in messages {
            for attachment in Self.attachments(of: m) {
                if let key = MediaURL.key(attachment.fileUrl) { attachments.append((key, attachment)) }
            }
        }
        guard !attachments.isEmpty, let me = userId, let cache = cache(of: me) else { return }
        let rows = (try? cache.reader.sync { db in try MediaRows.rows(Set(attachments.map(\.0)), in: db) }) ?? [:]
        var paths: [String: String?] = [:]
        for (key, attachment) in attachments {
            guard let row = rows[key] else { continue }
            if paths[key] == nil {
                switch openable(row, in: cache) {
                case .path(let path): paths[key] = .some(path)
                case .damaged:
                    forget(key, name: row.name, in: cache)
                    paths[key] = .some(nil)
                case .noView: paths[key] = .some(nil)
                }
            }
            if let path = paths[key] ?? nil { attachment.localPath = path }
        }
    }

    /// `hydrateMedia` for items of any type a read delivers: messages, a conversation's last
    /// message, a thread's parent and last reply.
    func hydrateItems<Item>(_ items: [Item]) {
        var messages: [BaseMessage] = []
        for item in items {
            if let m = item as? BaseMessage {
                messages.append(m)
            } else if let c = item as? Conversation, let m = c.lastMessage {
                messages.append(m)
            } else if let t = item as? MessageThread {
                messages.append(t.parentMessage)
                if let reply = t.lastReply { messages.append(reply) }
            }
        }
        hydrateMedia(messages)
    }
}

/// When a download last received bytes, and whether its watchdog gave up on it.
private final class DownloadWatch: Sendable {
    let lastByte = Mutex(ContinuousClock.now)
    let stalled = Mutex(false)
}

/// Why one download attempt failed, before it becomes the caller's error.
enum MediaDownloadFailure: Error {
    /// No connection, or no answer, before any byte.
    case offline
    /// The server answered with this status.
    case server(Int)
    /// The download broke off part-way.
    case interrupted
    /// Refused by the engine's bounds (length, stall, cancel).
    case refused(String)
    /// The cache could not take the file (disk, database).
    case local(String)

    var exception: CometChatException {
        switch self {
        case .offline:
            return CometChatException(.offlineMediaNotCached, "The bytes are not cached and the server cannot be reached.")
        case .server:
            return CometChatException(.offlineMediaUnresolvable, "The server refused the download.")
        case .interrupted:
            return CometChatException(.offlineMediaUnresolvable, "The download broke off.")
        case .refused(let why):
            return CometChatException(.offlineMediaUnresolvable, "The download was refused: \(why).")
        case .local(let why):
            return CometChatException(.offlineMediaUnresolvable, "The bytes could not be cached.", details: why)
        }
    }
}

/// The media key's row (`kv` `media.key`): 32 random bytes, made on first use, inside the
/// encrypted database (so rotating or losing the database key covers it).
enum MediaKeyRow {
    static let name = "media.key"

    static func load(in db: Database) throws -> MediaKey? {
        let stmt = try db.cached("SELECT value FROM kv WHERE key = ?")
        try stmt.bind([.text(name)])
        let raw = try stmt.step() ? stmt.blob(0) : nil
        stmt.reset()
        if let raw, let key = MediaKey(raw: raw) { return key }
        let key = try MediaKey.generate()
        try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(name), .blob(key.raw))
        return key
    }
}
