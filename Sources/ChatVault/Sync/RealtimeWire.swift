/// Validation of realtime events (the shapes are documented on `RealtimeEvent`): everything a
/// `WireDecoder` checks, which includes the bound on each event as a whole (`WireLimits.maxItemBytes`
/// and the item depth, unknown fields counted: they are kept in the cached payload). Nothing here
/// traps on hostile input: numbers beyond 2^53, wrong types, missing fields, deep nesting and
/// oversize events are refused as `WireError`s, which name the field, never the value.
enum RealtimeWire {
    /// What one realtime event says, validated.
    enum Parsed: Sendable {
        case received(JSONValue, BaseMessage)
        case edited(JSONValue, BaseMessage)
        case deleted(JSONValue, BaseMessage)
        /// The reaction, and the message as it now stands when the server sent it.
        case reaction(added: Bool, ReactionEvent, messageWire: JSONValue?)
        case receipt(MessageReceipt)
    }

    /// Validates one event; nil for `.connected` / `.disconnected` (not content).
    static func parse(_ event: RealtimeEvent, limits: WireLimits) throws(WireError) -> Parsed? {
        let decoder = WireDecoder(limits: limits)
        switch event {
        case .connected, .disconnected:
            return nil
        case .messageReceived(let value):
            return .received(value, try serverMessage(value, decoder))
        case .messageEdited(let value):
            return .edited(value, try serverMessage(value, decoder))
        case .messageDeleted(let value):
            return .deleted(value, try serverMessage(value, decoder))
        case .reactionAdded(let value):
            let (event, wire) = try reactionEvent(value, decoder)
            return .reaction(added: true, event, messageWire: wire)
        case .reactionRemoved(let value):
            let (event, wire) = try reactionEvent(value, decoder)
            return .reaction(added: false, event, messageWire: wire)
        case .messagesDelivered(let value):
            return .receipt(try receipt(value, expected: .delivered, decoder))
        case .messagesRead(let value):
            return .receipt(try receipt(value, expected: .read, decoder))
        }
    }

    /// A message with a server id (the cache keys rows by it).
    private static func serverMessage(_ value: JSONValue, _ decoder: WireDecoder, path: String = "") throws(WireError) -> BaseMessage {
        let message = try decoder.message(value, path: path)
        guard message.id > 0 else {
            throw WireError(entity: "message", field: path.isEmpty ? "id" : "\(path).id", problem: .invalid("not a server id"))
        }
        return message
    }

    static func reactionEvent(_ value: JSONValue, _ decoder: WireDecoder) throws(WireError) -> (ReactionEvent, JSONValue?) {
        let f = try WireDecoder.Fields(value, entity: "reaction event", limits: decoder.limits)
        guard let reactionValue = f.present("reaction") else { throw f.fail("reaction", .missing) }
        let reaction = try decoder.reaction(reactionValue)
        guard reaction.messageId > 0 else { throw f.fail("reaction.messageId", .invalid("not a server id")) }
        let conversationId = try f.requiredIdentifier("conversationId")
        var message: BaseMessage?
        let wire = f.present("message")
        if let wire {
            let m = try serverMessage(wire, decoder, path: "message")
            guard m.id == reaction.messageId, m.conversationId == conversationId else {
                throw f.fail("message", .invalid("another message than the reaction's"))
            }
            message = m
        }
        let event = ReactionEvent(reaction: reaction, receiverId: try f.requiredIdentifier("receiverId"),
                                  receiverType: try f.choice("receiverType", ReceiverType.self) ?? .user,
                                  conversationId: conversationId, parentMessageId: max(try f.int("parentMessageId") ?? 0, 0),
                                  message: message)
        return (event, wire)
    }

    static func receipt(_ value: JSONValue, expected: MessageReceipt.ReceiptType, _ decoder: WireDecoder) throws(WireError) -> MessageReceipt {
        let f = try WireDecoder.Fields(value, entity: "receipt", limits: decoder.limits)
        let messageId = try f.requiredInt("messageId")
        guard messageId > 0 else { throw f.fail("messageId", .invalid("not a server id")) }
        guard let senderValue = f.present("sender") else { throw f.fail("sender", .missing) }
        let type = try f.choice("receiptType", MessageReceipt.ReceiptType.self) ?? expected
        guard type == expected else { throw f.fail("receiptType", .invalid("does not match the event")) }
        let timestamp = try f.double("timestamp") ?? 0
        return MessageReceipt(messageId: messageId, sender: try decoder.user(senderValue, path: "sender"),
                              receiverId: try f.requiredIdentifier("receiverId"),
                              receiverType: try f.choice("receiverType", ReceiverType.self) ?? .user,
                              conversationId: try f.requiredIdentifier("conversationId"), receiptType: type, timestamp: timestamp,
                              deliveredAt: try f.double("deliveredAt") ?? (type == .delivered ? timestamp : 0),
                              readAt: try f.double("readAt") ?? (type == .read ? timestamp : 0))
    }
}
