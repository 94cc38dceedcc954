import Foundation
import VaultKeys
public import VaultStore
import Synchronization

/// Where the offline engine stands for the logged-in user.
public enum OfflineState: Sendable, Equatable {
    /// Nobody is logged in.
    case loggedOut
    /// Offline support is off in the `OfflineConfig`: the SDK behaves as without it.
    case disabled
    /// The cache is being opened.
    case opening
    /// The cache is open (encrypted if configured).
    case ready
    /// Encryption was requested but cannot run; an unencrypted cache is open, reported as such.
    case plaintextFallback(EncryptionUnavailable)
    /// Temporarily unavailable (locked keyring, busy database…): retried with backoff and by
    /// `retryOpen()`. Nothing was touched.
    case unavailable(UnavailableReason)
    /// Encryption was requested but cannot run, and the app chose `.onlineOnly`: no cache.
    case onlineOnly(EncryptionUnavailable)

    /// Stable names for tools and logs.
    public var code: String {
        switch self {
        case .loggedOut: return "loggedOut"
        case .disabled: return "disabled"
        case .opening: return "opening"
        case .ready: return "ready"
        case .plaintextFallback: return "plaintextFallback"
        case .unavailable: return "unavailable"
        case .onlineOnly: return "onlineOnly"
        }
    }

    /// Whether offline support is running (a cache is open and serving).
    public var isOfflineActive: Bool {
        switch self {
        case .ready, .plaintextFallback: return true
        default: return false
        }
    }
}

/// The result of `login`, `retryOpen` or a background re-open.
public struct OpenAttempt: Sendable {
    /// Where the engine stands after the attempt: `.ready`, `.unavailable(reason)` (retried with
    /// backoff), `.onlineOnly`, `.plaintextFallback`, …
    public let state: OfflineState
    /// Resets performed by this attempt (each was also delivered to the reset listeners).
    public let resets: [CacheReset]
    /// Notes for the audit (a repaired manifest, a key-tier fallback…). No content, no keys.
    public let notes: [String]
    /// The open cache's id, when one is open.
    public let cacheId: String?
    /// Quarantined caches whose key is back in its store (a keyring restored from backup):
    /// `restoreQuarantinedOfflineCache(id:)` brings one back instead of letting it age out.
    public internal(set) var restorableCaches: [String] = []
}

/// The offline engine for one app: per-user encrypted caches, the open procedure, honest status
/// and the reset listener.
///
///     let config = OfflineConfig.Builder().setEnabled(true).setEncryption(true).build()
///     let vault = try OfflineVault(config: config, settings: VaultSettings(applicationId: "org.example.Chat"))
///     vault.addOfflineCacheResetListener("RESET", resetObserver)
///     let attempt = await vault.login(userId: "alice")
///     if vault.isOfflineEnabled() { … }
///     await vault.logout()          // closes the cache and keeps it
///
/// Several instances may exist in one process (tests do); two of them never open the same user's
/// cache at once (the second gets `.unavailable(.cacheInUse)`).
public final class OfflineVault: Sendable {
    /// The seeds' offline configuration the engine was made with (enabled, caps, encryption…),
    /// clamped as `OfflineConfig` clamps it.
    public let config: OfflineConfig
    /// ChatVault's own settings the engine was made with (application id, key stores, callback
    /// executor, retry and sync pacing).
    public let settings: VaultSettings
    /// The server this engine reads from and sends to.
    public let backend: any ChatBackend
    /// Validates server payloads before anything is cached.
    public let wireLimits: WireLimits
    private let keyStores: [any KeyStore]
    private let resetListeners = ListenerRegistry<any OfflineCacheResetListener>()
    /// Who is logged in, their directory, the engine's state and the open cache (components hold
    /// it to find the user and their cache).
    let session = VaultSession()
    /// The outbox: admission, passes, failures and notices (the rows are in the cache).
    let outbox: OutboxEngine
    /// Upload batches: admission, pumps, retries and ends (the batches are in the cache).
    let uploads: UploadEngine
    /// The server session and the realtime connection.
    let link: RealtimeLink
    /// Realtime ingest: validation, message listeners and streams.
    let realtime: RealtimeIngest
    /// Eviction within the configured limits, after writes settle.
    let eviction: EvictionScheduler
    /// The two-phase reads (pages, lists, lookups).
    let reads: ReadEngine
    /// The SDK's blocked-users list, refreshed at login and each sweep.
    let blockedUsers: BlockedUsersRefresh
    /// The one way in: every arriving message is written here and published to the subscribers.
    let incoming = CacheWriter()
    /// The catch-up sync: its sweeps, listeners and streams (the sync point is in the cache).
    let sync: SyncEngine
    /// The media cache (downloads, views, background downloads).
    /// The media cache (downloads, the background queue, views, hydration).
    let media: MediaCache
    /// The local search index: kept by the writer connection, built in the background.
    let searchIndex: SearchIndex
    /// Local search: queries answered from the index and the cached rows.
    let search: SearchEngine
    /// Background integrity checks of large caches, for `waitForIntegrityCheck`.
    let integrityChecks = IntegrityChecks()
    /// When each conversation's opening was last written (`conversation_opened`), this session.
    let openedConversations = OpenedConversations()
    /// The audit journal's writer (opens, resets and their delivery, refusals, restores).
    let audit = OpenAudit()
    /// Login, logout, retries and clears run one at a time, in order, on this queue.
    let lifecycle = DispatchQueue(label: "chatvault.lifecycle")


    /// Creates the engine. Nothing is opened until `login`.
    /// - Parameter backend: the server; without one the engine behaves as if always offline.
    /// - Throws: `VaultSetupError.invalidApplicationId` when the application id is unusable.
    public init(config: OfflineConfig, settings: VaultSettings, backend: any ChatBackend = UnreachableBackend(),
                wireLimits: WireLimits = WireLimits()) throws(VaultSetupError) {
        guard settings.hasValidApplicationId else { throw .invalidApplicationId }
        // A key kept beside the data it protects protects nothing.
        let root = (settings.resolvedRoot as NSString).standardizingPath
        for case .software(let directory?) in settings.keyStorage {
            let keys = (directory as NSString).standardizingPath
            if keys == root || keys.hasPrefix(root + "/") || root.hasPrefix(keys + "/") { throw .keyDirectoryInsideCache }
        }
        self.config = config
        self.settings = settings
        self.backend = backend
        self.wireLimits = wireLimits
        keyStores = settings.makeKeyStores()
        let session = self.session
        media = MediaCache(settings: settings, config: config, backend: backend, session: session, writer: incoming)
        link = RealtimeLink(backend: backend, settings: settings, messagesPerConversation: config.maxMessagesPerConversation,
                            session: session)
        realtime = RealtimeIngest(settings: settings, wireLimits: wireLimits, writer: incoming, media: media, session: session)
        let opened = openedConversations
        // An evicted conversation's opening went with it: the next open records it again.
        eviction = EvictionScheduler(settings: settings, config: config, session: session, conversationsEvicted: { opened.forget() })
        uploads = UploadEngine(backend: backend, settings: settings, config: config, wireLimits: wireLimits, media: media, session: session)
        outbox = OutboxEngine(backend: backend, settings: settings, config: config, wireLimits: wireLimits,
                              writer: incoming, media: media, link: link, uploads: uploads, session: session)
        reads = ReadEngine(settings: settings, config: config, wireLimits: wireLimits, backend: backend, writer: incoming,
                           media: media, audit: audit, session: session)
        searchIndex = SearchIndex(settings: settings, session: session)
        search = SearchEngine(session: session, index: searchIndex, media: media, wireLimits: wireLimits)
        blockedUsers = BlockedUsersRefresh(backend: backend, wireLimits: wireLimits, session: session)
        sync = SyncEngine(backend: backend, settings: settings, wireLimits: wireLimits, writer: incoming, outbox: outbox,
                          eviction: eviction, blockedUsers: blockedUsers, session: session)
        outbox.bind(alreadyStable: { [weak self] in self?.connectionBecameStable() })
        link.bind(RealtimeLink.Ports(
            sessionStarted: { [weak self] in await self?.sessionStarted() },
            event: { [weak realtime] event in await realtime?.ingest(event) },
            becameStable: { [weak self] in self?.connectionBecameStable() }))
        subscribeToIncoming()
    }

    // MARK: - Session

    /// Opens (or creates) the user's cache. Returns once the cache is ready and any reset has
    /// been delivered to the reset listeners, or once the open has failed (then retried in the
    /// background while transient).
    /// - Warning: with the default `.main` executor, the main queue must be running.
    @discardableResult
    public func login(userId: String) async -> OpenAttempt {
        prepareKeyStore(userId: userId)
        return await onLifecycle { done in
            self.closeLocked(state: .loggedOut)
            guard !userId.isEmpty, userId.utf8.count <= 4096 else {
                return done(OpenAttempt(state: .loggedOut, resets: [], notes: ["an empty or oversized user id was refused"], cacheId: nil))
            }
            let directory = CacheDirectory(root: self.settings.resolvedRoot,
                                           account: CacheDirectory.account(applicationId: self.settings.applicationId, userId: userId))
            let generation = self.session.withLock { s -> Int in
                s.userId = userId
                s.directory = directory
                s.attempts = 0
                s.generation += 1
                s.state = self.config.enabled ? .opening : .disabled
                return s.generation
            }
            self.integrityChecks.reset()
            guard self.config.enabled else {
                return done(OpenAttempt(state: .disabled, resets: [], notes: [], cacheId: nil))
            }
            // The server session and the realtime connection start beside the cache; offline
            // they are retried with backoff while reads fall back to the cache.
            self.outbox.detached()
            self.uploads.detached()
            self.sync.detached()
            self.media.detached()
            self.link.start(userId: userId)
            // Only this first open of a login counts toward escalation.
            self.attemptOpen(generation: generation, countsTowardEscalation: true, done: done)
        }
    }

    /// Closes the cache and keeps it (the same user's next login is instant).
    public func logout() async {
        link.stop()
        outbox.detached()
        uploads.detached()
        sync.detached()
        media.detached()
        await backend.logout()
        _ = await onLifecycle { done in
            self.closeLocked(state: .loggedOut)
            self.session.withLock { s in
                s.userId = nil
                s.directory = nil
            }
            done(OpenAttempt(state: .loggedOut, resets: [], notes: [], cacheId: nil))
        }
    }

    /// Tries again now to open a cache that was unavailable (or online-only).
    @discardableResult
    public func retryOpen() async -> OpenAttempt {
        await onLifecycle { done in
            let (generation, state) = self.session.withLock { s -> (Int, OfflineState) in
                s.retryToken += 1 // a pending timer is superseded by this attempt
                return (s.generation, s.state)
            }
            switch state {
            case .unavailable, .onlineOnly:
                self.session.withLock { $0.state = .opening }
                self.attemptOpen(generation: generation, countsTowardEscalation: false, done: done)
            default:
                done(OpenAttempt(state: state, resets: [], notes: [], cacheId: self.session.withLock { $0.cache?.cacheId }))
            }
        }
    }

    /// The engine's state for the logged-in user.
    public var state: OfflineState { session.withLock { $0.state } }

    /// The logged-in user, if any.
    public var userId: String? { session.userId }

    /// The open cache (for the CLI's audit and the package's tests).
    package var openCache: VaultCache? { session.openCache }

    /// The open cache when it is `me`'s (the session's user and its cache, read together).
    func openCache(of me: String) -> VaultCache? {
        session.openCache(of: me)
    }

    /// The logged-in user's cache directory.
    package var cacheDirectory: CacheDirectory? { session.withLock { $0.directory } }

    // MARK: - The seeds' surface

    /// Whether offline support is actually running for the logged-in user: false before login,
    /// after logout, while opening, and while the cache cannot open. Read it at each decision.
    public func isOfflineEnabled() -> Bool {
        session.withLock { $0.state.isOfflineActive }
    }

    /// What encryption at rest is doing, as the seeds' six-key dictionary.
    public func getOfflineEncryptionStatus() -> [String: Any] {
        offlineEncryptionStatus().dictionary
    }

    /// What encryption at rest is doing, typed.
    public func offlineEncryptionStatus() -> OfflineEncryptionStatus {
        let (state, cache) = session.withLock { ($0.state, $0.cache) }
        let engine = CipherEngine.current
        var status = OfflineEncryptionStatus(enabled: config.enabled && config.encryption, atRest: OfflineEncryptionTier.NONE,
                                             keyStorage: OfflineEncryptionTier.NONE, cipherAvailable: engine.isAvailable,
                                             cipher: nil, leakage: nil)
        guard state.isOfflineActive, let cache else { return status }
        if cache.isEncrypted {
            status.atRest = OfflineEncryptionTier.SQLCIPHER
            status.keyStorage = cache.keyStorage.rawValue
            status.cipher = cache.provenCipher
            status.leakage = media.outgoingCopyKey(cache) != nil ? OfflineEncryptionStatus.encryptedLeakage
                : OfflineEncryptionStatus.encryptedLeakageWithoutViews
        } else {
            status.leakage = OfflineEncryptionStatus.plaintextLeakage
        }
        return status
    }

    /// Bytes on disk of the logged-in user's cache (database, WAL, media). Reads the disk.
    public func getCacheSize() -> Int64 {
        let (cache, directory) = session.withLock { ($0.cache, $0.directory) }
        if let cache { return cache.bytesOnDisk() }
        return directory?.bytesOnDisk() ?? 0
    }

    /// Wipes the cached messages, conversations, outbox, snapshots and media of the logged-in
    /// user, keeping the (now empty) cache open. Fire and forget; see `clearOfflineCacheAndWait()`.
    /// - Warning: destroys the user's cached data, unsent messages included.
    public func clearOfflineCache() {
        Task { try? await self.clearOfflineCacheAndWait() }
    }

    /// Wipes the cache like `clearOfflineCache()` and reports the outcome.
    /// - Throws: `ERROR_OFFLINE_DISABLED` when no cache is open; `ERROR_OFFLINE_MESSAGE_PERSIST_FAILED`
    ///   when the database refused (busy, full): nothing was changed, try again.
    public func clearOfflineCacheAndWait() async throws(CometChatException) {
        let outcome: Result<Void, CometChatException> = await withCheckedContinuation { continuation in
            lifecycle.async {
                guard let cache = self.session.withLock({ $0.state.isOfflineActive ? $0.cache : nil }) else {
                    return continuation.resume(returning: .failure(CometChatException(.offlineDisabled, "offline support is not active")))
                }
                do {
                    // What was unsent is reported `.discarded` once the wipe has committed.
                    let unsent = try? cache.writer.sync { db in
                        (try OutboxRows.rows(pendingOnly: false, in: db), self.outbox.state.withLock { $0.inFlight })
                    }
                    try cache.writer.sync { db in try CacheRows.clearAll(db) }
                    for dir in [cache.directory.media, cache.directory.outgoing] {
                        try? FileManager.default.removeItem(atPath: dir)
                    }
                    try? cache.writer.sync { db in try AuditJournal.append([AuditEntry(kind: .cleared, cacheId: cache.cacheId)], in: db) }
                    if let unsent { self.outbox.cleared(unsent.0, inFlight: unsent.1) }
                    self.uploads.cleared()
                    self.sync.cleared()
                    // The index was emptied with the rows: the build finds nothing and completes.
                    self.searchIndex.startBuild(cache)
                    // A new media key (the old one went with `kv`), no views of wiped files.
                    self.media.attached(cache)
                    continuation.resume(returning: .success(()))
                } catch {
                    continuation.resume(returning: .failure(CometChatException(.offlineMessagePersistFailed, "the cache could not be cleared: \(error)")))
                }
            }
        }
        try outcome.get()
    }

    /// Registers a reset listener (held weakly; one per id). Works before login and across
    /// logout, login and restarts of the cache.
    public func addOfflineCacheResetListener(_ id: String, _ listener: any OfflineCacheResetListener) {
        resetListeners.add(id, listener)
    }

    /// Removes the reset listener registered under `id`, if any.
    public func removeOfflineCacheResetListener(_ id: String) {
        resetListeners.remove(id)
    }

    // MARK: - Internals

    /// Runs `body` on the lifecycle queue; `body` calls `done` exactly once (possibly later, from
    /// the callback executor).
    private func onLifecycle(_ body: @escaping @Sendable (_ done: @escaping @Sendable (OpenAttempt) -> Void) -> Void) async -> OpenAttempt {
        await withCheckedContinuation { continuation in
            lifecycle.async {
                body { attempt in continuation.resume(returning: attempt) }
            }
        }
    }

    /// Closes the open (or still delivering) cache, if any, and invalidates timers and pending
    /// deliveries (on the lifecycle queue).
    func closeLocked(state: OfflineState) {
        let (cache, directory) = session.withLock { s -> (VaultCache?, CacheDirectory?) in
            s.generation += 1
            s.retryToken += 1
            s.state = state
            defer { s.cache = nil }
            return (s.cache, s.directory)
        }
        if let cache, let directory { audit.flush(into: cache, directory: directory) }
        cache?.close()
        if let cache { searchIndex.closed(cache) }
    }

    func storeConfiguration(directory: CacheDirectory, userId: String, countsTowardEscalation: Bool,
                                    integrityCheckLimit: Int64?) -> StoreConfiguration {
        var store = StoreConfiguration(directory: directory, applicationId: settings.applicationId, account: directory.account,
                                       keyLabel: "\(settings.applicationName) offline cache key (\(Self.labelSafe(userId)))",
                                       encryption: config.encryption, failureBehavior: config.encryptionFailureBehavior,
                                       keyStores: keyStores)
        store.escalationThreshold = settings.escalationThreshold
        store.countsTowardEscalation = countsTowardEscalation
        store.quarantine = settings.quarantine
        // Pruned after ready, in the background (`attemptOpen`).
        store.pruneQuarantineDuringOpen = false
        store.synchronousIntegrityCheckLimit = integrityCheckLimit ?? settings.synchronousIntegrityCheckLimit
        return store
    }

    /// The user id as it may appear in a key item's label: no control characters, at most 128
    /// characters (a keyring refuses NULs and very long labels).
    static func labelSafe(_ userId: String) -> String {
        let clean = String(String.UnicodeScalarView(userId.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }))
        return clean.count > 128 ? String(clean.prefix(127)) + "…" : clean
    }

    /// Runs the open procedure (on the lifecycle queue) and publishes its outcome. The lifecycle
    /// queue does not wait for the callback executor (a GLib app's main loop may not drain
    /// Dispatch's main queue): the new cache is held, not serving, until the executor has run the
    /// reset listeners and flipped the state. A later login or logout closes it meanwhile.
    func attemptOpen(generation: Int, countsTowardEscalation: Bool, integrityCheckLimit: Int64? = nil,
                             done: @escaping @Sendable (OpenAttempt) -> Void) {
        guard let (userId, directory) = session.withLock({ s -> (String, CacheDirectory)? in
            guard s.generation == generation, let user = s.userId, let dir = s.directory else { return nil }
            return (user, dir)
        }) else {
            return done(OpenAttempt(state: state, resets: [], notes: ["superseded by a later login or logout"], cacheId: nil))
        }
        let configuration = storeConfiguration(directory: directory, userId: userId, countsTowardEscalation: countsTowardEscalation,
                                               integrityCheckLimit: integrityCheckLimit)
        audit.openStarting()
        let report = CacheOpener.open(configuration)
        let newState = OfflineState(report.outcome)
        audit.opened(report, state: newState, directory: directory)
        let attempt = {
            var attempt = OpenAttempt(state: newState, resets: report.resets, notes: report.notes, cacheId: report.cache?.cacheId)
            attempt.restorableCaches = report.restorable
            return attempt
        }()
        let held = session.withLock { s -> Bool in
            guard s.generation == generation else { return false }
            s.cache = report.cache
            return true
        }
        guard held else {
            report.cache?.close()
            return done(OpenAttempt(state: state, resets: [], notes: ["superseded by a later login or logout"], cacheId: nil))
        }
        let listeners = report.resets.isEmpty ? [] : resetListeners.withIds()
        let released = report.resets.isEmpty ? [] : resetListeners.released()
        settings.callbackExecutor.execute {
            guard self.session.withLock({ $0.generation == generation }) else {
                return done(OpenAttempt(state: self.state, resets: [], notes: ["superseded by a later login or logout"], cacheId: nil))
            }
            for reset in report.resets {
                for (_, listener) in listeners { listener.onOfflineCacheReset(reset.reason, reset.pendingMessagesLost) }
            }
            self.audit.delivered(report.resets, listeners: listeners.map(\.0), released: released,
                                 executor: self.settings.callbackExecutor.name, cache: report.cache, directory: directory)
            // Told: the resets are not announced again by later opens.
            CacheOpener.acknowledge(report.resets, in: directory)
            // Before the cache serves and before `done`: `getLastSyncTimestamp()` is right as soon
            // as login returns, and no sweep starts against the cache before the engine knows it.
            if newState.isOfflineActive, let cache = report.cache {
                self.sync.attached(cache)
                self.media.attached(cache)
                // The index's triggers on the writer before the first write of this session.
                self.searchIndex.attached(cache)
            }
            let current = self.session.withLock { s -> Bool in
                guard s.generation == generation else { return false }
                s.state = newState
                return true
            }
            // Counted before `done`, so a caller that waits right after login sees it pending.
            let checking = current && report.cache?.needsBackgroundIntegrityCheck == true
            if checking { self.integrityChecks.begin() }
            done(attempt)
            guard current else { return }
            if case .unavailable = newState { self.scheduleRetry(generation: generation) }
            if checking, let cache = report.cache { self.checkInBackground(cache, generation: generation) }
            if newState.isOfflineActive, let cache = report.cache {
                self.outbox.attached(cache)
                self.uploads.attached(cache)
                // Messages the index misses (an existing cache, a rebuilt index): after ready.
                self.searchIndex.startBuild(cache)
                // Old quarantine entries (and their key items: maybe D-Bus calls) go after ready:
                // nothing of it is needed to serve. Stops once the cache closes.
                DispatchQueue.global(qos: .utility).async { cache.pruneQuarantine(configuration) }
            }
        }
    }

    /// Starts the slow part of the key lookup the coming open will make (for the Secret Service:
    /// the D-Bus connection and session) beside the lifecycle hop and the open's file checks,
    /// instead of before the keyed open. Only for the store the user's manifest names.
    private func prepareKeyStore(userId: String) {
        guard config.enabled, config.encryption, !userId.isEmpty, userId.utf8.count <= 4096 else { return }
        DispatchQueue.global(qos: .userInitiated).async {
            let directory = CacheDirectory(root: self.settings.resolvedRoot,
                                           account: CacheDirectory.account(applicationId: self.settings.applicationId, userId: userId))
            CacheOpener.prepareKeyStore(self.storeConfiguration(directory: directory, userId: userId, countsTowardEscalation: false,
                                                                integrityCheckLimit: nil))
        }
    }

    private func scheduleRetry(generation: Int) {
        let (attempt, token) = session.withLock { s -> (Int, Int) in
            s.attempts += 1
            s.retryToken += 1
            return (s.attempts, s.retryToken)
        }
        let delay = settings.retry.delay(forAttempt: attempt)
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
            self.lifecycle.async {
                let due = self.session.withLock { s -> Bool in
                    guard s.generation == generation, s.retryToken == token, case .unavailable = s.state else { return false }
                    s.state = .opening
                    return true
                }
                guard due else { return }
                self.attemptOpen(generation: generation, countsTowardEscalation: false) { _ in }
            }
        }
    }

    /// A large cache is opened without a full integrity check; it runs now, and damage found
    /// resets the cache as `.corrupted` by opening again with the check forced. A check that
    /// could not run (an I/O error, memory) changes nothing. `integrityChecks` has counted it
    /// (`begin`); it ends once the check, and the reset it may cause, are over.
    private func checkInBackground(_ cache: VaultCache, generation: Int) {
        Task.detached {
            let result = await cache.verifyIntegrity()
            switch result {
            case .damaged: break
            case .intact: return self.integrityChecks.end(.intact)
            case .interrupted: return self.integrityChecks.end(.interrupted)
            case .unknown: return self.integrityChecks.end(.unknown)
            }
            self.lifecycle.async {
                guard self.session.withLock({ $0.generation == generation && $0.cache === cache }) else {
                    return self.integrityChecks.end(.unknown)
                }
                self.closeLocked(state: .opening)
                let next = self.session.withLock { $0.generation }
                self.attemptOpen(generation: next, countsTowardEscalation: false, integrityCheckLimit: Int64.max) { reopen in
                    // Damage confined to the search index is repaired by the reopen, not reset.
                    let repaired = reopen.resets.isEmpty && reopen.state.isOfflineActive
                    self.integrityChecks.end(repaired ? .repaired : .damaged, reopen: reopen)
                }
            }
        }
    }
}

extension OfflineState {
    init(_ outcome: OpenReport.Outcome) {
        switch outcome {
        case .ready: self = .ready
        case .plaintextFallback(let why): self = .plaintextFallback(why)
        case .unavailable(let why): self = .unavailable(why)
        case .onlineOnly(let why): self = .onlineOnly(why)
        }
    }
}

/// A setting the engine cannot work with.
public enum VaultSetupError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The application id must be a reverse-DNS name: letters, digits, '.', '-', '_'.
    case invalidApplicationId
    /// The software key directory lies inside the cache root (or contains it).
    case keyDirectoryInsideCache

    /// A sentence saying which setting to fix.
    public var description: String {
        switch self {
        case .invalidApplicationId: return "the application id must be a reverse-DNS name (letters, digits, '.', '-', '_')"
        case .keyDirectoryInsideCache: return "the software key directory must lie outside the cache directory"
        }
    }
}
