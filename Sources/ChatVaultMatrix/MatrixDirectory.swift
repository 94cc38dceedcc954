public import ChatVault
import Foundation

/// Users, blocking, groups and their members over Matrix: the user directory,
/// `m.ignored_user_list`, joined rooms and room membership.
extension MatrixBackend {
    // MARK: - Blocking: m.ignored_user_list

    var ignoredPath: String { "/_matrix/client/v3/user/\(MatrixHTTP.segment(me))/account_data/m.ignored_user_list" }

    /// The ignored users, as the account data holds them (none yet: empty).
    func ignoredUsers() async throws(BackendError) -> [String] {
        do {
            let answer = try await call("GET", ignoredPath)
            return (answer.json["ignored_users"]?.objectValue?.keys).map { $0.filter(MatrixIds.isUserId).sorted() } ?? []
        } catch .server(404, _, _) {
            return []
        }
    }

    func setIgnored(_ users: [String]) async throws(BackendError) {
        let map = Dictionary(uniqueKeysWithValues: users.map { ($0, JSONValue.object([:])) })
        _ = try await call("PUT", ignoredPath, json: ["ignored_users": .object(map)])
    }

    /// Adds the users to `m.ignored_user_list`; answers false for a string that is not a user id or
    /// is the user's own.
    public func blockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] {
        var current = Set(try await ignoredUsers())
        var out: [String: Bool] = [:]
        for uid in uids {
            let ok = MatrixIds.isUserId(uid) && uid != me
            out[uid] = ok
            if ok { current.insert(uid) }
        }
        try await setIgnored(current.sorted())
        return out
    }

    /// Takes the users out of `m.ignored_user_list`; answers false for a string that is not a user
    /// id.
    public func unblockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] {
        var current = Set(try await ignoredUsers())
        var out: [String: Bool] = [:]
        for uid in uids {
            out[uid] = MatrixIds.isUserId(uid)
            current.remove(uid)
        }
        try await setIgnored(current.sorted())
        return out
    }

    /// The users in `m.ignored_user_list` (whom the user blocked), with `searchKeyword` matched in
    /// the user id. Who ignores the user is not visible in Matrix: `.me` answers an empty page.
    public func blockedUsers(_ query: BlockedUserQuery) async throws(BackendError) -> WirePage {
        // Matrix keeps only whom I ignore; who ignores me is not visible.
        guard query.direction != .me else { return WirePage(items: [], nextCursor: nil) }
        var users = try await ignoredUsers()
        if let keyword = query.searchKeyword?.lowercased(), !keyword.isEmpty { users = users.filter { $0.lowercased().contains(keyword) } }
        let start = query.cursor.flatMap(Int.init).map { min(max($0, 0), users.count) } ?? 0
        let end = min(start + max(query.limit, 1), users.count)
        let items: [JSONValue] = users[start..<end].map { ["uid": .string($0), "blockedByMe": true, "hasBlockedMe": false] }
        return WirePage(items: items, nextCursor: end < users.count ? String(end) : nil)
    }

    // MARK: - Users: the user directory

    /// A search of the user directory (people the user shares a room with, or in public rooms) for
    /// `searchKeyword`, with `hideBlockedUsers` and `uids` applied; one page of at most 100.
    public func users(_ query: UserQuery) async throws(BackendError) -> WirePage {
        let limit = min(max(query.limit, 1), 100)
        let answer = try await call("POST", "/_matrix/client/v3/user_directory/search",
                                    json: ["search_term": .string(query.searchKeyword ?? ""), "limit": .int(Int64(limit))])
        let ignored = query.hideBlockedUsers ? Set(try await ignoredUsers()) : []
        var items: [JSONValue] = []
        for result in answer.json["results"]?.arrayValue ?? [] {
            guard let uid = result["user_id"]?.stringValue, MatrixIds.isUserId(uid), !ignored.contains(uid) else { continue }
            if !query.uids.isEmpty && !query.uids.contains(uid) { continue }
            var user: [String: JSONValue] = ["uid": .string(uid)]
            if let name = result["display_name"]?.stringValue, name.utf8.count <= 255 { user["name"] = .string(name) }
            if let avatar = result["avatar_url"]?.stringValue, avatar.utf8.count <= 1024 { user["avatar"] = .string(avatar) }
            items.append(.object(user))
        }
        return WirePage(items: items, nextCursor: nil)
    }

    // MARK: - Groups: joined rooms

    /// The joined rooms that are not direct-message rooms, with name, topic, avatar, creator,
    /// creation time and member count; `searchKeyword` matched in the name; one page of `limit`.
    public func groups(_ query: GroupQuery) async throws(BackendError) -> WirePage {
        let filter: JSONValue = [
            "room": ["timeline": ["limit": 0], "state": ["lazy_load_members": true, "types": ["m.room.name", "m.room.topic", "m.room.avatar", "m.room.join_rules", "m.room.create"]],
                     "ephemeral": ["types": []], "account_data": ["types": []]],
            "presence": ["types": []], "account_data": ["types": ["m.direct"]],
        ]
        let answer = try await call("GET", "/_matrix/client/v3/sync", query: [("timeout", "0"), ("filter", String(decoding: filter.jsonData(), as: UTF8.self))])
        if let events = answer.json["account_data"]?["events"]?.arrayValue { applyAccountData(events) }
        var items: [JSONValue] = []
        for (room, value) in (answer.json["rooms"]?["join"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) where MatrixIds.isRoomId(room) {
            guard state.withLock({ $0.rooms.peerOf[room] }) == nil else { continue }
            var o: [String: JSONValue] = ["guid": .string(room), "hasJoined": true, "type": "private"]
            for event in value["state"]?["events"]?.arrayValue ?? [] {
                let content = event["content"]
                switch event["type"]?.stringValue {
                case "m.room.name": if let name = content?["name"]?.stringValue, name.utf8.count <= 255 { o["name"] = .string(name) }
                case "m.room.topic": if let topic = content?["topic"]?.stringValue, topic.utf8.count <= 4096 { o["description"] = .string(topic) }
                case "m.room.avatar": if let url = content?["url"]?.stringValue, url.utf8.count <= 1024 { o["icon"] = .string(url) }
                case "m.room.join_rules": if content?["join_rule"]?.stringValue == "public" { o["type"] = "public" }
                case "m.room.create":
                    if let creator = event["sender"]?.stringValue, MatrixIds.isUserId(creator) { o["owner"] = .string(creator) }
                    o["createdAt"] = .int(Self.time(event["origin_server_ts"]) / 1000)
                default: break
                }
            }
            if let count = value["summary"]?["m.joined_member_count"]?.intValue, count >= 0, count <= 1 << 31 { o["membersCount"] = .int(count) }
            if let keyword = query.searchKeyword?.lowercased(), !keyword.isEmpty,
               !(o["name"]?.stringValue?.lowercased().contains(keyword) ?? false) { continue }
            items.append(.object(o))
        }
        return WirePage(items: Array(items.prefix(max(query.limit, 1))), nextCursor: nil)
    }

    // MARK: - Members: room membership and power levels

    /// The room's joined members, with the scope their power level gives (≥ 100 admin, ≥ 50
    /// moderator; a room version 12 room's creators are admins) and `scopes` and `searchKeyword`
    /// applied; one page of `limit`.
    /// - Throws: 404 `ERR_GUID_NOT_FOUND` when `guid` is not a room id; the power levels or the
    ///   create event failing to read fails the page.
    public func groupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage {
        try await members(query, membership: "join")
    }

    /// The room's banned users, under the same rules as `groupMembers`.
    public func bannedGroupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage {
        try await members(query, membership: "ban")
    }

    /// A room's state event (`room` already a path segment), nil when the room has none (404).
    func stateEvent(_ room: String, _ type: String, query: [(String, String)] = []) async throws(BackendError) -> MatrixHTTP.Answer? {
        do {
            return try await call("GET", "/_matrix/client/v3/rooms/\(room)/state/\(type)", query: query)
        } catch .server(404, _, _) {
            return nil
        }
    }

    func members(_ query: GroupMemberQuery, membership: String) async throws(BackendError) -> WirePage {
        guard MatrixIds.isRoomId(query.guid) else { throw .server(status: 404, code: "ERR_GUID_NOT_FOUND", message: "not a Matrix room id") }
        let room = MatrixHTTP.segment(query.guid)
        let answer = try await call("GET", "/_matrix/client/v3/rooms/\(room)/members", query: [("membership", membership)])
        // A room without the state event has the defaults; any other failure fails the page (a
        // list rendered without the levels would take every admin back to participant).
        let levels = try await stateEvent(room, "m.room.power_levels")?.json
        // Room version 12 makes the creators owners beyond power levels (they are not listed).
        var creators: Set<String> = []
        if let create = try await stateEvent(room, "m.room.create", query: [("format", "event")]) {
            if let sender = create.json["sender"]?.stringValue { creators.insert(sender) }
            for case .string(let extra) in create.json["content"]?["additional_creators"]?.arrayValue ?? [] { creators.insert(extra) }
        }
        var items: [JSONValue] = []
        for event in answer.json["chunk"]?.arrayValue ?? [] {
            guard let uid = event["state_key"]?.stringValue, MatrixIds.isUserId(uid) else { continue }
            let level = creators.contains(uid) ? 100 : levels?["users"]?[uid]?.intValue ?? levels?["users_default"]?.intValue ?? 0
            let scope = level >= 100 ? "admin" : level >= 50 ? "moderator" : "participant"
            if !query.scopes.isEmpty && !query.scopes.contains(scope) { continue }
            var o: [String: JSONValue] = ["uid": .string(uid), "guid": .string(query.guid), "scope": .string(scope),
                                          "joinedAt": .int(Self.time(event["origin_server_ts"]) / 1000)]
            if let name = event["content"]?["displayname"]?.stringValue, name.utf8.count <= 255 { o["name"] = .string(name) }
            if let keyword = query.searchKeyword?.lowercased(), !keyword.isEmpty,
               !uid.lowercased().contains(keyword) && !(o["name"]?.stringValue?.lowercased().contains(keyword) ?? false) { continue }
            items.append(.object(o))
        }
        return WirePage(items: Array(items.prefix(max(query.limit, 1))), nextCursor: nil)
    }
}
