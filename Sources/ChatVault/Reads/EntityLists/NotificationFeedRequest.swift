import Foundation

/// Which feed items a `NotificationFeedRequest` lists by read state (`FeedReadState`); leave it
/// unset for all.
public enum FeedReadState: String, Sendable, Codable, CaseIterable {
    /// Items the user has read.
    case read
    /// Items the user has not read yet.
    case unread
}

/// A paged read of the logged-in user's notification feed (`NotificationFeedRequest`), newest
/// first.
///
///     let request = NotificationFeedRequest.NotificationFeedRequestBuilder()
///         .set(limit: 20)
///         .set(readState: .unread)
///         .build()
///     request.fetchNext(onCachedNotificationFeedItems: { cached in render(cached) },
///                       onServerNotificationFeedItems: { server in reconcile(server) },   // keyed by id
///                       onError: { error in showOffline(error) })
///
/// The cached phase replays the snapshot recorded online for the **same builder settings**,
/// page by page: a feed never fetched online has an empty cached page. Every setting of this
/// builder is snapshotted (none is server-only).
///
/// A second fetch while one is in flight returns an empty server result, as on the other entity
/// lists: the feed is served from a snapshot like them, and the reference raises
/// `ERROR_REQUEST_IN_PROGRESS` only for messages, threads and reactions.
public final class NotificationFeedRequest: Sendable {
    /// Builds a `NotificationFeedRequest`
    /// (`NotificationFeedRequest.NotificationFeedRequestBuilder()` in the SDK).
    public final class NotificationFeedRequestBuilder {
        private var query = FeedQuery()
        private let vault: OfflineVault?

        /// - Parameter vault: the engine to read through; nil means `CometChat.offlineVault`.
        public init(vault: OfflineVault? = nil) {
            self.vault = vault
        }

        /// Page size, 1 to 100 (default 20).
        @discardableResult public func set(limit: Int) -> Self { query.limit = EntityListLimit.clamp(limit); return self }
        /// Only read or only unread items (unset: both).
        @discardableResult public func set(readState: FeedReadState) -> Self { query.readState = readState.rawValue; return self }
        /// Only items of this category.
        @discardableResult public func set(category: String) -> Self { query.category = category; return self }
        /// Only items with this category id.
        @discardableResult public func set(categoryId: String) -> Self { query.categoryId = categoryId; return self }
        /// Only items of this channel.
        @discardableResult public func set(channelId: String) -> Self { query.channelId = channelId; return self }
        /// Only items carrying any of these tags.
        @discardableResult public func set(tags: [String]) -> Self { query.tags = tags; return self }
        /// Items sent at or after this ISO 8601 date-time.
        @discardableResult public func set(dateFrom: String) -> Self { query.dateFrom = dateFrom; return self }
        /// Items sent at or before this ISO 8601 date-time.
        @discardableResult public func set(dateTo: String) -> Self { query.dateTo = dateTo; return self }

        /// The request, reading through the builder's vault (or `CometChat.offlineVault`).
        public func build() -> NotificationFeedRequest {
            NotificationFeedRequest(vault: vault ?? CometChat.offlineVault, query: query)
        }
    }

    /// The settings this request was built with.
    public let query: FeedQuery
    let core: EntityListCore<NotificationFeedItem>

    init(vault: OfflineVault?, query: FeedQuery) {
        self.query = query
        let q = query
        let key = Self.snapshotKey(q)
        core = EntityListCore(
            vault: vault, busy: .emptyServerResult, caching: .snapshot(key: { _ in key }),
            fetch: { backend, _, cursor async throws(BackendError) -> WirePage in
                var page = q
                page.cursor = cursor
                return try await backend.notificationFeed(page)
            },
            decode: { decoder, value throws(WireError) -> NotificationFeedItem in try decoder.feedItem(value) })
    }

    /// The snapshot these settings replay.
    static func snapshotKey(_ q: FeedQuery) -> SnapshotKey? {
        var s = SnapshotSettings()
        s.put("limit", q.limit)
        s.put("readState", q.readState)
        s.put("category", q.category)
        s.put("categoryId", q.categoryId)
        s.put("channelId", q.channelId)
        s.put("tags", set: q.tags)
        s.put("dateFrom", q.dateFrom)
        s.put("dateTo", q.dateTo)
        return SnapshotKey(.notificationFeed, s)
    }

    /// The next page in two phases: the cached page (first, even when empty), then the server's.
    ///
    ///     request.fetchNext(onCachedNotificationFeedItems: { render($0) },
    ///                       onServerNotificationFeedItems: { reconcile($0) },
    ///                       onError: { print($0?.errorCode ?? "") })
    public func fetchNext(onCachedNotificationFeedItems: @escaping @Sendable ([NotificationFeedItem]) -> Void,
                          onServerNotificationFeedItems: @escaping @Sendable ([NotificationFeedItem]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: true, onCached: onCachedNotificationFeedItems, onServer: onServerNotificationFeedItems, onError: onError)
    }

    /// The earlier spelling of the two-phase overload; it behaves identically.
    ///
    ///     request.fetchNext(onCachedNotificationFeedItems: { … }, onServerNotificationFeedItems: { … }, onError: { … })
    @available(*, deprecated, renamed: "fetchNext(onCachedNotificationFeedItems:onServerNotificationFeedItems:onError:)")
    public func fetchNext(onCachedFeedItems: @escaping @Sendable ([NotificationFeedItem]) -> Void,
                          onServerFeedItems: @escaping @Sendable ([NotificationFeedItem]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: true, onCached: onCachedFeedItems, onServer: onServerFeedItems, onError: onError)
    }

    /// The classic call: the server's page only, never a cached result.
    ///
    ///     request.fetchNext(onSuccess: { items in show(items) }, onError: { _ in })
    public func fetchNext(onSuccess: @escaping @Sendable ([NotificationFeedItem]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: false, onCached: nil, onServer: onSuccess, onError: onError)
    }

    /// Both phases of `fetchNext` as one value.
    ///
    ///     let result = await request.fetchNext()
    public func fetchNext() async -> TwoPhaseResult<NotificationFeedItem> {
        await core.collecting(.next)
    }

    /// The phases of `fetchNext` as they arrive; offline, the stream ends with the error.
    ///
    ///     for try await phase in request.nextPhases() { … }
    public func nextPhases() -> AsyncThrowingStream<ReadPhase<NotificationFeedItem>, any Error> {
        core.streaming(.next)
    }
}
