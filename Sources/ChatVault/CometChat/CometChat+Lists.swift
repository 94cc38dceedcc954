/// The seeds' static spellings for blocking, and the SDK's names of the enums the entity-list
/// builders take (`CometChat.Blocked`, `CometChat.UserStatus`, `CometChat.SortOrder`).
///
///     CometChat.blockUsers(["spammer"], onSuccess: { result in … }, onError: { error in … })
///     let users = UsersRequest.UsersRequestBuilder().set(status: CometChat.UserStatus.online).build()
extension CometChat {
    /// See ``ChatVault/BlockedDirection`` (`.byMe`, `.me`, `.both`).
    public typealias Blocked = ChatVault.BlockedDirection
    /// See ``ChatVault/UserStatus``.
    public typealias UserStatus = ChatVault.UserStatus
    /// See ``ChatVault/SortOrder``.
    public typealias SortOrder = ChatVault.SortOrder

    /// Blocks users through `offlineVault`; the result maps each uid to `"success"` or `"fail"`.
    /// Never queued: offline it fails with `ERROR_INTERNET_UNAVAILABLE` and changes nothing.
    ///
    ///     CometChat.blockUsers(["spammer"], onSuccess: { result in print(result) },
    ///                          onError: { error in print(error?.errorCode ?? "") })
    public static func blockUsers(_ users: [String], onSuccess: @escaping @Sendable ([String: Any]) -> Void,
                                  onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noVault) } }
        vault.blockUsers(users, onSuccess: onSuccess, onError: onError)
    }

    /// Unblocks users through `offlineVault`.
    ///
    ///     CometChat.unblockUsers(["bob"], onSuccess: { _ in }, onError: { _ in })
    public static func unblockUsers(_ users: [String], onSuccess: @escaping @Sendable ([String: Any]) -> Void,
                                    onError: @escaping @Sendable (CometChatException?) -> Void) {
        guard let vault = offlineVault else { return CallbackExecutor.main.execute { onError(noVault) } }
        vault.unblockUsers(users, onSuccess: onSuccess, onError: onError)
    }

    /// Blocks users (async form).
    ///
    ///     let result = try await CometChat.blockUsers(["spammer"])
    public static func blockUsers(_ users: [String]) async throws(CometChatException) -> [String: String] {
        guard let vault = offlineVault else { throw noVault }
        return try await vault.blockUsers(users)
    }

    /// Unblocks users (async form).
    ///
    ///     let result = try await CometChat.unblockUsers(["bob"])
    public static func unblockUsers(_ users: [String]) async throws(CometChatException) -> [String: String] {
        guard let vault = offlineVault else { throw noVault }
        return try await vault.unblockUsers(users)
    }

    private static var noVault: CometChatException {
        CometChatException(.userNotLoggedIn, "no OfflineVault: set CometChat.offlineVault")
    }
}
