/// A user, group, conversation or message: what `Conversation.conversationWith` and
/// `BaseMessage.receiver` hold.
///
/// Model objects are handed out fresh for every callback: treat them as snapshots. They are
/// `Sendable` so they can cross to the app's executor; do not mutate one from two threads at once.
public protocol AppEntity: AnyObject, Sendable {}

/// A user (`User`).
public class User: AppEntity, @unchecked Sendable, CustomStringConvertible {
    /// The user's unique id (`uid`), the key of every read and send that names a user.
    public internal(set) var uid: String
    /// The display name; nil when the server sent none.
    public var name: String?
    /// The avatar image's URL; nil when the user has none.
    public var avatar: String?
    /// A URL of the user's profile page; nil when none.
    public var link: String?
    /// The user's role (a role id the app defines, filtered by `UsersRequest`'s `set(roles:)`); nil
    /// when the user has none.
    public var role: String?
    /// The user's own status text; nil when none.
    public var statusMessage: String?
    /// The app's free-form JSON about the user; nil when none.
    public var metadata: JSONValue?
    /// Presence: `.online`, `.offline` (also when the server did not say) or `.available`.
    public internal(set) var status: UserStatus = .offline
    /// When the user was last active, server epoch seconds; 0 when unknown.
    public internal(set) var lastActiveAt: Double = 0
    /// When the account was deactivated, server epoch seconds; 0 for an active user.
    public internal(set) var deactivatedAt: Double = 0
    /// Whether this user blocked the logged-in user.
    public internal(set) var hasBlockedMe = false
    /// Whether the logged-in user blocked this user.
    public internal(set) var blockedByMe = false
    /// The tags the app gave the user; empty when none.
    public var tags: [String] = []
    /// Whether the user is an AI agent (`ConversationRequest`'s `hideAgentic` / `onlyAgentic`).
    public internal(set) var isAgentic = false

    /// A user with this uid and display name; every other field at its default.
    public init(uid: String, name: String?) {
        self.uid = uid
        self.name = name
    }

    /// `User(<uid>)`: the uid only, never the name or other profile fields (safe for logs).
    public var description: String { "User(\(uid))" }
}

/// A group (`Group`).
public class Group: AppEntity, @unchecked Sendable, CustomStringConvertible {
    /// The group's unique id (`guid`).
    public internal(set) var guid: String
    /// The group's name; nil when the server sent none.
    public var name: String?
    /// The group's icon URL; nil when none.
    public var icon: String?
    /// The group's description (the SDK's `description`, renamed: `description` is the log text
    /// here); nil when none.
    public var groupDescription: String?
    /// The uid of the group's owner; nil when the server did not say.
    public internal(set) var owner: String?
    /// `.public`, `.private` or `.password` (`.public` when the server did not say).
    public var groupType: GroupType
    /// The password to join a `.password` group, as the app sets it; the server never sends it, so
    /// a read group has nil.
    public var password: String?
    /// The app's free-form JSON about the group; nil when none.
    public var metadata: JSONValue?
    /// When the group was created, server epoch seconds; 0 when unknown.
    public internal(set) var createdAt = 0
    /// When the group was last changed, server epoch seconds; 0 when unknown.
    public internal(set) var updatedAt = 0
    /// When the logged-in user joined, server epoch seconds; 0 when not a member.
    public internal(set) var joinedAt = 0
    /// The logged-in user's scope in the group (`.participant` when not a member or not said).
    public internal(set) var scope: GroupMemberScopeType = .participant
    /// Whether the logged-in user is a member.
    public internal(set) var hasJoined = false
    /// How many members the group has; 0 when the server did not say.
    public internal(set) var membersCount = 0
    /// The tags the app gave the group; empty when none.
    public var tags: [String] = []

    /// A group with this guid, name, type and (for a `.password` group) password; every other field
    /// at its default.
    public init(guid: String, name: String?, groupType: GroupType, password: String?) {
        self.guid = guid
        self.name = name
        self.groupType = groupType
        self.password = password
    }

    /// `Group(<guid>)`: the guid only, never the name (safe for logs).
    public var description: String { "Group(\(guid))" }
}

/// A member of a group (`GroupMember`), a `User` with a scope.
public class GroupMember: User, @unchecked Sendable {
    /// The member's scope in the group: `.admin`, `.moderator` or `.participant`.
    public internal(set) var scope: GroupMemberScopeType
    /// When the member joined the group, server epoch seconds; 0 when unknown.
    public internal(set) var joinedAt = 0
    /// The group this membership belongs to.
    public internal(set) var guid: String = ""

    /// A member with this uid and scope (the SDK's initializer); the name and the rest at their
    /// defaults.
    public init(UID: String, groupMemberScope: GroupMemberScopeType) {
        scope = groupMemberScope
        super.init(uid: UID, name: nil)
    }

    /// `GroupMember(<uid> in <guid>)`: ids only (safe for logs).
    public override var description: String { "GroupMember(\(uid) in \(guid))" }
}

/// A file attached to a media message (`Attachment`).
public final class Attachment: @unchecked Sendable, CustomStringConvertible {
    /// The file's name as uploaded; empty when the server sent none.
    public let fileName: String
    /// The file's extension (e.g. `"jpg"`); empty when the server sent none.
    public let fileExtension: String
    /// The file's size in bytes; 0 when the server did not say.
    public internal(set) var fileSize: Double = 0
    /// The file's MIME type (`"application/octet-stream"` when the server sent none).
    public let fileMimeType: String
    /// Where the bytes are on the server (a presigned URL that may expire, or an `mxc://` URI on
    /// Matrix); `downloadMedia` and the media cache key on it without its query or fragment.
    public let fileUrl: String
    /// Absolute path of the cached bytes, or nil when not cached. Never sent to the server.
    public internal(set) var localPath: String?

    /// An attachment with these fields (size 0, not cached).
    public init(fileName: String, fileExtension: String, fileMimeType: String, fileUrl: String) {
        self.fileName = fileName
        self.fileExtension = fileExtension
        self.fileMimeType = fileMimeType
        self.fileUrl = fileUrl
    }

    /// `Attachment(<MIME type>, <size> bytes)`: never the name or the URL (safe for logs).
    public var description: String { "Attachment(\(fileMimeType), \(Int64(clampingWire: fileSize)) bytes)" }
}

/// One reaction emoji's count on a message (`ReactionCount`).
public struct ReactionCount: Sendable, Hashable {
    /// The reaction (an emoji).
    public let reaction: String
    /// How many users reacted with it.
    public let count: Int
    /// Whether the logged-in user is one of them.
    public let reactedByMe: Bool

    /// A count of one reaction on a message.
    public init(reaction: String, count: Int, reactedByMe: Bool) {
        self.reaction = reaction
        self.count = count
        self.reactedByMe = reactedByMe
    }
}

/// One user's reaction to a message (`Reaction`).
public final class Reaction: @unchecked Sendable, CustomStringConvertible {
    /// The server's id of this reaction (a number sent by the server is kept as its decimal
    /// string).
    public let id: String
    /// The server id of the message reacted to.
    public let messageId: Int
    /// The reaction (an emoji).
    public let reaction: String
    /// The uid of the user who reacted.
    public let uid: String
    /// When the user reacted, server epoch seconds; 0 when the server did not say.
    public let reactedAt: Double
    /// The user who reacted, when the server sent their profile; nil otherwise (`uid` still names
    /// them).
    public let reactedBy: User?

    init(id: String, messageId: Int, reaction: String, uid: String, reactedAt: Double, reactedBy: User?) {
        self.id = id
        self.messageId = messageId
        self.reaction = reaction
        self.uid = uid
        self.reactedAt = reactedAt
        self.reactedBy = reactedBy
    }

    /// `Reaction(<id> on <message id>)`: ids only (safe for logs).
    public var description: String { "Reaction(\(id) on \(messageId))" }
}

/// A conversation (`Conversation`): with a user or a group, its last message and counts.
public final class Conversation: AppEntity, @unchecked Sendable, CustomStringConvertible {
    /// The conversation's id: for a user, the two uids sorted and joined by `_user_`; for a group,
    /// `group_<guid>` (see `ConversationID`). Nil only on a conversation the app built itself.
    public internal(set) var conversationId: String?
    /// `.user` or `.group`, never `.none`.
    public internal(set) var conversationType: ConversationType
    /// The latest message that updates the conversation (top-level; custom messages may opt out);
    /// nil when it has none.
    public internal(set) var lastMessage: BaseMessage?
    /// The other side: a `User` for a one-to-one conversation, a `Group` for a group.
    public internal(set) var conversationWith: (any AppEntity)?
    /// Messages from others the logged-in user has not read (top-level, not deleted).
    public internal(set) var unreadMessageCount = 0
    /// Unread messages that mention the logged-in user.
    public internal(set) var unreadMentionsCount = 0
    /// The conversation's last activity (its last message's time), server epoch seconds: the
    /// conversation list is ordered by it, most recent first.
    public internal(set) var updatedAt: Double = 0
    /// The logged-in user's own tags on the conversation; nil when the server sent none.
    public internal(set) var tags: [String]?
    /// The server id of the last message the logged-in user read here; 0 when none.
    public var lastReadMessageId = 0
    /// When it was pinned (0 = not pinned).
    public internal(set) var pinnedAt: Double = 0
    /// Who pinned it (`"app_system"` or a uid; empty when not pinned).
    public internal(set) var pinnedBy = ""

    init(conversationId: String?, conversationType: ConversationType) {
        self.conversationId = conversationId
        self.conversationType = conversationType
    }

    /// `Conversation(<conversation id>)`: the id only (safe for logs).
    public var description: String { "Conversation(\(conversationId ?? "?"))" }
}

/// A thread: a parent message and its replies' summary (`MessageThread`).
public final class MessageThread: @unchecked Sendable, CustomStringConvertible {
    /// The server id of the thread's parent message.
    public let parentMessageId: Int
    /// The parent message.
    public let parentMessage: BaseMessage
    /// How many replies the thread has (the server's count; in a cached page, the larger of the
    /// server's last count and the replies cached).
    public let replyCount: Int
    /// The most recent reply; nil when none is known.
    public let lastReply: BaseMessage?
    /// The parent's conversation id.
    public let conversationId: String
    /// Whether the parent went to a user or a group.
    public let receiverType: ReceiverType
    /// The parent's receiver: a uid or a guid, as `receiverType` says.
    public let receiverUid: String
    /// Whether the logged-in user follows the thread (true when the server did not say).
    public let isSubscribed: Bool
    /// Replies the logged-in user has not read; nil when the server did not say.
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

    /// `MessageThread(<parent id>)`: the id only (safe for logs).
    public var description: String { "MessageThread(\(parentMessageId))" }
}

/// An item of the notification feed (`NotificationFeedItem`).
public final class NotificationFeedItem: @unchecked Sendable, CustomStringConvertible {
    /// The server's id of the item.
    public let id: String
    /// The item's category (filtered by `set(category:)`); empty when none.
    public let category: String
    /// The id within the category (filtered by `set(categoryId:)`); empty when none.
    public let categoryId: String
    /// The item's content, free-form JSON as the server sent it (an empty object when none).
    public let content: JSONValue
    /// When the logged-in user read it, server epoch seconds; 0 while unread.
    public let readAt: Double
    /// When it was delivered to the logged-in user, server epoch seconds; 0 when not yet (or
    /// unknown).
    public let deliveredAt: Double
    /// When it was sent, server epoch seconds; 0 when the server did not say.
    public let sentAt: Double
    /// The app's free-form JSON about the item; nil when none.
    public let metadata: JSONValue?
    /// The item's tags (filtered by `set(tags:)`); empty when none.
    public let tags: [String]
    /// The uid of the item's sender; empty when none.
    public let sender: String
    /// The uid or guid it was sent to (`receiverType` says which); empty when none.
    public let receiver: String
    /// `"user"` or `"group"`, as the server spells it; empty when none.
    public let receiverType: String
    /// Whether the item has been read (`readAt` is set).
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

    /// `NotificationFeedItem(<id>)`: the id only, never the content (safe for logs).
    public var description: String { "NotificationFeedItem(\(id))" }
}
