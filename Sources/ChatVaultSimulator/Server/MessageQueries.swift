import ChatVault
import Foundation

/// Server-side answers to `MessageQuery`: the documented meaning of every setting.
extension ServerState {
    func queryMessages(_ q: MessageQuery, viewer: String) throws(BackendError) -> WirePage {
        let limit = try Self.checkedLimit(q.limit)
        let candidates = try candidateMessageIds(q, viewer: viewer)
        let bound = try startBound(q)
        let filter = try MessageFilter(q, viewer: viewer, state: self)

        var picked: [Int] = []
        var more = false
        switch q.direction {
        case .previous:
            // The newest `limit` before the bound, returned oldest first.
            var i = bound.map { b in lowerIndex(candidates) { self.messages[$0 - 1].key < b } } ?? candidates.count
            while i > 0 {
                i -= 1
                let id = candidates[i]
                guard filter.matches(messages[id - 1]) else { continue }
                if picked.count == limit { more = true; break }
                picked.append(id)
            }
            picked.reverse()
        case .next:
            // The oldest `limit` after the bound.
            var i = bound.map { b in lowerIndex(candidates) { !(b < self.messages[$0 - 1].key) } } ?? 0
            while i < candidates.count {
                let id = candidates[i]
                i += 1
                guard filter.matches(messages[id - 1]) else { continue }
                if picked.count == limit { more = true; break }
                picked.append(id)
            }
        }
        let edge = q.direction == .previous ? picked.first : picked.last
        let cursor = more ? edge.map { "\(messages[$0 - 1].sentAt):\($0)" } : nil
        return WirePage(items: picked.map { renderMessage($0, for: viewer) }, nextCursor: cursor)
    }

    static func checkedLimit(_ limit: Int) throws(BackendError) -> Int {
        guard limit >= 1 else { throw .server(status: 400, code: "ERR_INVALID_LIMIT", message: "limit must be at least 1") }
        return min(limit, 1000)
    }

    /// The first index whose element does not satisfy `isBefore` (the elements satisfying it come first).
    func lowerIndex(_ ids: [Int], _ isBefore: (Int) -> Bool) -> Int {
        var low = 0, high = ids.count
        while low < high {
            let mid = (low + high) / 2
            if isBefore(ids[mid]) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// The exclusive bound the page starts from: the cursor, else the message, else the time.
    private func startBound(_ q: MessageQuery) throws(BackendError) -> MessageKey? {
        if let cursor = q.cursor { return MessageKey(sentAt: cursor.sentAt, id: cursor.id) }
        if let id = q.messageId {
            guard let m = message(id) else { throw Self.notFound("message \(id)") }
            return m.key
        }
        // (timestamp, Int.min): `.previous` gets sentAt < timestamp, `.next` gets sentAt >= timestamp.
        if let timestamp = q.timestamp { return MessageKey(sentAt: timestamp, id: Int.min) }
        return nil
    }

    /// The messages the query ranges over, in (sentAt, id) order.
    private func candidateMessageIds(_ q: MessageQuery, viewer: String) throws(BackendError) -> [Int] {
        var scoped: String?
        if let scope = q.scope {
            switch scope {
            case .user(let uid):
                guard users[uid] != nil else { throw .server(status: 404, code: "ERR_UID_NOT_FOUND", message: "no user \(uid)") }
                scoped = Self.directConversationId(viewer, uid)
            case .group(let guid):
                guard groups[guid] != nil else { throw .server(status: 404, code: "ERR_GUID_NOT_FOUND", message: "no group \(guid)") }
                guard isMember(viewer, of: guid) else {
                    throw .server(status: 403, code: "ERR_GROUP_NOT_JOINED", message: "not a member of group \(guid)")
                }
                scoped = Self.groupConversationId(guid)
            }
        }
        if let parentId = q.parentMessageId {
            guard let parent = message(parentId), canSee(message: parent, viewer: viewer) else {
                throw Self.notFound("message \(parentId)")
            }
            if let scoped, scoped != parent.conversationId { return [] }
            return parent.replyIds.sorted { messages[$0 - 1].key < messages[$1 - 1].key }
        }
        if let scoped { return conversations[scoped]?.messageIds ?? [] }
        let all = visibleConversationIds(for: viewer).flatMap { conversations[$0]?.messageIds ?? [] }
        return all.sorted { messages[$0 - 1].key < messages[$1 - 1].key }
    }

    static func notFound(_ what: String) -> BackendError {
        .server(status: 404, code: "ERR_NOT_FOUND", message: "\(what) does not exist")
    }
}

/// Every filter of a `MessageQuery`, evaluated for one user.
struct MessageFilter {
    let q: MessageQuery
    let viewer: String
    let state: ServerState
    let categories: Set<String>
    let types: Set<String>
    let tags: Set<String>
    let mentioned: Set<String>
    let attachmentTypes: Set<String>
    let keyword: String?

    init(_ q: MessageQuery, viewer: String, state: ServerState) throws(BackendError) {
        self.q = q
        self.viewer = viewer
        self.state = state
        categories = Set(q.categories)
        types = Set(q.types)
        tags = Set(q.tags)
        mentioned = Set(q.mentionedUIDs)
        attachmentTypes = Set(q.attachmentTypes.map(\.rawValue))
        keyword = q.searchKeyword.flatMap { $0.isEmpty ? nil : $0 }
    }

    func matches(_ m: StoredMessage) -> Bool {
        if let sender = q.senderUid, m.sender != sender { return false }
        if q.parentMessageId == nil && q.hideReplies && m.parentId != 0 { return false }
        if !categories.isEmpty && !categories.contains(m.content.category.rawValue) { return false }
        if !types.isEmpty && !types.contains(m.content.type) { return false }
        if !tags.isEmpty && !m.tags.contains(where: tags.contains) { return false }
        if q.unread && !state.isUnread(m, by: viewer) { return false }
        if q.hideDeleted && m.deletedAt != 0 { return false }
        if q.hasMentions && m.mentions.isEmpty { return false }
        if q.myMentionsOnly && !m.mentions.contains(viewer) { return false }
        if !mentioned.isEmpty && !m.mentions.contains(where: mentioned.contains) { return false }
        if q.hasAttachments && m.content.attachments.isEmpty { return false }
        if !attachmentTypes.isEmpty && (m.content.attachments.isEmpty || !attachmentTypes.contains(m.content.type)) { return false }
        if q.hideMessagesFromBlockedUsers && state.hasBlocked(viewer, m.sender) { return false }
        if q.hasReactions && m.reactions.isEmpty { return false }
        if q.pinned && m.pinnedAt == 0 { return false }
        if q.saved && m.saves[viewer] == nil { return false }
        if let keyword {
            guard m.deletedAt == 0, let text = m.content.searchableText,
                  text.range(of: keyword, options: .caseInsensitive) != nil else { return false }
        }
        if q.hasLinks {
            guard let text = m.content.searchableText,
                  text.range(of: "http://", options: .caseInsensitive) != nil
                    || text.range(of: "https://", options: .caseInsensitive) != nil else { return false }
        }
        if let after = q.updatedAfter, m.updatedAt <= after { return false }
        if q.updatesOnly && m.revision == 0 { return false }
        if q.interactionGoalCompletedOnly {
            guard case .interactive(_, _, let goal, _) = m.content, let goal,
                  goal.isCompleted(by: Set(m.interactions.map(\.elementId))) else { return false }
        }
        return true
    }
}
