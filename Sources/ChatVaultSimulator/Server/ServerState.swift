import ChatVault
import Foundation

/// Everything the simulated server knows. Lives inside the simulator's mutex: every method here
/// runs with the lock held, so none of them may call back into the simulator.
struct ServerState {
    var users: [String: SimulatedUser] = [:]
    var groups: [String: StoredGroup] = [:]
    /// `blocker → blocked`.
    var blocks: Set<Pair> = []
    /// Declared friendships, stored with the smaller uid first.
    var friendships: Set<Pair> = []

    /// Every message, at index `id - 1`: ids are dense and start at 1.
    var messages: [StoredMessage] = []
    var conversations: [String: StoredConversation] = [:]
    /// Direct conversation ids per uid (group conversations follow membership).
    var directConversations: [String: Set<String>] = [:]
    /// Per user and conversation: tags, pin, deletion.
    var userConversations: [UserConversation: UserConversationState] = [:]
    /// Read and delivery receipts, per reader and conversation, in increasing `upTo` order.
    var reads: [UserConversation: [ReceiptMark]] = [:]
    var deliveries: [UserConversation: [ReceiptMark]] = [:]
    /// `send` idempotency: (sender, localMessageId) → message id.
    var sentByLocalId: [Pair: Int] = [:]
    var reactionSequence = 0

    var feed: [StoredFeedItem] = []

    var media: [String: StoredMedia] = [:]
    /// A re-signed URL → the URL it stands for, and when the signature runs out.
    var resignedURLs: [String: (original: String, expiresAt: Double)] = [:]
    var resignSequence = 0
    var signedURLLifetime: Double = 3600
    /// How each media URL is served (`ChatVaultSimulator.setMediaBehaviour`), and what was served,
    /// both keyed by the registered URL (a re-signed URL counts for the one it stands for).
    var mediaBehaviours: [String: SimulatedMediaBehaviour] = [:]
    var mediaServed: [String: MediaServedCounts] = [:]
    /// Files devices uploaded, in order; the largest upload accepted.
    var uploads: [SimulatedUpload] = []
    var maxUploadBytes = 100 * 1024 * 1024

    var log: [LogEntry] = []
    var logIsSorted = true
    /// Sync tokens for a point before this time answer 410 (`expireChangeTokens(before:)`).
    var changeTokenFloor: Int64 = 0

    /// Connected realtime clients, by client id.
    var connections: [Int: Connection] = [:]
    var nextClientId = 1
}

/// Two strings: a block (blocker, blocked), a friendship, an idempotency key.
struct Pair: Hashable {
    let first: String
    let second: String

    init(_ first: String, _ second: String) {
        self.first = first
        self.second = second
    }

    static func unordered(_ a: String, _ b: String) -> Pair {
        a <= b ? Pair(a, b) : Pair(b, a)
    }
}

struct UserConversation: Hashable {
    let uid: String
    let conversationId: String
}

struct UserConversationState {
    var tags: [String] = []
    var pinnedAt = 0
    var pinnedBy: String?
    /// Deleted for this user up to this message id: listed again only once a newer message arrives.
    var hiddenUpTo = 0
}

/// "Read (or delivered) up to message `upTo` at time `at`".
struct ReceiptMark {
    let upTo: Int
    let at: Int
}

struct StoredMember {
    var scope: GroupMemberScopeType
    var joinedAt: Int
}

struct StoredGroup {
    var info: SimulatedGroup
    var createdAt: Int
    var updatedAt: Int
    var members: [String: StoredMember] = [:]
    var banned: [String: StoredMember] = [:]
}

struct StoredConversation {
    enum Kind: Equatable {
        case direct(String, String)
        case group(String)
    }

    let id: String
    let kind: Kind
    /// Message ids in (sentAt, id) order; replies included.
    var messageIds: [Int] = []
    /// Thread parents of this conversation, in the order they got their first reply.
    var threadParents: [Int] = []

    var receiverType: ReceiverType {
        if case .group = kind { return .group }
        return .user
    }

    func includes(_ uid: String) -> Bool {
        if case .direct(let a, let b) = kind { return uid == a || uid == b }
        return false
    }
}

struct StoredReaction {
    let sequence: Int
    let uid: String
    let reaction: String
    let reactedAt: Int
}

struct StoredInteraction {
    let elementId: String
    let uid: String
    let at: Int
}

struct StoredMessage {
    let id: Int
    var muid: String?
    let conversationId: String
    let sender: String
    let receiver: String
    let receiverType: ReceiverType
    var content: MessageContent
    var sentAt: Int
    var updatedAt: Int
    /// How many times the message changed after it was sent (edits, deletion, reactions, pins…).
    var revision = 0
    var editedAt = 0
    var editedBy: String?
    var deletedAt = 0
    var deletedBy: String?
    var parentId = 0
    var replyIds: [Int] = []
    var tags: [String] = []
    var mentions: [String] = []
    var metadata: JSONValue?
    var reactions: [StoredReaction] = []
    var pinnedAt = 0
    var pinnedBy: String?
    /// Saved (bookmarked) per user: uid → savedAt.
    var saves: [String: Int] = [:]
    var quotedMessageId = 0
    var localMessageId: String?
    var interactions: [StoredInteraction] = []

    var key: MessageKey { MessageKey(sentAt: sentAt, id: id) }
}

/// The order of messages: (sentAt, id).
struct MessageKey: Comparable {
    let sentAt: Int
    let id: Int

    static func < (lhs: MessageKey, rhs: MessageKey) -> Bool {
        (lhs.sentAt, lhs.id) < (rhs.sentAt, rhs.id)
    }
}

struct StoredFeedItem {
    let sequence: Int
    let id: String
    let receiver: String
    var category: String
    var categoryId: String
    var channelId: String?
    var content: JSONValue
    var sentAt: Int
    var deliveredAt = 0
    var readAt = 0
    var metadata: JSONValue?
    var tags: [String]
    var sender: String?
}

struct StoredMedia {
    let bytes: Data
    let mimeType: String?
    /// Epoch seconds after which the URL answers 403; nil = never.
    var expiresAt: Double?
}

struct LogEntry {
    enum Change {
        /// A message's current state; `onlyFor` limits it to one user (a save is private).
        case upserted(messageId: Int, onlyFor: String?)
        case deleted(messageId: Int)
        case conversationRemoved(conversationId: String, for: String)
    }

    let sequence: Int
    let time: Int
    let change: Change
}

struct Connection {
    let uid: String
    let continuation: AsyncStream<RealtimeEvent>.Continuation
}

extension ServerState {
    // MARK: Ids

    static func directConversationId(_ a: String, _ b: String) -> String {
        ConversationID.direct(a, b).rawValue
    }

    static func groupConversationId(_ guid: String) -> String {
        ConversationID.group(guid).rawValue
    }

    // MARK: Lookups

    func message(_ id: Int) -> StoredMessage? {
        id >= 1 && id <= messages.count ? messages[id - 1] : nil
    }

    func isMember(_ uid: String, of guid: String) -> Bool {
        groups[guid]?.members[uid] != nil
    }

    func hasBlocked(_ blocker: String, _ blocked: String) -> Bool {
        blocks.contains(Pair(blocker, blocked))
    }

    /// Whether `viewer` may read the conversation: a party of a direct one, a member of a group.
    func canSee(conversation: StoredConversation, viewer: String) -> Bool {
        switch conversation.kind {
        case .direct(let a, let b): return viewer == a || viewer == b
        case .group(let guid): return isMember(viewer, of: guid)
        }
    }

    func canSee(message: StoredMessage, viewer: String) -> Bool {
        guard let conversation = conversations[message.conversationId] else { return false }
        return canSee(conversation: conversation, viewer: viewer)
    }

    /// The conversations `viewer` can read, sorted by id (a stable order to start from).
    func visibleConversationIds(for viewer: String) -> [String] {
        var ids = Array(directConversations[viewer] ?? [])
        for (guid, group) in groups where group.members[viewer] != nil {
            let id = Self.groupConversationId(guid)
            if conversations[id] != nil { ids.append(id) }
        }
        return ids.sorted()
    }

    /// The other members of a conversation, for receipts: the other party, or the group's members.
    func otherParticipants(of conversation: StoredConversation, than uid: String) -> [String] {
        switch conversation.kind {
        case .direct(let a, let b): return [a == uid ? b : a]
        case .group(let guid): return (groups[guid]?.members.keys).map { $0.filter { $0 != uid }.sorted() } ?? []
        }
    }

    /// Every user who should hear about a conversation's messages in realtime.
    func participants(of conversation: StoredConversation) -> [String] {
        switch conversation.kind {
        case .direct(let a, let b): return a == b ? [a] : [a, b]
        case .group(let guid): return (groups[guid]?.members.keys).map { Array($0).sorted() } ?? []
        }
    }

    // MARK: Receipts

    /// When `uid` read (or got) message `id` of the conversation: the first mark that covers it; 0 if none.
    static func receiptTime(_ marks: [ReceiptMark]?, messageId id: Int) -> Int {
        guard let marks, let last = marks.last, last.upTo >= id else { return 0 }
        var low = 0, high = marks.count - 1
        while low < high {
            let mid = (low + high) / 2
            if marks[mid].upTo >= id { high = mid } else { low = mid + 1 }
        }
        return marks[low].at
    }

    func readTime(of id: Int, in conversationId: String, by uid: String) -> Int {
        Self.receiptTime(reads[UserConversation(uid: uid, conversationId: conversationId)], messageId: id)
    }

    /// Delivery time: delivered explicitly, or read (reading implies delivery), whichever came first.
    func deliveryTime(of id: Int, in conversationId: String, by uid: String) -> Int {
        let key = UserConversation(uid: uid, conversationId: conversationId)
        let delivered = Self.receiptTime(deliveries[key], messageId: id)
        let read = Self.receiptTime(reads[key], messageId: id)
        if delivered == 0 { return read }
        if read == 0 { return delivered }
        return min(delivered, read)
    }

    func lastReadMessageId(in conversationId: String, by uid: String) -> Int {
        reads[UserConversation(uid: uid, conversationId: conversationId)]?.last?.upTo ?? 0
    }

    /// Unread for `viewer`: someone else's message that `viewer` has not read.
    func isUnread(_ message: StoredMessage, by viewer: String) -> Bool {
        message.sender != viewer && readTime(of: message.id, in: message.conversationId, by: viewer) == 0
    }

    // MARK: Conversation summaries

    /// The message a conversation list shows: the newest top-level message that updates the
    /// conversation (custom messages with `updateConversation: false` do not).
    func lastMessageId(of conversation: StoredConversation) -> Int? {
        for id in conversation.messageIds.reversed() {
            let message = messages[id - 1]
            if message.parentId == 0 && message.content.updatesConversation { return id }
        }
        return nil
    }

    /// Unread top-level, not deleted messages from others, after the viewer's read pointer; and
    /// how many of them mention the viewer.
    func unreadCounts(of conversation: StoredConversation, for viewer: String) -> (messages: Int, mentions: Int) {
        let readUpTo = lastReadMessageId(in: conversation.id, by: viewer)
        var unread = 0, mentions = 0
        for id in conversation.messageIds.reversed() where id > readUpTo {
            let message = messages[id - 1]
            guard message.parentId == 0, message.deletedAt == 0, message.sender != viewer else { continue }
            unread += 1
            if message.mentions.contains(viewer) { mentions += 1 }
        }
        return (unread, mentions)
    }

    // MARK: Change log

    mutating func record(_ change: LogEntry.Change, at time: Int) {
        if let last = log.last, last.time > time { logIsSorted = false }
        log.append(LogEntry(sequence: log.count, time: time, change: change))
    }

    mutating func sortLogIfNeeded() {
        guard !logIsSorted else { return }
        log.sort { ($0.time, $0.sequence) < ($1.time, $1.sequence) }
        logIsSorted = true
    }
}
