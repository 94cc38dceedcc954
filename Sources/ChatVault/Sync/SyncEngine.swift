import Foundation
import Synchronization
import VaultStore

/// The catch-up sync: its sweeps, their listeners and streams, and the live state (the sync point
/// itself is in the cache: `sync_state`).
///
/// A sweep is two phases: conversations (one fresh page of the list, written through as a read
/// writes it), then messages (the change log replayed forward from the stored sync point, one
/// page per transaction through the cache writer, the sync point advancing in the same
/// transaction as the page's rows). Sweeps run one at a time; a request while one runs queues at
/// most one follow-up.
///
/// The engine holds what it works with (the backend, the cache writer, the outbox it waits for
/// and reports discarded sends to, eviction, the blocked-users refresh) and the vault's session to
/// find the user and their cache; it never reaches the vault itself:
///
///     let sync = SyncEngine(backend: backend, settings: settings, wireLimits: limits, writer: incoming,
///                           outbox: outbox, eviction: eviction, blockedUsers: blocked, session: session)
///     sync.attached(cache); sync.requestSweep()
final class SyncEngine: Sendable {
    struct State {
        /// Bumped when a cache is attached or detached: a sweep of an older generation stops.
        var generation = 0
        /// A sweep was accepted and has not ended (waiting for the flush, or in a phase, or a
        /// follow-up queued behind it): what `getSyncState()` reports as `.syncing`.
        var running = false
        /// One follow-up queued behind the running sweep (a request while it ran, or a `.partial`).
        var followUp = false
        /// When the last sweep ended (the cooldown of `forceSyncNow` counts from it).
        var lastFinished: ContinuousClock.Instant?
        /// `sync_state.last_sync_at` of the attached cache.
        var lastSyncAt: Int64 = 0
        /// Follow-up sweeps in a row that a `.partial` outcome queued (bounded by
        /// `SyncSettings.maxFollowUpSweeps`: a server that always has more cannot keep the
        /// engine sweeping forever).
        var partialStreak = 0
        var sweeps = 0
        var finishWaiters: [Int: [@Sendable (SyncReport?) -> Void]] = [:]
    }

    let listeners = ListenerRegistry<any SyncListener>()
    let state = Mutex(State())

    private let streams = EventStreams<SyncEvent>()
    private let backend: any ChatBackend
    private let settings: VaultSettings
    private let wireLimits: WireLimits
    private let writer: CacheWriter
    private let outbox: OutboxEngine
    private let eviction: EvictionScheduler
    private let blockedUsers: BlockedUsersRefresh
    private let session: VaultSession

    init(backend: any ChatBackend, settings: VaultSettings, wireLimits: WireLimits, writer: CacheWriter, outbox: OutboxEngine,
         eviction: EvictionScheduler, blockedUsers: BlockedUsersRefresh, session: VaultSession) {
        self.backend = backend
        self.settings = settings
        self.wireLimits = wireLimits
        self.writer = writer
        self.outbox = outbox
        self.eviction = eviction
        self.blockedUsers = blockedUsers
        self.session = session
    }

    func stream() -> AsyncStream<SyncEvent> {
        streams.make()
    }

    func yield(_ event: SyncEvent) {
        streams.yield(event)
    }

    /// `.syncing` while a sweep is accepted and not ended.
    var isRunning: Bool { state.withLock { $0.running } }

    /// The server time the attached cache is synced to, epoch seconds (0: never, or none attached).
    var lastSyncAt: Int64 { state.withLock { $0.lastSyncAt } }
}

extension SyncEngine {
    // MARK: - Lifecycle hooks

    /// A cache became active: its sync point's time is what `getLastSyncTimestamp()` reports.
    func attached(_ cache: VaultCache) {
        let record = (try? cache.writer.sync { db in try SyncStateRows.load(in: db) }) ?? .empty
        state.withLock { s in
            s.generation += 1
            s.lastSyncAt = record.lastSyncAt
            s.followUp = false
        }
    }

    /// Logout, or the cache closed: a running sweep stops at its next step.
    func detached() {
        state.withLock { s in
            s.generation += 1
            s.lastSyncAt = 0
            s.followUp = false
        }
    }

    /// `clearOfflineCache` emptied `sync_state`: the next sweep is a new cache's first.
    func cleared() {
        state.withLock { s in
            s.generation += 1
            s.lastSyncAt = 0
        }
    }

    // MARK: - Requests

    /// Starts a sweep, or queues one follow-up behind the running one.
    func requestSweep() {
        let start = state.withLock { s -> Bool in
            if s.running {
                s.followUp = true
                return false
            }
            s.running = true
            return true
        }
        if start { Task.detached { await self.runSweeps() } }
    }

    /// Why `forceSyncNow` would not start a sweep now; nil: it started one.
    /// - Parameter waiter: told the report of the sweep this starts (not called on a refusal).
    func forceSweep(waiter: (@Sendable (SyncReport?) -> Void)? = nil) -> CometChatException? {
        guard session.userId != nil else { return CometChatException(.userNotLoggedIn, "Nobody is logged in.") }
        guard session.isActive else { return CometChatException(.offlineDisabled, "Offline support is not active.") }
        let cooldown = settings.sync.forceCooldown
        let refusal = state.withLock { s -> CometChatException? in
            if s.running { return CometChatException(.offlineSyncInProgress, "A catch-up sync is already running.") }
            if let last = s.lastFinished, ContinuousClock.now < last + cooldown {
                return CometChatException(.offlineSyncCooldown, "A catch-up sync ran moments ago; try again after the cooldown.")
            }
            s.running = true
            if let waiter { s.finishWaiters[s.sweeps + 1, default: []].append(waiter) }
            return nil
        }
        if refusal == nil { Task.detached { await self.runSweeps() } }
        return refusal
    }

    /// Waits until the sweep running now (or the next to start) has finished; nil when none runs.
    func waitForSweep() async -> SyncReport? {
        await withCheckedContinuation { continuation in
            let queued = state.withLock { s -> Bool in
                guard s.running else { return false }
                s.finishWaiters[s.sweeps + 1, default: []].append { continuation.resume(returning: $0) }
                return true
            }
            if !queued { continuation.resume(returning: nil) }
        }
    }

    /// Runs sweeps until no follow-up is queued. The last one ends on the callback executor,
    /// after its callbacks: a listener that reads `getSyncState()` in `onMessageSyncCompleted`
    /// sees `.syncing`, and the next request after it sees `.idle` (or the cooldown).
    private func runSweeps() async {
        while true {
            let report = await sweep()
            let (next, number) = state.withLock { s -> (Bool, Int) in
                s.sweeps += 1
                guard s.followUp else { return (false, s.sweeps) }
                s.followUp = false
                for waiter in s.finishWaiters.removeValue(forKey: s.sweeps) ?? [] { waiter(report) }
                return (true, s.sweeps)
            }
            if next { continue }
            settings.callbackExecutor.execute {
                let (restart, waiters) = self.state.withLock { s -> (Bool, [@Sendable (SyncReport?) -> Void]) in
                    let mine = s.finishWaiters.removeValue(forKey: number) ?? []
                    // A request that came while the callbacks were delivered.
                    if s.followUp {
                        s.followUp = false
                        return (true, mine)
                    }
                    s.running = false
                    s.lastFinished = ContinuousClock.now
                    // Waiters for a sweep that will not come.
                    let stranded = s.finishWaiters.values.flatMap { $0 }
                    s.finishWaiters = [:]
                    for waiter in stranded { waiter(nil) }
                    return (false, mine)
                }
                if restart { Task.detached { await self.runSweeps() } }
                for waiter in waiters { waiter(report) }
            }
            return
        }
    }

    // MARK: - One sweep

    private struct SweepContext {
        let me: String
        let cache: VaultCache
        let generation: Int
    }

    private func isCurrent(_ context: SweepContext) -> Bool {
        state.withLock { $0.generation == context.generation } && session.openCache(of: context.me) === context.cache
    }

    /// One sweep: the flush first (a reconnect's), then the two phases. nil when there was no
    /// cache to sync.
    private func sweep() async -> SyncReport? {
        // A reconnect's flush (or any pass running now) goes first; returns at once when none runs.
        await waitForOutboxPass(atMost: settings.sync.flushWait)
        guard let me = session.userId, let cache = session.openCache(of: me) else { return nil }
        let context = SweepContext(me: me, cache: cache, generation: state.withLock { $0.generation })
        let started = Int64(settings.clock().timeIntervalSince1970)
        _ = try? await cache.writer.run { db in try SyncStateRows.recordAttempt(at: started, in: db) }

        tell(.conversationSyncStarted)
        let conversations = await syncConversations(context)
        switch conversations {
        case .success(let list): tell(.conversationSyncCompleted(list))
        case .failure(let error): tell(.conversationSyncError(error))
        }
        // The SDK's blocked-users list is refreshed on each sweep (and at login).
        if isCurrent(context) { await blockedUsers.refresh() }

        tell(.messageSyncStarted)
        let messages = await syncMessages(context)
        switch messages.outcome {
        case .success(let outcome): tell(.messageSyncCompleted(messages.messages, outcome))
        case .failure(let error): tell(.messageSyncError(error))
        }
        eviction.schedule()
        let report = SyncReport(conversations: try? conversations.get(), conversationError: conversations.error,
                                messages: messages.messages, newMessageCount: messages.newCount, outcome: try? messages.outcome.get(),
                                messageError: messages.outcome.error, droppedChanges: messages.dropped,
                                establishedSyncPoint: messages.established,
                                lastSyncTimestamp: Int(state.withLock { $0.lastSyncAt }))
        // A bounded sweep that made progress goes on while the cache is still this user's, up to
        // `maxFollowUpSweeps` in a row; then the rest waits for the next reconnect or forced sync.
        let limit = settings.sync.maxFollowUpSweeps
        var goOn = false
        if case .success(.partial) = messages.outcome, messages.progressed { goOn = isCurrent(context) }
        state.withLock { s in
            if goOn && s.partialStreak < limit {
                s.partialStreak += 1
                s.followUp = true
            } else {
                s.partialStreak = 0
            }
        }
        tell(.sweepFinished(report))
        return report
    }

    /// Waits until no outbox pass runs, at most `limit`.
    private func waitForOutboxPass(atMost limit: Duration) async {
        let deadline = ContinuousClock.now + limit
        while outbox.state.withLock({ $0.passRunning }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The conversations phase: one fresh page of the list, validated as a whole, written through
    /// and reconciled as a read of the first page is (conversations in the page's slice that the
    /// server no longer lists leave the list; their messages go with a `conversationRemoved`
    /// change of the log, or with eviction).
    private func syncConversations(_ context: SweepContext) async -> Result<[Conversation], CometChatException> {
        var firstPage = ConversationQuery()
        firstPage.limit = settings.sync.conversationPageSize
        let query = firstPage
        let page: WirePage
        do {
            page = try await backend.conversations(query)
        } catch {
            return .failure(OfflineVault.exception(for: error))
        }
        let decoder = WireDecoder(limits: wireLimits)
        var items: [Conversation] = []
        do throws(WireError) {
            guard page.items.count <= wireLimits.maxListCount else {
                throw WireError(entity: "page", field: "items", problem: .tooMany(limit: wireLimits.maxListCount))
            }
            for value in page.items {
                let c = try decoder.conversation(value)
                ConversationRows.finish(c, me: context.me, blocked: [])
                items.append(c)
            }
        } catch {
            return .failure(CometChatException(.invalidServerResponse, error.description))
        }
        guard isCurrent(context) else { return .failure(Self.superseded) }
        let values = page.items
        let decoded = items
        let me = context.me
        let trusted = WireDecoder(limits: wireLimits, trusted: true)
        do {
            try await context.cache.writer.run { db in
                try db.transaction {
                    for (value, c) in zip(values, decoded) { try ConversationRows.upsert(value, c, in: db) }
                    guard let filter = CachedConversationFilter(query) else { return }
                    let hasMore = page.nextCursor != nil
                    if hasMore && decoded.isEmpty { return }
                    let end = hasMore ? ConversationRequest.farEdge(of: decoded) : nil
                    try ConversationRows.reconcile(filter, after: nil, through: end, keep: Set(decoded.compactMap(\.conversationId)),
                                                   me: me, decoder: trusted, in: db)
                }
            }
        } catch {
            return .failure(CometChatException(.offlineMessagePersistFailed, "The conversations could not be written to the cache."))
        }
        return .success(items)
    }

    private struct MessagePhase {
        var outcome: Result<SyncOutcome, CometChatException> = .success(.caughtUp)
        var messages: [BaseMessage] = []
        var newCount = 0
        var dropped = 0
        var established = false
        /// At least one page moved the sync point.
        var progressed = false
        /// Where each message is in `messages`: a message the log sends again (edited after it
        /// arrived) is reported once, as it now stands.
        var positions: [MessageID: Int] = [:]

        mutating func add(_ list: [BaseMessage]) {
            for m in list {
                if let at = positions[m.messageID] {
                    messages[at] = m
                } else {
                    positions[m.messageID] = messages.count
                    messages.append(m)
                }
            }
        }
    }

    /// The messages phase: the change log from the stored sync point, page by page, each page's
    /// rows and sync point in one transaction. A new cache's first sweep has nothing to catch up
    /// to: it stores the log's current end (`ChatBackend.latestSyncPoint()`) and replays nothing.
    /// A sync point the backend refuses is forgotten and the log replayed from nil (what the
    /// backend can still give), once per sweep.
    private func syncMessages(_ context: SweepContext) async -> MessagePhase {
        var phase = MessagePhase()
        let cache = context.cache
        guard let record = try? await cache.writer.run({ db in try SyncStateRows.load(in: db) }) else {
            phase.outcome = .failure(CometChatException(.offlineMessagePersistFailed, "The sync point could not be read from the cache."))
            return phase
        }
        let pageSize = settings.sync.pageSize
        let ceiling = settings.sync.changesPerPageCeiling
        let limits = wireLimits
        let me = context.me
        var token = record.token
        if token == nil && record.lastSyncAt == 0 {
            do {
                let point = try await backend.latestSyncPoint()
                guard isCurrent(context) else { return failed(phase, Self.superseded) }
                try await cache.writer.run { db in
                    try db.transaction {
                        try SyncStateRows.advance(token: point.nextToken, serverTime: point.serverTime, in: db)
                        try SyncStateRows.recordOutcome(.caughtUp, errorCode: nil, in: db)
                    }
                }
                state.withLock { $0.lastSyncAt = SyncStateRows.clampedTime(point.serverTime) }
                phase.established = true
                return phase
            } catch let error as BackendError {
                return await recordFailure(phase, OfflineVault.exception(for: error), cache: cache)
            } catch {
                return await recordFailure(phase, Self.syncPointRefused(error), cache: cache)
            }
        }
        var restarted = false
        var pages = 0
        // The next page is fetched and parsed while this one is written (another core parses and
        // encodes what the writer will write next); a page whose write fails drops what was
        // fetched after it, so the sync point still resumes at the last committed page.
        var pending = fetchPage(after: token, pageSize: pageSize, ceiling: ceiling, limits: limits)
        while true {
            guard isCurrent(context) else {
                pending.cancel()
                return failed(phase, Self.superseded)
            }
            let fetched = await pending.value
            let page: ChangeLogPage
            let changes: [SyncChange]
            switch fetched {
            case .failed(let error):
                if error.isSyncTokenRejected, !restarted, token != nil {
                    // Retrying the same token cannot help: forget it and take what the log still gives.
                    restarted = true
                    token = nil
                    _ = try? await cache.writer.run { db in try SyncStateRows.forgetToken(in: db) }
                    pending = fetchPage(after: nil, pageSize: pageSize, ceiling: ceiling, limits: limits)
                    continue
                }
                return await recordFailure(phase, OfflineVault.exception(for: error), cache: cache)
            case .tooLarge(let count):
                return await recordFailure(phase, CometChatException(.invalidServerResponse,
                                                                     "The change log page held \(count) changes (at most \(ceiling))."),
                                           cache: cache)
            case .page(let answer, let parsed, let dropped):
                page = answer
                changes = parsed
                phase.dropped += dropped
            }
            let more = page.hasMore && page.nextToken != token
            let outcome: SyncStateRecord.Outcome? = !more ? .caughtUp : (pages + 1 >= settings.sync.maxPagesPerSweep ? .partial : nil)
            if outcome == nil { pending = fetchPage(after: page.nextToken, pageSize: pageSize, ceiling: ceiling, limits: limits) }
            let inFlight = outbox.state.withLock { $0.inFlight }
            guard isCurrent(context) else {
                pending.cancel()
                return failed(phase, Self.superseded)
            }
            let applied: SyncPageRows.Applied
            do {
                applied = try await writer.commit(page: changes, me: me, cache: cache, limits: limits, serverTime: page.serverTime,
                                                    nextToken: page.nextToken, outcome: outcome, inFlight: inFlight)
            } catch let problem as SyncStateRows.Problem {
                pending.cancel()
                return await recordFailure(phase, Self.syncPointRefused(problem), cache: cache)
            } catch {
                pending.cancel()
                return await recordFailure(phase, CometChatException(.offlineMessagePersistFailed,
                                                                     "A page of the change log could not be written to the cache."),
                                           cache: cache)
            }
            pages += 1
            if page.nextToken != token { phase.progressed = true }
            token = page.nextToken
            state.withLock { $0.lastSyncAt = SyncStateRows.clampedTime(page.serverTime) }
            for row in applied.discarded { outbox.discardedBySync(row, cache: cache) }
            // Delivered to the message listeners, hydrated and evicted by the writer's subscribers.
            phase.newCount += applied.inserted.count
            phase.add(applied.inserted)
            phase.add(applied.updated)
            if let outcome {
                phase.outcome = .success(outcome == .partial ? .partial : .caughtUp)
                return phase
            }
        }
    }

    /// A page of the change log, fetched and parsed (validated, payloads encoded) off the writer.
    private enum FetchedPage: Sendable {
        case page(ChangeLogPage, [SyncChange], dropped: Int)
        case tooLarge(Int)
        case failed(BackendError)
    }

    private func fetchPage(after token: String?, pageSize: Int, ceiling: Int, limits: WireLimits) -> Task<FetchedPage, Never> {
        let backend = self.backend
        return Task.detached {
            let page: ChangeLogPage
            do throws(BackendError) {
                page = try await backend.changes(since: token, limit: pageSize)
            } catch {
                return .failed(error)
            }
            guard page.changes.count <= ceiling else { return .tooLarge(page.changes.count) }
            let (changes, dropped) = SyncPageRows.parse(page.changes, limits: limits)
            return .page(page, changes, dropped: dropped)
        }
    }

    private func failed(_ phase: MessagePhase, _ error: CometChatException) -> MessagePhase {
        var phase = phase
        phase.outcome = .failure(error)
        return phase
    }

    /// A failed messages phase: recorded (its code only) and reported; the sync point stays at
    /// the last committed page.
    private func recordFailure(_ phase: MessagePhase, _ error: CometChatException, cache: VaultCache) async -> MessagePhase {
        let code = error.errorCode
        _ = try? await cache.writer.run { db in try SyncStateRows.recordOutcome(.failed, errorCode: code, in: db) }
        return failed(phase, error)
    }

    static let superseded = CometChatException(.offlineDisabled, "The sync stopped: the user logged out or the cache changed.")

    static func syncPointRefused(_ error: any Error) -> CometChatException {
        CometChatException(.invalidServerResponse, "The server's sync point was refused: \(error)")
    }

    /// Tells the sync listeners and streams, in order, on the callback executor.
    private func tell(_ event: SyncEvent) {
        let listeners = listeners.live()
        let core = self
        settings.callbackExecutor.execute {
            for listener in listeners {
                switch event {
                case .conversationSyncStarted: listener.onConversationSyncStarted()
                case .conversationSyncCompleted(let list): listener.onConversationSyncCompleted(list)
                case .conversationSyncError(let error): listener.onConversationSyncError(error)
                case .messageSyncStarted: listener.onMessageSyncStarted()
                case .messageSyncCompleted(let messages, let outcome): listener.onMessageSyncCompleted(messages, outcome)
                case .messageSyncError(let error): listener.onMessageSyncError(error)
                case .sweepFinished: break
                }
            }
            core.yield(event)
        }
    }
}

extension Result {
    fileprivate var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
