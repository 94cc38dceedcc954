public import ChatVault
public import Foundation
import Synchronization

/// What a `MatrixBackend` may wait for and accept.
public struct MatrixConfiguration: Sendable {
    /// Seconds an ordinary request may take.
    public var requestTimeout: TimeInterval = 30
    /// How long the realtime `/sync` long-poll waits on the server for something new (ms).
    public var pollTimeoutMs = 30_000
    /// The largest JSON answer accepted (a larger one is a typed error, never parsed).
    public var maxResponseBytes = 32 << 20
    /// The largest media download accepted.
    public var maxMediaBytes = 100 << 20

    /// The defaults: 30 s per request, a 30 s long-poll, 32 MiB per JSON answer, 100 MiB per media
    /// file.
    public init() {}
}

/// `ChatBackend` over the Matrix client-server API (v3; v1 authenticated media), for a real
/// homeserver such as Synapse. URLSession only, no other package.
///
///     let session = try await MatrixAccount.login(homeserver: url, user: "alice", password: secret,
///                                                 deviceId: savedDeviceId)
///     let backend = MatrixBackend(homeserver: url, session: session)
///     let vault = try OfflineVault(config: config, settings: settings, backend: backend)
///     await vault.login(userId: session.userId)
///
/// How CometChat's model maps onto Matrix is in the README ("The Matrix backend"). In short:
/// a group is a room (`guid` = room id), a conversation with a user is the direct-message room
/// named in `m.direct` (created on the first send), a message is an `m.room.message` event whose
/// `Int` id the engine's `MessageIdentities` keeps for its event id, a send's `localMessageId` is
/// the transaction id (the same send after a crash returns the same event), the catch-up sync and
/// the realtime connection are `/sync`. Anything without a Matrix counterpart answers
/// `.server(501, "ERR_MATRIX_UNSUPPORTED")`; events the engine cannot show (encrypted rooms'
/// `m.room.encrypted`, state, unknown types) are skipped.
public final class MatrixBackend: ChatBackend {
    /// The homeserver's base URL (e.g. `https://matrix.example.org`), as given.
    public let homeserver: URL
    /// The timeouts and size bounds this backend was made with.
    public let configuration: MatrixConfiguration
    /// The realtime events of every connection (the `/sync` long-poll), for the backend's whole
    /// life; the newest 10,000 are buffered while nobody iterates.
    public let events: AsyncStream<RealtimeEvent>
    let continuation: AsyncStream<RealtimeEvent>.Continuation
    /// Invitations to group rooms as the backend hears them (the catch-up and the realtime
    /// connection), for the app to show and answer (`joinRoom`, `declineInvitation`); the newest
    /// 100 are buffered while nobody iterates. `invitations()` lists those still waiting.
    public let invitationEvents: AsyncStream<MatrixInvitation>
    let invitationContinuation: AsyncStream<MatrixInvitation>.Continuation
    let http: MatrixHTTP
    let state: Mutex<State>
    /// Held while a message's set of annotations is read, changed and stored again (the catch-up
    /// and a realtime fetch may both be at it).
    let annotationLock = Mutex(())

    struct State {
        var session: MatrixSession
        // Signed in from the start (the session was given); `logout()` stops calls until `login`.
        var loggedIn = true
        var identities: any MessageIdentities = MemoryMessageIdentities()
        var rooms = MatrixRooms()
        /// The engine's state store (the direct-chat map and the reaction map live there).
        var store: any BackendStateStore = MemoryBackendState()
        /// The engine's read-only view of the cached messages (relations resolved on catch-up).
        var cached: any CachedMessages = NoCachedMessages()
        /// Whether a catch-up resolves relations from the cache (`resolvesRelationsLocally`).
        var localRelations = true
        /// Where `rooms`' direct-chat map comes from: nothing yet, the cache, or the server.
        var direct = DirectKnowledge.unknown
        /// The realtime loop and the generation it belongs to.
        var loop: Task<Void, Never>?
        var connection = 0
        var connected = false
        /// Whether the homeserver serves simplified sliding sync (nil: not asked yet).
        var slidingSync: Bool?
        /// Read the list without sliding sync whatever the server offers (`hidesSlidingSync`).
        var hideSlidingSync = false
        /// The conversation list as the realtime connection keeps it (`KnownRooms`).
        var known: KnownRooms?
        /// The catch-up plan's room being delivered (`<plan id>.<index>`) and its events, oldest
        /// first, for the pages after the first of a long room.
        var readBack: (key: String, events: [JSONValue])?
        /// Why the session no longer works (nil while it does).
        var ended: MatrixSessionEnd?
        /// The renewal under way (one at a time, whoever found the token expired).
        var renewal: Task<Result<Bool, BackendError>, Never>?
        /// A renewed session the store could not keep yet (tried again after the next request).
        var unsaved = false
    }

    /// The code of `.server(501, …)`, answered by every call without a Matrix counterpart.
    public static let unsupportedCode = "ERR_MATRIX_UNSUPPORTED"

    /// Where renewed tokens are kept (nil: in memory only).
    let sessions: MatrixSessionStore?

    /// A backend for an already signed-in session (`MatrixAccount.login` or `signIn`). Nothing is
    /// requested until the engine calls it. A session with a refresh token is renewed when the
    /// homeserver says its access token expired, and the renewed one kept in `sessions` (give the
    /// store `signIn` used, or the next start signs in with a refresh token already spent).
    public init(homeserver: URL, session: MatrixSession, configuration: MatrixConfiguration = MatrixConfiguration(),
                sessions: MatrixSessionStore? = nil) {
        self.homeserver = homeserver
        self.configuration = configuration
        self.sessions = sessions
        http = MatrixHTTP(homeserver: homeserver, requestTimeout: configuration.requestTimeout,
                          maxResponseBytes: configuration.maxResponseBytes)
        (events, continuation) = AsyncStream.makeStream(of: RealtimeEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        (invitationEvents, invitationContinuation) = AsyncStream.makeStream(of: MatrixInvitation.self, bufferingPolicy: .bufferingNewest(100))
        state = Mutex(State(session: session))
    }

    deinit {
        state.withLock { $0.loop?.cancel() }
        continuation.finish()
        invitationContinuation.finish()
    }

    /// Requests made so far and where their time went (for benchmarks).
    public var statistics: MatrixCallStatistics { http.statistics.withLock { $0 } }

    /// The signed-in device (its access token too: keep it secret).
    public var session: MatrixSession { state.withLock { $0.session } }

    var me: String { state.withLock { $0.session.userId } }
    var token: String { state.withLock { $0.session.accessToken } }
    var identities: any MessageIdentities { state.withLock { $0.identities } }

    func unsupported(_ what: String) -> BackendError {
        .server(status: 501, code: Self.unsupportedCode, message: "\(what) has no Matrix counterpart in this backend")
    }

    func call(_ method: String, _ path: String, query: [(String, String)] = [], json: JSONValue? = nil,
              timeout: TimeInterval? = nil) async throws(BackendError) -> MatrixHTTP.Answer {
        guard state.withLock({ $0.loggedIn }) else {
            throw .server(status: 401, code: "ERR_NOT_LOGGED_IN", message: "log in first")
        }
        let http = self.http
        return try await authorized { (token: String) async throws(BackendError) -> MatrixHTTP.Answer in
            try await http.call(method, path, query: query, json: json, token: token, timeout: timeout)
        }
    }

    // MARK: - Session

    /// Takes the engine's id map: every event id is turned into the `Int` id the models carry
    /// through it, exactly and across restarts.
    public func attach(identities: any MessageIdentities) {
        state.withLock { $0.identities = identities }
    }

    /// Takes the engine's state store, where the direct-chat map (`m.direct`) and the map of
    /// reactions are kept, so a process that starts offline still knows them.
    public func attach(state store: any BackendStateStore) {
        state.withLock { s in
            s.store = store
            // A map the server gave this session stays; one read from another cache does not.
            if s.direct != .server { s.direct = .unknown }
        }
    }

    /// Takes the engine's view of the cached messages: a catch-up applies an edit, a redaction or
    /// a reaction whose target is cached to that copy instead of fetching it.
    public func attach(cachedMessages: any CachedMessages) {
        state.withLock { $0.cached = cachedMessages }
    }

    /// Whether a catch-up resolves edits, redactions and reactions from the cached copies of their
    /// targets (true, the default) or asks the homeserver for every one, as it did before: for
    /// `chatvault bench matrix`, which measures both, and tests.
    package var resolvesRelationsLocally: Bool {
        get { state.withLock { $0.localRelations } }
        set { state.withLock { $0.localRelations = newValue } }
    }

    /// Checks the session's access token with `whoami` and loads the direct-chat map; answers the
    /// user (with the display name when it can be read) and the server's clock.
    /// - Throws: 401 `ERR_MATRIX_WRONG_USER` when `userId` is not the session's user or the token
    ///   is another user's; `.unreachable` or the homeserver's error otherwise.
    public func login(userId: String) async throws(BackendError) -> BackendSession {
        let session = self.session
        guard userId == session.userId else {
            throw .server(status: 401, code: "ERR_MATRIX_WRONG_USER", message: "this backend is signed in as another user")
        }
        let http = self.http
        let whoami = try await authorized { (token: String) async throws(BackendError) -> MatrixHTTP.Answer in
            try await http.call("GET", "/_matrix/client/v3/account/whoami", token: token)
        }
        guard whoami.json["user_id"]?.stringValue == session.userId else {
            throw .server(status: 401, code: "ERR_MATRIX_WRONG_USER", message: "the access token belongs to another user")
        }
        state.withLock { $0.loggedIn = true }
        try await loadDirectRooms()
        var user: [String: JSONValue] = ["uid": .string(userId)]
        if let name = try? await displayName(of: userId) { user["name"] = .string(name) }
        let now = whoami.serverTime ?? Int64(Date().timeIntervalSince1970)
        return BackendSession(user: .object(user), serverTime: now)
    }

    /// Stops the realtime connection (`.disconnected` if it was up) and every call until the next
    /// `login`; the access token stays valid (the device is not logged out on the homeserver).
    public func logout() async {
        let loop = state.withLock { s -> Task<Void, Never>? in
            s.loggedIn = false
            s.connection += 1
            defer { s.loop = nil }
            return s.loop
        }
        loop?.cancel()
        if state.withLock({ s -> Bool in defer { s.connected = false }; return s.connected }) {
            continuation.yield(.disconnected)
        }
    }

    func displayName(of uid: String) async throws(BackendError) -> String? {
        if let known = state.withLock({ $0.rooms.names[uid] }) { return known }
        let answer = try await call("GET", "/_matrix/client/v3/profile/\(MatrixHTTP.segment(uid))/displayname")
        let name = answer.json["displayname"]?.stringValue
        if let name { state.withLock { $0.rooms.names[uid] = name } }
        return name
    }
}
