/// What the engine asks a backend for. Each query carries every setting of the request builder it
/// comes from, so a server can apply all of them; the engine decides on its own which ones the
/// cache can answer.

/// Whose messages: a one-to-one conversation with a user, or a group.
public enum MessageScope: Sendable, Hashable {
    /// The one-to-one conversation with this user (its uid).
    case user(String)
    /// This group's conversation (its guid).
    case group(String)

    /// `.user` or `.group`, as the SDK's `receiverType` spells the scope.
    public var receiverType: ReceiverType {
        switch self {
        case .user: return .user
        case .group: return .group
        }
    }

    /// The uid or the guid the scope names.
    public var id: String {
        switch self {
        case .user(let uid): return uid
        case .group(let guid): return guid
        }
    }
}

/// Paging direction: toward older items (`fetchPrevious`) or newer ones (`fetchNext`).
public enum PageDirection: String, Sendable, Hashable, CaseIterable {
    /// Toward older items: the newest `limit` before the start point.
    case previous
    /// Toward newer items: the oldest `limit` after the start point.
    case next
}

/// A position in a message list: strictly before (or after) this message.
public struct MessageCursor: Sendable, Hashable {
    /// The message's `sentAt` (server epoch seconds): messages are ordered by it first.
    public var sentAt: Int
    /// The message's server id, which breaks ties between messages sent in the same second.
    public var id: Int

    /// A position at the message with this `sentAt` and server id.
    public init(sentAt: Int, id: Int) {
        self.sentAt = sentAt
        self.id = id
    }
}

/// The settings of a `MessagesRequest`, plus the page asked for.
public struct MessageQuery: Sendable, Hashable {
    /// The conversation read (`set(uid:)` or `set(guid:)`); nil reads every conversation the user
    /// can read.
    public var scope: MessageScope?
    /// `set(uid:)` together with `set(guid:)`: one sender's messages in a group (server-only).
    public var senderUid: String?
    /// Which way the page goes from its start point (default `.previous`, toward older messages).
    public var direction: PageDirection = .previous
    /// Where the page starts: strictly beyond this message (the far edge of the previous page); nil
    /// for the first page, which starts at `messageId`, `timestamp` or the end of the list.
    public var cursor: MessageCursor?
    /// Messages per page (`set(limit:)`, clamped to 1…100; default 30).
    public var limit = 30
    /// `set(messageID:)`: start around this message.
    public var messageId: Int?
    /// `set(timeStamp:)`: start around this time (seconds).
    public var timestamp: Int?
    /// `setParentMessageId(parentMessageId:)`: the replies of this thread parent only; nil for
    /// messages of the conversation (replies included unless `hideReplies`).
    public var parentMessageId: Int?
    /// `hideReplies(hide:)`: leave out thread replies (ignored when `parentMessageId` is set).
    public var hideReplies = false
    /// `set(categories:)`: only messages of any of these categories (`"message"`, `"action"`,
    /// `"call"`, `"custom"`, `"interactive"`); empty for all.
    public var categories: [String] = []
    /// `set(types:)`: only messages of any of these types (`"text"`, `"image"`, a custom type…);
    /// empty for all.
    public var types: [String] = []
    /// `setTags(_:)`: only messages carrying any of these tags; empty for all.
    public var tags: [String] = []
    /// `set(unread:)`: only messages from someone else that the user has not read.
    public var unread = false
    /// `hideDeletedMessages(hide:)`: leave out deleted messages.
    public var hideDeleted = false
    /// Messages that mention anyone (`has(mentions:)`).
    public var hasMentions = false
    /// Messages that mention me (`myMentionsOnly(_:)`).
    public var myMentionsOnly = false
    /// `set(mentionedUIDs:)`: only messages that mention any of these users; empty for all.
    public var mentionedUIDs: [String] = []
    /// `has(attachments:)`: only media messages with at least one attachment.
    public var hasAttachments = false
    /// `set(attachmentTypes:)`: only media messages of any of these kinds; empty for all.
    public var attachmentTypes: [AttachmentType] = []
    /// `hideMessagesFromBlockedUsers(_:)`: leave out messages from users the user blocked.
    public var hideMessagesFromBlockedUsers = false
    /// `has(reactions:)`: only messages with at least one reaction.
    public var hasReactions = false
    /// `set(pinned:)`: only messages pinned in their conversation.
    public var pinned = false
    /// `set(saved:)`: only messages the user saved.
    public var saved = false
    // Server-only predicates.
    /// `set(searchKeyword:)`: messages whose text or caption contains it (server-only: a non-empty
    /// keyword makes the cached page empty; an empty one filters nothing).
    public var searchKeyword: String?
    /// `has(links:)`: only messages whose text or caption holds a link (server-only).
    public var hasLinks = false
    /// `updatesOnly(onlyUpdates:)`: only messages changed after they were sent (edited, deleted,
    /// reacted to…; server-only).
    public var updatesOnly = false
    /// `setUpdatedAfter(timeStamp:)`: only messages updated after this time, server epoch seconds
    /// (server-only); nil for no bound.
    public var updatedAfter: Int?
    /// `setInteractionGoalCompletedOnly(_:)`: only interactive messages whose goal is met
    /// (server-only).
    public var interactionGoalCompletedOnly = false
    // Enrichment: shape the answer, never filter it.
    /// `withTags(_:)`: ask the server to include each message's tags (enrichment; the cache always
    /// has them).
    public var withTags = false
    /// `set(withParent:)`: ask the server to include a reply's parent message (enrichment).
    public var withParent = false
    /// `mentionsWithTagInfo(_:)`: ask for the mentioned users' tags (enrichment).
    public var mentionsWithTagInfo = false
    /// `mentionsWithBlockedInfo(_:)`: ask for the mentioned users' blocked flags (enrichment).
    public var mentionsWithBlockedInfo = false
    /// `hideQuotedMessages(_:)`: ask the server to leave out the quoted message of a reply
    /// (enrichment).
    public var hideQuotedMessages = false

    /// A query with every setting at its default: the newest 30 messages of every conversation.
    public init() {}
}

/// The settings of a `ConversationRequest`.
public struct ConversationQuery: Sendable, Hashable {
    /// Conversations per page (clamped to 1…50 by the builder; default 30).
    public var limit = 30
    /// Opaque paging token from the previous page (nil: the first page).
    public var cursor: String?
    /// `setConversationType(conversationType:)`: only conversations with users or with groups;
    /// `.none` (the default) for both.
    public var conversationType: ConversationType = .none
    /// `setUnread(_:)`: only conversations with unread messages.
    public var unread = false
    /// `setTags(_:)`: only conversations carrying any of these tags (the user's own conversation
    /// tags).
    public var tags: [String] = []
    /// `setUserTags(_:)`: only conversations with a user carrying any of these tags (or, with
    /// `groupTags`, a group carrying any of those).
    public var userTags: [String] = []
    /// `setGroupTags(_:)`: only conversations with a group carrying any of these tags (or, with
    /// `userTags`, a user carrying any of those).
    public var groupTags: [String] = []
    /// `hideAgentic(_:)`: leave out conversations with AI agents.
    public var hideAgentic = false
    /// `onlyAgentic(_:)`: only conversations with AI agents.
    public var onlyAgentic = false
    /// `includeBlockedUsers(_:)`: also list conversations with users the user blocked (hidden by
    /// default).
    public var includeBlockedUsers = false
    /// `with(blockedInfo:)`: ask for the other user's blocked flags (enrichment; the cache always
    /// has them).
    public var withBlockedInfo = false
    /// `set(pinnedBy:)`: only pinned conversations, pinned by `"me"` (the user) or `"system"` (the
    /// app); empty for all.
    public var pinnedBy: [String] = []
    /// `setSearchKeyword(_:)`: conversations whose user or group name contains it (server-only: a
    /// non-empty keyword makes the cached page empty).
    public var searchKeyword: String?
    /// `withTags(_:)`: ask for the conversation's tags (enrichment).
    public var withTags = false
    /// `withUserAndGroupTags(_:)`: ask for the other user's or the group's tags (enrichment).
    public var withUserAndGroupTags = false

    /// A query with every setting at its default: the first 30 conversations of both kinds.
    public init() {}
}

/// The settings of a `ThreadsRequest`.
public struct ThreadQuery: Sendable, Hashable {
    /// Threads per page (clamped to 1…100 by the builder; default 30).
    public var limit = 30
    /// Opaque paging token from the previous page (nil: the first page).
    public var cursor: String?
    /// The conversation whose threads are read (`set(uid:)` or `set(guid:)`); nil for every
    /// conversation the user can read.
    public var scope: MessageScope?
    /// `set(participatedByMe:)`: only threads the user started or replied to (default true).
    public var participatedByMe = true

    /// A query with every setting at its default: the user's own threads in every conversation.
    public init() {}
}

/// The settings of a `UsersRequest`.
public struct UserQuery: Sendable, Hashable {
    /// Users per page (clamped to 1…100 by the builder; default 30).
    public var limit = 30
    /// Opaque paging token from the previous page (nil: the first page).
    public var cursor: String?
    /// `set(searchKeyword:)`: users whose uid or name (see `searchIn`) contains it (server-only:
    /// never snapshotted).
    public var searchKeyword: String?
    /// `searchIn(_:)`: where `searchKeyword` is looked for (`"uid"`, `"name"`); empty for both.
    public var searchIn: [String] = []
    /// `set(status:)`: only users with this presence (server-only: never snapshotted); nil for all.
    public var status: UserStatus?
    /// `hideBlockedUsers(_:)`: leave out users the user blocked.
    public var hideBlockedUsers = false
    /// `set(roles:)`: only users with any of these roles; empty for all.
    public var roles: [String] = []
    /// `friendsOnly(_:)`: only the user's friends.
    public var friendsOnly = false
    /// `set(tags:)`: only users carrying any of these tags; empty for all.
    public var tags: [String] = []
    /// `withTags(_:)`: ask for each user's tags (enrichment).
    public var withTags = false
    /// `set(UIDs:)`: only these users; empty for all.
    public var uids: [String] = []
    /// `sortBy(_:)`: the field the list is sorted by (e.g. `"name"`, `"status"`); nil for the
    /// server's default order.
    public var sortBy: String?
    /// `sortOrder(_:)`: ascending or descending `sortBy`; nil for the server's default.
    public var sortOrder: SortOrder?

    /// A query with every setting at its default: the first 30 users.
    public init() {}
}

/// The settings of a `BlockedUserRequest`.
public struct BlockedUserQuery: Sendable, Hashable {
    /// Blocked users per server page (clamped to 1…100 by the builder; default 30).
    public var limit = 30
    /// Opaque paging token from the previous page (nil: the first page).
    public var cursor: String?
    /// `set(direction:)`: users the user blocked, who blocked the user, or both (the default).
    public var direction: BlockedDirection = .both
    /// `set(searchKeyword:)`: blocked users whose uid or name contains it (server-only).
    public var searchKeyword: String?

    /// A query with every setting at its default: the first 30 users blocked either way.
    public init() {}
}

/// The settings of a `GroupsRequest`.
public struct GroupQuery: Sendable, Hashable {
    /// Groups per page (clamped to 1…100 by the builder; default 30).
    public var limit = 30
    /// Opaque paging token from the previous page (nil: the first page).
    public var cursor: String?
    /// `set(searchKeyword:)`: groups whose name contains it (server-only: never snapshotted).
    public var searchKeyword: String?
    /// `set(joinedOnly:)`: only groups the user is a member of.
    public var joinedOnly = false
    /// `set(tags:)`: only groups carrying any of these tags; empty for all.
    public var tags: [String] = []
    /// `withTags(_:)`: ask for each group's tags (enrichment).
    public var withTags = false

    /// A query with every setting at its default: the first 30 groups the user can see.
    public init() {}
}

/// The settings of a `GroupMembersRequest` or `BannedGroupMembersRequest`.
public struct GroupMemberQuery: Sendable, Hashable {
    /// The group (its guid).
    public var guid: String
    /// Members per page (clamped to 1…100 by the builder; default 30).
    public var limit = 30
    /// Opaque paging token from the previous page (nil: the first page).
    public var cursor: String?
    /// `set(searchKeyword:)`: members whose uid or name contains it (server-only: never
    /// snapshotted).
    public var searchKeyword: String?
    /// `set(scopes:)`: only members with any of these scopes (`"admin"`, `"moderator"`,
    /// `"participant"`); empty for all.
    public var scopes: [String] = []
    /// `set(status:)`: only members with this presence (server-only: never snapshotted); nil for
    /// all.
    public var status: UserStatus?

    /// A query for the first 30 members (or banned users) of the group `guid`.
    public init(guid: String) {
        self.guid = guid
    }
}

/// The settings of a `ReactionsRequest`.
public struct ReactionQuery: Sendable, Hashable {
    /// The message whose reactions are read (its server id).
    public var messageId: Int
    /// `set(reaction:)`: only this reaction (an emoji); nil for all.
    public var reaction: String?
    /// Reactions per page (clamped to 1…100 by the builder; default 30).
    public var limit = 30
    /// `.next` pages forward from the oldest reaction, `.previous` backward from the newest (set by
    /// the fetch).
    public var direction: PageDirection = .next
    /// Opaque paging token from the previous page in this direction (nil: the first page).
    public var cursor: String?

    /// A query for the first 30 reactions on the message `messageId`, oldest first.
    public init(messageId: Int) {
        self.messageId = messageId
    }
}

/// The settings of a `NotificationFeedRequest`.
public struct FeedQuery: Sendable, Hashable {
    /// Feed items per page (clamped to 1…100 by the builder; default 20).
    public var limit = 20
    /// Opaque paging token from the previous page (nil: the first page).
    public var cursor: String?
    /// `set(readState:)`: `"read"` or `"unread"` items only (a `FeedReadState` raw value); nil for
    /// both.
    public var readState: String?
    /// `set(category:)`: only items of this category; nil for all.
    public var category: String?
    /// `set(categoryId:)`: only items with this category id; nil for all.
    public var categoryId: String?
    /// `set(channelId:)`: only items of this channel; nil for all.
    public var channelId: String?
    /// `set(tags:)`: only items carrying any of these tags; empty for all.
    public var tags: [String] = []
    /// `set(dateFrom:)`: only items sent at or after this ISO 8601 date-time; nil for no bound.
    public var dateFrom: String?
    /// `set(dateTo:)`: only items sent at or before this ISO 8601 date-time; nil for no bound.
    public var dateTo: String?

    /// A query with every setting at its default: the newest 20 items of the feed.
    public init() {}
}
