// An app outside the ChatVault package, compiled and linked against what is public (Scripts/
// outside-package): the configuration an app writes, a key store of its own (what another
// backend implements), the seed pages' samples for sending and for cached reads, the reset
// listener, the states and the key management it handles. Never run by the check: compiling and
// linking it is the test (a default argument or an inlined call that needs a symbol the package
// no longer exports fails the link).
import ChatVault
import ChatVaultMatrix
import Foundation
import Synchronization
import VaultKeys
import VaultStore

// MARK: Configuration (the reference page's quick reference)

func configuredVault(root: String, backend: any ChatBackend) throws -> OfflineVault {
    let offlineConfig = OfflineConfig.Builder()
        .setEnabled(true)
        .setMaxConversations(100)
        .setMaxMessagesPerConversation(500)
        .setMaxPendingMessages(50)
        .setMediaCaching(.auto)
        .setEncryption(true)
        .setEncryptionFailureBehavior(.onlineOnly)
        .build()
    let appSettings = AppSettings.AppSettingsBuilder().setOfflineConfig(offlineConfig).build()
    // Every default argument of VaultSettings.init, as an app leaves them.
    var settings = VaultSettings(applicationId: "org.example.outside")
    settings.rootDirectory = root
    settings.keyStorage = [
        .secretService(unlockPrompt: true, timeout: .seconds(5)),
        .software(directory: root + "/keys"),
        .custom(FileDescriptorKeyStore()),
        .custom(MemoryKeyStore()),
    ]
    settings.quarantine = QuarantinePolicy(maxEntries: 2, maxAgeDays: 7)
    return try OfflineVault(appSettings: appSettings, settings: settings, backend: backend)
}

// MARK: A key store of the app's own (the KeyStore protocol, implemented outside the package)

final class FileDescriptorKeyStore: KeyStore {
    private let keys = Mutex<[KeyItemID: (bytes: [UInt8], keyId: String)]>([:])
    var tier: KeyStorageTier { .software }
    var name: String { "app-vault" }

    func availability() -> KeyStoreAvailability { .available }

    func lookup(_ id: KeyItemID) -> KeyLookup {
        guard let entry = keys.withLock({ $0[id] }) else { return .absent }
        do {
            let key = try entry.bytes.withUnsafeBytes { raw throws(KeyMaterialError) in try CacheKey.copying(raw) }
            return .found(key, keyId: entry.keyId)
        } catch {
            return .unavailable(.other)
        }
    }

    func items(applicationId: String, account: String) -> KeyListing {
        .items(keys.withLock { $0 }.filter { $0.key.applicationId == applicationId && $0.key.account == account }
            .map { KeyItemSummary(id: $0.key, keyId: $0.value.keyId) })
    }

    func store(_ key: CacheKey, keyId: String, for id: KeyItemID, label: String) throws(KeyStoreError) {
        guard CacheKey.byteCount == 32 else { throw KeyStoreError(.other, "unexpected key size") }
        let bytes = key.withUnsafeBytes { Array($0) }
        keys.withLock { $0[id] = (bytes, keyId) }
    }

    func delete(_ id: KeyItemID) throws(KeyStoreError) {
        _ = keys.withLock { $0.removeValue(forKey: id) }
    }

    func locator(for id: KeyItemID) -> [String: String] { ["cache-id": id.cacheId] }
}

// MARK: The reset listener and the states an app shows

final class ResetNotice: OfflineCacheResetListener {
    let heard = Mutex<[String]>([])

    func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) {
        let lost = pendingMessagesLost == CometChat.offlinePendingCountUnknown ? "unknown" : "\(pendingMessagesLost)"
        heard.withLock { $0.append("\(reason.rawValue): \(lost) unsent lost") }
    }
}

func describe(_ attempt: OpenAttempt) -> String {
    var lines = attempt.resets.map { "reset \($0.reason) (\($0.pendingMessagesLost) lost, kept as \($0.quarantinedAs ?? "-"))" }
    switch attempt.state {
    case .ready, .loggedOut, .disabled, .opening: lines.append(attempt.state.code)
    case .plaintextFallback(let why), .onlineOnly(let why):
        switch why {
        case .cipherNotProven: lines.append("no SQLCipher")
        case .noKeyStore(let reasons): lines.append("no key store: \(reasons.mapValues(\.rawValue))")
        }
    case .unavailable(let reason):
        switch reason {
        case .keyStore(let why) where why == .locked: lines.append("unlock your keyring")
        case .cacheInUse(let pid): lines.append("in use by \(pid.map(String.init) ?? "another process")")
        default: lines.append("\(reason.code): \(reason)")
        }
    }
    return lines.joined(separator: "\n")
}

// MARK: Key management (the Keys section)

func manageKeys(_ vault: OfflineVault, typedSecret: String) async -> [String] {
    var out: [String] = []
    do {
        let rotated: KeyChangeReport = try await vault.rotateOfflineCacheKey()
        out.append("\(rotated.oldKeyId) -> \(rotated.newKeyId) in \(rotated.seconds) s")
        let made: RecoverySecretReport = try await vault.createOfflineRecoverySecret()
        out.append("write this down once: \(made.secret.formatted)")
        for cache in vault.quarantinedOfflineCaches() where cache.restorable {
            let restored: CacheRestoreReport = try await vault.restoreQuarantinedOfflineCache(id: cache.id)
            out.append("restored \(restored.restoredEntry), \(restored.mergedPending) unsent merged")
        }
        let secret = try RecoverySecret(parsing: typedSecret)
        _ = try await vault.recoverOfflineCache(secret: secret)
        let export: CacheExportReport = try await vault.exportOfflineCache(to: "/tmp/outside.export")
        out.append("exported \(export.bytes) bytes")
    } catch let error as KeyManagementError {
        switch error {
        case .unavailable(let reason), .unfinished(let reason): out.append("later: \(reason.code)")
        case .wrongSecret: out.append("that secret opens nothing")
        default: out.append(error.code + ": \(error)")
        }
    } catch let error as RecoverySecretError {
        out.append("mistyped: \(error)")
    } catch {
        out.append("\(error)")
    }
    for entry in vault.offlineAuditJournal() where entry.kind == .reset {
        out.append("\(entry.date): \(entry.reason ?? "") \(entry.pendingMessagesLost ?? 0)")
    }
    return out
}

// MARK: The seed pages' samples, as an app pastes them

final class SampleOutboxObserver: NSObject, OutboxListener {
    func onOutboxMessagePending(_ message: BaseMessage) { }

    func onOutboxMessageSent(_ message: BaseMessage) { }

    func onOutboxMessageFailed(_ message: BaseMessage, _ reason: CometChat.MessageFailureReason) {
        print("Failed: \(message.localMessageId ?? "") (\(reason))")
    }
}

func sendPageSample() {
    CometChat.addOutboxListener("OUTBOX_LISTENER", SampleOutboxObserver())
    let textMessage = TextMessage(receiverUid: "UID", text: "Hello!", receiverType: .user)

    CometChat.sendTextMessage(message: textMessage, onMessagePending: { message in
        // Queued and persisted; message.messageStatus == .pending
        print("Pending, local id: \(message.localMessageId ?? "")")
    }, onMessageSent: { message in
        // Server ack: message now carries its real id and sentAt
        print("Sent: \(message.id)")
    }, onError: { error in
        // Tell "queued, not failed" from a real failure by the error code
        if error?.errorCode == CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE {
            // Queued offline — it will send automatically on reconnect
        } else {
            // Real failure — surface a retry action
        }
    })

    CometChat.getPendingMessages(onSuccess: { messages in
        for m in messages {
            print("\(m.localMessageId ?? "") -> \(m.messageStatus)")
        }
    }, onError: { error in
        print("Could not read the outbox: \(error.errorCode)")
    })
    let localMessageId = textMessage.localMessageId
    CometChat.retryAllFailedMessages()
    CometChat.retryMessage(localMessageId, onSuccess: { print("Sent") },
                           onError: { error in print("Retry rejected or failed: \(error.errorCode)") })
    CometChat.discardLocalMessage(localMessageId, onSuccess: { print("Discarded") },
                                  onError: { error in print("Discard rejected: \(error.errorCode)") })
}

func cachedDataPageSample() {
    let request = MessagesRequest.MessageRequestBuilder()
        .set(uid: "UID")
        .set(limit: 30)
        .build()

    request.fetchPrevious(onCachedMessages: { messages in
        // Render the cached page immediately.
    }, onServerMessages: { messages in
        // Reconcile this slice against the cached page, keyed by message id.
    }, onError: { error in
        print("Fetch failed: \(error?.errorCode ?? "")")
    })

    let conversations = ConversationRequest.ConversationRequestBuilder(limit: 30).build()
    conversations.fetchNext(onCachedConversations: { conversations in
        // Render the cached list immediately.
    }, onServerConversations: { conversations in
        // Reconcile, keyed by conversation id.
    }, onError: { error in
        print("Fetch failed: \(error?.errorCode ?? "")")
    })
    let status = CometChat.getOfflineEncryptionStatus()           // [String: Any]
    print(status["atRest"] as? String == CometChat.OfflineEncryptionTier.KEYSTORE, CometChat.getCacheSize())
}

// MARK: Another backend's credentials, an uninstall

/// Local search as an app writes it: options, the first page, highlights, the next page, the
/// index's progress heard.
final class IndexBar: SearchIndexListener {
    func onSearchIndexProgress(_ progress: SearchIndexProgress) { print("indexed \(Int(progress.fraction * 100)) %") }
}

func searchSample(_ vault: OfflineVault) async {
    var options = CachedSearchOptions()
    options.conversation = .group("hiking")
    options.order = .relevance
    vault.addSearchIndexListener("bar", IndexBar())
    do {
        let page: CachedSearchPage = try await vault.searchCachedMessages("trail \"map room\" -closed", options: options)
        for hit in page.hits {
            let marked = hit.snippetMatches.map { String(hit.snippet[$0]) }
            print(hit.message.id, hit.snippet, marked)
        }
        if let next = page.nextCursor {
            options.cursor = next
            _ = try await vault.searchCachedMessages("trail", options: options)
        }
        if !page.indexComplete { print("still indexing: \(page.indexProgress)") }
    } catch {
        if error.code == .invalidSearchQuery { print("nothing to look for: \(error.details ?? "")") }
    }
    CometChat.searchCachedMessages("trail", onSuccess: { print($0.hits.count) }, onError: { print($0.errorCode) })
}

func elsewhere() throws -> (MatrixSessionStore, Int) {
    let sessions = MatrixSessionStore(store: SecretServiceKeyStore(), applicationId: "org.example.outside")
    // Uninstalling: the app's keys go with it.
    let removed = try SecretServiceKeyStore().deleteAll(applicationId: "org.example.outside")
    return (sessions, removed)
}

print("outside-app: compiled and linked against ChatVault's public API; not meant to be run")
