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
    /// The message's `muid` as the server holds it (a unique id a client may send with the message;
    /// Matrix: `org.chatvault.muid`); empty when it has none.
    public internal(set) var muid = ""
    /// The sender's profile when the server sent it; nil otherwise (`senderUid` still names them).
    public internal(set) var sender: User?
    /// The sender's uid; for an outbox send, the logged-in user's from the moment it is queued.
    public internal(set) var senderUid = ""
    /// Who the message goes to: a uid or a guid, as `receiverType` says.
    public var receiverUid: String
    /// Whether `receiverUid` names a user or a group.
    public var receiverType: ReceiverType
    /// The SDK's receiver object (a `User` or a `Group`). ChatVault does not fill it: always nil;
    /// read `receiverUid` and `receiverType`.
    public internal(set) var receiver: (any AppEntity)?
    /// What the message carries (`.text`, `.image`, …; `.custom` for custom and interactive
    /// messages, `.groupMember` for actions).
    public internal(set) var messageType: MessageType
    /// The message's family: `.message`, `.custom`, `.interactive`, `.action` or `.call`.
    public internal(set) var messageCategory: MessageCategory
    /// The app's free-form JSON sent with the message; nil when none.
    public var metaData: JSONValue?
    /// When the server accepted the message, server epoch seconds; on a message still in the
    /// outbox, the time it was composed (replaced by the server's once sent).
    public internal(set) var sentAt = 0
    /// On the logged-in user's own message: when it reached the other side (in a group, every other
    /// member), server epoch seconds; 0 until then.
    public internal(set) var deliveredAt: Double = 0
    /// On the logged-in user's own message: when the other side read it (in a group, every other
    /// member), server epoch seconds; 0 until then.
    public internal(set) var readAt: Double = 0
    /// On a message from someone else: when it reached the logged-in user's devices, server epoch
    /// seconds; 0 until then.
    public internal(set) var deliveredToMeAt: Double = 0
    /// On a message from someone else: when the logged-in user read it, server epoch seconds; 0
    /// while unread (the `unread` filters and counts follow it).
    public internal(set) var readByMeAt: Double = 0
    /// When the message last changed on the server (edit, delete, reaction…), server epoch seconds;
    /// 0 when the server did not say.
    public internal(set) var updatedAt: Double = 0
    /// When the message was last edited, server epoch seconds; 0 if never.
    public internal(set) var editedAt: Double = 0
    /// When the message was deleted, server epoch seconds; 0 if it was not.
    public internal(set) var deletedAt: Double = 0
    /// The uid of who last edited it; empty if never edited.
    public internal(set) var editedBy = ""
    /// The uid of who deleted it; empty if not deleted.
    public internal(set) var deletedBy = ""
    /// The legacy status string (not the offline status: see `messageStatus`).
    public internal(set) var status = ""
    /// The conversation the message belongs to (`ConversationID`: `<uid>_user_<uid>` or
    /// `group_<guid>`); set by the server, and for an outbox send when it is queued.
    public internal(set) var conversationId = ""
    /// The server id of the thread's parent when this is a thread reply; 0 for a top-level message.
    /// Set it before sending to reply in a thread.
    public var parentMessageId = 0
    /// How many replies this message has as a thread parent; 0 when none.
    public internal(set) var replyCount = 0
    /// Of those replies, how many the logged-in user has not read.
    public internal(set) var unreadRepliesCount = 0
    /// The message's tags (filtered by `MessagesRequest`'s `setTags(_:)`); nil when none were sent.
    public var tags: [String]?
    /// Each reaction on the message with its count, as the last rendering the cache received had
    /// them.
    public internal(set) var reactions: [ReactionCount] = []
    /// The users the message mentions; empty when none.
    public internal(set) var mentionedUsers: [User] = []
    /// Whether the message mentions the logged-in user.
    public internal(set) var mentionedMe = false
    /// The server id of the message this one quotes (a reply in the conversation, not a thread); 0
    /// when none. Set it before sending to quote a message.
    public var quotedMessageId = 0
    /// When the message was pinned in its conversation, server epoch seconds; 0 when not pinned.
    public internal(set) var pinnedAt: Double = 0
    /// The uid of who pinned it; empty when not pinned.
    public internal(set) var pinnedBy = ""
    /// When the logged-in user saved the message, server epoch seconds; 0 when not saved.
    public internal(set) var savedAt: Double = 0

    /// The SDK-generated handle of an outbox send; nil for messages that never went through it.
    public internal(set) var localMessageId: String?
    /// Lifecycle status (`.pending`, `.sending`, `.sent`, `.delivered`, `.read`, `.failed`).
    public internal(set) var messageStatus: MessageStatus = .sent
    /// Why a failed message last failed; nil otherwise. Device-only.
    public internal(set) var failureReason: MessageFailureReason?
    /// How the message reached the app.
    public internal(set) var source: MessageSource = .realtime

    /// A message to a user or a group (`receiverUid`, `receiverType`) of this type, category
    /// `.message`. Apps build the subclasses (`TextMessage`, `MediaMessage`, `CustomMessage`, …).
    public init(receiverUid: String, messageType: MessageType, receiverType: ReceiverType) {
        self.receiverUid = receiverUid
        self.messageType = messageType
        self.receiverType = receiverType
        messageCategory = .message
    }

    /// The SDK's getter for `failureReason`: why a failed message failed; nil unless `.failed`.
    public func getFailureReason() -> MessageFailureReason? { failureReason }
    /// The SDK's getter for `reactions`.
    public func getReactions() -> [ReactionCount] { reactions }
    /// The SDK's getter for `mentionedUsers`.
    public func getMentionedUsers() -> [User] { mentionedUsers }
    /// The SDK's getter for `mentionedMe`.
    public func hasMentionedMe() -> Bool { mentionedMe }

    /// `TextMessage(id 42, local <id>, sent)`: the type, ids and status, never the content (safe
    /// for logs).
    public var description: String {
        "\(Swift.type(of: self))(id \(id)\(localMessageId.map { ", local \($0)" } ?? ""), \(messageStatus.rawValue))"
    }
}

/// A text message.
public final class TextMessage: BaseMessage, @unchecked Sendable {
    /// The message's text (empty text is refused by the send methods).
    public var text: String

    /// A text message to a user or a group.
    public init(receiverUid: String, text: String, receiverType: ReceiverType) {
        self.text = text
        super.init(receiverUid: receiverUid, messageType: .text, receiverType: receiverType)
    }
}

/// A message with one or more attachments.
public final class MediaMessage: BaseMessage, @unchecked Sendable {
    /// The text shown with the media; nil when none.
    public var caption: String?
    /// The first of `attachments` (the SDK's single-attachment field); nil when there are none.
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

    /// A media message with one local file to upload (`fileurl`, a path or a `file://` URL; nil
    /// when `files` or `attachments` are set instead).
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
    /// The app's subtype within `type`; nil when none.
    public var subType: String?
    /// The app's data, free-form JSON; a send without it is refused (`ERROR_INVALID_MESSAGE`).
    public var customData: JSONValue?
    /// Whether the message becomes its conversation's last message (default true).
    public var updateConversation = true
    /// The text a conversation list shows for the message; nil to let the app decide.
    public var conversationText: String?

    /// A custom message of the app's `type` carrying `customData`, to a user or a group.
    public init(receiverUid: String, receiverType: ReceiverType, customData: JSONValue?, type: String?) {
        self.customData = customData
        self.type = type
        super.init(receiverUid: receiverUid, messageType: .custom, receiverType: receiverType)
        messageCategory = .custom
    }
}

/// A message with an interactive form or card.
public final class InteractiveMessage: BaseMessage, @unchecked Sendable {
    /// The interactive message's type (e.g. `"form"`, `"card"`), which the app's UI renders.
    public var type: String
    /// The form's or card's definition, free-form JSON.
    public var interactiveData: JSONValue
    /// Whether the sender may interact with their own message (default false).
    public var allowSenderInteraction = false
    /// Which interactions complete the message (free-form JSON, the SDK's `InteractionGoal`); nil
    /// when it has no goal.
    public var interactionGoal: JSONValue?
    /// The interactions so far, as the server sent them (each with `elementId` and `interactedAt`).
    public internal(set) var interactions: [JSONValue] = []

    /// An interactive message of this `type` with its `interactiveData`, to a user or a group.
    public init(receiverUid: String, type: String, receiverType: ReceiverType, interactiveData: JSONValue) {
        self.type = type
        self.interactiveData = interactiveData
        super.init(receiverUid: receiverUid, messageType: .custom, receiverType: receiverType)
        messageCategory = .interactive
    }
}

/// A group action or another system message (read-only).
public final class ActionMessage: BaseMessage, @unchecked Sendable {
    /// What happened (e.g. `"joined"`, `"kicked"`); nil when the server did not say.
    public internal(set) var action: String?
    /// The action as a sentence, as the server wrote it; nil when none.
    public internal(set) var message: String?

    init(receiverUid: String, receiverType: ReceiverType) {
        super.init(receiverUid: receiverUid, messageType: .groupMember, receiverType: receiverType)
        messageCategory = .action
    }
}
