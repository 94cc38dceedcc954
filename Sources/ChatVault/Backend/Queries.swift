/// What the engine asks a backend for. Each query carries every setting of the request builder it
/// comes from, so a server can apply all of them; the engine decides on its own which ones the
/// cache can answer.

/// Whose messages: a one-to-one conversation with a user, or a group.
public enum MessageScope: Sendable, Hashable {
    case user(String)
    case group(String)

    public var receiverType: ReceiverType {
        switch self {
        case .user: return .user
        case .group: return .group
        }
    }

    public var id: String {
        switch self {
        case .user(let uid): return uid
        case .group(let guid): return guid
        }
    }
}

/// Paging direction: toward older items (`fetchPrevious`) or newer ones (`fetchNext`).
public enum PageDirection: String, Sendable, Hashable, CaseIterable {
    case previous
    case next
}

/// A position in a message list: strictly before (or after) this message.
public struct MessageCursor: Sendable, Hashable {
    public var sentAt: Int
    public var id: Int

    public init(sentAt: Int, id: Int) {
        self.sentAt = sentAt
        self.id = id
    }
}

/// The settings of a `MessagesRequest`, plus the page asked for.
public struct MessageQuery: Sendable, Hashable {
    public var scope: MessageScope?
    /// `set(uid:)` together with `set(guid:)`: one sender's messages in a group (server-only).
    public var senderUid: String?
    public var direction: PageDirection = .previous
    public var cursor: MessageCursor?
    public var limit = 30
    /// `set(messageID:)`: start around this message.
    public var messageId: Int?
    /// `set(timeStamp:)`: start around this time (seconds).
    public var timestamp: Int?
    public var parentMessageId: Int?
    public var hideReplies = false
    public var categories: [String] = []
    public var types: [String] = []
    public var tags: [String] = []
    public var unread = false
    public var hideDeleted = false
    /// Messages that mention anyone (`has(mentions:)`).
    public var hasMentions = false
    /// Messages that mention me (`myMentionsOnly(_:)`).
    public var myMentionsOnly = false
    public var mentionedUIDs: [String] = []
    public var hasAttachments = false
    public var attachmentTypes: [AttachmentType] = []
    public var hideMessagesFromBlockedUsers = false
    public var hasReactions = false
    public var pinned = false
    public var saved = false
    // Server-only predicates.
    public var searchKeyword: String?
    public var hasLinks = false
    public var updatesOnly = false
    public var updatedAfter: Int?
    public var interactionGoalCompletedOnly = false
    // Enrichment: shape the answer, never filter it.
    public var withTags = false
    public var withParent = false
    public var mentionsWithTagInfo = false
    public var mentionsWithBlockedInfo = false
    public var hideQuotedMessages = false

    public init() {}
}

/// The settings of a `ConversationRequest`.
public struct ConversationQuery: Sendable, Hashable {
    public var limit = 30
    /// Opaque paging token from the previous page (nil: the first page).
    public var cursor: String?
    public var conversationType: ConversationType = .none
    public var unread = false
    public var tags: [String] = []
    public var userTags: [String] = []
    public var groupTags: [String] = []
    public var hideAgentic = false
    public var onlyAgentic = false
    public var includeBlockedUsers = false
    public var withBlockedInfo = false
    public var pinnedBy: [String] = []
    public var searchKeyword: String?
    public var withTags = false
    public var withUserAndGroupTags = false

    public init() {}
}

/// The settings of a `ThreadsRequest`.
public struct ThreadQuery: Sendable, Hashable {
    public var limit = 30
    public var cursor: String?
    public var scope: MessageScope?
    public var participatedByMe = true

    public init() {}
}

/// The settings of a `UsersRequest`.
public struct UserQuery: Sendable, Hashable {
    public var limit = 30
    public var cursor: String?
    public var searchKeyword: String?
    public var searchIn: [String] = []
    public var status: UserStatus?
    public var hideBlockedUsers = false
    public var roles: [String] = []
    public var friendsOnly = false
    public var tags: [String] = []
    public var withTags = false
    public var uids: [String] = []
    public var sortBy: String?
    public var sortOrder: SortOrder?

    public init() {}
}

/// The settings of a `BlockedUserRequest`.
public struct BlockedUserQuery: Sendable, Hashable {
    public var limit = 30
    public var cursor: String?
    public var direction: BlockedDirection = .both
    public var searchKeyword: String?

    public init() {}
}

/// The settings of a `GroupsRequest`.
public struct GroupQuery: Sendable, Hashable {
    public var limit = 30
    public var cursor: String?
    public var searchKeyword: String?
    public var joinedOnly = false
    public var tags: [String] = []
    public var withTags = false

    public init() {}
}

/// The settings of a `GroupMembersRequest` or `BannedGroupMembersRequest`.
public struct GroupMemberQuery: Sendable, Hashable {
    public var guid: String
    public var limit = 30
    public var cursor: String?
    public var searchKeyword: String?
    public var scopes: [String] = []
    public var status: UserStatus?

    public init(guid: String) {
        self.guid = guid
    }
}

/// The settings of a `ReactionsRequest`.
public struct ReactionQuery: Sendable, Hashable {
    public var messageId: Int
    public var reaction: String?
    public var limit = 30
    public var direction: PageDirection = .next
    public var cursor: String?

    public init(messageId: Int) {
        self.messageId = messageId
    }
}

/// The settings of a `NotificationFeedRequest`.
public struct FeedQuery: Sendable, Hashable {
    public var limit = 20
    public var cursor: String?
    public var readState: String?
    public var category: String?
    public var categoryId: String?
    public var channelId: String?
    public var tags: [String] = []
    public var dateFrom: String?
    public var dateTo: String?

    public init() {}
}
