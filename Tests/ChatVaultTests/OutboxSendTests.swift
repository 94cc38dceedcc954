import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

/// The persistent sends: pending only once committed, queued-not-failed offline, sent on
/// reconnect, invalid sends refused, classic sends unchanged.
final class OutboxSendTests: XCTestCase {
    func testPendingFiresOnlyOnceTheRowIsCommittedAndTheLifecycleEndsSentWithAServerId() async throws {
        let h = try OutboxHarness()
        await h.login()
        let message = h.text("hello")
        let seenInCache = Mutex<Bool?>(nil)
        let recorder = SendRecorder()
        let vault = h.vault
        h.vault.sendTextMessage(message: message, onMessagePending: { m in
            // Read through a connection of its own: the row must already be committed.
            let committed = try? vault.openCache?.reader.sync { db in
                try db.scalarInt("SELECT count(*) FROM outbox WHERE local_id = ?", .text(m.localMessageId ?? ""))
            }
            let landed = try? vault.openCache?.reader.sync { db in
                try db.scalarInt("SELECT count(*) FROM messages WHERE local_id = ?", .text(m.localMessageId ?? ""))
            }
            seenInCache.withLock { $0 = (committed ?? 0) == 1 || (landed ?? 0) == 1 }
            recorder.onPending(m)
        }, onMessageSent: recorder.onSent, onError: recorder.onError)
        let localId = try XCTUnwrap(message.localMessageId, "stamped at compose time")
        await waitUntil { recorder.isSent }
        h.drain()
        XCTAssertEqual(seenInCache.withLock { $0 }, true)
        XCTAssertEqual(recorder.events.first, .pending(localId, .pending))
        XCTAssertEqual(recorder.errors, [])
        let serverId = try XCTUnwrap(recorder.sentIds.first)
        XCTAssertGreaterThan(serverId, 0)
        XCTAssertEqual(message.id, serverId, "the object the app sent adopts the server's id")
        XCTAssertEqual(message.messageStatus, .sent)
        XCTAssertEqual(message.localMessageId, localId, "the local id stays stable")
        XCTAssertEqual(h.serverTexts(with: "bob"), ["hello"])
        XCTAssertEqual(h.simulator.storedCopies(ofLocalMessageId: localId, from: "alice"), 1)
        XCTAssertEqual(try h.rows().count, 0, "the outbox is empty once sent")
        XCTAssertEqual(try h.cachedLocalId(ofServerId: serverId), localId, "the sent message is cached with its local id")
        XCTAssertEqual(h.listener.events(for: localId), [.pending(localId), .sent(localId, serverId)])
    }

    func testOfflineSendIsQueuedNotFailedThenSentOnReconnect() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let message = h.text("queued")
        let recorder = h.send(message)
        await waitUntil { recorder.errors.count == 1 }
        XCTAssertEqual(recorder.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE])
        XCTAssertEqual(recorder.pendingCount, 1)
        h.drain()
        XCTAssertEqual(message.messageStatus, .pending, "queued, not failed")
        let pending = try await h.pending()
        XCTAssertEqual(pending.map(\.localMessageId), [message.localMessageId])
        XCTAssertEqual(pending.first?.messageStatus, .pending)
        XCTAssertEqual((pending.first as? TextMessage)?.text, "queued")
        XCTAssertEqual(h.serverTexts(with: "bob"), [])

        h.client.network = .online
        await waitUntil { recorder.isSent }
        XCTAssertEqual(recorder.errors.count, 1, "the queued notice fires once")
        XCTAssertEqual(h.serverTexts(with: "bob"), ["queued"])
        let after = try await h.pending()
        XCTAssertEqual(after.count, 0)
    }

    func testWithAutoSendOffAnOfflineSendFailsTransientAtOnceAndStaysUntilRetried() async throws {
        let h = try OutboxHarness(configure: { $0.setAutoSendPendingOnReconnect(false) })
        h.client.network = .offline
        await h.login()
        let message = h.text("manual")
        let recorder = h.send(message)
        await waitUntil { !recorder.errors.isEmpty }
        h.drain()
        XCTAssertEqual(recorder.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE])
        XCTAssertEqual(message.messageStatus, .failed)
        XCTAssertEqual(message.getFailureReason(), .transient)
        let localId = try XCTUnwrap(message.localMessageId)
        XCTAssertEqual(h.listener.events(for: localId), [.pending(localId), .failed(localId, .transient)])
        XCTAssertEqual(try h.rows().map(\.1), [2])

        // Reconnecting does not send it.
        h.client.network = .online
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(h.serverTexts(with: "bob"), [])
        XCTAssertFalse(recorder.isSent)

        let retried = Mutex<Bool>(false)
        h.vault.retryMessage(localId, onSuccess: { retried.withLock { $0 = true } }, onError: { XCTFail("retry failed: \($0)") })
        await waitUntil { retried.withLock { $0 } }
        XCTAssertEqual(h.serverTexts(with: "bob"), ["manual"])
        XCTAssertTrue(recorder.isSent, "the original closures hear the send")
        XCTAssertEqual(h.listener.events(for: localId).suffix(2).first, .pending(localId), "failed → pending is a transition")
    }

    func testInvalidSendsAreRefusedBeforeAnythingIsStored() async throws {
        let h = try OutboxHarness()
        await h.login()
        var recorders: [SendRecorder] = []
        for text in ["", "   \n\t"] { recorders.append(h.send(h.text(text))) }
        recorders.append(h.send(TextMessage(receiverUid: "", text: "to nobody", receiverType: .user)))
        let custom = SendRecorder()
        h.vault.sendCustomMessage(message: CustomMessage(receiverUid: "bob", receiverType: .user, customData: nil, type: "location"),
                                  onMessagePending: custom.onPending, onMessageSent: custom.onSent, onError: custom.onError)
        recorders.append(custom)
        let media = SendRecorder()
        h.vault.sendMediaMessage(message: MediaMessage(receiverUid: "bob", files: [], messageType: .image, receiverType: .user),
                                 onMessagePending: media.onPending, onMessageSent: media.onSent, onError: media.onError)
        recorders.append(media)
        await waitUntil { recorders.allSatisfy { !$0.events.isEmpty } }
        try await Task.sleep(for: .milliseconds(50))
        for recorder in recorders {
            XCTAssertEqual(recorder.events, [.error(OfflineErrorCode.invalidMessage.rawValue)])
        }
        XCTAssertEqual(try h.rows().count, 0)
        XCTAssertEqual(h.listener.events, [])
        XCTAssertEqual(h.client.callCount(.send), 0)
    }

    func testClassicSendsNeverQueue() async throws {
        let h = try OutboxHarness()
        await h.login()
        h.client.network = .offline
        let offline = Mutex<[String]>([])
        let message = h.text("classic offline")
        h.vault.sendTextMessage(message: message, onSuccess: { _ in offline.withLock { $0.append("success") } },
                                onError: { e in offline.withLock { $0.append(e?.errorCode ?? "nil") } })
        await waitUntil { !offline.withLock { $0 }.isEmpty }
        XCTAssertEqual(offline.withLock { $0 }, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE])
        XCTAssertNil(message.localMessageId, "never went through the outbox")
        XCTAssertEqual(try h.rows().count, 0)

        h.client.network = .online
        let online = Mutex<[Int]>([])
        h.vault.sendTextMessage(message: h.text("classic online"), onSuccess: { m in online.withLock { $0.append(m.id) } },
                                onError: { XCTFail("unexpected \(String(describing: $0))") })
        await waitUntil { !online.withLock { $0 }.isEmpty }
        XCTAssertEqual(h.serverTexts(with: "bob"), ["classic online"])
        XCTAssertEqual(h.listener.events, [], "classic sends are not outbox transitions")
    }

    func testServerErrorsFailTransientOrPermanentAndRetryAllSkipsPermanent() async throws {
        let h = try OutboxHarness()
        await h.login()
        h.client.failNext(.send, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
        h.client.failNext(.send, with: .status(429, code: "ERR_TOO_MANY_REQUESTS"))
        h.client.failNext(.send, with: .status(400, code: "ERR_BAD_REQUEST"))
        let a = h.send(h.text("a"))
        await waitUntil { !a.errors.isEmpty }
        let b = h.send(h.text("b"))
        await waitUntil { !b.errors.isEmpty }
        let c = h.send(h.text("c"))
        await waitUntil { !c.errors.isEmpty }
        XCTAssertEqual(a.errors, ["ERR_SERVICE_UNAVAILABLE"])
        XCTAssertEqual(b.errors, ["ERR_TOO_MANY_REQUESTS"])
        XCTAssertEqual(c.errors, ["ERR_BAD_REQUEST"])
        let failed = try await h.pending()
        XCTAssertEqual(failed.map(\.messageStatus), [.failed, .failed, .failed])
        XCTAssertEqual(failed.map { $0.getFailureReason() }, [.transient, .transient, .permanent])

        h.vault.retryAllFailedMessages()
        await waitUntil { a.isSent && b.isSent }
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertFalse(c.isSent, "a permanent failure is not retried")
        XCTAssertEqual(h.serverTexts(with: "bob"), ["a", "b"])
        let left = try await h.pending()
        XCTAssertEqual(left.map { ($0 as? TextMessage)?.text }, ["c"])
    }

    func testNoAnswerIsRetriedOnEachReconnectThenFailsTransientAfterFive() async throws {
        let h = try OutboxHarness()
        await h.login()
        await waitUntil { h.vault.link.isStable }
        h.client.failNext(.send, with: .timeout, times: 5)
        let message = h.text("silent server")
        let recorder = h.send(message)
        await waitUntil(20) { recorder.errors.count == 2 }
        h.drain()
        XCTAssertEqual(recorder.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE, OfflineErrorCode.requestTimedOut.rawValue])
        XCTAssertEqual(h.client.serverCallCount(.send), 5)
        XCTAssertEqual(message.messageStatus, .failed)
        XCTAssertEqual(message.getFailureReason(), .transient)
        XCTAssertGreaterThanOrEqual(h.client.callCount(.connect), 5, "each no-answer waits for a new connection")
        XCTAssertEqual(try h.rows().first?.3, 5, "the no-answer count is durable")
    }

    func testAnAcknowledgementLostAfterTheServerStoredTheMessageNeverDuplicatesIt() async throws {
        let h = try OutboxHarness()
        await h.login()
        h.client.failNext(.send, with: .ackLost)
        let message = h.text("once")
        let recorder = h.send(message)
        await waitUntil { recorder.isSent }
        XCTAssertEqual(h.client.serverCallCount(.send), 2, "sent again after the lost answer")
        XCTAssertEqual(h.serverTexts(with: "bob"), ["once"])
        XCTAssertEqual(h.simulator.storedCopies(ofLocalMessageId: try XCTUnwrap(message.localMessageId), from: "alice"), 1)
        XCTAssertEqual(recorder.sentIds.count, 1)
    }

    func testAConnectionThatDropsBeforeItHoldsDoesNotFlush() async throws {
        let h = try OutboxHarness(settings: { $0.stableConnectionDelay = .milliseconds(400) })
        h.client.network = .offline
        await h.login()
        let recorder = h.send(h.text("wait for a stable link"))
        await waitUntil { recorder.errors.count == 1 }
        h.client.network = .online
        await waitUntil { h.client.isConnected }
        h.simulator.dropAllConnections()
        h.client.network = .offline
        try await Task.sleep(for: .milliseconds(600))
        XCTAssertFalse(recorder.isSent)
        XCTAssertEqual(h.client.serverCallCount(.send), 0, "a flap does not flush")
        h.client.network = .online
        await waitUntil { recorder.isSent }
    }

    func testFlushSendsInComposeOrderPerConversation() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        var recorders: [SendRecorder] = []
        for i in 0..<12 {
            let peer = ["bob", "carol", "dave"][i % 3]
            recorders.append(h.send(h.text("\(peer)-\(i)", to: peer)))
        }
        await waitUntil { recorders.allSatisfy { $0.errors.count == 1 } }
        let pending = try await h.pending()
        XCTAssertEqual(pending.compactMap { ($0 as? TextMessage)?.text }, (0..<12).map { "\(["bob", "carol", "dave"][$0 % 3])-\($0)" })
        h.client.network = .online
        await waitUntil { recorders.allSatisfy(\.isSent) }
        for (offset, peer) in ["bob", "carol", "dave"].enumerated() {
            XCTAssertEqual(h.serverTexts(with: peer), stride(from: offset, to: 12, by: 3).map { "\(peer)-\($0)" })
        }
        XCTAssertEqual(h.listener.sentLocalIds, pending.compactMap(\.localMessageId), "flushed in compose order")
    }

    func testTheAsyncSequenceFormYieldsPendingQueuedThenSent() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let message = h.text("streamed")
        let steps = h.vault.send(message)
        var seen: [String] = []
        for await step in steps {
            switch step {
            case .pending(let m):
                seen.append("pending")
                XCTAssertTrue(m === message)
            case .queued(let error):
                seen.append("queued:" + error.errorCode)
                h.client.network = .online
            case .sent(let m):
                seen.append("sent")
                XCTAssertGreaterThan(m.id, 0)
            case .failed(let error):
                seen.append("failed:" + error.errorCode)
            }
        }
        XCTAssertEqual(seen, ["pending", "queued:ERROR_INTERNET_UNAVAILABLE", "sent"])
    }

    func testOutboxListenersAreHeldWeaklyAndOnePerId() async throws {
        let h = try OutboxHarness()
        await h.login()
        let replaced = OutboxRecorder()
        let replacement = OutboxRecorder()
        h.vault.addOutboxListener("same-id", replaced)
        h.vault.addOutboxListener("same-id", replacement)
        var released: OutboxRecorder? = OutboxRecorder()
        weak let weakReleased = released
        h.vault.addOutboxListener("released", released!)
        released = nil
        XCTAssertNil(weakReleased, "the engine holds listeners weakly")
        let removed = OutboxRecorder()
        h.vault.addOutboxListener("removed", removed)
        h.vault.removeOutboxListener("removed")
        let recorder = h.send(h.text("heard"))
        await waitUntil { recorder.isSent }
        h.drain()
        XCTAssertEqual(replaced.events, [], "registering an id again replaces the listener")
        XCTAssertEqual(replacement.events.count, 2)
        XCTAssertEqual(removed.events, [])
        XCTAssertEqual(h.listener.events.count, 2)
    }

    func testTheStaticFacadeForwardsSendsAndTheOutbox() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        CometChat.offlineVault = h.vault
        defer { CometChat.offlineVault = nil }
        let recorder = SendRecorder()
        let message = h.text("via the facade")
        CometChat.sendTextMessage(message: message, onMessagePending: recorder.onPending, onMessageSent: recorder.onSent, onError: recorder.onError)
        await waitUntil { !recorder.errors.isEmpty }
        let listed = Mutex<[String?]>([])
        CometChat.getPendingMessages(onSuccess: { list in listed.withLock { $0 = list.map(\.localMessageId) } }, onError: { XCTFail("\($0)") })
        await waitUntil { !listed.withLock { $0 }.isEmpty }
        XCTAssertEqual(listed.withLock { $0 }, [message.localMessageId])
        h.client.network = .online
        await waitUntil { recorder.isSent }
    }

    func testTheWriterCommitsWithSynchronousFull() async throws {
        let h = try OutboxHarness()
        await h.login()
        let cache = try XCTUnwrap(h.vault.openCache)
        XCTAssertEqual(try cache.writer.sync { db in try db.scalarInt("PRAGMA synchronous") }, 2, "FULL: a pending row survives power loss")
        XCTAssertEqual(try cache.writer.sync { db in try db.scalarText("PRAGMA journal_mode") }, "wal")
    }

    func testErrorsNeverCarryMessageContentOrAServersFreeText() async throws {
        let marker = "SECRET-CONTENT-7f3a"
        let h = try OutboxHarness()
        await h.login()
        let tooLong = SendRecorder()
        let exceptions = Mutex<[CometChatException]>([])
        let capture: @Sendable (CometChatException?) -> Void = { e in if let e { exceptions.withLock { $0.append(e) } } }
        h.vault.sendTextMessage(message: h.text(String(repeating: marker, count: 40_000)), onMessagePending: tooLong.onPending,
                                onMessageSent: tooLong.onSent, onError: capture)
        h.vault.sendCustomMessage(message: CustomMessage(receiverUid: marker + "\u{1}", receiverType: .user, customData: ["k": .string(marker)], type: "t"),
                                  onMessagePending: { _ in }, onMessageSent: { _ in }, onError: capture)
        h.client.failNext(.send, with: .status(500, code: marker.lowercased()))
        h.vault.sendTextMessage(message: h.text(marker), onMessagePending: { _ in }, onMessageSent: { _ in }, onError: capture)
        await waitUntil { exceptions.withLock { $0.count } == 3 }
        for exception in exceptions.withLock({ $0 }) {
            XCTAssertFalse(exception.description.contains(marker), "no content in \(exception.errorCode)")
            XCTAssertFalse(exception.description.lowercased().contains(marker.lowercased()))
        }
        XCTAssertEqual(exceptions.withLock { $0.map(\.errorCode) }.sorted(), ["ERROR_INVALID_MESSAGE", "ERROR_INVALID_MESSAGE", "ERROR_SERVER"])
    }
}
