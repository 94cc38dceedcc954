/// Limits a server payload must respect. A payload outside them is rejected as a whole (a clear
/// error, the cache unchanged): a hostile or broken server cannot fill the disk or the UI.
public struct WireLimits: Sendable, Equatable {
    /// Ids: uids, guids, conversation ids, tags, types.
    public var maxIdentifierBytes = 255
    /// Names, captions, short texts.
    public var maxNameBytes = 4096
    /// URLs (avatars, attachments).
    public var maxURLBytes = 16 * 1024
    /// A message's text.
    public var maxTextBytes = 256 * 1024
    /// Free-form JSON (metadata, custom data), encoded.
    public var maxFreeformBytes = 256 * 1024
    /// Items in one page, tags on one entity, attachments or mentions on one message.
    public var maxListCount = 1000
    /// Nesting of free-form JSON (at most 55: see `maxItemDepth`).
    public var maxDepth = 32
    /// One item as received (a message, a conversation with its last message, a user, …), as
    /// stored: every field counts, known or not.
    public var maxItemBytes = 1024 * 1024

    /// The default limits (the values above).
    public init() {}

    /// The largest whole number or time a server may send: 2^53, the largest a JSON number (a
    /// double) holds exactly. Every number the engine keeps fits an `Int64` with room to spare.
    public static let maxWireNumber: Int64 = 1 << 53

    /// The nesting free-form JSON may have: `maxDepth`, capped so a whole item always reads back.
    var freeformDepth: Int { Swift.max(0, Swift.min(maxDepth, BinaryJSON.maxDepth - 1 - Self.structureDepth)) }

    /// The nesting of a whole item, known and unknown fields alike: free-form JSON inside the
    /// deepest known structure (a conversation's last message's mentioned user's metadata). It
    /// stays below `BinaryJSON.maxDepth`, so whatever is stored reads back.
    var maxItemDepth: Int { freeformDepth + Self.structureDepth }

    /// Containers around the deepest free-form field, with room to spare.
    static let structureDepth = 8
}

/// Why a server payload was rejected. Names the entity and the field, never the value.
public struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong with the field.
    public enum Problem: Sendable, Equatable {
        /// A required field is absent (or null).
        case missing
        /// The field holds another kind of value than `expected` (e.g. "a string").
        case wrongType(expected: String)
        /// The field is longer than `limit` bytes (UTF-8).
        case tooLong(limit: Int)
        /// The list holds more than `limit` items.
        case tooMany(limit: Int)
        /// The value is unusable for the reason given (a fixed phrase such as "out of range", never
        /// the value itself).
        case invalid(String)
    }

    /// The entity being read ("message", "conversation", "user", …).
    public let entity: String
    /// The field's path within it (e.g. `data.attachments[0].url`; `(root)` or `(item)` for the
    /// whole).
    public let field: String
    /// What is wrong with it.
    public let problem: Problem

    /// "the server sent an invalid <entity>: <field> <problem>": names the field, never its value.
    public var description: String {
        let what: String
        switch problem {
        case .missing: what = "is missing"
        case .wrongType(let expected): what = "is not \(expected)"
        case .tooLong(let limit): what = "is longer than \(limit) bytes"
        case .tooMany(let limit): what = "has more than \(limit) items"
        case .invalid(let why): what = "is invalid (\(why))"
        }
        return "the server sent an invalid \(entity): \(field) \(what)"
    }
}

/// Turns validated wire JSON into models. The same decoder reads server pages and cached rows;
/// cached rows were validated when they were written, so reading them skips the costly size
/// checks of free-form JSON (`trusted`).
struct WireDecoder: Sendable {
    let limits: WireLimits
    var trusted = false

    init(limits: WireLimits, trusted: Bool = false) {
        self.limits = limits
        self.trusted = trusted
    }

    /// Reads the fields of one JSON object, with the entity's name and a path for errors.
    struct Fields {
        /// Where the fields are read from: wire JSON, or a cached payload read in place.
        enum Storage {
            case json([String: JSONValue])
            case stored(BinaryObject)
        }

        let storage: Storage
        let entity: String
        let path: String
        let limits: WireLimits
        var trusted = false

        init(_ value: JSONValue, entity: String, path: String = "", limits: WireLimits, trusted: Bool = false) throws(WireError) {
            guard case .object(let values) = value else {
                throw WireError(entity: entity, field: path.isEmpty ? "(root)" : path, problem: .wrongType(expected: "an object"))
            }
            // A whole item (not a part of one) is bounded as a whole, unknown fields included.
            if path.isEmpty && !trusted { try Self.checkWhole(value, entity: entity, limits: limits) }
            self.storage = .json(values)
            self.entity = entity
            self.path = path
            self.limits = limits
            self.trusted = trusted
        }

        /// The fields of a cached payload (validated when it was written: always trusted).
        init(stored object: BinaryObject, entity: String, path: String = "", limits: WireLimits) {
            self.storage = .stored(object)
            self.entity = entity
            self.path = path
            self.limits = limits
            self.trusted = true
        }

        /// Bounds a whole item as received, in size and depth, before any of it is used or stored.
        static func checkWhole(_ value: JSONValue, entity: String, limits: WireLimits) throws(WireError) {
            switch value.extentBreach(maxDepth: limits.maxItemDepth, maxBytes: limits.maxItemBytes) {
            case nil: return
            case .depth: throw WireError(entity: entity, field: "(item)", problem: .invalid("nested too deeply"))
            case .bytes: throw WireError(entity: entity, field: "(item)", problem: .tooLong(limit: limits.maxItemBytes))
            }
        }

        func name(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

        func fail(_ key: String, _ problem: WireError.Problem) -> WireError {
            WireError(entity: entity, field: name(key), problem: problem)
        }

        func present(_ key: String) -> JSONValue? {
            let found: JSONValue?
            switch storage {
            case .json(let values): found = values[key]
            case .stored(let object): found = object.value(key)
            }
            guard let value = found, !value.isNull else { return nil }
            return value
        }

        func string(_ key: String, max: Int) throws(WireError) -> String? {
            guard let value = present(key) else { return nil }
            guard case .string(let s) = value else { throw fail(key, .wrongType(expected: "a string")) }
            guard s.utf8.count <= max else { throw fail(key, .tooLong(limit: max)) }
            return s
        }

        func requiredString(_ key: String, max: Int) throws(WireError) -> String {
            guard let s = try string(key, max: max) else { throw fail(key, .missing) }
            return s
        }

        /// An optional identifier: bounded, no control characters; empty means absent (the SDK's
        /// own default for fields such as `pinnedBy` or `muid`).
        func identifier(_ key: String) throws(WireError) -> String? {
            guard let s = try string(key, max: limits.maxIdentifierBytes), !s.isEmpty else { return nil }
            // UTF-8 bytes below 0x80 are whole scalars: the same test as on the scalars, cheaper.
            guard !s.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) else {
                throw fail(key, .invalid("control characters"))
            }
            return s
        }

        func requiredIdentifier(_ key: String) throws(WireError) -> String {
            guard let s = try identifier(key) else { throw fail(key, present(key) == nil ? .missing : .invalid("empty")) }
            return s
        }

        /// An identifier that servers send as a string or a number.
        func requiredIdentifierOrNumber(_ key: String) throws(WireError) -> String {
            if let n = present(key)?.intValue { return String(n) }
            return try requiredIdentifier(key)
        }

        /// A whole number from `minimum` to `WireLimits.maxWireNumber`.
        func int(_ key: String, minimum: Int64 = -1) throws(WireError) -> Int? {
            guard let value = present(key) else { return nil }
            guard let n = value.intValue else { throw fail(key, .wrongType(expected: "a whole number")) }
            guard n >= minimum, n <= WireLimits.maxWireNumber else { throw fail(key, .invalid("out of range")) }
            return Int(n)
        }

        func requiredInt(_ key: String, minimum: Int64 = -1) throws(WireError) -> Int {
            guard let n = try int(key, minimum: minimum) else { throw fail(key, .missing) }
            return n
        }

        /// A server id: a whole number from 1. Trusted rows may hold 0: the outbox's own messages,
        /// not yet on the server.
        func requiredId(_ key: String) throws(WireError) -> Int { try requiredInt(key, minimum: trusted ? 0 : 1) }

        /// A reference to a server id: 0 for none.
        func reference(_ key: String) throws(WireError) -> Int? { try int(key, minimum: 0) }

        /// A finite number from 0 to `WireLimits.maxWireNumber` (times, sizes): it converts to
        /// `Int64` without trapping.
        func double(_ key: String) throws(WireError) -> Double? {
            guard let value = present(key) else { return nil }
            guard let d = value.doubleValue else { throw fail(key, .wrongType(expected: "a number")) }
            guard d.isFinite, d >= 0, d <= Double(WireLimits.maxWireNumber) else { throw fail(key, .invalid("out of range")) }
            return d
        }

        func bool(_ key: String) throws(WireError) -> Bool? {
            guard let value = present(key) else { return nil }
            guard case .bool(let b) = value else { throw fail(key, .wrongType(expected: "true or false")) }
            return b
        }

        func object(_ key: String, entity: String? = nil) throws(WireError) -> Fields? {
            if case .stored(let object) = storage {
                switch object.nested(key) {
                case .absent: return nil
                case .object(let nested): return Fields(stored: nested, entity: entity ?? self.entity, path: name(key), limits: limits)
                case .other: throw fail(key, .wrongType(expected: "an object"))
                }
            }
            guard let value = present(key) else { return nil }
            return try Fields(value, entity: entity ?? self.entity, path: name(key), limits: limits, trusted: trusted)
        }

        func array(_ key: String) throws(WireError) -> [JSONValue]? {
            guard let value = present(key) else { return nil }
            guard case .array(let items) = value else { throw fail(key, .wrongType(expected: "a list")) }
            guard items.count <= limits.maxListCount else { throw fail(key, .tooMany(limit: limits.maxListCount)) }
            return items
        }

        func identifiers(_ key: String) throws(WireError) -> [String]? {
            guard let items = try array(key) else { return nil }
            var out: [String] = []
            for (i, item) in items.enumerated() {
                guard case .string(let s) = item, !s.isEmpty, s.utf8.count <= limits.maxIdentifierBytes else {
                    throw fail("\(key)[\(i)]", .invalid("not an identifier"))
                }
                out.append(s)
            }
            return out
        }

        /// Free-form JSON, bounded in size and depth.
        func freeform(_ key: String) throws(WireError) -> JSONValue? {
            guard let value = present(key) else { return nil }
            if trusted { return value }
            switch value.extentBreach(maxDepth: limits.freeformDepth, maxBytes: limits.maxFreeformBytes) {
            case nil: return value
            case .depth: throw fail(key, .invalid("nested too deeply"))
            case .bytes: throw fail(key, .tooLong(limit: limits.maxFreeformBytes))
            }
        }

        func choice<E: RawRepresentable>(_ key: String, _ type: E.Type) throws(WireError) -> E? where E.RawValue == String {
            guard let s = try string(key, max: limits.maxIdentifierBytes) else { return nil }
            guard let e = E(rawValue: s) else { throw fail(key, .invalid("unknown value")) }
            return e
        }
    }

    // MARK: - Entities

    func user(_ value: JSONValue, path: String = "") throws(WireError) -> User {
        try user(Fields(value, entity: "user", path: path, limits: limits, trusted: trusted))
    }

    func user(_ f: Fields) throws(WireError) -> User {
        let user = User(uid: try f.requiredIdentifier("uid"), name: try f.string("name", max: limits.maxNameBytes))
        try fillUser(user, f)
        return user
    }

    private func fillUser(_ user: User, _ f: Fields) throws(WireError) {
        user.avatar = try f.string("avatar", max: limits.maxURLBytes)
        user.link = try f.string("link", max: limits.maxURLBytes)
        user.role = try f.identifier("role")
        user.statusMessage = try f.string("statusMessage", max: limits.maxNameBytes)
        user.metadata = try f.freeform("metadata")
        user.status = try f.choice("status", UserStatus.self) ?? .offline
        user.lastActiveAt = try f.double("lastActiveAt") ?? 0
        user.deactivatedAt = try f.double("deactivatedAt") ?? 0
        user.hasBlockedMe = try f.bool("hasBlockedMe") ?? false
        user.blockedByMe = try f.bool("blockedByMe") ?? false
        user.tags = try f.identifiers("tags") ?? []
        user.isAgentic = try f.bool("isAgentic") ?? false
    }

    func group(_ value: JSONValue, path: String = "") throws(WireError) -> Group {
        let f = try Fields(value, entity: "group", path: path, limits: limits, trusted: trusted)
        let group = Group(guid: try f.requiredIdentifier("guid"), name: try f.string("name", max: limits.maxNameBytes),
                          groupType: try f.choice("type", GroupType.self) ?? .public, password: nil)
        group.icon = try f.string("icon", max: limits.maxURLBytes)
        group.groupDescription = try f.string("description", max: limits.maxNameBytes)
        group.owner = try f.identifier("owner")
        group.metadata = try f.freeform("metadata")
        group.createdAt = try f.int("createdAt") ?? 0
        group.updatedAt = try f.int("updatedAt") ?? 0
        group.joinedAt = try f.int("joinedAt") ?? 0
        group.scope = try f.choice("scope", GroupMemberScopeType.self) ?? .participant
        group.hasJoined = try f.bool("hasJoined") ?? false
        group.membersCount = try f.int("membersCount") ?? 0
        group.tags = try f.identifiers("tags") ?? []
        return group
    }

    func groupMember(_ value: JSONValue) throws(WireError) -> GroupMember {
        let f = try Fields(value, entity: "group member", limits: limits, trusted: trusted)
        let member = GroupMember(UID: try f.requiredIdentifier("uid"), groupMemberScope: try f.choice("scope", GroupMemberScopeType.self) ?? .participant)
        member.name = try f.string("name", max: limits.maxNameBytes)
        try fillUser(member, f)
        member.joinedAt = try f.int("joinedAt") ?? 0
        member.guid = try f.identifier("guid") ?? ""
        return member
    }

    func reaction(_ value: JSONValue) throws(WireError) -> Reaction {
        let f = try Fields(value, entity: "reaction", limits: limits, trusted: trusted)
        return Reaction(id: try f.requiredIdentifierOrNumber("id"), messageId: try f.requiredId("messageId"),
                        reaction: try f.requiredString("reaction", max: 64), uid: try f.requiredIdentifier("uid"),
                        reactedAt: try f.double("reactedAt") ?? 0,
                        reactedBy: try f.present("reactedBy").map { (v) throws(WireError) in try user(v, path: "reactedBy") })
    }

    func feedItem(_ value: JSONValue) throws(WireError) -> NotificationFeedItem {
        let f = try Fields(value, entity: "notification feed item", limits: limits, trusted: trusted)
        return NotificationFeedItem(id: try f.requiredIdentifier("id"), category: try f.identifier("category") ?? "",
                                    categoryId: try f.identifier("categoryId") ?? "", content: try f.freeform("content") ?? .object([:]),
                                    readAt: try f.double("readAt") ?? 0, deliveredAt: try f.double("deliveredAt") ?? 0,
                                    sentAt: try f.double("sentAt") ?? 0, metadata: try f.freeform("metadata"),
                                    tags: try f.identifiers("tags") ?? [], sender: try f.identifier("sender") ?? "",
                                    receiver: try f.identifier("receiver") ?? "", receiverType: try f.identifier("receiverType") ?? "")
    }

    func conversation(_ value: JSONValue) throws(WireError) -> Conversation {
        let f = try Fields(value, entity: "conversation", limits: limits, trusted: trusted)
        guard let type = try f.choice("conversationType", ConversationType.self), type != .none else {
            throw f.fail("conversationType", f.present("conversationType") == nil ? .missing : .invalid("must be user or group"))
        }
        let conversation = Conversation(conversationId: try f.requiredIdentifier("conversationId"), conversationType: type)
        guard let with = f.present("conversationWith") else { throw f.fail("conversationWith", .missing) }
        conversation.conversationWith = type == .user ? try user(with, path: "conversationWith") : try group(with, path: "conversationWith")
        conversation.lastMessage = try f.present("lastMessage").map { (v) throws(WireError) in try message(v, path: "lastMessage") }
        conversation.unreadMessageCount = try f.int("unreadMessageCount") ?? 0
        conversation.unreadMentionsCount = try f.int("unreadMentionsCount") ?? 0
        conversation.updatedAt = try f.double("updatedAt") ?? 0
        conversation.tags = try f.identifiers("tags")
        conversation.lastReadMessageId = try f.reference("lastReadMessageId") ?? 0
        conversation.pinnedAt = try f.double("pinnedAt") ?? 0
        conversation.pinnedBy = try f.identifier("pinnedBy") ?? ""
        return conversation
    }

    func thread(_ value: JSONValue) throws(WireError) -> MessageThread {
        let f = try Fields(value, entity: "thread", limits: limits, trusted: trusted)
        guard let parent = f.present("parentMessage") else { throw f.fail("parentMessage", .missing) }
        return MessageThread(parentMessage: try message(parent, path: "parentMessage"), replyCount: try f.int("replyCount") ?? 0,
                             lastReply: try f.present("lastReply").map { (v) throws(WireError) in try message(v, path: "lastReply") },
                             isSubscribed: try f.bool("isSubscribed") ?? true, unreadReplyCount: try f.int("unreadReplyCount"),
                             updatedAt: try f.double("updatedAt") ?? 0)
    }

    // MARK: - Messages

    func message(_ value: JSONValue, path: String = "") throws(WireError) -> BaseMessage {
        try message(Fields(value, entity: "message", path: path, limits: limits, trusted: trusted))
    }

    /// A cached message from its stored payload, read in place (`BinaryObject`).
    func message(stored object: BinaryObject) throws(WireError) -> BaseMessage {
        try message(Fields(stored: object, entity: "message", limits: limits))
    }

    func message(_ f: Fields) throws(WireError) -> BaseMessage {
        let category = try f.choice("category", MessageCategory.self) ?? .message
        let receiverType = try f.choice("receiverType", ReceiverType.self) ?? .user
        let receiver = try f.requiredIdentifier("receiver")
        let typeString = try f.requiredIdentifier("type")
        let data = try f.object("data")
        let message: BaseMessage
        switch category {
        case .message:
            guard let type = MessageType(rawValue: typeString) else { throw f.fail("type", .invalid("unknown message type")) }
            if type == .text {
                message = TextMessage(receiverUid: receiver, text: try data?.string("text", max: limits.maxTextBytes) ?? "", receiverType: receiverType)
            } else if [.image, .video, .audio, .file].contains(type) {
                let media = MediaMessage(receiverUid: receiver, fileurl: nil, messageType: type, receiverType: receiverType)
                media.caption = try data?.string("caption", max: limits.maxTextBytes)
                for (i, item) in (try data?.array("attachments") ?? []).enumerated() {
                    media.attachments.append(try attachment(item, path: (data?.name("attachments") ?? "attachments") + "[\(i)]"))
                }
                media.attachment = media.attachments.first
                message = media
            } else {
                message = BaseMessage(receiverUid: receiver, messageType: type, receiverType: receiverType)
            }
        case .custom:
            let custom = CustomMessage(receiverUid: receiver, receiverType: receiverType, customData: try data?.freeform("customData"), type: typeString)
            custom.subType = try data?.identifier("subType")
            custom.conversationText = try data?.string("conversationText", max: limits.maxNameBytes)
            custom.updateConversation = try data?.bool("updateConversation") ?? true
            message = custom
        case .interactive:
            let interactive = InteractiveMessage(receiverUid: receiver, type: typeString, receiverType: receiverType,
                                                 interactiveData: try data?.freeform("interactiveData") ?? .object([:]))
            interactive.allowSenderInteraction = try data?.bool("allowSenderInteraction") ?? false
            interactive.interactionGoal = try data?.freeform("interactionGoal")
            interactive.interactions = try data?.array("interactions") ?? []
            message = interactive
        case .action, .call:
            let action = ActionMessage(receiverUid: receiver, receiverType: receiverType)
            action.messageCategory = category
            action.action = try data?.identifier("action")
            action.message = try data?.string("message", max: limits.maxNameBytes)
            message = action
        }
        message.id = try f.requiredId("id")
        message.muid = try f.identifier("muid") ?? ""
        message.conversationId = try f.requiredIdentifier("conversationId")
        if let sender = try f.object("sender", entity: "user") {
            message.sender = try user(sender)
            message.senderUid = message.sender?.uid ?? ""
        } else {
            message.senderUid = try f.requiredIdentifier("senderUid")
        }
        message.sentAt = try f.requiredInt("sentAt")
        message.updatedAt = try f.double("updatedAt") ?? 0
        message.editedAt = try f.double("editedAt") ?? 0
        message.deletedAt = try f.double("deletedAt") ?? 0
        message.editedBy = try f.identifier("editedBy") ?? ""
        message.deletedBy = try f.identifier("deletedBy") ?? ""
        message.deliveredAt = try f.double("deliveredAt") ?? 0
        message.readAt = try f.double("readAt") ?? 0
        message.deliveredToMeAt = try f.double("deliveredToMeAt") ?? 0
        message.readByMeAt = try f.double("readByMeAt") ?? 0
        message.parentMessageId = try f.reference("parentId") ?? 0
        message.replyCount = try f.int("replyCount") ?? 0
        message.unreadRepliesCount = try f.int("unreadRepliesCount") ?? 0
        message.tags = try f.identifiers("tags")
        let topLevelMetadata = try f.freeform("metadata")
        message.metaData = try data?.freeform("metadata") ?? topLevelMetadata
        message.quotedMessageId = try f.reference("quotedMessageId") ?? 0
        message.pinnedAt = try f.double("pinnedAt") ?? 0
        message.pinnedBy = try f.identifier("pinnedBy") ?? ""
        message.savedAt = try f.double("savedAt") ?? 0
        message.mentionedMe = try f.bool("mentionedMe") ?? false
        for (i, item) in (try f.array("mentionedUsers") ?? []).enumerated() {
            message.mentionedUsers.append(try user(item, path: f.name("mentionedUsers") + "[\(i)]"))
        }
        for (i, item) in (try f.array("reactions") ?? []).enumerated() {
            let r = try Fields(item, entity: "message", path: f.name("reactions") + "[\(i)]", limits: limits, trusted: trusted)
            message.reactions.append(ReactionCount(reaction: try r.requiredString("reaction", max: 64), count: try r.int("count") ?? 0,
                                                   reactedByMe: try r.bool("reactedByMe") ?? false))
        }
        message.localMessageId = try f.identifier("localMessageId")
        if message.editedAt > 0 || message.deletedAt > 0 { message.status = message.deletedAt > 0 ? "deleted" : "edited" }
        return message
    }

    func attachment(_ value: JSONValue, path: String) throws(WireError) -> Attachment {
        // Also an upload's answer on its own: bounded as a whole (cheap inside a message).
        if !trusted { try Fields.checkWhole(value, entity: "message", limits: limits) }
        let f = try Fields(value, entity: "message", path: path, limits: limits, trusted: trusted)
        let attachment = Attachment(fileName: try f.string("name", max: limits.maxNameBytes) ?? "",
                                    fileExtension: try f.string("extension", max: limits.maxIdentifierBytes) ?? "",
                                    fileMimeType: try f.string("mimeType", max: limits.maxIdentifierBytes) ?? "application/octet-stream",
                                    fileUrl: try f.requiredString("url", max: limits.maxURLBytes))
        attachment.fileSize = try f.double("size") ?? 0
        return attachment
    }
}

extension Int64 {
    /// The whole part of a time or size the decoder validated (0 to `WireLimits.maxWireNumber`),
    /// never trapping: a value outside (a model the app filled itself) is clamped, NaN is 0.
    init(clampingWire time: Double) {
        let bound = Double(WireLimits.maxWireNumber)
        self = time.isNaN ? 0 : Int64(Swift.max(Swift.min(time, bound), -bound).rounded(.down))
    }
}
