/// Hears messages as they reach the app: over the realtime connection while connected
/// (`source == .realtime`), and from the catch-up sync after a reconnect (`onMessagesSynced`,
/// `source == .sync`). Each event is written to the cache before it is delivered, so a cached read
/// made from a callback already sees it. Held weakly, one per id
/// (`OfflineVault.addMessageListener(_:_:)`); delivered on the callback executor, in arrival order.
///
///     final class ChatScreen: CometChatMessageDelegate {
///         func onTextMessageReceived(textMessage: TextMessage) { show(textMessage) }
///         func onMessagesRead(receipt: MessageReceipt) { markRead(upTo: receipt.messageId) }
///     }
///     let screen = ChatScreen()                  // keep a strong reference
///     vault.addMessageListener("CHAT_SCREEN", screen)
///
/// Every method has an empty default.
public protocol CometChatMessageDelegate: AnyObject, Sendable {
    /// A text message (over the realtime connection: `source == .realtime`).
    func onTextMessageReceived(textMessage: TextMessage)
    /// A media message; its attachments carry their URLs (metadata only).
    func onMediaMessageReceived(mediaMessage: MediaMessage)
    /// A custom message.
    func onCustomMessageReceived(customMessage: CustomMessage)
    /// A message was edited: the message as it now reads (`editedAt`, `editedBy`).
    func onMessageEdited(message: BaseMessage)
    /// The message as deleted (`deletedAt`, `deletedBy`).
    func onMessageDeleted(message: BaseMessage)
    /// Someone reacted to a message: the reaction, and the message with its new counts when the
    /// server sent it.
    func onMessageReactionAdded(reactionEvent: ReactionEvent)
    /// Someone took a reaction back: the reaction removed, and the message with its new counts when
    /// the server sent it.
    func onMessageReactionRemoved(reactionEvent: ReactionEvent)
    /// Messages reached someone's devices, up to and including `receipt.messageId`.
    func onMessagesDelivered(receipt: MessageReceipt)
    /// Someone read the conversation up to and including `receipt.messageId` (the logged-in user's
    /// own receipt from another device included).
    func onMessagesRead(receipt: MessageReceipt)
    /// The offline addition: messages the catch-up sync brought after a reconnect
    /// (`source == .sync`), in the order they were written.
    func onMessagesSynced(_ messages: [BaseMessage])
    /// An interactive message (form, card). Action messages (group changes) are cached and appear
    /// in `messageEvents()`, but as in the SDK no delegate method reports them here.
    func onInteractiveMessageReceived(interactiveMessage: InteractiveMessage)
}

extension CometChatMessageDelegate {
    /// Does nothing: a delegate hears only the events it implements.
    public func onTextMessageReceived(textMessage: TextMessage) {}
    /// Does nothing: a delegate hears only the events it implements.
    public func onMediaMessageReceived(mediaMessage: MediaMessage) {}
    /// Does nothing: a delegate hears only the events it implements.
    public func onCustomMessageReceived(customMessage: CustomMessage) {}
    /// Does nothing: a delegate hears only the events it implements.
    public func onMessageEdited(message: BaseMessage) {}
    /// Does nothing: a delegate hears only the events it implements.
    public func onMessageDeleted(message: BaseMessage) {}
    /// Does nothing: a delegate hears only the events it implements.
    public func onMessageReactionAdded(reactionEvent: ReactionEvent) {}
    /// Does nothing: a delegate hears only the events it implements.
    public func onMessageReactionRemoved(reactionEvent: ReactionEvent) {}
    /// Does nothing: a delegate hears only the events it implements.
    public func onMessagesDelivered(receipt: MessageReceipt) {}
    /// Does nothing: a delegate hears only the events it implements.
    public func onMessagesRead(receipt: MessageReceipt) {}
    /// Does nothing: a delegate hears only the events it implements.
    public func onMessagesSynced(_ messages: [BaseMessage]) {}
    /// Does nothing: a delegate hears only the events it implements.
    public func onInteractiveMessageReceived(interactiveMessage: InteractiveMessage) {}
}

/// Someone reacted to a message, or took a reaction back (`ReactionEvent`).
public final class ReactionEvent: @unchecked Sendable, CustomStringConvertible {
    /// The reaction: who, which emoji, on which message.
    public let reaction: Reaction
    /// The reacted message's receiver (a uid or a guid).
    public let receiverId: String
    /// Whether `receiverId` is a user or a group.
    public let receiverType: ReceiverType
    /// The reacted message's conversation id.
    public let conversationId: String
    /// The thread the message belongs to (0 for a top-level message).
    public let parentMessageId: Int
    /// The message with its reaction counts as they now stand, when the server sent it.
    public let message: BaseMessage?

    init(reaction: Reaction, receiverId: String, receiverType: ReceiverType, conversationId: String, parentMessageId: Int,
         message: BaseMessage?) {
        self.reaction = reaction
        self.receiverId = receiverId
        self.receiverType = receiverType
        self.conversationId = conversationId
        self.parentMessageId = parentMessageId
        self.message = message
    }

    /// `ReactionEvent(on <message id>)`: the id only, never the emoji or the user (safe for logs).
    public var description: String { "ReactionEvent(on \(reaction.messageId))" }
}

/// A delivery or read receipt (`MessageReceipt`): `sender` got or read the conversation up to
/// `messageId`.
public final class MessageReceipt: @unchecked Sendable, CustomStringConvertible {
    /// The SDK's `ReceiptType`.
    public enum ReceiptType: String, Sendable, CaseIterable {
        /// The messages reached the sender's devices (`.delivered`) or were read (`.read`).
        case delivered, read
    }

    /// The server id of the last message the receipt covers: every message of the conversation up
    /// to it is delivered or read.
    public let messageId: Int
    /// Who received or read the messages.
    public let sender: User
    /// Whom the receipt concerns: in a one-to-one conversation the other user (whose messages were
    /// delivered or read), in a group its guid.
    public let receiverId: String
    /// Whether `receiverId` is a user or a group.
    public let receiverType: ReceiverType
    /// The conversation the receipt is about.
    public let conversationId: String
    /// `.delivered` or `.read`.
    public let receiptType: ReceiptType
    /// When, in epoch seconds.
    public let timestamp: Double
    /// When the messages were delivered, epoch seconds; `timestamp` for a delivery receipt when the
    /// server sent no separate time, 0 on a read receipt without one.
    public let deliveredAt: Double
    /// When the messages were read, epoch seconds; `timestamp` for a read receipt when the server
    /// sent no separate time, 0 on a delivery receipt.
    public let readAt: Double

    init(messageId: Int, sender: User, receiverId: String, receiverType: ReceiverType, conversationId: String,
         receiptType: ReceiptType, timestamp: Double, deliveredAt: Double, readAt: Double) {
        self.messageId = messageId
        self.sender = sender
        self.receiverId = receiverId
        self.receiverType = receiverType
        self.conversationId = conversationId
        self.receiptType = receiptType
        self.timestamp = timestamp
        self.deliveredAt = deliveredAt
        self.readAt = readAt
    }

    /// `MessageReceipt(<type> up to <message id>)`: never the user (safe for logs).
    public var description: String { "MessageReceipt(\(receiptType.rawValue) up to \(messageId))" }
}

/// One event of `OfflineVault.messageEvents()`: what a `CometChatMessageDelegate` hears, as values.
public enum MessageEvent: Sendable {
    /// A new message (text, media, custom, interactive or action).
    case received(BaseMessage)
    /// A message was edited: the message as it now reads.
    case edited(BaseMessage)
    /// A message was deleted: the message as deleted (`deletedAt`, `deletedBy`).
    case deleted(BaseMessage)
    /// Someone reacted to a message.
    case reactionAdded(ReactionEvent)
    /// Someone took a reaction back.
    case reactionRemoved(ReactionEvent)
    /// A delivery receipt.
    case delivered(MessageReceipt)
    /// A read receipt.
    case read(MessageReceipt)
    /// Messages the catch-up sync brought (`source == .sync`).
    case synced([BaseMessage])
}
