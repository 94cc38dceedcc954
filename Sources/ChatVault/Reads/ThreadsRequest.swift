import Foundation
import Synchronization
import VaultStore

/// A paged read of message threads (`ThreadsRequest`): parent messages with replies, most recent
/// reply first, in one conversation or across all of them.
///
///     let request = ThreadsRequest.ThreadsRequestBuilder(vault: vault)
///         .set(guid: "team").set(limit: 20)
///         .build()
///     request.fetchNext(onCachedThreads: { cached in render(cached) },
///                       onServerThreads: { server in reconcile(server) },   // keyed by parentMessageId
///                       onError: { error in showOffline(error) })
///
/// The cached page is derived from the cached messages: the parents (in the scope) that have
/// cached replies, ordered by their last cached reply, with the reply count (the larger of the
/// server's last count and the replies cached) and that last reply. With `set(participatedByMe:)`
/// (the default), only threads the user started or replied to, as far as the device knows: the
/// parent or a cached reply is theirs, or the server once listed the thread under
/// `participatedByMe`. Every filter is locally computable.
///
/// The server page is written through: each parent (with its reply count) and its last reply are
/// upserted into the messages. A thread the server no longer lists within the page's slice loses
/// its cached replies in that slice (its parent stays: it is a message of the conversation).
///
/// Run one fetch at a time: a second one while the first is in flight fails with
/// `ERROR_REQUEST_IN_PROGRESS`. Paging behaves as on `ConversationRequest`.
public final class ThreadsRequest: Sendable {
    /// Builds a `ThreadsRequest` (`ThreadsRequest.ThreadsRequestBuilder()`).
    public final class ThreadsRequestBuilder {
        private var query = ThreadQuery()
        private let vault: OfflineVault?

        /// - Parameter vault: the engine to read through; nil means `CometChat.offlineVault`.
        public init(vault: OfflineVault? = nil) {
            self.vault = vault
        }

        /// Threads per page, clamped to 1…100.
        @discardableResult public func set(limit: Int) -> Self { query.limit = min(max(limit, 1), ThreadsRequest.maxLimit); return self }
        /// Threads of the conversation with this user (exclusive with `set(guid:)`: the last call wins).
        @discardableResult public func set(uid: String) -> Self { query.scope = .user(uid); return self }
        /// Threads of this group (exclusive with `set(uid:)`: the last call wins).
        @discardableResult public func set(guid: String) -> Self { query.scope = .group(guid); return self }
        /// Only threads the user started or replied to (default true).
        @discardableResult public func set(participatedByMe: Bool) -> Self { query.participatedByMe = participatedByMe; return self }

        /// The request, reading through the builder's vault (or `CometChat.offlineVault`).
        public func build() -> ThreadsRequest {
            ThreadsRequest(vault: vault ?? CometChat.offlineVault, query: query)
        }
    }

    /// The largest page.
    public static let maxLimit = 100

    /// The settings this request was built with.
    public let query: ThreadQuery
    private let vault: OfflineVault?
    private let gate = InFlightGate()
    /// Where the next fetch continues.
    private let paging = Mutex(SplitPaging<ThreadCursor>())

    init(vault: OfflineVault?, query: ThreadQuery) {
        self.vault = vault
        self.query = query
    }

    /// Whether the server may have more threads after the pages fetched so far.
    ///
    ///     if request.hasMore() { request.fetchNext(onSuccess: append, onError: { _ in }) }
    public func hasMore() -> Bool {
        !paging.withLock { $0.serverDone }
    }

    // MARK: Two-phase overload

    /// The next page: cached first (even when empty), then the server's copy of the same slice,
    /// written through before it is delivered; offline, `onError` with `ERROR_INTERNET_UNAVAILABLE`
    /// follows the cached page.
    ///
    ///     request.fetchNext(onCachedThreads: { render($0) }, onServerThreads: { reconcile($0) },
    ///                       onError: { print($0?.errorCode ?? "") })
    public func fetchNext(onCachedThreads: @escaping @Sendable ([MessageThread]) -> Void,
                          onServerThreads: @escaping @Sendable ([MessageThread]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        start(cachedPhase: true, onCached: onCachedThreads, onServer: onServerThreads, onError: onError)
    }

    // MARK: Classic overload (never a cached result)

    /// The server's next page only, as before offline support. As in the SDK, the error is never nil.
    ///
    ///     request.fetchNext(onSuccess: { threads in show(threads) }, onError: { error in print(error.errorCode) })
    public func fetchNext(onSuccess: @escaping @Sendable ([MessageThread]) -> Void, onError: @escaping @Sendable (CometChatException) -> Void) {
        start(cachedPhase: false, onCached: nil, onServer: onSuccess, onError: { error in
            onError(error ?? CometChatException(errorCode: "ERROR_UNKNOWN", errorDescription: "the read failed"))
        })
    }

    // MARK: async/await and AsyncSequence

    /// Both phases of `fetchNext` as one value.
    ///
    ///     let result = await request.fetchNext()
    ///     render(result.cached ?? [])
    public func fetchNext() async -> TwoPhaseResult<MessageThread> {
        guard let vault else { return TwoPhaseResult(cached: nil, server: .failure(ConversationRequest.noVault)) }
        return await vault.reads.collect { emit in await self.run(vault: vault, cachedPhase: true, emit: emit) }
    }

    /// The phases of `fetchNext` as they arrive; offline, the stream ends with the error.
    ///
    ///     for try await phase in request.nextPhases() { handle(phase) }
    public func nextPhases() -> AsyncThrowingStream<ReadPhase<MessageThread>, any Error> {
        guard let vault else { return AsyncThrowingStream { $0.finish(throwing: ConversationRequest.noVault) } }
        return vault.reads.phaseStream { emit in await self.run(vault: vault, cachedPhase: true, emit: emit) }
    }

    // MARK: Core

    private func start(cachedPhase: Bool, onCached: (@Sendable ([MessageThread]) -> Void)?,
                       onServer: @escaping @Sendable ([MessageThread]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault else { return CallbackExecutor.main.execute { onError(ConversationRequest.noVault) } }
        let emit = vault.reads.deliver(onCached: onCached, onServer: onServer, onError: onError)
        Task { await self.run(vault: vault, cachedPhase: cachedPhase, emit: emit) }
    }

    private func run(vault: OfflineVault, cachedPhase: Bool, emit: @escaping @Sendable (ReadEvent<MessageThread>) -> Void) async {
        let at = paging.withLock { $0 }
        var q = query
        q.cursor = at.serverToken
        let pageQuery = q
        let backend = vault.backend
        let serverDone = at.serverDone
        let cacheStart = at.cacheEdge
        let serverStart = at.serverEdge
        let more = Mutex(false)

        var plan = TwoPhasePlan<MessageThread>(
            cached: { db, context in
                try ThreadRows.page(ThreadRows.Filter(pageQuery, me: context.me), after: cacheStart, limit: pageQuery.limit,
                                    decoder: context.trustedDecoder, in: db)
            },
            server: { () async throws(BackendError) -> WirePage in
                if serverDone { return WirePage(items: [], nextCursor: nil) }
                let page = try await backend.threads(pageQuery)
                more.withLock { $0 = page.nextCursor != nil }
                return page
            },
            decode: { value, context throws(WireError) -> MessageThread in
                let thread = try context.decoder.thread(value)
                MessageWriteBatch.resolveStatus(thread.parentMessage, me: context.me)
                if let reply = thread.lastReply { MessageWriteBatch.resolveStatus(reply, me: context.me) }
                return thread
            },
            writeThrough: { db, wire, items, context in
                if serverDone { return }
                for (value, thread) in zip(wire, items) { try ThreadRows.upsert(value, thread, me: context.me, in: db) }
                if pageQuery.participatedByMe { try ThreadRows.recordParticipation(items.map(\.parentMessageId), in: db) }
            })
        plan.reconcile = { db, items, context in
            if serverDone { return [] }
            let hasMore = more.withLock { $0 }
            // An empty page that says more follow covers no slice at all.
            if hasMore && items.isEmpty { return [] }
            let end = hasMore ? Self.farEdge(of: items) : nil
            return try ThreadRows.reconcile(ThreadRows.Filter(pageQuery, me: context.me), after: serverStart, through: end,
                                            keep: Set(items.map(\.parentMessageId)), in: db)
        }
        let cachedSeen = Mutex<[MessageThread]>([])
        plan.afterCached = { items in cachedSeen.withLock { $0 = items } }
        plan.storedMessages = { threads in threads.flatMap { [$0.parentMessage] + ($0.lastReply.map { [$0] } ?? []) } }
        plan.afterServer = { wire, items in
            guard !serverDone else { return }
            self.paging.withLock { $0.serverPage(nextToken: wire.nextCursor, edge: Self.farEdge(of: items), start: serverStart) }
        }
        await vault.reads.runTwoPhase(plan, gate: gate, busy: .fail, cachedPhase: cachedPhase) { event in
            if case .failed(let error) = event, error.errorCode == OfflineErrorCode.internetUnavailable.rawValue,
               let edge = Self.farEdge(of: cachedSeen.withLock({ $0 })) {
                self.paging.withLock { $0.cachedPageOffline(edge: edge) }
            }
            emit(event)
        }
    }

    /// The last thread of a page in list order.
    static func farEdge(of items: [MessageThread]) -> ThreadCursor? {
        ThreadCursor.last(of: items.map(ThreadCursor.init))
    }
}

// MARK: - Threads in the cache

/// A position in a thread list (most recent last reply first): strictly after the thread whose
/// last reply is this message.
struct ThreadCursor: ListCursor, Hashable {
    var lastReplyAt: Int
    var lastReplyId: Int

    init(lastReplyAt: Int, lastReplyId: Int) {
        self.lastReplyAt = lastReplyAt
        self.lastReplyId = lastReplyId
    }

    init(_ thread: MessageThread) {
        if let reply = thread.lastReply {
            self.init(lastReplyAt: reply.sentAt, lastReplyId: reply.id)
        } else {
            self.init(lastReplyAt: Int(Int64(clampingWire: thread.updatedAt)), lastReplyId: 0)
        }
    }

    func isAfter(_ other: ThreadCursor) -> Bool {
        (lastReplyAt, lastReplyId) < (other.lastReplyAt, other.lastReplyId)
    }
}

/// Threads derived from the `messages` table: a parent is a cached message that cached replies
/// point to.
enum ThreadRows {
    /// What the cache can evaluate of a `ThreadQuery`: all of it.
    struct Filter: Sendable {
        var conversationId: String?
        /// Only threads this user started or replied to.
        var participant: String?

        init(_ q: ThreadQuery, me: String) {
            conversationId = q.scope.map { MessageRows.conversationId(for: $0, me: me) }
            participant = q.participatedByMe ? me : nil
        }
    }

    /// The thread rows matching `filter` strictly after `start` and up to `end` included: the
    /// parent's columns (`MessageRows.columns`), then the cached reply count, the last cached
    /// reply's time and id, and the conversation. Most recent last reply first.
    ///
    /// Every lookup goes through `messages_by_conversation` (conversation, parent, time): replies
    /// are grouped by (conversation, parent) from that index alone, and each group's last reply and
    /// the participation check are found in it by prefix, never by scanning the table.
    /// The indices of what `select` reads after the parent's columns (`t.n, r.sent_at,
    /// r.server_id, t.cid`).
    private enum ThreadColumn {
        static let count = MessageRow.at.next
        static let lastReplyAt = MessageRow.at.next + 1
        static let lastReplyId = MessageRow.at.next + 2
        static let conversationId = MessageRow.at.next + 3
    }

    private static func select(_ filter: Filter, after start: ThreadCursor?, through end: ThreadCursor?,
                               limit: Int?) -> (String, [DatabaseValue]) {
        var inner = "parent_id > 0"
        var args: [DatabaseValue] = []
        if let id = filter.conversationId {
            inner = "conversation_id = ? AND " + inner
            args.append(.text(id))
        }
        var outer: [String] = []
        if let me = filter.participant {
            outer.append("""
                (p.sender_id = ? OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = t.cid AND m.parent_id = t.pid \
                AND m.sender_id = ? AND m.server_id IS NOT NULL) OR EXISTS (SELECT 1 FROM kv WHERE kv.key = ? || t.pid))
                """)
            args += [.text(me), .text(me), .text(participationPrefix)]
        }
        if let start {
            outer.append("(r.sent_at < ? OR (r.sent_at = ? AND r.server_id < ?))")
            args += [.int(Int64(start.lastReplyAt)), .int(Int64(start.lastReplyAt)), .int(Int64(start.lastReplyId))]
        }
        if let end {
            outer.append("(r.sent_at > ? OR (r.sent_at = ? AND r.server_id >= ?))")
            args += [.int(Int64(end.lastReplyAt)), .int(Int64(end.lastReplyAt)), .int(Int64(end.lastReplyId))]
        }
        // The parent's columns as a cached read selects them (`MessageRow.read`), then `ThreadColumn`.
        let parentColumns = MessageRow.read.map { "p." + $0.rawValue }
        let sql = """
            SELECT \(parentColumns.joined(separator: ", ")), t.n, r.sent_at, r.server_id, t.cid
            FROM (SELECT conversation_id AS cid, parent_id AS pid, count(*) AS n FROM messages WHERE \(inner)
                  GROUP BY conversation_id, parent_id) t
            JOIN messages r ON r.row_id = (
                SELECT r2.row_id FROM messages r2 WHERE r2.conversation_id = t.cid AND r2.parent_id = t.pid
                    AND r2.server_id IS NOT NULL ORDER BY r2.sent_at DESC, r2.server_id DESC LIMIT 1)
            JOIN messages p ON p.server_id = t.pid AND p.conversation_id = t.cid
            \(outer.isEmpty ? "" : "WHERE " + outer.joined(separator: " AND "))
            ORDER BY r.sent_at DESC, r.server_id DESC\(limit.map { " LIMIT \($0)" } ?? "")
            """
        return (sql, args)
    }

    /// One cached page: up to `limit` threads strictly after `cursor`.
    static func page(_ filter: Filter, after cursor: ThreadCursor?, limit: Int, decoder: WireDecoder,
                     in db: Database) throws -> [MessageThread] {
        guard limit > 0 else { return [] }
        let (sql, args) = select(filter, after: cursor, through: nil, limit: limit)
        let stmt = try db.prepare(sql)
        try stmt.bind(args)
        var rows: [(parent: BaseMessage, count: Int, lastAt: Int, lastId: Int)] = []
        while try stmt.step() {
            rows.append((try MessageRows.decode(stmt, decoder), stmt.int(ThreadColumn.count), stmt.int(ThreadColumn.lastReplyAt),
                         stmt.int(ThreadColumn.lastReplyId)))
        }
        return try rows.map { row in
            let reply = try MessageRows.message(id: row.lastId, decoder: decoder, in: db)
            return MessageThread(parentMessage: row.parent, replyCount: max(row.parent.replyCount, row.count), lastReply: reply,
                                 isSubscribed: true, unreadReplyCount: nil, updatedAt: Double(row.lastAt))
        }
    }

    /// `kv` keys (prefix + parent id) of threads the server listed as ones the user participated
    /// in: a reply of theirs that is not the last one is not cached, and participation never ends.
    static let participationPrefix = "threads.participated."

    /// Records that the server listed these threads under `participatedByMe`, and forgets the
    /// records of parents no longer cached.
    static func recordParticipation(_ parents: [Int], in db: Database) throws {
        for parent in parents {
            try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, NULL)", .text(participationPrefix + String(parent)))
        }
        try db.run("""
            DELETE FROM kv WHERE substr(key, 1, ?) = ? AND CAST(substr(key, ?) AS INTEGER) NOT IN (
                SELECT server_id FROM messages WHERE server_id IS NOT NULL)
            """, .int(Int64(participationPrefix.utf8.count)), .text(participationPrefix), .int(Int64(participationPrefix.utf8.count + 1)))
    }

    /// Writes one server thread through: its parent, carrying the thread's reply count, and its
    /// last reply.
    static func upsert(_ wire: JSONValue, _ thread: MessageThread, me: String, in db: Database) throws {
        if case .object(var parent)? = wire["parentMessage"] {
            parent["replyCount"] = .int(Int64(thread.replyCount))
            try MessageWriteBatch.storeServerCopy(.object(parent), thread.parentMessage, me: me, source: .realtime, in: db)
        }
        if let reply = thread.lastReply, let replyWire = wire["lastReply"] {
            try MessageWriteBatch.storeServerCopy(replyWire, reply, me: me, source: .realtime, in: db)
        }
    }

    /// A cached thread within the slice (strictly after `start`, up to `end`; nil: to the end)
    /// that the server's page does not hold loses its cached replies in that slice: the server
    /// says no reply of it is there. Its parent stays. Returns the ids of the replies removed.
    static func reconcile(_ filter: Filter, after start: ThreadCursor?, through end: ThreadCursor?, keep: Set<Int>,
                          in db: Database) throws -> [MessageID] {
        let (sql, args) = select(filter, after: start, through: end, limit: nil)
        let stmt = try db.prepare(sql)
        try stmt.bind(args)
        var gone: [(parent: Int, conversation: String)] = []
        while try stmt.step() {
            let parent = stmt.int(MessageRow.at.serverId)
            if !keep.contains(parent) { gone.append((parent, stmt.text(ThreadColumn.conversationId) ?? "")) }
        }
        var removed: [MessageID] = []
        for (parent, conversation) in gone {
            var slice = "conversation_id = ? AND parent_id = ? AND server_id IS NOT NULL"
            var args: [DatabaseValue] = [.text(conversation), .int(Int64(parent))]
            if let end {
                slice += " AND (sent_at > ? OR (sent_at = ? AND server_id >= ?))"
                args += [.int(Int64(end.lastReplyAt)), .int(Int64(end.lastReplyAt)), .int(Int64(end.lastReplyId))]
            }
            // The ids first (this SQLite has no RETURNING): what the writer publishes as removed.
            let ids = try db.prepare("SELECT server_id FROM messages WHERE \(slice)")
            try ids.bind(args)
            while try ids.step() { removed.append(MessageID(Int(truncatingIfNeeded: ids.int64(0)))) }
            ids.reset()
            let delete = try db.prepare("DELETE FROM messages WHERE \(slice)")
            try delete.bind(args)
            while try delete.step() {}
        }
        return removed
    }
}
