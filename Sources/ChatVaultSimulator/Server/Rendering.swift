import ChatVault

/// Wire JSON for each entity, as one user sees it (the fields `WireDecoder` reads). Empty strings
/// and absent values are left out rather than sent as "" (the decoder rejects empty identifiers).
extension ServerState {
    func renderUser(_ uid: String, for viewer: String) -> JSONValue {
        guard let user = users[uid] else { return .object(["uid": .string(uid)]) }
        var o = userFields(user, for: viewer)
        o.put("uid", user.uid)
        return .object(o)
    }

    private func userFields(_ user: SimulatedUser, for viewer: String) -> [String: JSONValue] {
        var o: [String: JSONValue] = [:]
        o.put("name", user.name)
        o.put("avatar", user.avatar)
        o.put("link", user.link)
        o.put("role", user.role)
        o.put("statusMessage", user.statusMessage)
        if let metadata = user.metadata { o["metadata"] = metadata }
        o["status"] = .string(user.status.rawValue)
        o.put("lastActiveAt", user.lastActiveAt)
        o.put("deactivatedAt", user.deactivatedAt)
        o["blockedByMe"] = .bool(hasBlocked(viewer, user.uid))
        o["hasBlockedMe"] = .bool(hasBlocked(user.uid, viewer))
        o["tags"] = .strings(user.tags)
        if user.isAgentic { o["isAgentic"] = true }
        return o
    }

    func renderGroup(_ guid: String, for viewer: String) -> JSONValue {
        guard let group = groups[guid] else { return .object(["guid": .string(guid)]) }
        let info = group.info
        var o: [String: JSONValue] = ["guid": .string(guid), "type": .string(info.type.rawValue)]
        o.put("name", info.name)
        o.put("icon", info.icon)
        o.put("description", info.description)
        o.put("owner", info.owner)
        if let metadata = info.metadata { o["metadata"] = metadata }
        o.put("createdAt", group.createdAt)
        o.put("updatedAt", group.updatedAt)
        o["membersCount"] = .int(Int64(group.members.count))
        o["tags"] = .strings(info.tags)
        if let me = group.members[viewer] {
            o["hasJoined"] = true
            o["scope"] = .string(me.scope.rawValue)
            o.put("joinedAt", me.joinedAt)
        } else {
            o["hasJoined"] = false
        }
        return .object(o)
    }

    func renderMember(_ uid: String, _ member: StoredMember, guid: String, for viewer: String) -> JSONValue {
        var o = users[uid].map { userFields($0, for: viewer) } ?? [:]
        o.put("uid", uid)
        o["scope"] = .string(member.scope.rawValue)
        o.put("joinedAt", member.joinedAt)
        o.put("guid", guid)
        return .object(o)
    }

    func renderMessage(_ id: Int, for viewer: String) -> JSONValue {
        let m = messages[id - 1]
        var o: [String: JSONValue] = [
            "id": .int(Int64(m.id)),
            "conversationId": .string(m.conversationId),
            "sender": renderUser(m.sender, for: viewer),
            "receiver": .string(m.receiver),
            "receiverType": .string(m.receiverType.rawValue),
            "category": .string(m.content.category.rawValue),
            "type": .string(m.content.type),
            "sentAt": .int(Int64(m.sentAt)),
            "data": renderData(m),
        ]
        o.put("muid", m.muid)
        o.put("updatedAt", m.updatedAt)
        o.put("editedAt", m.editedAt)
        o.put("editedBy", m.editedBy)
        o.put("deletedAt", m.deletedAt)
        o.put("deletedBy", m.deletedBy)
        // Receipts: the other side's for my own messages, mine for everyone else's.
        if m.sender == viewer {
            let (delivered, read) = receiptsOfOthers(m)
            o.put("deliveredAt", delivered)
            o.put("readAt", read)
        } else {
            o.put("deliveredToMeAt", deliveryTime(of: m.id, in: m.conversationId, by: viewer))
            o.put("readByMeAt", readTime(of: m.id, in: m.conversationId, by: viewer))
        }
        o.put("parentId", m.parentId)
        if !m.replyIds.isEmpty {
            o["replyCount"] = .int(Int64(m.replyIds.count))
            let unreadReplies = m.replyIds.lazy.filter { self.isUnread(self.messages[$0 - 1], by: viewer) }.count
            o.put("unreadRepliesCount", unreadReplies)
        }
        if !m.tags.isEmpty { o["tags"] = .strings(m.tags) }
        if !m.mentions.isEmpty {
            o["mentionedUsers"] = .array(m.mentions.map { renderUser($0, for: viewer) })
            o["mentionedMe"] = .bool(m.mentions.contains(viewer))
        }
        if !m.reactions.isEmpty { o["reactions"] = renderReactionCounts(m, for: viewer) }
        o.put("pinnedAt", m.pinnedAt)
        o.put("pinnedBy", m.pinnedBy)
        o.put("savedAt", m.saves[viewer] ?? 0)
        o.put("quotedMessageId", m.quotedMessageId)
        o.put("localMessageId", m.localMessageId)
        return .object(o)
    }

    /// For a direct message, the receiver's receipts; for a group message, the time the last of
    /// the other members got (read) it, 0 until all have.
    private func receiptsOfOthers(_ m: StoredMessage) -> (delivered: Int, read: Int) {
        guard let conversation = conversations[m.conversationId] else { return (0, 0) }
        let others = otherParticipants(of: conversation, than: m.sender)
        guard !others.isEmpty else { return (0, 0) }
        var delivered = 0, read = 0
        for uid in others {
            let d = deliveryTime(of: m.id, in: m.conversationId, by: uid)
            delivered = d == 0 || delivered == -1 ? -1 : max(delivered, d)
            let r = readTime(of: m.id, in: m.conversationId, by: uid)
            read = r == 0 || read == -1 ? -1 : max(read, r)
        }
        return (max(delivered, 0), max(read, 0))
    }

    private func renderData(_ m: StoredMessage) -> JSONValue {
        var d: [String: JSONValue] = [:]
        switch m.content {
        case .text(let text):
            d["text"] = .string(text)
        case .media(_, let attachments, let caption):
            d["attachments"] = .array(attachments.map(Self.renderAttachment))
            d.put("caption", caption)
        case .custom(_, let data, let subType, let conversationText, let updateConversation):
            d["customData"] = data
            d.put("subType", subType)
            d.put("conversationText", conversationText)
            d["updateConversation"] = .bool(updateConversation)
        case .interactive(_, let data, let goal, let allowSenderInteraction):
            d["interactiveData"] = data
            if let goal { d["interactionGoal"] = goal.wire }
            d["allowSenderInteraction"] = .bool(allowSenderInteraction)
            d["interactions"] = .array(m.interactions.map {
                ["elementId": .string($0.elementId), "interactedAt": .int(Int64($0.at))]
            })
        case .action(let action, let message):
            d["action"] = .string(action)
            d["message"] = .string(message)
        }
        if let metadata = m.metadata { d["metadata"] = metadata }
        return .object(d)
    }

    /// One attachment as `data.attachments` carries it (and as an upload answers it).
    static func renderAttachment(_ a: SimulatedAttachment) -> JSONValue {
        var o: [String: JSONValue] = ["url": .string(a.url), "mimeType": .string(a.mimeType), "size": .int(Int64(a.size))]
        o.put("name", a.name)
        o.put("extension", a.fileExtension)
        return .object(o)
    }

    /// Counts per emoji, in the order each emoji first appeared.
    private func renderReactionCounts(_ m: StoredMessage, for viewer: String) -> JSONValue {
        var order: [String] = []
        var counts: [String: (count: Int, mine: Bool)] = [:]
        for r in m.reactions {
            if counts[r.reaction] == nil { order.append(r.reaction) }
            let current = counts[r.reaction] ?? (0, false)
            counts[r.reaction] = (current.count + 1, current.mine || r.uid == viewer)
        }
        return .array(order.map { emoji in
            let c = counts[emoji]!
            return ["reaction": .string(emoji), "count": .int(Int64(c.count)), "reactedByMe": .bool(c.mine)]
        })
    }

    func renderReaction(_ r: StoredReaction, messageId: Int, for viewer: String) -> JSONValue {
        [
            "id": .string(String(r.sequence)),
            "messageId": .int(Int64(messageId)),
            "reaction": .string(r.reaction),
            "uid": .string(r.uid),
            "reactedAt": .int(Int64(r.reactedAt)),
            "reactedBy": renderUser(r.uid, for: viewer),
        ]
    }

    /// `nil` when the conversation has nothing to show yet (no message that updates it).
    func renderConversation(_ conversation: StoredConversation, for viewer: String) -> JSONValue? {
        guard let summary = summary(of: conversation, for: viewer) else { return nil }
        var o: [String: JSONValue] = [
            "conversationId": .string(conversation.id),
            "conversationType": .string(conversation.receiverType.rawValue),
            "lastMessage": renderMessage(summary.lastMessageId, for: viewer),
            "unreadMessageCount": .int(Int64(summary.unread)),
            "unreadMentionsCount": .int(Int64(summary.unreadMentions)),
            "updatedAt": .int(Int64(summary.updatedAt)),
        ]
        switch conversation.kind {
        case .direct(let a, let b): o["conversationWith"] = renderUser(viewer == a ? b : a, for: viewer)
        case .group(let guid): o["conversationWith"] = renderGroup(guid, for: viewer)
        }
        let mine = userConversations[UserConversation(uid: viewer, conversationId: conversation.id)]
        o["tags"] = .strings(mine?.tags ?? [])
        o.put("lastReadMessageId", lastReadMessageId(in: conversation.id, by: viewer))
        o.put("pinnedAt", mine?.pinnedAt ?? 0)
        o.put("pinnedBy", mine?.pinnedBy)
        return .object(o)
    }

    struct ConversationSummary {
        let lastMessageId: Int
        let updatedAt: Int
        let unread: Int
        let unreadMentions: Int
    }

    /// What a conversation list needs; nil when the conversation is not listed for `viewer`
    /// (nothing to show, or deleted by the viewer and nothing newer since).
    func summary(of conversation: StoredConversation, for viewer: String) -> ConversationSummary? {
        guard let last = lastMessageId(of: conversation) else { return nil }
        let hiddenUpTo = userConversations[UserConversation(uid: viewer, conversationId: conversation.id)]?.hiddenUpTo ?? 0
        guard last > hiddenUpTo else { return nil }
        let unread = unreadCounts(of: conversation, for: viewer)
        return ConversationSummary(lastMessageId: last, updatedAt: messages[last - 1].sentAt, unread: unread.messages,
                                   unreadMentions: unread.mentions)
    }

    func renderThread(parentId: Int, for viewer: String) -> JSONValue {
        let parent = messages[parentId - 1]
        var o: [String: JSONValue] = [
            "parentMessageId": .int(Int64(parentId)),
            "parentMessage": renderMessage(parentId, for: viewer),
            "replyCount": .int(Int64(parent.replyIds.count)),
            "conversationId": .string(parent.conversationId),
            "receiverType": .string(parent.receiverType.rawValue),
            "receiverUid": .string(parent.receiver),
            "isSubscribed": true,
        ]
        if let last = lastReplyId(of: parent) {
            o["lastReply"] = renderMessage(last, for: viewer)
            o["updatedAt"] = .int(Int64(messages[last - 1].sentAt))
        }
        return .object(o)
    }

    func lastReplyId(of parent: StoredMessage) -> Int? {
        parent.replyIds.max { messages[$0 - 1].key < messages[$1 - 1].key }
    }

    func renderFeedItem(_ item: StoredFeedItem) -> JSONValue {
        var o: [String: JSONValue] = [
            "id": .string(item.id),
            "content": item.content,
            "sentAt": .int(Int64(item.sentAt)),
            "receiver": .string(item.receiver),
            "receiverType": "user",
            "tags": .strings(item.tags),
        ]
        o.put("category", item.category)
        o.put("categoryId", item.categoryId)
        o.put("channelId", item.channelId)
        o.put("deliveredAt", item.deliveredAt)
        o.put("readAt", item.readAt)
        o.put("sender", item.sender)
        if let metadata = item.metadata { o["metadata"] = metadata }
        return .object(o)
    }
}

extension Dictionary where Key == String, Value == JSONValue {
    /// Sets a string field, leaving out nil and "".
    mutating func put(_ key: String, _ value: String?) {
        if let value, !value.isEmpty { self[key] = .string(value) }
    }

    /// Sets a number field, leaving out 0 (the decoder's default).
    mutating func put(_ key: String, _ value: Int) {
        if value != 0 { self[key] = .int(Int64(value)) }
    }
}

extension JSONValue {
    static func strings(_ values: [String]) -> JSONValue {
        .array(values.map { .string($0) })
    }
}
