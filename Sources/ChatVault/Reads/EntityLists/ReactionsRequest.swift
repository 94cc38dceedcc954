import Foundation

/// Builds a `ReactionsRequest`: a top-level class, as in the SDK (`ReactionsRequestBuilder()`).
///
///     let request = ReactionsRequestBuilder()
///         .set(messageId: message.id)
///         .set(reaction: "👍")
///         .set(limit: 20)
///         .build()
public final class ReactionsRequestBuilder {
    private var query = ReactionQuery(messageId: 0)
    private let vault: OfflineVault?

    /// - Parameter vault: the engine to read through; nil means `CometChat.offlineVault`.
    public init(vault: OfflineVault? = nil) {
        self.vault = vault
    }

    /// Page size, 1 to 100 (default 30).
    @discardableResult public func set(limit: Int) -> Self { query.limit = EntityListLimit.clamp(limit); return self }
    /// The message whose reactions are read.
    @discardableResult public func set(messageId: Int) -> Self { query.messageId = messageId; return self }
    /// Only this reaction (an emoji).
    @discardableResult public func set(reaction: String) -> Self { query.reaction = reaction; return self }

    /// The request, reading through the builder's vault (or `CometChat.offlineVault`).
    public func build() -> ReactionsRequest {
        ReactionsRequest(vault: vault ?? CometChat.offlineVault, query: query)
    }
}

/// A paged read of one message's reactions (`ReactionsRequest`), in both directions: `fetchNext`
/// pages forward from the oldest reaction, `fetchPrevious` backward from the newest.
///
///     let request = ReactionsRequestBuilder().set(messageId: 42).build()
///     request.fetchPrevious(onCachedReactions: { cached in render(cached) },
///                           onServerReactions: { server in reconcile(server) },   // keyed by id
///                           onError: { error in showOffline(error) })
///
/// The cached phase replays the snapshot recorded online for the **same builder settings**, and
/// each direction keeps its own pages: `fetchPrevious` never replays what `fetchNext` recorded.
/// Run one fetch at a time: a second one (in either direction) while the first is in flight fails
/// with `ERROR_REQUEST_IN_PROGRESS`.
public final class ReactionsRequest: Sendable {
    /// The settings this request was built with (`direction` is set per fetch).
    public let query: ReactionQuery
    let core: EntityListCore<Reaction>

    init(vault: OfflineVault?, query: ReactionQuery) {
        self.query = query
        let q = query
        let keys = Dictionary(uniqueKeysWithValues: PageDirection.allCases.map { ($0, Self.snapshotKey(q, direction: $0)) })
        core = EntityListCore(
            vault: vault, busy: .fail, caching: .snapshot(key: { keys[$0] ?? nil }),
            fetch: { backend, direction, cursor async throws(BackendError) -> WirePage in
                var page = q
                page.direction = direction
                page.cursor = cursor
                return try await backend.reactions(page)
            },
            decode: { decoder, value throws(WireError) -> Reaction in try decoder.reaction(value) })
    }

    /// The snapshot of one direction for these settings.
    static func snapshotKey(_ q: ReactionQuery, direction: PageDirection) -> SnapshotKey? {
        var s = SnapshotSettings()
        s.put("messageId", q.messageId)
        s.put("reaction", q.reaction)
        s.put("limit", q.limit)
        s.put("direction", direction.rawValue)
        return SnapshotKey(.reactions, s)
    }

    // MARK: Two-phase overloads

    /// The next (newer) page in two phases: the cached page (first, even when empty), then the
    /// server's.
    ///
    ///     request.fetchNext(onCachedReactions: { render($0) }, onServerReactions: { reconcile($0) },
    ///                       onError: { print($0?.errorCode ?? "") })
    public func fetchNext(onCachedReactions: @escaping @Sendable ([Reaction]) -> Void,
                          onServerReactions: @escaping @Sendable ([Reaction]) -> Void,
                          onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: true, onCached: onCachedReactions, onServer: onServerReactions, onError: onError)
    }

    /// The previous (older) page in two phases.
    ///
    ///     request.fetchPrevious(onCachedReactions: { render($0) }, onServerReactions: { reconcile($0) },
    ///                           onError: { print($0?.errorCode ?? "") })
    public func fetchPrevious(onCachedReactions: @escaping @Sendable ([Reaction]) -> Void,
                              onServerReactions: @escaping @Sendable ([Reaction]) -> Void,
                              onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.previous, cachedPhase: true, onCached: onCachedReactions, onServer: onServerReactions, onError: onError)
    }

    // MARK: Classic overloads (never a cached result)

    /// The classic call: the server's next page only.
    ///
    ///     request.fetchNext(onSuccess: { reactions in show(reactions) }, onError: { _ in })
    public func fetchNext(onSuccess: @escaping @Sendable ([Reaction]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.next, cachedPhase: false, onCached: nil, onServer: onSuccess, onError: onError)
    }

    /// The classic call: the server's previous page only.
    ///
    ///     request.fetchPrevious(onSuccess: { reactions in show(reactions) }, onError: { _ in })
    public func fetchPrevious(onSuccess: @escaping @Sendable ([Reaction]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        core.start(.previous, cachedPhase: false, onCached: nil, onServer: onSuccess, onError: onError)
    }

    // MARK: async/await and AsyncSequence

    /// Both phases of `fetchNext` as one value.
    ///
    ///     let result = await request.fetchNext()
    public func fetchNext() async -> TwoPhaseResult<Reaction> {
        await core.collecting(.next)
    }

    /// Both phases of `fetchPrevious` as one value.
    ///
    ///     let result = await request.fetchPrevious()
    public func fetchPrevious() async -> TwoPhaseResult<Reaction> {
        await core.collecting(.previous)
    }

    /// The phases of `fetchNext` as they arrive; offline, the stream ends with the error.
    ///
    ///     for try await phase in request.nextPhases() { … }
    public func nextPhases() -> AsyncThrowingStream<ReadPhase<Reaction>, any Error> {
        core.streaming(.next)
    }

    /// The phases of `fetchPrevious` as they arrive.
    ///
    ///     for try await phase in request.previousPhases() { … }
    public func previousPhases() -> AsyncThrowingStream<ReadPhase<Reaction>, any Error> {
        core.streaming(.previous)
    }
}
