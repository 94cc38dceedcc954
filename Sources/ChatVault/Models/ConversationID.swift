/// A conversation's id as the SDK names it, defined in this one place: `<uid>_user_<uid>` for a
/// one-to-one conversation (the two uids sorted, so both sides name it alike) and `group_<guid>` for
/// a group. Backends (the simulator, Matrix) and tools build ids with it, never by hand.
///
///     ConversationID.direct("bob", "alice").rawValue   // "alice_user_bob"
///     ConversationID.group("team").rawValue            // "group_team"
///     ConversationID(.user("bob"), me: "alice")        // the same as direct("alice", "bob")
public struct ConversationID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The id as stored and sent: `<uid>_user_<uid>` or `group_<guid>`.
    public let rawValue: String

    /// An id as it is, unchecked (a server's or a cached row's); build new ones with `direct(_:_:)`
    /// or `group(_:)`.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// The one-to-one conversation of `a` and `b` (in either order).
    public static func direct(_ a: String, _ b: String) -> ConversationID {
        ConversationID(rawValue: a <= b ? "\(a)_user_\(b)" : "\(b)_user_\(a)")
    }

    /// The group `guid`'s conversation.
    public static func group(_ guid: String) -> ConversationID {
        ConversationID(rawValue: "group_\(guid)")
    }

    /// The conversation a message to `scope` belongs to, for the user `me`.
    public init(_ scope: MessageScope, me: String) {
        switch scope {
        case .user(let uid): self = .direct(me, uid)
        case .group(let guid): self = .group(guid)
        }
    }

    /// The raw id (conversation ids hold uids or a guid, no message content).
    public var description: String { rawValue }
}
