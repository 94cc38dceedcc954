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
    func onTextMessageReceived(textMessage: TextMessage)
    /// A media message; its attachments carry their URLs (metadata only).
    func onMediaMessageReceived(mediaMessage: MediaMessage)
    /// A custom message.
    func onCustomMessageReceived(customMessage: CustomMessage)
    func onMessageEdited(message: BaseMessage)
    /// The message as deleted (`deletedAt`, `deletedBy`).
    func onMessageDeleted(message: BaseMessage)
    func onMessageReactionAdded(reactionEvent: ReactionEvent)
    func onMessageReactionRemoved(reactionEvent: ReactionEvent)
    func onMessagesDelivered(receipt: MessageReceipt)
    func onMessagesRead(receipt: MessageReceipt)
    /// The offline addition: messages the catch-up sync brought after a reconnect
    /// (`source == .sync`), in the order they were written.
    func onMessagesSynced(_ messages: [BaseMessage])
    /// An interactive message (form, card). Action messages (group changes) are cached and appear
    /// in `messageEvents()`, but as in the SDK no delegate method reports them here.
    func onInteractiveMessageReceived(interactiveMessage: InteractiveMessage)
}

extension CometChatMessageDelegate {
    public func onTextMessageReceived(textMessage: TextMessage) {}
    public func onMediaMessageReceived(mediaMessage: MediaMessage) {}
    public func onCustomMessageReceived(customMessage: CustomMessage) {}
    public func onMessageEdited(message: BaseMessage) {}
    public func onMessageDeleted(message: BaseMessage) {}
    public func onMessageReactionAdded(reactionEvent: ReactionEvent) {}
    public func onMessageReactionRemoved(reactionEvent: ReactionEvent) {}
    public func onMessagesDelivered(receipt: MessageReceipt) {}
    public func onMessagesRead(receipt: MessageReceipt) {}
    public func onMessagesSynced(_ messages: [BaseMessage]) {}
    public func onInteractiveMessageReceived(interactiveMessage: InteractiveMessage) {}
}

/// Someone reacted to a message, or took a reaction back (`ReactionEvent`).
public final class ReactionEvent: @unchecked Sendable, CustomStringConvertible {
    /// The reaction: who, which emoji, on which message.
    public let reaction: Reaction
    /// The reacted message's receiver (a uid or a guid).
    public let receiverId: String
    public let receiverType: ReceiverType
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

    public var description: String { "ReactionEvent(on \(reaction.messageId))" }
}

/// A delivery or read receipt (`MessageReceipt`): `sender` got or read the conversation up to
/// `messageId`.
public final class MessageReceipt: @unchecked Sendable, CustomStringConvertible {
    /// The SDK's `ReceiptType`.
    public enum ReceiptType: String, Sendable, CaseIterable {
        case delivered, read
    }

    public let messageId: Int
    /// Who received or read the messages.
    public let sender: User
    public let receiverId: String
    public let receiverType: ReceiverType
    public let conversationId: String
    public let receiptType: ReceiptType
    /// When, in epoch seconds.
    public let timestamp: Double
    public let deliveredAt: Double
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

    public var description: String { "MessageReceipt(\(receiptType.rawValue) up to \(messageId))" }
}

/// One event of `OfflineVault.messageEvents()`: what a `CometChatMessageDelegate` hears, as values.
public enum MessageEvent: Sendable {
    /// A new message (text, media, custom, interactive or action).
    case received(BaseMessage)
    case edited(BaseMessage)
    case deleted(BaseMessage)
    case reactionAdded(ReactionEvent)
    case reactionRemoved(ReactionEvent)
    case delivered(MessageReceipt)
    case read(MessageReceipt)
    /// Messages the catch-up sync brought (`source == .sync`).
    case synced([BaseMessage])
}
