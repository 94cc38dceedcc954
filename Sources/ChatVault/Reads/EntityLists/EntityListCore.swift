import Foundation
import Synchronization
import VaultStore

/// Where one paging direction of an entity-list request stands.
struct ListPaging: Sendable, Equatable {
    /// The page the next fetch reads: how many pages this request object has gone through in
    /// this direction (each server page, and offline each replayed page).
    var pageIndex = 0
    /// The server's token for that page (nil: the first page).
    var cursor: String?
    /// The server said no page follows the last one.
    var exhausted = false
    /// The token of the last page, asked again past the end (see `EntityListCore`).
    var lastCursor: String?

    /// After a page that came with `next` (the server's, or offline the one recorded with it).
    func advanced(next: String?) -> ListPaging {
        ListPaging(pageIndex: pageIndex + 1, cursor: next, exhausted: next == nil, lastCursor: exhausted ? lastCursor : cursor)
    }
}

/// How an entity list answers its cached phase.
enum ListCaching<Item: Sendable>: Sendable {
    /// Replays the snapshot recorded online for the same builder settings, page by page, and
    /// records the server's pages. The key is nil while a server-only setting is active: then the
    /// cached page is empty and nothing is recorded.
    case snapshot(key: @Sendable (PageDirection) -> SnapshotKey?)
    /// A list of its own (the blocked users): the cached page for a page index, and what the
    /// server's page writes through.
    case own(cached: @Sendable (Database, ReadContext, _ pageIndex: Int) throws -> [Item],
             writeThrough: @Sendable (Database, [JSONValue], [Item], ReadContext) throws -> Void)
}

/// The engine behind every entity-list request (users, blocked users, groups, members, banned
/// members, reactions, the notification feed): paging state per direction, the in-flight gate,
/// and a `TwoPhasePlan` per fetch run by `runTwoPhase`.
///
/// Paging: a fetch reads page `pageIndex` of its direction. A server page moves to the next
/// index with the server's cursor. Offline, a replayed non-empty page moves on too, with the
/// cursor recorded beside it, so the next fetch (offline or back online) reads the following
/// slice; an empty cached page, a server error or a refused fetch leaves the position alone.
/// Once the server has said the list ends, a later fetch still makes a round trip (asking the
/// last page again), so offline it fails as every read does, and online it answers with an empty
/// page (recorded as such).
final class EntityListCore<Item: Sendable>: Sendable {
    typealias Fetch = @Sendable (any ChatBackend, PageDirection, _ cursor: String?) async throws(BackendError) -> WirePage
    typealias Decode = @Sendable (WireDecoder, JSONValue) throws(WireError) -> Item

    private let vault: OfflineVault?
    private let busy: BusyPolicy
    private let caching: ListCaching<Item>
    private let fetch: Fetch
    private let decode: Decode
    private let gate = InFlightGate()
    private let paging = Mutex<[PageDirection: ListPaging]>([:])

    init(vault: OfflineVault?, busy: BusyPolicy, caching: ListCaching<Item>, fetch: @escaping Fetch, decode: @escaping Decode) {
        self.vault = vault
        self.busy = busy
        self.caching = caching
        self.fetch = fetch
        self.decode = decode
    }

    /// Where a direction stands now.
    func position(_ direction: PageDirection) -> ListPaging {
        paging.withLock { $0[direction] ?? ListPaging() }
    }

    // MARK: The three delivery forms

    /// Closures, through the vault's callback executor.
    func start(_ direction: PageDirection, cachedPhase: Bool, onCached: (@Sendable ([Item]) -> Void)?,
               onServer: @escaping @Sendable ([Item]) -> Void, onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault else {
            let error = Self.noVault
            return CallbackExecutor.main.execute { onError(error) }
        }
        let emit = vault.reads.deliver(onCached: onCached, onServer: onServer, onError: onError)
        Task { await self.run(direction, vault: vault, cachedPhase: cachedPhase, emit: emit) }
    }

    /// async/await: both phases in one value.
    func collecting(_ direction: PageDirection) async -> TwoPhaseResult<Item> {
        guard let vault else { return TwoPhaseResult(cached: nil, server: .failure(Self.noVault)) }
        return await vault.reads.collect { emit in await self.run(direction, vault: vault, cachedPhase: true, emit: emit) }
    }

    /// AsyncSequence: the phases as they arrive; a failure ends the stream with the error.
    func streaming(_ direction: PageDirection) -> AsyncThrowingStream<ReadPhase<Item>, any Error> {
        guard let vault else { return AsyncThrowingStream { $0.finish(throwing: Self.noVault) } }
        return vault.reads.phaseStream { emit in await self.run(direction, vault: vault, cachedPhase: true, emit: emit) }
    }

    static var noVault: CometChatException {
        CometChatException(.userNotLoggedIn, "no OfflineVault: pass one to the builder or set CometChat.offlineVault")
    }

    // MARK: One fetch

    private func run(_ direction: PageDirection, vault: OfflineVault, cachedPhase: Bool,
                     emit: @escaping @Sendable (ReadEvent<Item>) -> Void) async {
        // The position is read once the fetch holds the gate (by whichever step runs first), so
        // a fetch refused as in flight never reads or moves it.
        let begun = Mutex<ListPaging?>(nil)
        let at: @Sendable () -> ListPaging = { [self] in
            begun.withLock { state in
                if let state { return state }
                let current = position(direction)
                state = current
                return current
            }
        }
        let answered = Mutex<String?>(nil)
        let replayed = Mutex<SnapshotPage?>(nil)
        let cachedCount = Mutex(0)
        let backend = vault.backend
        let fetch = self.fetch
        let decode = self.decode

        var cached: (@Sendable (Database, ReadContext) throws -> [Item])?
        var writeThrough: (@Sendable (Database, [JSONValue], [Item], ReadContext) throws -> Void)?
        switch caching {
        case .snapshot(let keyFor):
            if let key = keyFor(direction) {
                cached = { _, context in
                    // A replay prunes expired pages and marks the key used, so it runs on the
                    // writer (the reader connection is query-only); the writer never waits on
                    // the reader, so this cannot deadlock.
                    guard let cache = context.cache else { return [] }
                    let index = at().pageIndex
                    let page = try cache.writer.sync { db in
                        try db.transaction { try SnapshotRows.replay(key, page: index, now: context.now, config: context.config, in: db) }
                    }
                    guard let page else { return [] }
                    var items: [Item] = []
                    items.reserveCapacity(page.items.count)
                    for value in page.items { items.append(try decode(context.trustedDecoder, value)) }
                    replayed.withLock { $0 = page }
                    return items
                }
                writeThrough = { db, wire, _, context in
                    let next = answered.withLock { $0 }
                    try SnapshotRows.record(key, page: at().pageIndex, SnapshotPage(items: wire, next: next),
                                            now: context.now, config: context.config, in: db)
                }
            }
        case .own(let read, let write):
            cached = { db, context in try read(db, context, at().pageIndex) }
            writeThrough = write
        }

        let plan = TwoPhasePlan<Item>(
            cached: cached,
            server: { () async throws(BackendError) -> WirePage in
                let position = at()
                if position.exhausted {
                    // Past the end: a genuine round trip, whose items are not a next page.
                    _ = try await fetch(backend, direction, position.lastCursor)
                    answered.withLock { $0 = nil }
                    return WirePage(items: [], nextCursor: nil)
                }
                let page = try await fetch(backend, direction, position.cursor)
                answered.withLock { $0 = page.nextCursor }
                return page
            },
            decode: { value, context throws(WireError) -> Item in try decode(context.decoder, value) },
            writeThrough: writeThrough,
            afterCached: { items in cachedCount.withLock { $0 = items.count } },
            afterServer: { [self] wire, _ in
                let moved = at().advanced(next: wire.nextCursor)
                paging.withLock { $0[direction] = moved }
            })

        let own: Bool
        if case .own = caching { own = true } else { own = false }
        await vault.reads.runTwoPhase(plan, gate: gate, busy: busy, cachedPhase: cachedPhase) { [self] event in
            if case .failed(let error) = event, error.errorCode == OfflineErrorCode.internetUnavailable.rawValue {
                // Offline, paging continues through the cache.
                if own {
                    if cachedCount.withLock({ $0 }) > 0 {
                        var moved = at()
                        moved.pageIndex += 1
                        paging.withLock { $0[direction] = moved }
                    }
                } else if let page = replayed.withLock({ $0 }), !page.items.isEmpty {
                    let moved = at().advanced(next: page.next)
                    paging.withLock { $0[direction] = moved }
                }
            }
            emit(event)
        }
    }
}

/// The page size every entity-list builder accepts: the SDK's range, 1 to 100.
enum EntityListLimit {
    static func clamp(_ limit: Int) -> Int { min(max(limit, 1), 100) }
}
