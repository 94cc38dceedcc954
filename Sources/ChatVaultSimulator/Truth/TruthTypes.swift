public import ChatVault

/// What a message carries, for messages a test posts as any user.
///
///     try simulator.post(.text("hello"), from: "alice", to: .user("bob"))
///     try simulator.post(.custom(type: "location", data: ["lat": 48.85, "lng": 2.35]), from: "bob", to: .group("team"))
public enum MessageContent: Sendable, Equatable {
    /// A text message (`category` "message", `type` "text").
    case text(String)
    /// A media message with its attachments (`type` "image", "video", "audio" or "file").
    case media(AttachmentType, attachments: [SimulatedAttachment], caption: String? = nil)
    /// A custom message with the app's own type string (`category` "custom"). With
    /// `updateConversation: false` it does not become the conversation's last message.
    case custom(type: String, data: JSONValue, subType: String? = nil, conversationText: String? = nil, updateConversation: Bool = true)
    /// An interactive message (`category` "interactive"): a form or card and its goal.
    case interactive(type: String, data: JSONValue, goal: SimulatedInteractionGoal? = nil, allowSenderInteraction: Bool = false)
    /// A system message (`category` "action", `type` "groupMember"), e.g. `action: "joined"`.
    case action(action: String, message: String)

    var category: MessageCategory {
        switch self {
        case .text, .media: return .message
        case .custom: return .custom
        case .interactive: return .interactive
        case .action: return .action
        }
    }

    var type: String {
        switch self {
        case .text: return MessageType.text.rawValue
        case .media(let kind, _, _): return kind.rawValue
        case .custom(let type, _, _, _, _), .interactive(let type, _, _, _): return type
        case .action: return MessageType.groupMember.rawValue
        }
    }

    /// The text a keyword search and a link filter look at: the text, or a media caption.
    var searchableText: String? {
        switch self {
        case .text(let text): return text
        case .media(_, _, let caption): return caption
        default: return nil
        }
    }

    var attachments: [SimulatedAttachment] {
        if case .media(_, let attachments, _) = self { return attachments }
        return []
    }

    var updatesConversation: Bool {
        if case .custom(_, _, _, _, let update) = self { return update }
        return true
    }
}

/// One attachment of a media message, as the wire carries it.
///
///     SimulatedAttachment(name: "cat.jpg", mimeType: "image/jpeg", url: "https://media.test/cat.jpg", size: 2048)
public struct SimulatedAttachment: Sendable, Equatable {
    public var name: String
    public var fileExtension: String
    public var mimeType: String
    public var url: String
    public var size: Int

    /// The extension defaults to the part of `name` after its last dot.
    public init(name: String, fileExtension: String? = nil, mimeType: String, url: String, size: Int = 0) {
        self.name = name
        self.fileExtension = fileExtension ?? (name.contains(".") ? String(name.split(separator: ".").last ?? "") : "")
        self.mimeType = mimeType
        self.url = url
        self.size = size
    }
}

/// A file a device uploaded with `SimulatedClient.uploadMedia(path:name:mimeType:)`, as the server
/// stored it (`ChatVaultSimulator.uploads`). Its bytes download from `url`.
public struct SimulatedUpload: Sendable, Equatable {
    public let url: String
    public let name: String
    public let mimeType: String
    /// In bytes.
    public let size: Int
    /// The uid of the user who uploaded it.
    public let uploader: String
}

/// The goal of an interactive message: when it counts as completed
/// (`MessageQuery.interactionGoalCompletedOnly`).
///
///     SimulatedInteractionGoal(kind: .allOf, elementIds: ["name", "submit"])
public struct SimulatedInteractionGoal: Sendable, Equatable {
    /// The SDK's `InteractionGoalType`, with its wire spelling.
    public enum Kind: String, Sendable, CaseIterable {
        /// Any interaction completes it.
        case anyAction
        /// An interaction with any of the elements completes it.
        case anyOf
        /// Interactions with all of the elements complete it.
        case allOf
        /// It never completes.
        case none
    }

    public var kind: Kind
    public var elementIds: [String]

    public init(kind: Kind, elementIds: [String] = []) {
        self.kind = kind
        self.elementIds = elementIds
    }

    var wire: JSONValue {
        ["type": .string(kind.rawValue), "elementIds": .array(elementIds.map { .string($0) })]
    }

    func isCompleted(by interacted: Set<String>) -> Bool {
        switch kind {
        case .anyAction: return !interacted.isEmpty
        case .anyOf: return elementIds.contains(where: interacted.contains)
        case .allOf: return !elementIds.isEmpty && elementIds.allSatisfy(interacted.contains)
        case .none: return false
        }
    }
}

/// A user of the simulated server, as a test sets it up.
///
///     try simulator.addUser(SimulatedUser(uid: "alice", name: "Alice", role: "admin", tags: ["vip"], status: .online))
///     try simulator.updateUser("alice") { $0.statusMessage = "away" }
public struct SimulatedUser: Sendable, Equatable {
    public var uid: String
    public var name: String
    public var avatar: String?
    public var link: String?
    public var role: String?
    public var status: UserStatus
    public var statusMessage: String?
    public var metadata: JSONValue?
    public var tags: [String]
    /// An AI agent (`ConversationQuery.hideAgentic` / `onlyAgentic`).
    public var isAgentic: Bool
    /// Epoch seconds; 0 = never.
    public var lastActiveAt: Int
    /// Epoch seconds; a deactivated user (non-zero) is left out of user lists.
    public var deactivatedAt: Int

    /// The name defaults to the uid.
    public init(uid: String, name: String? = nil, avatar: String? = nil, link: String? = nil, role: String? = nil,
                status: UserStatus = .offline, statusMessage: String? = nil, metadata: JSONValue? = nil,
                tags: [String] = [], isAgentic: Bool = false, lastActiveAt: Int = 0, deactivatedAt: Int = 0) {
        self.uid = uid
        self.name = name ?? uid
        self.avatar = avatar
        self.link = link
        self.role = role
        self.status = status
        self.statusMessage = statusMessage
        self.metadata = metadata
        self.tags = tags
        self.isAgentic = isAgentic
        self.lastActiveAt = lastActiveAt
        self.deactivatedAt = deactivatedAt
    }
}

/// A group of the simulated server, as a test sets it up (members are added separately).
///
///     try simulator.addGroup(SimulatedGroup(guid: "team", name: "Team", type: .private, owner: "alice"),
///                            members: ["bob": .moderator, "carol": .participant])
public struct SimulatedGroup: Sendable, Equatable {
    public var guid: String
    public var name: String
    public var type: GroupType
    public var password: String?
    public var icon: String?
    public var description: String?
    /// The owner is made an admin member when the group is added.
    public var owner: String?
    public var metadata: JSONValue?
    public var tags: [String]

    /// The name defaults to the guid.
    public init(guid: String, name: String? = nil, type: GroupType = .public, password: String? = nil, icon: String? = nil,
                description: String? = nil, owner: String? = nil, metadata: JSONValue? = nil, tags: [String] = []) {
        self.guid = guid
        self.name = name ?? guid
        self.type = type
        self.password = password
        self.icon = icon
        self.description = description
        self.owner = owner
        self.metadata = metadata
        self.tags = tags
    }
}
