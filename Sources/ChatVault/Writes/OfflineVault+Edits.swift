import Foundation
import VaultStore

/// Edits, deletes and reactions: changes to messages the server already has. They are **never
/// queued**: each goes to the server when it is called, and its effect reaches the cache only once
/// the server has accepted it.
///
/// - Offline (no connection): `ERROR_INTERNET_UNAVAILABLE`; nothing was sent, nothing changed.
/// - No answer: `ERROR_REQUEST_TIMEOUT`; the server may or may not have applied the change, the
///   cache is left as it was (the next read of the message brings the server's version).
/// - Refused by the server: its error code (`ERR_NOT_THE_SENDER`, `ERR_MESSAGE_DELETED`…),
///   nothing changed.
/// - An answer that fails validation, or describes another message: `ERROR_INVALID_SERVER_RESPONSE`,
///   nothing of it reaches the cache.
/// - Accepted: the server's answer replaces the cached copy of the message (when a cache is open
///   and holds it), then `onSuccess` gets that answer.
///
/// With offline support disabled (or while the cache cannot open) they work the same way, straight
/// to the server, with nothing cached. Nobody logged in: `ERROR_USER_NOT_LOGGED_IN`. An invalid
/// change (a message id of 0 or less, empty text, a reaction out of bounds) is refused with
/// `ERROR_INVALID_MESSAGE` before anything is sent. Errors never carry a message's content.
///
/// They never touch the outbox. A message still pending (or failed) in the outbox has no server
/// id yet and cannot be edited, deleted or reacted to: change it by discarding it
/// (`discardLocalMessage`) and sending the new version.
extension OfflineVault {
    // MARK: - Closure forms

    /// Edits a message the user sent: `message` carries the server `id` and the new content (a
    /// `TextMessage`'s `text`, a `MediaMessage`'s `caption`, a `CustomMessage`'s `customData`, and
    /// for any of them `metaData` and `tags`, which replace the old ones when set). `onSuccess`
    /// gets the edited message as the server answered it (`editedAt`, `editedBy`). Never queued.
    ///
    ///     let edit = TextMessage(receiverUid: "bob", text: "Fixed typo", receiverType: .user)
    ///     edit.id = 42
    ///     vault.editMessage(edit, onSuccess: { edited in show(edited) },
    ///                       onError: { error in print(error?.errorCode ?? "") })
    ///
    /// The message is read when the call is made; it may be changed or reused afterwards. An unsent
    /// (pending or failed) message has no server id: discard it and send the new version instead.
    public func editMessage(_ message: BaseMessage, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                            onError: @escaping @Sendable (CometChatException?) -> Void) {
        let id = message.id
        let changes: JSONValue
        do throws(CometChatException) {
            changes = try editChanges(of: message)
        } catch {
            return settings.callbackExecutor.execute { onError(error) }
        }
        deliverChange(onSuccess: onSuccess, onError: onError) { () async throws(CometChatException) -> BaseMessage in
            try await self.change(.edit, messageId: id) { backend throws(BackendError) in try await backend.editMessage(id: id, changes: changes) }
        }
    }

    /// Deletes a message (the user's own, or any in a group the user administers or moderates).
    /// `onSuccess` gets the message as deleted (`deletedAt`, `deletedBy`). Never queued.
    ///
    ///     vault.deleteMessage(42, onSuccess: { deleted in hide(deleted) }, onError: { _ in })
    public func deleteMessage(_ messageId: Int, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                              onError: @escaping @Sendable (CometChatException?) -> Void) {
        deliverChange(onSuccess: onSuccess, onError: onError) { () async throws(CometChatException) -> BaseMessage in
            try await self.deleteMessage(messageId)
        }
    }

    /// Adds the user's reaction (an emoji or short string, 1…64 UTF-8 bytes) to a message.
    /// `onSuccess` gets the message with its reaction counts. Never queued.
    ///
    ///     vault.addReaction(messageId: 42, reaction: "👍", onSuccess: { m in print(m.getReactions()) }, onError: { _ in })
    public func addReaction(messageId: Int, reaction: String, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                            onError: @escaping @Sendable (CometChatException?) -> Void) {
        deliverChange(onSuccess: onSuccess, onError: onError) { () async throws(CometChatException) -> BaseMessage in
            try await self.addReaction(messageId: messageId, reaction: reaction)
        }
    }

    /// Takes the user's reaction back. `onSuccess` gets the message with its reaction counts.
    /// Never queued.
    ///
    ///     vault.removeReaction(messageId: 42, reaction: "👍", onSuccess: { _ in }, onError: { _ in })
    public func removeReaction(messageId: Int, reaction: String, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                               onError: @escaping @Sendable (CometChatException?) -> Void) {
        deliverChange(onSuccess: onSuccess, onError: onError) { () async throws(CometChatException) -> BaseMessage in
            try await self.removeReaction(messageId: messageId, reaction: reaction)
        }
    }

    // MARK: - Async forms

    /// Edits a message (async form of `editMessage(_:onSuccess:onError:)`).
    ///
    ///     let edited = try await vault.editMessage(edit)
    ///
    /// - Throws: `ERROR_INVALID_MESSAGE` before anything is sent, `ERROR_USER_NOT_LOGGED_IN`,
    ///   `ERROR_INTERNET_UNAVAILABLE` offline, `ERROR_REQUEST_TIMEOUT` without an answer, the
    ///   server's code, or `ERROR_INVALID_SERVER_RESPONSE`. The cache changed in none of these cases.
    public func editMessage(_ message: BaseMessage) async throws(CometChatException) -> BaseMessage {
        let id = message.id
        let changes = try editChanges(of: message)
        return try await change(.edit, messageId: id) { backend throws(BackendError) in try await backend.editMessage(id: id, changes: changes) }
    }

    /// Deletes a message (async form of `deleteMessage(_:onSuccess:onError:)`).
    ///
    ///     let deleted = try await vault.deleteMessage(42)     // deleted.deletedAt > 0
    ///
    /// - Throws: as `editMessage(_:)`.
    public func deleteMessage(_ messageId: Int) async throws(CometChatException) -> BaseMessage {
        try Self.checkMessageId(messageId, .delete)
        return try await change(.delete, messageId: messageId) { backend throws(BackendError) in try await backend.deleteMessage(id: messageId) }
    }

    /// Adds a reaction (async form of `addReaction(messageId:reaction:onSuccess:onError:)`).
    ///
    ///     let reacted = try await vault.addReaction(messageId: 42, reaction: "👍")
    ///
    /// - Throws: as `editMessage(_:)`.
    public func addReaction(messageId: Int, reaction: String) async throws(CometChatException) -> BaseMessage {
        try Self.checkMessageId(messageId, .addReaction)
        try Self.checkReaction(reaction, .addReaction)
        return try await change(.addReaction, messageId: messageId) { backend throws(BackendError) in
            try await backend.addReaction(messageId: messageId, reaction: reaction)
        }
    }

    /// Removes a reaction (async form of `removeReaction(messageId:reaction:onSuccess:onError:)`).
    ///
    ///     let message = try await vault.removeReaction(messageId: 42, reaction: "👍")
    ///
    /// - Throws: as `editMessage(_:)`.
    public func removeReaction(messageId: Int, reaction: String) async throws(CometChatException) -> BaseMessage {
        try Self.checkMessageId(messageId, .removeReaction)
        try Self.checkReaction(reaction, .removeReaction)
        return try await change(.removeReaction, messageId: messageId) { backend throws(BackendError) in
            try await backend.removeReaction(messageId: messageId, reaction: reaction)
        }
    }

    // MARK: - Internals

    /// One of the never-queued changes, for the sentences of its errors.
    enum MessageChange: Sendable {
        case edit, delete, addReaction, removeReaction

        /// What was asked, as the subject of an error sentence.
        var subject: String {
            switch self {
            case .edit: return "the edit"
            case .delete: return "the deletion"
            case .addReaction: return "the reaction"
            case .removeReaction: return "the reaction's removal"
            }
        }

        /// What did not happen, for a refusal before anything was sent.
        var notDone: String {
            switch self {
            case .edit: return "The message was not edited"
            case .delete: return "The message was not deleted"
            case .addReaction: return "The reaction was not added"
            case .removeReaction: return "The reaction was not removed"
            }
        }
    }

    /// The validated changes of an edit.
    private func editChanges(of message: BaseMessage) throws(CometChatException) -> JSONValue {
        try Self.checkMessageId(message.id, .edit)
        return try OutgoingMessage.encodeEdit(message, limits: wireLimits)
    }

    private static func checkMessageId(_ id: Int, _ change: MessageChange) throws(CometChatException) {
        guard id > 0 else {
            throw CometChatException(.invalidMessage, "\(change.notDone): it needs the server's message id (an unsent message is changed by discarding it and sending it again).")
        }
    }

    /// A reaction as the server takes it: 1…64 UTF-8 bytes, not only spaces, no control characters.
    private static func checkReaction(_ reaction: String, _ change: MessageChange) throws(CometChatException) {
        guard (1...64).contains(reaction.utf8.count), !reaction.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty,
              !reaction.unicodeScalars.contains(where: { $0.value < 0x20 || ($0.value >= 0x7f && $0.value < 0xa0) }) else {
            throw CometChatException(.invalidMessage, "\(change.notDone): a reaction must be 1 to 64 bytes of UTF-8 without control characters.")
        }
    }

    /// Sends one change to the server, validates the answer, writes it over the cached copy of the
    /// message, and returns it.
    private func change(_ change: MessageChange, messageId: Int,
                        _ call: @Sendable (any ChatBackend) async throws(BackendError) -> JSONValue) async throws(CometChatException) -> BaseMessage {
        guard let me = userId else { throw CometChatException(.userNotLoggedIn, "Nobody is logged in.") }
        let answer: JSONValue
        do {
            answer = try await call(backend)
        } catch {
            switch error {
            case .unreachable:
                throw CometChatException(.internetUnavailable, "No connection: \(change.subject) was not sent, and it is never queued.")
            case .timedOut:
                throw CometChatException(.requestTimedOut, "The server did not answer: \(change.subject) may or may not have been applied. The cache was not changed.")
            case .server(let status, let code, _):
                throw CometChatException(errorCode: Self.safeCode(code), errorDescription: "The server refused \(change.subject) (status \(status)).")
            }
        }
        let message: BaseMessage
        do {
            message = try WireDecoder(limits: wireLimits).message(answer)
        } catch {
            throw CometChatException(.invalidServerResponse, "The server's answer to \(change.subject) was refused.", details: String(describing: error))
        }
        guard message.id == messageId else {
            throw CometChatException(.invalidServerResponse, "The server answered \(change.subject) with another message.")
        }
        MessageWriteBatch.resolveStatus(message, me: me)
        if let cache = openCache(of: me) {
            // A busy or full disk leaves the old copy (the next read brings the server's version);
            // the server accepted the change, so it is still reported as done.
            let replaced = try? await cache.writer.run { db in try Self.replaceCached(answer, message, me: me, in: db) }
            if replaced == true { incoming.stored([message]) }
        }
        return message
    }

    /// Writes a changed message over its cached copy, keeping how the copy first arrived. A message
    /// the cache does not hold is left to the next read: inserted alone, an old message would show
    /// in a cached page without its neighbours.
    private static func replaceCached(_ wire: JSONValue, _ message: BaseMessage, me: String, in db: Database) throws -> Bool {
        try db.transaction {
            guard let source = try db.scalarInt("SELECT source FROM messages WHERE server_id = ?", .int(Int64(message.id))) else { return false }
            try MessageWriteBatch.storeServerCopy(wire, message, me: me, source: MessageSource(storedCode: source) ?? .realtime, in: db)
            return true
        }
    }

    private func deliverChange(onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                               onError: @escaping @Sendable (CometChatException?) -> Void,
                               _ body: @escaping @Sendable () async throws(CometChatException) -> BaseMessage) {
        let executor = settings.callbackExecutor
        Task {
            do throws(CometChatException) {
                let message = try await body()
                executor.execute { onSuccess(message) }
            } catch {
                executor.execute { onError(error) }
            }
        }
    }
}
