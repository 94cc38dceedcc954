public import CChatVault
import ChatVault
import Foundation
import Synchronization

/// What a C callback of the other kinds shares: its user data, its destroy notifier (once), and
/// whether it may still run (checked on the dispatching thread).
final class CCallbackState: @unchecked Sendable {
    let userData: UserData
    private let destroy: cv_destroy_notify?
    private let live = Mutex(true)

    init(userData: UnsafeMutableRawPointer?, destroy: cv_destroy_notify?) {
        self.userData = UserData(pointer: userData)
        self.destroy = destroy
    }

    var isLive: Bool { live.withLock { $0 } }

    func end() {
        guard live.withLock({ s -> Bool in defer { s = false }; return s }) else { return }
        destroy?(userData.pointer)
    }
}

/// Messages as they arrive: `event` is "received" (realtime), "edited", "deleted" or "synced"
/// (each message the catch-up brought), with the message as JSON.
final class MessageCallback: CometChatMessageDelegate, CListener, @unchecked Sendable {
    private let callback: cv_message_callback
    private let state: CCallbackState

    init(callback: cv_message_callback, userData: UnsafeMutableRawPointer?, destroy: cv_destroy_notify?) {
        self.callback = callback
        state = CCallbackState(userData: userData, destroy: destroy)
    }

    func register(with vault: OfflineVault, id: String) { vault.addMessageListener(id, self) }
    func unregister(from vault: OfflineVault, id: String) { vault.removeMessageListener(id) }
    func end() { state.end() }

    private func call(_ event: String, _ message: BaseMessage) {
        guard state.isLive else { return }
        let json = CModels.messageText(message)
        event.withCString { e in json.withCString { m in callback(e, m, state.userData.pointer) } }
    }

    func onTextMessageReceived(textMessage: TextMessage) { call("received", textMessage) }
    func onMediaMessageReceived(mediaMessage: MediaMessage) { call("received", mediaMessage) }
    func onCustomMessageReceived(customMessage: CustomMessage) { call("received", customMessage) }
    func onMessageEdited(message: BaseMessage) { call("edited", message) }
    func onMessageDeleted(message: BaseMessage) { call("deleted", message) }
    func onMessagesSynced(_ messages: [BaseMessage]) { for m in messages { call("synced", m) } }
}

/// The outbox as it changes: pending, sent or failed (with the failure reason), as C enums.
final class OutboxCallback: OutboxListener, CListener, @unchecked Sendable {
    private let callback: cv_outbox_callback
    private let state: CCallbackState

    init(callback: cv_outbox_callback, userData: UnsafeMutableRawPointer?, destroy: cv_destroy_notify?) {
        self.callback = callback
        state = CCallbackState(userData: userData, destroy: destroy)
    }

    func register(with vault: OfflineVault, id: String) { vault.addOutboxListener(id, self) }
    func unregister(from vault: OfflineVault, id: String) { vault.removeOutboxListener(id) }
    func end() { state.end() }

    private func call(_ event: cv_outbox_event, _ message: BaseMessage, _ reason: cv_failure_reason) {
        guard state.isLive else { return }
        CModels.messageText(message).withCString { m in callback(event, m, reason, state.userData.pointer) }
    }

    func onOutboxMessagePending(_ message: BaseMessage) { call(CV_OUTBOX_PENDING, message, CV_FAILURE_NONE) }
    func onOutboxMessageSent(_ message: BaseMessage) { call(CV_OUTBOX_SENT, message, CV_FAILURE_NONE) }
    func onOutboxMessageFailed(_ message: BaseMessage, _ reason: MessageFailureReason) { call(CV_OUTBOX_FAILED, message, CEnums.failure(reason)) }
}

@c(cv_vault_add_message_listener)
public func cvVaultAddMessageListener(_ vault: OpaquePointer?, _ callback: cv_message_callback?, _ userData: UnsafeMutableRawPointer?,
                                      _ destroy: cv_destroy_notify?, _ out: ErrorOut) -> UInt32 {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return 0 }
    guard let callback else { CError.invalid(out, "a listener needs a callback"); return 0 }
    return box.add(MessageCallback(callback: callback, userData: userData, destroy: destroy))
}

@c(cv_vault_add_outbox_listener)
public func cvVaultAddOutboxListener(_ vault: OpaquePointer?, _ callback: cv_outbox_callback?, _ userData: UnsafeMutableRawPointer?,
                                     _ destroy: cv_destroy_notify?, _ out: ErrorOut) -> UInt32 {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return 0 }
    guard let callback else { CError.invalid(out, "a listener needs a callback"); return 0 }
    return box.add(OutboxCallback(callback: callback, userData: userData, destroy: destroy))
}

@c(cv_vault_fetch_conversations_sync)
public func cvVaultFetchConversationsSync(_ vault: OpaquePointer?, _ limit: Int32, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard (1...50).contains(limit) else { CError.invalid(out, "limit is 1 to 50"); return nil }
    let engine = box.vault
    let json = waitDispatching(box.dispatcher) { () async -> JSONText in
        let result = await ConversationRequest.ConversationRequestBuilder(limit: Int(limit), vault: engine).build().fetchNext()
        return CModels.phases(cached: result.cached, server: result.server, CModels.conversation)
    }
    return owned(json)
}

@c(cv_vault_force_sync_now_sync)
public func cvVaultForceSyncNowSync(_ vault: OpaquePointer?, _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    let engine = box.vault
    let failure = waitDispatching(box.dispatcher) { () async -> CometChatException? in
        do throws(CometChatException) { _ = try await engine.syncNow(); return nil } catch { return error }
    }
    if let failure { CError.from(out, failure); return false }
    return true
}

@c(cv_vault_get_sync_state)
public func cvVaultGetSyncState(_ vault: OpaquePointer?) -> cv_sync_state {
    vaults.get(vault)?.vault.getSyncState() == .syncing ? CV_SYNC_SYNCING : CV_SYNC_IDLE
}

@c(cv_vault_get_last_sync_timestamp)
public func cvVaultGetLastSyncTimestamp(_ vault: OpaquePointer?) -> Int64 {
    guard let box = vaults.get(vault) else { return -1 }
    return Int64(box.vault.getLastSyncTimestamp())
}

@c(cv_vault_retry_message_sync)
public func cvVaultRetryMessageSync(_ vault: OpaquePointer?, _ localId: UnsafePointer<CChar>?, _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    guard let localId = text(localId), !localId.isEmpty else { CError.invalid(out, "local_id must be a UTF-8 string"); return false }
    let engine = box.vault
    let failure = waitDispatching(box.dispatcher) { () async -> CometChatException? in
        await withCheckedContinuation { (done: CheckedContinuation<CometChatException?, Never>) in
            engine.retryMessage(localId, onSuccess: { done.resume(returning: nil) }, onError: { done.resume(returning: $0) })
        }
    }
    if let failure { CError.from(out, failure); return false }
    return true
}

@c(cv_vault_discard_message_sync)
public func cvVaultDiscardMessageSync(_ vault: OpaquePointer?, _ localId: UnsafePointer<CChar>?, _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    guard let localId = text(localId), !localId.isEmpty else { CError.invalid(out, "local_id must be a UTF-8 string"); return false }
    let engine = box.vault
    let failure = waitDispatching(box.dispatcher) { () async -> CometChatException? in
        do throws(CometChatException) { try await engine.discard(localId); return nil } catch { return error }
    }
    if let failure { CError.from(out, failure); return false }
    box.finish(localId: localId)
    return true
}
