import ChatVault
import Foundation

/// The conversation list from simplified sliding sync (MSC4186, which Synapse serves natively since
/// 1.114): the homeserver keeps the room list ordered by recency, and one request reads one window
/// of it (`ranges`): which rooms, in which order, how many in all. Synapse answers every room's
/// `notification_count` with a placeholder 0 ("dummy values" in its sliding sync handler), so the
/// window's rooms are then read with a `/sync` filtered to them (their latest events and their
/// real unread counts, as the full list had them). Two requests a page, each sized by the page: a
/// user with hundreds of rooms pays for the rooms on the page, not for every room.
///
/// Cursors are `ss:<offset>`: the next window starts there. Rooms move while a user pages (a new
/// message bumps its room to the top), as they do in any client's list; the engine's cached phase
/// merges what each page says.
enum MatrixRoomList {
    /// The feature `/versions` lists when the server serves it.
    static let feature = "org.matrix.simplified_msc3575"
    static let path = "/_matrix/client/unstable/org.matrix.simplified_msc3575/sync"
    /// The widest window one page asks for.
    static let maxWindow = 100
    static let cursorPrefix = "ss:"
    static let invalidCursor = BackendError.server(status: 400, code: "ERR_INVALID_CURSOR", message: "the cursor is not one this backend gave")

    /// Where the page of `cursor` starts (nil: the first page).
    static func offset(of cursor: String?) throws(BackendError) -> Int {
        guard let cursor else { return 0 }
        guard cursor.hasPrefix(cursorPrefix), cursor.utf8.count <= 16, let n = Int(cursor.dropFirst(cursorPrefix.count)),
              n > 0, n <= 1_000_000 else { throw invalidCursor }
        return n
    }

    /// The window's rooms, in the list's order: its `SYNC` operation's `room_ids` where the
    /// server sends one, else the rooms answered, most recently bumped first; only room ids, at
    /// most `limit` (a hostile answer cannot make a page read more).
    static func windowRooms(_ json: JSONValue, limit: Int) -> [String] {
        var rooms: [String] = []
        if let ops = json["lists"]?["conversations"]?["ops"]?.arrayValue {
            for op in ops where op["op"]?.stringValue == "SYNC" {
                for id in op["room_ids"]?.arrayValue ?? [] {
                    if let room = id.stringValue, MatrixIds.isRoomId(room), !rooms.contains(room) { rooms.append(room) }
                }
            }
        }
        if rooms.isEmpty {
            let answered = (json["rooms"]?.objectValue ?? [:]).filter { MatrixIds.isRoomId($0.key) }
            rooms = answered.sorted { ($0.value["bump_stamp"]?.intValue ?? 0, $1.key) > ($1.value["bump_stamp"]?.intValue ?? 0, $0.key) }.map(\.key)
        }
        return Array(rooms.prefix(limit))
    }

    /// The request for the window `[offset, offset + limit - 1]` of the joined rooms (invitations
    /// are not conversations yet), with the user's `m.direct` (which rooms are direct chats).
    static func request(offset: Int, limit: Int) -> JSONValue {
        [
            "lists": [
                "conversations": [
                    "ranges": [[.int(Int64(offset)), .int(Int64(offset + limit - 1))]],
                    "timeline_limit": 1,
                    "required_state": [],
                    "filters": ["is_invite": false],
                ],
            ],
            "extensions": ["account_data": ["enabled": true]],
        ]
    }
}

extension MatrixBackend {
    /// Reads the list as a homeserver without sliding sync is read (`/sync`), whatever `/versions`
    /// says: for tests of that path against a server that has it. Set before the first list read.
    package var hidesSlidingSync: Bool {
        get { state.withLock { $0.hideSlidingSync } }
        set { state.withLock { $0.hideSlidingSync = newValue } }
    }

    /// Whether the homeserver serves simplified sliding sync: `/versions` asked once per backend
    /// (a failed ask is asked again next time; meanwhile the list comes from `/sync`).
    func offersSlidingSync() async -> Bool {
        if let known = state.withLock({ $0.slidingSync }) { return known }
        if hidesSlidingSync { return false }
        guard let answer = try? await call("GET", "/_matrix/client/versions") else { return false }
        let offered = answer.json["unstable_features"]?[MatrixRoomList.feature]?.boolValue == true
        state.withLock { $0.slidingSync = offered }
        return offered
    }

    /// One window of the room list as a page of conversations, most recent first; a room whose
    /// latest events hold no message is left out of the page (as the `/sync` list leaves it out).
    func slidingConversations(from offset: Int, limit: Int) async throws(BackendError) -> WirePage {
        let (items, next) = try await slidingWindow(from: offset, limit: limit)
        return WirePage(items: items.sorted { $0.order > $1.order }.map(\.conversation),
                        nextCursor: next.map { MatrixRoomList.cursorPrefix + String($0) })
    }

    /// One window of the room list: its rooms with a message, and where the next window starts
    /// (nil at the list's end).
    func slidingWindow(from offset: Int, limit: Int) async throws(BackendError) -> (items: [Listed], next: Int?) {
        let answer = try await call("POST", MatrixRoomList.path, query: [("timeout", "0")],
                                    json: MatrixRoomList.request(offset: offset, limit: limit))
        if let events = answer.json["extensions"]?["account_data"]?["global"]?.arrayValue { applyAccountData(events) }
        let rooms = MatrixRoomList.windowRooms(answer.json, limit: limit)
        let count = answer.json["lists"]?["conversations"]?["count"]?.intValue ?? 0
        let end = offset + limit
        let next = count > Int64(end) ? end : nil
        guard !rooms.isEmpty else { return ([], next) }
        return (try await joinedConversations(rooms: rooms), next)
    }
}

/// The conversation list the realtime connection keeps: every joined room with a message, as the
/// list renders it, built once per connection (`generation`) and then kept by the long-poll,
/// which marks the rooms it hears about (`dirty`: read again before the next answer) and drops
/// those left. Gone when the connection drops (what happened meanwhile is unknown) or the
/// direct-chat map changes (a room's rendering depends on it).
struct KnownRooms: Sendable {
    var generation: Int
    var rooms: [String: (order: Int64, conversation: JSONValue)] = [:]
    var dirty: Set<String> = []
    /// Built: `rooms` is the whole list (until then, changes only go to `dirty`).
    var built = false

    /// The list, most recent first.
    var sorted: [JSONValue] {
        rooms.sorted { ($0.value.order, $1.key) > ($1.value.order, $0.key) }.map(\.value.conversation)
    }
}

extension MatrixBackend {
    /// The kept conversation list, most recent first: built when the connection has none, the
    /// rooms it saw change read again; nil while the realtime connection is down (the caller reads
    /// the server as before).
    func keptConversations() async throws(BackendError) -> [JSONValue]? {
        enum Step { case answer([JSONValue]), refresh([String]), build(Int) }
        let step = state.withLock { s -> Step? in
            guard s.connected else { s.known = nil; return nil }
            if let known = s.known, known.generation == s.connection, known.built {
                return known.dirty.isEmpty ? .answer(known.sorted) : .refresh(known.dirty.sorted())
            }
            s.known = KnownRooms(generation: s.connection)
            return .build(s.connection)
        }
        switch step {
        case nil:
            return nil
        case .answer(let list)?:
            return list
        case .refresh(let rooms)?:
            let fresh = try await joinedConversations(rooms: rooms)
            return state.withLock { s -> [JSONValue] in
                guard var known = s.known else { return [] }
                for (order, conversation, room) in fresh { known.rooms[room] = (order, conversation) }
                // A room whose latest events hold no message keeps the entry it had.
                known.dirty.subtract(rooms)
                s.known = known
                return known.sorted
            }
        case .build(let generation)?:
            let all = try await everyConversation()
            return state.withLock { s -> [JSONValue] in
                guard var known = s.known, known.generation == generation, s.connection == generation else {
                    // The connection changed while the list was read: answer it, keep nothing.
                    return all.sorted { $0.order > $1.order }.map(\.conversation)
                }
                for (order, conversation, room) in all { known.rooms[room] = (order, conversation) }
                known.built = true
                s.known = known
                return known.sorted
            }
        }
    }

    /// Every joined room with a message: the sliding sync's windows one after the other where the
    /// server offers it, else one `/sync`.
    func everyConversation() async throws(BackendError) -> [MatrixBackend.Listed] {
        guard await offersSlidingSync() else { return try await joinedConversations(rooms: nil) }
        var all: [MatrixBackend.Listed] = []
        var offset: Int? = 0
        // Bounded: 10,000 rooms at most.
        for _ in 0..<100 {
            guard let from = offset else { break }
            let window = try await slidingWindow(from: from, limit: MatrixRoomList.maxWindow)
            all += window.items
            offset = window.next
        }
        return all
    }

    /// What one realtime `/sync` answer changes in the kept list: the rooms it names are read
    /// again before the next answer, the rooms left go, and a new direct-chat map (or an answer
    /// of another connection) drops the list.
    func noteListChanges(_ json: JSONValue, generation: Int) {
        let joined = (json["rooms"]?["join"]?.objectValue ?? [:]).keys.filter(MatrixIds.isRoomId)
        let left = (json["rooms"]?["leave"]?.objectValue ?? [:]).keys
        let direct = (json["account_data"]?["events"]?.arrayValue ?? []).contains { $0["type"]?.stringValue == "m.direct" }
        state.withLock { s in
            guard var known = s.known else { return }
            guard known.generation == generation, !direct else { s.known = nil; return }
            known.dirty.formUnion(joined)
            for room in left {
                known.rooms[room] = nil
                known.dirty.remove(room)
            }
            s.known = known
        }
    }
}
