import Foundation
import Synchronization
import VaultStore

/// One phase of a two-phase read, as the `AsyncSequence` form yields them.
public enum ReadPhase<Item: Sendable>: Sendable {
    /// The page from the local cache: first, even when empty.
    case cached([Item])
    /// The server's copy of the same slice, already written through to the cache.
    case server([Item])
}

/// Everything one two-phase read produced (the async/await form).
public struct TwoPhaseResult<Item: Sendable>: Sendable {
    /// The cached page; nil when offline support is off (no cached phase at all).
    public var cached: [Item]?
    /// The server page, or why there is none (`ERROR_INTERNET_UNAVAILABLE` offline, a server
    /// error unchanged, `ERROR_REQUEST_IN_PROGRESS` for a second fetch in flight).
    public var server: Result<[Item], CometChatException>
}

/// What happened in a read, in order; delivered to closures, a stream or a result.
enum ReadEvent<Item: Sendable>: Sendable {
    case cached([Item])
    case server([Item])
    case failed(CometChatException)
}

/// What a request does when it is fetched while its previous fetch is still running.
enum BusyPolicy: Sendable {
    /// Messages, threads, reactions: `ERROR_REQUEST_IN_PROGRESS`.
    case fail
    /// Users, groups, members, banned members (and the other entity lists): an empty server result.
    case emptyServerResult
}

/// One fetch at a time per request object.
final class InFlightGate: Sendable {
    private let busy = Mutex(false)

    func enter() -> Bool {
        busy.withLock { b in
            if b { return false }
            b = true
            return true
        }
    }

    func leave() {
        busy.withLock { $0 = false }
    }
}

/// What every read needs from the engine at the moment it runs.
struct ReadContext: Sendable {
    /// The logged-in user (conversation ids, "mentions me", "unread").
    let me: String
    /// The open cache, when offline support is serving.
    let cache: VaultCache?
    /// Offline support is configured on (then a cached phase always happens, possibly empty).
    let offlineConfigured: Bool
    let decoder: WireDecoder
    let trustedDecoder: WireDecoder
    let now: Date
    let config: OfflineConfig
}

/// The steps of one two-phase read; each request type fills them in.
struct TwoPhasePlan<Item: Sendable>: Sendable {
    /// Reads the cached page (on the reader connection), or nil when a server-only filter makes
    /// the cached page empty.
    var cached: (@Sendable (Database, ReadContext) throws -> [Item])?
    /// Asks the server.
    var server: @Sendable () async throws(BackendError) -> WirePage
    /// Validates and decodes one server item (throws on a hostile payload).
    var decode: @Sendable (JSONValue, ReadContext) throws(WireError) -> Item
    /// Writes the validated server page through to the cache, reconciling the slice (on the
    /// writer connection, in one transaction).
    var writeThrough: (@Sendable (Database, [JSONValue], [Item], ReadContext) throws -> Void)?
    /// Bookkeeping after the cached page (a cursor for the next fetch).
    var afterCached: (@Sendable ([Item]) -> Void)?
    /// Bookkeeping after a server page (cursors, page counters).
    var afterServer: (@Sendable (WirePage, [Item]) -> Void)?
    /// Opening a chat online: in `.auto`, the server page's media downloads in the background.
    var downloadsMedia = false
    /// The messages among a written-through page's items (published as `CacheWriter.stored`).
    var storedMessages: (@Sendable ([Item]) -> [BaseMessage])?
    /// Removes, in the write-through's transaction after it, the cached messages of the slice the
    /// server's page shows are gone; returns their ids (published as `CacheWriter.removed`).
    var reconcile: (@Sendable (Database, [Item], ReadContext) throws -> [MessageID])?
}

/// The two-phase read every read of the API runs on (pages, lists, lookups): the cached page
/// first, then the server's copy of the same slice, validated and written through before it is
/// delivered, and published by the cache writer after its commit. It holds what it works with and
/// the vault's session, never the vault:
///
///     await reads.runTwoPhase(plan, gate: gate, busy: .fail) { event in … }
final class ReadEngine: Sendable {
    let settings: VaultSettings
    let config: OfflineConfig
    let wireLimits: WireLimits
    let backend: any ChatBackend
    let writer: CacheWriter
    let media: MediaCache
    private let audit: OpenAudit
    let session: VaultSession

    init(settings: VaultSettings, config: OfflineConfig, wireLimits: WireLimits, backend: any ChatBackend, writer: CacheWriter,
         media: MediaCache, audit: OpenAudit, session: VaultSession) {
        self.settings = settings
        self.config = config
        self.wireLimits = wireLimits
        self.backend = backend
        self.writer = writer
        self.media = media
        self.audit = audit
        self.session = session
    }
}

extension ReadEngine {
    /// The context of a read starting now.
    func readContext() -> ReadContext {
        ReadContext(me: session.userId ?? "", cache: session.openCache, offlineConfigured: config.enabled,
                    decoder: WireDecoder(limits: wireLimits), trustedDecoder: WireDecoder(limits: wireLimits, trusted: true),
                    now: settings.clock(), config: config)
    }

    /// Runs a two-phase read: the cached page first (even when empty) when offline support is
    /// on, then the server's copy of the same slice, written through before it is delivered.
    /// Offline, the read ends after the cached page with `ERROR_INTERNET_UNAVAILABLE`; a real
    /// server error arrives unchanged; a hostile payload is refused as a whole
    /// (`ERROR_INVALID_SERVER_RESPONSE`) and the cache is left as it was.
    /// - Parameter cachedPhase: false for the classic single-callback overloads, which never
    ///   deliver a cached result.
    func runTwoPhase<Item: Sendable>(_ plan: TwoPhasePlan<Item>, gate: InFlightGate, busy: BusyPolicy, cachedPhase: Bool = true,
                                     emit: @escaping @Sendable (ReadEvent<Item>) -> Void) async {
        guard gate.enter() else {
            switch busy {
            case .fail:
                emit(.failed(CometChatException(.requestInProgress, "a fetch on this request is still in flight")))
            case .emptyServerResult:
                emit(.server([]))
            }
            return
        }
        defer { gate.leave() }
        let context = readContext()

        if context.offlineConfigured && cachedPhase {
            var page: [Item] = []
            if let cache = context.cache, let read = plan.cached {
                // On this task's thread, waiting for the reader's queue: a cached page is a short
                // read (well under a millisecond), and handing it to the queue and back would cost
                // two thread switches, as much as the read itself.
                page = (try? cache.reader.sync { db in try read(db, context) }) ?? []
                audit.readServed()
            }
            media.hydrateItems(page)
            plan.afterCached?(page)
            emit(.cached(page))
        }

        let wire: WirePage
        do {
            wire = try await plan.server()
        } catch {
            emit(.failed(OfflineVault.exception(for: error)))
            return
        }
        var items: [Item] = []
        items.reserveCapacity(wire.items.count)
        do throws(WireError) {
            guard wire.items.count <= wireLimits.maxListCount else {
                throw WireError(entity: "page", field: "items", problem: .tooMany(limit: wireLimits.maxListCount))
            }
            for value in wire.items { items.append(try plan.decode(value, context)) }
        } catch {
            emit(.failed(CometChatException(.invalidServerResponse, error.description)))
            return
        }
        if let cache = context.cache, let write = plan.writeThrough {
            let values = wire.items
            let decoded = items
            // A failed write-through (a busy or full disk) leaves the cache as it was; the
            // server's answer is still delivered.
            let reconcile = plan.reconcile
            let removed = try? await cache.writer.run { db in
                try db.transaction { () throws -> [MessageID] in
                    try write(db, values, decoded, context)
                    return try reconcile?(db, decoded, context) ?? []
                }
            }
            if let removed {
                writer.stored(plan.storedMessages?(items) ?? [])
                writer.removed(removed)
            }
        }
        media.hydrateItems(items)
        if plan.downloadsMedia { media.autoDownload(items.compactMap { $0 as? BaseMessage }) }
        plan.afterServer?(wire, items)
        emit(.server(items))
    }

    /// Delivers events to closures through the callback executor, in order.
    func deliver<Item: Sendable>(onCached: (@Sendable ([Item]) -> Void)?, onServer: @escaping @Sendable ([Item]) -> Void,
                                 onError: @escaping @Sendable (CometChatException?) -> Void) -> @Sendable (ReadEvent<Item>) -> Void {
        let executor = settings.callbackExecutor
        return { event in
            switch event {
            case .cached(let items): if let onCached { executor.execute { onCached(items) } }
            case .server(let items): executor.execute { onServer(items) }
            case .failed(let error): executor.execute { onError(error) }
            }
        }
    }

    /// The `AsyncSequence` form: the phases as they come; a failure ends the stream with the error.
    func phaseStream<Item: Sendable>(_ run: @escaping @Sendable (@escaping @Sendable (ReadEvent<Item>) -> Void) async -> Void)
        -> AsyncThrowingStream<ReadPhase<Item>, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                await run { event in
                    switch event {
                    case .cached(let items): continuation.yield(.cached(items))
                    case .server(let items): continuation.yield(.server(items))
                    case .failed(let error): continuation.finish(throwing: error)
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The async/await form: both phases in one value.
    func collect<Item: Sendable>(_ run: @escaping @Sendable (@escaping @Sendable (ReadEvent<Item>) -> Void) async -> Void) async -> TwoPhaseResult<Item> {
        let result = Mutex(TwoPhaseResult<Item>(cached: nil, server: .success([])))
        await run { event in
            result.withLock { r in
                switch event {
                case .cached(let items): r.cached = items
                case .server(let items): r.server = .success(items)
                case .failed(let error): r.server = .failure(error)
                }
            }
        }
        return result.withLock { $0 }
    }
}

extension OfflineVault {
    /// The exception a backend failure becomes: no connection or no answer is
    /// `ERROR_INTERNET_UNAVAILABLE`; a server error keeps the server's code and message.
    static func exception(for error: BackendError) -> CometChatException {
        switch error {
        case .unreachable, .timedOut:
            return CometChatException(.internetUnavailable, "the server cannot be reached")
        case .server(let status, let code, _):
            // The server's code passes through when it looks like one; its free text never does
            // (a hostile server could echo content into it).
            return CometChatException(errorCode: safeCode(code), errorDescription: "The server refused the request.", details: "HTTP \(status)")
        }
    }
}
