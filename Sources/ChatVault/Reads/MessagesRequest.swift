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

        @discardableResult public func set(limit: Int) -> Self { query.limit = min(max(limit, 1), 100); return self }
        @discardableResult public func set(uid: String) -> Self { self.uid = uid; return self }
        @discardableResult public func set(guid: String) -> Self { self.guid = guid; return self }
        @discardableResult public func set(timeStamp: Int) -> Self { query.timestamp = timeStamp; return self }
        @discardableResult public func set(messageID: Int) -> Self { query.messageId = messageID; return self }
        @discardableResult public func set(unread: Bool) -> Self { query.unread = unread; return self }
        @discardableResult public func hideMessagesFromBlockedUsers(_ block: Bool) -> Self { query.hideMessagesFromBlockedUsers = block; return self }
        @discardableResult public func set(searchKeyword: String) -> Self { query.searchKeyword = searchKeyword; return self }
        @discardableResult public func hideDeletedMessages(hide: Bool) -> Self { query.hideDeleted = hide; return self }
        @discardableResult public func setUpdatedAfter(timeStamp: Int) -> Self { query.updatedAfter = timeStamp; return self }
        @discardableResult public func updatesOnly(onlyUpdates: Bool) -> Self { query.updatesOnly = onlyUpdates; return self }
        @discardableResult public func set(categories: [String]) -> Self { query.categories = categories; return self }
        @discardableResult public func set(types: [String]) -> Self { query.types = types; return self }
        @discardableResult public func setParentMessageId(parentMessageId: Int) -> Self { query.parentMessageId = parentMessageId; return self }
        @discardableResult public func hideReplies(hide: Bool) -> Self { query.hideReplies = hide; return self }
        @discardableResult public func setTags(_ tags: [String]) -> Self { query.tags = tags; return self }
        @discardableResult public func withTags(_ withTags: Bool) -> Self { query.withTags = withTags; return self }
        @discardableResult public func mentionsWithTagInfo(_ value: Bool) -> Self { query.mentionsWithTagInfo = value; return self }
        @discardableResult public func mentionsWithBlockedInfo(_ value: Bool) -> Self { query.mentionsWithBlockedInfo = value; return self }
        @discardableResult public func setInteractionGoalCompletedOnly(_ value: Bool) -> Self { query.interactionGoalCompletedOnly = value; return self }
        @discardableResult public func set(withParent: Bool) -> Self { query.withParent = withParent; return self }
        @discardableResult public func set(pinned: Bool) -> Self { query.pinned = pinned; return self }
        @discardableResult public func set(saved: Bool) -> Self { query.saved = saved; return self }
        @discardableResult public func has(links: Bool) -> Self { query.hasLinks = links; return self }
        @discardableResult public func has(attachments: Bool) -> Self { query.hasAttachments = attachments; return self }
        @discardableResult public func has(reactions: Bool) -> Self { query.hasReactions = reactions; return self }
        /// Only messages that mention someone.
        @discardableResult public func has(mentions: Bool) -> Self { query.hasMentions = mentions; return self }
        /// Only messages that mention me.
        @discardableResult public func myMentionsOnly(_ value: Bool) -> Self { query.myMentionsOnly = value; return self }
        @discardableResult public func set(mentionedUIDs: [String]) -> Self { query.mentionedUIDs = mentionedUIDs; return self }
        @discardableResult public func set(attachmentTypes: [AttachmentType]) -> Self { query.attachmentTypes = attachmentTypes; return self }
        @discardableResult public func hideQuotedMessages(_ hide: Bool) -> Self { query.hideQuotedMessages = hide; return self }

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
    /// Where the next `fetchPrevious` / `fetchNext` continue from.
    private let cursors = Mutex<[PageDirection: MessageCursor]>([:])

    init(vault: OfflineVault?, query: MessageQuery) {
        self.vault = vault
        self.query = query
    }

    // MARK: Two-phase overloads

    public func fetchPrevious(onCachedMessages: @escaping @Sendable ([BaseMessage]) -> Void,
                              onServerMessages: @escaping @Sendable ([BaseMessage]) -> Void,
                              onError: @escaping @Sendable (CometChatException?) -> Void) {
        start(.previous, cachedPhase: true, onCached: onCachedMessages, onServer: onServerMessages, onError: onError)
    }

    public func fetchNext(onCachedMessages: @escaping @Sendable ([BaseMessage]) -> Void,
                          onServerMessages: @escaping @Sendable ([BaseMessage]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        start(.next, cachedPhase: true, onCached: onCachedMessages, onServer: onServerMessages, onError: onError)
    }

    // MARK: Classic overloads (never a cached or pending result)

    public func fetchPrevious(onSuccess: @escaping @Sendable ([BaseMessage]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        start(.previous, cachedPhase: false, onCached: nil, onServer: onSuccess, onError: onError)
    }

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
        let emit = vault.deliver(onCached: onCached, onServer: onServer, onError: onError)
        Task { await self.run(direction, vault: vault, cachedPhase: cachedPhase, emit: emit) }
    }

    private func collecting(_ direction: PageDirection) async -> TwoPhaseResult<BaseMessage> {
        guard let vault else { return TwoPhaseResult(cached: nil, server: .failure(CometChatException(.userNotLoggedIn, "no OfflineVault"))) }
        return await vault.collect { emit in await self.run(direction, vault: vault, cachedPhase: true, emit: emit) }
    }

    private func streaming(_ direction: PageDirection) -> AsyncThrowingStream<ReadPhase<BaseMessage>, any Error> {
        guard let vault else {
            return AsyncThrowingStream { $0.finish(throwing: CometChatException(.userNotLoggedIn, "no OfflineVault")) }
        }
        return vault.phaseStream { emit in await self.run(direction, vault: vault, cachedPhase: true, emit: emit) }
    }

    /// One fetch: the query for this page, its plan, and cursor bookkeeping.
    private func run(_ direction: PageDirection, vault: OfflineVault, cachedPhase: Bool,
                     emit: @escaping @Sendable (ReadEvent<BaseMessage>) -> Void) async {
        var q = query
        q.direction = direction
        let cursor = cursors.withLock { $0[direction] }
        if let cursor {
            q.cursor = cursor
            q.messageId = nil
            q.timestamp = nil
        }
        let backend = vault.backend
        let limit = q.limit
        let startQuery = q

        // Record that the conversation was opened (`cacheDurationDays`) beside the read, not
        // before it: the commit is durable (an fsync), and the cached phase must not wait for it.
        // The fetch still ends only once it is recorded.
        async let opened: Void = Self.markOpened(q.scope, vault: vault)

        let plan = TwoPhasePlan<BaseMessage>(
            cached: { db, context in
                try MessageRows.cachedPage(startQuery, direction: direction, me: context.me, decoder: context.trustedDecoder, in: db)
            },
            server: { () async throws(BackendError) -> WirePage in try await backend.messages(startQuery) },
            decode: { value, context throws(WireError) -> BaseMessage in
                let message = try context.decoder.message(value)
                message.messageStatus = MessageRows.status(of: message, me: context.me)
                return message
            },
            writeThrough: { db, wire, items, context in
                for (value, message) in zip(wire, items) {
                    try MessageRows.upsert(value, message, me: context.me, source: .realtime, in: db)
                }
                // Reconcile only when the cache can evaluate every filter, and only within the
                // slice the page covers.
                guard let filter = CachedMessageFilter(startQuery, me: context.me),
                      let start = try Self.startCursor(startQuery, direction: direction, in: db) else { return }
                try MessageRows.reconcile(filter, direction: direction, cursor: start.cursor, limit: limit,
                                          server: items, decoder: context.trustedDecoder, in: db)
            })
        let cachedSeen = Mutex<[BaseMessage]>([])
        await vault.runTwoPhase(plan, gate: gate, busy: .fail, cachedPhase: cachedPhase) { event in
            switch event {
            case .cached(let items):
                cachedSeen.withLock { $0 = items }
            case .server(let items):
                self.advance(direction, past: items)
            case .failed(let error):
                // Offline, paging continues through the cache.
                if error.errorCode == OfflineErrorCode.internetUnavailable.rawValue {
                    self.advance(direction, past: cachedSeen.withLock { $0 })
                }
            }
            emit(event)
        }
        await opened
    }

    private static func markOpened(_ scope: MessageScope?, vault: OfflineVault) async {
        guard let cache = vault.openCache, let scope else { return }
        let id = MessageRows.conversationId(for: scope, me: vault.userId ?? "")
        let now = vault.settings.clock()
        _ = try? await cache.writer.run { db in try MessageRows.markOpened(id, at: now, in: db) }
    }

    private func advance(_ direction: PageDirection, past items: [BaseMessage]) {
        let keys = items.map { ($0.sentAt, $0.id) }
        guard let edge = direction == .previous ? keys.min(by: <) : keys.max(by: <) else { return }
        cursors.withLock { $0[direction] = MessageCursor(sentAt: edge.0, id: edge.1) }
    }

    /// Where a page starts in the cache: after the cursor, or at the message or time the request
    /// was built with. Nil when that message is not cached (the cache cannot place it).
    struct Start {
        var cursor: MessageCursor?
    }

    static func startCursor(_ q: MessageQuery, direction: PageDirection, in db: Database) throws -> Start? {
        if let cursor = q.cursor { return Start(cursor: cursor) }
        if let id = q.messageId {
            guard let sentAt = try MessageRows.sentAt(ofMessage: id, in: db) else { return nil }
            return Start(cursor: MessageCursor(sentAt: sentAt, id: id))
        }
        if let timestamp = q.timestamp {
            // Before every message of that second: `.previous` reads strictly earlier seconds,
            // `.next` reads that second on, as the server does.
            return Start(cursor: MessageCursor(sentAt: timestamp, id: Int.min))
        }
        return Start(cursor: nil)
    }
}
