import Foundation

/// A paged read of users (`UsersRequest`), with the SDK's filters.
///
///     let request = UsersRequest.UsersRequestBuilder(limit: 30)
///         .friendsOnly(true)
///         .build()
///     request.fetchNext(onCachedUsers: { cached in render(cached) },
///                       onServerUsers: { server in reconcile(server) },   // keyed by uid
///                       onError: { error in showOffline(error) })
///
/// The cached phase replays the snapshot recorded online for the **same builder settings**,
/// page by page (see `OfflineConfig.maxSnapshotQueries` and `snapshotTtlDays`): a list never
/// fetched online has an empty cached page. A keyword search (`set(searchKeyword:)`) or a presence
/// filter (`set(status:)`) is never snapshotted, so it has no cached page either. A second fetch
/// while one is in flight returns an empty server result (no cached phase).
public final class UsersRequest: Sendable {
    /// Builds a `UsersRequest` (`UsersRequest.UsersRequestBuilder()` in the SDK).
    public final class UsersRequestBuilder {
        private var query = UserQuery()
        private let vault: OfflineVault?

        /// - Parameter vault: the engine to read through; nil means `CometChat.offlineVault`.
        public init(vault: OfflineVault? = nil) {
            self.vault = vault
        }

        /// A builder with a page size (1 to 100).
        public init(limit: Int, vault: OfflineVault? = nil) {
            self.vault = vault
            query.limit = EntityListLimit.clamp(limit)
        }

        /// Page size, 1 to 100 (default 30).
        @discardableResult public func set(limit: Int) -> Self { query.limit = EntityListLimit.clamp(limit); return self }
        /// Server-only: the cached page is empty.
        @discardableResult public func set(searchKeyword: String) -> Self { query.searchKeyword = searchKeyword; return self }
        /// Where the keyword is looked for (`"uid"`, `"name"`).
        @discardableResult public func searchIn(_ fields: [String]) -> Self { query.searchIn = fields; return self }
        /// Presence filter; server-only: the cached page is empty.
        @discardableResult public func set(status: UserStatus) -> Self { query.status = status; return self }
        /// Leave out users the user blocked.
        @discardableResult public func hideBlockedUsers(_ hide: Bool) -> Self { query.hideBlockedUsers = hide; return self }
        /// Only users with any of these roles.
        @discardableResult public func set(roles: [String]) -> Self { query.roles = roles; return self }
        /// Only the user's friends.
        @discardableResult public func friendsOnly(_ friendsOnly: Bool) -> Self { query.friendsOnly = friendsOnly; return self }
        /// Only users carrying any of these tags.
        @discardableResult public func set(tags: [String]) -> Self { query.tags = tags; return self }
        /// Enrichment: ask for each user's tags.
        @discardableResult public func withTags(_ withTags: Bool) -> Self { query.withTags = withTags; return self }
        /// Only these users (by uid).
        @discardableResult public func set(UIDs: [String]) -> Self { query.uids = UIDs; return self }
        /// Sort by this field (`"name"`, `"status"`…; the server's default order when unset).
        @discardableResult public func sortBy(_ field: String) -> Self { query.sortBy = field; return self }
        /// Ascending or descending `sortBy`.
        @discardableResult public func sortOrder(_ order: SortOrder) -> Self { query.sortOrder = order; return self }

        /// The request, reading through the builder's vault (or `CometChat.offlineVault`).
        public func build() -> UsersRequest {
            UsersRequest(vault: vault ?? CometChat.offlineVault, query: query)
        }
    }

    /// The settings this request was built with.
    public let query: UserQuery
    let core: EntityListCore<User>

    init(vault: OfflineVault?, query: UserQuery) {
        self.query = query
        let q = query
        let key = Self.snapshotKey(q)
        core = EntityListCore(
            vault: vault, busy: .emptyServerResult, caching: .snapshot(key: { _ in key }),
            fetch: { backend, _, cursor async throws(BackendError) -> WirePage in
                var page = q
                page.cursor = cursor
                return try await backend.users(page)
            },
            decode: { decoder, value throws(WireError) -> User in try decoder.user(value) })
    }

    /// The snapshot these settings replay, or nil when a server-only setting is active.
    static func snapshotKey(_ q: UserQuery) -> SnapshotKey? {
        if q.searchKeyword?.isEmpty == false || q.status != nil { return nil }
        var s = SnapshotSettings()
        s.put("limit", q.limit)
        s.put("searchIn", set: q.searchIn)
        s.put("hideBlockedUsers", q.hideBlockedUsers)
        s.put("roles", set: q.roles)
        s.put("friendsOnly", q.friendsOnly)
        s.put("tags", set: q.tags)
        s.put("withTags", q.withTags)
        s.put("uids", set: q.uids)
        s.put("sortBy", q.sortBy)
        s.put("sortOrder", q.sortOrder?.rawValue)
        return SnapshotKey(.users, s)
    }

    /// The next page in two phases: the cached page (first, even when empty), then the server's.
    ///
    ///     request.fetchNext(onCachedUsers: { render($0) }, onServerUsers: { reconcile($0) },
    ///                       onError: { print($0?.errorCode ?? "") })
    public func fetchNext(onCachedUsers: @escaping @Sendable ([User]) -> Void,
                          onServerUsers: @escaping @Sendable ([User]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: true, onCached: onCachedUsers, onServer: onServerUsers, onError: onError)
    }

    /// The classic call: the server's page only, never a cached result.
    ///
    ///     request.fetchNext(onSuccess: { users in show(users) }, onError: { _ in })
    public func fetchNext(onSuccess: @escaping @Sendable ([User]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: false, onCached: nil, onServer: onSuccess, onError: onError)
    }

    /// Both phases of `fetchNext` as one value.
    ///
    ///     let result = await request.fetchNext()
    ///     render(result.cached ?? []); if let users = try? result.server.get() { reconcile(users) }
    public func fetchNext() async -> TwoPhaseResult<User> {
        await core.collecting(.next)
    }

    /// The phases of `fetchNext` as they arrive; offline, the stream ends with the error.
    ///
    ///     for try await phase in request.nextPhases() { if case .server(let users) = phase { reconcile(users) } }
    public func nextPhases() -> AsyncThrowingStream<ReadPhase<User>, any Error> {
        core.streaming(.next)
    }
}
