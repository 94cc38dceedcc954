import Foundation
import Synchronization
import VaultStore

/// A paged read of messages (`MessagesRequest`), in a user or group conversation, a thread, or
/// across conversations, with the SDK's filters.
///
///     let request = MessagesRequest.MessageRequestBuilder(vault: vault)
///         .set(uid: "bob").set(limit: 30).build()
///     request.fetchPrevious(onCachedMessages: { cached in render(cached) },
///                           onServerMessages: { server in reconcile(server) },
///                           onError: { error in showOffline(error) })
///
/// Every locally computable filter is answered from the cache; one server-only predicate
/// (`set(searchKeyword:)`, `has(links:)`, `updatesOnly(onlyUpdates:)`,
/// `setInteractionGoalCompletedOnly(_:)`, or one sender in a group) makes the cached page empty.
/// Enrichment flags never block it. Run one fetch at a time: a second one while the first is in
/// flight fails with `ERROR_REQUEST_IN_PROGRESS`.
///
/// Paging: `fetchPrevious` and `fetchNext` each keep two positions, one in the cache and one on
/// the server, both starting where the request was built to start (the newest or oldest end, the
/// message, or the time). The cached page continues from the cache's position and the server page
/// from the server's; the server's advances only by server pages, to each page's far edge. The
/// cache's advances by a cached page when the fetch ends offline (`ERROR_INTERNET_UNAVAILABLE`), so
/// offline paging walks on through the cache, and it realigns on every server page: to that page's
/// far edge, or to where the page started when it was empty, so that the next cached and server
/// pages start at the same place. The cache cannot know what it lacks: offline paging may step over
/// messages the server has (a gap between cached ranges), but the server's position never does, so
/// once the server answers again its pages go on from its own last page and bring every message
/// it has, each once. A realignment can move the cache's position back over messages offline paging
/// already showed; the app reconciles them by id. Any other failure (a server error, a refused
/// page, a fetch in flight) moves neither position, so the same fetch can be retried.
public final class MessagesRequest: Sendable {
    /// Builds a `MessagesRequest` (`MessagesRequest.MessageRequestBuilder()` in the SDK).
    public final class MessageRequestBuilder {
        private var query = MessageQuery()
        private var uid: String?
        private var guid: String?
        private let vault: OfflineVault?

        /// - Parameter vault: the engine to read through; nil means `CometChat.offlineVault`.
        public init(vault: OfflineVault? = nil) {
            self.vault = vault
        }

        /// Messages per page, clamped to 1…100 (default 30).
        @discardableResult public func set(limit: Int) -> Self { query.limit = min(max(limit, 1), 100); return self }
        /// The one-to-one conversation with this user; with `set(guid:)` too, that sender's
        /// messages in the group instead (server-only: the cached page is empty).
        @discardableResult public func set(uid: String) -> Self { self.uid = uid; return self }
        /// The group's conversation (with `set(uid:)`: one sender's messages in it, server-only).
        @discardableResult public func set(guid: String) -> Self { self.guid = guid; return self }
        /// Start the first page at this time, server epoch seconds: `fetchPrevious` reads messages
        /// sent before it, `fetchNext` those sent at or after it.
        @discardableResult public func set(timeStamp: Int) -> Self { query.timestamp = timeStamp; return self }
        /// Start the first page at this message (its server id): `fetchPrevious` reads the messages
        /// before it, `fetchNext` those after it.
        @discardableResult public func set(messageID: Int) -> Self { query.messageId = messageID; return self }
        /// Only messages from others that the user has not read (answered from the cache).
        @discardableResult public func set(unread: Bool) -> Self { query.unread = unread; return self }
        /// Leave out messages from users the user blocked (answered from the cache, with the SDK's
        /// blocked-users list).
        @discardableResult public func hideMessagesFromBlockedUsers(_ block: Bool) -> Self { query.hideMessagesFromBlockedUsers = block; return self }
        /// Server-only: messages whose text or caption contains the keyword. A non-empty keyword
        /// makes the cached page empty.
        @discardableResult public func set(searchKeyword: String) -> Self { query.searchKeyword = searchKeyword; return self }
        /// Leave out deleted messages (answered from the cache).
        @discardableResult public func hideDeletedMessages(hide: Bool) -> Self { query.hideDeleted = hide; return self }
        /// Server-only: messages updated after this time, server epoch seconds. The cached page is
        /// empty while it is set.
        @discardableResult public func setUpdatedAfter(timeStamp: Int) -> Self { query.updatedAfter = timeStamp; return self }
        /// Server-only: messages changed after they were sent (edited, deleted, reacted to…). The
        /// cached page is empty while it is on.
        @discardableResult public func updatesOnly(onlyUpdates: Bool) -> Self { query.updatesOnly = onlyUpdates; return self }
        /// Only messages of any of these categories (`"message"`, `"custom"`, `"action"`…; answered
        /// from the cache).
        @discardableResult public func set(categories: [String]) -> Self { query.categories = categories; return self }
        /// Only messages of any of these types (`"text"`, `"image"`, a custom type…; answered from
        /// the cache).
        @discardableResult public func set(types: [String]) -> Self { query.types = types; return self }
        /// One category (the SDK's singular form): the same as `set(categories: [category])`.
        @discardableResult public func set(category: String) -> Self { query.categories = [category]; return self }
        /// One type (the SDK's singular form): the same as `set(types: [type])`.
        @discardableResult public func set(type: String) -> Self { query.types = [type]; return self }
        /// The replies of this thread parent (its server id) instead of the conversation's
        /// messages.
        @discardableResult public func setParentMessageId(parentMessageId: Int) -> Self { query.parentMessageId = parentMessageId; return self }
        /// Leave out thread replies (answered from the cache; ignored for a thread read).
        @discardableResult public func hideReplies(hide: Bool) -> Self { query.hideReplies = hide; return self }
        /// Only messages carrying any of these tags (answered from the cache).
        @discardableResult public func setTags(_ tags: [String]) -> Self { query.tags = tags; return self }
        /// Enrichment: ask the server for each message's tags (the cache always has them; never
        /// blocks the cached phase).
        @discardableResult public func withTags(_ withTags: Bool) -> Self { query.withTags = withTags; return self }
        /// Enrichment: ask for the mentioned users' tags (never blocks the cached phase).
        @discardableResult public func mentionsWithTagInfo(_ value: Bool) -> Self { query.mentionsWithTagInfo = value; return self }
        /// Enrichment: ask for the mentioned users' blocked flags (never blocks the cached phase).
        @discardableResult public func mentionsWithBlockedInfo(_ value: Bool) -> Self { query.mentionsWithBlockedInfo = value; return self }
        /// Server-only: interactive messages whose interaction goal is met. The cached page is
        /// empty while it is on.
        @discardableResult public func setInteractionGoalCompletedOnly(_ value: Bool) -> Self { query.interactionGoalCompletedOnly = value; return self }
        /// Enrichment: ask the server to include a reply's parent message (never blocks the cached
        /// phase).
        @discardableResult public func set(withParent: Bool) -> Self { query.withParent = withParent; return self }
        /// Only messages pinned in their conversation (answered from the cache).
        @discardableResult public func set(pinned: Bool) -> Self { query.pinned = pinned; return self }
        /// Only messages the user saved (answered from the cache).
        @discardableResult public func set(saved: Bool) -> Self { query.saved = saved; return self }
        /// Server-only: messages whose text or caption holds a link. The cached page is empty while
        /// it is on.
        @discardableResult public func has(links: Bool) -> Self { query.hasLinks = links; return self }
        /// Only media messages with attachments (answered from the cache).
        @discardableResult public func has(attachments: Bool) -> Self { query.hasAttachments = attachments; return self }
        /// Only messages with at least one reaction (answered from the cache).
        @discardableResult public func has(reactions: Bool) -> Self { query.hasReactions = reactions; return self }
        /// Only messages that mention someone.
        @discardableResult public func has(mentions: Bool) -> Self { query.hasMentions = mentions; return self }
        /// Only messages that mention me.
        @discardableResult public func myMentionsOnly(_ value: Bool) -> Self { query.myMentionsOnly = value; return self }
        /// Only messages that mention any of these users (answered from the cache).
        @discardableResult public func set(mentionedUIDs: [String]) -> Self { query.mentionedUIDs = mentionedUIDs; return self }
        /// Only media messages of any of these kinds (answered from the cache).
        @discardableResult public func set(attachmentTypes: [AttachmentType]) -> Self { query.attachmentTypes = attachmentTypes; return self }
        /// Enrichment: ask the server to leave out a reply's quoted message (never blocks the
        /// cached phase).
        @discardableResult public func hideQuotedMessages(_ hide: Bool) -> Self { query.hideQuotedMessages = hide; return self }

        /// The request, reading through the builder's vault (or `CometChat.offlineVault`); with
        /// neither, every fetch fails with `ERROR_USER_NOT_LOGGED_IN`.
        public func build() -> MessagesRequest {
            var q = query
            if let guid {
                q.scope = .group(guid)
                q.senderUid = uid
            } else if let uid {
                q.scope = .user(uid)
            }
            return MessagesRequest(vault: vault ?? CometChat.offlineVault, query: q)
        }
    }

    /// The settings this request was built with.
    public let query: MessageQuery
    private let vault: OfflineVault?
    private let gate = InFlightGate()
    /// Where the next `fetchPrevious` / `fetchNext` continue from: per direction, the far edge of
    /// the last server page (`serverEdge`) and where the next cached page starts beyond
    /// (`cacheEdge`: the last cached page of a fetch that ended offline, or the server's position
    /// once the server answered since). Nil: where the request was built to start.
    private let positions = Mutex<[PageDirection: SplitPaging<DirectedMessageCursor>]>([:])

    init(vault: OfflineVault?, query: MessageQuery) {
        self.vault = vault
        self.query = query
    }

    // MARK: Two-phase overloads

    /// The next page toward older messages, in two phases: the cached page first (even when empty),
    /// then the server's copy of the same slice, written through to the cache before it is
    /// delivered. Offline, `onError` with `ERROR_INTERNET_UNAVAILABLE` follows the cached page; a
    /// fetch while another is in flight fails with `ERROR_REQUEST_IN_PROGRESS`.
    ///
    ///     request.fetchPrevious(onCachedMessages: { render($0) }, onServerMessages: { reconcile($0) },
    ///                           onError: { print($0?.errorCode ?? "") })
    public func fetchPrevious(onCachedMessages: @escaping @Sendable ([BaseMessage]) -> Void,
                              onServerMessages: @escaping @Sendable ([BaseMessage]) -> Void,
                              onError: @escaping @Sendable (CometChatException?) -> Void) {
        start(.previous, cachedPhase: true, onCached: onCachedMessages, onServer: onServerMessages, onError: onError)
    }

    /// The next page toward newer messages, in two phases as `fetchPrevious`: cached first (even
    /// when empty), then the server's copy of the same slice, written through before it is
    /// delivered; offline, `onError` with `ERROR_INTERNET_UNAVAILABLE` follows the cached page.
    public func fetchNext(onCachedMessages: @escaping @Sendable ([BaseMessage]) -> Void,
                          onServerMessages: @escaping @Sendable ([BaseMessage]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        start(.next, cachedPhase: true, onCached: onCachedMessages, onServer: onServerMessages, onError: onError)
    }

    // MARK: Classic overloads (never a cached or pending result)

    /// The server's previous page only, as before offline support: never a cached or pending
    /// result. The server's page is still written through to the cache.
    public func fetchPrevious(onSuccess: @escaping @Sendable ([BaseMessage]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        start(.previous, cachedPhase: false, onCached: nil, onServer: onSuccess, onError: onError)
    }

    /// The server's next page only, as before offline support: never a cached or pending result.
    /// The server's page is still written through to the cache.
    public func fetchNext(onSuccess: @escaping @Sendable ([BaseMessage]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        start(.next, cachedPhase: false, onCached: nil, onServer: onSuccess, onError: onError)
    }

    // MARK: async/await and AsyncSequence

    /// Both phases of `fetchPrevious` as one value.
    public func fetchPrevious() async -> TwoPhaseResult<BaseMessage> {
        await collecting(.previous)
    }

    /// Both phases of `fetchNext` as one value.
    public func fetchNext() async -> TwoPhaseResult<BaseMessage> {
        await collecting(.next)
    }

    /// The phases of `fetchPrevious` as they arrive; offline, the stream ends with the error.
    public func previousPhases() -> AsyncThrowingStream<ReadPhase<BaseMessage>, any Error> {
        streaming(.previous)
    }

    /// The phases of `fetchNext` as they arrive.
    public func nextPhases() -> AsyncThrowingStream<ReadPhase<BaseMessage>, any Error> {
        streaming(.next)
    }

    // MARK: Core

    private func start(_ direction: PageDirection, cachedPhase: Bool, onCached: (@Sendable ([BaseMessage]) -> Void)?,
                       onServer: @escaping @Sendable ([BaseMessage]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault else {
            let error = CometChatException(.userNotLoggedIn, "no OfflineVault: pass one to the builder or set CometChat.offlineVault")
            return CallbackExecutor.main.execute { onError(error) }
        }
        let emit = vault.reads.deliver(onCached: onCached, onServer: onServer, onError: onError)
        Task { await self.run(direction, vault: vault, cachedPhase: cachedPhase, emit: emit) }
    }

    private func collecting(_ direction: PageDirection) async -> TwoPhaseResult<BaseMessage> {
        guard let vault else { return TwoPhaseResult(cached: nil, server: .failure(CometChatException(.userNotLoggedIn, "no OfflineVault"))) }
        return await vault.reads.collect { emit in await self.run(direction, vault: vault, cachedPhase: true, emit: emit) }
    }

    private func streaming(_ direction: PageDirection) -> AsyncThrowingStream<ReadPhase<BaseMessage>, any Error> {
        guard let vault else {
            return AsyncThrowingStream { $0.finish(throwing: CometChatException(.userNotLoggedIn, "no OfflineVault")) }
        }
        return vault.reads.phaseStream { emit in await self.run(direction, vault: vault, cachedPhase: true, emit: emit) }
    }

    /// One fetch: the query for this page, its plan, and cursor bookkeeping.
    private func run(_ direction: PageDirection, vault: OfflineVault, cachedPhase: Bool,
                     emit: @escaping @Sendable (ReadEvent<BaseMessage>) -> Void) async {
        var base = query
        base.direction = direction
        let at = positions.withLock { $0[direction] ?? SplitPaging() }
        let cacheQuery = Self.query(base, from: at.cacheEdge?.cursor)
        let serverQuery = Self.query(base, from: at.serverEdge?.cursor)
        let backend = vault.backend
        let limit = base.limit

        // Record that the conversation was opened (`cacheDurationDays`) once the cached page is
        // out, not before: the cached phase must neither wait for the commit nor read after it (a
        // commit empties the reader's page cache). The fetch still ends only once it is recorded.
        let opened = Mutex<Task<Void, Never>?>(nil)
        let scope = base.scope

        var plan = TwoPhasePlan<BaseMessage>(
            cached: { db, context in
                try MessageRows.cachedPage(cacheQuery, direction: direction, me: context.me, decoder: context.trustedDecoder, in: db)
            },
            server: { () async throws(BackendError) -> WirePage in try await backend.messages(serverQuery) },
            decode: { value, context throws(WireError) -> BaseMessage in
                let message = try context.decoder.message(value)
                MessageWriteBatch.resolveStatus(message, me: context.me)
                return message
            },
            writeThrough: { db, wire, items, context in
                for (value, message) in zip(wire, items) {
                    try MessageWriteBatch.storeServerCopy(value, message, me: context.me, source: .realtime, in: db)
                }
            })
        // Reconcile only when the cache can evaluate every filter, and only within the slice the
        // page covers (from the server's position, not the cache's).
        plan.reconcile = { db, items, context in
            guard let filter = CachedMessageFilter(serverQuery, me: context.me),
                  let start = try MessageRows.startCursor(serverQuery, direction: direction, in: db) else { return [] }
            return try MessageRows.reconcile(filter, direction: direction, cursor: start.cursor, limit: limit,
                                             server: items, decoder: context.trustedDecoder, in: db)
        }
        plan.downloadsMedia = true
        plan.storedMessages = { $0 }
        let cachedSeen = Mutex<[BaseMessage]>([])
        await vault.reads.runTwoPhase(plan, gate: gate, busy: .fail, cachedPhase: cachedPhase) { event in
            switch event {
            case .cached(let items):
                cachedSeen.withLock { $0 = items }
                opened.withLock { $0 = Task { await Self.markOpened(scope, vault: vault) } }
            case .server(let items):
                self.serverAnswered(direction, with: items, start: at.serverEdge)
            case .failed(let error):
                // Offline, paging continues through the cache (the server's position stays).
                if error.errorCode == OfflineErrorCode.internetUnavailable.rawValue {
                    self.cacheAdvanced(direction, past: cachedSeen.withLock { $0 })
                }
            }
            emit(event)
        }
        if let task = opened.withLock({ $0 }) {
            await task.value
        } else {
            await Self.markOpened(scope, vault: vault)
        }
    }

    private static func markOpened(_ scope: MessageScope?, vault: OfflineVault) async {
        guard let cache = vault.openCache, let scope else { return }
        let id = MessageRows.conversationId(for: scope, me: vault.userId ?? "")
        let now = vault.settings.clock()
        guard vault.openedConversations.needsRecord(id, at: now, cache: cache) else { return }
        do {
            try await cache.writer.run { db in try MessageRows.markOpened(id, at: now, in: db) }
            vault.openedConversations.recorded(id, at: now, cache: cache)
        } catch {
            // Not recorded (a busy or full disk): the next open tries again.
        }
    }

    /// The request's settings, continuing beyond `position` when there is one (the builder's
    /// message or time only place the first page).
    private static func query(_ base: MessageQuery, from position: MessageCursor?) -> MessageQuery {
        guard let position else { return base }
        var q = base
        q.cursor = position
        q.messageId = nil
        q.timestamp = nil
        return q
    }

    /// A server page: the server's position moves to its far edge (never back, even when a hostile
    /// page holds messages behind it), and the cache's realigns on the server's.
    private func serverAnswered(_ direction: PageDirection, with items: [BaseMessage], start: DirectedMessageCursor?) {
        let edge = Self.farEdge(of: items, direction).map { DirectedMessageCursor(cursor: $0, direction: direction) }
        positions.withLock { $0[direction, default: SplitPaging()].serverPage(edge: edge, start: start) }
    }

    /// A cached page of a fetch that ended offline: the cache's position moves past it.
    private func cacheAdvanced(_ direction: PageDirection, past items: [BaseMessage]) {
        guard let edge = Self.farEdge(of: items, direction) else { return }
        positions.withLock { $0[direction, default: SplitPaging()].cachedPageOffline(edge: DirectedMessageCursor(cursor: edge, direction: direction)) }
    }

    /// The message of a page furthest in `direction` (the oldest for `.previous`).
    static func farEdge(of items: [BaseMessage], _ direction: PageDirection) -> MessageCursor? {
        DirectedMessageCursor.last(of: items.map { DirectedMessageCursor(cursor: MessageCursor(sentAt: $0.sentAt, id: $0.id), direction: direction) })?.cursor
    }
}

/// A message position as a page walks in one direction: "after" is further that way (older for
/// `.previous`, newer for `.next`), so message paging shares `SplitPaging` with the lists.
struct DirectedMessageCursor: ListCursor {
    var cursor: MessageCursor
    var direction: PageDirection

    func isAfter(_ other: DirectedMessageCursor) -> Bool {
        let mine = (cursor.sentAt, cursor.id), theirs = (other.cursor.sentAt, other.cursor.id)
        return direction == .previous ? mine < theirs : mine > theirs
    }
}
