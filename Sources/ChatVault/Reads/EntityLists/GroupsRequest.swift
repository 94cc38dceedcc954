import Foundation

/// A paged read of groups (`GroupsRequest`).
///
///     let request = GroupsRequest.GroupsRequestBuilder(limit: 30)
///         .set(joinedOnly: true)
///         .build()
///     request.fetchNext(onCachedGroups: { cached in render(cached) },
///                       onServerGroups: { server in reconcile(server) },   // keyed by guid
///                       onError: { error in showOffline(error) })
///
/// The cached phase replays the snapshot recorded online for the **same builder settings**,
/// page by page: a list never fetched online has an empty cached page, and a keyword search is
/// never snapshotted. A second fetch while one is in flight returns an empty server result.
public final class GroupsRequest: Sendable {
    /// Builds a `GroupsRequest` (`GroupsRequest.GroupsRequestBuilder(limit:)` in the SDK).
    public final class GroupsRequestBuilder {
        private var query = GroupQuery()
        private let vault: OfflineVault?

        /// - Parameters:
        ///   - limit: page size, 1 to 100.
        ///   - vault: the engine to read through; nil means `CometChat.offlineVault`.
        public init(limit: Int, vault: OfflineVault? = nil) {
            self.vault = vault
            query.limit = EntityListLimit.clamp(limit)
        }

        /// Page size, 1 to 100.
        @discardableResult public func set(limit: Int) -> Self { query.limit = EntityListLimit.clamp(limit); return self }
        /// Server-only: the cached page is empty.
        @discardableResult public func set(searchKeyword: String) -> Self { query.searchKeyword = searchKeyword; return self }
        /// Only groups the user is a member of.
        @discardableResult public func set(joinedOnly: Bool) -> Self { query.joinedOnly = joinedOnly; return self }
        /// Only groups carrying any of these tags.
        @discardableResult public func set(tags: [String]) -> Self { query.tags = tags; return self }
        /// Enrichment: ask for each group's tags.
        @discardableResult public func withTags(_ withTags: Bool) -> Self { query.withTags = withTags; return self }

        /// The request, reading through the builder's vault (or `CometChat.offlineVault`).
        public func build() -> GroupsRequest {
            GroupsRequest(vault: vault ?? CometChat.offlineVault, query: query)
        }
    }

    /// The settings this request was built with.
    public let query: GroupQuery
    let core: EntityListCore<Group>

    init(vault: OfflineVault?, query: GroupQuery) {
        self.query = query
        let q = query
        let key = Self.snapshotKey(q)
        core = EntityListCore(
            vault: vault, busy: .emptyServerResult, caching: .snapshot(key: { _ in key }),
            fetch: { backend, _, cursor async throws(BackendError) -> WirePage in
                var page = q
                page.cursor = cursor
                return try await backend.groups(page)
            },
            decode: { decoder, value throws(WireError) -> Group in try decoder.group(value) })
    }

    /// The snapshot these settings replay, or nil when a server-only setting is active.
    static func snapshotKey(_ q: GroupQuery) -> SnapshotKey? {
        if q.searchKeyword?.isEmpty == false { return nil }
        var s = SnapshotSettings()
        s.put("limit", q.limit)
        s.put("joinedOnly", q.joinedOnly)
        s.put("tags", set: q.tags)
        s.put("withTags", q.withTags)
        return SnapshotKey(.groups, s)
    }

    /// The next page in two phases: the cached page (first, even when empty), then the server's.
    ///
    ///     request.fetchNext(onCachedGroups: { render($0) }, onServerGroups: { reconcile($0) },
    ///                       onError: { print($0?.errorCode ?? "") })
    public func fetchNext(onCachedGroups: @escaping @Sendable ([Group]) -> Void,
                          onServerGroups: @escaping @Sendable ([Group]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: true, onCached: onCachedGroups, onServer: onServerGroups, onError: onError)
    }

    /// The classic call: the server's page only, never a cached result.
    ///
    ///     request.fetchNext(onSuccess: { groups in show(groups) }, onError: { _ in })
    public func fetchNext(onSuccess: @escaping @Sendable ([Group]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: false, onCached: nil, onServer: onSuccess, onError: onError)
    }

    /// Both phases of `fetchNext` as one value.
    ///
    ///     let result = await request.fetchNext()
    public func fetchNext() async -> TwoPhaseResult<Group> {
        await core.collecting(.next)
    }

    /// The phases of `fetchNext` as they arrive; offline, the stream ends with the error.
    ///
    ///     for try await phase in request.nextPhases() { … }
    public func nextPhases() -> AsyncThrowingStream<ReadPhase<Group>, any Error> {
        core.streaming(.next)
    }
}
