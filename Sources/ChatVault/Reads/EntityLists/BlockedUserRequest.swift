import Foundation
import VaultStore

/// A paged read of blocked users (`BlockedUserRequest`, singular "User" as in the SDK).
///
///     let request = BlockedUserRequest.BlockedUserRequestBuilder(limit: 30)
///         .set(direction: .byMe)
///         .build()
///     request.fetchNext(onCachedUsers: { cached in render(cached) },
///                       onServerUsers: { server in reconcile(server) },   // keyed by uid
///                       onError: { error in showOffline(error) })
///
/// The exception among the entity lists: the cached page is not a snapshot but the SDK's own
/// blocked-users list, refreshed at login and on each catch-up sync and updated by
/// `blockUsers` / `unblockUsers` once the server accepts. The **first** cached page holds the
/// whole list and later pages are empty.
///
/// That list holds the users *I* blocked, so `.byMe` and `.both` (the default) show it; the
/// cache does not know who blocked me, so `.me` has an empty cached page, and so does a keyword
/// search. The server page writes through by refreshing the stored profiles of users already on
/// the list; the list itself changes only at the points above. A second fetch while one is in
/// flight returns an empty server result (no cached phase).
public final class BlockedUserRequest: Sendable {
    /// Builds a `BlockedUserRequest` (`BlockedUserRequest.BlockedUserRequestBuilder()` in the SDK).
    public final class BlockedUserRequestBuilder {
        private var query = BlockedUserQuery()
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

        /// Page size of the server phase, 1 to 100 (default 30).
        @discardableResult public func set(limit: Int) -> Self { query.limit = EntityListLimit.clamp(limit); return self }
        /// Users I blocked (`.byMe`), who blocked me (`.me`, no cached page) or both (default).
        @discardableResult public func set(direction: BlockedDirection) -> Self { query.direction = direction; return self }
        /// Server-only: the cached page is empty.
        @discardableResult public func set(searchKeyword: String) -> Self { query.searchKeyword = searchKeyword; return self }

        /// The request, reading through the builder's vault (or `CometChat.offlineVault`).
        public func build() -> BlockedUserRequest {
            BlockedUserRequest(vault: vault ?? CometChat.offlineVault, query: query)
        }
    }

    /// The settings this request was built with.
    public let query: BlockedUserQuery
    let core: EntityListCore<User>

    init(vault: OfflineVault?, query: BlockedUserQuery) {
        self.query = query
        let q = query
        let answersFromCache = q.direction != .me && q.searchKeyword?.isEmpty != false
        core = EntityListCore(
            vault: vault, busy: .emptyServerResult,
            caching: .own(
                cached: { db, context, pageIndex in
                    guard answersFromCache, pageIndex == 0 else { return [] }
                    return try BlockedUserRows.all(decoder: context.trustedDecoder, in: db)
                },
                writeThrough: { db, wire, users, _ in
                    let current = zip(users, wire).filter { $0.0.blockedByMe }.map { BlockedUserRow(uid: $0.0.uid, wire: $0.1) }
                    try BlockedUserRows.updateProfiles(current, in: db)
                }),
            fetch: { backend, _, cursor async throws(BackendError) -> WirePage in
                var page = q
                page.cursor = cursor
                return try await backend.blockedUsers(page)
            },
            decode: { decoder, value throws(WireError) -> User in try decoder.user(value) })
    }

    /// The next page in two phases: the cached page (the whole blocked list on the first fetch,
    /// empty later), then the server's.
    ///
    ///     request.fetchNext(onCachedUsers: { render($0) }, onServerUsers: { reconcile($0) },
    ///                       onError: { print($0?.errorCode ?? "") })
    public func fetchNext(onCachedUsers: @escaping @Sendable ([User]) -> Void,
                          onServerUsers: @escaping @Sendable ([User]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: true, onCached: onCachedUsers, onServer: onServerUsers, onError: onError)
    }

    /// The classic call: the server's page only, never a cached result (the SDK hands an optional
    /// list here).
    ///
    ///     request.fetchNext(onSuccess: { users in show(users ?? []) }, onError: { _ in })
    public func fetchNext(onSuccess: @escaping @Sendable ([User]?) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: false, onCached: nil, onServer: { onSuccess($0) }, onError: onError)
    }

    /// Both phases of `fetchNext` as one value.
    ///
    ///     let result = await request.fetchNext()
    public func fetchNext() async -> TwoPhaseResult<User> {
        await core.collecting(.next)
    }

    /// The phases of `fetchNext` as they arrive; offline, the stream ends with the error.
    ///
    ///     for try await phase in request.nextPhases() { … }
    public func nextPhases() -> AsyncThrowingStream<ReadPhase<User>, any Error> {
        core.streaming(.next)
    }
}
