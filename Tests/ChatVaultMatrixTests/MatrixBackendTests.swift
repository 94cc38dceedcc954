import ChatVault
@testable import ChatVaultMatrix
import ChatVaultTesting
import Foundation
import XCTest

/// `MatrixBackend` alone against the real Synapse that Scripts/test starts: the session, sends
/// and their idempotency by transaction id and device, the catch-up sync, pages of a room, the
/// realtime long-poll, edits and redactions, and the id map's exactness.
final class MatrixBackendTests: XCTestCase {
    func backend(_ session: MatrixSession, identities: any MessageIdentities = MemoryMessageIdentities()) async throws -> MatrixBackend {
        let backend = MatrixBackend(homeserver: try TestHomeserver.url(), session: session)
        backend.attach(identities: identities)
        _ = try await backend.login(userId: session.userId)
        return backend
    }

    /// A room alice and bob have both joined (bob created it); alice's backend logged in.
    func groupRoom() async throws -> (alice: MatrixBackend, aliceSession: MatrixSession, bob: RawMatrixClient, room: String) {
        let (aliceSession, alicePassword) = try await TestHomeserver.session("alice")
        passwords[aliceSession.userId] = alicePassword
        let (bobSession, _) = try await TestHomeserver.session("bob")
        let bob = RawMatrixClient(session: bobSession)
        let room = try await bob.createRoom(name: "Team", invite: [aliceSession.userId])
        try await RawMatrixClient(session: aliceSession).join(room)
        return (try await backend(aliceSession), aliceSession, bob, room)
    }

    func text(_ body: String, group room: String) -> JSONValue {
        ["receiver": .string(room), "receiverType": "group", "category": "message", "type": "text", "data": ["text": .string(body)]]
    }

    func testLoginAnswersTheSignedInUserAndRefusesAnother() async throws {
        let (session, _) = try await TestHomeserver.session("carol")
        let backend = MatrixBackend(homeserver: try TestHomeserver.url(), session: session)
        let answer = try await backend.login(userId: session.userId)
        XCTAssertEqual(answer.user["uid"]?.stringValue, session.userId)
        XCTAssertGreaterThan(answer.serverTime, 1_700_000_000, "the server's clock comes from its Date header")
        do {
            _ = try await backend.login(userId: "@someone-else:localhost")
            XCTFail("another user's login must be refused")
        } catch {
            XCTAssertEqual(error, .server(status: 401, code: "ERR_MATRIX_WRONG_USER", message: "this backend is signed in as another user"))
        }
    }

    func testAWrongPasswordIsATypedError() async throws {
        let (user, _) = try await TestHomeserver.register("dave")
        do {
            _ = try await MatrixAccount.login(homeserver: try TestHomeserver.url(), user: user, password: "wrong")
            XCTFail("a wrong password must not log in")
        } catch let error as BackendError {
            guard case .server(403, "M_FORBIDDEN", _) = error else { return XCTFail("\(error)") }
        }
    }

    func testASendRepeatedWithItsLocalIdIsOneEventAcrossRestartsOfTheSameDevice() async throws {
        let (alice, session, bob, room) = try await groupRoom()
        let first = try await alice.send(text("hello", group: room), localMessageId: "local-1")
        let again = try await alice.send(text("hello", group: room), localMessageId: "local-1")
        XCTAssertEqual(first["id"], again["id"], "the same transaction id is the same event")
        XCTAssertEqual(first["localMessageId"]?.stringValue, "local-1")
        XCTAssertEqual(first["conversationId"]?.stringValue, "group_\(room)")
        XCTAssertEqual(first["data"]?["text"]?.stringValue, "hello")

        // A restart: a new login of the same device, a new backend, the id map kept (the cache).
        let identities = MemoryMessageIdentities()
        let relogged = try await MatrixAccount.login(homeserver: try TestHomeserver.url(), user: session.userId,
                                                     password: try await password(of: session), deviceId: session.deviceId)
        _ = relogged
        let restarted = try await backend(relogged, identities: identities)
        let third = try await restarted.send(text("hello", group: room), localMessageId: "local-1")
        let events = try await roomTexts(bob, room)
        XCTAssertEqual(events.filter { $0 == "hello" }.count, 1, "one event on the server whatever the retries: \(events)")
        XCTAssertNotNil(third["id"]?.intValue)

        // Another device of the same user is another transaction scope: a second event.
        let other = try await MatrixAccount.login(homeserver: try TestHomeserver.url(), user: session.userId,
                                                  password: try await password(of: session))
        XCTAssertNotEqual(other.deviceId, session.deviceId)
        _ = try await backend(other).send(text("hello", group: room), localMessageId: "local-1")
        let after = try await roomTexts(bob, room)
        XCTAssertEqual(after.filter { $0 == "hello" }.count, 2, "another device's transaction id is its own")
    }

    func testTheCatchUpSyncBringsWhatOthersSentAfterTheSyncPoint() async throws {
        let (alice, _, bob, room) = try await groupRoom()
        let point = try await alice.latestSyncPoint()
        XCTAssertTrue(point.changes.isEmpty)
        try await bob.sendText("one", room: room)
        try await bob.sendText("two", room: room)
        let page = try await alice.changes(since: point.nextToken, limit: 100)
        let texts = page.changes.compactMap { change -> String? in
            guard case .messageUpserted(let m) = change else { return nil }
            return m["data"]?["text"]?.stringValue
        }
        XCTAssertEqual(texts, ["one", "two"])
        XCTAssertFalse(page.hasMore)
        XCTAssertNotEqual(page.nextToken, point.nextToken)
        let again = try await alice.changes(since: page.nextToken, limit: 100)
        XCTAssertTrue(again.changes.isEmpty, "nothing new after the new point")
        do {
            _ = try await alice.changes(since: "not a token", limit: 100)
            XCTFail("a foreign token must be refused")
        } catch {
            XCTAssertTrue(error.isSyncTokenRejected, "\(error)")
        }
    }

    /// A cache's view that holds nothing and keeps `bound` messages per conversation.
    struct Bounded: CachedMessages {
        var bound: Int
        func messages(ids: [Int]) -> [Int: JSONValue] { [:] }
        var messagesPerConversation: Int { bound }
    }

    func texts(_ page: ChangeLogPage) -> [String] {
        page.changes.compactMap { change -> String? in
            guard case .messageUpserted(let m) = change else { return nil }
            return m["data"]?["text"]?.stringValue
        }
    }

    /// Rooms the catch-up `/sync` does not deliver (cut short, or beyond the page) are read back
    /// afterwards, most recently active first, in pages of the engine's size; where they stand is
    /// kept in the cache (here the state store a relaunched backend is handed), not the token, so
    /// a restart (here mid-room) resumes where the last page ended.
    func testRoomsLeftByTheCatchUpAreReadMostRecentFirstAndResumeFromTheCacheMidRoom() async throws {
        let (alice, session, bob, first) = try await groupRoom()
        let second = try await bob.createRoom(name: "Second", invite: [session.userId])
        let third = try await bob.createRoom(name: "Third", invite: [session.userId])
        for room in [second, third] { try await RawMatrixClient(session: session).join(room) }
        let store = MemoryBackendState()
        let identities = MemoryMessageIdentities()
        alice.attach(state: store)
        alice.attach(identities: identities)
        let point = try await alice.latestSyncPoint()
        // The oldest activity in the first room (more than a /sync timeline holds: `limited`), then
        // the second, the third last: it is the most recent.
        for i in 1...130 { try await bob.sendText("a\(i)", room: first) }
        for i in 1...30 { try await bob.sendText("b\(i)", room: second) }
        for i in 1...30 { try await bob.sendText("c\(i)", room: third) }

        var texts: [String] = []
        var token = point.nextToken
        var pages = 0
        var reader = alice
        while pages < 20 {
            if pages == 2 {
                // A relaunch: a new backend with the same cache resumes from the stored token.
                reader = try await backend(session, identities: identities)
                reader.attach(state: store)
            }
            let page = try await reader.changes(since: token, limit: 20)
            pages += 1
            texts += self.texts(page)
            XCTAssertLessThanOrEqual(page.nextToken.utf8.count, 128, "the token names the plan; the rooms are in the cache")
            XCTAssertLessThanOrEqual(page.changes.count, 20, "a long room goes over several pages of the engine's size")
            token = page.nextToken
            if !page.hasMore { break }
        }
        XCTAssertEqual(pages, 11, "the /sync page (every room cut short at 20 events), then 190 events 20 a page")
        XCTAssertEqual(texts, (1...30).map { "c\($0)" } + (1...30).map { "b\($0)" } + (1...130).map { "a\($0)" },
                       "every message once, rooms most recent first, each oldest first")
        XCTAssertTrue(reader.recordedGaps.isEmpty, "each room read to the old point")
        let after = try await reader.changes(since: token, limit: 40)
        XCTAssertTrue(after.changes.isEmpty, "the last page's token is the server's present")

        // A plan token the cache does not hold (another plan, or the cache lost it) is refused, so
        // the engine starts over rather than skipping rooms.
        for foreign in [CatchUpPlan(next: "s1", rooms: []).token(at: 0), "cvm2.zzz.0"] {
            do {
                _ = try await reader.changes(since: foreign, limit: 40)
                XCTFail("a plan the cache does not hold must be refused")
            } catch {
                XCTAssertTrue(error.isSyncTokenRejected, "\(error)")
            }
        }
    }

    /// A room with more missed messages than the cache keeps is read back only that far: the
    /// newest are delivered, the rest is a recorded gap (kept in the state store) until a read of
    /// the room reaches its oldest missing message.
    func testARoomBeyondTheCachesBoundIsReadToItAndTheRestIsAGapAReadFills() async throws {
        let (alice, _, bob, room) = try await groupRoom()
        let store = MemoryBackendState()
        alice.attach(state: store)
        alice.attach(cachedMessages: Bounded(bound: 40))
        let point = try await alice.latestSyncPoint()
        for i in 1...150 { try await bob.sendText("m\(i)", room: room) }
        var texts: [String] = []
        var token = point.nextToken
        for _ in 0..<10 {
            let page = try await alice.changes(since: token, limit: 100)
            texts += self.texts(page)
            token = page.nextToken
            if !page.hasMore { break }
        }
        XCTAssertGreaterThanOrEqual(texts.count, 40, "at least the bound")
        XCTAssertLessThan(texts.count, 150, "not the whole backlog")
        XCTAssertEqual(texts, (151 - texts.count...150).map { "m\($0)" }, "the newest, oldest first, none twice")
        XCTAssertEqual(alice.recordedGaps.map(\.room), [room])
        XCTAssertEqual(alice.recordedGaps.map(\.conversationId), ["group_\(room)"], "filed as the engine files the group")
        XCTAssertNotNil(store.value(for: "matrix.gaps"), "kept in the cache's state store")

        // Reading the room back page by page fills it: the gap goes once the oldest missing
        // message is read, not before.
        var query = MessageQuery()
        query.scope = .group(room)
        query.limit = 50
        var read = 0
        while read < 200 {
            let page = try await alice.messages(query)
            read += page.items.count
            if read < 150 { XCTAssertFalse(alice.recordedGaps.isEmpty, "not filled part-way") }
            guard let oldest = page.items.first?["id"]?.intValue, page.nextCursor != nil else { break }
            query.messageId = Int(oldest)
        }
        XCTAssertGreaterThanOrEqual(read, 150)
        XCTAssertTrue(alice.recordedGaps.isEmpty, "filled by the read")
        XCTAssertNil(store.value(for: "matrix.gaps"))
    }

    func testPagesOfARoomGoBothWaysFromAMessage() async throws {
        let (alice, _, bob, room) = try await groupRoom()
        for i in 1...7 { try await bob.sendText("p\(i)", room: room) }
        var query = MessageQuery()
        query.scope = .group(room)
        query.limit = 3
        let newest = try await alice.messages(query)
        XCTAssertEqual(newest.items.compactMap { $0["data"]?["text"]?.stringValue }, ["p5", "p6", "p7"], "oldest first")
        let first = try XCTUnwrap(newest.items.first)
        query.cursor = MessageCursor(sentAt: Int(first["sentAt"]?.intValue ?? 0), id: Int(first["id"]?.intValue ?? 0))
        let older = try await alice.messages(query)
        XCTAssertEqual(older.items.compactMap { $0["data"]?["text"]?.stringValue }, ["p2", "p3", "p4"])
        query.direction = .next
        let oldestOfOlder = try XCTUnwrap(older.items.first)
        query.cursor = MessageCursor(sentAt: 0, id: Int(oldestOfOlder["id"]?.intValue ?? 0))
        let newer = try await alice.messages(query)
        XCTAssertEqual(newer.items.compactMap { $0["data"]?["text"]?.stringValue }, ["p3", "p4", "p5"])
        // Ids follow the server's time.
        let ids = (older.items + newest.items).compactMap { $0["id"]?.intValue }
        XCTAssertEqual(ids, ids.sorted())
        XCTAssertTrue(ids.allSatisfy { $0 > 0 && $0 <= WireLimits.maxWireNumber })
    }

    func testRealtimeDeliversOthersMessagesEditsAndDeletions() async throws {
        let (alice, _, bob, room) = try await groupRoom()
        let heard = EventRecorder(alice.events)
        try await alice.connect()
        try await heard.wait(for: "connected") { $0.contains(.connected) }
        let event = try await bob.sendText("live", room: room)
        let received = try await heard.wait(for: "the message") { $0.contains { if case .messageReceived = $0 { true } else { false } } }
        guard case .messageReceived(let m)? = received.first(where: { if case .messageReceived = $0 { true } else { false } }) else { return XCTFail() }
        XCTAssertEqual(m["data"]?["text"]?.stringValue, "live")
        XCTAssertEqual(m["sender"]?["uid"]?.stringValue, bob.session.userId)

        _ = try await bob.call("PUT", "_matrix/client/v3/rooms/\(room)/send/m.room.message/\(UUID().uuidString)", [
            "msgtype": "m.text", "body": "* changed",
            "m.new_content": ["msgtype": "m.text", "body": "changed"],
            "m.relates_to": ["rel_type": "m.replace", "event_id": .string(event)],
        ])
        let afterEdit = try await heard.wait(for: "the edit") { $0.contains { if case .messageEdited = $0 { true } else { false } } }
        guard case .messageEdited(let e)? = afterEdit.first(where: { if case .messageEdited = $0 { true } else { false } }) else { return XCTFail() }
        XCTAssertEqual(e["id"], m["id"], "the edit names the same message")
        XCTAssertEqual(e["data"]?["text"]?.stringValue, "changed")
        XCTAssertEqual(e["editedBy"]?.stringValue, bob.session.userId)

        _ = try await bob.call("PUT", "_matrix/client/v3/rooms/\(room)/redact/\(event)/\(UUID().uuidString)", .object([:]))
        let afterDelete = try await heard.wait(for: "the deletion") { $0.contains { if case .messageDeleted = $0 { true } else { false } } }
        guard case .messageDeleted(let d)? = afterDelete.first(where: { if case .messageDeleted = $0 { true } else { false } }) else { return XCTFail() }
        XCTAssertEqual(d["id"], m["id"])
        XCTAssertNotNil(d["deletedAt"]?.intValue)

        await alice.disconnect()
        try await heard.wait(for: "disconnected") { $0.contains(.disconnected) }
    }

    func testABackendDroppedWhileConnectedEndsItsLongPoll() async throws {
        let (session, _) = try await TestHomeserver.session("gina")
        var configuration = MatrixConfiguration()
        configuration.pollTimeoutMs = 200
        weak var dropped: MatrixBackend?
        do {
            let backend = MatrixBackend(homeserver: try TestHomeserver.url(), session: session, configuration: configuration)
            dropped = backend
            try await backend.connect()
            try await Task.sleep(for: .milliseconds(300))
        }
        let deadline = Date().addingTimeInterval(10)
        while dropped != nil && Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        XCTAssertNil(dropped, "the realtime loop must not keep a dropped backend (and its polls) alive")
    }

    func testEditAndDeleteOfOwnMessagesRoundTripTheirIds() async throws {
        let identities = MemoryMessageIdentities()
        let (_, session, bob, room) = try await groupRoom()
        let alice = try await backend(session, identities: identities)
        let sent = try await alice.send(text("draft", group: room), localMessageId: "l-edit")
        let id = try XCTUnwrap(sent["id"]?.intValue)
        let edited = try await alice.editMessage(id: Int(id), changes: ["data": ["text": "final"]])
        XCTAssertEqual(edited["id"]?.intValue, id)
        XCTAssertEqual(edited["data"]?["text"]?.stringValue, "final")
        XCTAssertNotNil(edited["editedAt"]?.intValue)
        let fetched = try await alice.message(id: Int(id))
        XCTAssertEqual(fetched["data"]?["text"]?.stringValue, "final")
        let deleted = try await alice.deleteMessage(id: Int(id))
        XCTAssertNotNil(deleted["deletedAt"]?.intValue)
        XCTAssertEqual(deleted["id"]?.intValue, id)
        _ = bob
        do {
            _ = try await alice.message(id: 12345)
            XCTFail("an id the map never gave is unknown")
        } catch {
            XCTAssertEqual(error, .server(status: 404, code: "ERR_NOT_FOUND", message: "no Matrix event is known for this message id"))
        }
    }

    func testMediaRoundTripsAndARevokedTokenIsTheTyped401() async throws {
        let (session, _) = try await TestHomeserver.session("frank")
        let backend = try await backend(session)
        let dir = TemporaryDirectory()
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try bytes.write(to: URL(fileURLWithPath: dir.path + "/clip.bin"))
        let attachment = try await backend.uploadMedia(path: dir.path + "/clip.bin", name: "clip.bin", mimeType: "application/octet-stream")
        let url = try XCTUnwrap(attachment["url"]?.stringValue)
        XCTAssertTrue(url.hasPrefix("mxc://"))
        XCTAssertEqual(attachment["size"]?.intValue, Int64(bytes.count))
        let stream = try await backend.downloadMedia(url: url)
        var received = Data()
        for try await chunk in stream.chunks { received += chunk }
        XCTAssertEqual(received, bytes)
        do {
            _ = try await backend.downloadMedia(url: "mxc://localhost/doesNotExist")
            XCTFail("an unknown media id must be refused")
        } catch {
            guard case .server(404, _, _) = error else { return XCTFail("\(error)") }
        }
        try await MatrixAccount.logout(homeserver: try TestHomeserver.url(), session: session)
        do {
            _ = try await backend.downloadMedia(url: url)
            XCTFail("a revoked token must be refused")
        } catch {
            guard case .server(401, _, _) = error else { return XCTFail("\(error)") }
        }
        do {
            _ = try await backend.resignMediaURL(url, messageId: 1)
            XCTFail("mxc URLs do not expire: the 401 is reported, not retried")
        } catch {
            guard case .server(401, "M_UNKNOWN_TOKEN", _) = error else { return XCTFail("\(error)") }
        }
    }

    func testWhatHasNoMatrixCounterpartIsATypedError() async throws {
        let (session, _) = try await TestHomeserver.session("erin")
        let backend = try await backend(session)
        await expectUnsupported { _ = try await backend.messages(MessageQuery()) }
        await expectUnsupported { _ = try await backend.threads(ThreadQuery()) }
        await expectUnsupported {
            _ = try await backend.send(["receiver": "!r:localhost", "receiverType": "group", "category": "interactive", "type": "form",
                                        "data": [:]], localMessageId: "l-form")
        }
    }

    func expectUnsupported(file: StaticString = #filePath, line: UInt = #line, _ body: () async throws -> Void) async {
        do {
            try await body()
            XCTFail("must be refused", file: file, line: line)
        } catch {
            guard case .server(501, MatrixBackend.unsupportedCode, _)? = error as? BackendError else {
                return XCTFail("\(error)", file: file, line: line)
            }
        }
    }

    // MARK: - Support

    private var passwords: [String: String] = [:]

    func password(of session: MatrixSession) async throws -> String {
        try XCTUnwrap(passwords[session.userId])
    }

    func roomTexts(_ client: RawMatrixClient, _ room: String) async throws -> [String] {
        let answer = try await client.call("GET", "_matrix/client/v3/rooms/\(room)/messages", query: [("dir", "b"), ("limit", "100")])
        return (answer["chunk"]?.arrayValue ?? []).compactMap { e in
            e["type"]?.stringValue == "m.room.message" ? e["content"]?["body"]?.stringValue : nil
        }
    }


}
