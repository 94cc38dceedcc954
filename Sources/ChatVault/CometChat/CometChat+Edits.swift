/// The seeds' static spellings for edits, deletes and reactions, forwarding to
/// `CometChat.offlineVault`. Never queued: offline they fail with `ERROR_INTERNET_UNAVAILABLE` and
/// change nothing (see `OfflineVault.editMessage(_:onSuccess:onError:)`). Without an installed
/// vault they fail with `ERROR_USER_NOT_LOGGED_IN`.
///
///     let edit = TextMessage(receiverUid: "bob", text: "Fixed typo", receiverType: .user)
///     edit.id = 42
///     CometChat.editMessage(edit, onSuccess: { edited in … }, onError: { error in … })
///     CometChat.addReaction(messageId: 42, reaction: "👍", onSuccess: { _ in }, onError: { _ in })
extension CometChat {
    /// Edits a message through `offlineVault`. Never queued.
    public static func editMessage(_ message: BaseMessage, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                                   onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noVaultForChanges) } }
        vault.editMessage(message, onSuccess: onSuccess, onError: onError)
    }

    /// The iOS SDK's spelling of `editMessage(_:onSuccess:onError:)`.
    ///
    ///     CometChat.edit(message: edit, onSuccess: { _ in }, onError: { _ in })
    public static func edit(message: BaseMessage, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                            onError: @escaping @Sendable (CometChatException?) -> Void) {
        editMessage(message, onSuccess: onSuccess, onError: onError)
    }

    /// Deletes a message through `offlineVault`. Never queued.
    public static func deleteMessage(_ messageId: Int, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                                     onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noVaultForChanges) } }
        vault.deleteMessage(messageId, onSuccess: onSuccess, onError: onError)
    }

    /// The iOS SDK's spelling of `deleteMessage(_:onSuccess:onError:)`.
    ///
    ///     CometChat.delete(messageId: 42, onSuccess: { _ in }, onError: { _ in })
    public static func delete(messageId: Int, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                              onError: @escaping @Sendable (CometChatException?) -> Void) {
        deleteMessage(messageId, onSuccess: onSuccess, onError: onError)
    }

    /// Adds the user's reaction through `offlineVault`. Never queued.
    public static func addReaction(messageId: Int, reaction: String, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                                   onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noVaultForChanges) } }
        vault.addReaction(messageId: messageId, reaction: reaction, onSuccess: onSuccess, onError: onError)
    }

    /// Removes the user's reaction through `offlineVault`. Never queued.
    public static func removeReaction(messageId: Int, reaction: String, onSuccess: @escaping @Sendable (BaseMessage) -> Void,
                                      onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noVaultForChanges) } }
        vault.removeReaction(messageId: messageId, reaction: reaction, onSuccess: onSuccess, onError: onError)
    }

    /// Edits a message (async form).
    ///
    ///     let edited = try await CometChat.editMessage(edit)
    public static func editMessage(_ message: BaseMessage) async throws(CometChatException) -> BaseMessage {
        guard let vault = offlineVault else { throw noVaultForChanges }
        return try await vault.editMessage(message)
    }

    /// Deletes a message (async form).
    ///
    ///     let deleted = try await CometChat.deleteMessage(42)
    public static func deleteMessage(_ messageId: Int) async throws(CometChatException) -> BaseMessage {
        guard let vault = offlineVault else { throw noVaultForChanges }
        return try await vault.deleteMessage(messageId)
    }

    /// Adds a reaction (async form).
    ///
    ///     let message = try await CometChat.addReaction(messageId: 42, reaction: "👍")
    public static func addReaction(messageId: Int, reaction: String) async throws(CometChatException) -> BaseMessage {
        guard let vault = offlineVault else { throw noVaultForChanges }
        return try await vault.addReaction(messageId: messageId, reaction: reaction)
    }

    /// Removes a reaction (async form).
    ///
    ///     let message = try await CometChat.removeReaction(messageId: 42, reaction: "👍")
    public static func removeReaction(messageId: Int, reaction: String) async throws(CometChatException) -> BaseMessage {
        guard let vault = offlineVault else { throw noVaultForChanges }
        return try await vault.removeReaction(messageId: messageId, reaction: reaction)
    }

    private static var noVaultForChanges: CometChatException {
        CometChatException(.userNotLoggedIn, "no OfflineVault: set CometChat.offlineVault")
    }
}
