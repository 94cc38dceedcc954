/// Whether a message goes to a user or a group (`CometChat.ReceiverType`).
public enum ReceiverType: String, Sendable, Codable, CaseIterable {
    /// A one-to-one message to a user (`receiverUid` is a uid).
    case user
    /// A message to a group (`receiverUid` is a guid).
    case group
}

/// What kind of content a message carries (`CometChat.MessageType`). A custom message's own type
/// string is `CustomMessage.type`.
public enum MessageType: String, Sendable, Codable, CaseIterable {
    /// Text; the four media kinds (`MediaMessage`); a custom or interactive message; a group member
    /// action (`ActionMessage`).
    case text, image, video, audio, file, custom, groupMember
}

/// The family a message belongs to (`CometChat.MessageCategory`).
public enum MessageCategory: String, Sendable, Codable, CaseIterable {
    /// A user's message (text or media); a system action; a call; a custom message; an interactive
    /// one.
    case message, action, call, custom, interactive
}

/// A conversation's kind (`CometChat.ConversationType`); `.none` means "both" in a filter.
public enum ConversationType: String, Sendable, Codable, CaseIterable {
    /// With a user; with a group; in a filter, both.
    case user, group, none
}

/// A user's presence (`CometChat.UserStatus`).
public enum UserStatus: String, Sendable, Codable, CaseIterable {
    /// Connected; not connected (also when the server did not say); available, which counts as
    /// online.
    case online, offline, available
}

/// A group's access type (`CometChat.groupType`, lowercase in the SDK).
public enum GroupType: String, Sendable, Codable, CaseIterable {
    /// Anyone may join; only by invitation; anyone with the group's password.
    case `public`, `private`, password
}

/// A member's role in a group (`CometChat.GroupMemberScopeType`).
public enum GroupMemberScopeType: String, Sendable, Codable, CaseIterable {
    /// Manages the group and its members; moderates members; takes part.
    case admin, moderator, participant
}

/// Which blocked users a `BlockedUserRequest` lists (`CometChat.Blocked`).
public enum BlockedDirection: String, Sendable, Codable, CaseIterable {
    /// Users I blocked.
    case byMe
    /// Users who blocked me.
    case me
    /// Both.
    case both
}

/// Sort order (`CometChat.SortOrder`).
public enum SortOrder: String, Sendable, Codable, CaseIterable {
    /// Ascending; descending.
    case asc, desc
}

/// Attachment kinds for `set(attachmentTypes:)` (`CometChat.AttachmentType`).
public enum AttachmentType: String, Sendable, Codable, CaseIterable {
    /// Images, audio, video and other files (`MessageType`'s media kinds).
    case image, audio, video, file
}
