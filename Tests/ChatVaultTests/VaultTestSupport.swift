import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// Records reset-listener calls, and what the engine said while the callback ran.
final class RecordingResetListener: OfflineCacheResetListener {
    struct Call: Equatable {
        var reason: OfflineCacheResetReason
        var pendingMessagesLost: Int
        var offlineEnabledDuringCallback: Bool
    }

    private let calls = Mutex<[Call]>([])
    let vault: Mutex<OfflineVault?> = Mutex(nil)

    var recorded: [Call] { calls.withLock { $0 } }

    func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) {
        let enabled = vault.withLock { $0?.isOfflineEnabled() } ?? false
        calls.withLock { $0.append(Call(reason: reason, pendingMessagesLost: pendingMessagesLost, offlineEnabledDuringCallback: enabled)) }
    }
}

struct EngineHarness {
    let root = TemporaryDirectory()
    let keyStore = MemoryKeyStore()
    let callbacks = DispatchQueue(label: "tests.callbacks")

    func settings(retry: RetryPolicy = .manualOnly, integrityLimit: Int64 = 8 << 20, stores: [KeyStorageOption]? = nil) -> VaultSettings {
        VaultSettings(applicationId: "org.chatvault.tests", applicationName: "ChatVault Tests", rootDirectory: root.path,
                      keyStorage: stores ?? [.custom(keyStore)], callbackExecutor: .queue(callbacks), retry: retry,
                      synchronousIntegrityCheckLimit: integrityLimit)
    }

    func vault(encryption: Bool = true, enabled: Bool = true, behavior: EncryptionFailureBehavior = .onlineOnly,
               retry: RetryPolicy = .manualOnly, integrityLimit: Int64 = 8 << 20, stores: [KeyStorageOption]? = nil) throws -> OfflineVault {
        let config = OfflineConfig.Builder().setEnabled(enabled).setEncryption(encryption).setEncryptionFailureBehavior(behavior).build()
        return try OfflineVault(config: config, settings: settings(retry: retry, integrityLimit: integrityLimit, stores: stores))
    }

    func seed(_ vault: OfflineVault, messages: Int, pending: Int, marker: String = "ENGINE-MARKER") throws {
        let cache = try XCTUnwrap(vault.openCache)
        try cache.writer.sync { db in
            try db.transaction {
                try CacheRows.insert([CacheRows.Conversation(id: "user_bob", type: "user", peerId: "bob", lastMessageAt: 1)], into: db)
                try CacheRows.insert((0..<messages).map { i in
                    CacheRows.Message(serverId: Int64(i + 1), localId: nil, conversationId: "user_bob", senderId: "bob", receiverId: "alice",
                                      receiverType: "user", sentAt: Int64(i), body: "\(marker) \(i)")
                }, into: db)
                try CacheRows.insert((0..<pending).map { i in
                    CacheRows.OutboxEntry(localId: "l\(i)", seq: Int64(i + 1), conversationId: "user_bob", kind: "text", state: 0,
                                          createdAt: Int64(i), payload: Array("\(marker) p\(i)".utf8))
                }, into: db)
            }
        }
    }

    func counts(_ vault: OfflineVault) throws -> CacheRows.Counts {
        try XCTUnwrap(vault.openCache).reader.sync { db in try CacheRows.counts(db) }
    }

    /// Waits (polling) until `condition` holds or fails the test after `seconds`.
    func eventually(_ seconds: Double = 5, file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() > deadline { return XCTFail("condition not met within \(seconds) s", file: file, line: line) }
            usleep(10_000)
        }
    }
}
