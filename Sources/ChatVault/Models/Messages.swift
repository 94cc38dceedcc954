public import Foundation

/// A message (`BaseMessage`); its subclasses carry the content.
///
/// The offline fields of the seeds: `localMessageId` (the outbox handle, stable from compose to
/// ack), `messageStatus` (`.pending` → `.sending` → `.sent`…), `failureReason` (only while failed),
/// `source` (`.realtime` or `.sync`). Descriptions never include the content.
public class BaseMessage: AppEntity, @unchecked Sendable, CustomStringConvertible {
    /// The server's id (0 until the server has the message). Set it on a message built to edit
    /// one, as the SDK does: `let m = TextMessage(…); m.id = 42; vault.editMessage(m, …)`.
    public var id = 0
    public internal(set) var muid = ""
    public internal(set) var sender: User?
    public internal(set) var senderUid = ""
    public var receiverUid: String
    public var receiverType: ReceiverType
    public internal(set) var receiver: (any AppEntity)?
    public internal(set) var messageType: MessageType
    public internal(set) var messageCategory: MessageCategory
    public var metaData: JSONValue?
    public internal(set) var sentAt = 0
    public internal(set) var deliveredAt: Double = 0
    public internal(set) var readAt: Double = 0
    public internal(set) var deliveredToMeAt: Double = 0
    public internal(set) var readByMeAt: Double = 0
    public internal(set) var updatedAt: Double = 0
    public internal(set) var editedAt: Double = 0
    public internal(set) var deletedAt: Double = 0
    public internal(set) var editedBy = ""
    public internal(set) var deletedBy = ""
    /// The legacy status string (not the offline status: see `messageStatus`).
    public internal(set) var status = ""
    public internal(set) var conversationId = ""
    public var parentMessageId = 0
    public internal(set) var replyCount = 0
    public internal(set) var unreadRepliesCount = 0
    public var tags: [String]?
    public internal(set) var reactions: [ReactionCount] = []
    public internal(set) var mentionedUsers: [User] = []
    public internal(set) var mentionedMe = false
    public var quotedMessageId = 0
    public internal(set) var pinnedAt: Double = 0
    public internal(set) var pinnedBy = ""
    public internal(set) var savedAt: Double = 0

    /// The SDK-generated handle of an outbox send; nil for messages that never went through it.
    public internal(set) var localMessageId: String?
    /// Lifecycle status (`.pending`, `.sending`, `.sent`, `.delivered`, `.read`, `.failed`).
    public internal(set) var messageStatus: MessageStatus = .sent
    /// Why a failed message last failed; nil otherwise. Device-only.
    public internal(set) var failureReason: MessageFailureReason?
    /// How the message reached the app.
    public internal(set) var source: MessageSource = .realtime

    public init(receiverUid: String, messageType: MessageType, receiverType: ReceiverType) {
        self.receiverUid = receiverUid
        self.messageType = messageType
        self.receiverType = receiverType
        messageCategory = .message
    }

    public func getFailureReason() -> MessageFailureReason? { failureReason }
    public func getReactions() -> [ReactionCount] { reactions }
    public func getMentionedUsers() -> [User] { mentionedUsers }
    public func hasMentionedMe() -> Bool { mentionedMe }

    public var description: String {
        "\(Swift.type(of: self))(id \(id)\(localMessageId.map { ", local \($0)" } ?? ""), \(messageStatus.rawValue))"
    }
}

/// A text message.
public final class TextMessage: BaseMessage, @unchecked Sendable {
    public var text: String

    public init(receiverUid: String, text: String, receiverType: ReceiverType) {
        self.text = text
        super.init(receiverUid: receiverUid, messageType: .text, receiverType: receiverType)
    }
}

/// A message with one or more attachments.
public final class MediaMessage: BaseMessage, @unchecked Sendable {
    public var caption: String?
    public internal(set) var attachment: Attachment?
    /// Files already uploaded (an `UploadFileRequest`'s attachments, or a received message's):
    /// sent as they are, with nothing copied.
    public var attachments: [Attachment] = [] {
        didSet { attachment = attachments.first }
    }
    /// A local file to upload (for sends), as a path or a `file://` URL.
    public var filePath: String?
    /// Local files to upload. A persistent send copies them into the cache before it reports
    /// pending, so the message survives a restart; the originals are not touched.
    public var files: [URL] = []

    public init(receiverUid: String, fileurl: String?, messageType: MessageType, receiverType: ReceiverType) {
        filePath = fileurl
        super.init(receiverUid: receiverUid, messageType: messageType, receiverType: receiverType)
    }

    /// A media message with local files to upload.
    ///
    ///     let photo = MediaMessage(receiverUid: "bob", files: [URL(fileURLWithPath: "/tmp/a.jpg")],
    ///                              messageType: .image, receiverType: .user)
    public init(receiverUid: String, files: [URL], messageType: MessageType, receiverType: ReceiverType) {
        self.files = files
        super.init(receiverUid: receiverUid, messageType: messageType, receiverType: receiverType)
    }
}

/// A message with app-defined data.
public final class CustomMessage: BaseMessage, @unchecked Sendable {
    /// The app's own type string (e.g. "location").
    public var type: String?
    public var subType: String?
    public var customData: JSONValue?
    public var updateConversation = true
    public var conversationText: String?

    public init(receiverUid: String, receiverType: ReceiverType, customData: JSONValue?, type: String?) {
        self.customData = customData
        self.type = type
        super.init(receiverUid: receiverUid, messageType: .custom, receiverType: receiverType)
        messageCategory = .custom
    }
}

/// A message with an interactive form or card.
public final class InteractiveMessage: BaseMessage, @unchecked Sendable {
    public var type: String
    public var interactiveData: JSONValue
    public var allowSenderInteraction = false
    public var interactionGoal: JSONValue?
    public internal(set) var interactions: [JSONValue] = []

    public init(receiverUid: String, type: String, receiverType: ReceiverType, interactiveData: JSONValue) {
        self.type = type
        self.interactiveData = interactiveData
        super.init(receiverUid: receiverUid, messageType: .custom, receiverType: receiverType)
        messageCategory = .interactive
    }
}

/// A group action or another system message (read-only).
public final class ActionMessage: BaseMessage, @unchecked Sendable {
    public internal(set) var action: String?
    public internal(set) var message: String?

    init(receiverUid: String, receiverType: ReceiverType) {
        super.init(receiverUid: receiverUid, messageType: .groupMember, receiverType: receiverType)
        messageCategory = .action
    }
}
