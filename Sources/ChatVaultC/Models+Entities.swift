import ChatVault

/// Users, groups, members and threads as the JSON text the C API documents (chatvault.h, "Paged
/// reads"): the public fields of the Swift models, translated, nothing computed here.
extension CModels {
    static func user(_ u: User) -> JSONValue {
        var o: [String: JSONValue] = [
            "uid": .string(u.uid),
            "name": u.name.map { .string($0) } ?? .null,
            "avatar": u.avatar.map { .string($0) } ?? .null,
            "role": u.role.map { .string($0) } ?? .null,
            "statusMessage": u.statusMessage.map { .string($0) } ?? .null,
            "status": .string(u.status.rawValue),
            "lastActiveAt": .double(u.lastActiveAt),
            "blockedByMe": .bool(u.blockedByMe),
            "hasBlockedMe": .bool(u.hasBlockedMe),
            "tags": .array(u.tags.map { .string($0) }),
        ]
        if let metadata = u.metadata { o["metadata"] = metadata }
        if let member = u as? GroupMember {
            o["scope"] = .string(member.scope.rawValue)
            o["joinedAt"] = .int(Int64(member.joinedAt))
            o["guid"] = .string(member.guid)
        }
        return .object(o)
    }

    static func group(_ g: Group) -> JSONValue {
        var o: [String: JSONValue] = [
            "guid": .string(g.guid),
            "name": g.name.map { .string($0) } ?? .null,
            "icon": g.icon.map { .string($0) } ?? .null,
            "description": g.groupDescription.map { .string($0) } ?? .null,
            "owner": g.owner.map { .string($0) } ?? .null,
            "type": .string(g.groupType.rawValue),
            "scope": .string(g.scope.rawValue),
            "hasJoined": .bool(g.hasJoined),
            "membersCount": .int(Int64(g.membersCount)),
            "createdAt": .int(Int64(g.createdAt)),
            "updatedAt": .int(Int64(g.updatedAt)),
            "joinedAt": .int(Int64(g.joinedAt)),
            "tags": .array(g.tags.map { .string($0) }),
        ]
        if let metadata = g.metadata { o["metadata"] = metadata }
        return .object(o)
    }

    static func thread(_ t: MessageThread) -> JSONValue {
        .object([
            "parentMessageId": .int(Int64(t.parentMessageId)),
            "parentMessage": message(t.parentMessage),
            "replyCount": .int(Int64(t.replyCount)),
            "lastReply": t.lastReply.map(message) ?? .null,
            "conversationId": .string(t.conversationId),
            "receiverType": .string(t.receiverType.rawValue),
            "receiver": .string(t.receiverUid),
            "isSubscribed": .bool(t.isSubscribed),
            "unreadReplyCount": t.unreadReplyCount.map { .int(Int64($0)) } ?? .null,
            "updatedAt": .double(t.updatedAt),
        ])
    }

    /// A lookup's result: {"cached": item | null, "server": item | null, "serverError": {...} | null}.
    static func lookup<Item>(cached: Item?, server: Result<Item?, CometChatException>, _ render: (Item) -> JSONValue) -> JSONValue {
        var o: [String: JSONValue] = ["cached": cached.map(render) ?? .null]
        switch server {
        case .success(let item):
            o["server"] = item.map(render) ?? .null
            o["serverError"] = .null
        case .failure(let error):
            o["server"] = .null
            o["serverError"] = ["code": .string(error.errorCode), "message": .string(error.errorDescription)]
        }
        return .object(o)
    }
}
