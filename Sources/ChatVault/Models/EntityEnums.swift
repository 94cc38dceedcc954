/// Whether a message goes to a user or a group (`CometChat.ReceiverType`).
public enum ReceiverType: String, Sendable, Codable, CaseIterable {
    case user
    case group
}

/// What kind of content a message carries (`CometChat.MessageType`). A custom message's own type
/// string is `CustomMessage.type`.
public enum MessageType: String, Sendable, Codable, CaseIterable {
    case text, image, video, audio, file, custom, groupMember
}

/// The family a message belongs to (`CometChat.MessageCategory`).
public enum MessageCategory: String, Sendable, Codable, CaseIterable {
    case message, action, call, custom, interactive
}

/// A conversation's kind (`CometChat.ConversationType`); `.none` means "both" in a filter.
public enum ConversationType: String, Sendable, Codable, CaseIterable {
    case user, group, none
}

/// A user's presence (`CometChat.UserStatus`).
public enum UserStatus: String, Sendable, Codable, CaseIterable {
    case online, offline, available
}

/// A group's access type (`CometChat.groupType`, lowercase in the SDK).
public enum GroupType: String, Sendable, Codable, CaseIterable {
    case `public`, `private`, password
}

/// A member's role in a group (`CometChat.GroupMemberScopeType`).
public enum GroupMemberScopeType: String, Sendable, Codable, CaseIterable {
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
    case asc, desc
}

/// Attachment kinds for `set(attachmentTypes:)` (`CometChat.AttachmentType`).
public enum AttachmentType: String, Sendable, Codable, CaseIterable {
    case image, audio, video, file
}
