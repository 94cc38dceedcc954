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
    var forwardee: any ChatBackend { get }
}

extension ForwardingBackend {
    public var events: AsyncStream<RealtimeEvent> { forwardee.events }
    public func login(userId: String) async throws(BackendError) -> BackendSession { try await forwardee.login(userId: userId) }
    public func logout() async { await forwardee.logout() }
    public func messages(_ q: MessageQuery) async throws(BackendError) -> WirePage { try await forwardee.messages(q) }
    public func threads(_ q: ThreadQuery) async throws(BackendError) -> WirePage { try await forwardee.threads(q) }
    public func conversations(_ q: ConversationQuery) async throws(BackendError) -> WirePage { try await forwardee.conversations(q) }
    public func users(_ q: UserQuery) async throws(BackendError) -> WirePage { try await forwardee.users(q) }
    public func blockedUsers(_ q: BlockedUserQuery) async throws(BackendError) -> WirePage { try await forwardee.blockedUsers(q) }
    public func groups(_ q: GroupQuery) async throws(BackendError) -> WirePage { try await forwardee.groups(q) }
    public func groupMembers(_ q: GroupMemberQuery) async throws(BackendError) -> WirePage { try await forwardee.groupMembers(q) }
    public func bannedGroupMembers(_ q: GroupMemberQuery) async throws(BackendError) -> WirePage { try await forwardee.bannedGroupMembers(q) }
    public func reactions(_ q: ReactionQuery) async throws(BackendError) -> WirePage { try await forwardee.reactions(q) }
    public func notificationFeed(_ q: FeedQuery) async throws(BackendError) -> WirePage { try await forwardee.notificationFeed(q) }
    public func message(id: Int) async throws(BackendError) -> JSONValue { try await forwardee.message(id: id) }
    public func conversation(with id: String, type: ConversationType) async throws(BackendError) -> JSONValue {
        try await forwardee.conversation(with: id, type: type)
    }
    public func send(_ m: JSONValue, localMessageId: String) async throws(BackendError) -> JSONValue {
        try await forwardee.send(m, localMessageId: localMessageId)
    }
    public func editMessage(id: Int, changes: JSONValue) async throws(BackendError) -> JSONValue {
        try await forwardee.editMessage(id: id, changes: changes)
    }
    public func deleteMessage(id: Int) async throws(BackendError) -> JSONValue { try await forwardee.deleteMessage(id: id) }
    public func addReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue {
        try await forwardee.addReaction(messageId: messageId, reaction: reaction)
    }
    public func removeReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue {
        try await forwardee.removeReaction(messageId: messageId, reaction: reaction)
    }
    public func uploadMedia(path: String, name: String, mimeType: String) async throws(BackendError) -> JSONValue {
        try await forwardee.uploadMedia(path: path, name: name, mimeType: mimeType)
    }
    public func blockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] { try await forwardee.blockUsers(uids) }
    public func unblockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] { try await forwardee.unblockUsers(uids) }
    public func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
        try await forwardee.changes(since: token, limit: limit)
    }
    public func latestSyncPoint() async throws(BackendError) -> ChangeLogPage { try await forwardee.latestSyncPoint() }
    public func downloadMedia(url: String) async throws(BackendError) -> MediaStream { try await forwardee.downloadMedia(url: url) }
    public func resignMediaURL(_ url: String, messageId: Int) async throws(BackendError) -> String {
        try await forwardee.resignMediaURL(url, messageId: messageId)
    }
    public func connect() async throws(BackendError) { try await forwardee.connect() }
    public func disconnect() async { await forwardee.disconnect() }
    public func attach(identities: any MessageIdentities) { forwardee.attach(identities: identities) }
    public func attach(state: any BackendStateStore) { forwardee.attach(state: state) }
}
