public import Foundation

/// One page of a list, as wire JSON (see `WireDecoder` for each entity's fields).
public struct WirePage: Sendable, Equatable {
    public var items: [JSONValue]
    /// The token for the next page; nil at the end.
    public var nextCursor: String?

    public init(items: [JSONValue], nextCursor: String?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

/// Why a backend call failed.
public enum BackendError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No connection: the request never reached the server.
    case unreachable
    /// Sent, but no answer in time (the server may or may not have acted on it).
    case timedOut
    /// The server answered with an error (HTTP-like status and the server's own code).
    case server(status: Int, code: String, message: String)

    public var description: String {
        switch self {
        case .unreachable: return "the server cannot be reached"
        case .timedOut: return "the server did not answer in time"
        case .server(let status, let code, let message): return "server error \(status) \(code): \(message)"
        }
    }

    /// Retrying later may help (5xx, 429, no answer).
    public var isTransient: Bool {
        switch self {
        case .unreachable, .timedOut: return true
        case .server(let status, _, _): return status >= 500 || status == 429
        }
    }
}

/// Who the session belongs to and the server's clock.
public struct BackendSession: Sendable, Equatable {
    public var user: JSONValue
    /// Server time at login, epoch seconds.
    public var serverTime: Int64

    public init(user: JSONValue, serverTime: Int64) {
        self.user = user
        self.serverTime = serverTime
    }
}

/// A change since a sync point (the catch-up log, replayed forward).
public enum ChangeLogEntry: Sendable, Equatable {
    case messageUpserted(JSONValue)
    case messageDeleted(id: Int, conversationId: String)
    case conversationRemoved(conversationId: String)
}

/// One page of the change log.
public struct ChangeLogPage: Sendable, Equatable {
    public var changes: [ChangeLogEntry]
    /// The sync point to resume from (server time of the last change included).
    public var nextSince: Int64
    /// More changes remain after this page.
    public var hasMore: Bool

    public init(changes: [ChangeLogEntry], nextSince: Int64, hasMore: Bool) {
        self.changes = changes
        self.nextSince = nextSince
        self.hasMore = hasMore
    }
}

/// Something the realtime connection delivered.
public enum RealtimeEvent: Sendable, Equatable {
    case connected
    case disconnected
    case messageReceived(JSONValue)
    case messageEdited(JSONValue)
    case messageDeleted(JSONValue)
    /// Someone reacted to a message. Wire shape (an object):
    /// `{"reaction": {id, messageId, reaction, uid, reactedAt, reactedBy?},` (a reaction as the
    /// reactions list renders it) `"receiverId", "receiverType": "user"|"group", "conversationId",
    /// "parentMessageId"?, "message"?}`, where `message` is the reacted message as it now stands
    /// (its reaction counts rendered for this device's user). Without `message` the cache is left
    /// as it is (the next read brings the counts); listeners are told either way.
    case reactionAdded(JSONValue)
    /// A reaction was taken back; the same shape as `reactionAdded`.
    case reactionRemoved(JSONValue)
    /// A user's devices received a conversation up to a message. Wire shape (an object):
    /// `{"messageId", "sender": {user}` (who received), `"receiverId", "receiverType",
    /// "conversationId", "receiptType": "delivered", "timestamp", "deliveredAt"?, "readAt"?}`.
    case messagesDelivered(JSONValue)
    /// A user read a conversation up to a message; the shape of `messagesDelivered` with
    /// `"receiptType": "read"`.
    case messagesRead(JSONValue)
}

/// Downloaded media bytes.
public struct MediaDownload: Sendable, Equatable {
    public var bytes: Data
    public var mimeType: String?

    public init(bytes: Data, mimeType: String?) {
        self.bytes = bytes
        self.mimeType = mimeType
    }
}

/// How the engine reaches a chat server. Every call is async and may throw `BackendError`; payloads
/// are wire JSON the engine validates (`WireLimits`) before anything reaches the cache.
///
/// `ChatVaultSimulator` implements it in process, for the library's tests and apps' own tests.
public protocol ChatBackend: Sendable {
    // Session
    func login(userId: String) async throws(BackendError) -> BackendSession
    func logout() async

    // Reads
    func messages(_ query: MessageQuery) async throws(BackendError) -> WirePage
    func threads(_ query: ThreadQuery) async throws(BackendError) -> WirePage
    func conversations(_ query: ConversationQuery) async throws(BackendError) -> WirePage
    func users(_ query: UserQuery) async throws(BackendError) -> WirePage
    func blockedUsers(_ query: BlockedUserQuery) async throws(BackendError) -> WirePage
    func groups(_ query: GroupQuery) async throws(BackendError) -> WirePage
    func groupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage
    func bannedGroupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage
    func reactions(_ query: ReactionQuery) async throws(BackendError) -> WirePage
    func notificationFeed(_ query: FeedQuery) async throws(BackendError) -> WirePage
    /// One message; `.server(404, …)` when it does not exist.
    func message(id: Int) async throws(BackendError) -> JSONValue
    /// One conversation; `.server(404, …)` when there is none.
    func conversation(with id: String, type: ConversationType) async throws(BackendError) -> JSONValue

    // Writes
    /// Sends a message. Idempotent by `localMessageId`: sending the same id again returns the
    /// message already stored, never a second copy.
    func send(_ message: JSONValue, localMessageId: String) async throws(BackendError) -> JSONValue
    /// Edits a message the user sent: `changes` holds the outgoing fields to replace (`data.text`,
    /// `data.metadata`, `data.customData`, `tags`…). Answers the edited message. Never queued: the
    /// engine writes the answer to the cache only once the server has accepted the edit.
    func editMessage(id: Int, changes: JSONValue) async throws(BackendError) -> JSONValue
    /// Deletes a message; answers it as deleted (`deletedAt`, `deletedBy`). Never queued.
    func deleteMessage(id: Int) async throws(BackendError) -> JSONValue
    /// Adds the user's reaction to a message; answers the message with its reactions. Adding one
    /// the user already has changes nothing. Never queued.
    func addReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue
    /// Removes the user's reaction; answers the message with its reactions. Never queued.
    func removeReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue
    /// Uploads the file at `path` to hosted storage and answers its attachment (`name`, `extension`,
    /// `mimeType`, `url`, `size`), ready to go into a media message's `data.attachments`.
    func uploadMedia(path: String, name: String, mimeType: String) async throws(BackendError) -> JSONValue
    /// Blocks users; the answer maps each uid to success.
    func blockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool]
    func unblockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool]

    // Catch-up sync
    func changes(since: Int64, limit: Int) async throws(BackendError) -> ChangeLogPage

    // Media
    func downloadMedia(url: String) async throws(BackendError) -> MediaDownload
    /// A fresh URL for an attachment whose URL expired (401/403/410).
    func resignMediaURL(_ url: String, messageId: Int) async throws(BackendError) -> String

    // Realtime
    func connect() async throws(BackendError)
    func disconnect() async
    /// The realtime events of this backend's connection: one stream for the backend's whole life
    /// (across logout and login), iterated by one engine at a time; `.connected` and
    /// `.disconnected` mark each connection.
    var events: AsyncStream<RealtimeEvent> { get }
}
