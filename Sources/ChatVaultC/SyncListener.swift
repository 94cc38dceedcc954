public import CChatVault
import ChatVault

/// A C sync listener: each phase of a catch-up sweep as an event with a JSON object payload
/// (the models as `CModels` renders them) and, for the failed phases, the error.
final class SyncCallback: SyncListener, CListener, @unchecked Sendable {
    private let callback: cv_sync_callback
    private let state: CCallbackState

    init(callback: cv_sync_callback, userData: UnsafeMutableRawPointer?, destroy: cv_destroy_notify?) {
        self.callback = callback
        state = CCallbackState(userData: userData, destroy: destroy)
    }

    func register(with vault: OfflineVault, id: String) { vault.addSyncListener(id, self) }
    func unregister(from vault: OfflineVault, id: String) { vault.removeSyncListener(id) }
    func end() { state.end() }

    /// Delivers `event` with a JSON object payload (written by `payload`; `{}` when nil).
    private func call(_ event: cv_sync_event, _ error: CometChatException? = nil, _ payload: ((inout JSONWriter) -> Void)? = nil) {
        guard state.isLive else { return }
        var w = JSONWriter()
        w.open()
        payload?(&w)
        w.close()
        let json = w.finish()
        let userData = state.userData.pointer
        json.withCString { p in CBorrow.error(error) { e in callback(event, p, e, userData) } }
    }

    func onConversationSyncStarted() { call(CV_SYNC_EVENT_CONVERSATIONS_STARTED) }

    func onConversationSyncCompleted(_ conversations: [Conversation]) {
        guard state.isLive else { return }
        call(CV_SYNC_EVENT_CONVERSATIONS_COMPLETED) { w in
            w.key("conversations"); w.array(conversations, CModels.conversation)
        }
    }

    func onConversationSyncError(_ error: CometChatException) { call(CV_SYNC_EVENT_CONVERSATIONS_FAILED, error) }

    func onMessageSyncStarted() { call(CV_SYNC_EVENT_MESSAGES_STARTED) }

    func onMessageSyncCompleted(_ messages: [BaseMessage], _ outcome: SyncOutcome) {
        guard state.isLive else { return }
        call(CV_SYNC_EVENT_MESSAGES_COMPLETED) { w in
            w.key("messages"); w.array(messages, CModels.message)
            w.key("outcome"); w.string(outcome.rawValue)
        }
    }

    func onMessageSyncError(_ error: CometChatException) { call(CV_SYNC_EVENT_MESSAGES_FAILED, error) }
}

@c(cv_vault_add_sync_listener)
public func cvVaultAddSyncListener(_ vault: OpaquePointer?, _ callback: cv_sync_callback?, _ userData: UnsafeMutableRawPointer?,
                                   _ destroy: cv_destroy_notify?, _ out: ErrorOut) -> UInt32 {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return 0 }
    guard let callback else { CError.invalid(out, "a listener needs a callback"); return 0 }
    return box.add(SyncCallback(callback: callback, userData: userData, destroy: destroy))
}
