public import CChatVault
import ChatVault
import Foundation

/// A paged, two-phase read as C holds it (`cv_request`): the Swift request that keeps its own
/// position, and the vault it reads through (a request whose vault was freed is refused).
final class RequestBox: Sendable {
    enum Read: Sendable {
        case messages(MessagesRequest)
        case conversations(ConversationRequest)
        case threads(ThreadsRequest)
        case users(UsersRequest)
        case groups(GroupsRequest)
        case members(GroupMembersRequest)
    }

    let read: Read
    let owner: VaultBox
    /// The vault's handle, as a number: looked up again at each fetch.
    private let vaultKey: UInt

    init(read: Read, owner: VaultBox, vault: OpaquePointer) {
        self.read = read
        self.owner = owner
        vaultKey = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(vault)))
    }

    /// The vault, while it has not been freed.
    var liveOwner: VaultBox? {
        vaults.get(OpaquePointer(bitPattern: vaultKey)) === owner ? owner : nil
    }
}

let requests = HandleTable<RequestBox>(tag: 0x5c)

/// Each kind's query keys (chatvault.h documents them), read into the Swift builders.
enum CQueries {
    static let messageKeys: Set<String> = [
        "uid", "guid", "limit", "timestamp", "messageId", "parentMessageId", "unread", "hideReplies", "hideDeleted",
        "hideMessagesFromBlockedUsers", "categories", "types", "searchKeyword", "updatedAfter", "updatesOnly", "withParent",
        "tags", "withTags",
    ]
    static let conversationKeys: Set<String> = [
        "limit", "conversationType", "tags", "withTags", "userTags", "groupTags", "withUserAndGroupTags", "includeBlockedUsers",
        "withBlockedInfo", "searchKeyword", "unread",
    ]
    static let threadKeys: Set<String> = ["uid", "guid", "limit", "participatedByMe"]
    static let userKeys: Set<String> = [
        "limit", "searchKeyword", "searchIn", "status", "hideBlockedUsers", "roles", "friendsOnly", "tags", "withTags", "uids",
        "sortBy", "sortOrder",
    ]
    static let groupKeys: Set<String> = ["limit", "searchKeyword", "joinedOnly", "tags", "withTags"]
    static let memberKeys: Set<String> = ["guid", "limit", "searchKeyword", "scopes", "status"]

    typealias Refused = JSONFields.Refused

    static func build(_ kind: cv_request_kind, _ text: String, _ vault: OfflineVault) throws(Refused) -> RequestBox.Read {
        switch kind.rawValue {
        case CV_REQUEST_MESSAGES.rawValue: return .messages(try messages(JSONFields(text, allowed: messageKeys, what: "the query"), vault))
        case CV_REQUEST_CONVERSATIONS.rawValue:
            return .conversations(try conversations(JSONFields(text, allowed: conversationKeys, what: "the query"), vault))
        case CV_REQUEST_THREADS.rawValue: return .threads(try threads(JSONFields(text, allowed: threadKeys, what: "the query"), vault))
        case CV_REQUEST_USERS.rawValue: return .users(try users(JSONFields(text, allowed: userKeys, what: "the query"), vault))
        case CV_REQUEST_GROUPS.rawValue: return .groups(try groups(JSONFields(text, allowed: groupKeys, what: "the query"), vault))
        case CV_REQUEST_GROUP_MEMBERS.rawValue: return .members(try members(JSONFields(text, allowed: memberKeys, what: "the query"), vault))
        default: throw Refused(message: "kind is not a cv_request_kind")
        }
    }

    /// "uid" or "guid" (not both).
    private static func party(_ q: JSONFields) throws(Refused) -> (uid: String?, guid: String?) {
        let uid = try q.string("uid"), guid = try q.string("guid")
        if uid != nil && guid != nil { throw Refused(message: "uid and guid exclude each other") }
        if uid?.isEmpty == true || guid?.isEmpty == true { throw Refused(message: "uid or guid must not be empty") }
        return (uid, guid)
    }

    static func messages(_ q: JSONFields, _ vault: OfflineVault) throws(Refused) -> MessagesRequest {
        let b = MessagesRequest.MessageRequestBuilder(vault: vault)
        let (uid, guid) = try party(q)
        if let uid { b.set(uid: uid) }
        if let guid { b.set(guid: guid) }
        if let v = try q.int("limit", in: 1...100) { b.set(limit: v) }
        if let v = try q.int("timestamp", in: 0...Int64(Int32.max) * 1000) { b.set(timeStamp: v) }
        if let v = try q.int("messageId", in: 0...Int64.max) { b.set(messageID: v) }
        if let v = try q.int("parentMessageId", in: 0...Int64.max) { b.setParentMessageId(parentMessageId: v) }
        if let v = try q.bool("unread") { b.set(unread: v) }
        if let v = try q.bool("hideReplies") { b.hideReplies(hide: v) }
        if let v = try q.bool("hideDeleted") { b.hideDeletedMessages(hide: v) }
        if let v = try q.bool("hideMessagesFromBlockedUsers") { b.hideMessagesFromBlockedUsers(v) }
        if let v = try q.strings("categories") { b.set(categories: v) }
        if let v = try q.strings("types") { b.set(types: v) }
        if let v = try q.string("searchKeyword") { b.set(searchKeyword: v) }
        if let v = try q.int("updatedAfter", in: 0...Int64(Int32.max) * 1000) { b.setUpdatedAfter(timeStamp: v) }
        if let v = try q.bool("updatesOnly") { b.updatesOnly(onlyUpdates: v) }
        if let v = try q.bool("withParent") { b.set(withParent: v) }
        if let v = try q.strings("tags") { b.setTags(v) }
        if let v = try q.bool("withTags") { b.withTags(v) }
        return b.build()
    }

    static func conversations(_ q: JSONFields, _ vault: OfflineVault) throws(Refused) -> ConversationRequest {
        let b = ConversationRequest.ConversationRequestBuilder(limit: try q.int("limit", in: 1...50) ?? 30, vault: vault)
        if let v = try q.choice("conversationType", ConversationType.self) { b.setConversationType(conversationType: v) }
        if let v = try q.strings("tags") { b.setTags(v) }
        if let v = try q.bool("withTags") { b.withTags(v) }
        if let v = try q.strings("userTags") { b.setUserTags(v) }
        if let v = try q.strings("groupTags") { b.setGroupTags(v) }
        if let v = try q.bool("withUserAndGroupTags") { b.withUserAndGroupTags(v) }
        if let v = try q.bool("includeBlockedUsers") { b.includeBlockedUsers(v) }
        if let v = try q.bool("withBlockedInfo") { b.withBlockedInfo(v) }
        if let v = try q.string("searchKeyword") { b.setSearchKeyword(v) }
        if let v = try q.bool("unread") { b.setUnread(v) }
        return b.build()
    }

    static func threads(_ q: JSONFields, _ vault: OfflineVault) throws(Refused) -> ThreadsRequest {
        let b = ThreadsRequest.ThreadsRequestBuilder(vault: vault)
        let (uid, guid) = try party(q)
        if let uid { b.set(uid: uid) }
        if let guid { b.set(guid: guid) }
        if let v = try q.int("limit", in: 1...Int64(ThreadsRequest.maxLimit)) { b.set(limit: v) }
        if let v = try q.bool("participatedByMe") { b.set(participatedByMe: v) }
        return b.build()
    }

    static func users(_ q: JSONFields, _ vault: OfflineVault) throws(Refused) -> UsersRequest {
        let b = UsersRequest.UsersRequestBuilder(limit: try q.int("limit", in: 1...100) ?? 30, vault: vault)
        if let v = try q.string("searchKeyword") { b.set(searchKeyword: v) }
        if let v = try q.strings("searchIn") { b.searchIn(v) }
        if let v = try q.choice("status", UserStatus.self) { b.set(status: v) }
        if let v = try q.bool("hideBlockedUsers") { b.hideBlockedUsers(v) }
        if let v = try q.strings("roles") { b.set(roles: v) }
        if let v = try q.bool("friendsOnly") { b.friendsOnly(v) }
        if let v = try q.strings("tags") { b.set(tags: v) }
        if let v = try q.bool("withTags") { b.withTags(v) }
        if let v = try q.strings("uids") { b.set(UIDs: v) }
        if let v = try q.string("sortBy") { b.sortBy(v) }
        if let v = try q.choice("sortOrder", SortOrder.self) { b.sortOrder(v) }
        return b.build()
    }

    static func groups(_ q: JSONFields, _ vault: OfflineVault) throws(Refused) -> GroupsRequest {
        let b = GroupsRequest.GroupsRequestBuilder(limit: try q.int("limit", in: 1...100) ?? 30, vault: vault)
        if let v = try q.string("searchKeyword") { b.set(searchKeyword: v) }
        if let v = try q.bool("joinedOnly") { b.set(joinedOnly: v) }
        if let v = try q.strings("tags") { b.set(tags: v) }
        if let v = try q.bool("withTags") { b.withTags(v) }
        return b.build()
    }

    static func members(_ q: JSONFields, _ vault: OfflineVault) throws(Refused) -> GroupMembersRequest {
        guard let guid = try q.string("guid"), !guid.isEmpty else { throw Refused(message: "a member list needs its group's guid") }
        let b = GroupMembersRequest.GroupMembersRequestBuilder(guid: guid, vault: vault)
        if let v = try q.int("limit", in: 1...100) { b.set(limit: v) }
        if let v = try q.string("searchKeyword") { b.set(searchKeyword: v) }
        if let v = try q.strings("scopes") { b.set(scopes: v) }
        if let v = try q.choice("status", UserStatus.self) { b.set(status: v) }
        return b.build()
    }
}

@c(cv_request_new)
public func cvRequestNew(_ vault: OpaquePointer?, _ kind: cv_request_kind, _ queryJSON: UnsafePointer<CChar>?,
                         _ out: ErrorOut) -> OpaquePointer? {
    guard let vault, let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard let query = text(queryJSON) else { CError.invalid(out, "the query must be a UTF-8 JSON string"); return nil }
    do {
        let read = try CQueries.build(kind, query, box.vault)
        return requests.insert(RequestBox(read: read, owner: box, vault: vault))
    } catch {
        CError.invalid(out, error.message)
        return nil
    }
}

@c(cv_request_free)
public func cvRequestFree(_ request: OpaquePointer?) {
    _ = requests.remove(request)
}

/// One page in either direction, both phases, as the JSON the header documents.
private func fetch(_ request: OpaquePointer?, previous: Bool, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = requests.get(request) else { CError.invalid(out, "not a request handle"); return nil }
    guard let owner = box.liveOwner else { CError.invalid(out, "the request's vault was freed"); return nil }
    if previous, case .messages = box.read {} else if previous {
        CError.invalid(out, "only a message request pages backwards")
        return nil
    }
    let read = box.read
    let json = waitDispatching(owner.dispatcher) { () async -> JSONText in
        switch read {
        case .messages(let r):
            let page = previous ? await r.fetchPrevious() : await r.fetchNext()
            return CModels.phases(cached: page.cached, server: page.server, CModels.message)
        case .conversations(let r):
            let page = await r.fetchNext()
            return CModels.phases(cached: page.cached, server: page.server, CModels.conversation)
        case .threads(let r):
            let page = await r.fetchNext()
            return CModels.phases(cached: page.cached, server: page.server, CModels.thread)
        case .users(let r):
            let page = await r.fetchNext()
            return CModels.phases(cached: page.cached, server: page.server, CModels.user)
        case .groups(let r):
            let page = await r.fetchNext()
            return CModels.phases(cached: page.cached, server: page.server, CModels.group)
        case .members(let r):
            let page = await r.fetchNext()
            return CModels.phases(cached: page.cached, server: page.server, CModels.user)
        }
    }
    return owned(json)
}

@c(cv_request_fetch_next_sync)
public func cvRequestFetchNextSync(_ request: OpaquePointer?, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    fetch(request, previous: false, out)
}

@c(cv_request_fetch_previous_sync)
public func cvRequestFetchPreviousSync(_ request: OpaquePointer?, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    fetch(request, previous: true, out)
}

@c(cv_vault_get_message_sync)
public func cvVaultGetMessageSync(_ vault: OpaquePointer?, _ messageId: Int64, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard messageId > 0 else { CError.invalid(out, "message_id must be a server id (> 0)"); return nil }
    let engine = box.vault
    let json = waitDispatching(box.dispatcher) { () async -> JSONText in
        let (cached, server) = await engine.getMessageDetails(Int(messageId))
        return CModels.lookup(cached: cached, server: server, CModels.message)
    }
    return owned(json)
}

@c(cv_vault_get_conversation_sync)
public func cvVaultGetConversationSync(_ vault: OpaquePointer?, _ type: cv_receiver_type, _ with: UnsafePointer<CChar>?,
                                       _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard let with = text(with), !with.isEmpty else { CError.invalid(out, "with must be a UTF-8 string"); return nil }
    guard let receiverType = CEnums.receiverType(type) else { CError.invalid(out, "type is not a cv_receiver_type"); return nil }
    let engine = box.vault
    let conversationType: ConversationType = receiverType == .group ? .group : .user
    let json = waitDispatching(box.dispatcher) { () async -> JSONText in
        let (cached, server) = await engine.getConversation(conversationWith: with, conversationType: conversationType)
        return CModels.lookup(cached: cached, server: server, CModels.conversation)
    }
    return owned(json)
}
