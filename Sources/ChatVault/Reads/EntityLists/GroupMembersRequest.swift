import Foundation

/// A paged read of a group's members (`GroupMembersRequest`).
///
///     let request = GroupMembersRequest.GroupMembersRequestBuilder(guid: "team")
///         .set(limit: 30)
///         .set(scopes: ["admin", "moderator"])
///         .build()
///     request.fetchNext(onCachedGroupMembers: { cached in render(cached) },
///                       onServerGroupMembers: { server in reconcile(server) },   // keyed by uid
///                       onError: { error in showOffline(error) })
///
/// The cached phase replays the snapshot recorded online for the **same builder settings** (the
/// group included), page by page. A keyword search or a presence filter (`set(status:)`) is never
/// snapshotted, so it has no cached page. A second fetch while one is in flight returns an empty
/// server result.
public final class GroupMembersRequest: Sendable {
    /// Builds a `GroupMembersRequest` (`GroupMembersRequest.GroupMembersRequestBuilder(guid:)` in
    /// the SDK).
    public final class GroupMembersRequestBuilder {
        private var query: GroupMemberQuery
        private let vault: OfflineVault?

        /// - Parameters:
        ///   - guid: the group.
        ///   - vault: the engine to read through; nil means `CometChat.offlineVault`.
        public init(guid: String, vault: OfflineVault? = nil) {
            query = GroupMemberQuery(guid: guid)
            self.vault = vault
        }

        /// Page size, 1 to 100 (default 30).
        @discardableResult public func set(limit: Int) -> Self { query.limit = EntityListLimit.clamp(limit); return self }
        /// Server-only: the cached page is empty.
        @discardableResult public func set(searchKeyword: String) -> Self { query.searchKeyword = searchKeyword; return self }
        /// Only members with these scopes (`"admin"`, `"moderator"`, `"participant"`).
        @discardableResult public func set(scopes: [String]) -> Self { query.scopes = scopes; return self }
        /// Presence filter; server-only: the cached page is empty.
        @discardableResult public func set(status: UserStatus) -> Self { query.status = status; return self }

        /// The request, reading through the builder's vault (or `CometChat.offlineVault`).
        public func build() -> GroupMembersRequest {
            GroupMembersRequest(vault: vault ?? CometChat.offlineVault, query: query)
        }
    }

    /// The settings this request was built with.
    public let query: GroupMemberQuery
    let core: EntityListCore<GroupMember>

    init(vault: OfflineVault?, query: GroupMemberQuery) {
        self.query = query
        let q = query
        let key = Self.snapshotKey(q, kind: .groupMembers)
        core = EntityListCore(
            vault: vault, busy: .emptyServerResult, caching: .snapshot(key: { _ in key }),
            fetch: { backend, _, cursor async throws(BackendError) -> WirePage in
                var page = q
                page.cursor = cursor
                return try await backend.groupMembers(page)
            },
            decode: { decoder, value throws(WireError) -> GroupMember in try decoder.groupMember(value) })
    }

    /// The snapshot these settings replay (members or banned members), or nil when a server-only
    /// setting is active.
    static func snapshotKey(_ q: GroupMemberQuery, kind: SnapshotKind) -> SnapshotKey? {
        if q.searchKeyword?.isEmpty == false || q.status != nil { return nil }
        var s = SnapshotSettings()
        s.put("guid", q.guid)
        s.put("limit", q.limit)
        s.put("scopes", set: q.scopes)
        return SnapshotKey(kind, s)
    }

    /// The next page in two phases: the cached page (first, even when empty), then the server's.
    ///
    ///     request.fetchNext(onCachedGroupMembers: { render($0) }, onServerGroupMembers: { reconcile($0) },
    ///                       onError: { print($0?.errorCode ?? "") })
    public func fetchNext(onCachedGroupMembers: @escaping @Sendable ([GroupMember]) -> Void,
                          onServerGroupMembers: @escaping @Sendable ([GroupMember]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: true, onCached: onCachedGroupMembers, onServer: onServerGroupMembers, onError: onError)
    }

    /// The classic call: the server's page only, never a cached result.
    ///
    ///     request.fetchNext(onSuccess: { members in show(members) }, onError: { _ in })
    public func fetchNext(onSuccess: @escaping @Sendable ([GroupMember]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: false, onCached: nil, onServer: onSuccess, onError: onError)
    }

    /// Both phases of `fetchNext` as one value.
    ///
    ///     let result = await request.fetchNext()
    public func fetchNext() async -> TwoPhaseResult<GroupMember> {
        await core.collecting(.next)
    }

    /// The phases of `fetchNext` as they arrive; offline, the stream ends with the error.
    ///
    ///     for try await phase in request.nextPhases() { … }
    public func nextPhases() -> AsyncThrowingStream<ReadPhase<GroupMember>, any Error> {
        core.streaming(.next)
    }
}
