import Foundation
import Synchronization
import VaultStore

/// The realtime ingest engine: validates each event the connection delivers, writes it to the
/// cache in one transaction, then tells the message listeners and streams, one event at a time in
/// arrival order (the next event is taken only once this one's write has committed).
///
/// An event that fails validation is dropped and counted (`droppedEvents`); it never stops the
/// stream. A failed write (a busy or full disk) leaves the cache as it was; the event is still
/// delivered (the next read brings the server's version).
///
/// It holds what it works with (the cache writer, the media cache that hydrates what it delivers)
/// and the vault's session to find the logged-in user and their cache.
final class RealtimeIngest: Sendable {
    let listeners = ListenerRegistry<any CometChatMessageDelegate>()

    private let settings: VaultSettings
    private let wireLimits: WireLimits
    private let writer: CacheWriter
    private let media: MediaCache
    /// The vault's session: the logged-in user and their cache.
    private let session: VaultSession

    init(settings: VaultSettings, wireLimits: WireLimits, writer: CacheWriter, media: MediaCache, session: VaultSession) {
        self.settings = settings
        self.wireLimits = wireLimits
        self.writer = writer
        self.media = media
        self.session = session
    }

    private struct State {
        var dropped = 0
        var ingested = 0
    }

    private let state = Mutex(State())
    private let streams = EventStreams<MessageEvent>()

    /// Events refused by validation since the engine was made.
    var droppedEvents: Int { state.withLock { $0.dropped } }
    /// Events validated and delivered since the engine was made.
    var ingestedEvents: Int { state.withLock { $0.ingested } }

    func countDropped() { state.withLock { $0.dropped += 1 } }
    func countIngested() { state.withLock { $0.ingested += 1 } }

    /// A new stream of message events; it ends when the consumer stops iterating.
    func stream() -> AsyncStream<MessageEvent> {
        streams.make()
    }

    func yield(_ event: MessageEvent) {
        streams.yield(event)
    }
}

extension RealtimeIngest {
    /// Validates, writes and delivers one realtime event (the link's event loop awaits it).
    func ingest(_ event: RealtimeEvent) async {
        // Events that reach no logged-in user (after logout) go nowhere.
        guard let me = session.userId else { return }
        let parsed: RealtimeWire.Parsed
        do {
            guard let p = try RealtimeWire.parse(event, limits: wireLimits) else { return }
            parsed = p
        } catch {
            countDropped()
            return
        }
        await writer.commit(realtime: parsed, me: me, cache: session.openCache(of: me), limits: wireLimits)
        // Counted once its delivery is posted: a test that sees the count and then drains the
        // executor has heard it.
        countIngested()
    }

    /// Delivers each committed realtime event and sync page to the message listeners and streams.
    func committed(_ committed: CacheWriter.Committed) {
        switch committed {
        case .realtime(let parsed, _): self.deliverRealtime(parsed)
        case .syncPage(let applied): self.deliverSynced(applied.inserted)
        case .stored, .removed, .media: break // answers to the app's own calls: no listener event
        }
    }

    /// Tells the message listeners (`onMessagesSynced`) and streams (`.synced`) about messages the
    /// catch-up sync wrote, after its page committed.
    func deliverSynced(_ messages: [BaseMessage]) {
        guard !messages.isEmpty else { return }
        for m in messages { m.source = .sync }
        // Metadata only: a synced message's bytes download when its chat is opened online.
        media.hydrate(messages)
        let listeners = self.listeners.live()
        let ingest = self
        settings.callbackExecutor.execute {
            for listener in listeners { Self.tell(listener, .synced(messages)) }
            ingest.yield(.synced(messages))
        }
    }

    private func deliverRealtime(_ parsed: RealtimeWire.Parsed) {
        let listeners = self.listeners.live()
        let event: MessageEvent
        switch parsed {
        case .received(_, let m): event = .received(m)
        case .edited(_, let m): event = .edited(m)
        case .deleted(_, let m): event = .deleted(m)
        case .reaction(let added, let e, _): event = added ? .reactionAdded(e) : .reactionRemoved(e)
        case .receipt(let r): event = r.receiptType == .read ? .read(r) : .delivered(r)
        }
        let ingest = self
        settings.callbackExecutor.execute {
            for listener in listeners { Self.tell(listener, event) }
            ingest.yield(event)
        }
    }

    static func tell(_ listener: any CometChatMessageDelegate, _ event: MessageEvent) {
        switch event {
        case .received(let m):
            switch m {
            case let text as TextMessage: listener.onTextMessageReceived(textMessage: text)
            case let media as MediaMessage: listener.onMediaMessageReceived(mediaMessage: media)
            case let custom as CustomMessage: listener.onCustomMessageReceived(customMessage: custom)
            case let interactive as InteractiveMessage: listener.onInteractiveMessageReceived(interactiveMessage: interactive)
            default: break
            }
        case .edited(let m): listener.onMessageEdited(message: m)
        case .deleted(let m): listener.onMessageDeleted(message: m)
        case .reactionAdded(let e): listener.onMessageReactionAdded(reactionEvent: e)
        case .reactionRemoved(let e): listener.onMessageReactionRemoved(reactionEvent: e)
        case .delivered(let r): listener.onMessagesDelivered(receipt: r)
        case .read(let r): listener.onMessagesRead(receipt: r)
        case .synced(let messages): listener.onMessagesSynced(messages)
        }
    }
}

extension OfflineVault {
    /// Events refused by realtime validation (for tests and tools).
    package var droppedRealtimeEvents: Int { realtime.droppedEvents }

    /// What the vault's components do with each committed batch, in this order: media first (a
    /// delivered message carries its cached bytes' path), then the message listeners and streams,
    /// then eviction. Called once, from `init`.
    /// Each subscription holds the vault weakly (not the component): a component a task keeps
    /// alive past the vault is never reached from a freed writer.
    func subscribeToIncoming() {
        incoming.subscribe { [weak self] committed in self?.media.committed(committed) }
        incoming.subscribe { [weak self] committed in self?.realtime.committed(committed) }
        incoming.subscribe { [weak self] committed in self?.eviction.committed(committed) }
    }
}
