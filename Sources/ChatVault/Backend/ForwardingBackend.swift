/// A backend that passes every call to another one: conform, name `forwardee`, and implement only
/// the calls to change (a timing wrapper, a test's hook). Every `ChatBackend` requirement has a
/// forwarding default here, so a wrapper stays correct when the protocol grows.
///
///     final class Timed: ForwardingBackend {
///         let forwardee: any ChatBackend
///         func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
///             try await measure { try await forwardee.changes(since: token, limit: limit) }
///         }
///     }
public protocol ForwardingBackend: ChatBackend {
    /// The backend every call goes to unless the conforming type implements it itself.
    var forwardee: any ChatBackend { get }
}

extension ForwardingBackend {
    /// `forwardee`'s events.
    public var events: AsyncStream<RealtimeEvent> { forwardee.events }
    /// Forwards `login` to `forwardee`.
    public func login(userId: String) async throws(BackendError) -> BackendSession { try await forwardee.login(userId: userId) }
    /// Forwards `logout` to `forwardee`.
    public func logout() async { await forwardee.logout() }
    /// Forwards `messages` to `forwardee`.
    public func messages(_ q: MessageQuery) async throws(BackendError) -> WirePage { try await forwardee.messages(q) }
    /// Forwards `threads` to `forwardee`.
    public func threads(_ q: ThreadQuery) async throws(BackendError) -> WirePage { try await forwardee.threads(q) }
    /// Forwards `conversations` to `forwardee`.
    public func conversations(_ q: ConversationQuery) async throws(BackendError) -> WirePage { try await forwardee.conversations(q) }
    /// Forwards `users` to `forwardee`.
    public func users(_ q: UserQuery) async throws(BackendError) -> WirePage { try await forwardee.users(q) }
    /// Forwards `blockedUsers` to `forwardee`.
    public func blockedUsers(_ q: BlockedUserQuery) async throws(BackendError) -> WirePage { try await forwardee.blockedUsers(q) }
    /// Forwards `groups` to `forwardee`.
    public func groups(_ q: GroupQuery) async throws(BackendError) -> WirePage { try await forwardee.groups(q) }
    /// Forwards `groupMembers` to `forwardee`.
    public func groupMembers(_ q: GroupMemberQuery) async throws(BackendError) -> WirePage { try await forwardee.groupMembers(q) }
    /// Forwards `bannedGroupMembers` to `forwardee`.
    public func bannedGroupMembers(_ q: GroupMemberQuery) async throws(BackendError) -> WirePage { try await forwardee.bannedGroupMembers(q) }
    /// Forwards `reactions` to `forwardee`.
    public func reactions(_ q: ReactionQuery) async throws(BackendError) -> WirePage { try await forwardee.reactions(q) }
    /// Forwards `notificationFeed` to `forwardee`.
    public func notificationFeed(_ q: FeedQuery) async throws(BackendError) -> WirePage { try await forwardee.notificationFeed(q) }
    /// Forwards `message` to `forwardee`.
    public func message(id: Int) async throws(BackendError) -> JSONValue { try await forwardee.message(id: id) }
    /// Forwards `conversation` to `forwardee`.
    public func conversation(with id: String, type: ConversationType) async throws(BackendError) -> JSONValue {
        try await forwardee.conversation(with: id, type: type)
    }
    /// Forwards `send` to `forwardee`.
    public func send(_ m: JSONValue, localMessageId: String) async throws(BackendError) -> JSONValue {
        try await forwardee.send(m, localMessageId: localMessageId)
    }
    /// Forwards `editMessage` to `forwardee`.
    public func editMessage(id: Int, changes: JSONValue) async throws(BackendError) -> JSONValue {
        try await forwardee.editMessage(id: id, changes: changes)
    }
    /// Forwards `deleteMessage` to `forwardee`.
    public func deleteMessage(id: Int) async throws(BackendError) -> JSONValue { try await forwardee.deleteMessage(id: id) }
    /// Forwards `addReaction` to `forwardee`.
    public func addReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue {
        try await forwardee.addReaction(messageId: messageId, reaction: reaction)
    }
    /// Forwards `removeReaction` to `forwardee`.
    public func removeReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue {
        try await forwardee.removeReaction(messageId: messageId, reaction: reaction)
    }
    /// Forwards `uploadMedia` to `forwardee`.
    public func uploadMedia(path: String, name: String, mimeType: String) async throws(BackendError) -> JSONValue {
        try await forwardee.uploadMedia(path: path, name: name, mimeType: mimeType)
    }
    /// Forwards `blockUsers` to `forwardee`.
    public func blockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] { try await forwardee.blockUsers(uids) }
    /// Forwards `unblockUsers` to `forwardee`.
    public func unblockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] { try await forwardee.unblockUsers(uids) }
    /// Forwards `changes` to `forwardee`.
    public func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
        try await forwardee.changes(since: token, limit: limit)
    }
    /// Forwards `latestSyncPoint` to `forwardee`.
    public func latestSyncPoint() async throws(BackendError) -> ChangeLogPage { try await forwardee.latestSyncPoint() }
    /// Forwards `downloadMedia` to `forwardee`.
    public func downloadMedia(url: String) async throws(BackendError) -> MediaStream { try await forwardee.downloadMedia(url: url) }
    /// Forwards `resignMediaURL` to `forwardee`.
    public func resignMediaURL(_ url: String, messageId: Int) async throws(BackendError) -> String {
        try await forwardee.resignMediaURL(url, messageId: messageId)
    }
    /// Forwards `connect` to `forwardee`.
    public func connect() async throws(BackendError) { try await forwardee.connect() }
    /// Forwards `disconnect` to `forwardee`.
    public func disconnect() async { await forwardee.disconnect() }
    /// Forwards `attach` to `forwardee`.
    public func attach(identities: any MessageIdentities) { forwardee.attach(identities: identities) }
    /// Forwards `attach` to `forwardee`.
    public func attach(state: any BackendStateStore) { forwardee.attach(state: state) }
    /// Forwards `attach` to `forwardee`.
    public func attach(cachedMessages: any CachedMessages) { forwardee.attach(cachedMessages: cachedMessages) }
}
