import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// The catch-up sync against the simulator and its clock: when a sweep starts (a held reconnect,
/// not a flap; after the outbox flush or its cap), what it writes (new, edited and deleted
/// messages with `source == .sync`, removed conversations), how it pages (`.partial` then
/// `.caughtUp`), how it survives failures (the sync point moves only with a committed page), and
/// `forceSyncNow`'s refusals.
final class SyncEngineTests: XCTestCase {
    // MARK: - Support

    /// Everything the sync and message listeners heard, as short lines, in order; the outbox's
    /// sends are logged in the same list so orders across engines can be checked.
    final class Recorder: SyncListener, CometChatMessageDelegate, OutboxListener, @unchecked Sendable {
        private let log = Mutex<[String]>([])
        private let syncedMessages = Mutex<[BaseMessage]>([])
        private let states = Mutex<[SyncState]>([])
        weak var vault: OfflineVault?

        var lines: [String] { log.withLock { $0 } }
        var synced: [BaseMessage] { syncedMessages.withLock { $0 } }
        var statesDuringPhases: [SyncState] { states.withLock { $0 } }
        private func note(_ line: String) { log.withLock { $0.append(line) } }
        private func noteState() { if let vault { states.withLock { $0.append(vault.getSyncState()) } } }

        func onConversationSyncStarted() { noteState(); note("conversations started") }
        func onConversationSyncCompleted(_ conversations: [Conversation]) { noteState(); note("conversations \(conversations.count)") }
        func onConversationSyncError(_ error: CometChatException) { note("conversations error \(error.errorCode)") }
        func onMessageSyncStarted() { noteState(); note("messages started") }
        func onMessageSyncCompleted(_ messages: [BaseMessage], _ outcome: CometChat.SyncOutcome) {
            noteState()
            note("messages \(messages.count) \(outcome.rawValue)")
        }
        func onMessageSyncError(_ error: CometChatException) { note("messages error \(error.errorCode)") }
        func onMessagesSynced(_ messages: [BaseMessage]) {
            syncedMessages.withLock { $0 += messages }
            note("synced \(messages.count)")
        }
        func onTextMessageReceived(textMessage: TextMessage) { note("realtime \(textMessage.id)") }
        func onOutboxMessageSent(_ message: BaseMessage) { note("sent \(message.localMessageId ?? "")") }
        func onOutboxMessageFailed(_ message: BaseMessage, _ reason: MessageFailureReason) {
            note("failed \(message.localMessageId ?? "") \(reason.rawValue)")
        }

        func count(_ prefix: String) -> Int { lines.filter { $0.hasPrefix(prefix) }.count }
        func clear() { log.withLock { $0 = [] } }
    }

    /// A vault logged in as alice over the simulator, its first sweep done (the sync point
    /// established), with a recorder on every listener.
    func harness(stableDelay: Duration = .milliseconds(20), configure: @escaping (OfflineConfig.Builder) -> Void = { _ in },
                 sync: @escaping (inout SyncSettings) -> Void = { _ in }, firstSweep: Bool = true,
                 evictionDelay: Duration = .seconds(3600)) async throws -> (OutboxHarness, Recorder) {
        let h = try OutboxHarness(users: ["alice", "bob", "carol", "dave", "erin"], configure: configure) { settings in
            settings.stableConnectionDelay = stableDelay
            settings.evictionDelay = evictionDelay
            settings.sync.forceCooldown = .zero
            sync(&settings.sync)
        }
        addTeardownBlock { await h.vault.logout() }
        let recorder = Recorder()
        recorder.vault = h.vault
        h.vault.addSyncListener("recorder", recorder)
        h.vault.addMessageListener("recorder", recorder)
        h.vault.addOutboxListener("recorder2", recorder)
        await h.login()
        if firstSweep {
            try await waitFor("the first sweep") { recorder.count("messages ") >= 1 }
            await h.vault.waitForSyncIdle()
            h.drain()
            recorder.clear()
        }
        return (h, recorder)
    }

    func waitFor(_ what: String, timeout: Duration = .seconds(10), _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else { return XCTFail("timed out waiting: \(what)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Takes alice's device offline, runs `change` on the server, moves the clock on (so the
    /// current second is complete), and brings the device back.
    func whileOffline(_ h: OutboxHarness, _ change: () throws -> Void) async throws {
        h.client.network = .offline
        try await waitFor("disconnected") { !h.client.isConnected }
        try change()
        h.clock.advance(by: 5)
        h.client.network = .online
    }

    /// Waits for the sweep after a reconnect to finish and the callbacks to drain.
    func sweepAfterReconnect(_ h: OutboxHarness, _ recorder: Recorder, sweeps: Int = 1) async throws {
        try await waitFor("\(sweeps) sweep(s)") { h.drain(); return recorder.count("messages ") >= sweeps }
        await h.vault.waitForSyncIdle()
        h.drain()
    }

    func cachedIds(_ h: OutboxHarness, _ conversationId: String) throws -> [Int] {
        let cache = try XCTUnwrap(h.vault.openCache)
        return try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT server_id FROM messages WHERE conversation_id = ? AND server_id IS NOT NULL ORDER BY sent_at, server_id")
            try stmt.bind([.text(conversationId)])
            var ids: [Int] = []
            while try stmt.step() { ids.append(stmt.int(0)) }
            return ids
        }
    }

    func syncRecord(_ h: OutboxHarness) throws -> SyncStateRecord {
        let cache = try XCTUnwrap(h.vault.openCache)
        return try cache.reader.sync { db in try SyncStateRows.load(in: db) }
    }

    func cachedPage(_ h: OutboxHarness, with uid: String) async -> [BaseMessage] {
        let request = MessagesRequest.MessageRequestBuilder(vault: h.vault).set(uid: uid).set(limit: 100).build()
        return await request.fetchPrevious().cached ?? []
    }

    // MARK: - The first sweep

    func testTheFirstSweepOfANewCacheFillsTheListAndStartsAtTheLogsEnd() async throws {
        let (h, recorder) = try await harness(stableDelay: .milliseconds(500), firstSweep: false)
        // History that exists before the cache does: not replayed as news.
        try h.simulator.seedConversation(between: "alice", and: "bob", count: 40, spacing: 10, endingAt: h.clock.seconds - 100)
        try await waitFor("the first sweep") { h.drain(); return recorder.count("messages ") >= 1 }
        await h.vault.waitForSyncIdle()
        h.drain()
        XCTAssertEqual(recorder.lines, ["conversations started", "conversations 1", "messages started", "messages 0 caughtUp"])
        XCTAssertEqual(recorder.synced.count, 0, "nothing to catch up to: history is read on demand")
        XCTAssertEqual(h.vault.getLastSyncTimestamp(), h.clock.seconds, "the server's clock at the first sweep")
        XCTAssertNotNil(try syncRecord(h).token)
        XCTAssertEqual(try syncRecord(h).lastOutcome, .caughtUp)
        XCTAssertEqual(recorder.statesDuringPhases, [.syncing, .syncing, .syncing, .syncing], "syncing exactly while the sweep runs")
        XCTAssertEqual(h.vault.getSyncState(), .idle)
    }

    // MARK: - Catching up

    func testMessagesEditsAndDeletionsMadeWhileOfflineAreCaughtUpOnReconnect() async throws {
        let (h, recorder) = try await harness()
        let sim = h.simulator
        // Cached while connected (realtime).
        let early = try sim.postText("before", from: "bob", to: .user("alice"))
        let doomed = try sim.postText("to be deleted", from: "bob", to: .user("alice"))
        try await waitFor("realtime") { h.drain(); return recorder.count("realtime") == 2 }
        h.clock.advance(by: 2)

        var fresh: [Int] = []
        try await whileOffline(h) {
            try sim.edit(early, to: .text("before, edited"), by: "bob")
            try sim.delete(doomed, by: "bob")
            h.clock.advance(by: 1)
            fresh.append(try sim.postText("one", from: "bob", to: .user("alice")))
            fresh.append(try sim.postText("two", from: "carol", to: .user("alice")))
            h.clock.advance(by: 1)
            fresh.append(try sim.postText("three", from: "bob", to: .user("alice")))
        }
        try await sweepAfterReconnect(h, recorder)
        XCTAssertEqual(recorder.lines.filter { !$0.hasPrefix("realtime") },
                       ["conversations started", "conversations 2", "messages started", "synced 3", "messages 5 caughtUp"],
                       "new messages reach onMessagesSynced after their page committed; the phase reports new and changed")
        XCTAssertEqual(recorder.synced.map(\.id), fresh)
        XCTAssertTrue(recorder.synced.allSatisfy { $0.source == .sync })

        let page = await cachedPage(h, with: "bob")
        XCTAssertEqual(page.map(\.id), [early, doomed, fresh[0], fresh[2]])
        XCTAssertEqual((page[0] as? TextMessage)?.text, "before, edited")
        XCTAssertEqual(page[0].source, .realtime, "an edit keeps how the message first arrived")
        XCTAssertTrue(page[1].deletedAt > 0, "the deletion was applied")
        XCTAssertEqual(page[2].source, .sync)
        let carolPage = await cachedPage(h, with: "carol")
        XCTAssertEqual(carolPage.map(\.id), [fresh[1]], "a conversation not cached before is created")
        XCTAssertEqual(h.vault.getLastSyncTimestamp(), h.clock.seconds)
    }

    /// A sweep's new rows, interleaved across conversations, each land in their conversation's
    /// cluster (`MessageClusters`), and reads see them as before.
    func testSyncedRowsLandInTheirConversationsClusters() async throws {
        let (h, recorder) = try await harness()
        let sim = h.simulator
        var fresh: [Int] = []
        try await whileOffline(h) {
            for i in 0..<30 {
                fresh.append(try sim.postText("m\(i)", from: ["bob", "carol", "dave"][i % 3], to: .user("alice")))
                h.clock.advance(by: 1)
            }
        }
        try await sweepAfterReconnect(h, recorder)
        XCTAssertEqual(recorder.synced.map(\.id), fresh)
        let cache = try XCTUnwrap(h.vault.openCache)
        let placed = try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT row_id, conversation_id FROM messages WHERE server_id IS NOT NULL ORDER BY row_id")
            var out: [(Int64, String)] = []
            while try stmt.step() { out.append((stmt.int64(0), stmt.text(1) ?? "")) }
            return out
        }.map { (key: $0.0, conversation: $0.1) }
        XCTAssertEqual(placed.count, 30)
        XCTAssertTrue(placed.allSatisfy { $0.key & ~(MessageClusters.span - 1) == MessageClusters.base(of: $0.conversation) },
                      "every row in its conversation's cluster")
        XCTAssertEqual(placed.map(\.conversation), placed.map(\.conversation).sorted { MessageClusters.base(of: $0) < MessageClusters.base(of: $1) },
                       "each conversation's rows together")
        let page = await cachedPage(h, with: "bob")
        XCTAssertEqual(page.map(\.id), stride(from: 0, to: 30, by: 3).map { fresh[$0] })
    }

    func testAMessageAReadAlreadyWroteIsNotDeliveredAgainAsNew() async throws {
        // No automatic sweep: the read goes first, then a forced one.
        let (h, recorder) = try await harness(stableDelay: .seconds(3600), firstSweep: false)
        try await h.vault.syncNow()
        h.drain()
        recorder.clear()
        h.client.network = .offline
        let ids = try (0..<3).map { try h.simulator.postText("m\($0)", from: "bob", to: .user("alice")) }
        h.clock.advance(by: 5)
        h.client.network = .online
        let read = await MessagesRequest.MessageRequestBuilder(vault: h.vault).set(uid: "bob").set(limit: 50).build().fetchPrevious()
        XCTAssertEqual(try read.server.get().map(\.id), ids)

        let report = try await h.vault.syncNow()
        h.drain()
        XCTAssertEqual(report.outcome, .caughtUp)
        XCTAssertEqual(report.newMessageCount, 0)
        XCTAssertEqual(recorder.synced.count, 0, "the read's server phase already delivered them")
        XCTAssertEqual(try cachedIds(h, h.conversationId(with: "bob")), ids, "and no second copy")
    }

    func testALongOfflineGapIsCaughtUpRowForRowWithTheServersTruth() async throws {
        let (h, recorder) = try await harness(stableDelay: .seconds(3600), sync: { sync in
            sync.pageSize = 500
            sync.maxPagesPerSweep = 100
        }, firstSweep: false)
        try await h.vault.syncNow()
        let sim = h.simulator
        for uid in (0..<20).map({ "peer\($0)" }) { try sim.addUser(SimulatedUser(uid: uid)) }
        var conversations: [String] = []
        h.client.network = .offline
        h.clock.advance(by: 1000)
        // 50 conversations of 200 messages each (10,000), from several senders, interleaved in time.
        for i in 0..<30 {
            let peer = "peer\(i % 20)"
            let guid = "g\(i)"
            try sim.addGroup(guid, owner: peer)
            try sim.addMembers(["alice", "bob", "carol"], to: guid)
            try sim.seedConversation(inGroup: guid, count: 200, senders: [peer, "bob", "carol", "alice"], spacing: 1, endingAt: h.clock.seconds)
            conversations.append("group_\(guid)")
        }
        for i in 0..<20 {
            let peer = "peer\(i)"
            try sim.seedConversation(between: "alice", and: peer, count: 200, spacing: 1, endingAt: h.clock.seconds - i)
            conversations.append(h.conversationId(with: peer))
        }
        h.clock.advance(by: 5)
        h.client.network = .online
        recorder.clear()

        let report = try await h.vault.syncNow()
        await h.vault.waitForSyncIdle()
        h.drain()
        XCTAssertEqual(report.outcome, .caughtUp)
        XCTAssertEqual(report.droppedChanges, 0)
        XCTAssertEqual(report.establishedSyncPoint, false)
        var total = 0
        for conversation in conversations {
            let truth = sim.messageIds(in: conversation)
            total += truth.count
            let cached = try cachedIds(h, conversation)
            XCTAssertTrue(cached == truth, "\(conversation): no gap, no duplicate (\(cached.count) cached, \(truth.count) on the server)")
        }
        XCTAssertEqual(report.newMessageCount, total)
        XCTAssertEqual(recorder.synced.count, total)
        XCTAssertEqual(total, 10_000)
        XCTAssertEqual(conversations.count, 50)
        // Payloads match the server's rendering for alice (spot check across conversations).
        let cache = try XCTUnwrap(h.vault.openCache)
        for conversation in conversations.prefix(5) {
            for id in sim.messageIds(in: conversation).suffix(3) {
                let cached = try cache.reader.sync { db in try MessageRows.message(id: id, decoder: WireDecoder(limits: WireLimits()), in: db) }
                XCTAssertEqual((cached as? TextMessage)?.text, sim.messageJSON(id, as: "alice")?["data"]?["text"]?.stringValue)
            }
        }
    }

    func testEvictionCapsHoldForSyncedMessages() async throws {
        let (h, recorder) = try await harness(configure: { $0.setMaxMessagesPerConversation(5) }, evictionDelay: .milliseconds(20))
        var ids: [Int] = []
        try await whileOffline(h) {
            for i in 0..<30 {
                ids.append(try h.simulator.postText("m\(i)", from: "bob", to: .user("alice")))
                h.clock.advance(by: 1)
            }
        }
        try await sweepAfterReconnect(h, recorder)
        XCTAssertEqual(recorder.synced.count, 30)
        try await waitFor("eviction ran") { try self.cachedIds(h, h.conversationId(with: "bob")).count <= 5 }
        XCTAssertEqual(try cachedIds(h, h.conversationId(with: "bob")), Array(ids.suffix(5)), "the newest stay")
    }

    func testEachSweepRefreshesTheBlockedUsersList() async throws {
        let (h, recorder) = try await harness()
        let cache = try XCTUnwrap(h.vault.openCache)
        XCTAssertEqual(try ReadHarness.blockedRows(in: cache).map(\.uid), [])
        try await whileOffline(h) {
            try h.simulator.block("dave", by: "alice")
        }
        try await sweepAfterReconnect(h, recorder)
        XCTAssertEqual(try ReadHarness.blockedRows(in: cache).map(\.uid), ["dave"], "blocked from another device while away")
    }

    func testSyncListenersAreHeldWeaklyOnePerId() async throws {
        let (h, _) = try await harness(stableDelay: .seconds(3600), firstSweep: false)
        var first: Recorder? = Recorder()
        let second = Recorder()
        let replaced = Recorder()
        h.vault.addSyncListener("one", replaced)
        h.vault.addSyncListener("one", try XCTUnwrap(first))
        h.vault.addSyncListener("two", second)
        weak let released = first
        first = nil
        XCTAssertNil(released, "the vault does not keep a listener alive")
        try await h.vault.syncNow()
        h.drain()
        XCTAssertEqual(replaced.lines, [], "registering an id again replaced its listener")
        XCTAssertEqual(second.lines, ["conversations started", "conversations 0", "messages started", "messages 0 caughtUp"])
        h.vault.removeSyncListener("two")
        try await h.vault.syncNow()
        h.drain()
        XCTAssertEqual(second.lines.count, 4, "removed")
    }

    // MARK: - When a sweep starts

    func testAConnectThenDropFlapStartsNothingAndAHeldConnectionStartsOneSweep() async throws {
        let (h, recorder) = try await harness(stableDelay: .milliseconds(400))
        for _ in 0..<3 {
            h.client.network = .offline
            try await waitFor("disconnected") { !h.client.isConnected }
            h.client.network = .online
            try await waitFor("connected") { h.client.isConnected }
            try await Task.sleep(for: .milliseconds(100))
        }
        h.client.network = .offline
        try await Task.sleep(for: .milliseconds(600))
        h.drain()
        XCTAssertEqual(recorder.count("conversations started"), 0, "flaps shorter than the settle time start nothing")
        h.client.network = .online
        try await sweepAfterReconnect(h, recorder)
        try await Task.sleep(for: .milliseconds(500))
        h.drain()
        XCTAssertEqual(recorder.count("conversations started"), 1, "one held connection, one sweep")
    }

    func testTheOutboxFlushesBeforeTheSweep() async throws {
        let (h, recorder) = try await harness()
        h.client.network = .offline
        try await waitFor("disconnected") { !h.client.isConnected }
        let sends = (0..<3).map { h.send(h.text("queued \($0)")) }
        let offline = OfflineErrorCode.internetUnavailable.rawValue
        try await waitFor("queued") { h.drain(); return sends.allSatisfy { $0.errors.contains(offline) } }
        h.client.network = .online
        try await sweepAfterReconnect(h, recorder)
        let lines = recorder.lines
        let started = try XCTUnwrap(lines.firstIndex(of: "conversations started"))
        let sentAt = lines.indices.filter { lines[$0].hasPrefix("sent ") }
        XCTAssertEqual(sentAt.count, 3, "\(lines)")
        XCTAssertTrue(sentAt.allSatisfy { $0 < started }, "every queued send went before the sweep: \(lines)")
    }

    func testTheSweepStartsAfterTheFlushCapWhenTheFlushHangs() async throws {
        let (h, recorder) = try await harness(sync: { $0.flushWait = .milliseconds(300) })
        h.client.network = .offline
        try await waitFor("disconnected") { !h.client.isConnected }
        let send = h.send(h.text("slow"))
        let offline = OfflineErrorCode.internetUnavailable.rawValue
        try await waitFor("queued") { h.drain(); return send.errors.contains(offline) }
        h.client.failNext(.send, with: .delay(.seconds(3)))
        h.client.network = .online
        try await sweepAfterReconnect(h, recorder)
        XCTAssertFalse(send.isSent, "the sweep did not wait for the hanging send")
        XCTAssertEqual(recorder.count("sent "), 0)
        try await waitFor("the slow send", timeout: .seconds(10)) { h.drain(); return send.isSent }
    }

    func testRequestsWhileASweepRunsCoalesceIntoOneFollowUp() async throws {
        let (h, recorder) = try await harness()
        h.client.failNext(.conversations, with: .delay(.milliseconds(400)))
        try await h.vault.syncNowAccepted()
        for _ in 0..<5 { h.vault.sync.requestSweep() }
        await h.vault.waitForSyncIdle()
        h.drain()
        XCTAssertEqual(recorder.count("conversations started"), 2, "the running sweep and one follow-up: \(recorder.lines)")
    }

    // MARK: - Paging and failures

    func testABoundedSweepReportsPartialAndFollowUpsCatchUp() async throws {
        let (h, recorder) = try await harness(sync: { sync in
            sync.pageSize = 5
            sync.maxPagesPerSweep = 2
        })
        var ids: [Int] = []
        try await whileOffline(h) {
            for i in 0..<24 {
                ids.append(try h.simulator.postText("m\(i)", from: i % 2 == 0 ? "bob" : "carol", to: .user("alice")))
                h.clock.advance(by: 1)
            }
        }
        try await sweepAfterReconnect(h, recorder, sweeps: 3)
        let outcomes = recorder.lines.filter { $0.hasPrefix("messages ") && !$0.hasPrefix("messages started") }
        XCTAssertEqual(outcomes, ["messages 10 partial", "messages 10 partial", "messages 4 caughtUp"])
        XCTAssertEqual(recorder.synced.map(\.id), ids, "in log order, each once")
        let even = ids.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
        let odd = ids.enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
        XCTAssertEqual(try cachedIds(h, h.conversationId(with: "bob")), even)
        XCTAssertEqual(try cachedIds(h, h.conversationId(with: "carol")), odd)
    }

    func testAFailureInTheMiddleOfAPageLeavesNoGapNoDuplicateAndTheSyncPointUnmoved() async throws {
        let (h, recorder) = try await harness(stableDelay: .seconds(3600), sync: { $0.pageSize = 5 }, firstSweep: false)
        try await h.vault.syncNow()
        h.client.network = .offline
        var ids: [Int] = []
        for i in 0..<12 {
            ids.append(try h.simulator.postText("m\(i)", from: "bob", to: .user("alice")))
            h.clock.advance(by: 1)
        }
        h.clock.advance(by: 5)
        h.client.network = .online
        let before = try syncRecord(h)
        let cache = try XCTUnwrap(h.vault.openCache)
        // The seventh message's insert fails: the second page dies half-written.
        try cache.writer.sync { db in
            try db.run("CREATE TEMP TRIGGER fail_once BEFORE INSERT ON messages WHEN NEW.server_id = \(ids[6]) BEGIN SELECT RAISE(ABORT, 'injected'); END")
        }
        recorder.clear()
        let failed = try await h.vault.syncNow()
        h.drain()
        XCTAssertEqual(failed.outcome, nil)
        XCTAssertEqual(failed.messageError?.errorCode, OfflineErrorCode.offlineMessagePersistFailed.rawValue)
        XCTAssertEqual(try cachedIds(h, h.conversationId(with: "bob")), Array(ids[0..<5]), "the first page committed; nothing of the second")
        let after = try syncRecord(h)
        XCTAssertNotEqual(after.token, before.token, "the first page moved the sync point")
        XCTAssertEqual(after.lastOutcome, .failed)
        XCTAssertEqual(after.lastErrorCode, OfflineErrorCode.offlineMessagePersistFailed.rawValue)
        let stuckAt = h.vault.getLastSyncTimestamp()
        XCTAssertLessThan(stuckAt, h.clock.seconds, "not advanced past the failed page")
        XCTAssertEqual(recorder.synced.map(\.id), Array(ids[0..<5]))

        try cache.writer.sync { db in try db.run("DROP TRIGGER fail_once") }
        let resumed = try await h.vault.syncNow()
        await h.vault.waitForSyncIdle()
        h.drain()
        XCTAssertEqual(resumed.outcome, .caughtUp)
        XCTAssertEqual(try cachedIds(h, h.conversationId(with: "bob")), ids, "resumed at the last committed page: no gap, no duplicate")
        XCTAssertEqual(recorder.synced.map(\.id), ids, "each message reached onMessagesSynced once")
        XCTAssertEqual(h.vault.getLastSyncTimestamp(), h.clock.seconds)
    }

    func testAServerErrorStopsThePhaseAndTheNextSweepResumes() async throws {
        let (h, recorder) = try await harness(stableDelay: .seconds(3600), firstSweep: false)
        try await h.vault.syncNow()
        let stamp = h.vault.getLastSyncTimestamp()
        h.client.network = .offline
        let id = try h.simulator.postText("hi", from: "bob", to: .user("alice"))
        h.clock.advance(by: 5)
        h.client.network = .online
        h.client.failNext(.changes, with: .status(503, code: "ERR_UNAVAILABLE"))
        recorder.clear()
        let failed = try await h.vault.syncNow()
        h.drain()
        XCTAssertEqual(failed.messageError?.errorCode, "ERR_UNAVAILABLE")
        XCTAssertNotNil(failed.conversations, "the conversations phase stands on its own")
        XCTAssertEqual(h.vault.getLastSyncTimestamp(), stamp)
        XCTAssertEqual(try syncRecord(h).lastErrorCode, "ERR_UNAVAILABLE")
        XCTAssertTrue(recorder.lines.contains("messages error ERR_UNAVAILABLE"))
        let resumed = try await h.vault.syncNow()
        XCTAssertEqual(resumed.outcome, .caughtUp)
        XCTAssertEqual(try cachedIds(h, h.conversationId(with: "bob")), [id])
    }

    func testARefusedSyncPointIsForgottenAndTheLogReplayedFromWhatTheServerStillHolds() async throws {
        let (h, _) = try await harness(stableDelay: .seconds(3600), firstSweep: false)
        try await h.vault.syncNow()
        let old = try syncRecord(h).token
        h.client.network = .offline
        h.clock.advance(by: 100)
        let lost = try h.simulator.postText("compacted away", from: "bob", to: .user("alice"))
        h.clock.advance(by: 100)
        h.simulator.expireChangeTokens(before: Int64(h.clock.seconds))
        let kept = try h.simulator.postText("still in the log", from: "bob", to: .user("alice"))
        h.clock.advance(by: 5)
        h.client.network = .online
        let report = try await h.vault.syncNow()
        XCTAssertEqual(report.outcome, .caughtUp)
        XCTAssertNotEqual(try syncRecord(h).token, old)
        XCTAssertTrue(try cachedIds(h, h.conversationId(with: "bob")).contains(kept))
        XCTAssertFalse(try cachedIds(h, h.conversationId(with: "bob")).contains(lost), "the compacted change is gone from the log")
        let again = try await h.vault.syncNow()
        XCTAssertEqual(again.outcome, .caughtUp, "the new sync point resumes")
    }

    // MARK: - Removed conversations

    func testARemovedConversationGoesWithItsMessagesAndItsUnsentMessagesFailDiscarded() async throws {
        let (h, recorder) = try await harness(configure: { $0.setAutoSendPendingOnReconnect(false) })
        let sim = h.simulator
        _ = try sim.postText("hello", from: "carol", to: .user("alice"))
        _ = try sim.postText("hi", from: "bob", to: .user("alice"))
        try await waitFor("realtime") { h.drain(); return recorder.count("realtime") == 2 }
        let carol = h.conversationId(with: "carol")
        XCTAssertEqual(try cachedIds(h, carol).count, 1)
        h.client.network = .offline
        try await waitFor("disconnected") { !h.client.isConnected }
        let unsent = h.send(h.text("never sent", to: "carol"))
        let kept = h.send(h.text("to bob"))
        // Each has had its first attempt (no connection) before the device comes back.
        let offline = OfflineErrorCode.internetUnavailable.rawValue
        try await waitFor("queued") { h.drain(); return unsent.errors.contains(offline) && kept.errors.contains(offline) }
        try sim.deleteConversation(carol, for: "alice")
        h.clock.advance(by: 5)
        recorder.clear()
        h.client.network = .online
        try await sweepAfterReconnect(h, recorder)
        try await waitFor("discarded") { h.drain(); return unsent.errors.contains(OfflineErrorCode.offlineMessageDiscarded.rawValue) }
        XCTAssertEqual(try cachedIds(h, carol), [], "its messages went with it")
        let cache = try XCTUnwrap(h.vault.openCache)
        XCTAssertEqual(try cache.reader.sync { db in try db.scalarInt("SELECT count(*) FROM conversations WHERE id = ?", .text(carol)) }, 0)
        let pending = try await h.pending()
        XCTAssertEqual(pending.map { ($0 as? TextMessage)?.text }, ["to bob"], "only that conversation's unsent messages were discarded: \(recorder.lines) \(kept.events)")
        XCTAssertTrue(recorder.lines.contains { $0.hasSuffix(" discarded") })
    }

    func testALogoutDuringASweepStopsItAndTheNextLoginResumes() async throws {
        let (h, recorder) = try await harness(stableDelay: .seconds(3600), firstSweep: false)
        try await h.vault.syncNow()
        let stamp = h.vault.getLastSyncTimestamp()
        h.client.network = .offline
        let id = try h.simulator.postText("while away", from: "bob", to: .user("alice"))
        h.clock.advance(by: 5)
        h.client.network = .online
        h.client.failNext(.changes, with: .delay(.milliseconds(400)))
        recorder.clear()
        try await h.vault.syncNowAccepted()
        try await Task.sleep(for: .milliseconds(100))
        await h.vault.logout()
        await h.vault.waitForSyncIdle()
        h.drain()
        XCTAssertEqual(h.vault.getSyncState(), .idle)
        XCTAssertEqual(h.vault.getLastSyncTimestamp(), 0, "no cache, no sync point")
        XCTAssertEqual(recorder.synced.count, 0, "nothing was written for a user who left")
        XCTAssertTrue(recorder.lines.contains("messages error \(OfflineErrorCode.offlineDisabled.rawValue)"), "\(recorder.lines)")

        await h.login()
        XCTAssertEqual(h.vault.getLastSyncTimestamp(), stamp, "the stored point is where it was")
        let report = try await h.vault.syncNow()
        XCTAssertEqual(report.messages.map(\.id), [id], "and the next sweep resumes from it")
    }

    // MARK: - Hostile change logs

    /// A vault over a `HookedBackend` whose change log the test scripts, no automatic sweeps.
    func hookedVault(_ adjust: (inout SyncSettings) -> Void = { _ in }) async throws -> (OfflineVault, HookedBackend, ChatVaultSimulator) {
        let clock = SimulatedClock()
        let simulator = ChatVaultSimulator(seed: 5, clock: clock)
        for user in ["alice", "bob"] { try simulator.addUser(SimulatedUser(uid: user)) }
        let backend = HookedBackend(simulator.client(for: "alice"))
        let root = TemporaryDirectory()
        var settings = VaultSettings(applicationId: "org.chatvault.synctests", rootDirectory: root.path,
                                     keyStorage: [.custom(MemoryKeyStore())], callbackExecutor: .queue(DispatchQueue(label: "tests.sync.hooked")),
                                     retry: .manualOnly)
        settings.clock = { clock.date }
        settings.stableConnectionDelay = .seconds(3600)
        settings.sync.forceCooldown = .zero
        adjust(&settings.sync)
        let vault = try OfflineVault(config: OfflineConfig.Builder().setEnabled(true).setEncryption(true).build(), settings: settings,
                                     backend: backend)
        addTeardownBlock {
            await vault.logout()
            _ = root
        }
        _ = await vault.login(userId: "alice")
        return (vault, backend, simulator)
    }

    func testHostileChangeLogEntriesAreSkippedAndHostilePagesRefusedWithoutACrash() async throws {
        let (vault, backend, simulator) = try await hookedVault { sync in
            sync.pageSize = 10
            sync.maxChangesPerPage = 50
        }
        try simulator.seedConversation(between: "alice", and: "bob", count: 2_500, spacing: 1, endingAt: simulator.clock.seconds - 10)
        let first = try await vault.syncNow()
        XCTAssertTrue(first.establishedSyncPoint, "ChatBackend's default latestSyncPoint() paged the log to its end")
        XCTAssertEqual(first.messages.count, 0)
        let second = try await vault.syncNow()
        XCTAssertEqual(second.outcome, .caughtUp)
        XCTAssertEqual(second.messages.count, 0, "the point it set lies after the whole history")
        let valid = try simulator.postText("fine", from: "bob", to: .user("alice"))
        let good = try XCTUnwrap(simulator.messageJSON(valid, as: "alice"))
        @Sendable func page(_ changes: [ChangeLogEntry], token: String, time: Int64 = 1_700_000_100, more: Bool = false) -> ChangeLogPage {
            ChangeLogPage(changes: changes, nextToken: token, serverTime: time, hasMore: more)
        }
        func with(_ key: String, _ value: JSONValue) -> JSONValue {
            guard case .object(var fields) = good else { return good }
            fields[key] = value
            return .object(fields)
        }
        let hostile: [ChangeLogEntry] = [
            .messageUpserted(with("id", .double(1e300))), .messageUpserted(with("id", .int(1 << 60))),
            .messageUpserted(with("sender", .string("not an object"))), .messageUpserted(.array([])),
            .messageUpserted(with("id", .int(0))),
            .messageDeleted(id: -5, conversationId: "x"), .messageDeleted(id: Int(Int64(1) << 60), conversationId: "x"),
            .conversationRemoved(conversationId: ""), .conversationRemoved(conversationId: String(repeating: "c", count: 5000)),
            .messageUpserted(good),
        ]
        backend.scriptedChanges.withLock { $0 = { _, _ in page(hostile, token: "t-1") } }
        let skipped = try await vault.syncNow()
        XCTAssertEqual(skipped.outcome, .caughtUp)
        XCTAssertEqual(skipped.droppedChanges, 9, "each invalid entry dropped and counted")
        XCTAssertEqual(skipped.messages.map(\.id), [valid], "the valid entry still applied")

        let cache = try XCTUnwrap(vault.openCache)
        func token() throws -> String? { try cache.reader.sync { db in try SyncStateRows.load(in: db).token } }
        XCTAssertEqual(try token(), "t-1")

        let refusals: [(String, ChangeLogPage)] = [
            ("an empty token", page([.messageUpserted(good)], token: "")),
            ("an oversize token", page([.messageUpserted(good)], token: String(repeating: "t", count: 5000))),
            ("an oversize page", page(Array(repeating: .messageUpserted(good), count: 51), token: "t-2")),
        ]
        for (what, answer) in refusals {
            backend.scriptedChanges.withLock { $0 = { _, _ in answer } }
            let refused = try await vault.syncNow()
            XCTAssertNil(refused.outcome, what)
            XCTAssertEqual(refused.messageError?.errorCode, OfflineErrorCode.invalidServerResponse.rawValue, what)
            XCTAssertEqual(try token(), "t-1", "\(what): the sync point did not move")
            XCTAssertFalse(refused.messageError?.errorDescription.contains(String(repeating: "t", count: 100)) ?? true, "no token echoed")
        }

        // A clock beyond 2^53 is stored clamped; a server that always has more is bounded.
        let calls = Mutex(0)
        backend.scriptedChanges.withLock {
            $0 = { _, _ in
                let n = calls.withLock { c -> Int in c += 1; return c }
                return page([], token: "t-\(n + 10)", time: .max, more: true)
            }
        }
        let endless = try await vault.syncNow()
        await vault.waitForSyncIdle()
        XCTAssertEqual(endless.outcome, .partial)
        XCTAssertEqual(vault.getLastSyncTimestamp(), Int(WireLimits.maxWireNumber))
        let made = calls.withLock { $0 }
        XCTAssertEqual(made, 5 * 51, "5 pages a sweep, then at most 50 follow-up sweeps")
    }

    // MARK: - forceSyncNow

    func testForceSyncNowRefusesWithTheFourCodes() async throws {
        // Nobody logged in.
        let nobody = try OutboxHarness()
        let notLoggedIn = await refusal(nobody.vault)
        XCTAssertEqual(notLoggedIn, OfflineErrorCode.userNotLoggedIn.rawValue)

        // Offline support off.
        let off = try OutboxHarness(configure: { $0.setEnabled(false) })
        _ = await off.vault.login(userId: "alice")
        let disabled = await refusal(off.vault)
        XCTAssertEqual(disabled, OfflineErrorCode.offlineDisabled.rawValue)
        await off.vault.logout()

        // A sweep in progress, then the cooldown after it.
        let (h, recorder) = try await harness(stableDelay: .seconds(3600), sync: { $0.forceCooldown = .seconds(3600) }, firstSweep: false)
        h.client.failNext(.conversations, with: .delay(.milliseconds(500)))
        let accepted = await refusal(h.vault)
        XCTAssertNil(accepted, "accepted")
        XCTAssertEqual(h.vault.getSyncState(), .syncing)
        let busy = await refusal(h.vault)
        XCTAssertEqual(busy, OfflineErrorCode.offlineSyncInProgress.rawValue)
        await h.vault.waitForSyncIdle()
        let cooling = await refusal(h.vault)
        XCTAssertEqual(cooling, OfflineErrorCode.offlineSyncCooldown.rawValue)
        do {
            try await h.vault.syncNow()
            XCTFail("refused within the cooldown")
        } catch {
            XCTAssertEqual(error.errorCode, OfflineErrorCode.offlineSyncCooldown.rawValue)
        }
        // The silent form starts nothing either.
        h.drain()
        let sweeps = recorder.count("conversations started")
        h.vault.forceSyncNow()
        try await Task.sleep(for: .milliseconds(200))
        h.drain()
        XCTAssertEqual(recorder.count("conversations started"), sweeps)
        XCTAssertEqual(sweeps, 1)
    }

    /// The error code `forceSyncNow(onSuccess:onError:)` answers; nil when it accepted.
    func refusal(_ vault: OfflineVault) async -> String? {
        await withCheckedContinuation { continuation in
            vault.forceSyncNow(onSuccess: { continuation.resume(returning: nil) },
                               onError: { continuation.resume(returning: $0?.errorCode ?? "nil") })
        }
    }

    func testTheSyncPointSurvivesARestartAndAClearStartsOver() async throws {
        let (h, recorder) = try await harness()
        let stamp = h.vault.getLastSyncTimestamp()
        XCTAssertGreaterThan(stamp, 0)
        try await h.restart(network: .offline)
        XCTAssertEqual(h.vault.getLastSyncTimestamp(), stamp, "read back from the cache")
        try await h.vault.clearOfflineCacheAndWait()
        XCTAssertEqual(h.vault.getLastSyncTimestamp(), 0, "cleared with the cache")
        _ = recorder
    }

    func testSyncEventsStreamTheSameEventsAndTheSweepsEnd() async throws {
        let (h, _) = try await harness(stableDelay: .seconds(3600), firstSweep: false)
        let stream = h.vault.syncEvents()
        let collected = Task { () -> [String] in
            var names: [String] = []
            for await event in stream {
                switch event {
                case .conversationSyncStarted: names.append("cs")
                case .conversationSyncCompleted: names.append("cc")
                case .conversationSyncError: names.append("ce")
                case .messageSyncStarted: names.append("ms")
                case .messageSyncCompleted(_, let outcome): names.append("mc \(outcome.rawValue)")
                case .messageSyncError: names.append("me")
                case .sweepFinished(let report):
                    names.append("end \(report.establishedSyncPoint)")
                    return names
                }
            }
            return names
        }
        try await h.vault.syncNow()
        h.drain()
        let names = await collected.value
        XCTAssertEqual(names, ["cs", "cc", "ms", "mc caughtUp", "end true"])
    }
}

extension OfflineVault {
    /// Starts a forced sweep without waiting for it (throws the refusal).
    func syncNowAccepted() async throws {
        if let refusal = sync.forceSweep() { throw refusal }
    }
}
