import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
import ChatVault
import VaultKeys

// The seed pages' Swift samples, pasted as an app developer would (only the ids and the objects
// they refer to are supplied), compiled against the public API (plain `import ChatVault`, no
// `@testable`) and run against an installed vault: if a spelling of the pages goes missing, this
// file stops compiling. The media page's other samples join when the media engine lands (issue 9):
// `getCachedMediaPath`, `downloadMedia`, `addMediaDownloadListener`.

final class SampleConversationLoader: NSObject, ConversationDetailsListener {
    let hits = Mutex<[String]>([])

    func onCachedConversation(_ conversation: Conversation) {
        // Fires only on a cache hit.
        hits.withLock { $0.append("cached") }
    }

    func onServerConversation(_ conversation: Conversation?) {
        // Server copy, written through before delivery.
        hits.withLock { $0.append("server") }
    }

    func onError(_ error: CometChatException?) {
        print("Lookup failed: \(error?.errorCode ?? "")")
        hits.withLock { $0.append(error?.errorCode ?? "") }
    }
}

final class SampleMessageLoader: NSObject, MessageDetailsListener {
    let hits = Mutex<[String]>([])

    func onCachedMessage(_ message: BaseMessage) {
        // Fires only on a cache hit.
        hits.withLock { $0.append("cached") }
    }

    func onServerMessage(_ message: BaseMessage?) {
        // Server copy.
        hits.withLock { $0.append("server") }
    }

    func onError(_ error: CometChatException?) {
        print("Lookup failed: \(error?.errorCode ?? "")")
        hits.withLock { $0.append(error?.errorCode ?? "") }
    }
}

final class SampleOutboxObserver: NSObject, OutboxListener {
    let pending = Mutex(0)

    func onOutboxMessagePending(_ message: BaseMessage) { pending.withLock { $0 += 1 } }

    func onOutboxMessageSent(_ message: BaseMessage) { }

    func onOutboxMessageFailed(_ message: BaseMessage, _ reason: CometChat.MessageFailureReason) {
        print("Failed: \(message.localMessageId ?? "") (\(reason))")
    }
}

// The media page's listener, as written there.
final class MediaObserver: NSObject, MediaDownloadListener {
    let heard = Mutex<[String]>([])

    func onMediaDownloaded(_ messageId: String, _ url: String, _ localPath: String) {
        // messageId: the message's server id (or its local id if not yet sent)
        // url:       the attachment URL without its query string or fragment
        // localPath: where the bytes landed
        heard.withLock { $0.append("downloaded \(messageId) \(url)") }
    }

    func onMediaDownloadFailed(_ attachment: Attachment?, _ error: CometChatException) {
        heard.withLock { $0.append("failed \(error.errorCode)") }
    }
}

final class SampleSyncObserver: NSObject, SyncListener, CometChatMessageDelegate {
    let completed = Mutex<[CometChat.SyncOutcome]>([])

    func onMessageSyncCompleted(_ messages: [BaseMessage], _ outcome: CometChat.SyncOutcome) {
        completed.withLock { $0.append(outcome) }
    }

    func onMessagesSynced(_ messages: [BaseMessage]) {
        print("Synced \(messages.count) messages")
    }
}

final class SeedSampleTests: XCTestCase {
    override func tearDown() {
        CometChat.offlineVault = nil
        super.tearDown()
    }

    /// An installed, logged-in vault over the simulator, offline unless told otherwise.
    private func installedVault(online: Bool = false) async throws -> (OfflineVault, SimulatedClient, TemporaryDirectory) {
        let folder = TemporaryDirectory()
        let simulator = ChatVaultSimulator(seed: 3, clock: SimulatedClock())
        for user in ["alice", "UID"] { try simulator.addUser(SimulatedUser(uid: user, name: user)) }
        let client = simulator.client(for: "alice")
        client.network = online ? .online : .offline
        // The reference page's quick reference: the config, attached at init.
        let offlineConfig = OfflineConfig.Builder()
            .setEnabled(true)
            .setMaxConversations(100)
            .setMaxMessagesPerConversation(500)
            .setMaxPendingMessages(50)
            .setMediaCaching(.auto)
            .setEncryption(false)
            .build()
        let appSettings = AppSettings.AppSettingsBuilder().setOfflineConfig(offlineConfig).build()
        var settings = VaultSettings(applicationId: "org.chatvault.samples", rootDirectory: folder.path,
                                     keyStorage: [.custom(MemoryKeyStore())], callbackExecutor: .queue(DispatchQueue(label: "samples")),
                                     retry: .manualOnly)
        settings.stableConnectionDelay = .milliseconds(20)
        settings.reconnect = RetryPolicy(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(40))
        let vault = try OfflineVault(appSettings: appSettings, settings: settings, backend: client)
        CometChat.offlineVault = vault
        _ = await vault.login(userId: "alice")
        XCTAssertTrue(CometChat.isOfflineEnabled())
        return (vault, client, folder)
    }

    func testTheReferencePagesIntrospectionSamplesRun() async throws {
        let (vault, _, folder) = try await installedVault()
        _ = folder
        XCTAssertEqual(CometChat.offlineVault?.config.maxPendingMessages, 50)
        XCTAssertEqual(CometChat.isOfflineEnabled(), true)            // Bool
        XCTAssertEqual(CometChat.getMediaCachingMode(), CometChat.MediaCachingMode.auto)   // CometChat.MediaCachingMode
        let status = CometChat.getOfflineEncryptionStatus()           // [String: Any]
        XCTAssertEqual(status["atRest"] as? String, CometChat.OfflineEncryptionTier.NONE)
        XCTAssertGreaterThan(CometChat.getCacheSize(), 0)             // Int64 (bytes)
        let listed = Mutex<[BaseMessage]?>(nil)
        CometChat.getPendingMessages(onSuccess: { m in listed.withLock { $0 = m } }, onError: { _ in })
        await waitUntil { listed.withLock { $0 } != nil }
        XCTAssertEqual(listed.withLock { $0 }?.count, 0)
        XCTAssertEqual(CometChat.getSyncState(), CometChat.SyncState.idle)   // CometChat.SyncState
        XCTAssertEqual(CometChat.getLastSyncTimestamp(), 0)                  // Int (server epoch seconds): offline, never synced
        CometChat.forceSyncNow()                // or forceSyncNow(onSuccess:onError:)
        CometChat.clearOfflineCache()
        await vault.logout()
        // The media page: `.off` whenever offline is not active, whatever the app configured.
        let mode = CometChat.getMediaCachingMode()     // .off when offline is not active
        XCTAssertEqual(mode, .off)
    }

    func testTheReferencePagesSyncSurfaceRunsOnline() async throws {
        let (vault, _, folder) = try await installedVault(online: true)
        _ = folder
        let listener = SampleSyncObserver()
        CometChat.addSyncListener("SYNC", listener)
        CometChat.addMessageListener("MESSAGES", listener)
        // The connection holds: the first sweep runs on its own and sets the sync point.
        await waitUntil { CometChat.getLastSyncTimestamp() > 0 }
        await vault.waitForSyncIdle()
        let outcome = Mutex<String?>(nil)
        CometChat.forceSyncNow(onSuccess: { outcome.withLock { $0 = "accepted" } },
                               onError: { error in outcome.withLock { $0 = error?.errorCode } })
        await waitUntil { outcome.withLock { $0 } != nil }
        // The default cooldown (10 s) refuses a forced sync right after the automatic one.
        XCTAssertEqual(outcome.withLock { $0 }, CometChatConstants.Errors.ERROR_OFFLINE_SYNC_COOLDOWN)
        XCTAssertEqual(listener.completed.withLock { $0 }, [CometChat.SyncOutcome.caughtUp])
        CometChat.removeSyncListener("SYNC")
        CometChat.removeMessageListener("MESSAGES")
        await vault.logout()
    }

    func testTheCachedDataPagesSamplesRunOffline() async throws {
        let (vault, _, folder) = try await installedVault()
        _ = folder
        let phases = Mutex<[String]>([])

        let request = MessagesRequest.MessageRequestBuilder()
            .set(uid: "UID")
            .set(limit: 30)
            .build()

        request.fetchPrevious(onCachedMessages: { messages in
            // Render the cached page immediately.
            phases.withLock { $0.append("cached messages") }
        }, onServerMessages: { messages in
            // Reconcile this slice against the cached page, keyed by message id.
            phases.withLock { $0.append("server messages") }
        }, onError: { error in
            print("Fetch failed: \(error?.errorCode ?? "")")
            phases.withLock { $0.append(error?.errorCode ?? "") }
        })
        await waitUntil { phases.withLock { $0.count } == 2 }

        let conversations = ConversationRequest.ConversationRequestBuilder(limit: 30).build()

        conversations.fetchNext(onCachedConversations: { conversations in
            // Render the cached list immediately.
            phases.withLock { $0.append("cached conversations") }
        }, onServerConversations: { conversations in
            // Reconcile, keyed by conversation id.
            phases.withLock { $0.append("server conversations") }
        }, onError: { error in
            print("Fetch failed: \(error?.errorCode ?? "")")
            phases.withLock { $0.append(error?.errorCode ?? "") }
        })
        await waitUntil { phases.withLock { $0.count } == 4 }

        let users = UsersRequest.UsersRequestBuilder()
            .set(limit: 30)
            .build()

        users.fetchNext(onCachedUsers: { users in
            // render
            phases.withLock { $0.append("cached users") }
        }, onServerUsers: { users in
            // reconcile, keyed by uid
            phases.withLock { $0.append("server users") }
        }, onError: { error in
            print("Fetch failed: \(error?.errorCode ?? "")")
            phases.withLock { $0.append(error?.errorCode ?? "") }
        })
        await waitUntil { phases.withLock { $0.count } == 6 }
        let offline = CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE
        XCTAssertEqual(phases.withLock { $0 }, ["cached messages", offline, "cached conversations", offline, "cached users", offline],
                       "offline: the cached phase fires first, even when empty, then the read ends with ERROR_INTERNET_UNAVAILABLE")

        let loader = SampleConversationLoader()
        CometChat.getConversation(conversationWith: "UID", conversationType: .user, listener: loader)

        let messageId = 42
        let messageLoader = SampleMessageLoader()
        CometChat.getMessageDetails(messageId, listener: messageLoader)
        await waitUntil { loader.hits.withLock { !$0.isEmpty } && messageLoader.hits.withLock { !$0.isEmpty } }
        XCTAssertEqual(loader.hits.withLock { $0 }, [offline], "no cache hit for an unknown conversation, and no server")
        XCTAssertEqual(messageLoader.hits.withLock { $0 }, [offline])
        await vault.logout()
    }

    func testTheSendPagesSamplesQueueOfflineAndSendOnReconnect() async throws {
        let (vault, client, folder) = try await installedVault()
        _ = folder
        let events = Mutex<[String]>([])
        let outboxObserver = SampleOutboxObserver()
        CometChat.addOutboxListener("OUTBOX_LISTENER", outboxObserver)

        let textMessage = TextMessage(receiverUid: "UID", text: "Hello!", receiverType: .user)

        CometChat.sendTextMessage(message: textMessage, onMessagePending: { message in
            // Queued and persisted; message.messageStatus == .pending
            print("Pending, local id: \(message.localMessageId ?? "")")
            events.withLock { $0.append("pending") }
        }, onMessageSent: { message in
            // Server ack: message now carries its real id and sentAt
            print("Sent: \(message.id)")
            events.withLock { $0.append("sent") }
        }, onError: { error in
            // Tell "queued, not failed" from a real failure by the error code
            if error?.errorCode == CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE {
                // Queued offline — it will send automatically on reconnect
                events.withLock { $0.append("queued") }
            } else {
                // Real failure — surface a retry action
                events.withLock { $0.append("failed") }
            }
        })
        await waitUntil { events.withLock { $0 } == ["pending", "queued"] }
        XCTAssertEqual(events.withLock { $0 }, ["pending", "queued"])
        // As the page uses it: the message's own `String?`, passed on unwrapped.
        let localMessageId = textMessage.localMessageId
        XCTAssertNotNil(localMessageId)
        XCTAssertEqual(textMessage.messageStatus, .pending)
        XCTAssertNil(textMessage.getFailureReason())
        XCTAssertEqual(outboxObserver.pending.withLock { $0 }, 1)

        let mediaMessage = MediaMessage(receiverUid: "UID", files: [], messageType: .image, receiverType: .user)
        let customMessage = CustomMessage(receiverUid: "UID", receiverType: .user, customData: ["k": "v"], type: "poll")
        let interactiveMessage = InteractiveMessage(receiverUid: "UID", type: "form", receiverType: .user, interactiveData: ["f": 1])
        CometChat.sendMediaMessage(message: mediaMessage, onMessagePending: { _ in }, onMessageSent: { _ in }, onError: { _ in })
        CometChat.sendCustomMessage(message: customMessage, onMessagePending: { _ in }, onMessageSent: { _ in }, onError: { _ in })
        CometChat.sendInteractiveMessage(message: interactiveMessage, onMessagePending: { _ in }, onMessageSent: { _ in }, onError: { _ in })

        let listed = Mutex<[String]>([])
        CometChat.getPendingMessages(onSuccess: { messages in
            for m in messages {
                print("\(m.localMessageId ?? "") -> \(m.messageStatus)")
            }
            listed.withLock { $0 = messages.compactMap(\.localMessageId) }
        }, onError: { error in
            print("Could not read the outbox: \(error.errorCode)")
        })
        await waitUntil { listed.withLock { $0.contains { $0 == localMessageId } } }

        CometChat.retryAllFailedMessages()
        let discarded = Mutex<String?>(nil)
        CometChat.discardLocalMessage(localMessageId, onSuccess: {
            print("Discarded")
            discarded.withLock { $0 = "discarded" }
        }, onError: { error in
            print("Discard rejected: \(error.errorCode)")
            discarded.withLock { $0 = error.errorCode }
        })
        await waitUntil { discarded.withLock { $0 } != nil }
        XCTAssertEqual(discarded.withLock { $0 }, "discarded", "a pending message not on the wire can be discarded")

        let retried = Mutex<String?>(nil)
        CometChat.retryMessage(localMessageId, onSuccess: {
            print("Sent")
        }, onError: { error in
            print("Retry rejected or failed: \(error.errorCode)")
            retried.withLock { $0 = error.errorCode }
        })
        await waitUntil { retried.withLock { $0 } != nil }
        XCTAssertEqual(retried.withLock { $0 }, CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_NOT_FOUND, "the discarded message is gone")

        // parentMessageId: 0 for the main composer, the thread parent's id for a thread composer.
        if let request = CometChat.getExistingUploadFileRequest(receiverId: "UID",
                                                                receiverType: .user,
                                                                parentMessageId: 0) {
            for item in request.getItems() {
                print("\(item.fileId) -> \(item.state)")
                if item.state == .failed {
                    request.retryAttachment(fileId: item.fileId)
                }
            }
            XCTFail("no upload batch was started")
        }

        // Online again: the queued custom and interactive messages go out on their own.
        client.network = .online
        var left = -1
        for _ in 0..<200 where left != 0 {
            left = try await vault.pendingMessages().count
            if left != 0 { try await Task.sleep(for: .milliseconds(50)) }
        }
        XCTAssertEqual(left, 0, "the custom and interactive messages were sent on reconnect")
        CometChat.removeOutboxListener("OUTBOX_LISTENER")
        await vault.logout()
    }

    func testTheSendPagesQuickReferenceRunsAsWritten() async throws {
        let (vault, _, folder) = try await installedVault()
        _ = folder
        let textMessage = TextMessage(receiverUid: "UID", text: "Hello!", receiverType: .user)
        let sent = Mutex(false)
        // Send with the offline-aware overload (queued when offline, auto-sent on reconnect)
        CometChat.sendTextMessage(message: textMessage, onMessagePending: { message in
            // messageStatus == .pending, fires right after the message is durably queued
            sent.withLock { $0 = true }
        }, onMessageSent: { message in
            // server ack: real id + sentAt
        }, onError: { error in
            // ERROR_INTERNET_UNAVAILABLE = queued, not failed. Any other code = failed.
        })
        await waitUntil { sent.withLock { $0 } }
        let message: BaseMessage = TextMessage(receiverUid: "UID", text: "never sent", receiverType: .user)

        // Read offline state off a message
        let localId = message.localMessageId       // String?, stable client handle
        let status = message.messageStatus         // .pending .sending .sent .delivered .read .failed
        let reason = message.getFailureReason()    // CometChat.MessageFailureReason?, set only while failed

        // Inspect and recover the outbox
        CometChat.getPendingMessages(onSuccess: { messages in }, onError: { error in })  // pending + sending + failed
        CometChat.retryMessage(localId, onSuccess: { }, onError: { error in })           // one message
        CometChat.retryAllFailedMessages()                                               // transient failures only
        CometChat.discardLocalMessage(localId, onSuccess: { }, onError: { error in })    // delete an unsent message

        // What those answer for a message that never went through the outbox (no local id).
        XCTAssertNil(localId)
        _ = (status, reason)
        let answers = Mutex<[String]>([])
        CometChat.retryMessage(localId, onSuccess: { answers.withLock { $0.append("retried") } },
                               onError: { error in answers.withLock { $0.append("retry " + error.errorCode) } })
        CometChat.discardLocalMessage(localId, onSuccess: { answers.withLock { $0.append("discarded") } },
                                      onError: { error in answers.withLock { $0.append("discard " + error.errorCode) } })
        await waitUntil { answers.withLock { $0.count } == 2 }
        let notFound = CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_NOT_FOUND
        XCTAssertEqual(answers.withLock { $0 }.sorted(), ["discard " + notFound, "retry " + notFound])
        let queued = try await vault.pendingMessages()
        XCTAssertEqual(queued.map(\.localMessageId), [textMessage.localMessageId], "the queued message is untouched")
        await vault.logout()
    }

    func testTheMediaPageSamplesRun() async throws {
        let folder = TemporaryDirectory()
        let simulator = ChatVaultSimulator(seed: 4, clock: SimulatedClock())
        for user in ["alice", "bob"] { try simulator.addUser(SimulatedUser(uid: user, name: user)) }
        let client = simulator.client(for: "alice")
        // Set the media caching mode at init (fixed for the session)
        let offlineConfig = OfflineConfig.Builder()
            .setEnabled(true)
            .setMediaCaching(.auto)                    // .auto (default) or .off
            .setMaxMediaCacheSize(500 * 1024 * 1024)   // bytes; 0 = unlimited
            .setEncryption(false)
            .build()
        var settings = VaultSettings(applicationId: "org.chatvault.samples", rootDirectory: folder.path,
                                     keyStorage: [.custom(MemoryKeyStore())], callbackExecutor: .queue(DispatchQueue(label: "samples")),
                                     retry: .manualOnly)
        settings.stableConnectionDelay = .milliseconds(20)
        let vault = try OfflineVault(appSettings: AppSettings.AppSettingsBuilder().setOfflineConfig(offlineConfig).build(),
                                     settings: settings, backend: client)
        CometChat.offlineVault = vault
        _ = await vault.login(userId: "alice")
        let mediaObserver = MediaObserver()   // keep a strong reference
        CometChat.addMediaDownloadListener("MEDIA_LISTENER", mediaObserver)   // MediaDownloadListener

        // Read the mode in effect
        let mode = CometChat.getMediaCachingMode()     // .off when offline is not active
        XCTAssertEqual(mode, .auto)

        // A picture arrives while connected: in .auto its bytes download in the background.
        let url = "https://media.test/seed-cat.png"
        simulator.registerMedia(url: url, bytes: Data("cat bytes".utf8), mimeType: "image/png")
        await waitUntil { client.isConnected }
        let id = try simulator.postMedia(.image, [SimulatedAttachment(name: "cat.png", mimeType: "image/png", url: url)],
                                         from: "bob", to: .user("alice"))
        await waitUntil { mediaObserver.heard.withLock { $0 } == ["downloaded \(id) \(url)"] }

        let request = MessagesRequest.MessageRequestBuilder().set(uid: "bob").set(limit: 30).build()
        let page = await request.fetchPrevious().cached
        let mediaMessage = try XCTUnwrap(page?.first { $0.id == id } as? MediaMessage)
        // Resolve cached bytes for an attachment
        let attachment = mediaMessage.attachment
        let localPath = attachment?.localPath                           // hydrated automatically on reads
        let cached = CometChat.getCachedMediaPath(attachment!.fileUrl)  // nil if not cached
        XCTAssertEqual(localPath.flatMap { FileManager.default.contents(atPath: $0) }, Data("cat bytes".utf8))
        XCTAssertEqual(cached, localPath)

        // Download on demand
        let outcome = Mutex<[String]>([])
        CometChat.downloadMedia(url: attachment!.fileUrl, messageServerId: mediaMessage.id,
                                onProgress: { percent in outcome.withLock { $0.append("\(percent)") } },
                                onSuccess: { localPath in outcome.withLock { $0.append("ok") } },
                                onError: { error in
                                    print("Download failed: \(error.errorCode)")
                                    outcome.withLock { $0.append(error.errorCode) }
                                })
        await waitUntil { outcome.withLock { $0 }.contains("ok") }
        XCTAssertEqual(outcome.withLock { $0 }, ["ok"], "served from the cache: nothing to report progress on")
        XCTAssertEqual(simulator.mediaDownloadCount(url: url), 1)

        CometChat.removeMediaDownloadListener("MEDIA_LISTENER")
        await vault.logout()
    }
}
