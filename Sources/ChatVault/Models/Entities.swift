/// A user, group, conversation or message: what `Conversation.conversationWith` and
/// `BaseMessage.receiver` hold.
///
/// Model objects are handed out fresh for every callback: treat them as snapshots. They are
/// `Sendable` so they can cross to the app's executor; do not mutate one from two threads at once.
public protocol AppEntity: AnyObject, Sendable {}

/// A user (`User`).
public class User: AppEntity, @unchecked Sendable, CustomStringConvertible {
    public internal(set) var uid: String
    public var name: String?
    public var avatar: String?
    public var link: String?
    public var role: String?
    public var statusMessage: String?
    public var metadata: JSONValue?
    public internal(set) var status: UserStatus = .offline
    public internal(set) var lastActiveAt: Double = 0
    public internal(set) var deactivatedAt: Double = 0
    public internal(set) var hasBlockedMe = false
    public internal(set) var blockedByMe = false
    public var tags: [String] = []
    public internal(set) var isAgentic = false

    public init(uid: String, name: String?) {
        self.uid = uid
        self.name = name
    }

    public var description: String { "User(\(uid))" }
}

/// A group (`Group`).
public class Group: AppEntity, @unchecked Sendable, CustomStringConvertible {
    public internal(set) var guid: String
    public var name: String?
    public var icon: String?
    public var groupDescription: String?
    public internal(set) var owner: String?
    public var groupType: GroupType
    public var password: String?
    public var metadata: JSONValue?
    public internal(set) var createdAt = 0
    public internal(set) var updatedAt = 0
    public internal(set) var joinedAt = 0
    public internal(set) var scope: GroupMemberScopeType = .participant
    public internal(set) var hasJoined = false
    public internal(set) var membersCount = 0
    public var tags: [String] = []

    public init(guid: String, name: String?, groupType: GroupType, password: String?) {
        self.guid = guid
        self.name = name
        self.groupType = groupType
        self.password = password
    }

    public var description: String { "Group(\(guid))" }
}

/// A member of a group (`GroupMember`), a `User` with a scope.
public class GroupMember: User, @unchecked Sendable {
    public internal(set) var scope: GroupMemberScopeType
    public internal(set) var joinedAt = 0
    /// The group this membership belongs to.
    public internal(set) var guid: String = ""

    public init(UID: String, groupMemberScope: GroupMemberScopeType) {
        scope = groupMemberScope
        super.init(uid: UID, name: nil)
    }

    public override var description: String { "GroupMember(\(uid) in \(guid))" }
}

/// A file attached to a media message (`Attachment`).
public final class Attachment: @unchecked Sendable, CustomStringConvertible {
    public let fileName: String
    public let fileExtension: String
    public internal(set) var fileSize: Double = 0
    public let fileMimeType: String
    public let fileUrl: String
    /// Absolute path of the cached bytes, or nil when not cached. Never sent to the server.
    public internal(set) var localPath: String?

    public init(fileName: String, fileExtension: String, fileMimeType: String, fileUrl: String) {
        self.fileName = fileName
        self.fileExtension = fileExtension
        self.fileMimeType = fileMimeType
        self.fileUrl = fileUrl
    }

    public var description: String { "Attachment(\(fileMimeType), \(Int64(clampingWire: fileSize)) bytes)" }
}

/// One reaction emoji's count on a message (`ReactionCount`).
public struct ReactionCount: Sendable, Hashable {
    public let reaction: String
    public let count: Int
    public let reactedByMe: Bool

    public init(reaction: String, count: Int, reactedByMe: Bool) {
        self.reaction = reaction
        self.count = count
        self.reactedByMe = reactedByMe
    }
}

/// One user's reaction to a message (`Reaction`).
public final class Reaction: @unchecked Sendable, CustomStringConvertible {
    public let id: String
    public let messageId: Int
    public let reaction: String
    public let uid: String
    public let reactedAt: Double
    public let reactedBy: User?

    init(id: String, messageId: Int, reaction: String, uid: String, reactedAt: Double, reactedBy: User?) {
        self.id = id
        self.messageId = messageId
        self.reaction = reaction
        self.uid = uid
        self.reactedAt = reactedAt
        self.reactedBy = reactedBy
    }

    public var description: String { "Reaction(\(id) on \(messageId))" }
}

/// A conversation (`Conversation`): with a user or a group, its last message and counts.
public final class Conversation: AppEntity, @unchecked Sendable, CustomStringConvertible {
    public internal(set) var conversationId: String?
    public internal(set) var conversationType: ConversationType
    public internal(set) var lastMessage: BaseMessage?
    public internal(set) var conversationWith: (any AppEntity)?
    public internal(set) var unreadMessageCount = 0
    public internal(set) var unreadMentionsCount = 0
    public internal(set) var updatedAt: Double = 0
    public internal(set) var tags: [String]?
    public var lastReadMessageId = 0
    /// When it was pinned (0 = not pinned).
    public internal(set) var pinnedAt: Double = 0
    /// Who pinned it (`"app_system"` or a uid; empty when not pinned).
    public internal(set) var pinnedBy = ""

    init(conversationId: String?, conversationType: ConversationType) {
        self.conversationId = conversationId
        self.conversationType = conversationType
    }

    public var description: String { "Conversation(\(conversationId ?? "?"))" }
}

/// A thread: a parent message and its replies' summary (`MessageThread`).
public final class MessageThread: @unchecked Sendable, CustomStringConvertible {
    public let parentMessageId: Int
    public let parentMessage: BaseMessage
    public let replyCount: Int
    public let lastReply: BaseMessage?
    public let conversationId: String
    public let receiverType: ReceiverType
    public let receiverUid: String
    public let isSubscribed: Bool
    public let unreadReplyCount: Int?
    /// The pagination cursor.
    public let updatedAt: Double

    init(parentMessage: BaseMessage, replyCount: Int, lastReply: BaseMessage?, isSubscribed: Bool,
         unreadReplyCount: Int?, updatedAt: Double) {
        parentMessageId = parentMessage.id
        self.parentMessage = parentMessage
        self.replyCount = replyCount
        self.lastReply = lastReply
        conversationId = parentMessage.conversationId
        receiverType = parentMessage.receiverType
        receiverUid = parentMessage.receiverUid
        self.isSubscribed = isSubscribed
        self.unreadReplyCount = unreadReplyCount
        self.updatedAt = updatedAt
    }

    public var description: String { "MessageThread(\(parentMessageId))" }
}

/// An item of the notification feed (`NotificationFeedItem`).
public final class NotificationFeedItem: @unchecked Sendable, CustomStringConvertible {
    public let id: String
    public let category: String
    public let categoryId: String
    public let content: JSONValue
    public let readAt: Double
    public let deliveredAt: Double
    public let sentAt: Double
    public let metadata: JSONValue?
    public let tags: [String]
    public let sender: String
    public let receiver: String
    public let receiverType: String
    public var isRead: Bool { readAt > 0 }

    init(id: String, category: String, categoryId: String, content: JSONValue, readAt: Double, deliveredAt: Double,
         sentAt: Double, metadata: JSONValue?, tags: [String], sender: String, receiver: String, receiverType: String) {
        self.id = id
        self.category = category
        self.categoryId = categoryId
        self.content = content
        self.readAt = readAt
        self.deliveredAt = deliveredAt
        self.sentAt = sentAt
        self.metadata = metadata
        self.tags = tags
        self.sender = sender
        self.receiver = receiver
        self.receiverType = receiverType
    }

    public var description: String { "NotificationFeedItem(\(id))" }
}
