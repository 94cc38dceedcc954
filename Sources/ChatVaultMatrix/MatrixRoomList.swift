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
    /// Whether the homeserver serves simplified sliding sync: `/versions` asked once per backend
    /// (a failed ask is asked again next time; meanwhile the list comes from `/sync`).
    func offersSlidingSync() async -> Bool {
        if let known = state.withLock({ $0.slidingSync }) { return known }
        guard let answer = try? await call("GET", "/_matrix/client/versions") else { return false }
        let offered = answer.json["unstable_features"]?[MatrixRoomList.feature]?.boolValue == true
        state.withLock { $0.slidingSync = offered }
        return offered
    }

    /// One window of the room list as a page of conversations, most recent first; a room whose
    /// latest events hold no message is left out of the page (as the `/sync` list leaves it out).
    func slidingConversations(from offset: Int, limit: Int) async throws(BackendError) -> WirePage {
        let answer = try await call("POST", MatrixRoomList.path, query: [("timeout", "0")],
                                    json: MatrixRoomList.request(offset: offset, limit: limit))
        if let events = answer.json["extensions"]?["account_data"]?["global"]?.arrayValue { applyAccountData(events) }
        let rooms = MatrixRoomList.windowRooms(answer.json, limit: limit)
        let count = answer.json["lists"]?["conversations"]?["count"]?.intValue ?? 0
        let end = offset + limit
        let next = count > Int64(end) ? MatrixRoomList.cursorPrefix + String(end) : nil
        guard !rooms.isEmpty else { return WirePage(items: [], nextCursor: next) }
        let items = try await joinedConversations(rooms: rooms)
        return WirePage(items: items.sorted { $0.0 > $1.0 }.map(\.1), nextCursor: next)
    }
}
