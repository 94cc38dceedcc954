public import ChatVault
import Foundation

/// Where the direct-chat map a backend holds comes from.
enum DirectKnowledge: Sendable {
    /// Nothing read yet this session.
    case unknown
    /// The copy the cache kept (possibly none): good for placing rooms, not for saying a
    /// conversation has no room.
    case stored
    /// The server's, read or updated this session.
    case server
}

/// What the backend knows of the user's rooms: which are direct-message rooms and with whom
/// (`m.direct`), and display names seen.
struct MatrixRooms: Sendable {
    /// Direct-message room → the other user.
    var peerOf: [String: String] = [:]
    /// The other user → their direct-message room (the first one `m.direct` names).
    var roomWith: [String: String] = [:]
    /// uid → display name.
    var names: [String: String] = [:]

    /// Replaces the map with an `m.direct` content (`{"@peer:server": ["!room", …]}`); anything
    /// that is not a list of room-id strings is ignored.
    mutating func setDirect(_ content: JSONValue) {
        guard let object = content.objectValue else { return }
        peerOf = [:]
        roomWith = [:]
        for (peer, rooms) in object.sorted(by: { $0.key < $1.key }) {
            guard MatrixIds.isUserId(peer), let list = rooms.arrayValue else { continue }
            for case .string(let room) in list where MatrixIds.isRoomId(room) {
                peerOf[room] = peer
                if roomWith[peer] == nil { roomWith[peer] = room }
            }
        }
    }

    var directContent: JSONValue {
        var byPeer: [String: [JSONValue]] = [:]
        for (room, peer) in peerOf.sorted(by: { $0.key < $1.key }) { byPeer[peer, default: []].append(.string(room)) }
        return .object(byPeer.mapValues { .array($0) })
    }

    /// Where a message in `room` goes, as the engine names it.
    func place(room: String, sender: String, me: String) -> (receiver: String, receiverType: ReceiverType, conversationId: String) {
        if let peer = peerOf[room] {
            return (sender == me ? peer : me, .user, ConversationID.direct(me, peer).rawValue)
        }
        return (room, .group, ConversationID.group(room).rawValue)
    }
}

/// Shapes of Matrix identifiers (spec appendix "Identifier Grammar"), checked before use.
enum MatrixIds {
    static func isUserId(_ s: String) -> Bool { s.hasPrefix("@") && s.contains(":") && isBounded(s) }
    static func isRoomId(_ s: String) -> Bool { s.hasPrefix("!") && isBounded(s) }
    static func isEventId(_ s: String) -> Bool { s.hasPrefix("$") && isBounded(s) }

    private static func isBounded(_ s: String) -> Bool {
        s.utf8.count > 1 && s.utf8.count <= 255 && !s.utf8.contains { $0 < 0x21 || $0 == 0x7f }
    }

    /// A message's ref in the engine's id map: room and event, unambiguous whatever they hold
    /// (`<room byte count>:<room><event>`): Matrix fetches an event only within its room.
    static func ref(room: String, event: String) -> String {
        "\(room.utf8.count):\(room)\(event)"
    }

    static func parse(ref: String) -> (room: String, event: String)? {
        guard let colon = ref.firstIndex(of: ":"), let count = Int(ref[..<colon]), count > 0 else { return nil }
        let rest = ref.utf8[ref.utf8.index(after: colon)...]
        guard rest.count > count else { return nil }
        let split = rest.index(rest.startIndex, offsetBy: count)
        guard let room = String(rest[..<split]), let event = String(rest[split...]),
              isRoomId(room), isEventId(event) else { return nil }
        return (room, event)
    }
}

extension MatrixBackend {
    /// Reads the user's `m.direct` (none yet: an empty map).
    func loadDirectRooms() async throws(BackendError) {
        do {
            let answer = try await call("GET", "/_matrix/client/v3/user/\(MatrixHTTP.segment(me))/account_data/m.direct")
            adoptDirect(answer.json)
        } catch .server(404, _, _) {
            adoptDirect(.object([:]))
        }
    }

    /// The name the direct-chat map is kept under in the engine's state store.
    static let directKey = "matrix.direct"

    /// Takes an `m.direct` content the server gave as the map, and keeps it in the cache so it is
    /// known offline after a restart.
    func adoptDirect(_ content: JSONValue) {
        let text = String(decoding: content.jsonData(), as: UTF8.self)
        let store = state.withLock { s -> any BackendStateStore in
            s.rooms.setDirect(content)
            s.direct = .server
            return s.store
        }
        if store.value(for: Self.directKey) != text { try? store.set(text, for: Self.directKey) }
    }

    /// Before the server has answered this session: the map kept in the cache (once per session).
    func ensureDirectMap() {
        guard state.withLock({ $0.direct == .unknown }) else { return }
        let text = state.withLock { $0.store }.value(for: Self.directKey)
        state.withLock { s in
            guard s.direct == .unknown else { return }
            if let text, let json = try? JSONValue(jsonData: Data(text.utf8)) { s.rooms.setDirect(json) }
            s.direct = .stored
        }
    }

    /// The room of a scope; a direct-message room is created (and recorded in `m.direct`) when
    /// `create` and there is none.
    func room(for scope: MessageScope, create: Bool) async throws(BackendError) -> String? {
        switch scope {
        case .group(let guid):
            guard MatrixIds.isRoomId(guid) else { throw .server(status: 404, code: "ERR_GUID_NOT_FOUND", message: "not a Matrix room id") }
            return guid
        case .user(let uid):
            guard MatrixIds.isUserId(uid) else { throw .server(status: 404, code: "ERR_UID_NOT_FOUND", message: "not a Matrix user id") }
            ensureDirectMap()
            if let room = state.withLock({ $0.rooms.roomWith[uid] }) { return room }
            // Not in a map the cache kept: only the server can say there is none (offline, this
            // throws: "no room" must never be answered for "not known yet").
            if state.withLock({ $0.direct != .server }) {
                try await loadDirectRooms()
                if let room = state.withLock({ $0.rooms.roomWith[uid] }) { return room }
            }
            guard create else { return nil }
            return try await createDirectRoom(with: uid)
        }
    }

    func createDirectRoom(with uid: String) async throws(BackendError) -> String {
        let answer = try await call("POST", "/_matrix/client/v3/createRoom", json: [
            "is_direct": true, "invite": [.string(uid)], "preset": "trusted_private_chat",
        ])
        guard let room = answer.json["room_id"]?.stringValue, MatrixIds.isRoomId(room) else {
            throw MatrixHTTP.bad("createRoom answered no room id")
        }
        try await recordDirect(room: room, peer: uid)
        return room
    }

    /// Adds a room to `m.direct` (read again first, so another device's entries stay).
    func recordDirect(room: String, peer: String) async throws(BackendError) {
        try await loadDirectRooms()
        let content = state.withLock { s -> JSONValue in
            s.rooms.peerOf[room] = peer
            if s.rooms.roomWith[peer] == nil { s.rooms.roomWith[peer] = room }
            return s.rooms.directContent
        }
        _ = try await call("PUT", "/_matrix/client/v3/user/\(MatrixHTTP.segment(me))/account_data/m.direct", json: content)
        adoptDirect(content)
    }

    /// Accepts an invitation to a direct-message room (`is_direct` on the invite), so a user who
    /// writes to us first is heard; other invitations are left for the app. True once joined.
    func acceptDirectInvite(room: String, inviteState: [JSONValue]) async -> Bool {
        let me = self.me
        var inviter: String?
        var isDirect = false
        for event in inviteState {
            guard event["type"]?.stringValue == "m.room.member", event["state_key"]?.stringValue == me else { continue }
            isDirect = event["content"]?["is_direct"]?.boolValue == true
            inviter = event["sender"]?.stringValue
        }
        guard isDirect, let inviter, MatrixIds.isUserId(inviter), MatrixIds.isRoomId(room) else { return false }
        do {
            _ = try await call("POST", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(room))/join", json: .object([:]))
            try await recordDirect(room: room, peer: inviter)
            return true
        } catch {
            // Tried again at the next sync that still shows the invitation.
            return false
        }
    }
}

extension MatrixBackend {
    /// Creates a private room (a CometChat group) and answers its id (the group's `guid`).
    public func createRoom(name: String, invite: [String] = []) async throws(BackendError) -> String {
        let answer = try await call("POST", "/_matrix/client/v3/createRoom", json: [
            "name": .string(name), "preset": "private_chat", "invite": .array(invite.filter(MatrixIds.isUserId).map { .string($0) }),
        ])
        guard let room = answer.json["room_id"]?.stringValue, MatrixIds.isRoomId(room) else {
            throw MatrixHTTP.bad("createRoom answered no room id")
        }
        return room
    }

    /// Joins a room the user was invited to (accepting a `MatrixInvitation`), or a public one.
    public func joinRoom(_ room: String) async throws(BackendError) {
        guard MatrixIds.isRoomId(room) else { throw .server(status: 404, code: "ERR_GUID_NOT_FOUND", message: "not a Matrix room id") }
        _ = try await call("POST", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(room))/join", json: .object([:]))
    }
}
