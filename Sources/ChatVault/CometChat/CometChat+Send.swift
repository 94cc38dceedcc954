/// The seeds' static spellings for sending and the outbox, forwarding to `CometChat.offlineVault`.
/// Without an installed vault a send fails with `ERROR_USER_NOT_LOGGED_IN` and the outbox calls
/// with `ERROR_OFFLINE_DISABLED`.
///
///     CometChat.sendTextMessage(message: TextMessage(receiverUid: "bob", text: "Hi", receiverType: .user),
///                               onMessagePending: { _ in }, onMessageSent: { _ in }, onError: { _ in })
///     CometChat.addOutboxListener("OUTBOX", observer)
extension CometChat {
    public static func sendTextMessage(message: TextMessage, onMessagePending: @escaping @Sendable (TextMessage) -> Void,
                                       onMessageSent: @escaping @Sendable (TextMessage) -> Void,
                                       onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendTextMessage(message: message, onMessagePending: onMessagePending, onMessageSent: onMessageSent, onError: onError)
    }

    public static func sendMediaMessage(message: MediaMessage, onMessagePending: @escaping @Sendable (MediaMessage) -> Void,
                                        onMessageSent: @escaping @Sendable (MediaMessage) -> Void,
                                        onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendMediaMessage(message: message, onMessagePending: onMessagePending, onMessageSent: onMessageSent, onError: onError)
    }

    public static func sendCustomMessage(message: CustomMessage, onMessagePending: @escaping @Sendable (CustomMessage) -> Void,
                                         onMessageSent: @escaping @Sendable (CustomMessage) -> Void,
                                         onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendCustomMessage(message: message, onMessagePending: onMessagePending, onMessageSent: onMessageSent, onError: onError)
    }

    public static func sendInteractiveMessage(message: InteractiveMessage, onMessagePending: @escaping @Sendable (InteractiveMessage) -> Void,
                                              onMessageSent: @escaping @Sendable (InteractiveMessage) -> Void,
                                              onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendInteractiveMessage(message: message, onMessagePending: onMessagePending, onMessageSent: onMessageSent, onError: onError)
    }

    public static func sendTextMessage(message: TextMessage, onSuccess: @escaping @Sendable (TextMessage) -> Void,
                                       onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendTextMessage(message: message, onSuccess: onSuccess, onError: onError)
    }

    public static func sendMediaMessage(message: MediaMessage, onSuccess: @escaping @Sendable (MediaMessage) -> Void,
                                        onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendMediaMessage(message: message, onSuccess: onSuccess, onError: onError)
    }

    public static func sendCustomMessage(message: CustomMessage, onSuccess: @escaping @Sendable (CustomMessage) -> Void,
                                         onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendCustomMessage(message: message, onSuccess: onSuccess, onError: onError)
    }

    public static func sendInteractiveMessage(message: InteractiveMessage, onSuccess: @escaping @Sendable (InteractiveMessage) -> Void,
                                              onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noSession) } }
        vault.sendInteractiveMessage(message: message, onSuccess: onSuccess, onError: onError)
    }

    public static func getPendingMessages(onSuccess: @escaping @Sendable ([BaseMessage]) -> Void,
                                          onError: @escaping @Sendable (CometChatException) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noOffline) } }
        vault.getPendingMessages(onSuccess: onSuccess, onError: onError)
    }

    @available(*, deprecated, message: "Use getPendingMessages(onSuccess:onError:): this form cannot tell an empty outbox from an unreadable one.")
    public static func getPendingMessages() -> [BaseMessage] {
        offlineVault?.getPendingMessages() ?? []
    }

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

    public static func retryMessage(_ message: BaseMessage) {
        offlineVault?.retryMessage(message)
    }

    public static func retryAllFailedMessages() {
        offlineVault?.retryAllFailedMessages()
    }

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

    public static func addOutboxListener(_ id: String, _ listener: any OutboxListener) {
        offlineVault?.addOutboxListener(id, listener)
    }

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
