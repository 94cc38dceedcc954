import ChatVault

/// Users, groups, members and threads as the JSON text the C API documents (chatvault.h, "Paged
/// reads"): the public fields of the Swift models, translated, keys in sorted order.
extension CModels {
    static func user(_ u: User, _ w: inout JSONWriter) {
        let member = u as? GroupMember
        w.open()
        w.key("avatar"); w.string(u.avatar)
        w.key("blockedByMe"); w.bool(u.blockedByMe)
        if let member { w.key("guid"); w.string(member.guid) }
        w.key("hasBlockedMe"); w.bool(u.hasBlockedMe)
        if let member { w.key("joinedAt"); w.int(member.joinedAt) }
        w.key("lastActiveAt"); w.double(u.lastActiveAt)
        if let metadata = u.metadata { w.key("metadata"); w.value(metadata) }
        w.key("name"); w.string(u.name)
        w.key("role"); w.string(u.role)
        if let member { w.key("scope"); w.string(member.scope.rawValue) }
        w.key("status"); w.string(u.status.rawValue)
        w.key("statusMessage"); w.string(u.statusMessage)
        w.key("tags"); w.array(u.tags) { t, w in w.string(t) }
        w.key("uid"); w.string(u.uid)
        w.close()
    }

    static func group(_ g: Group, _ w: inout JSONWriter) {
        w.open()
        w.key("createdAt"); w.int(g.createdAt)
        w.key("description"); w.string(g.groupDescription)
        w.key("guid"); w.string(g.guid)
        w.key("hasJoined"); w.bool(g.hasJoined)
        w.key("icon"); w.string(g.icon)
        w.key("joinedAt"); w.int(g.joinedAt)
        w.key("membersCount"); w.int(g.membersCount)
        if let metadata = g.metadata { w.key("metadata"); w.value(metadata) }
        w.key("name"); w.string(g.name)
        w.key("owner"); w.string(g.owner)
        w.key("scope"); w.string(g.scope.rawValue)
        w.key("tags"); w.array(g.tags) { t, w in w.string(t) }
        w.key("type"); w.string(g.groupType.rawValue)
        w.key("updatedAt"); w.int(g.updatedAt)
        w.close()
    }

    static func thread(_ t: MessageThread, _ w: inout JSONWriter) {
        w.open()
        w.key("conversationId"); w.string(t.conversationId)
        w.key("isSubscribed"); w.bool(t.isSubscribed)
        w.key("lastReply")
        if let last = t.lastReply { message(last, &w) } else { w.null() }
        w.key("parentMessage"); message(t.parentMessage, &w)
        w.key("parentMessageId"); w.int(t.parentMessageId)
        w.key("receiver"); w.string(t.receiverUid)
        w.key("receiverType"); w.string(t.receiverType.rawValue)
        w.key("replyCount"); w.int(t.replyCount)
        w.key("unreadReplyCount")
        if let n = t.unreadReplyCount { w.int(n) } else { w.null() }
        w.key("updatedAt"); w.double(t.updatedAt)
        w.close()
    }
}
