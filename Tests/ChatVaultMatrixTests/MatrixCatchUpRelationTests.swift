import ChatVault
import ChatVaultMatrix
import Foundation
import Synchronization
import XCTest

/// The catch-up resolves an edit, a redaction or a reaction whose target the cache holds from the
/// cached copy, without a request (issue 23): two devices of one user catch up on the same events
/// from the real Synapse, one resolving relations locally and one asking the homeserver for each as
/// before; their caches and what their sync listeners are told must match, with fewer requests.
extension MatrixRelationTests {
    /// What a catch-up delivered (`onMessageSyncCompleted`), by message id.
    final class SyncHeard: SyncListener, @unchecked Sendable {
        let messages = Mutex<[Int: BaseMessage]>([:])
        let completed = Mutex(0)

        func onMessageSyncCompleted(_ messages: [BaseMessage], _ outcome: CometChat.SyncOutcome) {
            self.messages.withLock { m in for message in messages { m[message.id] = message } }
            completed.withLock { $0 += 1 }
        }
    }

    /// A message as the test compares it across the two devices.
    struct Shown: Equatable, CustomStringConvertible {
        var text: String?
        var editedAt: Double
        var editedBy: String?
        var deleted: Bool
        var counts: [String: Int]
        var mine: [String: Bool]
        var quoted: Int

        init(_ m: BaseMessage) {
            text = (m as? TextMessage)?.text
            editedAt = m.editedAt
            editedBy = m.editedBy
            deleted = m.deletedAt > 0
            counts = MatrixRelationTests.counts(m)
            mine = Dictionary((m.getReactions()).map { ($0.reaction, $0.reactedByMe) }, uniquingKeysWith: { $0 || $1 })
            quoted = m.quotedMessageId
        }

        var description: String {
            "\(text ?? "-") edited \(editedAt) by \(editedBy ?? "-") deleted \(deleted) counts \(counts) mine \(mine) quoted \(quoted)"
        }
    }

    func testACatchUpAppliesEditsRedactionsAndReactionsOfCachedMessagesWithoutRequests() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await group(for: session)
        let carol = try await joined("carol", room, invitedBy: bob)
        let alice = RawMatrixClient(session: session)
        let bobId = bob.session.userId

        // Two devices of alice (two caches), both online while bob writes: realtime caches it all.
        let local = try await device(session)
        let asking = try await device(session)
        let edited = try await bob.sendText("to edit", room: room)
        let reacted = try await bob.sendText("to react to", room: room)
        let deleted = try await bob.sendText("to delete", room: room)
        let reply = try await reply(bob, room, to: edited, quoting: "to edit", sender: bobId, with: "a reply")
        let evicted = try await bob.sendText("not cached", room: room)
        _ = try await react(alice, room, reacted, "👍")
        for d in [local, asking] {
            try await d.wait("the messages in the cache") {
                let page = await d.cached(.group(room))
                return page.count == 5 && Self.counts(page.first { ($0 as? TextMessage)?.text == "to react to" }) == ["👍": 1]
            }
        }
        // One message leaves both caches (as eviction would): its relations must still resolve.
        let before = await local.cached(.group(room))
        let evictedId = try XCTUnwrap(before.first { ($0 as? TextMessage)?.text == "not cached" }?.id)
        let editedId = try XCTUnwrap(before.first { ($0 as? TextMessage)?.text == "to edit" }?.id)
        for d in [local, asking] {
            // The sync point moves past them: the catch-up brings only what follows.
            _ = try await d.vault.syncNow()
            await d.vault.waitForSyncIdle()
            try XCTUnwrap(d.vault.openCache).writer.sync { db in try db.run("DELETE FROM messages WHERE server_id = ?", .int(Int64(evictedId))) }
            await d.vault.logout()
        }

        // While alice is away, Element-shaped relations: an edit and an edit of it (both target the
        // original), an edit of a reply (new content without the fallback), reactions added and
        // one taken back, a deleted message, a new message with its own edit and reaction, and an
        // edit and a reaction of the message no cache holds.
        try await edit(bob, room, edited, to: "edited once")
        try await edit(bob, room, edited, to: "edited twice")
        try await edit(bob, room, reply, to: "a reply, edited")
        _ = try await react(bob, room, reacted, "👍")
        _ = try await react(carol, room, reacted, "🎉")
        let heart = try await react(carol, room, edited, "❤️")
        try await redact(carol, room, heart)
        try await redact(bob, room, deleted)
        let fresh = try await bob.sendText("new while away", room: room)
        try await edit(bob, room, fresh, to: "new, edited")
        _ = try await react(carol, room, fresh, "👀")
        try await edit(bob, room, evicted, to: "not cached, edited")
        _ = try await react(carol, room, evicted, "🙂")

        // Each device catches up in a new process: one resolving relations locally, one asking.
        var shown: [[String: Shown]] = []
        var heardShown: [[String: Shown]] = []
        var requests: [Int] = []
        for (d, localRelations) in [(local, true), (asking, false)] {
            try await d.restart(homeserver: try TestHomeserver.url(), localRelations: localRelations)
            let heard = SyncHeard()
            d.vault.addSyncListener("catch-up", heard)
            _ = try await d.vault.syncNow()
            try await d.wait("the catch-up in the cache") {
                let page = await d.cached(.group(room))
                return page.contains { ($0 as? TextMessage)?.text == "new, edited" }
                    && page.contains { ($0 as? TextMessage)?.text == "not cached, edited" && Self.counts($0) == ["🙂": 1] }
            }
            await d.vault.waitForSyncIdle()
            let page = await d.cached(.group(room))
            let byText = Dictionary(page.map { (($0 as? TextMessage)?.text ?? "deleted \($0.id)", Shown($0)) }, uniquingKeysWith: { a, _ in a })
            shown.append(byText)
            let delivered = heard.messages.withLock { $0 }
            heardShown.append(Dictionary(page.compactMap { m in delivered[m.id].map { (($0 as? TextMessage)?.text ?? "deleted \($0.id)", Shown($0)) } },
                                         uniquingKeysWith: { a, _ in a }))
            requests.append(d.backend.catchUpRequests.withLock { $0 })
        }

        // The same cache and the same deliveries either way.
        XCTAssertEqual(shown[0], shown[1], "the cached rows resolved locally are those resolved by asking")
        XCTAssertEqual(heardShown[0], heardShown[1], "the sync listener hears the same messages either way")
        let cache = shown[0]
        XCTAssertEqual(cache["edited twice"]?.editedBy, bobId)
        XCTAssertGreaterThan(cache["edited twice"]?.editedAt ?? 0, 0)
        XCTAssertEqual(cache["edited twice"]?.counts, [:], "carol's heart was taken back")
        XCTAssertEqual(cache["to react to"]?.counts, ["👍": 2, "🎉": 1])
        XCTAssertEqual(cache["to react to"]?.mine, ["👍": true, "🎉": false])
        XCTAssertEqual(cache["a reply, edited"]?.quoted, editedId, "an edited reply still links the quoted message")
        XCTAssertEqual(cache["new, edited"]?.counts, ["👀": 1])
        XCTAssertEqual(cache["not cached, edited"]?.counts, ["🙂": 1], "a target the cache did not hold is fetched")
        XCTAssertEqual(cache.values.filter(\.deleted).count, 1, "the deleted message is marked deleted")
        XCTAssertNotNil(heardShown[0]["edited twice"], "the edit is delivered to the sync listener")

        // Fewer requests: the catch-up /sync, the message no cache held (its edit and reaction), and
        // nothing for the ten relations whose targets were cached; asking costs at least one more
        // request for each of those.
        let (resolved, asked) = (requests[0], requests[1])
        print("catch-up requests: resolving locally \(resolved), asking \(asked)")
        XCTAssertLessThanOrEqual(resolved, 5, "the /sync pages and the uncached message's fetches only")
        XCTAssertGreaterThanOrEqual(asked, resolved + 10, "asking costs a request per relation")
    }
}
