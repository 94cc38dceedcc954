/// The catch-up sync's public surface: sync listeners and events, the sync state and point, and
/// `forceSyncNow`. The work is done by the sync engine (`SyncEngine`), which owns its sweeps.
///
/// A sweep starts on its own when the realtime connection comes back and holds for
/// `VaultSettings.stableConnectionDelay` (2.5 s; a connect-then-drop flap starts nothing), after
/// the outbox flush (or `SyncSettings.flushWait`, 20 s, whichever is first). The first sweep of a
/// new (or cleared) cache has nothing to catch up to: it stores the server's current sync point
/// and replays nothing (`onMessageSyncCompleted([], .caughtUp)`); the conversations phase still
/// fills the list.
extension OfflineVault {
    /// Registers a sync listener (held weakly; one per id: registering an id again replaces its
    /// listener). Works before login and across logout and login.
    ///
    ///     vault.addSyncListener("BANNER", banner)
    public func addSyncListener(_ id: String, _ listener: any SyncListener) {
        sync.listeners.add(id, listener)
    }

    /// Removes the sync listener registered under `id`, if any.
    public func removeSyncListener(_ id: String) {
        sync.listeners.remove(id)
    }

    /// The sync events as an `AsyncSequence`: what a `SyncListener` hears, in the same order
    /// (yielded after the listeners), plus `.sweepFinished` at the end of each sweep. Each call
    /// makes a new stream, which lives until its consumer stops iterating.
    ///
    ///     for await event in vault.syncEvents() {
    ///         if case .messageSyncCompleted(let messages, .caughtUp) = event { refresh(messages) }
    ///     }
    public func syncEvents() -> AsyncStream<SyncEvent> {
        sync.stream()
    }

    /// `.syncing` from the moment a sweep is accepted (a held reconnect, or `forceSyncNow`'s
    /// `onSuccess`) until it has ended, its wait for the outbox flush and any follow-up sweep
    /// included; `.idle` otherwise.
    public func getSyncState() -> SyncState {
        sync.isRunning ? .syncing : .idle
    }

    /// The server time the cache is synced to (the last committed page of the change log, or
    /// the point a new cache's first sweep started from), in epoch seconds; 0 if never (or no
    /// cache is open).
    public func getLastSyncTimestamp() -> Int {
        Int(sync.lastSyncAt)
    }

    /// Requests a catch-up sweep. Silently does nothing when one is already running, one ended
    /// within `SyncSettings.forceCooldown` (10 s by default), nobody is logged in, or offline
    /// support is not active; use `forceSyncNow(onSuccess:onError:)` to learn why.
    public func forceSyncNow() {
        _ = sync.forceSweep()
    }

    /// Requests a catch-up sweep: `onSuccess` once it is accepted and started (its progress
    /// reaches the sync listeners), or `onError` with `ERROR_OFFLINE_SYNC_IN_PROGRESS`,
    /// `ERROR_OFFLINE_SYNC_COOLDOWN`, `ERROR_OFFLINE_DISABLED` or `ERROR_USER_NOT_LOGGED_IN`.
    /// Callbacks arrive on the callback executor.
    ///
    ///     vault.forceSyncNow(onSuccess: { showSpinner() }, onError: { error in log(error?.errorCode) })
    public func forceSyncNow(onSuccess: @escaping @Sendable () -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        let refusal = sync.forceSweep()
        settings.callbackExecutor.execute {
            if let refusal { onError(refusal) } else { onSuccess() }
        }
    }

    /// The async form: starts a sweep as `forceSyncNow(onSuccess:onError:)` does and returns its
    /// report once it has finished (a follow-up sweep it queues reports separately).
    /// - Throws: the refusals of `forceSyncNow(onSuccess:onError:)`.
    @discardableResult
    public func syncNow() async throws(CometChatException) -> SyncReport {
        // Registered before the sweep can finish: the sweep's task starts after this returns.
        let report: SyncReport? = try await withCheckedContinuation { (continuation: CheckedContinuation<Result<SyncReport?, CometChatException>, Never>) in
            if let refusal = sync.forceSweep(waiter: { continuation.resume(returning: .success($0)) }) {
                continuation.resume(returning: .failure(refusal))
            }
        }.get()
        guard let report else { throw SyncEngine.superseded }
        return report
    }

    /// Waits for the running sweep (and any follow-up queued behind it) to finish; returns at
    /// once when none runs. For tools and tests.
    public func waitForSyncIdle() async {
        while sync.isRunning {
            _ = await sync.waitForSweep()
        }
    }
}

extension CometChat {
    /// Registers a sync listener on the shared vault (see `OfflineVault.addSyncListener`).
    public static func addSyncListener(_ id: String, _ listener: any SyncListener) {
        offlineVault?.addSyncListener(id, listener)
    }

    /// Removes the shared vault's sync listener registered under `id`, if any.
    public static func removeSyncListener(_ id: String) {
        offlineVault?.removeSyncListener(id)
    }

    /// Whether a catch-up sweep is running (`.idle` without a vault).
    public static func getSyncState() -> CometChat.SyncState {
        offlineVault?.getSyncState() ?? .idle
    }

    /// Server time of the last sync, epoch seconds; 0 if never.
    public static func getLastSyncTimestamp() -> Int {
        offlineVault?.getLastSyncTimestamp() ?? 0
    }

    /// Requests a catch-up sweep; silent when it cannot start (see `OfflineVault.forceSyncNow()`).
    public static func forceSyncNow() {
        offlineVault?.forceSyncNow()
    }

    /// Requests a catch-up sweep and reports whether it was accepted. Without a vault:
    /// `ERROR_USER_NOT_LOGGED_IN`.
    public static func forceSyncNow(onSuccess: @escaping @Sendable () -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else {
            return onError(CometChatException(.userNotLoggedIn, "Nobody is logged in."))
        }
        vault.forceSyncNow(onSuccess: onSuccess, onError: onError)
    }
}
