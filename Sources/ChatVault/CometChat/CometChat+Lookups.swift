/// The seeds' static spelling of the single-item lookups, forwarding to `CometChat.offlineVault`.
///
///     CometChat.offlineVault = vault
///     CometChat.getConversation(conversationWith: "bob", conversationType: .user, listener: loader)
///     CometChat.getMessageDetails(42, listener: messageLoader)
///
/// Without an installed vault, each call reports `ERROR_USER_NOT_LOGGED_IN` to its error callback
/// on the main queue.
extension CometChat {
    /// Two-phase `getConversation`: the cached copy only on a hit, then the server's (see
    /// `OfflineVault.getConversation(conversationWith:conversationType:listener:)`). The listener
    /// is held until the lookup ends.
    ///
    ///     CometChat.getConversation(conversationWith: "UID", conversationType: .user, listener: loader)
    public static func getConversation(conversationWith: String, conversationType: ConversationType,
                                       listener: any ConversationDetailsListener) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { listener.onError(noVaultForLookup) } }
        vault.getConversation(conversationWith: conversationWith, conversationType: conversationType, listener: listener)
    }

    /// The classic `getConversation`: the server's copy only.
    ///
    ///     CometChat.getConversation(conversationWith: "GUID", conversationType: .group,
    ///                               onSuccess: { show($0) }, onError: { print($0?.errorCode ?? "") })
    public static func getConversation(conversationWith: String, conversationType: ConversationType,
                                       onSuccess: @escaping @Sendable (Conversation?) -> Void,
                                       onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noVaultForLookup) } }
        vault.getConversation(conversationWith: conversationWith, conversationType: conversationType, onSuccess: onSuccess, onError: onError)
    }

    /// Two-phase `getMessageDetails`: the cached copy only on a hit, then the server's. The
    /// listener is held until the lookup ends.
    ///
    ///     CometChat.getMessageDetails(messageId, listener: messageLoader)
    public static func getMessageDetails(_ messageId: Int, listener: any MessageDetailsListener) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { listener.onError(noVaultForLookup) } }
        vault.getMessageDetails(messageId, listener: listener)
    }

    /// The classic `getMessageDetails`: the server's copy only.
    ///
    ///     CometChat.getMessageDetails(messageId) { message in show(message) } onError: { error in print(error?.errorCode ?? "") }
    public static func getMessageDetails(_ messageId: Int, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                                         onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noVaultForLookup) } }
        vault.getMessageDetails(messageId, onSuccess: onSuccess, onError: onError)
    }

    private static var noVaultForLookup: CometChatException {
        CometChatException(.userNotLoggedIn, "no OfflineVault: set CometChat.offlineVault")
    }
}
