/// A message's server id (`BaseMessage.id`), typed: where the engine keys messages (the writer's
/// batches and what it publishes), a conversation id, a local id or a count cannot be passed by
/// mistake. Ids are positive; 0 is a message the server has not acknowledged.
///
///     let id = message.messageID          // MessageID(42)
///     id.rawValue                          // 42, as `message.id`
public struct MessageID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The id as the server sends it and `BaseMessage.id` holds it.
    public let rawValue: Int

    /// An id as it is (a server's or a cached row's).
    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    /// An id as it is (a server's or a cached row's).
    public init(_ rawValue: Int) {
        self.rawValue = rawValue
    }

    /// Ids order as the server's do (newer messages have larger ids).
    public static func < (a: MessageID, b: MessageID) -> Bool {
        a.rawValue < b.rawValue
    }

    /// The decimal id (ids hold no content).
    public var description: String { String(rawValue) }
}

extension BaseMessage {
    /// The message's server id, typed (`MessageID(id)`).
    public var messageID: MessageID { MessageID(id) }
}
