import Foundation
import Synchronization
import VaultStore

/// Receives a two-phase `getConversation` lookup. Every method is optional.
///
///     final class ConversationLoader: ConversationDetailsListener {
///         func onCachedConversation(_ conversation: Conversation) { render(conversation) }   // only on a hit
///         func onServerConversation(_ conversation: Conversation?) { refresh(conversation) }
///         func onError(_ error: CometChatException?) { print(error?.errorCode ?? "") }
///     }
///     vault.getConversation(conversationWith: "bob", conversationType: .user, listener: ConversationLoader())
///
/// The engine holds the listener until the lookup ends: no need to keep a reference of your own.
/// A class adopting both this and `MessageDetailsListener` implements `onError(_:)` itself (the
/// two protocols' empty defaults would be ambiguous).
public protocol ConversationDetailsListener: AnyObject, Sendable {
    /// The cached copy. Fires only when the conversation is cached: never with nothing.
    func onCachedConversation(_ conversation: Conversation)
    /// The server's copy, already written through to the cache.
    func onServerConversation(_ conversation: Conversation?)
    /// Offline (`ERROR_INTERNET_UNAVAILABLE`, after a hit or straight away on a miss), or the
    /// server's error unchanged.
    func onError(_ error: CometChatException?)
}

extension ConversationDetailsListener {
    /// Does nothing: a listener hears only the phases it implements.
    public func onCachedConversation(_ conversation: Conversation) {}
    /// Does nothing: a listener hears only the phases it implements.
    public func onServerConversation(_ conversation: Conversation?) {}
    /// Does nothing: a listener hears only the phases it implements.
    public func onError(_ error: CometChatException?) {}
}

/// Receives a two-phase `getMessageDetails` lookup. Every method is optional.
///
///     final class MessageLoader: MessageDetailsListener {
///         func onCachedMessage(_ message: BaseMessage) { render(message) }   // only on a hit
///         func onServerMessage(_ message: BaseMessage?) { refresh(message) }
///         func onError(_ error: CometChatException?) { print(error?.errorCode ?? "") }
///     }
///     vault.getMessageDetails(42, listener: MessageLoader())
///
/// The engine holds the listener until the lookup ends: no need to keep a reference of your own.
public protocol MessageDetailsListener: AnyObject, Sendable {
    /// The cached copy. Fires only when the message is cached: never with nothing.
    func onCachedMessage(_ message: BaseMessage)
    /// The server's copy, already written through to the cache.
    func onServerMessage(_ message: BaseMessage?)
    /// Offline (`ERROR_INTERNET_UNAVAILABLE`), or the server's error unchanged.
    func onError(_ error: CometChatException?)
}

extension MessageDetailsListener {
    /// Does nothing: a listener hears only the phases it implements.
    public func onCachedMessage(_ message: BaseMessage) {}
    /// Does nothing: a listener hears only the phases it implements.
    public func onServerMessage(_ message: BaseMessage?) {}
    /// Does nothing: a listener hears only the phases it implements.
    public func onError(_ error: CometChatException?) {}
}

/// What a single-item lookup produced, in order.
enum LookupEvent<Item: Sendable>: Sendable {
    /// A cache hit (a miss produces no event).
    case cached(Item)
    case server(Item)
    case failed(CometChatException)
}

/// The steps of one single-item lookup.
struct LookupPlan<Item: Sendable>: Sendable {
    /// The cached copy, or nil on a miss (on the reader connection).
    var cached: @Sendable (Database, ReadContext) throws -> Item?
    var server: @Sendable () async throws(BackendError) -> JSONValue
    /// Validates and decodes the server's copy (throws on a hostile payload, or an item other
    /// than the one asked for).
    var decode: @Sendable (JSONValue, ReadContext) throws(WireError) -> Item
    /// Writes the validated copy through (on the writer, in one transaction).
    var writeThrough: @Sendable (Database, JSONValue, Item, ReadContext) throws -> Void
    /// Forgets the cached copy when the server says the item does not exist (404); returns the
    /// messages removed (published as `CacheWriter.removed`).
    var forget: @Sendable (Database, ReadContext) throws -> [MessageID]
    /// The message the written-through item is, if it is one (published as `CacheWriter.stored`).
    var storedMessage: (@Sendable (Item) -> BaseMessage?)?
}

/// Single-item two-phase lookups: `getConversation` and `getMessageDetails`.
///
/// Unlike the list reads, the cached phase fires only on a hit. A miss goes straight to the server
/// phase online, or straight to `onError` (`ERROR_INTERNET_UNAVAILABLE`) offline. The server's
/// copy is written through before it is delivered; a 404 from the server also removes the cached
/// copy (the server says the item is gone), then reaches `onError` unchanged.
extension OfflineVault {
    // MARK: getConversation

    /// The conversation with a user or a group: the cached copy on a hit, then the server's.
    ///
    ///     vault.getConversation(conversationWith: "bob", conversationType: .user, listener: loader)
    public func getConversation(conversationWith: String, conversationType: ConversationType,
                                listener: any ConversationDetailsListener) {
        let executor = settings.callbackExecutor
        let plan = reads.conversationLookup(conversationWith, conversationType)
        // The task holds `listener` strongly until the lookup has delivered its last callback.
        Task {
            await self.reads.runLookup(plan, cachedPhase: true) { event in
                switch event {
                case .cached(let c): executor.execute { listener.onCachedConversation(c) }
                case .server(let c): executor.execute { listener.onServerConversation(c) }
                case .failed(let e): executor.execute { listener.onError(e) }
                }
            }
        }
    }

    /// The classic lookup: the server's copy only (never a cached one), written through.
    ///
    ///     vault.getConversation(conversationWith: "team", conversationType: .group,
    ///                           onSuccess: { show($0) }, onError: { print($0?.errorCode ?? "") })
    public func getConversation(conversationWith: String, conversationType: ConversationType,
                                onSuccess: @escaping @Sendable (Conversation?) -> Void,
                                onError: @escaping @Sendable (CometChatException?) -> Void) {
        let executor = settings.callbackExecutor
        let plan = reads.conversationLookup(conversationWith, conversationType)
        Task {
            await self.reads.runLookup(plan, cachedPhase: false) { event in
                switch event {
                case .cached: break
                case .server(let c): executor.execute { onSuccess(c) }
                case .failed(let e): executor.execute { onError(e) }
                }
            }
        }
    }

    /// Both phases of `getConversation` as one value: the cached copy (nil on a miss, or with
    /// offline support off) and the server's answer.
    ///
    ///     let (cached, server) = await vault.getConversation(conversationWith: "bob", conversationType: .user)
    public func getConversation(conversationWith: String, conversationType: ConversationType) async
        -> (cached: Conversation?, server: Result<Conversation?, CometChatException>) {
        await reads.collectLookup(reads.conversationLookup(conversationWith, conversationType))
    }

    // MARK: getMessageDetails

    /// One message by its server id: the cached copy on a hit, then the server's.
    ///
    ///     vault.getMessageDetails(42, listener: loader)
    public func getMessageDetails(_ messageId: Int, listener: any MessageDetailsListener) {
        let executor = settings.callbackExecutor
        let plan = reads.messageLookup(messageId)
        Task {
            await self.reads.runLookup(plan, cachedPhase: true) { event in
                switch event {
                case .cached(let m): executor.execute { listener.onCachedMessage(m) }
                case .server(let m): executor.execute { listener.onServerMessage(m) }
                case .failed(let e): executor.execute { listener.onError(e) }
                }
            }
        }
    }

    /// The classic lookup: the server's copy only (never a cached one), written through.
    ///
    ///     vault.getMessageDetails(42, onSuccess: { show($0) }, onError: { print($0?.errorCode ?? "") })
    public func getMessageDetails(_ messageId: Int, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                                  onError: @escaping @Sendable (CometChatException?) -> Void) {
        let executor = settings.callbackExecutor
        let plan = reads.messageLookup(messageId)
        Task {
            await self.reads.runLookup(plan, cachedPhase: false) { event in
                switch event {
                case .cached: break
                case .server(let m): executor.execute { onSuccess(m) }
                case .failed(let e): executor.execute { onError(e) }
                }
            }
        }
    }

    /// Both phases of `getMessageDetails` as one value.
    ///
    ///     let (cached, server) = await vault.getMessageDetails(42)
    public func getMessageDetails(_ messageId: Int) async -> (cached: BaseMessage?, server: Result<BaseMessage?, CometChatException>) {
        await reads.collectLookup(reads.messageLookup(messageId))
    }
}

extension ReadEngine {
    // MARK: Plans

    func conversationLookup(_ with: String, _ type: ConversationType) -> LookupPlan<Conversation> {
        let backend = self.backend
        return LookupPlan(
            cached: { db, context in
                guard let id = ConversationRows.conversationId(with: with, type: type, me: context.me) else { return nil }
                return try ConversationRows.conversation(id: id, me: context.me, decoder: context.trustedDecoder, in: db)
            },
            server: { () async throws(BackendError) -> JSONValue in try await backend.conversation(with: with, type: type) },
            decode: { value, context throws(WireError) -> Conversation in
                let conversation = try context.decoder.conversation(value)
                guard conversation.conversationId == ConversationRows.conversationId(with: with, type: type, me: context.me) else {
                    throw WireError(entity: "conversation", field: "conversationId", problem: .invalid("not the conversation asked for"))
                }
                ConversationRows.finish(conversation, me: context.me, blocked: [])
                return conversation
            },
            writeThrough: { db, wire, conversation, _ in try ConversationRows.upsert(wire, conversation, in: db) },
            forget: { db, context in
                guard let id = ConversationRows.conversationId(with: with, type: type, me: context.me) else { return [] }
                try ConversationRows.remove(id: id, in: db)
                return []
            })
    }

    func messageLookup(_ messageId: Int) -> LookupPlan<BaseMessage> {
        let backend = self.backend
        return LookupPlan(
            cached: { db, context in try MessageRows.message(id: messageId, decoder: context.trustedDecoder, in: db) },
            server: { () async throws(BackendError) -> JSONValue in try await backend.message(id: messageId) },
            decode: { value, context throws(WireError) -> BaseMessage in
                let message = try context.decoder.message(value)
                guard message.id == messageId else {
                    throw WireError(entity: "message", field: "id", problem: .invalid("not the message asked for"))
                }
                MessageWriteBatch.resolveStatus(message, me: context.me)
                return message
            },
            writeThrough: { db, wire, message, context in
                try MessageWriteBatch.storeServerCopy(wire, message, me: context.me, source: .realtime, in: db)
            },
            forget: { db, _ in
                try db.run("DELETE FROM messages WHERE server_id = ?", .int(Int64(messageId)))
                return db.changes > 0 ? [MessageID(messageId)] : []
            },
            storedMessage: { $0 })
    }

    // MARK: Core

    /// Runs a lookup over the two-phase core (a one-item page): a cached hit first when offline
    /// support is on, then the server's copy, written through before it is delivered.
    func runLookup<Item: Sendable>(_ plan: LookupPlan<Item>, cachedPhase: Bool,
                                   emit: @escaping @Sendable (LookupEvent<Item>) -> Void) async {
        var page = TwoPhasePlan<Item>(
            cached: { db, context in try plan.cached(db, context).map { [$0] } ?? [] },
            server: { () async throws(BackendError) -> WirePage in
                do throws(BackendError) {
                    return WirePage(items: [try await plan.server()], nextCursor: nil)
                } catch {
                    if case .server(status: 404, code: _, message: _) = error, let cache = self.session.openCache {
                        let context = self.readContext()
                        if let removed = try? await cache.writer.run({ db in try plan.forget(db, context) }) {
                            self.writer.removed(removed)
                        }
                    }
                    throw error
                }
            },
            decode: plan.decode,
            writeThrough: { db, wire, items, context in
                for (value, item) in zip(wire, items) { try plan.writeThrough(db, value, item, context) }
            })
        if let message = plan.storedMessage { page.storedMessages = { items in items.compactMap(message) } }
        // A lookup has no request object: each one has its own gate, never busy.
        await runTwoPhase(page, gate: InFlightGate(), busy: .fail, cachedPhase: cachedPhase) { event in
            switch event {
            case .cached(let items):
                if let hit = items.first { emit(.cached(hit)) }
            case .server(let items):
                if let item = items.first {
                    emit(.server(item))
                } else {
                    emit(.failed(CometChatException(.invalidServerResponse, "the server answered with no item")))
                }
            case .failed(let error):
                emit(.failed(error))
            }
        }
    }

    func collectLookup<Item: Sendable>(_ plan: LookupPlan<Item>) async -> (cached: Item?, server: Result<Item?, CometChatException>) {
        let result = Mutex<(cached: Item?, server: Result<Item?, CometChatException>)>((nil, .success(nil)))
        await runLookup(plan, cachedPhase: true) { event in
            result.withLock { r in
                switch event {
                case .cached(let item): r.cached = item
                case .server(let item): r.server = .success(item)
                case .failed(let error): r.server = .failure(error)
                }
            }
        }
        return result.withLock { $0 }
    }
}
