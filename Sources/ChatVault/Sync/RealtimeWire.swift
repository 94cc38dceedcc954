/// Validation of realtime events (the shapes are documented on `RealtimeEvent`): everything a
/// `WireDecoder` checks, plus a bound on the event as a whole (its unknown fields are kept in the
/// cached payload, so they count too). Nothing here traps on hostile input: numbers beyond 2^53,
/// wrong types, missing fields, deep nesting and oversize events are refused as `WireError`s,
/// which name the field, never the value.
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

    /// The largest event accepted, encoded: a message's text and a few free-form fields, with room
    /// for the rest.
    static func maxEventBytes(_ limits: WireLimits) -> Int {
        let (sum, overflow) = limits.maxTextBytes.addingReportingOverflow(limits.maxFreeformBytes.multipliedReportingOverflow(by: 3).partialValue)
        return overflow ? Int.max : max(sum + 64 * 1024, 1 << 20)
    }

    /// Validates one event; nil for `.connected` / `.disconnected` (not content).
    static func parse(_ event: RealtimeEvent, limits: WireLimits) throws(WireError) -> Parsed? {
        let decoder = WireDecoder(limits: limits)
        switch event {
        case .connected, .disconnected:
            return nil
        case .messageReceived(let value):
            try checkShape(value, entity: "message", limits: limits)
            return .received(value, try serverMessage(value, decoder))
        case .messageEdited(let value):
            try checkShape(value, entity: "message", limits: limits)
            return .edited(value, try serverMessage(value, decoder))
        case .messageDeleted(let value):
            try checkShape(value, entity: "message", limits: limits)
            return .deleted(value, try serverMessage(value, decoder))
        case .reactionAdded(let value):
            try checkShape(value, entity: "reaction event", limits: limits)
            let (event, wire) = try reactionEvent(value, decoder)
            return .reaction(added: true, event, messageWire: wire)
        case .reactionRemoved(let value):
            try checkShape(value, entity: "reaction event", limits: limits)
            let (event, wire) = try reactionEvent(value, decoder)
            return .reaction(added: false, event, messageWire: wire)
        case .messagesDelivered(let value):
            try checkShape(value, entity: "receipt", limits: limits)
            return .receipt(try receipt(value, expected: .delivered, decoder))
        case .messagesRead(let value):
            try checkShape(value, entity: "receipt", limits: limits)
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

    /// The event as a whole: an object, nested no deeper than free-form JSON may be (with room for
    /// the entity's own levels), and no larger than `maxEventBytes`. Iterative: a hostile nesting
    /// cannot exhaust the stack before it is refused.
    static func checkShape(_ value: JSONValue, entity: String, limits: WireLimits) throws(WireError) {
        guard case .object = value else { throw WireError(entity: entity, field: "(root)", problem: .wrongType(expected: "an object")) }
        let maxDepth = limits.maxDepth + 8
        let maxNodes = limits.maxListCount * 64 + 4096
        var stack: [(JSONValue, Int)] = [(value, 1)]
        var nodes = 0
        var bytes = 0
        let cap = maxEventBytes(limits)
        while let (node, depth) = stack.popLast() {
            nodes += 1
            guard depth <= maxDepth else { throw WireError(entity: entity, field: "(root)", problem: .invalid("nested too deeply")) }
            guard nodes <= maxNodes else { throw WireError(entity: entity, field: "(root)", problem: .tooMany(limit: maxNodes)) }
            switch node {
            case .array(let items):
                for item in items { stack.append((item, depth + 1)) }
            case .object(let fields):
                for (key, item) in fields {
                    bytes += key.utf8.count
                    stack.append((item, depth + 1))
                }
            case .string(let s):
                bytes += s.utf8.count
            default:
                bytes += 9
            }
            guard bytes <= cap else { throw WireError(entity: entity, field: "(root)", problem: .tooLong(limit: cap)) }
        }
    }
}
