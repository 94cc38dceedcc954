import Foundation
import Synchronization
import VaultStore

/// A paged read of the logged-in user's conversations (`ConversationRequest`), most recent
/// activity first, with the SDK's filters.
///
///     let request = ConversationRequest.ConversationRequestBuilder(limit: 30, vault: vault)
///         .setConversationType(conversationType: .group)
///         .build()
///     request.fetchNext(onCachedConversations: { cached in render(cached) },
///                       onServerConversations: { server in reconcile(server) },   // keyed by conversationId
///                       onError: { error in showOffline(error) })
///
/// The cached page answers every filter of the reference's matrix locally (conversation type,
/// unread, tags, user tags, group tags, hide/only agentic, include blocked users, pinned by);
/// `setSearchKeyword(_:)` is server-only and makes the cached page empty. `withTags`,
/// `withUserAndGroupTags` and `with(blockedInfo:)` are enrichment: they never block the cached
/// phase (the cache always carries tags, and the blocked flags of the payload and of the SDK's
/// blocked-users list). Conversations with users I blocked are hidden unless
/// `includeBlockedUsers(true)`: blocked per the cached payload or per the SDK's blocked-users list,
/// which `blockUsers` updates at once.
///
/// The server page replaces the same slice: it is written through (upserted by conversation id),
/// and cached conversations within the page's range of activity that match the filter but are not
/// in the page are removed from the cache; their messages stay, for eviction to decide. A filtered
/// page can so remove a conversation that merely stopped matching (read since, untagged); the next
/// page that lists it brings it back. A server-only filter reconciles nothing.
///
/// Run one fetch at a time. A second fetch while the first is in flight fails with
/// `ERROR_REQUEST_IN_PROGRESS`, as on `MessagesRequest`: the seeds list conversations with neither
/// group, and an empty server result (the entity lists' rule) would read as "every conversation
/// was removed" to an app that reconciles the slice as the seeds tell it to.
///
/// Paging: each fetch continues after the last page, in the cache and on the server alike. Offline,
/// the cache keeps paging; the server continues from its own last page when it answers again (its
/// paging token is opaque), and both realign on that page. Once the server has said there is no
/// further page, later fetches deliver an empty server page without asking it again.
public final class ConversationRequest: Sendable {
    /// Builds a `ConversationRequest` (`ConversationRequest.ConversationRequestBuilder(limit:)`).
    public final class ConversationRequestBuilder {
        private var query = ConversationQuery()
        private let vault: OfflineVault?

        /// - Parameters:
        ///   - limit: conversations per page, clamped to 1…50 (the SDK's maximum).
        ///   - vault: the engine to read through; nil means `CometChat.offlineVault`.
        public init(limit: Int, vault: OfflineVault? = nil) {
            self.vault = vault
            query.limit = Self.clamped(limit)
        }

        static func clamped(_ limit: Int) -> Int { min(max(limit, 1), ConversationRequest.maxLimit) }

        /// Conversations per page, clamped to 1…50.
        @discardableResult public func set(limit: Int) -> Self { query.limit = Self.clamped(limit); return self }
        /// Only conversations with users (`.user`) or groups (`.group`); `.none`: both.
        @discardableResult public func setConversationType(conversationType: ConversationType) -> Self {
            query.conversationType = conversationType
            return self
        }
        /// Enrichment: the other user's or the group's tags (always carried by the cache).
        @discardableResult public func withUserAndGroupTags(_ value: Bool) -> Self { query.withUserAndGroupTags = value; return self }
        /// Only conversations carrying any of these tags (the user's own conversation tags).
        @discardableResult public func setTags(_ tags: [String]) -> Self { query.tags = tags; return self }
        /// Enrichment: the conversation's tags (always carried by the cache).
        @discardableResult public func withTags(_ value: Bool) -> Self { query.withTags = value; return self }
        /// Only conversations with a user carrying any of these tags (with `setGroupTags(_:)`:
        /// or a group carrying any of those).
        @discardableResult public func setUserTags(_ tags: [String]) -> Self { query.userTags = tags; return self }
        /// Only conversations with a group carrying any of these tags (with `setUserTags(_:)`: or
        /// a user carrying any of those).
        @discardableResult public func setGroupTags(_ tags: [String]) -> Self { query.groupTags = tags; return self }
        /// Also list conversations with users I blocked (hidden by default).
        @discardableResult public func includeBlockedUsers(_ value: Bool) -> Self { query.includeBlockedUsers = value; return self }
        /// Enrichment: `blockedByMe` / `hasBlockedMe` on the other user (always carried by the cache).
        @discardableResult public func with(blockedInfo: Bool) -> Self { query.withBlockedInfo = blockedInfo; return self }
        /// The docs' spelling of `with(blockedInfo:)`.
        @discardableResult public func withBlockedInfo(_ value: Bool) -> Self { with(blockedInfo: value) }
        /// Server-only: conversations whose user or group name contains the keyword. The cached
        /// page is empty while it is set (an empty keyword filters nothing).
        @discardableResult public func setSearchKeyword(_ keyword: String) -> Self { query.searchKeyword = keyword; return self }
        /// The `set(…:)` spelling of `setSearchKeyword(_:)`.
        @discardableResult public func set(searchKeyword: String) -> Self { setSearchKeyword(searchKeyword) }
        /// Only conversations with unread messages.
        @discardableResult public func setUnread(_ value: Bool) -> Self { query.unread = value; return self }
        /// Only pinned conversations: `"me"` (pinned by the user), `"system"` (by the app), or both.
        @discardableResult public func set(pinnedBy: [String]) -> Self { query.pinnedBy = pinnedBy; return self }
        /// Leave out conversations with AI agents.
        @discardableResult public func hideAgentic(_ value: Bool) -> Self { query.hideAgentic = value; return self }
        /// Only conversations with AI agents.
        @discardableResult public func onlyAgentic(_ value: Bool) -> Self { query.onlyAgentic = value; return self }

        /// The request, reading through the builder's vault (or `CometChat.offlineVault`).
        public func build() -> ConversationRequest {
            ConversationRequest(vault: vault ?? CometChat.offlineVault, query: query)
        }
    }

    /// The SDK's largest page.
    public static let maxLimit = 50

    /// The settings this request was built with.
    public let query: ConversationQuery
    private let vault: OfflineVault?
    private let gate = InFlightGate()
    /// Where the next fetch continues.
    private let paging = Mutex(SplitPaging<ConversationCursor>())

    init(vault: OfflineVault?, query: ConversationQuery) {
        self.vault = vault
        self.query = query
    }

    // MARK: Two-phase overload

    /// The next page: the cached page first (even when empty), then the server's copy of the same
    /// slice, written through to the cache before it is delivered. Offline, `onError` with
    /// `ERROR_INTERNET_UNAVAILABLE` follows the cached page.
    ///
    ///     request.fetchNext(onCachedConversations: { render($0) },
    ///                       onServerConversations: { reconcile($0) },
    ///                       onError: { print($0?.errorCode ?? "") })
    public func fetchNext(onCachedConversations: @escaping @Sendable ([Conversation]) -> Void,
                          onServerConversations: @escaping @Sendable ([Conversation]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        start(cachedPhase: true, onCached: onCachedConversations, onServer: onServerConversations, onError: onError)
    }

    // MARK: Classic overload (never a cached result)

    /// The server's next page only, as before offline support.
    ///
    ///     request.fetchNext(onSuccess: { conversations in show(conversations) }, onError: { _ in })
    public func fetchNext(onSuccess: @escaping @Sendable ([Conversation]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        start(cachedPhase: false, onCached: nil, onServer: onSuccess, onError: onError)
    }

    // MARK: async/await and AsyncSequence

    /// Both phases of `fetchNext` as one value.
    ///
    ///     let result = await request.fetchNext()
    ///     render(result.cached ?? [])
    ///     if case .success(let server) = result.server { reconcile(server) }
    public func fetchNext() async -> TwoPhaseResult<Conversation> {
        guard let vault else { return TwoPhaseResult(cached: nil, server: .failure(Self.noVault)) }
        return await vault.reads.collect { emit in await self.run(vault: vault, cachedPhase: true, emit: emit) }
    }

    /// The phases of `fetchNext` as they arrive; offline, the stream ends with the error.
    ///
    ///     for try await phase in request.nextPhases() {
    ///         switch phase {
    ///         case .cached(let conversations): render(conversations)
    ///         case .server(let conversations): reconcile(conversations)
    ///         }
    ///     }
    public func nextPhases() -> AsyncThrowingStream<ReadPhase<Conversation>, any Error> {
        guard let vault else { return AsyncThrowingStream { $0.finish(throwing: Self.noVault) } }
        return vault.reads.phaseStream { emit in await self.run(vault: vault, cachedPhase: true, emit: emit) }
    }

    // MARK: Core

    static let noVault = CometChatException(.userNotLoggedIn, "no OfflineVault: pass one to the builder or set CometChat.offlineVault")

    private func start(cachedPhase: Bool, onCached: (@Sendable ([Conversation]) -> Void)?,
                       onServer: @escaping @Sendable ([Conversation]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault else { return CallbackExecutor.main.execute { onError(Self.noVault) } }
        let emit = vault.reads.deliver(onCached: onCached, onServer: onServer, onError: onError)
        Task { await self.run(vault: vault, cachedPhase: cachedPhase, emit: emit) }
    }

    /// One fetch: this page's query and plan, and the paging bookkeeping.
    private func run(vault: OfflineVault, cachedPhase: Bool, emit: @escaping @Sendable (ReadEvent<Conversation>) -> Void) async {
        let at = paging.withLock { $0 }
        var q = query
        q.cursor = at.serverToken
        let pageQuery = q
        let limit = q.limit
        let backend = vault.backend
        let serverDone = at.serverDone
        let cacheStart = at.cacheEdge
        let serverStart = at.serverEdge
        // Whether the server said more pages follow (decides how far the reconciled slice reaches).
        let more = Mutex(false)

        var plan = TwoPhasePlan<Conversation>(
            cached: { db, context in
                guard let filter = CachedConversationFilter(pageQuery) else { return [] }
                return try ConversationRows.page(filter, after: cacheStart, limit: limit, me: context.me,
                                                 decoder: context.trustedDecoder, in: db)
            },
            server: { () async throws(BackendError) -> WirePage in
                if serverDone { return WirePage(items: [], nextCursor: nil) }
                let page = try await backend.conversations(pageQuery)
                more.withLock { $0 = page.nextCursor != nil }
                return page
            },
            decode: { value, context throws(WireError) -> Conversation in
                let conversation = try context.decoder.conversation(value)
                ConversationRows.finish(conversation, me: context.me, blocked: [])
                return conversation
            },
            writeThrough: { db, wire, items, context in
                if serverDone { return }
                for (value, conversation) in zip(wire, items) { try ConversationRows.upsert(value, conversation, in: db) }
                // Reconcile only when the cache can evaluate every filter, and only within the
                // slice the page covers: to its last item, or to the end when no page follows.
                guard let filter = CachedConversationFilter(pageQuery) else { return }
                let hasMore = more.withLock { $0 }
                // An empty page that says more follow covers no slice at all.
                if hasMore && items.isEmpty { return }
                let end = hasMore ? Self.farEdge(of: items) : nil
                try ConversationRows.reconcile(filter, after: serverStart, through: end, keep: Set(items.compactMap(\.conversationId)),
                                               me: context.me, decoder: context.trustedDecoder, in: db)
            })
        let cachedSeen = Mutex<[Conversation]>([])
        plan.afterCached = { items in cachedSeen.withLock { $0 = items } }
        plan.afterServer = { wire, items in
            guard !serverDone else { return }
            // A hostile order must not move the edge back.
            self.paging.withLock { $0.serverPage(nextToken: wire.nextCursor, edge: Self.farEdge(of: items), start: serverStart) }
        }
        await vault.reads.runTwoPhase(plan, gate: gate, busy: .fail, cachedPhase: cachedPhase) { event in
            // Offline, paging continues through the cache.
            if case .failed(let error) = event, error.errorCode == OfflineErrorCode.internetUnavailable.rawValue,
               let edge = Self.farEdge(of: cachedSeen.withLock({ $0 })) {
                self.paging.withLock { $0.cachedPageOffline(edge: edge) }
            }
            emit(event)
        }
    }

    /// The last conversation of a page in list order.
    static func farEdge(of items: [Conversation]) -> ConversationCursor? {
        ConversationCursor.last(of: items.map(ConversationCursor.init))
    }
}
