import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

/// The failures a kill could cut off (`OutboxNotice`): a refused send between its pending and its
/// error, an eviction between its commit and its report. Each is committed with its decision,
/// removed once told, and told at the next start when the process died first. (The kills
/// themselves: `OutboxCrashTests` in CLITests.)
final class OutboxNoticeTests: XCTestCase {
    func testARefusalsNoticeIsCommittedBeforeItsErrorAndRemovedOnceTold() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxPendingMessages(1) })
        h.client.network = .offline
        await h.login()
        let seen = observeCrashPoints(h)
        let a = h.send(h.text("a"))
        await waitUntil { !a.errors.isEmpty }
        let refusedMessage = h.text("b")
        let b = h.send(refusedMessage)
        await waitUntil { !b.errors.isEmpty }
        let refused = try XCTUnwrap(refusedMessage.localMessageId)
        XCTAssertEqual(b.errors, [CometChatConstants.Errors.ERROR_QUEUE_FULL])
        XCTAssertEqual(seen.entries.withLock { $0 }, [.init(point: .refusal, committed: [refused])],
                       "between the pending and the error, the refusal's notice is already in the cache")
        await h.vault.waitForOutboxNotices()
        XCTAssertEqual(try notices(h), [], "told: the notice is gone")

        try await h.restart(network: .offline)
        await h.vault.waitForOutboxNotices()
        XCTAssertEqual(h.listener.events(for: refused), [.pending(refused), .failed(refused, .queueFull)], "never told twice")
    }

    func testAnEvictionsNoticeIsCommittedWithTheEvictionAndRemovedOnceTold() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxPendingMessages(1).setPendingQueueOverflowPolicy(.dropOldest) })
        h.client.network = .offline
        await h.login()
        let seen = observeCrashPoints(h)
        let oldest = h.text("a")
        let a = h.send(oldest)
        await waitUntil { !a.errors.isEmpty }
        let b = h.send(h.text("b"))
        await waitUntil { a.errors.count == 2 && !b.errors.isEmpty }
        let evicted = try XCTUnwrap(oldest.localMessageId)
        XCTAssertEqual(a.errors.last, CometChatConstants.Errors.ERROR_QUEUE_OVERFLOW)
        XCTAssertEqual(seen.entries.withLock { $0 }, [.init(point: .eviction, committed: [evicted])],
                       "before the eviction is reported, its notice is already in the cache")
        await h.vault.waitForOutboxNotices()
        XCTAssertEqual(try notices(h), [])

        try await h.restart(network: .offline)
        await h.vault.waitForOutboxNotices()
        XCTAssertEqual(h.listener.events(for: evicted).filter { $0 == .failed(evicted, .queueOverflow) }.count, 1, "never told twice")
    }

    func testNoticesAKilledProcessLeftAreToldOnceAtTheNextLogin() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        // What a process killed at a crash point leaves: the decisions' notices, untold, and (for
        // good measure) one damaged beyond telling.
        try await leaveNotice(h, "left-evicted", .queueOverflow, composedAt: 2000)
        try await leaveNotice(h, "left-refused", .queueFull, composedAt: 1000)
        try XCTUnwrap(h.vault.openCache).writer.sync { db in
            try db.run("INSERT INTO kv (key, value) VALUES (?, ?)", .text(OutboxNoticeRows.keyPrefix + "damaged"), .blob([1, 2, 3]))
        }
        try await h.restart(network: .offline)
        await h.vault.waitForOutboxNotices()
        XCTAssertEqual(failures(h), [.failed("left-refused", .queueFull), .failed("left-evicted", .queueOverflow)],
                       "in compose order, once each")
        XCTAssertEqual(try rawNoticeCount(h), 0, "told (or beyond telling): removed")

        try await h.restart(network: .offline)
        await h.vault.waitForOutboxNotices()
        XCTAssertEqual(failures(h).count, 2, "told once")
    }

    func testALeftNoticeCarriesTheMessageAsSentFailedWithItsReason() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        try await leaveNotice(h, "left", .queueFull, composedAt: 1000)
        await h.vault.logout()
        let heard = HeardFailures()
        h.vault.addOutboxListener("heard", heard)
        await h.login()
        await h.vault.waitForOutboxNotices()
        let message = try XCTUnwrap(heard.messages.withLock { $0 }.first)
        XCTAssertEqual(heard.messages.withLock { $0 }.count, 1)
        XCTAssertEqual(message.localMessageId, "left")
        XCTAssertEqual((message as? TextMessage)?.text, "left behind")
        XCTAssertEqual(message.receiverUid, "bob")
        XCTAssertEqual(message.messageStatus, .failed)
        XCTAssertEqual(message.getFailureReason(), .queueFull)
    }

    // MARK: - Helpers

    struct CrashPoint: Equatable, Sendable {
        let point: OutboxNotice
        /// The notices committed at that moment.
        let committed: [String]
    }

    /// Records each crash point the engine reaches with the notices the cache holds just then
    /// (read on the reader connection: what a kill at that point would leave).
    private func observeCrashPoints(_ h: OutboxHarness) -> CrashPointLog {
        let seen = CrashPointLog()
        let cache = h.vault.openCache
        h.vault.setOutboxNoticeHook { point in
            let committed = (try? cache?.reader.sync { db in try OutboxNoticeRows.all(in: db).rows.map(\.localId) }) ?? ["unreadable"]
            seen.entries.withLock { $0.append(CrashPoint(point: point, committed: committed)) }
        }
        return seen
    }

    /// The notice a process killed at a crash point leaves for a text to bob, "left behind" (after
    /// the login's own delivery of left notices, so that one does not take it).
    private func leaveNotice(_ h: OutboxHarness, _ localId: String, _ reason: MessageFailureReason, composedAt: Int64) async throws {
        await h.vault.waitForOutboxNotices()
        let (wire, kind) = try OutgoingMessage.encode(h.text("left behind"), limits: h.vault.wireLimits)
        let row = OutboxRow(localId: localId, seq: 0, conversationId: h.conversationId(with: "bob"), kind: kind, state: .pending,
                            failureReason: nil, attempts: 0, createdAt: composedAt, message: wire, senderUid: h.me, files: [])
        try XCTUnwrap(h.vault.openCache).writer.sync { db in try OutboxNoticeRows.save(row, reason, in: db) }
    }

    private func failures(_ h: OutboxHarness) -> [OutboxRecorder.Event] {
        h.listener.events.filter { if case .failed = $0 { return true } else { return false } }
    }

    private func notices(_ h: OutboxHarness) throws -> [String] {
        try XCTUnwrap(h.vault.openCache).reader.sync { db in try OutboxNoticeRows.all(in: db).rows.map(\.localId) }
    }

    private func rawNoticeCount(_ h: OutboxHarness) throws -> Int64 {
        try XCTUnwrap(h.vault.openCache).reader.sync { db in
            try db.scalarInt("SELECT count(*) FROM kv WHERE substr(key, 1, ?) = ?", .int(Int64(OutboxNoticeRows.keyPrefix.utf8.count)),
                             .text(OutboxNoticeRows.keyPrefix)) ?? -1
        }
    }
}

/// The crash points an engine reached.
final class CrashPointLog: Sendable {
    let entries = Mutex<[OutboxNoticeTests.CrashPoint]>([])
}

/// Keeps the messages `onOutboxMessageFailed` hands over.
final class HeardFailures: OutboxListener {
    let messages = Mutex<[BaseMessage]>([])

    func onOutboxMessageFailed(_ message: BaseMessage, _ reason: MessageFailureReason) {
        messages.withLock { $0.append(message) }
    }
}
