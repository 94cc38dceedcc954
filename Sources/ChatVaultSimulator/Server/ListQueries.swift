import ChatVault
import Foundation

/// Server-side answers to the entity lists and single lookups.
extension ServerState {
    // MARK: Paging

    /// Entity lists page by position, like the SDK's page-numbered lists: the cursor is an opaque
    /// "offset:<n>" token.
    static func offsetPage<T>(_ items: [T], limit: Int, cursor: String?) throws(BackendError) -> (items: ArraySlice<T>, next: String?) {
        let limit = try checkedLimit(limit)
        var start = 0
        if let cursor {
            guard cursor.hasPrefix("offset:"), let n = Int(cursor.dropFirst("offset:".count)), n >= 0 else {
                throw invalidCursor
            }
            start = min(n, items.count)
        }
        let end = min(start + limit, items.count)
        return (items[start..<end], end < items.count ? "offset:\(end)" : nil)
    }

    static let invalidCursor = BackendError.server(status: 400, code: "ERR_INVALID_CURSOR", message: "the cursor is not one this server gave")

    /// A "<number>:<rest>" keyset cursor.
    static func keysetCursor(_ cursor: String) throws(BackendError) -> (Int, String) {
        guard let colon = cursor.firstIndex(of: ":"), let n = Int(cursor[..<colon]) else { throw invalidCursor }
        return (n, String(cursor[cursor.index(after: colon)...]))
    }

    static func matches(_ keyword: String?, _ fields: String?...) -> Bool {
        guard let keyword, !keyword.isEmpty else { return true }
        return fields.contains { $0?.range(of: keyword, options: .caseInsensitive) != nil }
    }

    static func byName(_ a: (name: String, id: String), _ b: (name: String, id: String)) -> Bool {
        let order = a.name.compare(b.name, options: .caseInsensitive)
        return order == .orderedSame ? a.id < b.id : order == .orderedAscending
    }

    // MARK: Conversations

    func queryConversations(_ q: ConversationQuery, viewer: String) throws(BackendError) -> WirePage {
        let limit = try Self.checkedLimit(q.limit)
        let tags = Set(q.tags), userTags = Set(q.userTags), groupTags = Set(q.groupTags), pinnedBy = Set(q.pinnedBy)
        var rows: [(id: String, updatedAt: Int)] = []
        for id in visibleConversationIds(for: viewer) {
            let conversation = conversations[id]!
            guard let summary = summary(of: conversation, for: viewer) else { continue }
            let mine = userConversations[UserConversation(uid: viewer, conversationId: id)]
            var other: SimulatedUser?
            var group: SimulatedGroup?
            switch conversation.kind {
            case .direct(let a, let b): other = users[viewer == a ? b : a]
            case .group(let guid): group = groups[guid]?.info
            }
            switch q.conversationType {
            case .user: if other == nil { continue }
            case .group: if group == nil { continue }
            case .none: break
            }
            if q.unread && summary.unread == 0 { continue }
            if !tags.isEmpty && !(mine?.tags ?? []).contains(where: tags.contains) { continue }
            if !userTags.isEmpty || !groupTags.isEmpty {
                let byUser = other.map { !userTags.isEmpty && $0.tags.contains(where: userTags.contains) } ?? false
                let byGroup = group.map { !groupTags.isEmpty && $0.tags.contains(where: groupTags.contains) } ?? false
                if !byUser && !byGroup { continue }
            }
            if q.hideAgentic && other?.isAgentic == true { continue }
            if q.onlyAgentic && other?.isAgentic != true { continue }
            if !q.includeBlockedUsers, let other, hasBlocked(viewer, other.uid) { continue }
            if !pinnedBy.isEmpty {
                guard let mine, mine.pinnedAt != 0 else { continue }
                let system = mine.pinnedBy == ChatVaultSimulator.systemPinner
                if !((pinnedBy.contains("me") && !system) || (pinnedBy.contains("system") && system)) { continue }
            }
            if let keyword = q.searchKeyword, !keyword.isEmpty {
                guard Self.matches(keyword, other?.name ?? group?.name) else { continue }
            }
            rows.append((id, summary.updatedAt))
        }
        // Most recent activity first; ties by id, so the order is total and paging is exact.
        rows.sort { $0.updatedAt != $1.updatedAt ? $0.updatedAt > $1.updatedAt : $0.id < $1.id }
        var start = 0
        if let cursor = q.cursor {
            let (updatedAt, id) = try Self.keysetCursor(cursor)
            start = rows.firstIndex { $0.updatedAt < updatedAt || ($0.updatedAt == updatedAt && $0.id > id) } ?? rows.count
        }
        let end = min(start + limit, rows.count)
        let page = rows[start..<end]
        let next = end < rows.count ? page.last.map { "\($0.updatedAt):\($0.id)" } : nil
        return WirePage(items: page.compactMap { renderConversation(conversations[$0.id]!, for: viewer) }, nextCursor: next)
    }

    func conversation(with id: String, type: ConversationType, viewer: String) throws(BackendError) -> JSONValue {
        let conversationId: String
        switch type {
        case .user:
            guard users[id] != nil else { throw Self.notFound("user \(id)") }
            conversationId = Self.directConversationId(viewer, id)
        case .group:
            guard groups[id] != nil else { throw Self.notFound("group \(id)") }
            guard isMember(viewer, of: id) else {
                throw .server(status: 403, code: "ERR_GROUP_NOT_JOINED", message: "not a member of group \(id)")
            }
            conversationId = Self.groupConversationId(id)
        case .none:
            throw .server(status: 400, code: "ERR_INVALID_CONVERSATION_TYPE", message: "the conversation type must be user or group")
        }
        guard let conversation = conversations[conversationId], let json = renderConversation(conversation, for: viewer) else {
            throw Self.notFound("conversation \(conversationId)")
        }
        return json
    }

    func message(id: Int, viewer: String) throws(BackendError) -> JSONValue {
        guard let m = message(id), canSee(message: m, viewer: viewer) else { throw Self.notFound("message \(id)") }
        return renderMessage(id, for: viewer)
    }

    // MARK: Users

    /// Friends: users with a declared friendship (`makeFriends`) or a one-to-one conversation
    /// with at least one message.
    func areFriends(_ a: String, _ b: String) -> Bool {
        friendships.contains(.unordered(a, b)) || !(conversations[Self.directConversationId(a, b)]?.messageIds.isEmpty ?? true)
    }

    func queryUsers(_ q: UserQuery, viewer: String) throws(BackendError) -> WirePage {
        let uids = Set(q.uids), roles = Set(q.roles), tags = Set(q.tags)
        let searchIn = q.searchIn.isEmpty ? ["uid", "name"] : q.searchIn
        var listed = users.values.filter { u in
            guard u.uid != viewer, u.deactivatedAt == 0 else { return false }
            if !uids.isEmpty && !uids.contains(u.uid) { return false }
            if !Self.matches(q.searchKeyword, searchIn.contains("uid") ? u.uid : nil, searchIn.contains("name") ? u.name : nil) { return false }
            if let status = q.status, Self.presence(u.status) != Self.presence(status) { return false }
            if q.hideBlockedUsers && hasBlocked(viewer, u.uid) { return false }
            if !roles.isEmpty && !roles.contains(u.role ?? "default") { return false }
            if q.friendsOnly && !areFriends(viewer, u.uid) { return false }
            if !tags.isEmpty && !u.tags.contains(where: tags.contains) { return false }
            return true
        }
        let ascending: (SimulatedUser, SimulatedUser) -> Bool
        switch q.sortBy ?? "name" {
        case "name": ascending = { Self.byName(($0.name, $0.uid), ($1.name, $1.uid)) }
        case "uid": ascending = { $0.uid < $1.uid }
        case "status":
            ascending = { a, b in
                let (pa, pb) = (Self.presence(a.status) == .online ? 0 : 1, Self.presence(b.status) == .online ? 0 : 1)
                return pa != pb ? pa < pb : Self.byName((a.name, a.uid), (b.name, b.uid))
            }
        case "lastActiveAt": ascending = { $0.lastActiveAt != $1.lastActiveAt ? $0.lastActiveAt < $1.lastActiveAt : $0.uid < $1.uid }
        default: throw .server(status: 400, code: "ERR_INVALID_SORT_BY", message: "users cannot be sorted by that field")
        }
        listed.sort(by: q.sortOrder == .desc ? { ascending($1, $0) } : ascending)
        let page = try Self.offsetPage(listed, limit: q.limit, cursor: q.cursor)
        return WirePage(items: page.items.map { renderUser($0.uid, for: viewer) }, nextCursor: page.next)
    }

    /// `available` is the deprecated spelling of `online`.
    static func presence(_ status: UserStatus) -> UserStatus {
        status == .available ? .online : status
    }

    func queryBlockedUsers(_ q: BlockedUserQuery, viewer: String) throws(BackendError) -> WirePage {
        var uids = Set<String>()
        for block in blocks {
            if block.first == viewer && q.direction != .me { uids.insert(block.second) }
            if block.second == viewer && q.direction != .byMe { uids.insert(block.first) }
        }
        let listed = uids.compactMap { users[$0] }
            .filter { Self.matches(q.searchKeyword, $0.uid, $0.name) }
            .sorted { Self.byName(($0.name, $0.uid), ($1.name, $1.uid)) }
        let page = try Self.offsetPage(listed, limit: q.limit, cursor: q.cursor)
        return WirePage(items: page.items.map { renderUser($0.uid, for: viewer) }, nextCursor: page.next)
    }

    // MARK: Groups

    func queryGroups(_ q: GroupQuery, viewer: String) throws(BackendError) -> WirePage {
        let tags = Set(q.tags)
        let listed = groups.values.filter { g in
            let member = g.members[viewer] != nil
            if g.info.type == .private && !member { return false }
            if q.joinedOnly && !member { return false }
            if !tags.isEmpty && !g.info.tags.contains(where: tags.contains) { return false }
            return Self.matches(q.searchKeyword, g.info.name)
        }.sorted { Self.byName(($0.info.name, $0.info.guid), ($1.info.name, $1.info.guid)) }
        let page = try Self.offsetPage(listed, limit: q.limit, cursor: q.cursor)
        return WirePage(items: page.items.map { renderGroup($0.info.guid, for: viewer) }, nextCursor: page.next)
    }

    func queryGroupMembers(_ q: GroupMemberQuery, banned: Bool, viewer: String) throws(BackendError) -> WirePage {
        guard let group = groups[q.guid] else { throw .server(status: 404, code: "ERR_GUID_NOT_FOUND", message: "no group \(q.guid)") }
        guard group.info.type != .private || group.members[viewer] != nil else {
            throw .server(status: 403, code: "ERR_NOT_A_MEMBER", message: "not a member of group \(q.guid)")
        }
        let scopes = Set(q.scopes)
        let listed = (banned ? group.banned : group.members).filter { uid, member in
            let user = users[uid]
            if !scopes.isEmpty && !scopes.contains(member.scope.rawValue) { return false }
            if let status = q.status, Self.presence(user?.status ?? .offline) != Self.presence(status) { return false }
            return Self.matches(q.searchKeyword, uid, user?.name)
        }.sorted { Self.byName((users[$0.key]?.name ?? $0.key, $0.key), (users[$1.key]?.name ?? $1.key, $1.key)) }
        let page = try Self.offsetPage(listed, limit: q.limit, cursor: q.cursor)
        return WirePage(items: page.items.map { renderMember($0.key, $0.value, guid: q.guid, for: viewer) }, nextCursor: page.next)
    }

    // MARK: Reactions

    func queryReactions(_ q: ReactionQuery, viewer: String) throws(BackendError) -> WirePage {
        let limit = try Self.checkedLimit(q.limit)
        guard let m = message(q.messageId), canSee(message: m, viewer: viewer) else { throw Self.notFound("message \(q.messageId)") }
        let all = m.reactions.filter { q.reaction == nil || $0.reaction == q.reaction }
            .sorted { ($0.reactedAt, $0.sequence) < ($1.reactedAt, $1.sequence) }
        var bound: (Int, Int)?
        if let cursor = q.cursor {
            let (at, rest) = try Self.keysetCursor(cursor)
            guard let sequence = Int(rest) else { throw Self.invalidCursor }
            bound = (at, sequence)
        }
        let picked: ArraySlice<StoredReaction>
        let more: Bool
        switch q.direction {
        case .next:
            let after = all.filter { r in bound.map { (r.reactedAt, r.sequence) > $0 } ?? true }
            picked = after.prefix(limit)
            more = after.count > limit
        case .previous:
            let before = all.filter { r in bound.map { (r.reactedAt, r.sequence) < $0 } ?? true }
            picked = before.suffix(limit)
            more = before.count > limit
        }
        let edge = q.direction == .next ? picked.last : picked.first
        let next = more ? edge.map { "\($0.reactedAt):\($0.sequence)" } : nil
        return WirePage(items: picked.map { renderReaction($0, messageId: m.id, for: viewer) }, nextCursor: next)
    }

    // MARK: Threads

    func queryThreads(_ q: ThreadQuery, viewer: String) throws(BackendError) -> WirePage {
        var conversationIds: [String]
        switch q.scope {
        case .user(let uid):
            guard users[uid] != nil else { throw .server(status: 404, code: "ERR_UID_NOT_FOUND", message: "no user \(uid)") }
            conversationIds = [Self.directConversationId(viewer, uid)]
        case .group(let guid):
            guard groups[guid] != nil else { throw .server(status: 404, code: "ERR_GUID_NOT_FOUND", message: "no group \(guid)") }
            guard isMember(viewer, of: guid) else {
                throw .server(status: 403, code: "ERR_GROUP_NOT_JOINED", message: "not a member of group \(guid)")
            }
            conversationIds = [Self.groupConversationId(guid)]
        case nil:
            conversationIds = visibleConversationIds(for: viewer)
        }
        var parents: [(id: Int, last: MessageKey)] = []
        for id in conversationIds {
            for parentId in conversations[id]?.threadParents ?? [] {
                let parent = messages[parentId - 1]
                if q.participatedByMe && parent.sender != viewer && !parent.replyIds.contains(where: { messages[$0 - 1].sender == viewer }) {
                    continue
                }
                guard let last = lastReplyId(of: parent) else { continue }
                parents.append((parentId, messages[last - 1].key))
            }
        }
        // Most recent reply first.
        parents.sort { $1.last < $0.last }
        let page = try Self.offsetPage(parents, limit: q.limit, cursor: q.cursor)
        return WirePage(items: page.items.map { renderThread(parentId: $0.id, for: viewer) }, nextCursor: page.next)
    }

    // MARK: Notification feed

    func queryFeed(_ q: FeedQuery, viewer: String) throws(BackendError) -> WirePage {
        let read: Bool?
        switch q.readState {
        case nil, "all": read = nil
        case "read": read = true
        case "unread": read = false
        default: throw .server(status: 400, code: "ERR_INVALID_READ_STATE", message: "readState must be read or unread")
        }
        let from = try q.dateFrom.map { (s) throws(BackendError) in try Self.epochSeconds(fromISO8601: s) }
        let to = try q.dateTo.map { (s) throws(BackendError) in try Self.epochSeconds(fromISO8601: s) }
        let tags = Set(q.tags)
        let listed = feed.filter { item in
            guard item.receiver == viewer else { return false }
            if let read, (item.readAt != 0) != read { return false }
            if let category = q.category, item.category != category { return false }
            if let categoryId = q.categoryId, item.categoryId != categoryId { return false }
            if let channelId = q.channelId, item.channelId != channelId { return false }
            if !tags.isEmpty && !item.tags.contains(where: tags.contains) { return false }
            if let from, Double(item.sentAt) < from { return false }
            if let to, Double(item.sentAt) > to { return false }
            return true
        }.sorted { ($0.sentAt, $0.sequence) > ($1.sentAt, $1.sequence) }
        let page = try Self.offsetPage(listed, limit: q.limit, cursor: q.cursor)
        return WirePage(items: page.items.map(renderFeedItem), nextCursor: page.next)
    }

    /// An ISO 8601 date-time ("2024-05-01T10:00:00Z", with or without fractional seconds) or a
    /// full date ("2024-05-01", midnight UTC).
    static func epochSeconds(fromISO8601 text: String) throws(BackendError) -> Double {
        let formatter = ISO8601DateFormatter()
        for options: ISO8601DateFormatter.Options in [[.withInternetDateTime], [.withInternetDateTime, .withFractionalSeconds], [.withFullDate]] {
            formatter.formatOptions = options
            if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        }
        throw .server(status: 400, code: "ERR_INVALID_DATE", message: "dates must be ISO 8601")
    }
}
