@testable import ChatVault
import ChatVaultMatrix
import ChatVaultTesting
import Foundation
import Synchronization
import VaultStore
import XCTest

/// A user with many rooms comes back after being away (the CI-sized form of `bench matrix`'s 300
/// rooms): every room is caught up into the cache, each holding exactly the messages the server
/// has for it, none twice, none missing, whatever the page size; rooms beyond a `/sync` timeline
/// are read back from the plan kept in the cache.
final class MatrixScaleTests: XCTestCase {
    /// Sends `count(room)` texts to each room, 16 requests at a time; answers each room's texts
    /// in order.
    static func seed(_ bob: RawMatrixClient, rooms: [String], count: (Int) -> Int, prefix: String) async throws -> [String: [String]] {
        let work = rooms.enumerated().flatMap { index, room in (0..<count(index)).map { (room, "\(prefix) \(index).\($0)") } }
        // Each room's messages in order: one lane per room, 16 lanes at a time.
        try await withThrowingTaskGroup(of: Void.self) { group in
            var lanes = Dictionary(grouping: work, by: { $0.0 }).values.makeIterator()
            func add() -> Bool {
                guard let lane = lanes.next() else { return false }
                group.addTask { for (room, text) in lane { try await bob.sendText(text, room: room) } }
                return true
            }
            for _ in 0..<16 where add() {}
            while try await group.next() != nil { _ = add() }
        }
        return Dictionary(grouping: work, by: { $0.0 }).mapValues { $0.map(\.1) }
    }

    func testSixtyRoomsAreCaughtUpAfterAnAbsenceEachWithExactlyItsMessages() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bobSession, _) = try await TestHomeserver.session("bob")
        let bob = RawMatrixClient(session: bobSession)
        var rooms: [String] = []
        try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<60 {
                group.addTask {
                    let room = try await bob.createRoom(name: "room \(i)", invite: [session.userId])
                    try await RawMatrixClient(session: session).join(room)
                    return room
                }
            }
            for try await room in group { rooms.append(room) }
        }
        rooms.sort()
        let d = try MatrixRelationTests.Device(session: session, homeserver: try TestHomeserver.url())
        addTeardownBlock { await d.vault.logout() }
        _ = await d.vault.login(userId: session.userId)
        try await d.wait("the first sweep") { d.vault.getLastSyncTimestamp() > 0 }
        await d.vault.waitForSyncIdle()
        await d.vault.logout()

        // Away: most rooms a few messages, some more than a catch-up /sync timeline holds.
        let sent = try await Self.seed(bob, rooms: rooms, count: { $0 % 15 == 0 ? 130 : 3 + $0 % 7 }, prefix: "away")
        let total = sent.values.reduce(0) { $0 + $1.count }

        try await d.restart(homeserver: try TestHomeserver.url())
        try await d.wait("every room caught up", seconds: 240) {
            let cached = try XCTUnwrap(d.vault.openCache).reader.sync { db in try db.scalarInt("SELECT count(*) FROM messages") ?? 0 }
            if cached < total { _ = try? await d.vault.syncNow() }
            return cached >= total
        }
        await d.vault.waitForSyncIdle()
        for room in rooms {
            let texts = try XCTUnwrap(d.vault.openCache).reader.sync { db -> [String] in
                let stmt = try db.prepare("SELECT payload FROM messages WHERE conversation_id = ? ORDER BY sent_at, server_id")
                try stmt.bind([.text("group_\(room)")])
                var out: [String] = []
                while try stmt.step() {
                    if let bytes = stmt.blob(0), let text = try BinaryJSON.decode(bytes)["data"]?["text"]?.stringValue { out.append(text) }
                }
                return out
            }
            XCTAssertEqual(texts, sent[room] ?? [], "room \(room): exactly its messages, in order")
        }
        XCTAssertTrue(d.backend.matrix.recordedGaps.isEmpty, "the cache's bound (500) was not reached")
    }
}
