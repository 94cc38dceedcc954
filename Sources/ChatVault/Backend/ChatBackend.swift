public import Foundation

/// One page of a list, as wire JSON (see `WireDecoder` for each entity's fields).
public struct WirePage: Sendable, Equatable {
    /// The page's items, as the server rendered them (not yet validated).
    public var items: [JSONValue]
    /// The token for the next page; nil at the end.
    public var nextCursor: String?

    /// A page of wire items and the token of the page after it.
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
    /// The server answered with an error (HTTP-like status and the server's own code). A 401 says
    /// the session is not authorised (expired, logged out), never that a message is refused: the
    /// outbox keeps a send that met it queued, for the session after a sign-in again.
    case server(status: Int, code: String, message: String)

    /// A sentence for logs: the kind of failure, and for a server error its status and code; the
    /// server's message is the backend's own text, never message content.
    public var description: String {
        switch self {
        case .unreachable: return "the server cannot be reached"
        case .timedOut: return "the server did not answer in time"
        case .server(let status, let code, let message): return "server error \(status) \(code): \(message)"
        }
    }

    /// The server's code for a sync token it no longer serves or does not know (status 410): its
    /// change log was compacted past that point, the server's history was reset, or the token
    /// belongs to another server. The engine drops its stored token and starts over with
    /// `changes(since: nil, …)` (a full refresh), never retries the same token.
    public static let syncTokenExpiredCode = "ERR_SYNC_TOKEN_EXPIRED"
    /// The server's code for a string that is not one of its sync tokens at all (status 400). The
    /// engine treats it like an expired token: a damaged or foreign stored token is dropped.
    public static let syncTokenInvalidCode = "ERR_SYNC_TOKEN_INVALID"

    /// The backend refused the sync token passed to `changes(since:limit:)`: expired or unknown
    /// (410 `ERR_SYNC_TOKEN_EXPIRED`) or malformed (400 `ERR_SYNC_TOKEN_INVALID`). Retrying the same
    /// token cannot help; the sync must start over from nil.
    public var isSyncTokenRejected: Bool {
        guard case .server(let status, let code, _) = self else { return false }
        return (status == 410 && code == Self.syncTokenExpiredCode) || (status == 400 && code == Self.syncTokenInvalidCode)
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
    /// The logged-in user as the server renders them (a user object, wire JSON).
    public var user: JSONValue
    /// Server time at login, epoch seconds.
    public var serverTime: Int64

    /// A session for this user, at this server time.
    public init(user: JSONValue, serverTime: Int64) {
        self.user = user
        self.serverTime = serverTime
    }
}

/// A change since a sync point (the catch-up log, replayed forward).
///
/// Reactions, pins and saves travel as `messageUpserted` of the message they touch, rendered with
/// its current reactions and receipt fields for the calling user (that is how the simulator logs
/// them, receipts too). A backend whose server reports a receipt as its own event, naming the
/// last message read (a Matrix `m.receipt`), sends it as `receipt`: the engine applies it up to
/// that message, as it does a realtime one.
public enum ChangeLogEntry: Sendable, Equatable {
    /// A message's current state (new, edited, reacted to, read…), as wire JSON.
    case messageUpserted(JSONValue)
    /// A message was deleted; the engine marks its cached copy deleted (`deletedAt` is the page's
    /// server time) and keeps the row.
    case messageDeleted(id: Int, conversationId: String)
    /// The conversation is gone for this user (deleted, or a group left): the engine removes it
    /// with its messages.
    case conversationRemoved(conversationId: String)
    /// A user received or read a conversation up to a message: the shape of
    /// `RealtimeEvent.messagesDelivered` / `messagesRead`, `receiptType` saying which (`"read"`
    /// when absent). The user's own read receipt (from another device) marks the cached messages
    /// up to it read and lowers the conversation's unread count; another user's, in a one-to-one
    /// conversation, marks the user's messages up to it delivered or read. Messages the cache does
    /// not hold are left alone.
    case receipt(JSONValue)
}

/// One page of the change log.
///
/// The sync point is the **server's own cursor, opaque to the engine**: the engine stores
/// `nextToken` as it is (in the same transaction as the page's rows) and passes it back to resume;
/// it never parses, compares or builds one. A server whose cursor is a timestamp encodes it (the
/// simulator does); one whose cursor is a token (a Matrix homeserver's `next_batch`/`since`)
/// passes it through.
public struct ChangeLogPage: Sendable, Equatable {
    /// Oldest first.
    public var changes: [ChangeLogEntry]
    /// The sync point reached by this page: pass it as `since` to get what follows. Also returned
    /// for an empty page (it may equal the token passed in).
    public var nextToken: String
    /// Server time, epoch seconds, of the point `nextToken` stands for (what
    /// `getLastSyncTimestamp()` reports once the page is committed): the time of the page's last
    /// change while `hasMore`, the server's clock when the log was read to its end.
    public var serverTime: Int64
    /// More changes remain after this page.
    public var hasMore: Bool

    /// A page of changes, the sync point it reaches, that point's server time, and whether more
    /// follow.
    public init(changes: [ChangeLogEntry], nextToken: String, serverTime: Int64, hasMore: Bool) {
        self.changes = changes
        self.nextToken = nextToken
        self.serverTime = serverTime
        self.hasMore = hasMore
    }
}

/// Something the realtime connection delivered.
public enum RealtimeEvent: Sendable, Equatable {
    /// The connection is up: the engine waits `VaultSettings.stableConnectionDelay` before it
    /// flushes the outbox and starts a catch-up sweep.
    case connected
    /// The connection dropped; the engine reconnects with its backoff (`VaultSettings.reconnect`).
    case disconnected
    /// A new message, as wire JSON (the shape of a message in a page).
    case messageReceived(JSONValue)
    /// A message was edited: the message as it now reads, as wire JSON.
    case messageEdited(JSONValue)
    /// A message was deleted: the message as deleted (`deletedAt`, `deletedBy`), as wire JSON.
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

/// A media download as it arrives: the bytes come in chunks, so a large attachment never has to
/// sit in memory whole.
public struct MediaStream: Sendable {
    /// What the server says the length is (absent for chunked answers; a hostile server may lie —
    /// the engine bounds what it accepts whatever this says).
    public var contentLength: Int64?
    /// The content type the server announced; nil when it sent none.
    public var mimeType: String?
    /// The bytes in order; ends when the download is complete; an error (a `BackendError`) ends it
    /// early. Iterate it once, from one task; cancelling that task, or dropping the stream, stops
    /// the download. Like any `AsyncThrowingStream`, it may end without an error once its task is
    /// cancelled: a cancelled consumer must not take that end for a complete download.
    public var chunks: AsyncThrowingStream<Data, any Error>

    /// A download with the server's announced length and type and its bytes.
    public init(contentLength: Int64?, mimeType: String?, chunks: AsyncThrowingStream<Data, any Error>) {
        self.contentLength = contentLength
        self.mimeType = mimeType
        self.chunks = chunks
    }
}

/// How the engine reaches a chat server. Every call is async and may throw `BackendError`; payloads
/// are wire JSON the engine validates (`WireLimits`) before anything reaches the cache.
///
/// `ChatVaultSimulator` implements it in process, for the library's tests and apps' own tests.
///
/// **An answer is the server's word.** The engine reconciles the cache against what a read
/// answers: a page of messages replaces the slice it covers, so cached rows the page omits are
/// deleted, and an empty page empties the slice. A backend must therefore never answer an empty
/// page, an empty list or a nil it means as "I don't know" (it is offline, it has not learnt yet
/// which room a conversation is, a lookup it depends on failed): it throws instead
/// (`.unreachable`, `.timedOut`, or a transient `.server` 5xx when it is not ready), and the
/// engine keeps the cache as it is. The same holds for a rendering: a field the backend could not
/// determine (a receipt, a reply count) is better left out than answered as zero where the engine
/// keeps what it has (`readAt`, `deliveredAt` and `deletedAt` never go back in the cache).
public protocol ChatBackend: Sendable {
    // Session
    /// Starts the server session of `userId` (the engine calls it before `connect()`, again after a
    /// logout); answers the user as the server knows them and the server's clock.
    func login(userId: String) async throws(BackendError) -> BackendSession
    /// Ends the server session (called by `OfflineVault.logout()`); never throws, may do nothing.
    func logout() async

    // Reads
    /// A page of messages with every `MessageQuery` setting applied; `nextCursor` is the page's far
    /// edge as `"sentAt:id"` when more match, nil otherwise.
    func messages(_ query: MessageQuery) async throws(BackendError) -> WirePage
    /// A page of threads (parent messages with their reply summary) with the `ThreadQuery`
    /// settings.
    func threads(_ query: ThreadQuery) async throws(BackendError) -> WirePage
    /// A page of the user's conversations, most recent activity first, with the `ConversationQuery`
    /// settings.
    func conversations(_ query: ConversationQuery) async throws(BackendError) -> WirePage
    /// A page of users with the `UserQuery` settings.
    func users(_ query: UserQuery) async throws(BackendError) -> WirePage
    /// A page of blocked users (by the user, of the user, or both) with the `BlockedUserQuery`
    /// settings.
    func blockedUsers(_ query: BlockedUserQuery) async throws(BackendError) -> WirePage
    /// A page of groups the user can see, with the `GroupQuery` settings.
    func groups(_ query: GroupQuery) async throws(BackendError) -> WirePage
    /// A page of a group's members, with the `GroupMemberQuery` settings.
    func groupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage
    /// A page of the users banned from a group, with the `GroupMemberQuery` settings.
    func bannedGroupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage
    /// A page of one message's reactions, in the query's direction.
    func reactions(_ query: ReactionQuery) async throws(BackendError) -> WirePage
    /// A page of the user's notification feed, newest first, with the `FeedQuery` settings.
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
    /// Unblocks users; the answer maps each uid to success.
    func unblockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool]

    // Catch-up sync
    /// The change log after the sync point `token`, as this user may see it, oldest first, at most
    /// about `limit` changes (a backend may exceed it rather than split changes that share one
    /// sync point; `limit` must be at least 1: 400 `ERR_INVALID_LIMIT`).
    ///
    /// `token` is a `ChangeLogPage.nextToken` this backend answered before, stored as it came;
    /// nil means there is no sync point yet (a new cache, or the start over after a refused
    /// token): the backend answers from a starting point of its choosing (the simulator replays
    /// its whole log; a Matrix backend would answer its initial sync), so the engine must not
    /// assume nil replays all history. Replaying an upsert or a deletion must be harmless: a
    /// backend may send a change again (the simulator replays the current second).
    ///
    /// A token the backend no longer serves or does not know: 410 `ERR_SYNC_TOKEN_EXPIRED`; a string
    /// that is not a token of this backend: 400 `ERR_SYNC_TOKEN_INVALID` (both:
    /// `BackendError.isSyncTokenRejected`). Never a crash, whatever the string.
    func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage
    /// The change log's current end, without the changes before it: a page with no changes whose
    /// `nextToken` resumes after everything the server has logged so far and whose `serverTime`
    /// is the server's clock. The first sync of a new cache starts here (it has nothing to catch
    /// up to). The default implementation pages `changes(since: nil, …)` to its end and drops
    /// what it reads; a backend that can answer directly (the simulator; a Matrix homeserver's
    /// initial sync with an empty timeline filter) should.
    func latestSyncPoint() async throws(BackendError) -> ChangeLogPage

    // Media
    /// Starts downloading an attachment. A URL that expired or is forbidden (401, 403, 410) or
    /// unknown (404) throws `.server(status:code:message:)` here, before any bytes; once the
    /// stream is answered, a failure mid-download ends `MediaStream.chunks` with a `BackendError`.
    func downloadMedia(url: String) async throws(BackendError) -> MediaStream
    /// A fresh URL for an attachment whose URL expired (401/403/410).
    func resignMediaURL(_ url: String, messageId: Int) async throws(BackendError) -> String

    // Realtime
    /// Opens the realtime connection; returning means connected (events then arrive on `events`).
    /// Throws when it cannot connect; the engine retries with its backoff.
    func connect() async throws(BackendError)
    /// Closes the realtime connection (`.disconnected` follows on `events` if it was up).
    func disconnect() async
    /// The realtime events of this backend's connection: one stream for the backend's whole life
    /// (across logout and login), iterated by one engine at a time; `.connected` and
    /// `.disconnected` mark each connection.
    var events: AsyncStream<RealtimeEvent> { get }

    // Ids
    /// The engine's id map for the user logging in, handed over at every login before the first
    /// call of that session. A backend whose server names messages with strings (a Matrix event
    /// id) turns each name into the `Int` id the models carry with `ids(for:)`, and an id back into
    /// the name with `ref(for:)`, exactly and across restarts (the map is kept in the encrypted
    /// cache). A backend with whole-number ids (the simulator) ignores it: the default does.
    func attach(identities: any MessageIdentities)
    /// The engine's small state store for the user logging in (kept in the encrypted cache),
    /// handed over at every login with `attach(identities:)`: what the backend must still know
    /// after a restart without a network (a Matrix backend's direct-chat map). The default ignores it.
    func attach(state: any BackendStateStore)
    /// The engine's read-only view of the messages the logged-in user's cache holds, handed over at
    /// every login with `attach(identities:)`: a backend that can resolve a change from the cached
    /// copy of its target (a Matrix edit, redaction or reaction on catch-up) reads it there instead
    /// of asking its server, and asks when the target is not cached. The engine's writer still
    /// writes every row: the backend answers changes as before. The default ignores it.
    func attach(cachedMessages: any CachedMessages)
}

extension ChatBackend {
    /// Does nothing: a backend with whole-number message ids needs no id map.
    public func attach(identities: any MessageIdentities) {}
    /// Does nothing: a backend that keeps no state across restarts needs no store.
    public func attach(state: any BackendStateStore) {}
    /// Does nothing: a backend that always asks its server needs no view of the cache.
    public func attach(cachedMessages: any CachedMessages) {}

    /// The default: `pagedLatestSyncPoint()`, which reads the whole log from nil to find its end.
    public func latestSyncPoint() async throws(BackendError) -> ChangeLogPage {
        try await pagedLatestSyncPoint()
    }

    /// The default `latestSyncPoint()`: pages `changes(since: nil, …)` to its end and drops what it
    /// reads (for a wrapper that answers `changes` itself and wants the point to follow them).
    public func pagedLatestSyncPoint() async throws(BackendError) -> ChangeLogPage {
        var token: String?
        // Bounded: a backend that never reaches the end of its log is a fault, not a loop.
        for _ in 0..<100_000 {
            let page = try await changes(since: token, limit: 1000)
            if !page.hasMore { return ChangeLogPage(changes: [], nextToken: page.nextToken, serverTime: page.serverTime, hasMore: false) }
            guard page.nextToken != token else { break }
            token = page.nextToken
        }
        throw .server(status: 500, code: "ERR_SYNC_LOG_UNBOUNDED", message: "the change log did not reach its end")
    }
}
