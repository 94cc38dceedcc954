/// Hears every transition of the outbox, app-wide: live sends, the reconnect flush, manual
/// retries, and sends resumed after a restart whose closures are gone. Held weakly, one per id
/// (`OfflineVault.addOutboxListener(_:_:)`); delivered on the callback executor, in order.
///
///     final class OutboxObserver: OutboxListener {
///         func onOutboxMessageFailed(_ message: BaseMessage, _ reason: MessageFailureReason) {
///             print("failed: \(message.localMessageId ?? "") (\(reason))")
///         }
///     }
///     let observer = OutboxObserver()            // keep a strong reference
///     vault.addOutboxListener("OUTBOX", observer)
///
/// Every method has an empty default.
public protocol OutboxListener: AnyObject, Sendable {
    /// The message is durably queued (a new send, a manual retry of a failed one, or a refused
    /// send, which then fails at once).
    func onOutboxMessagePending(_ message: BaseMessage)
    /// The server accepted the message: it carries its server id and `sentAt`.
    func onOutboxMessageSent(_ message: BaseMessage)
    /// The message failed (or was refused, evicted or discarded) for `reason`.
    func onOutboxMessageFailed(_ message: BaseMessage, _ reason: MessageFailureReason)
}

extension OutboxListener {
    /// Does nothing: a listener hears only the events it implements.
    public func onOutboxMessagePending(_ message: BaseMessage) {}
    /// Does nothing: a listener hears only the events it implements.
    public func onOutboxMessageSent(_ message: BaseMessage) {}
    /// Does nothing: a listener hears only the events it implements.
    public func onOutboxMessageFailed(_ message: BaseMessage, _ reason: MessageFailureReason) {}
}
