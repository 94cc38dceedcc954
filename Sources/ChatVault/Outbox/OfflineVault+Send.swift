import Foundation
import VaultStore

/// One step of a persistent send, as the `AsyncSequence` form yields them.
public enum SendEvent<Message: BaseMessage>: Sendable {
    /// Durably queued.
    case pending(Message)
    /// Not sent yet: queued (`ERROR_INTERNET_UNAVAILABLE`, not a failure while auto-send is on).
    case queued(CometChatException)
    /// Accepted by the server. The stream ends.
    case sent(Message)
    /// Failed, refused, evicted or not queued. The stream ends (a failed message stays in the
    /// outbox for `retryMessage`; watch that on an `OutboxListener`).
    case failed(CometChatException)
}

extension OfflineVault {
    // MARK: - Persistent sends (the outbox)

    /// Sends a text message through the outbox: `onMessagePending` once the message is durably
    /// queued, then `onMessageSent` when the server accepts it. Offline, `onError` fires once with
    /// `ERROR_INTERNET_UNAVAILABLE` (queued, not failed) and `onMessageSent` follows on reconnect.
    /// Any other code is a real failure. An invalid message (empty text) is refused with
    /// `ERROR_INVALID_MESSAGE` before anything is stored.
    ///
    ///     vault.sendTextMessage(message: TextMessage(receiverUid: "bob", text: "Hi", receiverType: .user),
    ///                           onMessagePending: { m in show(m) }, onMessageSent: { m in confirm(m) },
    ///                           onError: { e in if e?.errorCode != CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE { offerRetry() } })
    public func sendTextMessage(message: TextMessage, onMessagePending: @escaping @Sendable (TextMessage) -> Void,
                                onMessageSent: @escaping @Sendable (TextMessage) -> Void,
                                onError: @escaping @Sendable (CometChatException?) -> Void) {
        persistentSend(message, onPending: onMessagePending, onSent: onMessageSent, onError: onError)
    }

    /// Sends a media message through the outbox. Files given as `files` (or `filePath`) are
    /// copied into the cache before pending is reported; a copy that fails reports only
    /// `onError(ERROR_OFFLINE_MEDIA_COPY_FAILED)`. Already uploaded `attachments` are sent as they are.
    public func sendMediaMessage(message: MediaMessage, onMessagePending: @escaping @Sendable (MediaMessage) -> Void,
                                 onMessageSent: @escaping @Sendable (MediaMessage) -> Void,
                                 onError: @escaping @Sendable (CometChatException?) -> Void) {
        persistentSend(message, onPending: onMessagePending, onSent: onMessageSent, onError: onError)
    }

    /// Sends a custom message through the outbox; one without `customData` is refused.
    public func sendCustomMessage(message: CustomMessage, onMessagePending: @escaping @Sendable (CustomMessage) -> Void,
                                  onMessageSent: @escaping @Sendable (CustomMessage) -> Void,
                                  onError: @escaping @Sendable (CometChatException?) -> Void) {
        persistentSend(message, onPending: onMessagePending, onSent: onMessageSent, onError: onError)
    }

    /// Sends an interactive message through the outbox.
    public func sendInteractiveMessage(message: InteractiveMessage, onMessagePending: @escaping @Sendable (InteractiveMessage) -> Void,
                                       onMessageSent: @escaping @Sendable (InteractiveMessage) -> Void,
                                       onError: @escaping @Sendable (CometChatException?) -> Void) {
        persistentSend(message, onPending: onMessagePending, onSent: onMessageSent, onError: onError)
    }

    /// The persistent send as an `AsyncSequence` of its steps.
    ///
    ///     for await step in vault.send(TextMessage(receiverUid: "bob", text: "Hi", receiverType: .user)) {
    ///         if case .sent(let message) = step { print(message.id) }
    ///     }
    public func send<Message: BaseMessage>(_ message: Message) -> AsyncStream<SendEvent<Message>> {
        AsyncStream { continuation in
            persistentSend(message, onPending: { continuation.yield(.pending($0)) }, onSent: { sent in
                continuation.yield(.sent(sent))
                continuation.finish()
            }, onError: { error in
                let error = error ?? CometChatException(.invalidMessage, "The message was not sent.")
                if error.code == .internetUnavailable && message.messageStatus != .failed {
                    continuation.yield(.queued(error))
                } else {
                    continuation.yield(.failed(error))
                    continuation.finish()
                }
            })
        }
    }

    func persistentSend<Message: BaseMessage>(_ message: Message, onPending: @escaping @Sendable (Message) -> Void,
                                              onSent: @escaping @Sendable (Message) -> Void,
                                              onError: @escaping @Sendable (CometChatException?) -> Void) {
        let executor = settings.callbackExecutor
        let wire: JSONValue
        let kind: OutboxKind
        do throws(CometChatException) {
            (wire, kind) = try OutgoingMessage.encode(message, limits: wireLimits)
        } catch {
            return executor.execute { onError(error) }
        }
        switch state {
        case .ready, .plaintextFallback:
            break
        case .loggedOut:
            return executor.execute { onError(CometChatException(.userNotLoggedIn, "Nobody is logged in.")) }
        case .disabled, .onlineOnly:
            // Offline support is not in use: the send goes straight to the server, as the classic one.
            return directSend(message, wire: wire, kind: kind, notQueuedCode: nil, onSuccess: onSent, onError: onError)
        case .opening, .unavailable:
            // The cache cannot hold the message right now: send it straight away if possible and
            // never claim it was queued.
            return directSend(message, wire: wire, kind: kind, notQueuedCode: .offlineMessagePersistFailed, onSuccess: onSent, onError: onError)
        }
        message.localMessageId = UUID().uuidString.lowercased()
        let live = LiveSend(message: message, onPending: { m in if let m = m as? Message { onPending(m) } },
                            onSent: { m in if let m = m as? Message { onSent(m) } }, onError: onError)
        let composedAt = settings.clock()
        outbox.enqueueAdmission(Admission(wire: wire, kind: kind, live: live, composedAt: composedAt))
    }

    // MARK: - Classic sends (never queued)

    /// Sends straight to the server; never queued, no pending stage. Offline it fails with
    /// `ERROR_INTERNET_UNAVAILABLE`.
    public func sendTextMessage(message: TextMessage, onSuccess: @escaping @Sendable (TextMessage) -> Void,
                                onError: @escaping @Sendable (CometChatException?) -> Void) {
        classicSend(message, onSuccess: onSuccess, onError: onError)
    }

    /// The classic media send: uploads the files and sends straight to the server, never queued, no
    /// pending stage; offline it fails with `ERROR_INTERNET_UNAVAILABLE`.
    public func sendMediaMessage(message: MediaMessage, onSuccess: @escaping @Sendable (MediaMessage) -> Void,
                                 onError: @escaping @Sendable (CometChatException?) -> Void) {
        classicSend(message, onSuccess: onSuccess, onError: onError)
    }

    /// The classic custom send: straight to the server, never queued; offline it fails with
    /// `ERROR_INTERNET_UNAVAILABLE`.
    public func sendCustomMessage(message: CustomMessage, onSuccess: @escaping @Sendable (CustomMessage) -> Void,
                                  onError: @escaping @Sendable (CometChatException?) -> Void) {
        classicSend(message, onSuccess: onSuccess, onError: onError)
    }

    /// The classic interactive send: straight to the server, never queued; offline it fails with
    /// `ERROR_INTERNET_UNAVAILABLE`.
    public func sendInteractiveMessage(message: InteractiveMessage, onSuccess: @escaping @Sendable (InteractiveMessage) -> Void,
                                       onError: @escaping @Sendable (CometChatException?) -> Void) {
        classicSend(message, onSuccess: onSuccess, onError: onError)
    }

    private func classicSend<Message: BaseMessage>(_ message: Message, onSuccess: @escaping @Sendable (Message) -> Void,
                                                   onError: @escaping @Sendable (CometChatException?) -> Void) {
        do throws(CometChatException) {
            let (wire, kind) = try OutgoingMessage.encode(message, limits: wireLimits)
            directSend(message, wire: wire, kind: kind, notQueuedCode: nil, onSuccess: onSuccess, onError: onError)
        } catch {
            settings.callbackExecutor.execute { onError(error) }
        }
    }

    /// A send that does not go through the outbox: uploads, sends with a one-off idempotency
    /// key, and writes the acknowledged message through to the cache when one is open.
    /// - Parameter notQueuedCode: reported instead of the network's code when the failure is a
    ///   lost connection, so an offline-enabled app never reads "queued" for a message that was not.
    private func directSend<Message: BaseMessage>(_ message: Message, wire: JSONValue, kind: OutboxKind, notQueuedCode: OfflineErrorCode?,
                                                  onSuccess: @escaping @Sendable (Message) -> Void,
                                                  onError: @escaping @Sendable (CometChatException?) -> Void) {
        let executor = settings.callbackExecutor
        let backend = self.backend
        let limits = wireLimits
        let localFiles = (message as? MediaMessage)?.localFiles ?? []
        Task.detached {
            do throws(CometChatException) {
                var outgoing = wire
                if !localFiles.isEmpty, case .object(var fields) = outgoing {
                    var data = fields["data"]?.objectValue ?? [:]
                    var attachments = data["attachments"]?.arrayValue ?? []
                    for path in localFiles {
                        let name = (path as NSString).lastPathComponent
                        let answer = try await Self.call(notQueuedCode) { () async throws(BackendError) in
                            try await backend.uploadMedia(path: path, name: name, mimeType: OutgoingCopies.mimeType(forName: name))
                        }
                        attachments.append(try Acknowledgements.attachment(answer, limits: limits))
                    }
                    data["attachments"] = .array(attachments)
                    fields["data"] = .object(data)
                    outgoing = .object(fields)
                }
                let payload = outgoing
                let ack = try await Self.call(notQueuedCode) { () async throws(BackendError) in
                    try await backend.send(payload, localMessageId: "direct-" + UUID().uuidString.lowercased())
                }
                guard let typed = try Acknowledgements.message(ack, kind: kind, limits: limits) as? Message else {
                    throw Acknowledgements.otherKind
                }
                if let me = self.userId {
                    MessageWriteBatch.resolveStatus(typed, me: me)
                    if let cache = self.openCache {
                        let stored = (try? await cache.writer.run { db in
                            try MessageWriteBatch.storeServerCopy(ack, typed, me: me, source: .realtime, in: db)
                        }) != nil
                        self.uploads.sent(payload, messageId: typed.id)
                        if stored { self.incoming.stored([typed]) }
                    }
                }
                executor.execute {
                    message.adoptAcknowledgement(typed)
                    onSuccess(typed)
                }
            } catch {
                executor.execute { onError(error) }
            }
        }
    }

    /// Runs a backend call, turning its error into the exception a send reports.
    private static func call<T: Sendable>(_ notQueuedCode: OfflineErrorCode?,
                                          _ body: () async throws(BackendError) -> T) async throws(CometChatException) -> T {
        do {
            return try await body()
        } catch {
            switch error {
            case .unreachable:
                if let notQueuedCode { throw CometChatException(notQueuedCode, "The message was not sent and not queued: no connection, and the offline cache is not available.") }
                throw CometChatException(.internetUnavailable, "No connection: the message was not sent.")
            case .timedOut:
                if let notQueuedCode { throw CometChatException(notQueuedCode, "The message may not have been sent (no answer), and the offline cache is not available.") }
                throw CometChatException(.requestTimedOut, "The server did not answer; the message may not have been sent.")
            case .server(let status, let code, _):
                throw CometChatException(errorCode: safeCode(code), errorDescription: "The server refused the message (status \(status)).")
            }
        }
    }

    // MARK: - The outbox

    /// The whole unsent outbox (pending, sending, failed) in compose order. `onError` gets
    /// `ERROR_OFFLINE_MESSAGE_PERSIST_FAILED` when the cache is momentarily unavailable (never an
    /// empty list in its place) and `ERROR_OFFLINE_DISABLED` when offline support is not running.
    public func getPendingMessages(onSuccess: @escaping @Sendable ([BaseMessage]) -> Void,
                                   onError: @escaping @Sendable (CometChatException) -> Void) {
        let executor = settings.callbackExecutor
        Task.detached {
            do throws(CometChatException) {
                let messages = try await self.pendingMessages()
                executor.execute { onSuccess(messages) }
            } catch {
                executor.execute { onError(error) }
            }
        }
    }

    /// The outbox, synchronously. Deprecated: an unreadable outbox answers an empty list.
    @available(*, deprecated, message: "Use getPendingMessages(onSuccess:onError:) or pendingMessages(): this form cannot tell an empty outbox from an unreadable one.")
    public func getPendingMessages() -> [BaseMessage] {
        guard let cache = openCache else { return [] }
        guard let (rows, inFlight) = try? cache.writer.sync({ db in
            (try OutboxRows.rows(pendingOnly: false, in: db), self.outbox.state.withLock { $0.inFlight })
        }) else { return [] }
        return messages(of: rows, inFlight: inFlight)
    }

    /// The outbox (async form of `getPendingMessages(onSuccess:onError:)`).
    public func pendingMessages() async throws(CometChatException) -> [BaseMessage] {
        let cache = try outboxCache()
        do {
            let (rows, inFlight) = try await cache.writer.run { db in
                (try OutboxRows.rows(pendingOnly: false, in: db), self.outbox.state.withLock { $0.inFlight })
            }
            return messages(of: rows, inFlight: inFlight)
        } catch {
            throw CometChatException(.offlineMessagePersistFailed, "The outbox could not be read just now. Try again.")
        }
    }

    private func messages(of rows: [OutboxRow], inFlight: Set<String>) -> [BaseMessage] {
        rows.compactMap { row in
            outbox.pendingMessage(row, status: row.state == .failed ? .failed : (inFlight.contains(row.localId) ? .sending : .pending))
        }
    }

    /// The open cache for an outbox operation, or the rejection.
    func outboxCache() throws(CometChatException) -> VaultCache {
        switch state {
        case .ready, .plaintextFallback:
            if let cache = openCache { return cache }
            throw CometChatException(.offlineMessagePersistFailed, "The offline cache is not available just now. Try again.")
        case .opening, .unavailable:
            throw CometChatException(.offlineMessagePersistFailed, "The offline cache is not available just now. Try again.")
        case .loggedOut, .disabled, .onlineOnly:
            throw CometChatException(.offlineDisabled, "Offline support is not running.")
        }
    }

    /// Re-attempts one unsent message now: a failed one goes back to pending first. `onSuccess`
    /// fires when it is sent; `onError` gets a rejection (`IN_FLIGHT`, `NOT_FOUND`, `DISABLED`,
    /// `PERSIST_FAILED`, changing nothing) or that attempt's error.
    public func retryMessage(_ localMessageId: String, onSuccess: @escaping @Sendable () -> Void,
                             onError: @escaping @Sendable (CometChatException) -> Void) {
        let executor = settings.callbackExecutor
        Task.detached {
            do throws(CometChatException) {
                try await self.retry(localMessageId, waiter: RetryWaiter(onSuccess: onSuccess, onError: onError))
            } catch {
                executor.execute { onError(error) }
            }
        }
    }

    /// `retryMessage(_:onSuccess:onError:)` for a message's `localMessageId` as it is, a `String?`
    /// (the send page passes it so): nil is no unsent message's id, `ERROR_OFFLINE_MESSAGE_NOT_FOUND`
    /// (after the rejections any id gets first, such as `ERROR_OFFLINE_DISABLED`).
    ///
    ///     vault.retryMessage(message.localMessageId, onSuccess: { }, onError: { e in print(e.errorCode) })
    public func retryMessage(_ localMessageId: String?, onSuccess: @escaping @Sendable () -> Void,
                             onError: @escaping @Sendable (CometChatException) -> Void) {
        retryMessage(localMessageId ?? "", onSuccess: onSuccess, onError: onError)
    }

    /// Fire-and-forget retry of a message from the outbox (or a failed send's message).
    public func retryMessage(_ message: BaseMessage) {
        guard let localId = message.localMessageId else { return }
        Task.detached { try? await self.retry(localId, waiter: nil) }
    }

    /// Retries every message that failed `.transient`; `.permanent` ones (and refusals, which have
    /// no row) are skipped. Watch the outcome on an `OutboxListener`.
    public func retryAllFailedMessages() {
        Task.detached {
            guard let cache = try? self.outboxCache() else { return }
            let now = Int64(self.settings.clock().timeIntervalSince1970 * 1000)
            guard let rows = try? await cache.writer.run({ db -> [OutboxRow] in
                let failed = try OutboxRows.rows(pendingOnly: false, in: db).filter { $0.state == .failed && $0.failureReason == .transient }
                try db.transaction { for row in failed { try OutboxRows.markPending(row.localId, at: now, in: db) } }
                return failed
            }) else { return }
            for row in rows { self.reportPendingAgain(row) }
            if !rows.isEmpty { self.outbox.requestPass(targets: Set(rows.map(\.localId))) }
        }
    }

    func retry(_ localId: String, waiter: RetryWaiter?) async throws(CometChatException) {
        let cache = try outboxCache()
        guard !localId.isEmpty else { throw Self.notFound }
        let now = Int64(settings.clock().timeIntervalSince1970 * 1000)
        let outcome: Result<OutboxRow?, CometChatException>
        do {
            outcome = try await cache.writer.run { db -> Result<OutboxRow?, CometChatException> in
                guard let row = try OutboxRows.row(localId, in: db) else { return .failure(Self.notFound) }
                if self.outbox.state.withLock({ $0.inFlight.contains(localId) }) { return .failure(Self.inFlight) }
                if row.state == .failed { try OutboxRows.markPending(localId, at: now, in: db) }
                self.outbox.state.withLock { s in
                    if let waiter { s.waiters[localId, default: []].append(waiter) }
                    s.live[localId]?.notified = false
                }
                return .success(row.state == .failed ? row : nil)
            }
        } catch {
            throw CometChatException(.offlineMessagePersistFailed, "The outbox could not be changed just now. Try again.")
        }
        if let wasFailed = try outcome.get() { reportPendingAgain(wasFailed) }
        outbox.requestPass(targets: [localId])
    }

    /// A failed message back to pending: the listeners hear `onOutboxMessagePending`.
    private func reportPendingAgain(_ row: OutboxRow) {
        let live = outbox.state.withLock { $0.live[row.localId] }
        guard let message = live?.message ?? outbox.pendingMessage(row, status: .pending) else { return }
        let listeners = outbox.listeners.live()
        settings.callbackExecutor.execute {
            message.messageStatus = .pending
            message.failureReason = nil
            for listener in listeners { listener.onOutboxMessagePending(message) }
        }
    }

    /// Deletes an unsent (pending or failed) message and its copied media. The original send's
    /// closures get no final outcome and no outbox event fires. Rejected with `IN_FLIGHT` while
    /// its request is outstanding, `NOT_FOUND`, `DISABLED` or `PERSIST_FAILED`.
    public func discardLocalMessage(_ localMessageId: String, onSuccess: @escaping @Sendable () -> Void,
                                    onError: @escaping @Sendable (CometChatException) -> Void) {
        let executor = settings.callbackExecutor
        Task.detached {
            do throws(CometChatException) {
                try await self.discard(localMessageId)
                executor.execute { onSuccess() }
            } catch {
                executor.execute { onError(error) }
            }
        }
    }

    /// `discardLocalMessage(_:onSuccess:onError:)` for a message's `localMessageId` as it is, a
    /// `String?`: nil answers `ERROR_OFFLINE_MESSAGE_NOT_FOUND` (after the rejections any id gets
    /// first, such as `ERROR_OFFLINE_DISABLED`).
    public func discardLocalMessage(_ localMessageId: String?, onSuccess: @escaping @Sendable () -> Void,
                                    onError: @escaping @Sendable (CometChatException) -> Void) {
        discardLocalMessage(localMessageId ?? "", onSuccess: onSuccess, onError: onError)
    }

    /// Async form of `discardLocalMessage(_:onSuccess:onError:)`.
    public func discard(_ localMessageId: String) async throws(CometChatException) {
        let cache = try outboxCache()
        guard !localMessageId.isEmpty else { throw Self.notFound }
        let outcome: Result<Void, CometChatException>
        do {
            outcome = try await cache.writer.run { db -> Result<Void, CometChatException> in
                guard try OutboxRows.row(localMessageId, in: db) != nil else { return .failure(Self.notFound) }
                if self.outbox.state.withLock({ $0.inFlight.contains(localMessageId) }) { return .failure(Self.inFlight) }
                try db.transaction { try OutboxRows.delete(localMessageId, in: db) }
                self.outbox.state.withLock { s in
                    s.live[localMessageId] = nil
                    s.waiters[localMessageId] = nil
                }
                return .success(())
            }
        } catch {
            throw CometChatException(.offlineMessagePersistFailed, "The outbox could not be changed just now. Try again.")
        }
        try outcome.get()
        OutgoingCopies.remove(localId: localMessageId, in: cache.directory)
    }

    static let notFound = CometChatException(.offlineMessageNotFound, "No unsent message has that local id.")
    static let inFlight = CometChatException(.offlineMessageInFlight, "The message is being sent now.")

    /// Registers an outbox listener (held weakly; one per id).
    public func addOutboxListener(_ id: String, _ listener: any OutboxListener) {
        outbox.listeners.add(id, listener)
    }

    /// Removes the outbox listener registered under `id`, if any.
    public func removeOutboxListener(_ id: String) {
        outbox.listeners.remove(id)
    }
}
