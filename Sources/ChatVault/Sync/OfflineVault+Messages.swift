/// The receive path's public surface: message listeners and the stream of message events. The
/// work is done by `RealtimeIngest` (realtime events) and, later, the sync engine.
extension OfflineVault {
    /// Registers a message listener (held weakly; one per id: registering an id again replaces
    /// its listener). Works before login and across logout and login. Callbacks arrive on the
    /// callback executor, in arrival order, each after its event was written to the cache.
    ///
    ///     vault.addMessageListener("CHAT_SCREEN", screen)
    public func addMessageListener(_ id: String, _ listener: any CometChatMessageDelegate) {
        realtime.listeners.add(id, listener)
    }

    /// Removes the message listener registered under `id`, if any.
    public func removeMessageListener(_ id: String) {
        realtime.listeners.remove(id)
    }

    /// The message events as an `AsyncSequence`: the same events, in the same order, as a
    /// `CometChatMessageDelegate` hears (yielded from the callback executor, after the listeners).
    /// Each call makes a new stream, which lives until its consumer stops iterating.
    ///
    ///     for await event in vault.messageEvents() {
    ///         if case .received(let message) = event { show(message) }
    ///     }
    public func messageEvents() -> AsyncStream<MessageEvent> {
        realtime.stream()
    }
}

extension CometChat {
    /// Registers a message listener on the shared vault (see `OfflineVault.addMessageListener`).
    public static func addMessageListener(_ id: String, _ listener: any CometChatMessageDelegate) {
        offlineVault?.addMessageListener(id, listener)
    }

    /// Removes the shared vault's message listener registered under `id`, if any.
    public static func removeMessageListener(_ id: String) {
        offlineVault?.removeMessageListener(id)
    }
}
