import Foundation
import Synchronization
import VaultStore

/// The closures of a send made in this process (they do not survive a restart).
struct LiveSend: Sendable {
    let message: BaseMessage
    let onPending: @Sendable (BaseMessage) -> Void
    let onSent: @Sendable (BaseMessage) -> Void
    let onError: @Sendable (CometChatException?) -> Void
    /// Told "queued, not failed" (`ERROR_INTERNET_UNAVAILABLE`): once per send, and again only
    /// after a manual retry.
    var notified = false
}

/// A validated send waiting to be admitted into the outbox.
struct Admission: Sendable {
    let wire: JSONValue
    let kind: OutboxKind
    let live: LiveSend
    let composedAt: Date
}

/// A `retryMessage(_:onSuccess:onError:)` waiting for its attempt's outcome.
struct RetryWaiter: Sendable {
    let onSuccess: @Sendable () -> Void
    let onError: @Sendable (CometChatException) -> Void
}

/// The outbox: admission of new sends in compose order, passes that send what is pending (one at
/// a time, per conversation in order), failures and their reports, and the notices a kill must not
/// lose. The messages themselves are rows in the cache; this engine holds the live sends (their
/// closures), the claims of rows on the wire and the passes' state.
///
/// It holds what it works with (the backend, the settings, the cache writer that publishes sent
/// messages, the media cache for outgoing copies, the realtime link it reports a dead connection
/// to) and finds the user and their cache through the vault's session:
///
///     outbox.enqueueAdmission(admission)      // a send, validated by the vault's facade
///     outbox.requestPass(all: true)           // the reconnect flush
final class OutboxEngine: Sendable {
    struct State {
        var live: [String: LiveSend] = [:]
        /// Local ids on the wire now. Changed only inside writer-queue blocks, so a discard or an
        /// eviction (which also run there) sees a consistent picture.
        var inFlight: Set<String> = []
        var waiters: [String: [RetryWaiter]] = [:]
        /// Sends waiting for the admission queue, in call order.
        var admissions: [Admission] = []
        var admissionScheduled = false
        var passRunning = false
        var wantAll = false
        var wantTargets: Set<String> = []
        /// Local ids whose notices (`OutboxNotice`) this process tells itself, until removed: an
        /// attach meanwhile does not tell them as left by an earlier process.
        var noticesTold: Set<String> = []
        /// Those the listeners have heard, to remove together.
        var deliveredNotices: [String] = []
        var noticeRemovalScheduled = false
        /// Whether a cache is attached to a logged-in session: passes run only then.
        var attached = false
        /// Bumped by `outboxDetached` (a logout, a new login): a pass of the session before stops,
        /// and what its requests answer afterwards is no failure (the backend refuses a request
        /// made after its logout: that says nothing about the message).
        var session = 0
    }

    let state = Mutex(State())
    let listeners = ListenerRegistry<any OutboxListener>()
    /// The crash tests' seam (`OfflineVault.setOutboxNoticeHook`).
    let noticeHook = Mutex<(@Sendable (OutboxNotice) -> Void)?>(nil)
    /// New sends are admitted one at a time, in call order: that is compose order.
    let admission = DispatchQueue(label: "chatvault.outbox.admission")

    let backend: any ChatBackend
    let settings: VaultSettings
    let config: OfflineConfig
    let wireLimits: WireLimits
    private let writer: CacheWriter
    let media: MediaCache
    private let link: RealtimeLink
    private let uploads: UploadEngine
    private let session: VaultSession
    /// An attach found the connection already stable: flush and catch up as a reconnect does.
    private let alreadyStable = Mutex<@Sendable () -> Void>({})

    init(backend: any ChatBackend, settings: VaultSettings, config: OfflineConfig, wireLimits: WireLimits,
         writer: CacheWriter, media: MediaCache, link: RealtimeLink, uploads: UploadEngine, session: VaultSession) {
        self.backend = backend
        self.settings = settings
        self.config = config
        self.wireLimits = wireLimits
        self.writer = writer
        self.media = media
        self.link = link
        self.uploads = uploads
        self.session = session
    }

    /// Connects the outbox to its vault (once, at the vault's creation): what a reconnect does
    /// (flush, then catch up) when an attach finds the connection already stable.
    func bind(alreadyStable hook: @escaping @Sendable () -> Void) {
        alreadyStable.withLock { $0 = hook }
    }

    var openCache: VaultCache? { session.openCache }
    var userId: String? { session.userId }
}

/// Automatic attempts that get no answer before a queued message fails `.transient`.
let maximumNoAnswerAttempts = 5

/// How one attempt at sending a row ended.
enum AttemptOutcome: Sendable {
    case sent
    /// Failed (recorded and reported).
    case failed
    /// Discarded, evicted or already handled meanwhile.
    case gone
    /// Still pending: no answer, or the acknowledgement could not be stored. Later messages of
    /// the same conversation wait behind it.
    case waiting
    /// The server cannot be reached: the pass stops.
    case noConnection
    /// The session ended while the request was out: the row stays as it was, unreported, and
    /// the pass stops; the next login sends it.
    case sessionEnded
}

extension OutboxEngine {
    // MARK: - Admission

    /// Queues a validated send for admission. Sends waiting together are committed together: one
    /// `synchronous=FULL` commit (one disk sync) for the whole group, each send still admitted on
    /// its own terms (cap, overflow, byte budget) in call order.
    func enqueueAdmission(_ admission: Admission) {
        let schedule = state.withLock { s -> Bool in
            s.admissions.append(admission)
            defer { s.admissionScheduled = true }
            return !s.admissionScheduled
        }
        if schedule { self.admission.async { self.drainAdmissions() } }
    }

    /// Runs on the admission queue: takes every send waiting and admits them as one group.
    private func drainAdmissions() {
        let batch = state.withLock { s -> [Admission] in
            defer {
                s.admissions.removeAll()
                s.admissionScheduled = false
            }
            return s.admissions
        }
        guard !batch.isEmpty else { return }
        let executor = settings.callbackExecutor
        guard let cache = openCache, let me = userId else {
            let error = CometChatException(.offlineMessagePersistFailed, "The message was not queued: the offline cache is not available. Try again.")
            for admission in batch { executor.execute { admission.live.onError(error) } }
            return
        }
        let capacity = config.maxPendingMessages
        let policy = config.pendingQueueOverflowPolicy
        // A full queue that refuses newcomers refuses them before their files are copied: the count
        // now, plus the sends of this group ahead of each one.
        var expectedPending = policy == .rejectNewest ? ((try? cache.writer.sync { db in try OutboxRows.pendingCount(in: db) }) ?? 0) : 0
        // Media first (outside the transaction): a copy that fails is a permanent failure with no
        // pending stage.
        var rows: [(Admission, OutboxRow)] = []
        var uncopied: Set<String> = []
        for admission in batch {
            let message = admission.live.message
            guard let localId = message.localMessageId else { continue }
            var files: [OutgoingFile] = []
            let refusedWhenFull = policy == .rejectNewest && expectedPending >= capacity
            if !refusedWhenFull { expectedPending += 1 }
            if let media = message as? MediaMessage, !media.localFiles.isEmpty, refusedWhenFull {
                uncopied.insert(localId)
            } else if let media = message as? MediaMessage, !media.localFiles.isEmpty {
                do {
                    files = try OutgoingCopies.copy(media.localFiles, localId: localId, into: cache.directory, key: self.media.outgoingCopyKey(cache))
                } catch {
                    executor.execute {
                        message.messageStatus = .failed
                        message.failureReason = .permanent
                        admission.live.onError(error)
                    }
                    continue
                }
            }
            let scope: MessageScope = message.receiverType == .group ? .group(message.receiverUid) : .user(message.receiverUid)
            let createdAt = Int64((admission.composedAt.timeIntervalSince1970 * 1000).rounded())
            rows.append((admission, OutboxRow(localId: localId, seq: 0, conversationId: MessageRows.conversationId(for: scope, me: me),
                                              kind: admission.kind, state: .pending, failureReason: nil, attempts: 0, createdAt: createdAt,
                                              message: admission.wire, senderUid: me, files: files)))
        }
        guard !rows.isEmpty else { return }
        let budget: Int64? = config.maxMediaCacheSize > 0 ? config.maxMediaCacheSize : nil
        let candidates = rows.map(\.1)
        // Per send: its outcome (nil: a media send whose files were not copied because the queue
        // was full, and that now finds room: it is admitted again, copies first), and the files
        // its admission frees.
        let outcomes: [(EnqueueOutcome?, [String])]
        do {
            outcomes = try cache.writer.sync { db -> [(EnqueueOutcome?, [String])] in
                let results = try db.transaction { () throws -> [(EnqueueOutcome?, [String])] in
                    let inFlight = self.state.withLock { $0.inFlight }
                    var results: [(EnqueueOutcome?, [String])] = []
                    for candidate in candidates {
                        if uncopied.contains(candidate.localId) {
                            let full = try OutboxRows.pendingCount(in: db) >= capacity
                            let result: EnqueueOutcome? = full ? .refused(.queueFull) : nil
                            try OutboxNoticeRows.record(result, of: candidate, in: db)
                            results.append((result, []))
                            continue
                        }
                        var row = candidate
                        row.seq = try OutboxRows.nextSeq(in: db)
                        var remove: [String] = []
                        let result = try OutboxRows.enqueue(row, capacity: capacity, policy: policy, inFlight: inFlight,
                                                            mediaBudget: budget, removeFiles: &remove, in: db)
                        // A refusal or an eviction is told to the listeners even if the process
                        // dies before: its notice commits with the decision.
                        try OutboxNoticeRows.record(result, of: row, in: db)
                        results.append((result, remove))
                    }
                    return results
                }
                // Committed: the live sends are known before any pass (which needs this queue) can
                // claim their rows.
                self.state.withLock { s in
                    for ((admission, row), (result, _)) in zip(rows, results) {
                        switch result {
                        case .queued(let evicted)?:
                            s.live[row.localId] = admission.live
                            if let evicted { s.noticesTold.insert(evicted.localId) }
                        case .refused?:
                            s.noticesTold.insert(row.localId)
                        case nil:
                            break
                        }
                    }
                }
                return results
            }
        } catch {
            let failure = CometChatException(.offlineMessagePersistFailed, "The message was not queued: the offline cache refused the write. Try again.")
            for (admission, row) in rows {
                OutgoingCopies.remove(localId: row.localId, in: cache.directory)
                executor.execute { admission.live.onError(failure) }
            }
            return
        }
        let listeners = listeners.live()
        var queued: Set<String> = []
        for ((admission, row), (outcome, remove)) in zip(rows, outcomes) {
            OutgoingCopies.removeFiles(remove, in: cache.directory)
            let message = admission.live.message
            let live = admission.live
            switch outcome {
            case nil:
                enqueueAdmission(admission)
            case .refused(let reason)?:
                OutgoingCopies.remove(localId: row.localId, in: cache.directory)
                let error = Self.exception(for: reason)
                executor.execute {
                    message.messageStatus = .pending
                    live.onPending(message)
                    for listener in listeners { listener.onOutboxMessagePending(message) }
                    self.reachNotice(.refusal)
                    message.messageStatus = .failed
                    message.failureReason = reason
                    live.onError(error)
                    for listener in listeners { listener.onOutboxMessageFailed(message, reason) }
                    self.noticesDelivered([row.localId])
                }
            case .queued(let evicted)?:
                let composedAt = admission.composedAt
                executor.execute {
                    message.messageStatus = .pending
                    message.stampPending(senderUid: me, conversationId: row.conversationId, composedAt: composedAt)
                    live.onPending(message)
                    for listener in listeners { listener.onOutboxMessagePending(message) }
                }
                queued.insert(row.localId)
                if let evicted {
                    queued.remove(evicted.localId)
                    OutgoingCopies.remove(localId: evicted.localId, in: cache.directory)
                    report(evicted, failed: .queueOverflow, Self.exception(for: .queueOverflow), final: true, notice: .eviction)
                }
            }
        }
        if !queued.isEmpty { requestPass(targets: queued) }
    }

    /// The exception a refusal or a removal reports.
    static func exception(for reason: MessageFailureReason) -> CometChatException {
        switch reason {
        case .queueFull: return CometChatException(.queueFull, "The outbox is full; the message was not queued.")
        case .queueOverflow: return CometChatException(.queueOverflow, "The message was removed from a full outbox to admit a newer one.")
        case .byteOverflow: return CometChatException(.offlineMediaByteOverflow, "The media would exceed the media cache size; the message was not queued.")
        case .discarded: return CometChatException(.offlineMessageDiscarded, "The message was removed before it could be sent.")
        case .transient: return CometChatException(.internetUnavailable, "The message could not be sent for now.")
        case .permanent: return CometChatException(.invalidServerResponse, "The message could not be sent.")
        }
    }

    static let queuedNotice = CometChatException(.internetUnavailable, "No connection: the message is queued and will be sent on reconnect.")
    static let unsentNotice = CometChatException(.internetUnavailable, "No connection: the message was not sent and is kept as failed until retried.")

    // MARK: - Passes

    /// Asks for a pass over the outbox: `all` pending messages (the reconnect flush), or the
    /// `targets` and whatever precedes them in their conversations. Passes run one at a time,
    /// and only while a cache is attached (what is asked meanwhile waits for the attach).
    func requestPass(all: Bool = false, targets: Set<String> = []) {
        let start = state.withLock { s -> Bool in
            if all { s.wantAll = true }
            s.wantTargets.formUnion(targets)
            guard !s.passRunning, s.attached else { return false }
            s.passRunning = true
            return true
        }
        guard start else { return }
        Task.detached { await self.runPasses() }
    }

    private func runPasses() async {
        while let (all, targets) = state.withLock({ s -> (Bool, Set<String>)? in
            guard s.attached, s.wantAll || !s.wantTargets.isEmpty else {
                s.passRunning = false
                return nil
            }
            defer {
                s.wantAll = false
                s.wantTargets = []
            }
            return (s.wantAll, s.wantTargets)
        }) {
            await pass(all: all, targets: targets)
        }
    }

    /// One pass, in compose order. Per conversation, a message that is still waiting holds back
    /// the ones after it; a message that failed does not.
    private func pass(all: Bool, targets: Set<String>) async {
        guard let session = currentOutboxSession(), let cache = openCache, let me = userId else { return }
        // The flush of the whole outbox waits for a connection that has held; the next one asks again.
        let flushAll = all && link.isStable
        if !flushAll && targets.isEmpty { return }
        let rows: [OutboxRow]
        do {
            rows = try await cache.writer.run { db in try OutboxRows.rows(pendingOnly: true, in: db) }
        } catch {
            return
        }
        let selected: [OutboxRow]
        if flushAll {
            selected = rows
        } else {
            var lastTarget: [String: Int64] = [:]
            for row in rows where targets.contains(row.localId) { lastTarget[row.conversationId] = max(lastTarget[row.conversationId] ?? 0, row.seq) }
            selected = rows.filter { row in lastTarget[row.conversationId].map { row.seq <= $0 } ?? false }
        }
        var held = Set<String>()
        for (index, row) in selected.enumerated() {
            if held.contains(row.conversationId) {
                noteWaiting(row.localId)
                continue
            }
            guard currentOutboxSession() == session else { return }
            switch await attempt(row, cache: cache, me: me, session: session) {
            case .sent, .failed, .gone:
                continue
            case .sessionEnded:
                return
            case .waiting:
                held.insert(row.conversationId)
            case .noConnection:
                for rest in selected[index...] { await noConnection(rest, cache: cache) }
                link.suspect()
                return
            }
        }
    }

    /// The session passes run in, nil between a logout (or a login's start) and the cache's attach.
    private func currentOutboxSession() -> Int? {
        state.withLock { $0.attached ? $0.session : nil }
    }

    /// Sends one row: uploads its files, sends it, stores the acknowledgement.
    private func attempt(_ listed: OutboxRow, cache: VaultCache, me: String, session: Int) async -> AttemptOutcome {
        let localId = listed.localId
        // Claimed on the writer queue: a discard or an eviction that ran first wins.
        let claimed: OutboxRow?
        do {
            claimed = try await cache.writer.run { db -> OutboxRow? in
                guard let fresh = try OutboxRows.row(localId, in: db), fresh.state == .pending else { return nil }
                self.state.withLock { _ = $0.inFlight.insert(localId) }
                return fresh
            }
        } catch {
            return .waiting
        }
        guard var row = claimed else { return .gone }
        defer { release(localId) }
        if let live = state.withLock({ $0.live[localId] }) {
            settings.callbackExecutor.execute { live.message.messageStatus = .sending }
        }
        for index in row.files.indices where row.files[index].attachment == nil {
            let file = row.files[index]
            // Never the ciphertext: an encrypted copy is uploaded from its decrypted view.
            guard let plaintext = media.plaintextCopyPath(file.relativePath, root: cache.directory.path) else {
                return await fail(row, .permanent, OutgoingCopies.failure("the cache's copy can no longer be read"), cache: cache)
            }
            let answer: JSONValue
            do {
                answer = try await backend.uploadMedia(path: plaintext, name: file.name, mimeType: file.mimeType)
            } catch {
                return await settle(row, error, cache: cache, session: session)
            }
            do {
                row.files[index].attachment = try Acknowledgements.attachment(answer, limits: wireLimits)
            } catch {
                return await fail(row, .permanent, error, cache: cache)
            }
            let progress = row
            _ = try? await cache.writer.run { db in try OutboxRows.updateFiles(progress, in: db) }
        }
        let ack: JSONValue
        do {
            ack = try await backend.send(row.messageToSend, localMessageId: localId)
        } catch {
            return await settle(row, error, cache: cache, session: session)
        }
        let message: BaseMessage
        do {
            message = try Acknowledgements.message(ack, kind: row.kind, limits: wireLimits)
        } catch {
            return await fail(row, .permanent, error, cache: cache)
        }
        message.localMessageId = localId
        MessageWriteBatch.resolveStatus(message, me: me)
        message.source = .realtime
        do {
            _ = try await cache.writer.run { db in try OutboxRows.complete(localId, wire: ack, message: message, me: me, in: db) }
        } catch {
            // The server has it; the next attempt gets the same message back (idempotent).
            noteWaiting(localId)
            return .waiting
        }
        // `.auto` keeps the bytes as the sent attachments' cached media; the copies go either way.
        media.adoptOutgoingCopies(row, message: message, cache: cache)
        OutgoingCopies.remove(localId: localId, in: cache.directory)
        media.removeCopyViews(folder: "outgoing/\(localId)")
        uploads.sent(row.messageToSend, messageId: message.id)
        writer.stored([message])
        reportSent(row, message)
        return .sent
    }

    /// Takes a row off the wire. Only the claim must run on the writer queue (so a discard or an
    /// eviction cannot slip between its check and the claim); by the time of the release the
    /// attempt's outcome is committed, so dropping the claim anywhere is consistent.
    private func release(_ localId: String) {
        state.withLock { _ = $0.inFlight.remove(localId) }
    }

    /// What a backend error means for a row: nothing, once the session it was sent in has ended.
    private func settle(_ row: OutboxRow, _ error: BackendError, cache: VaultCache, session: Int) async -> AttemptOutcome {
        guard currentOutboxSession() == session else { return .sessionEnded }
        switch error {
        case .unreachable:
            return .noConnection
        case .timedOut:
            guard config.autoSendPendingOnReconnect else { return await fail(row, .transient, Self.unsentNotice, cache: cache) }
            let now = Int64(settings.clock().timeIntervalSince1970 * 1000)
            let attempts = (try? await cache.writer.run { db in try OutboxRows.countNoAnswer(row.localId, at: now, in: db) }) ?? 0
            if attempts >= maximumNoAnswerAttempts {
                return await fail(row, .transient, CometChatException(.requestTimedOut, "The server did not answer after \(maximumNoAnswerAttempts) attempts."), cache: cache)
            }
            noteWaiting(row.localId)
            link.suspect()
            return .waiting
        case .server(401, _, _):
            // The session is not authorised (its token expired or was revoked): not the message's
            // fault. It waits, queued, for a session that is (never failed, never dropped).
            return .noConnection
        case .server(let status, let code, _):
            let reason: MessageFailureReason = error.isTransient ? .transient : .permanent
            return await fail(row, reason, CometChatException(errorCode: OfflineVault.safeCode(code), errorDescription: "The server refused the message (status \(status))."), cache: cache)
        }
    }

    /// Records a failure and reports it; a row removed meanwhile (a clear) reports `.discarded`.
    private func fail(_ row: OutboxRow, _ reason: MessageFailureReason, _ error: CometChatException, cache: VaultCache) async -> AttemptOutcome {
        let now = Int64(settings.clock().timeIntervalSince1970 * 1000)
        let recorded: Bool
        do {
            recorded = try await cache.writer.run { db -> Bool in
                try OutboxRows.markFailed(row.localId, reason, at: now, in: db)
                return db.changes > 0
            }
        } catch {
            // Still pending in the cache: it is tried again later rather than reported failed.
            noteWaiting(row.localId)
            return .waiting
        }
        if recorded {
            var failed = row
            failed.state = .failed
            failed.failureReason = reason
            report(failed, failed: reason, error, final: false)
        } else {
            report(row, failed: .discarded, Self.exception(for: .discarded), final: true)
        }
        return .failed
    }

    /// No connection for a row of a stopped pass: queued (told once), or with auto-send off, a
    /// send made in this process fails `.transient` at once.
    private func noConnection(_ row: OutboxRow, cache: VaultCache) async {
        if config.autoSendPendingOnReconnect {
            noteWaiting(row.localId)
            return
        }
        let fresh = state.withLock { s -> Bool in
            (s.live[row.localId].map { !$0.notified } ?? false) || s.waiters[row.localId] != nil
        }
        if fresh { _ = await fail(row, .transient, Self.unsentNotice, cache: cache) }
    }

    /// A waiting message: its live send hears "queued, not failed" once, and a manual retry
    /// waiting for this attempt hears the same.
    func noteWaiting(_ localId: String) {
        let (live, waiters) = state.withLock { s -> (LiveSend?, [RetryWaiter]) in
            let waiters = s.waiters.removeValue(forKey: localId) ?? []
            guard let live = s.live[localId], !live.notified else { return (nil, waiters) }
            s.live[localId]?.notified = true
            return (live, waiters)
        }
        guard live != nil || !waiters.isEmpty else { return }
        settings.callbackExecutor.execute {
            live?.message.messageStatus = .pending
            live?.onError(Self.queuedNotice)
            for waiter in waiters { waiter.onError(Self.queuedNotice) }
        }
    }

    // MARK: - Reports

    /// Delivers a failure: the live send's `onError`, the listeners' `onOutboxMessageFailed`, a
    /// waiting retry's `onError`. `final` forgets the live send (it has no row any more). A
    /// failure with a durable `notice` removes it once told.
    func report(_ row: OutboxRow, failed reason: MessageFailureReason, _ error: CometChatException, final: Bool,
                notice: OutboxNotice? = nil) {
        let (live, waiters) = state.withLock { s -> (LiveSend?, [RetryWaiter]) in
            let live = final ? s.live.removeValue(forKey: row.localId) : s.live[row.localId]
            return (live, s.waiters.removeValue(forKey: row.localId) ?? [])
        }
        let message = live?.message ?? pendingMessage(row, status: .failed)
        let listeners = listeners.live()
        settings.callbackExecutor.execute {
            if let notice { self.reachNotice(notice) }
            message?.messageStatus = .failed
            message?.failureReason = reason
            live?.onError(error)
            if let message { for listener in listeners { listener.onOutboxMessageFailed(message, reason) } }
            for waiter in waiters { waiter.onError(error) }
            if notice != nil { self.noticesDelivered([row.localId]) }
        }
    }

    private func reportSent(_ row: OutboxRow, _ message: BaseMessage) {
        let (live, waiters) = state.withLock { s in
            (s.live.removeValue(forKey: row.localId), s.waiters.removeValue(forKey: row.localId) ?? [])
        }
        let listeners = listeners.live()
        settings.callbackExecutor.execute {
            if let original = live?.message { original.adoptAcknowledgement(message) }
            live?.onSent(message)
            for listener in listeners { listener.onOutboxMessageSent(message) }
            for waiter in waiters { waiter.onSuccess() }
        }
    }

    /// An outbox row as the message the app sent (for listeners, `getPendingMessages`, and sends
    /// resumed after a restart): the composer's fields, the local copies as attachments with
    /// `localPath`, the status given.
    func pendingMessage(_ row: OutboxRow, status: MessageStatus) -> BaseMessage? {
        guard case .object(var fields) = row.message else { return nil }
        let directory = session.directory?.path ?? ""
        // Where an app can open each copy (its view when encrypted).
        let paths = row.files.map { media.plaintextCopyPath($0.relativePath, root: directory) ?? directory + "/" + $0.relativePath }
        fields["id"] = .int(0)
        fields["conversationId"] = .string(row.conversationId)
        fields["senderUid"] = .string(row.senderUid)
        fields["sentAt"] = .int(row.createdAt / 1000)
        fields["localMessageId"] = .string(row.localId)
        if !row.files.isEmpty {
            var data = fields["data"]?.objectValue ?? [:]
            let local = zip(row.files, paths).map { file, path -> JSONValue in
                file.attachment ?? .object(["name": .string(file.name), "mimeType": .string(file.mimeType), "size": .int(file.size),
                                            "extension": .string((file.name as NSString).pathExtension),
                                            "url": .string(URL(fileURLWithPath: path).absoluteString)])
            }
            data["attachments"] = .array((data["attachments"]?.arrayValue ?? []) + local)
            fields["data"] = .object(data)
        }
        guard let message = try? WireDecoder(limits: wireLimits, trusted: true).message(.object(fields)) else { return nil }
        if let media = message as? MediaMessage, !row.files.isEmpty {
            let offset = media.attachments.count - row.files.count
            for i in row.files.indices where offset + i >= 0 {
                media.attachments[offset + i].localPath = paths[i]
            }
            media.files = paths.map { URL(fileURLWithPath: $0) }
        }
        message.messageStatus = status
        message.failureReason = status == .failed ? row.failureReason : nil
        return message
    }
}

extension BaseMessage {
    /// The fields a queued message gets when it is committed.
    func stampPending(senderUid: String, conversationId: String, composedAt: Date) {
        self.senderUid = senderUid
        self.conversationId = conversationId
        if sentAt == 0 { sentAt = Int(composedAt.timeIntervalSince1970) }
    }

    /// The server's fields, copied onto the object the app sent once it is acknowledged.
    func adoptAcknowledgement(_ ack: BaseMessage) {
        id = ack.id
        muid = ack.muid
        sentAt = ack.sentAt
        updatedAt = ack.updatedAt
        conversationId = ack.conversationId
        sender = ack.sender
        senderUid = ack.senderUid
        messageStatus = ack.messageStatus
        failureReason = nil
        if let media = self as? MediaMessage, let acked = ack as? MediaMessage { media.attachments = acked.attachments }
    }
}

extension OutboxEngine {
    // MARK: - Lifecycle hooks

    /// A cache became active: tell the listeners what an earlier process could not (its
    /// `OutboxNotice`s), forget copies nobody needs, tell live sends whose rows a reset lost, and
    /// flush if the connection already held.
    func attached(_ cache: VaultCache) {
        state.withLock { $0.attached = true }
        // What was asked before the attach (a send made as the login returned) goes now.
        requestPass()
        admission.async {
            if let left = try? cache.writer.sync({ db in try OutboxNoticeRows.all(in: db) }) {
                self.deliverLeftNotices(left.rows, undeliverable: left.undeliverable)
            }
            guard let rows = try? cache.writer.sync({ db in try OutboxRows.rows(pendingOnly: false, in: db) }) else { return }
            let kept = Set(rows.map(\.localId))
            OutgoingCopies.removeOrphans(keeping: kept, in: cache.directory)
            let lost = self.state.withLock { s in s.live.filter { !kept.contains($0.key) } }
            for (localId, live) in lost {
                let row = OutboxRow(localId: localId, seq: 0, conversationId: live.message.conversationId, kind: OutboxKind(of: live.message) ?? .text,
                                    state: .pending, failureReason: nil, attempts: 0, createdAt: 0, message: .null, senderUid: "", files: [])
                self.report(row, failed: .discarded, Self.exception(for: .discarded), final: true)
            }
            if self.link.isStable { self.alreadyStable.withLock { $0 }() }
        }
    }

    /// Logout: the closures of sends in flight are forgotten (their messages stay queued in the
    /// user's cache and go at that user's next login), and a running pass stops: a request it
    /// makes or gets answered after this is not the message's failure.
    func detached() {
        state.withLock { s in
            s.live.removeAll()
            s.waiters.removeAll()
            s.attached = false
            s.session += 1
        }
    }

    /// `clearOfflineCache`: the unsent messages that were wiped fail `.discarded`. Messages on the
    /// wire at that moment report their own outcome.
    func cleared(_ rows: [OutboxRow], inFlight: Set<String>) {
        for row in rows where !inFlight.contains(row.localId) {
            report(row, failed: .discarded, Self.exception(for: .discarded), final: true)
        }
    }

    /// A queued message the catch-up log made pointless (its server copy arrived while it
    /// waited; the row is gone): its copies go and it is reported `.discarded`.
    func discardedBySync(_ row: OutboxRow, cache: VaultCache) {
        OutgoingCopies.remove(localId: row.localId, in: cache.directory)
        report(row, failed: .discarded, Self.exception(for: .discarded), final: true)
    }
}
