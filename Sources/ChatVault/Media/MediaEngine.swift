import Foundation
import Synchronization
import VaultStore

/// The media cache: its live state the attached cache's media key and view directory, the
/// downloads in flight (one per URL key, shared by every caller that asks for it), and the queue
/// of background (`.auto`) downloads. The files and their rows live in the cache (`MediaRows`).
///
/// Files: `media/<32 hex>` under the cache directory, 0600, written atomically
/// (`MediaFileWriter`); with encryption on, in the authenticated chunked format under a random
/// media key kept in the encrypted database (`kv` row `media.key`), and opened through decrypted
/// views (`MediaViewDirectory`, under `$XDG_RUNTIME_DIR`), made on demand and removed at logout,
/// clear, reset and the next start.
final class MediaCache: Sendable {
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

    // What the component needs, and nothing of the vault beyond it.
    let settings: VaultSettings
    let config: OfflineConfig
    let backend: any ChatBackend
    /// The vault's session: whom the media cache serves, and their cache.
    private let session: VaultSession

    /// Where its records are written (the one writer of what the cache holds).
    let writer: CacheWriter

    init(settings: VaultSettings, config: OfflineConfig, backend: any ChatBackend, session: VaultSession, writer: CacheWriter) {
        self.writer = writer
        self.settings = settings
        self.config = config
        self.backend = backend
        self.session = session
    }

    /// The logged-in user and their open cache, while offline support is active.
    func current() -> (me: String, cache: VaultCache)? {
        session.current
    }
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

extension MediaCache {
    // MARK: - Lifecycle

    /// A cache became active: its media key is loaded (made on first use with encryption on),
    /// leftovers of killed writers and files no row names are removed, and old decrypted views
    /// are cleared.
    func attached(_ cache: VaultCache) {
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
        let old = state.withLock { s -> [MediaJob] in
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
    func detached() {
        let (jobs, views, waiters) = state.withLock { s -> ([MediaJob], MediaViewDirectory?, [CheckedContinuation<Void, Never>]) in
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

extension MediaCache {
    /// Hydrates what the writer committed before it is delivered (a delivered message carries its
    /// cached bytes' path) and downloads new media in the background (`.auto`).
    func committed(_ committed: CacheWriter.Committed) {
        switch committed {
        case .realtime(let parsed, _):
            switch parsed {
            case .received(_, let m):
                self.hydrate([m])
                self.autoDownload([m])
            case .edited(_, let m), .deleted(_, let m):
                self.hydrate([m])
            case .reaction(_, let event, _):
                if let m = event.message { self.hydrate([m]) }
            case .receipt:
                break
            }
        case .syncPage, .stored, .removed, .media:
            break // synced messages are hydrated with their delivery (`deliverSynced`); reads hydrate their own
        }
    }
}
