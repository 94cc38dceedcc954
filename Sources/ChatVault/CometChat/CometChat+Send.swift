/// The seeds' static spellings for sending and the outbox, forwarding to `CometChat.offlineVault`.
/// Without an installed vault a send fails with `ERROR_USER_NOT_LOGGED_IN` and the outbox calls
/// with `ERROR_OFFLINE_DISABLED`.
///
///     CometChat.sendTextMessage(message: TextMessage(receiverUid: "bob", text: "Hi", receiverType: .user),
///                               onMessagePending: { _ in }, onMessageSent: { _ in }, onError: { _ in })
///     CometChat.addOutboxListener("OUTBOX", observer)
extension CometChat {
    /// Sends a text message through the shared vault's outbox (see
    /// `OfflineVault.sendTextMessage(message:onMessagePending:onMessageSent:onError:)`).
    public static func sendTextMessage(message: TextMessage, onMessagePending: @escaping @Sendable (TextMessage) -> Void,
                                       onMessageSent: @escaping @Sendable (TextMessage) -> Void,
                                       onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendTextMessage(message: message, onMessagePending: onMessagePending, onMessageSent: onMessageSent, onError: onError)
    }

    /// Sends a media message through the shared vault's outbox, its files copied first (see
    /// `OfflineVault.sendMediaMessage(message:onMessagePending:onMessageSent:onError:)`).
    public static func sendMediaMessage(message: MediaMessage, onMessagePending: @escaping @Sendable (MediaMessage) -> Void,
                                        onMessageSent: @escaping @Sendable (MediaMessage) -> Void,
                                        onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendMediaMessage(message: message, onMessagePending: onMessagePending, onMessageSent: onMessageSent, onError: onError)
    }

    /// Sends a custom message through the shared vault's outbox (see
    /// `OfflineVault.sendCustomMessage(message:onMessagePending:onMessageSent:onError:)`).
    public static func sendCustomMessage(message: CustomMessage, onMessagePending: @escaping @Sendable (CustomMessage) -> Void,
                                         onMessageSent: @escaping @Sendable (CustomMessage) -> Void,
                                         onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendCustomMessage(message: message, onMessagePending: onMessagePending, onMessageSent: onMessageSent, onError: onError)
    }

    /// Sends an interactive message through the shared vault's outbox (see
    /// `OfflineVault.sendInteractiveMessage(message:onMessagePending:onMessageSent:onError:)`).
    public static func sendInteractiveMessage(message: InteractiveMessage, onMessagePending: @escaping @Sendable (InteractiveMessage) -> Void,
                                              onMessageSent: @escaping @Sendable (InteractiveMessage) -> Void,
                                              onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendInteractiveMessage(message: message, onMessagePending: onMessagePending, onMessageSent: onMessageSent, onError: onError)
    }

    /// The classic send: straight to the server through the shared vault, never queued, no pending
    /// stage; offline it fails with `ERROR_INTERNET_UNAVAILABLE`.
    public static func sendTextMessage(message: TextMessage, onSuccess: @escaping @Sendable (TextMessage) -> Void,
                                       onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendTextMessage(message: message, onSuccess: onSuccess, onError: onError)
    }

    /// The classic media send: straight to the server, never queued; offline it fails with
    /// `ERROR_INTERNET_UNAVAILABLE`.
    public static func sendMediaMessage(message: MediaMessage, onSuccess: @escaping @Sendable (MediaMessage) -> Void,
                                        onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendMediaMessage(message: message, onSuccess: onSuccess, onError: onError)
    }

    /// The classic custom send: straight to the server, never queued; offline it fails with
    /// `ERROR_INTERNET_UNAVAILABLE`.
    public static func sendCustomMessage(message: CustomMessage, onSuccess: @escaping @Sendable (CustomMessage) -> Void,
                                         onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendCustomMessage(message: message, onSuccess: onSuccess, onError: onError)
    }

    /// The classic interactive send: straight to the server, never queued; offline it fails with
    /// `ERROR_INTERNET_UNAVAILABLE`.
    public static func sendInteractiveMessage(message: InteractiveMessage, onSuccess: @escaping @Sendable (InteractiveMessage) -> Void,
                                              onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendInteractiveMessage(message: message, onSuccess: onSuccess, onError: onError)
    }

    /// The shared vault's whole unsent outbox (pending, sending, failed) in compose order;
    /// `onError` gets `ERROR_OFFLINE_MESSAGE_PERSIST_FAILED` when the cache is momentarily
    /// unavailable and `ERROR_OFFLINE_DISABLED` when offline support is not running.
    public static func getPendingMessages(onSuccess: @escaping @Sendable ([BaseMessage]) -> Void,
                                          onError: @escaping @Sendable (CometChatException) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noOffline) } }
        vault.getPendingMessages(onSuccess: onSuccess, onError: onError)
    }

    /// The outbox, synchronously; an empty list without a vault or when the outbox cannot be read.
    @available(*, deprecated, message: "Use getPendingMessages(onSuccess:onError:): this form cannot tell an empty outbox from an unreadable one.")
    public static func getPendingMessages() -> [BaseMessage] {
        offlineVault?.getPendingMessages() ?? []
    }

    /// Re-attempts one unsent message now (see `OfflineVault.retryMessage(_:onSuccess:onError:)`):
    /// `onSuccess` once it is sent, `onError` with a rejection (`ERROR_OFFLINE_MESSAGE_IN_FLIGHT`,
    /// `…_NOT_FOUND`, `ERROR_OFFLINE_DISABLED`, `…_PERSIST_FAILED`) or that attempt's error.
    public static func retryMessage(_ localMessageId: String, onSuccess: @escaping @Sendable () -> Void,
                                    onError: @escaping @Sendable (CometChatException) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noOffline) } }
        vault.retryMessage(localMessageId, onSuccess: onSuccess, onError: onError)
    }

    /// For a message's `localMessageId` as it is (`String?`): nil answers `ERROR_OFFLINE_MESSAGE_NOT_FOUND`.
    public static func retryMessage(_ localMessageId: String?, onSuccess: @escaping @Sendable () -> Void,
                                    onError: @escaping @Sendable (CometChatException) -> Void) {
        retryMessage(localMessageId ?? "", onSuccess: onSuccess, onError: onError)
    }

    /// Fire-and-forget retry of a message by its `localMessageId` (nothing for one without);
    /// reports nothing (watch an `OutboxListener`).
    public static func retryMessage(_ message: BaseMessage) {
        offlineVault?.retryMessage(message)
    }

    /// Retries every message that failed `.transient`; `.permanent` ones are skipped. No callback:
    /// watch an `OutboxListener`.
    public static func retryAllFailedMessages() {
        offlineVault?.retryAllFailedMessages()
    }

    /// Deletes an unsent (pending or failed) message and its copied media (see
    /// `OfflineVault.discardLocalMessage(_:onSuccess:onError:)`); no outbox event fires.
    public static func discardLocalMessage(_ localMessageId: String, onSuccess: @escaping @Sendable () -> Void,
                                           onError: @escaping @Sendable (CometChatException) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noOffline) } }
        vault.discardLocalMessage(localMessageId, onSuccess: onSuccess, onError: onError)
    }

    /// For a message's `localMessageId` as it is (`String?`): nil answers `ERROR_OFFLINE_MESSAGE_NOT_FOUND`.
    public static func discardLocalMessage(_ localMessageId: String?, onSuccess: @escaping @Sendable () -> Void,
                                           onError: @escaping @Sendable (CometChatException) -> Void) {
        discardLocalMessage(localMessageId ?? "", onSuccess: onSuccess, onError: onError)
    }

    /// Registers an outbox listener on the shared vault (held weakly; one per id); does nothing
    /// without a vault.
    public static func addOutboxListener(_ id: String, _ listener: any OutboxListener) {
        offlineVault?.addOutboxListener(id, listener)
    }

    /// Removes the shared vault's outbox listener registered under `id`, if any.
    public static func removeOutboxListener(_ id: String) {
        offlineVault?.removeOutboxListener(id)
    }

    private static var noSession: CometChatException {
        CometChatException(.userNotLoggedIn, "no OfflineVault: set CometChat.offlineVault")
    }

    private static var noOffline: CometChatException {
        CometChatException(.offlineDisabled, "no OfflineVault: set CometChat.offlineVault")
    }
}

/// The seeds' static spelling for upload batches, forwarding to `CometChat.offlineVault`.
///
///     if let request = CometChat.getExistingUploadFileRequest(receiverId: "UID", receiverType: .user, parentMessageId: 0) {
///         for item in request.getItems() where item.state == .failed { request.retryAttachment(fileId: item.fileId) }
///     }
extension CometChat {
    /// The upload batch kept for a composer, or nil when offline support is not running, nobody
    /// is logged in, no vault is installed, or no batch was kept for that composer.
    /// - Parameter parentMessageId: 0 for the main composer, the thread parent's id for a thread's.
    public static func getExistingUploadFileRequest(receiverId: String, receiverType: ReceiverType, parentMessageId: Int) -> UploadFileRequest? {
        offlineVault?.getExistingUploadFileRequest(receiverId: receiverId, receiverType: receiverType, parentMessageId: parentMessageId)
    }
}
