import Foundation
import XCTest

/// `chatvault demo --story reconnect`: messages arrive while the device is offline, the user queues
/// a send, the connection returns and holds; the outbox must flush before the sweep, and the sweep
/// must catch up with exactly the missed messages, its listener callbacks in order.
final class SyncDemoTests: XCTestCase {
    func testTheJSONShowsTheFlushBeforeTheSweepAndTheSyncedCounts() throws {
        let run = try CLI.run(["demo", "--story", "reconnect", "--messages", "9", "--json"])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        let document = try run.json()
        XCTAssertEqual(document["story"] as? String, "reconnect")
        XCTAssertEqual(document["messages"] as? Int, 9)
        XCTAssertEqual(document["passed"] as? Bool, true)
        let steps = try XCTUnwrap(document["steps"] as? [[String: Any]])
        let events = steps.compactMap { $0["event"] as? String }
        XCTAssertEqual(events.count, steps.count)
        XCTAssertEqual(steps.compactMap { $0["step"] as? Int }, Array(1...steps.count))
        func index(_ event: String, after start: Int = 0) throws -> Int {
            try XCTUnwrap(events[start...].firstIndex(of: event), "no \(event) after step \(start + 1): \(events)")
        }
        let established = try index("firstSyncEstablished")
        let offline = try index("offline")
        let queued = try index("queued")
        let back = try index("networkBack")
        XCTAssertLessThan(established, offline)
        XCTAssertEqual(events.filter { $0 == "receivedOnServer" }.count, 9)
        XCTAssertTrue(events[offline..<back].contains("queuedNotice"))
        XCTAssertLessThan(offline, queued)
        XCTAssertLessThan(queued, back)
        // After the network returns: the flush, then the sweep, its callbacks in order.
        let sent = try index("outboxSent", after: back)
        let conversationStarted = try index("conversationSyncStarted", after: back)
        let conversationCompleted = try index("conversationSyncCompleted", after: back)
        let messageStarted = try index("messageSyncStarted", after: back)
        let synced = try index("messagesSynced", after: back)
        let messageCompleted = try index("messageSyncCompleted", after: back)
        let finished = try index("sweepFinished", after: back)
        XCTAssertLessThan(sent, conversationStarted, "the outbox must flush before the sweep")
        XCTAssertLessThan(conversationStarted, conversationCompleted)
        XCTAssertLessThan(conversationCompleted, messageStarted)
        XCTAssertLessThan(messageStarted, synced)
        XCTAssertLessThan(synced, messageCompleted)
        XCTAssertLessThan(messageCompleted, finished)
        XCTAssertEqual(events.filter { $0 == "outboxSent" }.count, 1)
        XCTAssertEqual(document["flushedBeforeSweep"] as? Bool, true)
        XCTAssertEqual(document["syncListenerOrder"] as? [String],
                       ["conversationSyncStarted", "conversationSyncCompleted", "messageSyncStarted", "messageSyncCompleted"])
        // The synced counts: every missed message once, the sweep caught up.
        let syncedCount = steps.filter { $0["event"] as? String == "messagesSynced" }.compactMap { $0["count"] as? Int }.reduce(0, +)
        XCTAssertEqual(syncedCount, 9)
        XCTAssertEqual(document["syncedMessages"] as? Int, 9)
        XCTAssertEqual(document["syncOutcome"] as? String, "caughtUp")
        XCTAssertEqual(steps[messageCompleted]["outcome"] as? String, "caughtUp")
        // The sweep wrote the nine and the user's own sent message (already cached by the flush).
        XCTAssertEqual(steps[messageCompleted]["count"] as? Int, 10)
        XCTAssertEqual(steps[finished]["newMessageCount"] as? Int, 9)
        let received = Set(steps.filter { $0["event"] as? String == "receivedOnServer" }.compactMap { $0["serverId"] as? Int })
        XCTAssertEqual(Set(steps[synced]["serverIds"] as? [Int] ?? []), received)
        XCTAssertGreaterThan(document["lastSyncAfter"] as? Int ?? 0, document["lastSyncBefore"] as? Int ?? .max)
        XCTAssertFalse(run.stdout.contains("while you were away") || run.stdout.contains("sent from the train"), "message text printed")
    }

    func testTheNarrationIsAReadableStepListWithoutMessageText() throws {
        let run = try CLI.run(["demo", "--story", "reconnect"])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        let lines = run.stdout.split(separator: "\n").map(String.init)
        func index(_ text: String) -> Int? { lines.firstIndex { $0.contains(text) } }
        let offline = try XCTUnwrap(index("offline: "), run.stdout)
        let reconnect = try XCTUnwrap(index("reconnect: "), run.stdout)
        let sent = try XCTUnwrap(index("outbox: sent"), run.stdout)
        let synced = try XCTUnwrap(index("onMessagesSynced with 6"), run.stdout)
        let caughtUp = try XCTUnwrap(index("messages phase completed, 7 written, caughtUp"), run.stdout)
        XCTAssertLessThan(offline, reconnect)
        XCTAssertLessThan(reconnect, sent)
        XCTAssertLessThan(sent, synced)
        XCTAssertLessThan(synced, caughtUp)
        XCTAssertEqual(lines.last, "ok")
        XCTAssertFalse(run.stdout.contains("while you were away") || run.stdout.contains("sent from the train"), "message text printed")
        XCTAssertEqual(run.stderr, "")
    }

    func testUsageErrors() throws {
        XCTAssertEqual(try CLI.run(["demo", "--story", "nope"]).status, 2)
        XCTAssertEqual(try CLI.run(["demo", "--story", "reconnect", "--messages", "0"]).status, 2)
        XCTAssertEqual(try CLI.run(["demo", "--story", "reconnect", "--messages", "201"]).status, 2)
        XCTAssertEqual(try CLI.run(["demo", "--story", "reconnect", "--keystore", "file"]).status, 2)
    }
}
