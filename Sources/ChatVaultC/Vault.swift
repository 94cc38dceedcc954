public import CChatVault
import ChatVault
import ChatVaultSimulator
import Foundation
import Synchronization
import VaultKeys
import VaultStore

/// A vault as the C side holds it: the engine, the dispatcher its callbacks go through, and the
/// listeners C registered (held strongly here: the engine holds listeners weakly).
final class VaultBox: Sendable {
    let vault: OfflineVault
    let dispatcher: Dispatcher
    private let listeners = Mutex<(next: UInt32, table: [UInt32: any CListener])>((1, [:]))
    /// Sends still waiting for their last stage (their destroy notifiers run at the latest on free),
    /// and which of them holds which local id (known from "pending" on).
    private let sends = Mutex<(next: UInt64, table: [UInt64: (send: SendCallback, localId: String?)], byLocalId: [String: UInt64])>((1, [:], [:]))

    init(vault: OfflineVault, dispatcher: Dispatcher) {
        self.vault = vault
        self.dispatcher = dispatcher
    }

    /// Registers a listener with the engine under `c-<id>` (one id space for every kind).
    func add(_ listener: any CListener) -> UInt32 {
        let id = listeners.withLock { s -> UInt32 in
            let id = s.next
            s.next &+= 1
            if s.next == 0 { s.next = 1 }
            s.table[id] = listener
            return id
        }
        listener.register(with: vault, id: "c-\(id)")
        return id
    }

    func remove(_ id: UInt32) -> Bool {
        guard let listener = listeners.withLock({ $0.table.removeValue(forKey: id) }) else { return false }
        listener.unregister(from: vault, id: "c-\(id)")
        listener.end()
        return true
    }

    func track(_ send: SendCallback) -> UInt64 {
        sends.withLock { s in
            let id = s.next
            s.next += 1
            s.table[id] = (send, nil)
            return id
        }
    }

    func finish(_ id: UInt64) {
        sends.withLock { s -> SendCallback? in
            guard let entry = s.table.removeValue(forKey: id) else { return nil }
            if let localId = entry.localId { s.byLocalId[localId] = nil }
            return entry.send
        }?.end()
    }

    /// Remembers the local id a send's message was stamped with.
    func name(_ id: UInt64, localId: String?) {
        guard let localId else { return }
        sends.withLock { s in
            guard s.table[id] != nil else { return }
            s.table[id]?.localId = localId
            s.byLocalId[localId] = id
        }
    }

    /// A send whose message was discarded: the seeds give it no final outcome, so its C callback
    /// hears nothing more and its destroy notifier runs now.
    func finish(localId: String) {
        guard let id = sends.withLock({ $0.byLocalId[localId] }) else { return }
        finish(id)
    }

    /// Every listener and send removed, each destroy notifier run once.
    func endAll() {
        let all = listeners.withLock { s -> [(UInt32, any CListener)] in defer { s.table = [:] }; return Array(s.table) }
        for (id, listener) in all {
            listener.unregister(from: vault, id: "c-\(id)")
            listener.end()
        }
        let pending = sends.withLock { s -> [SendCallback] in defer { s.table = [:]; s.byLocalId = [:] }; return s.table.values.map(\.send) }
        for send in pending { send.end() }
    }
}

/// A `void *user_data` as the C side gave it (never dereferenced here).
struct UserData: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer?
}

/// A listener C registered: the engine's side of it, and its end (the destroy notifier, once).
protocol CListener: AnyObject, Sendable {
    func register(with vault: OfflineVault, id: String)
    func unregister(from vault: OfflineVault, id: String)
    func end()
}

/// A C reset callback: runs only while registered (checked on the dispatching thread), its
/// destroy notifier once.
final class ResetListener: OfflineCacheResetListener, CListener, @unchecked Sendable {
    func register(with vault: OfflineVault, id: String) { vault.addOfflineCacheResetListener(id, self) }
    func unregister(from vault: OfflineVault, id: String) { vault.removeOfflineCacheResetListener(id) }
    private let callback: cv_reset_callback
    private let state: CCallbackState

    init(callback: cv_reset_callback, destroy: cv_destroy_notify?, userData: UnsafeMutableRawPointer?) {
        self.callback = callback
        state = CCallbackState(userData: userData, destroy: destroy)
    }

    func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) {
        guard state.isLive else { return }
        callback(CEnums.reason(reason), Int32(clamping: pendingMessagesLost), state.userData.pointer)
    }

    func end() { state.end() }
}

/// A C send callback (stages "pending", "sent", "error").
final class SendCallback: @unchecked Sendable {
    private let callback: cv_send_callback
    private let state: CCallbackState

    init(callback: cv_send_callback, destroy: cv_destroy_notify?, userData: UnsafeMutableRawPointer?) {
        self.callback = callback
        state = CCallbackState(userData: userData, destroy: destroy)
    }

    func stage(_ name: String, _ message: BaseMessage, _ error: CometChatException?) {
        guard state.isLive else { return }
        let json = CModels.messageText(message)
        let userData = state.userData.pointer
        name.withCString { stage in
            json.withCString { text in
                CBorrow.error(error) { e in callback(stage, text, e, userData) }
            }
        }
    }

    func end() { state.end() }
}

/// A send's closures for the engine, the same for every kind (`cv_vault_send_text`'s rule): each
/// stage to the C callback; "sent" is the last stage, and so is any error but
/// ERROR_INTERNET_UNAVAILABLE (queued: "sent" follows on reconnect). The error stage shows the
/// message as the engine stamped it (its local id, its status). The closures hold the box weakly:
/// the engine keeps a queued send's closures (for its "sent" on reconnect) and the box holds the
/// engine, so a strong capture kept a vault freed with a queued send alive for the process's life.
enum CSend {
    static func start<Message: BaseMessage>(_ box: VaultBox, _ message: Message, _ callback: cv_send_callback,
                                            _ userData: UnsafeMutableRawPointer?, _ destroy: cv_destroy_notify?,
                                            _ send: (Message, @escaping @Sendable (Message) -> Void, @escaping @Sendable (Message) -> Void,
                                                     @escaping @Sendable (CometChatException?) -> Void) -> Void) {
        let stages = SendCallback(callback: callback, destroy: destroy, userData: userData)
        let id = box.track(stages)
        send(message, { [weak box] m in
            box?.name(id, localId: m.localMessageId)
            stages.stage("pending", m, nil)
        }, { [weak box] m in
            stages.stage("sent", m, nil)
            box?.finish(id)
        }, { [weak box] error in
            let failure = error ?? CometChatException(errorCode: "ERR_UNKNOWN", errorDescription: "the send failed")
            stages.stage("error", message, failure)
            if failure.errorCode != CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE { box?.finish(id) }
        })
    }
}

let vaults = HandleTable<VaultBox>(tag: 0x5a)

/// The settings JSON of the vault constructors, every key checked (chatvault.h lists them).
enum CSettings {
    static let configKeys: Set<String> = [
        "enabled", "encryption", "encryptionFailureBehavior", "cacheDurationDays", "maxStorageSize", "maxMessagesPerConversation",
        "maxConversations", "maxPendingMessages", "autoSendPendingOnReconnect", "pendingQueueOverflowPolicy", "maxMediaCacheSize",
        "mediaCaching", "maxSnapshotQueries", "snapshotTtlDays",
    ]
    static let settingKeys: Set<String> = [
        "applicationId", "applicationName", "rootDirectory", "keyStore", "keyDirectory", "secretServiceUnlockPrompt",
        "secretServiceTimeoutMs", "retry", "reconnect", "escalationThreshold", "quarantine", "synchronousIntegrityCheckLimit",
        "evictionDelayMs", "stableConnectionDelayMs", "sync", "media",
    ]
    static let retryKeys: Set<String> = ["initialDelayMs", "maximumDelayMs", "multiplier"]
    static let quarantineKeys: Set<String> = ["maxEntries", "maxAgeDays"]
    static let syncKeys: Set<String> = [
        "pageSize", "maxPagesPerSweep", "maxFollowUpSweeps", "maxChangesPerPage", "forceCooldownMs", "flushWaitMs", "conversationPageSize",
    ]
    static let mediaKeys: Set<String> = ["maxFileBytes", "idleTimeoutMs", "backgroundConcurrency", "runtimeDirectory"]

    typealias Refused = JSONFields.Refused

    static func parse(_ text: String, executor: CallbackExecutor) throws(Refused) -> (OfflineConfig, VaultSettings) {
        let o = try JSONFields(text, allowed: configKeys.union(settingKeys), what: "the settings")
        return (try config(o), try settings(o, executor: executor))
    }

    /// The seeds' OfflineConfig fields (the builder normalises their ranges, as it does in Swift).
    static func config(_ o: JSONFields) throws(Refused) -> OfflineConfig {
        let b = OfflineConfig.Builder()
        func small(_ n: Int64) -> Int { Int(clamping: n) }
        if let v = try o.bool("enabled") { b.setEnabled(v) }
        if let v = try o.bool("encryption") { b.setEncryption(v) }
        if let v = try o.choice("encryptionFailureBehavior", EncryptionFailureBehavior.self) { b.setEncryptionFailureBehavior(v) }
        if let v = try o.int("cacheDurationDays") { b.setCacheDurationDays(small(v)) }
        if let v = try o.int("maxStorageSize") { b.setMaxStorageSize(v) }
        if let v = try o.int("maxMessagesPerConversation") { b.setMaxMessagesPerConversation(small(v)) }
        if let v = try o.int("maxConversations") { b.setMaxConversations(small(v)) }
        if let v = try o.int("maxPendingMessages") { b.setMaxPendingMessages(small(v)) }
        if let v = try o.bool("autoSendPendingOnReconnect") { b.setAutoSendPendingOnReconnect(v) }
        if let v = try o.choice("pendingQueueOverflowPolicy", PendingMessageOverflowPolicy.self) { b.setPendingQueueOverflowPolicy(v) }
        if let v = try o.int("maxMediaCacheSize") { b.setMaxMediaCacheSize(v) }
        if let v = try o.choice("mediaCaching", MediaCachingMode.self) { b.setMediaCaching(v) }
        if let v = try o.int("maxSnapshotQueries") { b.setMaxSnapshotQueries(small(v)) }
        if let v = try o.int("snapshotTtlDays") { b.setSnapshotTtlDays(small(v)) }
        return b.build()
    }

    /// ChatVault's own VaultSettings: the app, the root, the key store, and the engine's timings.
    static func settings(_ o: JSONFields, executor: CallbackExecutor) throws(Refused) -> VaultSettings {
        guard let app = try o.string("applicationId"), !app.isEmpty else { throw Refused(message: "applicationId is required") }
        // Read whichever store is chosen, so a wrong value is refused even where it does not apply.
        let unlockPrompt = try o.bool("secretServiceUnlockPrompt") ?? false
        let timeout = try o.milliseconds("secretServiceTimeoutMs")
        let keyDirectory = try o.string("keyDirectory")
        // One store, or several in order of preference (a key can then be moved between them).
        let names: [String]
        if o.fields["keyStore"]?.arrayValue != nil {
            names = try o.strings("keyStore") ?? []
            guard !names.isEmpty, Set(names).count == names.count else { throw Refused(message: "keyStore lists each store once") }
        } else {
            names = [try o.string("keyStore") ?? "secretService"]
        }
        var keyStorage: [KeyStorageOption] = []
        for name in names {
            switch name {
            case "secretService": keyStorage.append(.secretService(unlockPrompt: unlockPrompt, timeout: timeout))
            case "software": keyStorage.append(.software(directory: keyDirectory))
            case "memory": keyStorage.append(.custom(MemoryKeyStore()))
            default: throw Refused(message: "keyStore is secretService, software or memory (or an array of them)")
            }
        }
        var s = VaultSettings(applicationId: app, applicationName: try o.string("applicationName"),
                              rootDirectory: try o.string("rootDirectory"), keyStorage: keyStorage, callbackExecutor: executor)
        guard s.hasValidApplicationId else { throw Refused(message: "applicationId must be a reverse-DNS id (letters, digits, . - _)") }
        if let r = try retry(o, "retry", over: s.retry) { s.retry = r }
        if let r = try retry(o, "reconnect", over: s.reconnect) { s.reconnect = r }
        if let v = try o.int("escalationThreshold", in: 1...1000) { s.escalationThreshold = v }
        if let q = try o.object("quarantine", allowed: quarantineKeys) {
            s.quarantine = QuarantinePolicy(maxEntries: try q.int("maxEntries", in: 0...1000) ?? s.quarantine.maxEntries,
                                            maxAgeDays: try q.int("maxAgeDays", in: 0...36_500) ?? Int(s.quarantine.maxAge / 86_400))
        }
        if let v = try o.int("synchronousIntegrityCheckLimit", in: 0...Int64.max) { s.synchronousIntegrityCheckLimit = Int64(v) }
        if let v = try o.milliseconds("evictionDelayMs") { s.evictionDelay = v }
        if let v = try o.milliseconds("stableConnectionDelayMs") { s.stableConnectionDelay = v }
        if let y = try o.object("sync", allowed: syncKeys) {
            if let v = try y.int("pageSize", in: 1...5000) { s.sync.pageSize = v }
            if let v = try y.int("maxPagesPerSweep", in: 1...1_000_000) { s.sync.maxPagesPerSweep = v }
            if let v = try y.int("maxFollowUpSweeps", in: 0...1_000_000) { s.sync.maxFollowUpSweeps = v }
            if let v = try y.int("maxChangesPerPage", in: 1...1_000_000) { s.sync.maxChangesPerPage = v }
            if let v = try y.milliseconds("forceCooldownMs") { s.sync.forceCooldown = v }
            if let v = try y.milliseconds("flushWaitMs") { s.sync.flushWait = v }
            if let v = try y.int("conversationPageSize", in: 1...50) { s.sync.conversationPageSize = v }
        }
        if let m = try o.object("media", allowed: mediaKeys) {
            if let v = try m.int("maxFileBytes", in: 1...Int64.max) { s.media.maxFileBytes = Int64(v) }
            if let v = try m.milliseconds("idleTimeoutMs") { s.media.idleTimeout = v }
            if let v = try m.int("backgroundConcurrency", in: 1...8) { s.media.backgroundConcurrency = v }
            if let v = try m.string("runtimeDirectory") { s.media.runtimeDirectory = v }
        }
        return s
    }

    /// A retry schedule: {"initialDelayMs", "maximumDelayMs", "multiplier" (1…100)}.
    static func retry(_ o: JSONFields, _ key: String, over base: RetryPolicy) throws(Refused) -> RetryPolicy? {
        guard let r = try o.object(key, allowed: retryKeys) else { return nil }
        let multiplier = try r.double("multiplier") ?? base.multiplier
        guard (1...100).contains(multiplier) else { throw Refused(message: "\(key).multiplier is 1 to 100") }
        let initial = try r.milliseconds("initialDelayMs") ?? base.initialDelay
        let maximum = try r.milliseconds("maximumDelayMs") ?? base.maximumDelay
        guard initial <= maximum else { throw Refused(message: "\(key).initialDelayMs is above maximumDelayMs") }
        return RetryPolicy(initialDelay: initial, maximumDelay: maximum, multiplier: multiplier)
    }
}

@c(cv_version)
public func cvVersion() -> UnsafePointer<CChar>? {
    CVersion.text
}

enum CVersion {
    /// Made once, never freed (the header says: static).
    nonisolated(unsafe) static let text: UnsafePointer<CChar>? = UnsafePointer(strdup(chatVaultVersion))
}

/// The two halves every vault constructor shares: the dispatcher and the parsed settings, then
/// the vault over a backend in the handle table (the dispatcher closed on any failure).
enum VaultSetup {
    static func prepare(_ json: String, _ out: ErrorOut) -> (Dispatcher, OfflineConfig, VaultSettings)? {
        let dispatcher = Dispatcher()
        guard dispatcher.fd >= 0 else {
            CError.set(out, domain: CError.library, code: "ERR_RESOURCES", message: "no event descriptor could be made")
            return nil
        }
        do {
            let (config, settings) = try CSettings.parse(json, executor: .custom { work in dispatcher.post(work) })
            return (dispatcher, config, settings)
        } catch {
            dispatcher.close()
            CError.invalid(out, error.message)
            return nil
        }
    }

    static func finish(_ dispatcher: Dispatcher, _ config: OfflineConfig, _ settings: VaultSettings, backend: any ChatBackend,
                       _ out: ErrorOut) -> OpaquePointer? {
        do {
            let vault = try OfflineVault(config: config, settings: settings, backend: backend)
            return vaults.insert(VaultBox(vault: vault, dispatcher: dispatcher))
        } catch {
            dispatcher.close()
            CError.set(out, domain: CError.library, code: "ERR_VAULT_SETUP", message: "\(error)")
            return nil
        }
    }
}

@c(cv_vault_new_simulated)
public func cvVaultNewSimulated(_ settingsJSON: UnsafePointer<CChar>?, _ simulator: OpaquePointer?, _ uid: UnsafePointer<CChar>?,
                                _ out: ErrorOut) -> OpaquePointer? {
    guard let json = text(settingsJSON) else { CError.invalid(out, "the settings must be a UTF-8 JSON string"); return nil }
    guard let box = simulators.get(simulator) else { CError.invalid(out, "not a simulator handle"); return nil }
    guard let uid = text(uid), !uid.isEmpty else { CError.invalid(out, "uid must be a UTF-8 string"); return nil }
    guard let (dispatcher, config, settings) = VaultSetup.prepare(json, out) else { return nil }
    return VaultSetup.finish(dispatcher, config, settings, backend: box.client(for: uid), out)
}

@c(cv_vault_free)
public func cvVaultFree(_ vault: OpaquePointer?) {
    guard let box = vaults.remove(vault) else { return }
    box.endAll()
    let vault = box.vault
    // The engine's own work still runs (its logout completes through the executor); the app's
    // callbacks are all ended, so none of them runs.
    waitDispatching(box.dispatcher) { await vault.logout() }
    box.dispatcher.close()
}

/// The state of an attempt, with its detail for C.
func report(_ attempt: OpenAttempt, _ detailOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> cv_open_state {
    let (state, detail) = CEnums.state(attempt.state)
    detailOut?.pointee = detail.flatMap(owned)
    return state
}

@c(cv_vault_login_sync)
public func cvVaultLoginSync(_ vault: OpaquePointer?, _ uid: UnsafePointer<CChar>?,
                             _ detailOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ out: ErrorOut) -> cv_open_state {
    detailOut?.pointee = nil
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return CV_OPEN_LOGGED_OUT }
    guard let uid = text(uid), !uid.isEmpty else { CError.invalid(out, "uid must be a UTF-8 string"); return CV_OPEN_LOGGED_OUT }
    let engine = box.vault
    return report(waitDispatching(box.dispatcher) { await engine.login(userId: uid) }, detailOut)
}

@c(cv_vault_retry_open_sync)
public func cvVaultRetryOpenSync(_ vault: OpaquePointer?, _ detailOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                 _ out: ErrorOut) -> cv_open_state {
    detailOut?.pointee = nil
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return CV_OPEN_LOGGED_OUT }
    let engine = box.vault
    return report(waitDispatching(box.dispatcher) { await engine.retryOpen() }, detailOut)
}

@c(cv_vault_logout_sync)
public func cvVaultLogoutSync(_ vault: OpaquePointer?, _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    let engine = box.vault
    waitDispatching(box.dispatcher) { await engine.logout() }
    return true
}

@c(cv_vault_is_offline_enabled)
public func cvVaultIsOfflineEnabled(_ vault: OpaquePointer?) -> Bool {
    vaults.get(vault)?.vault.isOfflineEnabled() ?? false
}

@c(cv_vault_get_encryption_status)
public func cvVaultGetEncryptionStatus(_ vault: OpaquePointer?, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    let s = box.vault.offlineEncryptionStatus()
    let json: JSONValue = [
        "enabled": .bool(s.enabled), "atRest": .string(s.atRest), "keyStorage": .string(s.keyStorage),
        "cipherAvailable": .bool(s.cipherAvailable), "cipher": s.cipher.map { .string($0) } ?? .null,
        "leakage": s.leakage.map { .string($0) } ?? .null,
    ]
    return owned(CModels.text(json))
}

@c(cv_vault_get_cache_size)
public func cvVaultGetCacheSize(_ vault: OpaquePointer?, _ out: ErrorOut) -> Int64 {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return -1 }
    return box.vault.getCacheSize()
}

@c(cv_vault_clear_offline_cache_sync)
public func cvVaultClearOfflineCacheSync(_ vault: OpaquePointer?, _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    let engine = box.vault
    let failure = waitDispatching(box.dispatcher) { () async -> CometChatException? in
        do throws(CometChatException) { try await engine.clearOfflineCacheAndWait(); return nil } catch { return error }
    }
    if let failure { CError.from(out, failure); return false }
    return true
}

@c(cv_vault_fetch_messages_sync)
public func cvVaultFetchMessagesSync(_ vault: OpaquePointer?, _ receiverType: cv_receiver_type, _ receiver: UnsafePointer<CChar>?,
                                     _ limit: Int32, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard let receiver = text(receiver), !receiver.isEmpty else { CError.invalid(out, "receiver must be a UTF-8 string"); return nil }
    guard let type = CEnums.receiverType(receiverType) else { CError.invalid(out, "receiver_type is not a cv_receiver_type"); return nil }
    guard (1...100).contains(limit) else { CError.invalid(out, "limit is 1 to 100"); return nil }
    let engine = box.vault
    let json = waitDispatching(box.dispatcher) { () async -> JSONText in
        let builder = MessagesRequest.MessageRequestBuilder(vault: engine).set(limit: Int(limit))
        if type == .group { builder.set(guid: receiver) } else { builder.set(uid: receiver) }
        let result = await builder.build().fetchPrevious()
        return CModels.phases(cached: result.cached, server: result.server, CModels.message)
    }
    return owned(json)
}

@c(cv_vault_send_text)
public func cvVaultSendText(_ vault: OpaquePointer?, _ receiverType: cv_receiver_type, _ receiver: UnsafePointer<CChar>?,
                            _ body: UnsafePointer<CChar>?, _ callback: cv_send_callback?, _ userData: UnsafeMutableRawPointer?,
                            _ destroy: cv_destroy_notify?, _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    guard let receiver = text(receiver), !receiver.isEmpty, let body = text(body) else {
        CError.invalid(out, "receiver and text must be UTF-8 strings")
        return false
    }
    guard let type = CEnums.receiverType(receiverType) else { CError.invalid(out, "receiver_type is not a cv_receiver_type"); return false }
    guard let callback else { CError.invalid(out, "a send needs a callback"); return false }
    // The message the engine sends (and stamps: its local id, its status): the error stage shows it too.
    let message = TextMessage(receiverUid: receiver, text: body, receiverType: type)
    let engine = box.vault
    CSend.start(box, message, callback, userData, destroy) { m, pending, sent, failed in
        engine.sendTextMessage(message: m, onMessagePending: pending, onMessageSent: sent, onError: failed)
    }
    return true
}

@c(cv_vault_get_pending_messages_sync)
public func cvVaultGetPendingMessagesSync(_ vault: OpaquePointer?, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    let engine = box.vault
    let answer = waitDispatching(box.dispatcher) { () async -> Result<JSONText, CometChatException> in
        do throws(CometChatException) {
            return .success(CModels.arrayText(try await engine.pendingMessages(), CModels.message))
        } catch {
            return .failure(error)
        }
    }
    switch answer {
    case .success(let json): return owned(json)
    case .failure(let error): CError.from(out, error); return nil
    }
}

@c(cv_vault_add_reset_listener)
public func cvVaultAddResetListener(_ vault: OpaquePointer?, _ callback: cv_reset_callback?, _ userData: UnsafeMutableRawPointer?,
                                    _ destroy: cv_destroy_notify?, _ out: ErrorOut) -> UInt32 {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return 0 }
    guard let callback else { CError.invalid(out, "a listener needs a callback"); return 0 }
    return box.add(ResetListener(callback: callback, destroy: destroy, userData: userData))
}

@c(cv_vault_remove_listener)
public func cvVaultRemoveListener(_ vault: OpaquePointer?, _ id: UInt32, _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    guard box.remove(id) else { CError.invalid(out, "no such listener"); return false }
    return true
}

@c(cv_vault_get_fd)
public func cvVaultGetFd(_ vault: OpaquePointer?) -> Int32 {
    vaults.get(vault)?.dispatcher.fd ?? -1
}

@c(cv_vault_dispatch)
public func cvVaultDispatch(_ vault: OpaquePointer?) -> UInt32 {
    vaults.get(vault)?.dispatcher.dispatch() ?? 0
}
