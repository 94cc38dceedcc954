
/// The backend of an engine created without one: every call fails with `.unreachable`, as if the
/// device never had a connection. The cache still opens, serves and reports as usual.
public struct UnreachableBackend: ChatBackend {
    /// A backend that never reaches a server.
    public init() {}

    /// Throws `.unreachable`.
    public func login(userId: String) async throws(BackendError) -> BackendSession { throw .unreachable }
    /// Does nothing: there is no session or connection to end.
    public func logout() async {}
    /// Throws `.unreachable`.
    public func messages(_ query: MessageQuery) async throws(BackendError) -> WirePage { throw .unreachable }
    /// Throws `.unreachable`.
    public func threads(_ query: ThreadQuery) async throws(BackendError) -> WirePage { throw .unreachable }
    /// Throws `.unreachable`.
    public func conversations(_ query: ConversationQuery) async throws(BackendError) -> WirePage { throw .unreachable }
    /// Throws `.unreachable`.
    public func users(_ query: UserQuery) async throws(BackendError) -> WirePage { throw .unreachable }
    /// Throws `.unreachable`.
    public func blockedUsers(_ query: BlockedUserQuery) async throws(BackendError) -> WirePage { throw .unreachable }
    /// Throws `.unreachable`.
    public func groups(_ query: GroupQuery) async throws(BackendError) -> WirePage { throw .unreachable }
    /// Throws `.unreachable`.
    public func groupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage { throw .unreachable }
    /// Throws `.unreachable`.
    public func bannedGroupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage { throw .unreachable }
    /// Throws `.unreachable`.
    public func reactions(_ query: ReactionQuery) async throws(BackendError) -> WirePage { throw .unreachable }
    /// Throws `.unreachable`.
    public func notificationFeed(_ query: FeedQuery) async throws(BackendError) -> WirePage { throw .unreachable }
    /// Throws `.unreachable`.
    public func message(id: Int) async throws(BackendError) -> JSONValue { throw .unreachable }
    /// Throws `.unreachable`.
    public func conversation(with id: String, type: ConversationType) async throws(BackendError) -> JSONValue { throw .unreachable }
    /// Throws `.unreachable`.
    public func send(_ message: JSONValue, localMessageId: String) async throws(BackendError) -> JSONValue { throw .unreachable }
    /// Throws `.unreachable`.
    public func editMessage(id: Int, changes: JSONValue) async throws(BackendError) -> JSONValue { throw .unreachable }
    /// Throws `.unreachable`.
    public func deleteMessage(id: Int) async throws(BackendError) -> JSONValue { throw .unreachable }
    /// Throws `.unreachable`.
    public func addReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue { throw .unreachable }
    /// Throws `.unreachable`.
    public func removeReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue { throw .unreachable }
    /// Throws `.unreachable`.
    public func uploadMedia(path: String, name: String, mimeType: String) async throws(BackendError) -> JSONValue { throw .unreachable }
    /// Throws `.unreachable`.
    public func blockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] { throw .unreachable }
    /// Throws `.unreachable`.
    public func unblockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] { throw .unreachable }
    /// Throws `.unreachable`.
    public func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage { throw .unreachable }
    /// Throws `.unreachable`.
    public func downloadMedia(url: String) async throws(BackendError) -> MediaStream { throw .unreachable }
    /// Throws `.unreachable`.
    public func resignMediaURL(_ url: String, messageId: Int) async throws(BackendError) -> String { throw .unreachable }
    /// Throws `.unreachable`.
    public func connect() async throws(BackendError) { throw .unreachable }
    /// Does nothing: there is no session or connection to end.
    public func disconnect() async {}
    /// A stream that ends at once: no connection ever comes.
    public var events: AsyncStream<RealtimeEvent> { AsyncStream { $0.finish() } }
}
