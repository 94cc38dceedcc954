import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

/// The outbox as a queue: limits and overflow, retry and discard with their rejections, restarts,
/// clears and resets.
final class OutboxQueueTests: XCTestCase {
    // MARK: - Limits

    func testRejectNewestRefusesTheNewSendWhichHasNoRow() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxPendingMessages(2) })
        h.client.network = .offline
        await h.login()
        let a = h.send(h.text("a"))
        let b = h.send(h.text("b"))
        let refusedMessage = h.text("c")
        let c = h.send(refusedMessage)
        await waitUntil { [a, b, c].allSatisfy { !$0.errors.isEmpty } }
        h.drain()
        XCTAssertEqual(a.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE])
        XCTAssertEqual(c.pendingCount, 1, "a refused send still reports pending first")
        XCTAssertEqual(c.errors, [CometChatConstants.Errors.ERROR_QUEUE_FULL])
        XCTAssertEqual(refusedMessage.messageStatus, .failed)
        XCTAssertEqual(refusedMessage.getFailureReason(), .queueFull)
        let refused = try XCTUnwrap(refusedMessage.localMessageId)
        XCTAssertEqual(h.listener.events(for: refused), [.pending(refused), .failed(refused, .queueFull)])
        let pending = try await h.pending()
        XCTAssertEqual(pending.compactMap { ($0 as? TextMessage)?.text }, ["a", "b"], "nothing already queued is lost")
        await assertRejected(h, retry: refused, with: .offlineMessageNotFound)

        h.client.network = .online
        await waitUntil { a.isSent && b.isSent }
        XCTAssertEqual(h.serverTexts(with: "bob"), ["a", "b"])
    }

    func testDropOldestEvictsTheOldestPendingMessageOnItsOwnClosures() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxPendingMessages(2).setPendingQueueOverflowPolicy(.dropOldest) })
        h.client.network = .offline
        await h.login()
        let oldest = h.text("a")
        let a = h.send(oldest)
        let b = h.send(h.text("b"))
        await waitUntil { !a.errors.isEmpty && !b.errors.isEmpty }
        let c = h.send(h.text("c"))
        await waitUntil { a.errors.count == 2 && !c.errors.isEmpty }
        h.drain()
        XCTAssertEqual(a.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE, CometChatConstants.Errors.ERROR_QUEUE_OVERFLOW])
        XCTAssertEqual(oldest.getFailureReason(), .queueOverflow)
        let evicted = try XCTUnwrap(oldest.localMessageId)
        XCTAssertEqual(h.listener.events(for: evicted).last, .failed(evicted, .queueOverflow))
        XCTAssertEqual(c.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE], "the newer send was admitted")
        let pending = try await h.pending()
        XCTAssertEqual(pending.compactMap { ($0 as? TextMessage)?.text }, ["b", "c"])
        await assertRejected(h, retry: evicted, with: .offlineMessageNotFound)

        h.client.network = .online
        await waitUntil { b.isSent && c.isSent }
        XCTAssertEqual(h.serverTexts(with: "bob"), ["b", "c"])
        XCTAssertFalse(a.isSent)
    }

    func testDropOldestNeverEvictsAMessageOnTheWireAndRefusesInstead() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxPendingMessages(1).setPendingQueueOverflowPolicy(.dropOldest) })
        await h.login()
        h.client.failNext(.send, with: .delay(.milliseconds(400)))
        let a = h.send(h.text("on the wire"))
        await waitUntil { h.client.callCount(.send) == 1 }
        let b = h.send(h.text("no room"))
        await waitUntil { !b.errors.isEmpty }
        XCTAssertEqual(b.errors, [CometChatConstants.Errors.ERROR_QUEUE_FULL])
        await waitUntil { a.isSent }
        XCTAssertEqual(a.errors, [])
        XCTAssertEqual(h.serverTexts(with: "bob"), ["on the wire"])
    }

    func testFailedMessagesDoNotCountTowardTheCap() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxPendingMessages(1).setAutoSendPendingOnReconnect(false) })
        h.client.network = .offline
        await h.login()
        var recorders: [SendRecorder] = []
        for i in 0..<3 {
            // Each send fails before the next is made: a failed message no longer takes the one slot.
            let recorder = h.send(h.text("m\(i)"))
            await waitUntil { !recorder.errors.isEmpty }
            recorders.append(recorder)
        }
        for recorder in recorders { XCTAssertEqual(recorder.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE]) }
        let rows = try h.rows()
        XCTAssertEqual(rows.map(\.1), [2, 2, 2], "all three kept as failed; none refused")
        XCTAssertEqual(rows.map(\.2), ["transient", "transient", "transient"])
    }

    // MARK: - Retry and discard

    func testRetryAndDiscardRejectionsChangeNothing() async throws {
        let h = try OutboxHarness()
        await h.login()
        await assertRejected(h, retry: "no-such-id", with: .offlineMessageNotFound)
        await assertRejected(h, retry: "", with: .offlineMessageNotFound)
        await assertRejected(h, discard: "no-such-id", with: .offlineMessageNotFound)

        // A sent message is no longer in the outbox.
        let sentMessage = h.text("sent")
        let sent = h.send(sentMessage)
        await waitUntil { sent.isSent }
        await assertRejected(h, retry: try XCTUnwrap(sentMessage.localMessageId), with: .offlineMessageNotFound)

        // In flight: both refuse, and the message still goes once.
        h.client.failNext(.send, with: .delay(.milliseconds(400)))
        let slow = h.text("slow")
        let slowRecorder = h.send(slow)
        await waitUntil { h.client.callCount(.send) == 2 }
        let slowId = try XCTUnwrap(slow.localMessageId)
        await assertRejected(h, retry: slowId, with: .offlineMessageInFlight)
        await assertRejected(h, discard: slowId, with: .offlineMessageInFlight)
        let during = try await h.pending()
        XCTAssertEqual(during.map(\.messageStatus), [.sending])
        await waitUntil { slowRecorder.isSent }
        XCTAssertEqual(h.serverTexts(with: "bob"), ["sent", "slow"])

        // Offline support not running.
        await h.vault.logout()
        await assertRejected(h, retry: slowId, with: .offlineDisabled)
        await assertRejected(h, discard: slowId, with: .offlineDisabled)
        do {
            _ = try await h.vault.pendingMessages()
            XCTFail("expected DISABLED")
        } catch {
            XCTAssertEqual(error.code, .offlineDisabled)
        }
    }

    /// The send page passes `message.localMessageId` (a `String?`) as it is: nil is no unsent
    /// message's id, and a queued message's optional id is its id.
    func testRetryAndDiscardTakeTheOptionalLocalIdAMessageCarries() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let neverSent = h.text("never sent")
        XCTAssertNil(neverSent.localMessageId)
        let retried = Mutex<String?>(nil)
        h.vault.retryMessage(neverSent.localMessageId, onSuccess: { retried.withLock { $0 = "success" } },
                             onError: { e in retried.withLock { $0 = e.errorCode } })
        let discarded = Mutex<String?>(nil)
        h.vault.discardLocalMessage(neverSent.localMessageId, onSuccess: { discarded.withLock { $0 = "success" } },
                                    onError: { e in discarded.withLock { $0 = e.errorCode } })
        await waitUntil { retried.withLock { $0 } != nil && discarded.withLock { $0 } != nil }
        XCTAssertEqual(retried.withLock { $0 }, CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_NOT_FOUND)
        XCTAssertEqual(discarded.withLock { $0 }, CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_NOT_FOUND)

        let queued = h.text("queued")
        let recorder = h.send(queued)
        await waitUntil { !recorder.errors.isEmpty }
        let optionalId: String? = queued.localMessageId
        let kept = Mutex<String?>(nil)
        h.vault.discardLocalMessage(optionalId, onSuccess: { kept.withLock { $0 = "success" } },
                                    onError: { e in kept.withLock { $0 = e.errorCode } })
        await waitUntil { kept.withLock { $0 } != nil }
        XCTAssertEqual(kept.withLock { $0 }, "success")
        let left = try await h.pending()
        XCTAssertEqual(left.count, 0)
    }

    func testTheFireAndForgetRetryTakesTheMessageItself() async throws {
        let h = try OutboxHarness()
        await h.login()
        h.client.failNext(.send, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
        let message = h.text("again")
        let recorder = h.send(message)
        await waitUntil { !recorder.errors.isEmpty }
        h.drain()
        XCTAssertEqual(message.messageStatus, .failed)
        h.vault.retryMessage(message)
        await waitUntil { recorder.isSent }
        XCTAssertEqual(h.serverTexts(with: "bob"), ["again"])
        let id = try XCTUnwrap(message.localMessageId)
        XCTAssertEqual(h.listener.events(for: id).suffix(2).map { if case .sent = $0 { return "sent" } else { return "\($0)" } },
                       ["pending(\"\(id)\")", "sent"])
        // A message that never went through the outbox is ignored.
        h.vault.retryMessage(TextMessage(receiverUid: "bob", text: "classic", receiverType: .user))
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(h.serverTexts(with: "bob"), ["again"])
    }

    func testAMomentarilyUnavailableCacheAnswersPersistFailedNeverAnEmptyList() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let queued = h.send(h.text("kept"))
        await waitUntil { !queued.errors.isEmpty }
        await h.vault.logout()
        h.keyStore.simulate(.locked)
        let attempt = await h.vault.login(userId: h.me)
        guard case .unavailable = attempt.state else { return XCTFail("expected unavailable, got \(attempt.state)") }
        let localId = try XCTUnwrap(queued.events.first.flatMap { if case .pending(let id, _) = $0 { return id } else { return nil } })
        do {
            _ = try await h.vault.pendingMessages()
            XCTFail("expected PERSIST_FAILED")
        } catch {
            XCTAssertEqual(error.code, .offlineMessagePersistFailed)
        }
        await assertRejected(h, retry: localId, with: .offlineMessagePersistFailed)
        await assertRejected(h, discard: localId, with: .offlineMessagePersistFailed)
        // A persistent send made now is not claimed as queued.
        let notQueued = h.send(h.text("not queued"))
        await waitUntil { !notQueued.errors.isEmpty }
        XCTAssertEqual(notQueued.errors, [CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_PERSIST_FAILED])
        XCTAssertEqual(notQueued.pendingCount, 0)

        h.keyStore.simulate(nil)
        let reopened = await h.vault.retryOpen()
        XCTAssertEqual(reopened.state, .ready)
        let pending = try await h.pending()
        XCTAssertEqual(pending.map(\.localMessageId), [localId], "nothing was lost while the key was locked away")
    }

    func testDiscardDeletesTheMessageWithoutAnyEventOrOutcome() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let message = h.text("never mind")
        let recorder = h.send(message)
        await waitUntil { !recorder.errors.isEmpty }
        let localId = try XCTUnwrap(message.localMessageId)
        let done = Mutex(false)
        h.vault.discardLocalMessage(localId, onSuccess: { done.withLock { $0 = true } }, onError: { XCTFail("discard failed: \($0)") })
        await waitUntil { done.withLock { $0 } }
        XCTAssertEqual(try h.rows().count, 0)
        h.client.network = .online
        try await Task.sleep(for: .milliseconds(200))
        h.drain()
        XCTAssertEqual(h.serverTexts(with: "bob"), [])
        XCTAssertEqual(recorder.events, [.pending(localId, .pending), .error(CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)],
                       "the original closures get no final outcome")
        XCTAssertEqual(h.listener.events(for: localId), [.pending(localId)], "no outbox event for a discard")
        await assertRejected(h, discard: localId, with: .offlineMessageNotFound)
    }

    // MARK: - Restarts

    func testSendsResumedAfterARestartReachTheListenerWhoseClosuresAreGone() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let recorders = (0..<3).map { h.send(h.text("r\($0)")) }
        await waitUntil { recorders.allSatisfy { !$0.errors.isEmpty } }
        let ids = try h.rows().map(\.0)
        try await h.restart(network: .online)
        await waitUntil { h.listener.sentLocalIds.count == 3 }
        XCTAssertEqual(h.listener.sentLocalIds, ids, "resumed in compose order")
        XCTAssertEqual(h.serverTexts(with: "bob"), ["r0", "r1", "r2"])
        for id in ids { XCTAssertEqual(h.simulator.storedCopies(ofLocalMessageId: id, from: "alice"), 1) }
        for recorder in recorders { XCTAssertFalse(recorder.isSent, "the old closures are gone with the old engine") }
    }

    func testARestartKeepsMessagesInEveryState() async throws {
        let h = try OutboxHarness()
        h.adjust = { $0.stableConnectionDelay = .seconds(30) }
        try await h.restart(network: .online)
        await waitUntil { h.client.isConnected }
        h.client.failNext(.send, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
        let transient = h.send(h.text("transient"))
        await waitUntil { !transient.errors.isEmpty }
        h.client.failNext(.send, with: .status(400, code: "ERR_BAD_REQUEST"))
        let permanent = h.send(h.text("permanent", to: "carol"))
        await waitUntil { !permanent.errors.isEmpty }
        h.client.failNext(.send, with: .ackLost)
        let acked = h.send(h.text("stored but unacknowledged", to: "dave"))
        await waitUntil { !acked.errors.isEmpty }
        h.client.network = .offline
        let pendingRecorder = h.send(h.text("pending", to: "carol"))
        await waitUntil { !pendingRecorder.errors.isEmpty }
        XCTAssertEqual(h.serverTexts(with: "dave"), ["stored but unacknowledged"], "the server has it; the client does not know")

        h.adjust = { _ in }
        try await h.restart(network: .offline)
        let restored = try await h.pending()
        XCTAssertEqual(restored.compactMap { ($0 as? TextMessage)?.text }, ["transient", "permanent", "stored but unacknowledged", "pending"])
        XCTAssertEqual(restored.map(\.messageStatus), [.failed, .failed, .pending, .pending])
        XCTAssertEqual(restored.map { $0.getFailureReason() }, [.transient, .permanent, nil, nil])

        h.client.network = .online
        await waitUntil { h.listener.sentLocalIds.count == 2 }
        XCTAssertEqual(h.serverTexts(with: "dave"), ["stored but unacknowledged"], "resending never duplicates")
        XCTAssertEqual(h.serverTexts(with: "carol"), ["pending"])
        h.vault.retryAllFailedMessages()
        await waitUntil { h.listener.sentLocalIds.count == 3 }
        XCTAssertEqual(h.serverTexts(with: "bob"), ["transient"])
        let left = try await h.pending()
        XCTAssertEqual(left.compactMap { ($0 as? TextMessage)?.text }, ["permanent"])
    }

    /// A logout while a pass is sending: the backend refuses what it is asked after its logout
    /// (`ERR_NOT_LOGGED_IN`, as the simulator and Matrix do), which says nothing about the
    /// message. It stays pending, no failure is reported, and the next login sends it.
    func testALogoutWhileAPassSendsNeverFailsTheMessage() async throws {
        let gate = LogoutGate()
        let h = try OutboxHarness(backend: { LogoutRacingBackend(forwardee: $0, gate: gate) })
        await h.login()
        let message = h.text("sent as the app logs out")
        let recorder = h.send(message)
        await waitUntil { gate.state.withLock { $0.sendWaiting } }
        let id = try XCTUnwrap(message.localMessageId)
        await h.vault.logout()
        XCTAssertEqual(gate.state.withLock { $0.answers }, ["ERR_NOT_LOGGED_IN"], "the request was answered after the logout")
        h.drain()
        XCTAssertEqual(h.listener.events(for: id), [.pending(id)], "no failure reported")
        XCTAssertEqual(recorder.errors, [])

        await h.login()
        XCTAssertEqual(try h.rows().map(\.1), [0], "still pending, not failed")
        await waitUntil { h.listener.sentLocalIds == [id] }
        XCTAssertEqual(h.serverTexts(with: "bob"), ["sent as the app logs out"])
    }

    // MARK: - Clears and resets

    func testClearOfflineCacheFailsUnsentMessagesAsDiscarded() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let messages = [h.text("x"), h.text("y")]
        let recorders = messages.map { h.send($0) }
        await waitUntil { recorders.allSatisfy { !$0.errors.isEmpty } }
        try await h.vault.clearOfflineCacheAndWait()
        await waitUntil { recorders.allSatisfy { $0.errors.count == 2 } }
        h.drain()
        for (message, recorder) in zip(messages, recorders) {
            XCTAssertEqual(recorder.errors.last, CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_DISCARDED)
            XCTAssertEqual(message.getFailureReason(), .discarded)
            let id = try XCTUnwrap(message.localMessageId)
            XCTAssertEqual(h.listener.events(for: id).last, .failed(id, .discarded))
        }
        XCTAssertEqual(try h.rows().count, 0)
        h.client.network = .online
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(h.serverTexts(with: "bob"), [])
    }

    func testALiveSendWhoseRowAResetLostIsDiscardedAndOneItKeptGoesOn() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let lostMessage = h.text("lost")
        let lost = h.send(lostMessage)
        let kept = h.send(h.text("kept"))
        await waitUntil { !lost.errors.isEmpty && !kept.errors.isEmpty }
        // A reset that salvaged only part of the outbox: the new cache lacks one row.
        let cache = try XCTUnwrap(h.vault.openCache)
        try cache.writer.sync { db in try db.run("DELETE FROM outbox WHERE local_id = ?", .text(lostMessage.localMessageId ?? "")) }
        h.vault.outbox.attached(cache)
        await waitUntil { lost.errors.count == 2 }
        XCTAssertEqual(lost.errors.last, CometChatConstants.Errors.ERROR_OFFLINE_MESSAGE_DISCARDED)
        h.client.network = .online
        await waitUntil { kept.isSent }
        XCTAssertEqual(h.serverTexts(with: "bob"), ["kept"])
    }

    func testARowDamagedInPlaceIsKeptAndBlocksNothingElse() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let damagedMessage = h.text("damaged")
        let damaged = h.send(damagedMessage)
        let healthy = h.send(h.text("healthy"))
        await waitUntil { !damaged.errors.isEmpty && !healthy.errors.isEmpty }
        let cache = try XCTUnwrap(h.vault.openCache)
        try cache.writer.sync { db in
            try db.run("UPDATE outbox SET payload = x'00ff13' WHERE local_id = ?", .text(damagedMessage.localMessageId ?? ""))
        }
        let listed = try await h.pending()
        XCTAssertEqual(listed.compactMap { ($0 as? TextMessage)?.text }, ["healthy"], "an unreadable row does not fail the listing")
        h.client.network = .online
        await waitUntil { healthy.isSent }
        XCTAssertEqual(h.serverTexts(with: "bob"), ["healthy"])
        XCTAssertEqual(try h.rows().map(\.0), [damagedMessage.localMessageId ?? ""], "the damaged row is kept, never deleted")
    }

    func testCopyFoldersThatNoMessageOwnsAreRemovedAtOpen() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let kept = h.send(h.text("kept"))
        await waitUntil { !kept.errors.isEmpty }
        let keptId = try XCTUnwrap(try h.rows().first?.0)
        let outgoing = try XCTUnwrap(h.vault.cacheDirectory).outgoing
        for name in [keptId, "orphan-left-by-a-crash"] {
            try FileManager.default.createDirectory(atPath: outgoing + "/" + name, withIntermediateDirectories: true)
            XCTAssertTrue(FileManager.default.createFile(atPath: outgoing + "/" + name + "/0", contents: Data("bytes".utf8)))
        }
        try await h.restart(network: .offline)
        await waitUntil { !FileManager.default.fileExists(atPath: outgoing + "/orphan-left-by-a-crash") }
        XCTAssertTrue(FileManager.default.fileExists(atPath: outgoing + "/" + keptId + "/0"), "a queued message's copies stay")
    }

    // MARK: - Flaky network

    func testThousandsOfSendsOverAFlakyNetworkArriveExactlyOnceInOrderPerConversation() async throws {
        let peers = ["bob", "carol", "dave", "erin", "frank", "grace"]
        let h = try OutboxHarness(users: ["alice"] + peers, settings: {
            $0.stableConnectionDelay = .milliseconds(2)
            $0.reconnect = RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(4))
        })
        await h.login()
        h.client.network = .flaky(failureRate: 0.2)
        let total = 2000
        var expected: [String: [String]] = [:]
        let started = Date()
        for i in 0..<total {
            // Stay under the default cap of 50 unsent messages.
            while i - h.listener.sentLocalIds.count >= 40 { try await Task.sleep(for: .milliseconds(1)) }
            // Now and then the server stores a message and the answer is lost.
            if i % 50 == 25 { h.client.failNext(.send, with: .ackLost) }
            let peer = peers[(i * 7 + i / 13) % peers.count]
            let body = "\(peer)#\(i)"
            expected[peer, default: []].append(body)
            h.send(h.text(body, to: peer))
        }
        await waitUntil(120, "all sent") { h.listener.sentLocalIds.count == total }
        print("flaky flush: \(total) sends in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
        h.client.network = .online
        for peer in peers {
            let server = h.serverTexts(with: peer)
            XCTAssertEqual(server.count, expected[peer]?.count, "\(peer): every message once")
            XCTAssertTrue(server == expected[peer], "\(peer): in compose order")
        }
        XCTAssertEqual(Set(h.listener.sentLocalIds).count, total)
        XCTAssertEqual(h.listener.events.filter { if case .failed = $0 { return true } else { return false } }.count, 0)
        XCTAssertEqual(try h.rows().count, 0)
    }

    // MARK: - Helpers

    private func assertRejected(_ h: OutboxHarness, retry localId: String, with code: OfflineErrorCode,
                                file: StaticString = #filePath, line: UInt = #line) async {
        let outcome = Mutex<String?>(nil)
        h.vault.retryMessage(localId, onSuccess: { outcome.withLock { $0 = "success" } },
                             onError: { e in outcome.withLock { $0 = e.errorCode } })
        await waitUntil(file: file, line: line) { outcome.withLock { $0 } != nil }
        XCTAssertEqual(outcome.withLock { $0 }, code.rawValue, file: file, line: line)
    }

    private func assertRejected(_ h: OutboxHarness, discard localId: String, with code: OfflineErrorCode,
                                file: StaticString = #filePath, line: UInt = #line) async {
        let outcome = Mutex<String?>(nil)
        h.vault.discardLocalMessage(localId, onSuccess: { outcome.withLock { $0 = "success" } },
                                    onError: { e in outcome.withLock { $0 = e.errorCode } })
        await waitUntil(file: file, line: line) { outcome.withLock { $0 } != nil }
        XCTAssertEqual(outcome.withLock { $0 }, code.rawValue, file: file, line: line)
    }
}

/// What `LogoutRacingBackend` saw.
final class LogoutGate: Sendable {
    struct State {
        var sendWaiting = false
        var loggedOut = false
        /// The error codes the held send was answered with.
        var answers: [String] = []
    }

    let state = Mutex(State())
}

/// Holds the first send until the app logs out, then lets it reach the (logged out) device; the
/// logout returns only once that answer is back and the engine has had a moment to handle it,
/// while the cache is still open: the race a slow request meets in real life.
final class LogoutRacingBackend: ForwardingBackend {
    let forwardee: any ChatBackend
    let gate: LogoutGate

    init(forwardee: any ChatBackend, gate: LogoutGate) {
        self.forwardee = forwardee
        self.gate = gate
    }

    func send(_ m: JSONValue, localMessageId: String) async throws(BackendError) -> JSONValue {
        let hold = gate.state.withLock { s -> Bool in
            defer { s.sendWaiting = true }
            return !s.sendWaiting
        }
        guard hold else { return try await forwardee.send(m, localMessageId: localMessageId) }
        while !gate.state.withLock({ $0.loggedOut }) { try? await Task.sleep(for: .milliseconds(1)) }
        do {
            return try await forwardee.send(m, localMessageId: localMessageId)
        } catch {
            if case .server(_, let code, _) = error { gate.state.withLock { $0.answers.append(code) } }
            throw error
        }
    }

    func logout() async {
        await forwardee.logout()
        let first = gate.state.withLock { s -> Bool in
            defer { s.loggedOut = true }
            return !s.loggedOut
        }
        guard first else { return }
        let deadline = ContinuousClock.now + .seconds(5)
        while gate.state.withLock({ $0.answers.isEmpty }), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(1)) }
        try? await Task.sleep(for: .milliseconds(100))
    }
}
