import Foundation

/// A paged read of the users banned from a group (`BannedGroupMembersRequest`).
///
///     let request = BannedGroupMembersRequest.BannedGroupMembersRequestBuilder(guid: "team")
///         .set(limit: 30)
///         .build()
///     request.fetchNext(onCachedBannedGroupMembers: { cached in render(cached) },
///                       onServerBannedGroupMembers: { server in reconcile(server) },   // keyed by uid
///                       onError: { error in showOffline(error) })
///
/// The cached phase replays the snapshot recorded online for the **same builder settings** (the
/// group included), page by page; a keyword search is never snapshotted. A second fetch while one
/// is in flight returns an empty server result.
public final class BannedGroupMembersRequest: Sendable {
    /// Builds a `BannedGroupMembersRequest`
    /// (`BannedGroupMembersRequest.BannedGroupMembersRequestBuilder(guid:)` in the SDK).
    public final class BannedGroupMembersRequestBuilder {
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
        /// Only users banned with these scopes.
        @discardableResult public func set(scopes: [String]) -> Self { query.scopes = scopes; return self }

        /// The request, reading through the builder's vault (or `CometChat.offlineVault`).
        public func build() -> BannedGroupMembersRequest {
            BannedGroupMembersRequest(vault: vault ?? CometChat.offlineVault, query: query)
        }
    }

    /// The settings this request was built with.
    public let query: GroupMemberQuery
    let core: EntityListCore<GroupMember>

    init(vault: OfflineVault?, query: GroupMemberQuery) {
        self.query = query
        let q = query
        let key = GroupMembersRequest.snapshotKey(q, kind: .bannedGroupMembers)
        core = EntityListCore(
            vault: vault, busy: .emptyServerResult, caching: .snapshot(key: { _ in key }),
            fetch: { backend, _, cursor async throws(BackendError) -> WirePage in
                var page = q
                page.cursor = cursor
                return try await backend.bannedGroupMembers(page)
            },
            decode: { decoder, value throws(WireError) -> GroupMember in try decoder.groupMember(value) })
    }

    /// The next page in two phases: the cached page (first, even when empty), then the server's.
    ///
    ///     request.fetchNext(onCachedBannedGroupMembers: { render($0) },
    ///                       onServerBannedGroupMembers: { reconcile($0) },
    ///                       onError: { print($0?.errorCode ?? "") })
    public func fetchNext(onCachedBannedGroupMembers: @escaping @Sendable ([GroupMember]) -> Void,
                          onServerBannedGroupMembers: @escaping @Sendable ([GroupMember]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: true, onCached: onCachedBannedGroupMembers, onServer: onServerBannedGroupMembers, onError: onError)
    }

    /// The classic call: the server's page only, never a cached result.
    ///
    ///     request.fetchNext(onSuccess: { banned in show(banned) }, onError: { _ in })
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
