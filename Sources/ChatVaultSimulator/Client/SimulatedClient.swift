public import ChatVault
import Foundation
import Synchronization

/// One device of one user, talking to a `ChatVaultSimulator` through its own virtual network.
/// A `ChatBackend`: every answer is what that user would see (`readByMeAt`, `mentionedMe`,
/// `reactedByMe`, `blockedByMe`, unread counts, `hasJoined`…).
///
///     let alice = simulator.client(for: "alice")
///     alice.latency = .milliseconds(20)                       // real sleep before each call
///     alice.failNext(.send, with: .ackLost)                   // stored, then .timedOut
///     _ = try? await alice.send(outgoing, localMessageId: "l-1")
///     let stored = try await alice.send(outgoing, localMessageId: "l-1")   // the same message, once
///     XCTAssertEqual(alice.callCount(.send), 2)
///
/// A new client is logged in as its user; `logout()` drops its realtime connection and later
/// calls get `.server(401, "ERR_NOT_LOGGED_IN")` until `login(userId:)` (which may switch to
/// another user). `events` is one stream for the device's whole life: it carries every login's
/// connections and ends only when the client is released. `Sendable`; calls may overlap.
public final class SimulatedClient: ChatBackend {
    /// The server behind this device.
    public let simulator: ChatVaultSimulator
    /// This device's number on the server (1, 2… in creation order).
    public let clientId: Int
    /// Realtime events while connected: one stream per device for its whole life, across logout
    /// and login (`.connected` and `.disconnected` mark each connection). It ends only when the
    /// client is released, so iterate it from one place and keep iterating.
    public let events: AsyncStream<RealtimeEvent>
    private let continuation: AsyncStream<RealtimeEvent>.Continuation
    private let local: Mutex<DeviceState>

    private struct DeviceState {
        var userId: String
        var loggedIn = true
        var network: NetworkCondition = .online
        var latency: Duration = .zero
        var faults: [SimulatedMethod: [SimulatedFault]] = [:]
        var attempts: [SimulatedMethod: Int] = [:]
        var reached: [SimulatedMethod: Int] = [:]
        var calls: [SimulatedMethod] = []
        var random: SeededGenerator
    }

    init(server: ChatVaultSimulator, clientId: Int, userId: String) {
        simulator = server
        self.clientId = clientId
        (events, continuation) = AsyncStream.makeStream(of: RealtimeEvent.self, bufferingPolicy: .unbounded)
        local = Mutex(DeviceState(userId: userId, random: .derived(seed: server.seed, stream: UInt64(clientId))))
    }

    deinit {
        let clientId = self.clientId
        simulator.state.withLock { _ = $0.connections.removeValue(forKey: clientId) }
        continuation.finish()
    }

    // MARK: - Test controls

    /// The user this device is logged in as.
    public var userId: String { local.withLock { $0.userId } }

    /// The virtual network. Going `.offline` drops the realtime connection (`.disconnected`).
    ///
    ///     client.network = .flaky(failureRate: 0.5)
    public var network: NetworkCondition {
        get { local.withLock { $0.network } }
        set {
            local.withLock { $0.network = newValue }
            if newValue == .offline { dropConnection() }
        }
    }

    /// Real time each call waits before it reaches the server (default zero). Not applied to calls
    /// that fail because the device is offline or the flaky network dropped them.
    public var latency: Duration {
        get { local.withLock { $0.latency } }
        set { local.withLock { $0.latency = newValue } }
    }

    /// Makes the next `times` calls of `method` that reach the server fail (or misbehave) with
    /// `fault`. Faults queue up in order; a call dropped by the network does not use one.
    ///
    ///     client.failNext(.conversations, with: .status(429, code: "ERR_TOO_MANY_REQUESTS"), times: 2)
    public func failNext(_ method: SimulatedMethod, with fault: SimulatedFault, times: Int = 1) {
        guard times > 0 else { return }
        local.withLock { $0.faults[method, default: []].append(contentsOf: Array(repeating: fault, count: times)) }
    }

    /// Forgets the faults still queued.
    public func clearFaults() {
        local.withLock { $0.faults.removeAll() }
    }

    /// How many times `method` was called on this device, whatever happened to the call.
    public func callCount(_ method: SimulatedMethod) -> Int {
        local.withLock { $0.attempts[method] ?? 0 }
    }

    /// How many calls of `method` got through the network to the server (faults included).
    public func serverCallCount(_ method: SimulatedMethod) -> Int {
        local.withLock { $0.reached[method] ?? 0 }
    }

    /// Every call made on this device, in order.
    public var calls: [SimulatedMethod] { local.withLock { $0.calls } }

    /// How many calls this device made in all.
    public var totalCallCount: Int { local.withLock { $0.calls.count } }

    /// Starts counting calls from zero.
    public func resetCallCounts() {
        local.withLock {
            $0.attempts.removeAll()
            $0.reached.removeAll()
            $0.calls.removeAll()
        }
    }

    /// Whether the realtime connection is up.
    public var isConnected: Bool {
        simulator.state.withLock { $0.connections[clientId] != nil }
    }

    /// Pushes an event into this device's realtime stream as if the server had sent it (hostile
    /// or unusual events for the engine's tests).
    ///
    ///     client.deliver(.messageReceived(["id": "not a number"]))
    public func deliver(_ event: RealtimeEvent) {
        continuation.yield(event)
    }

    // MARK: - The call pipeline

    /// Lets a call through the virtual network, or not: counts it, applies offline / flaky,
    /// latency and the next queued fault. Returns the user to answer for and the fault that
    /// shapes the answer (`.ackLost`, `.payload`, `.page`), if any.
    private func admit(_ method: SimulatedMethod, requiresLogin: Bool = true) async throws(BackendError) -> (viewer: String, fault: SimulatedFault?) {
        let admission = local.withLock { device -> (pass: Bool, fault: SimulatedFault?, latency: Duration, viewer: String, loggedIn: Bool) in
            device.attempts[method, default: 0] += 1
            device.calls.append(method)
            switch device.network {
            case .offline:
                return (false, nil, .zero, device.userId, device.loggedIn)
            case .flaky(let failureRate):
                if device.random.nextUnit() < failureRate { return (false, nil, .zero, device.userId, device.loggedIn) }
            case .online:
                break
            }
            device.reached[method, default: 0] += 1
            var fault: SimulatedFault?
            if var queue = device.faults[method], !queue.isEmpty {
                fault = queue.removeFirst()
                device.faults[method] = queue.isEmpty ? nil : queue
            }
            return (true, fault, device.latency, device.userId, device.loggedIn)
        }
        guard admission.pass else { throw .unreachable }
        var fault = admission.fault
        if admission.latency > .zero { try await Self.sleep(for: admission.latency) }
        if case .delay(let duration)? = fault {
            try await Self.sleep(for: duration)
            fault = nil
        }
        switch fault {
        case .status(let status, let code)?: throw .server(status: status, code: code, message: "injected failure")
        case .timeout?: throw .timedOut
        default: break
        }
        if requiresLogin {
            guard admission.loggedIn else { throw .server(status: 401, code: "ERR_NOT_LOGGED_IN", message: "log in first") }
            guard simulator.user(admission.viewer) != nil else {
                throw .server(status: 401, code: "ERR_UID_NOT_FOUND", message: "the logged-in user does not exist")
            }
        }
        return (admission.viewer, fault)
    }

    private static func sleep(for duration: Duration) async throws(BackendError) {
        do { try await Task.sleep(for: duration) } catch { throw .timedOut }
    }

    /// Runs `body` on the server's state for `viewer`, at the clock's time.
    private func onServer<T: Sendable>(_ body: (inout ServerState, _ now: Int) throws(BackendError) -> T) throws(BackendError) -> T {
        let now = simulator.clock.seconds
        return try simulator.state.withLock { (state: inout ServerState) throws(BackendError) -> T in try body(&state, now) }
    }

    /// After a committed call: `.ackLost` turns the answer into `.timedOut`.
    private static func settle(_ fault: SimulatedFault?) throws(BackendError) {
        if case .ackLost? = fault { throw .timedOut }
    }

    private static func shaped(_ page: WirePage, by fault: SimulatedFault?) throws(BackendError) -> WirePage {
        try settle(fault)
        switch fault {
        case .payload(let transform)?: return WirePage(items: page.items.map(transform), nextCursor: page.nextCursor)
        case .page(let transform)?: return transform(page)
        default: return page
        }
    }

    private static func shaped(_ json: JSONValue, by fault: SimulatedFault?) throws(BackendError) -> JSONValue {
        try settle(fault)
        if case .payload(let transform)? = fault { return transform(json) }
        return json
    }

    private func list(_ method: SimulatedMethod, _ body: (inout ServerState, String) throws(BackendError) -> WirePage) async throws(BackendError) -> WirePage {
        let (viewer, fault) = try await admit(method)
        let page = try onServer { (state, _) throws(BackendError) in try body(&state, viewer) }
        return try Self.shaped(page, by: fault)
    }

    private func dropConnection() {
        simulator.state.withLock { state in
            if let connection = state.connections.removeValue(forKey: clientId) { connection.continuation.yield(.disconnected) }
        }
    }

    // MARK: - ChatBackend: session

    /// Logs this device in as `userId` (switching user drops the realtime connection). The session
    /// carries the user as they see themselves and the server time. Unknown user: 404 `ERR_UID_NOT_FOUND`.
    public func login(userId: String) async throws(BackendError) -> BackendSession {
        let (_, fault) = try await admit(.login, requiresLogin: false)
        let session = try onServer { (state, now) throws(BackendError) in
            guard state.users[userId] != nil else { throw .server(status: 404, code: "ERR_UID_NOT_FOUND", message: "no user \(userId)") }
            return BackendSession(user: state.renderUser(userId, for: userId), serverTime: Int64(now))
        }
        let previous = local.withLock { device in
            defer {
                device.userId = userId
                device.loggedIn = true
            }
            return device.userId
        }
        if previous != userId { dropConnection() }
        return BackendSession(user: try Self.shaped(session.user, by: fault), serverTime: session.serverTime)
    }

    /// Logs out: drops the realtime connection (`.disconnected` in `events` if it was up). The
    /// stream goes on: after the next `login(userId:)` and `connect()` it carries that session's
    /// events. Not subject to the network or to faults.
    public func logout() async {
        local.withLock { device in
            device.attempts[.logout, default: 0] += 1
            device.calls.append(.logout)
            device.loggedIn = false
        }
        dropConnection()
    }

    // MARK: - ChatBackend: reads

    /// Messages as this user sees them, every `MessageQuery` setting applied on the server:
    ///
    /// - Scope: a one-to-one conversation (404 `ERR_UID_NOT_FOUND` for an unknown user), a group
    ///   (404 `ERR_GUID_NOT_FOUND`; 403 `ERR_GROUP_NOT_JOINED` for a non-member), or nil for every
    ///   conversation the user can read. `parentMessageId`: that thread's replies (404 if the parent
    ///   is unknown or hidden); otherwise replies are included unless `hideReplies`.
    /// - Order and paging: (sentAt, id). `.previous` answers the newest `limit` messages strictly
    ///   before the start point, `.next` the oldest `limit` strictly after it; both pages ascending.
    ///   The start point is `cursor`, else `messageId` (strictly before/after that message), else
    ///   `timestamp` (`.previous`: sentAt < timestamp; `.next`: sentAt ≥ timestamp), else the newest
    ///   end (`.previous`) or the oldest (`.next`). `nextCursor` is the page's far edge as
    ///   "sentAt:id" (`MessageCursor(sentAt:id:)`) when more messages match, nil otherwise.
    /// - Filters (all combine): `senderUid`; `categories`, `types`, `tags` (any of); `unread` (from
    ///   someone else, not read by this user); `hideDeleted`; `hasMentions` (mentions this user);
    ///   `mentionedUIDs` (mentions any of them); `hasAttachments`; `attachmentTypes` (media of those
    ///   types); `hideMessagesFromBlockedUsers` (senders this user blocked); `hasReactions`;
    ///   `pinned`; `saved` (by this user); `searchKeyword` (case-insensitive substring of the text or
    ///   caption of a message not deleted; "" filters nothing); `hasLinks` (text or caption holds
    ///   "http://" or "https://"); `updatedAfter` (updatedAt later than it; a new message's
    ///   updatedAt is its sentAt); `updatesOnly` (changed after it was sent: edited, deleted,
    ///   reacted to, pinned, interacted with); `interactionGoalCompletedOnly` (interactive messages
    ///   whose goal the interactions meet).
    /// - Enrichment flags (`withTags`, `withParent`, `mentionsWith…`, `hideQuotedMessages`) change
    ///   nothing: tags, mentions and blocked flags are always included.
    /// - `limit` below 1: 400 `ERR_INVALID_LIMIT`; above 1000: 1000.
    public func messages(_ query: MessageQuery) async throws(BackendError) -> WirePage {
        try await list(.messages) { (state, viewer) throws(BackendError) in try state.queryMessages(query, viewer: viewer) }
    }

    /// Threads (parent messages with replies) in a scope, or in every conversation the user can
    /// read; with `participatedByMe` (the default) only those the user started or replied to.
    /// Most recent reply first; position cursor ("offset:<n>").
    public func threads(_ query: ThreadQuery) async throws(BackendError) -> WirePage {
        try await list(.threads) { (state, viewer) throws(BackendError) in try state.queryThreads(query, viewer: viewer) }
    }

    /// This user's conversations: those with a message that updates the conversation (top-level,
    /// and not a custom message with `updateConversation: false`), minus those the user deleted
    /// with nothing newer since. Most recent `updatedAt` (the last message's sentAt) first, ties by
    /// id; the cursor is the last item's "updatedAt:conversationId".
    ///
    /// Per user: `unreadMessageCount` (top-level, not deleted messages from others after the
    /// user's read receipt), `unreadMentionsCount`, `lastReadMessageId`, `tags`, `pinnedAt`/`pinnedBy`,
    /// and the other side's `blockedByMe`/`hasBlockedMe` or the group's `hasJoined`/`scope`.
    ///
    /// Filters: `conversationType`; `unread`; `tags` (the user's own conversation tags, any of);
    /// `userTags`/`groupTags` (the other user's or the group's tags; when either is set, only
    /// conversations matching one of them remain); `hideAgentic`/`onlyAgentic`; without
    /// `includeBlockedUsers`, conversations with users this user blocked are hidden (not those
    /// with users who blocked them); `pinnedBy` "me" / "system"; `searchKeyword` (the other user's
    /// or the group's name, case-insensitive). `withBlockedInfo`, `withTags`,
    /// `withUserAndGroupTags`: always on.
    public func conversations(_ query: ConversationQuery) async throws(BackendError) -> WirePage {
        try await list(.conversations) { (state, viewer) throws(BackendError) in try state.queryConversations(query, viewer: viewer) }
    }

    /// Every other active user (deactivated ones are left out), by name (case-insensitive), or by
    /// `sortBy` "name", "status" (online first), "uid" or "lastActiveAt" (400
    /// `ERR_INVALID_SORT_BY` otherwise), `sortOrder` reversing it. Position cursor ("offset:<n>").
    ///
    /// Filters: `searchKeyword` in `searchIn` ("uid", "name"; both by default); `status`
    /// (`available` counts as online); `hideBlockedUsers` (users this user blocked); `roles` (a user
    /// without a role has "default"); `friendsOnly` (declared with `makeFriends`, or sharing a
    /// one-to-one conversation with a message); `tags` (any of); `uids`.
    public func users(_ query: UserQuery) async throws(BackendError) -> WirePage {
        try await list(.users) { (state, viewer) throws(BackendError) in try state.queryUsers(query, viewer: viewer) }
    }

    /// Users this user blocked (`.byMe`), who blocked this user (`.me`), or both; `searchKeyword`
    /// in uid or name. By name; position cursor.
    public func blockedUsers(_ query: BlockedUserQuery) async throws(BackendError) -> WirePage {
        try await list(.blockedUsers) { (state, viewer) throws(BackendError) in try state.queryBlockedUsers(query, viewer: viewer) }
    }

    /// Public and password groups, and private groups this user belongs to; `joinedOnly`, `tags`
    /// (any of), `searchKeyword` (name). By name; position cursor. `hasJoined`/`scope`/`joinedAt`
    /// are this user's.
    public func groups(_ query: GroupQuery) async throws(BackendError) -> WirePage {
        try await list(.groups) { (state, viewer) throws(BackendError) in try state.queryGroups(query, viewer: viewer) }
    }

    /// A group's members by name, with `scopes`, `status` and `searchKeyword` (uid or name). 404
    /// `ERR_GUID_NOT_FOUND` for an unknown group; 403 `ERR_NOT_A_MEMBER` for a private group the
    /// user is not in.
    public func groupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage {
        try await list(.groupMembers) { (state, viewer) throws(BackendError) in try state.queryGroupMembers(query, banned: false, viewer: viewer) }
    }

    /// A group's banned users (with the scope they had), under the same rules as `groupMembers`.
    public func bannedGroupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage {
        try await list(.bannedGroupMembers) { (state, viewer) throws(BackendError) in try state.queryGroupMembers(query, banned: true, viewer: viewer) }
    }

    /// One message's reactions (only `reaction` if set), in (reactedAt, id) order: `.next` pages
    /// forward from the oldest, `.previous` backward from the newest, each page ascending; the
    /// cursor is the far edge as "reactedAt:id". 404 when the user cannot see the message.
    public func reactions(_ query: ReactionQuery) async throws(BackendError) -> WirePage {
        try await list(.reactions) { (state, viewer) throws(BackendError) in try state.queryReactions(query, viewer: viewer) }
    }

    /// This user's feed items, newest first: `readState` "read" / "unread" (400 otherwise; nil or
    /// "all" for both), `category`, `categoryId`, `channelId`, `tags` (any of), `dateFrom` /
    /// `dateTo` (ISO 8601, inclusive; 400 `ERR_INVALID_DATE` otherwise). Position cursor.
    public func notificationFeed(_ query: FeedQuery) async throws(BackendError) -> WirePage {
        try await list(.notificationFeed) { (state, viewer) throws(BackendError) in try state.queryFeed(query, viewer: viewer) }
    }

    /// One message as this user sees it; 404 `ERR_NOT_FOUND` when it does not exist or the user
    /// cannot read its conversation.
    public func message(id: Int) async throws(BackendError) -> JSONValue {
        let (viewer, fault) = try await admit(.message)
        let json = try onServer { (state, _) throws(BackendError) in try state.message(id: id, viewer: viewer) }
        return try Self.shaped(json, by: fault)
    }

    /// The conversation with a user (uid) or a group (guid), as in `conversations(_:)`; 404
    /// `ERR_NOT_FOUND` when there is none yet (or the peer is unknown), 403 for a group the user is
    /// not in, 400 for `.none`.
    public func conversation(with id: String, type: ConversationType) async throws(BackendError) -> JSONValue {
        let (viewer, fault) = try await admit(.conversation)
        let json = try onServer { (state, _) throws(BackendError) in try state.conversation(with: id, type: type, viewer: viewer) }
        return try Self.shaped(json, by: fault)
    }

    // MARK: - ChatBackend: writes

    /// Stores a message from this user and returns it as stored (with `localMessageId`, and `muid`
    /// defaulting to it). Idempotent per (user, `localMessageId`): a repeat returns the stored
    /// message, whatever it carries, and stores nothing.
    ///
    /// Read from the JSON: `receiver`, `receiverType` ("user" by default), `category`
    /// ("message", "custom" or "interactive"), `type`, `data` (`text`; `attachments` and
    /// `caption`; `customData`, `subType`, `conversationText`, `updateConversation`;
    /// `interactiveData`, `interactionGoal`, `allowSenderInteraction`; `metadata`), `parentId`,
    /// `quotedMessageId`, `tags`, `mentionedUsers` (uids or user objects; `<@uid:…>` in a text
    /// counts too), `muid`. Refusals (nothing stored): 400 `ERR_INVALID_MESSAGE`,
    /// `ERR_EMPTY_MESSAGE`, `ERR_NO_ATTACHMENTS`, `ERR_INVALID_CATEGORY`, `ERR_INVALID_PARENT`,
    /// `ERR_INVALID_LOCAL_ID`, `ERR_INVALID_RECEIVER` (oneself); 403 `ERR_BLOCKED`, `ERR_NOT_A_MEMBER`; 404 `ERR_UID_NOT_FOUND`,
    /// `ERR_GUID_NOT_FOUND`, `ERR_NOT_FOUND`. Other connected devices of the conversation get it
    /// as `.messageReceived`; this one does not.
    public func send(_ message: JSONValue, localMessageId: String) async throws(BackendError) -> JSONValue {
        let (viewer, fault) = try await admit(.send)
        let clientId = self.clientId
        let json = try onServer { (state, now) throws(BackendError) in
            let (id, isNew) = try state.send(message, localMessageId: localMessageId, sender: viewer, now: now)
            if isNew { state.broadcast(messageId: id, excluding: clientId) { .messageReceived($0) } }
            return state.renderMessage(id, for: viewer)
        }
        return try Self.shaped(json, by: fault)
    }

    /// Edits a message this user sent and answers it as this user sees it (`editedAt`, `editedBy`
    /// and `updatedAt` now). `changes` carries outgoing fields: `data.text` (a text message; ""
    /// is 400 `ERR_EMPTY_MESSAGE`), `data.caption` (media), `data.customData` (custom),
    /// `data.metadata` (or a top-level `metadata`; null removes it), `tags`. A field that does not
    /// apply to the message, a malformed one, or nothing to change: 400 `ERR_INVALID_MESSAGE`.
    /// 404 `ERR_NOT_FOUND` when the user cannot see the message, 403 `ERR_NOT_THE_SENDER` for
    /// someone else's, 400 `ERR_MESSAGE_DELETED` for a deleted one. The change log upserts it;
    /// the other connected devices of the conversation get `.messageEdited`, this one does not.
    public func editMessage(id: Int, changes: JSONValue) async throws(BackendError) -> JSONValue {
        try await write(.editMessage, messageId: id) { (state, viewer, now, clientId) throws(BackendError) in
            try state.editMessage(id, changes: changes, by: viewer, now: now, excluding: clientId)
        }
    }

    /// Deletes a message softly and answers it as deleted (`deletedAt`, `deletedBy`). The sender
    /// may delete it, and so may an admin or moderator of the group it was sent to; anyone else
    /// gets 403 `ERR_NOT_THE_SENDER`, and 404 `ERR_NOT_FOUND` when the user cannot see it.
    /// Deleting it again changes nothing and answers it as it is. The change log records the
    /// deletion; the other connected devices get `.messageDeleted`.
    public func deleteMessage(id: Int) async throws(BackendError) -> JSONValue {
        try await write(.deleteMessage, messageId: id) { (state, viewer, now, clientId) throws(BackendError) in
            try state.deleteMessage(id, by: viewer, now: now, excluding: clientId)
        }
    }

    /// Adds this user's reaction (1…64 UTF-8 bytes, else 400 `ERR_INVALID_REACTION`) and answers
    /// the message with its reaction counts as this user sees them (`reactedByMe`). Adding one the
    /// user already gave changes nothing. 404 `ERR_NOT_FOUND` when the user cannot see the
    /// message. A change upserts the message in the change log and reaches the other connected
    /// devices as `.messageEdited`.
    public func addReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue {
        try await write(.addReaction, messageId: messageId) { (state, viewer, now, clientId) throws(BackendError) in
            try state.react(reaction, on: messageId, present: true, by: viewer, now: now, excluding: clientId)
        }
    }

    /// Takes this user's reaction back, under the rules of `addReaction`; removing one the user
    /// never gave changes nothing.
    public func removeReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue {
        try await write(.removeReaction, messageId: messageId) { (state, viewer, now, clientId) throws(BackendError) in
            try state.react(reaction, on: messageId, present: false, by: viewer, now: now, excluding: clientId)
        }
    }

    /// Uploads the file at `path` (read from the local disk) and answers its attachment:
    /// `name`, `extension` (after the name's last dot), `mimeType` ("application/octet-stream" if
    /// empty), a fresh `url` its bytes download from, and `size`: what a media message's
    /// `data.attachments` takes. Refusals (nothing stored): 400 `ERR_FILE_UNREADABLE` (missing,
    /// a directory, no permission), 400 `ERR_EMPTY_FILE`, 413 `ERR_FILE_TOO_LARGE` (above
    /// `ChatVaultSimulator.maxUploadBytes`). Each upload is listed in `ChatVaultSimulator.uploads`.
    public func uploadMedia(path: String, name: String, mimeType: String) async throws(BackendError) -> JSONValue {
        let (viewer, fault) = try await admit(.uploadMedia)
        let bytes = try Self.readUpload(at: path, limit: simulator.maxUploadBytes)
        let json = try onServer { (state, _) throws(BackendError) in
            try state.storeUpload(bytes, name: name, mimeType: mimeType, by: viewer)
        }
        return try Self.shaped(json, by: fault)
    }

    /// The bytes of the file to upload: at most `limit` of them (one more means too large).
    private static func readUpload(at path: String, limit: Int) throws(BackendError) -> Data {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
              let handle = FileHandle(forReadingAtPath: path) else { throw ServerState.unreadableFile }
        defer { try? handle.close() }
        let cap = max(limit, 0)
        let bytes: Data
        do {
            bytes = try handle.read(upToCount: cap < Int.max ? cap + 1 : cap) ?? Data()
        } catch {
            throw ServerState.unreadableFile
        }
        guard !bytes.isEmpty else { throw ServerState.emptyFile }
        guard bytes.count <= cap else { throw ServerState.fileTooLarge }
        return bytes
    }

    /// A write on one message: through the pipeline, `body` on the server for the viewer (with
    /// the time and this device's id, which the realtime broadcast skips), then the message as
    /// the viewer sees it.
    private func write(_ method: SimulatedMethod, messageId: Int,
                       _ body: (inout ServerState, _ viewer: String, _ now: Int, _ clientId: Int) throws(BackendError) -> Void) async throws(BackendError) -> JSONValue {
        let (viewer, fault) = try await admit(method)
        let clientId = self.clientId
        let json = try onServer { (state, now) throws(BackendError) in
            try body(&state, viewer, now, clientId)
            return state.renderMessage(messageId, for: viewer)
        }
        return try Self.shaped(json, by: fault)
    }

    /// Blocks users; unknown uids (and oneself) map to false.
    public func blockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] {
        let (viewer, fault) = try await admit(.blockUsers)
        let result = try onServer { (state, _) throws(BackendError) in state.setBlocked(true, uids, by: viewer) }
        try Self.settle(fault)
        return result
    }

    /// Unblocks users; unknown uids map to false.
    public func unblockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] {
        let (viewer, fault) = try await admit(.unblockUsers)
        let result = try onServer { (state, _) throws(BackendError) in state.setBlocked(false, uids, by: viewer) }
        try Self.settle(fault)
        return result
    }

    // MARK: - ChatBackend: catch-up

    /// The change log after the sync point `token` (nil: the whole log, or what compaction left of
    /// it), as this user may see it:
    /// messages upserted (new, edited, reacted to, pinned, read up to, saved by this user; a reply
    /// also upserts its parent), deleted (after an upsert that carries `deletedAt`), and
    /// conversations removed for this user (deleted, or left a group). Oldest first.
    ///
    /// The token is opaque to callers; it stands for a server time (`ChatVaultSimulator.changeToken(at:)`
    /// makes one for tests). The current second is never complete: a point at or after it counts
    /// as `now - 1`, so the changes stamped with the current time come again until the clock moves
    /// (replays are harmless upserts and deletions). A page does not split a second: it stops
    /// before a second that would overflow `limit`, unless that second alone fills the page, which
    /// then holds all of it. `nextToken` stands for the time of the page's last change (the point
    /// passed in if none); `serverTime` is that time while `hasMore`, else the server's clock.
    ///
    /// A string this simulator did not make: 400 `ERR_SYNC_TOKEN_INVALID`; a token older than
    /// `ChatVaultSimulator.expireChangeTokens(before:)` allows: 410 `ERR_SYNC_TOKEN_EXPIRED`.
    public func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
        let (viewer, fault) = try await admit(.changes)
        let page = try onServer { (state, now) throws(BackendError) in try state.queryChanges(since: token, limit: limit, viewer: viewer, now: now) }
        try Self.settle(fault)
        guard case .payload(let transform)? = fault else { return page }
        let changes = page.changes.map { change -> ChangeLogEntry in
            if case .messageUpserted(let json) = change { return .messageUpserted(transform(json)) }
            return change
        }
        return ChangeLogPage(changes: changes, nextToken: page.nextToken, serverTime: page.serverTime, hasMore: page.hasMore)
    }

    /// The log's current end: a token for `now - 1` (the current second is never complete, so
    /// its changes come again on the next call, as for `changes`), answered without reading the
    /// log. Faults of `.changes` apply.
    public func latestSyncPoint() async throws(BackendError) -> ChangeLogPage {
        let (_, fault) = try await admit(.changes)
        let page = try onServer { (state, now) in
            ChangeLogPage(changes: [], nextToken: ChangeToken.encode(max(Int64(now) - 1, state.changeTokenFloor - 1, 0)),
                          serverTime: Int64(now), hasMore: false)
        }
        try Self.settle(fault)
        return page
    }

    // MARK: - ChatBackend: media

    /// Streams the bytes registered for `url` (`ChatVaultSimulator.registerMedia`), or for the URL
    /// a re-signed one stands for, as `ChatVaultSimulator.setMediaBehaviour` says (default: 64 KiB
    /// chunks, the true length). Thrown before any bytes: 403 `ERR_URL_EXPIRED` once it expired,
    /// 404 if unknown, and the network's and faults' errors (`.ackLost` counts the download as
    /// started, then `.timedOut`). Chunks are produced as the consumer asks for them, by its task;
    /// if the device goes offline mid-download, the stream ends with `.unreachable`.
    public func downloadMedia(url: String) async throws(BackendError) -> MediaStream {
        let (_, fault) = try await admit(.downloadMedia)
        let now = simulator.clock.now
        let serving = try onServer { (state, _) throws(BackendError) in try state.startDownload(url: url, now: now) }
        let producer = MediaProducer(serving: serving, simulator: simulator, isOffline: { [weak self] in self?.network == .offline })
        try Self.settle(fault)
        return MediaStream(contentLength: serving.contentLength, mimeType: serving.mimeType, chunks: producer.stream)
    }

    /// A fresh URL for an attachment of `messageId` (given its original or a re-signed URL), valid
    /// for `ChatVaultSimulator.signedURLLifetime` seconds. 404 when the user cannot see the message
    /// or it has no such attachment.
    public func resignMediaURL(_ url: String, messageId: Int) async throws(BackendError) -> String {
        let (viewer, fault) = try await admit(.resignMediaURL)
        let now = simulator.clock.now
        let fresh = try onServer { (state, _) throws(BackendError) in try state.resign(url: url, messageId: messageId, viewer: viewer, now: now) }
        try Self.settle(fault)
        return fresh
    }

    // MARK: - ChatBackend: realtime

    /// Opens the realtime connection: `.connected` in `events`, then the messages, edits and
    /// deletions of every conversation the user is part of. Connecting again is a no-op.
    public func connect() async throws(BackendError) {
        let (viewer, fault) = try await admit(.connect)
        let clientId = self.clientId
        let continuation = self.continuation
        try onServer { (state, _) throws(BackendError) in
            guard state.connections[clientId] == nil else { return }
            state.connections[clientId] = Connection(uid: viewer, continuation: continuation)
            continuation.yield(.connected)
        }
        try Self.settle(fault)
    }

    /// Closes the realtime connection (`.disconnected`). Not subject to the network or to faults.
    public func disconnect() async {
        local.withLock { device in
            device.attempts[.disconnect, default: 0] += 1
            device.calls.append(.disconnect)
        }
        dropConnection()
    }
}
