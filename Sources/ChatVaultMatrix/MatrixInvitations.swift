public import ChatVault
import Foundation

/// An invitation to a group room, waiting for the user's answer (`MatrixBackend.joinRoom`, or
/// `declineInvitation`). Invitations to a direct chat (`is_direct`) are not listed: the backend
/// accepts them itself, as a CometChat conversation with a user needs no answer.
public struct MatrixInvitation: Sendable, Equatable {
    /// The room (the group's `guid` once joined).
    public var room: String
    /// The room's name as the invitation shows it; nil when it has none.
    public var name: String?
    /// Who invited the user.
    public var inviter: String

    /// An invitation to `room` from `inviter`.
    public init(room: String, name: String?, inviter: String) {
        self.room = room
        self.name = name
        self.inviter = inviter
    }
}

extension MatrixBackend {
    /// The invitation an `invite_state` shows, when it is one to a group room (not a direct chat)
    /// and well formed.
    func groupInvitation(room: String, inviteState: [JSONValue]) -> MatrixInvitation? {
        guard MatrixIds.isRoomId(room) else { return nil }
        let me = self.me
        var inviter: String?
        var name: String?
        var direct = false
        for event in inviteState {
            switch event["type"]?.stringValue {
            case "m.room.member" where event["state_key"]?.stringValue == me && event["content"]?["membership"]?.stringValue == "invite":
                direct = event["content"]?["is_direct"]?.boolValue == true
                inviter = event["sender"]?.stringValue
            case "m.room.name":
                name = event["content"]?["name"]?.stringValue.map { String($0.prefix(255)) }.flatMap { $0.isEmpty ? nil : $0 }
            default:
                continue
            }
        }
        guard !direct, let inviter, MatrixIds.isUserId(inviter) else { return nil }
        return MatrixInvitation(room: room, name: name, inviter: inviter)
    }

    /// The user's invitations to group rooms, as the homeserver now holds them (one `/sync` that
    /// asks for no timeline, state or receipts).
    public func invitations() async throws(BackendError) -> [MatrixInvitation] {
        let filter: JSONValue = [
            "room": ["timeline": ["limit": 0], "state": ["types": []], "ephemeral": ["types": []], "account_data": ["types": []]],
            "presence": ["types": []], "account_data": ["types": []],
        ]
        let answer = try await call("GET", "/_matrix/client/v3/sync", query: [
            ("timeout", "0"), ("filter", String(decoding: filter.jsonData(), as: UTF8.self)),
        ])
        let invites = answer.json["rooms"]?["invite"]?.objectValue ?? [:]
        return invites.keys.sorted().compactMap { room in
            groupInvitation(room: room, inviteState: invites[room]?["invite_state"]?["events"]?.arrayValue ?? [])
        }
    }

    /// Declines an invitation (leaves the room before joining it).
    /// - Throws: 404 `ERR_GUID_NOT_FOUND` for a string that is not a room id; the homeserver's
    ///   error otherwise (403 when there is no invitation).
    public func declineInvitation(_ room: String) async throws(BackendError) {
        guard MatrixIds.isRoomId(room) else { throw .server(status: 404, code: "ERR_GUID_NOT_FOUND", message: "not a Matrix room id") }
        _ = try await call("POST", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(room))/leave", json: .object([:]))
    }
}
