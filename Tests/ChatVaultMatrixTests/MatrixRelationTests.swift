import ChatVault
import ChatVaultMatrix
import ChatVaultTesting
import Foundation
import Synchronization
import VaultKeys
import VaultStore
import XCTest

/// What a real Matrix client sends (events shaped as Element sends them: edits with `m.new_content`
/// and a `"* "` body, replies with the fallback quote, reactions, redactions of reactions), and a
/// process that starts offline, against the real Synapse. The cache is read after every phase that
/// can write over it: the catch-up, an online read (its server phase), a realtime delivery, a restart.
final class MatrixRelationTests: XCTestCase {
    /// The Matrix backend, with its page reads switched off when a test wants the cache alone
    /// (realtime and the catch-up go on), and the requests its catch-up calls made counted.
    final class Switched: ForwardingBackend {
        let matrix: MatrixBackend
        var forwardee: any ChatBackend { matrix }
        let pagesOff = Mutex(false)
        /// Requests made during `changes` calls (the catch-up's).
        let catchUpRequests = Mutex(0)

        init(_ matrix: MatrixBackend) { self.matrix = matrix }

        func messages(_ q: MessageQuery) async throws(BackendError) -> WirePage {
            if pagesOff.withLock({ $0 }) { throw .unreachable }
            return try await matrix.messages(q)
        }

        func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
            let before = matrix.statistics.requests
            defer { let after = matrix.statistics.requests; catchUpRequests.withLock { $0 += after - before } }
            return try await matrix.changes(since: token, limit: limit)
        }
    }

    /// One user's engine over Matrix on an encrypted cache; `restart(homeserver:)` is a new process
    /// on the same cache (a new backend and engine), optionally against another address.
    final class Device: @unchecked Sendable {
        let root = TemporaryDirectory()
        let runtime = TemporaryDirectory()
        let keyStore = MemoryKeyStore()
        let callbacks = DispatchQueue(label: "tests.matrix.relations")
        let session: MatrixSession
        private(set) var backend: Switched
        private(set) var vault: OfflineVault

        init(session: MatrixSession, homeserver: URL) throws {
            self.session = session
            backend = Switched(MatrixBackend(homeserver: homeserver, session: session))
            vault = try MatrixVaultTests.Harness.makeVault(backend, root: root.path, runtime: runtime.path, keyStore: keyStore, callbacks: callbacks)
        }

        /// A new process; `localRelations: false` makes its catch-up ask the homeserver for every
        /// relation, as it did before relations were resolved from the cache.
        func restart(homeserver: URL, localRelations: Bool = true) async throws {
            await vault.logout()
            let matrix = MatrixBackend(homeserver: homeserver, session: session)
            matrix.resolvesRelationsLocally = localRelations
            backend = Switched(matrix)
            vault = try MatrixVaultTests.Harness.makeVault(backend, root: root.path, runtime: runtime.path, keyStore: keyStore, callbacks: callbacks)
            _ = await vault.login(userId: session.userId)
        }

        func request(_ scope: MessageScope, limit: Int = 100) -> MessagesRequest {
            let builder = MessagesRequest.MessageRequestBuilder(vault: vault).set(limit: limit)
            switch scope {
            case .user(let uid): builder.set(uid: uid)
            case .group(let guid): builder.set(guid: guid)
            }
            return builder.build()
        }

        /// The cached page alone (the server phase switched off for the read).
        func cached(_ scope: MessageScope, limit: Int = 100) async -> [BaseMessage] {
            backend.pagesOff.withLock { $0 = true }
            defer { backend.pagesOff.withLock { $0 = false } }
            return await request(scope, limit: limit).fetchPrevious().cached ?? []
        }

        /// How many messages of a conversation the cache holds (straight from the database).
        func rows(_ conversationId: String) throws -> Int64 {
            try XCTUnwrap(vault.openCache).reader.sync { db in
                try db.scalarInt("SELECT count(*) FROM messages WHERE conversation_id = ?", .text(conversationId)) ?? 0
            }
        }

        func wait(_ what: String, seconds: Double = 30, file: StaticString = #filePath, line: UInt = #line,
                  _ condition: () async throws -> Bool) async throws {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if try await condition() { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            XCTFail("timed out waiting for \(what)", file: file, line: line)
            throw CancellationError()
        }

        func sendText(_ message: TextMessage) async throws -> TextMessage {
            let sent = Mutex<TextMessage?>(nil)
            let failed = Mutex<CometChatException?>(nil)
            vault.sendTextMessage(message: message, onMessagePending: { _ in }, onMessageSent: { m in sent.withLock { $0 = m } },
                                  onError: { e in failed.withLock { $0 = e } })
            try await wait("the send") { sent.withLock { $0 != nil } || failed.withLock { $0 != nil } }
            if let error = failed.withLock({ $0 }) { throw error }
            return try XCTUnwrap(sent.withLock { $0 })
        }
    }

    func device(_ session: MatrixSession) async throws -> Device {
        let d = try Device(session: session, homeserver: try TestHomeserver.url())
        addTeardownBlock { await d.vault.logout() }
        let attempt = await d.vault.login(userId: session.userId)
        XCTAssertEqual(attempt.state, .ready)
        try await d.wait("the first sweep") { d.vault.getLastSyncTimestamp() > 0 }
        await d.vault.waitForSyncIdle()
        return d
    }

    func group(for alice: MatrixSession) async throws -> (bob: RawMatrixClient, room: String) {
        let (bobSession, _) = try await TestHomeserver.session("bob")
        let bob = RawMatrixClient(session: bobSession)
        let room = try await bob.createRoom(name: "Team", invite: [alice.userId])
        try await RawMatrixClient(session: alice).join(room)
        return (bob, room)
    }

    /// A new user `name`, invited to `room` by `inviter` and joined.
    func joined(_ name: String, _ room: String, invitedBy inviter: RawMatrixClient) async throws -> RawMatrixClient {
        let session = try await TestHomeserver.session(name).session
        let client = RawMatrixClient(session: session)
        _ = try await inviter.call("POST", "_matrix/client/v3/rooms/\(room)/invite", ["user_id": .string(session.userId)])
        try await client.join(room)
        return client
    }

    @discardableResult
    func send(_ client: RawMatrixClient, _ room: String, _ type: String, _ content: JSONValue) async throws -> String {
        let answer = try await client.call("PUT", "_matrix/client/v3/rooms/\(room)/send/\(type)/\(UUID().uuidString)", content)
        return try XCTUnwrap(answer["event_id"]?.stringValue)
    }

    /// An edit as Element sends it.
    func edit(_ client: RawMatrixClient, _ room: String, _ event: String, to text: String) async throws {
        try await send(client, room, "m.room.message", [
            "msgtype": "m.text", "body": .string("* " + text),
            "m.new_content": ["msgtype": "m.text", "body": .string(text)],
            "m.relates_to": ["rel_type": "m.replace", "event_id": .string(event)],
        ])
    }

    /// A reply as Element sends it: the relation, the fallback quote in `body`, `<mx-reply>` in the HTML.
    func reply(_ client: RawMatrixClient, _ room: String, to event: String, quoting text: String, sender: String, with reply: String) async throws -> String {
        try await send(client, room, "m.room.message", [
            "msgtype": "m.text", "body": .string("> <\(sender)> \(text)\n\n\(reply)"),
            "format": "org.matrix.custom.html",
            "formatted_body": .string("<mx-reply><blockquote><a href=\"https://matrix.to/#/\(room)/\(event)\">In reply to</a> <a href=\"https://matrix.to/#/\(sender)\">\(sender)</a><br>\(text)</blockquote></mx-reply>\(reply)"),
            "m.relates_to": ["m.in_reply_to": ["event_id": .string(event)]],
        ])
    }

    func react(_ client: RawMatrixClient, _ room: String, _ event: String, _ key: String) async throws -> String {
        try await send(client, room, "m.reaction", ["m.relates_to": ["rel_type": "m.annotation", "event_id": .string(event), "key": .string(key)]])
    }

    func redact(_ client: RawMatrixClient, _ room: String, _ event: String) async throws {
        _ = try await client.call("PUT", "_matrix/client/v3/rooms/\(room)/redact/\(event)/\(UUID().uuidString)", .object([:]))
    }

    static func counts(_ m: BaseMessage?) -> [String: Int] {
        Dictionary((m?.getReactions() ?? []).map { ($0.reaction, $0.count) }, uniquingKeysWith: +)
    }

    // MARK: - Tests

    func testAFreshProcessOfflineReadsADirectChatAndAGroupTwiceAndKeepsEveryCachedMessage() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await group(for: session)
        let d = try await device(session)
        let bobId = bob.session.userId
        let direct = [session.userId, bobId].sorted().joined(separator: "_user_")

        // A direct chat alice starts through the engine (the room is created and named in m.direct).
        _ = try await d.sendText(TextMessage(receiverUid: bobId, text: "hello bob", receiverType: .user))
        let sync = try await bob.call("GET", "_matrix/client/v3/sync", query: [("timeout", "0")])
        let dm = try XCTUnwrap(sync["rooms"]?["invite"]?.objectValue?.keys.first)
        try await bob.join(dm)
        for i in 1...119 { try await bob.sendText("direct \(i)", room: dm) }
        for i in 1...5 { try await bob.sendText("group \(i)", room: room) }
        try await d.wait("every message in the cache", seconds: 120) {
            try d.rows(direct) == 120 && d.rows("group_\(room)") == 5
        }
        // The direct-chat map is kept inside the encrypted cache: readable through the keyed
        // connection, nowhere in the files' bytes.
        let directory = try XCTUnwrap(d.vault.openCache).directory
        let kept = try XCTUnwrap(d.vault.openCache).reader.sync { db in
            try db.scalarInt("SELECT count(*) FROM kv WHERE key = 'backend.matrix.direct'")
        }
        XCTAssertEqual(kept, 1)
        await d.vault.logout()
        for file in directory.databaseFiles where FileManager.default.fileExists(atPath: file) {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
            XCTAssertNil(bytes.range(of: Data(dm.utf8)), "the direct room's id is not in \(file) in the clear")
            XCTAssertNil(bytes.range(of: Data(bobId.utf8)), "bob's id is not in \(file) in the clear")
        }

        // A new process without a network: the homeserver unreachable from the start.
        let dead = try XCTUnwrap(URL(string: "http://127.0.0.1:9"))
        try await d.restart(homeserver: dead)
        XCTAssertTrue(d.vault.isOfflineEnabled())
        for round in 1...2 {
            let read = await d.request(.user(bobId)).fetchPrevious()
            XCTAssertEqual(read.cached?.count, 100, "round \(round): the newest 100 from the cache")
            XCTAssertEqual((read.cached?.last as? TextMessage)?.text, "direct 119")
            guard case .failure(let error) = read.server else { return XCTFail("round \(round): offline, the server phase fails") }
            XCTAssertEqual(error.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
            let groupRead = await d.request(.group(room)).fetchPrevious()
            XCTAssertEqual(groupRead.cached?.count, 5)
            guard case .failure(let groupError) = groupRead.server else { return XCTFail("round \(round): the group's server phase fails") }
            XCTAssertEqual(groupError.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
            XCTAssertEqual(try d.rows(direct), 120, "round \(round): every cached message of the direct chat is still there")
            XCTAssertEqual(try d.rows("group_\(room)"), 5)
        }

        // The backend itself answers "unreachable", never an empty page: with the map the cache
        // kept, and without it (a backend that never read this cache).
        do {
            _ = try await d.backend.matrix.messages({ var q = MessageQuery(); q.scope = .user(bobId); return q }())
            XCTFail("an offline page of a direct chat must throw")
        } catch {
            XCTAssertEqual(error, .unreachable)
        }
        let bare = MatrixBackend(homeserver: dead, session: session)
        do {
            _ = try await bare.messages({ var q = MessageQuery(); q.scope = .user(bobId); return q }())
            XCTFail("a backend that does not know the direct room must throw, not answer nothing")
        } catch {
            XCTAssertEqual(error, .unreachable)
        }
        do {
            _ = try await bare.threads({ var q = ThreadQuery(); q.scope = .user(bobId); return q }())
            XCTFail("threads of a direct chat not known yet must throw")
        } catch {
            XCTAssertEqual(error, .unreachable)
        }
    }

    func testElementEditsRepliesAndReactionsShowAfterTheCatchUpAnOnlineReadRealtimeAndARestart() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await group(for: session)
        let carol = try await joined("carol", room, invitedBy: bob)
        let d = try await device(session)
        let bobId = bob.session.userId
        await d.vault.logout()

        // While alice is away: a message, Element's edit of it, a reply, reactions (one taken back).
        let original = try await bob.sendText("original text", room: room)
        try await Task.sleep(for: .milliseconds(50))
        try await bob.sendText("a later message", room: room)
        try await edit(bob, room, original, to: "edited text")
        _ = try await reply(bob, room, to: original, quoting: "edited text", sender: bobId, with: "the reply")
        _ = try await react(bob, room, original, "👍")
        _ = try await react(carol, room, original, "👍")
        let party = try await react(carol, room, original, "🎉")
        try await redact(carol, room, party)

        func check(_ messages: [BaseMessage], _ phase: String, text: String = "edited text", counts: [String: Int] = ["👍": 2],
                   file: StaticString = #filePath, line: UInt = #line) throws {
            let texts = messages.compactMap { ($0 as? TextMessage)?.text }
            XCTAssertEqual(texts, [text, "a later message", "the reply"], "\(phase): order and texts", file: file, line: line)
            guard messages.count == 3 else { return }
            let edited = messages[0]
            XCTAssertGreaterThan(edited.editedAt, 0, "\(phase): editedAt", file: file, line: line)
            XCTAssertEqual(edited.editedBy, bobId, "\(phase): editedBy", file: file, line: line)
            XCTAssertEqual(Self.counts(edited), counts, "\(phase): reaction counts", file: file, line: line)
            XCTAssertLessThan(edited.id, messages[1].id, "\(phase): ids follow each event's own time", file: file, line: line)
            XCTAssertEqual(messages[2].quotedMessageId, edited.id, "\(phase): the reply links the quoted message", file: file, line: line)
        }

        // Local search after each phase: the edited message by its current words only (the old
        // ones left the index), the reply by its own words (not the quoted fallback), never twice.
        func searched(_ words: String) async throws -> [Int] {
            try await d.vault.searchCachedMessages(words).hits.map(\.message.id)
        }
        func checkSearch(_ current: String, gone: [String], _ phase: String, file: StaticString = #filePath, line: UInt = #line) async throws {
            await d.vault.waitForSearchIndex()
            let page = await d.cached(.group(room))
            guard let edited = page.first, page.count == 3 else { return XCTFail("\(phase): \(page.count) cached", file: file, line: line) }
            let now = try await searched("\"\(current)\"")
            XCTAssertEqual(now, [edited.id], "\(phase): the edited message by its words", file: file, line: line)
            for old in gone {
                let stale = try await searched("\"\(old)\"")
                XCTAssertEqual(stale, [], "\(phase): \(old) left the index", file: file, line: line)
            }
            let reply = try await searched("reply")
            XCTAssertEqual(reply, [page[2].id], "\(phase): the reply by its own words", file: file, line: line)
        }

        // 1. The catch-up.
        try await d.restart(homeserver: try TestHomeserver.url())
        try await d.wait("the catch-up") { d.vault.getLastSyncTimestamp() > 0 }
        _ = try await d.vault.syncNow()
        await d.vault.waitForSyncIdle()
        try check(await d.cached(.group(room)), "after the catch-up")
        try await checkSearch("edited text", gone: ["original text"], "after the catch-up")

        // 2. An online read: the server phase writes its page over the cached rows.
        let online = await d.request(.group(room)).fetchPrevious()
        try check(try online.server.get(), "the server phase as delivered")
        try check(await d.cached(.group(room)), "the cache after the server phase")
        try await checkSearch("edited text", gone: ["original text"], "after the server phase")

        // 3. Realtime: a second edit, a reaction, and bob's reaction taken back.
        try await Task.sleep(for: .milliseconds(500)) // the long-poll is waiting on the server
        try await edit(bob, room, original, to: "edited twice")
        _ = try await react(bob, room, original, "❤️")
        let bobsThumb = try await bob.call("GET", "_matrix/client/v1/rooms/\(room)/relations/\(original)/m.annotation/m.reaction")
        let thumb = try XCTUnwrap((bobsThumb["chunk"]?.arrayValue ?? []).first {
            $0["sender"]?.stringValue == bobId && $0["content"]?["m.relates_to"]?["key"]?.stringValue == "👍"
        }?["event_id"]?.stringValue)
        try await redact(bob, room, thumb)
        let realtimeCounts = ["👍": 1, "❤️": 1]
        try await d.wait("realtime changes in the cache") {
            let page = await d.cached(.group(room))
            return (page.first as? TextMessage)?.text == "edited twice" && Self.counts(page.first) == realtimeCounts
        }
        try check(await d.cached(.group(room)), "after realtime", text: "edited twice", counts: realtimeCounts)
        try await checkSearch("edited twice", gone: ["original text", "edited text"], "after realtime")

        // 4. A restart, then an online read again.
        try await d.restart(homeserver: try TestHomeserver.url())
        try check(await d.cached(.group(room)), "after a restart", text: "edited twice", counts: realtimeCounts)
        let again = await d.request(.group(room)).fetchPrevious()
        try check(try again.server.get(), "an online read after the restart", text: "edited twice", counts: realtimeCounts)
        try check(await d.cached(.group(room)), "the cache after that read", text: "edited twice", counts: realtimeCounts)
        try await checkSearch("edited twice", gone: ["original text", "edited text"], "after a restart and a read")

        // Alice replies through the engine: Element sees a reply (relation and fallback), alice's
        // cache links it.
        let page = await d.cached(.group(room))
        let quoted = try XCTUnwrap(page.first)
        let answer = TextMessage(receiverUid: room, text: "alice answers", receiverType: .group)
        answer.quotedMessageId = quoted.id
        let sent = try await d.sendText(answer)
        XCTAssertEqual(sent.quotedMessageId, quoted.id)
        XCTAssertEqual(sent.text, "alice answers")
        let history = try await bob.call("GET", "_matrix/client/v3/rooms/\(room)/messages", query: [("dir", "b"), ("limit", "5")])
        let raw = try XCTUnwrap((history["chunk"]?.arrayValue ?? []).first { $0["sender"]?.stringValue == session.userId && $0["type"]?.stringValue == "m.room.message" })
        XCTAssertEqual(raw["content"]?["m.relates_to"]?["m.in_reply_to"]?["event_id"]?.stringValue, original)
        let body = try XCTUnwrap(raw["content"]?["body"]?.stringValue)
        XCTAssertTrue(body.hasPrefix("> <\(bobId)> edited twice"), body)
        XCTAssertTrue(body.hasSuffix("\n\nalice answers"), body)
        XCTAssertTrue(raw["content"]?["formatted_body"]?.stringValue?.hasPrefix("<mx-reply>") == true)
        try await d.wait("alice's reply in the cache") {
            let page = await d.cached(.group(room))
            return page.contains { ($0 as? TextMessage)?.text == "alice answers" && $0.quotedMessageId == quoted.id }
        }
    }

    func testAMessageWhoseEditIsSeenFirstKeepsItsPlace() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await group(for: session)
        let first = try await bob.sendText("first", room: room)
        try await Task.sleep(for: .milliseconds(50))
        for i in 1...25 { try await bob.sendText("filler \(i)", room: room) }
        try await edit(bob, room, first, to: "first, edited")

        // The conversation list sees the edit among the room's latest events, not the message.
        let backend = MatrixBackend(homeserver: try TestHomeserver.url(), session: session)
        let list = try await backend.conversations(ConversationQuery())
        XCTAssertEqual(list.items.count, 1)
        var q = MessageQuery()
        q.scope = .group(room)
        q.limit = 50
        let page = try await backend.messages(q)
        let texts = page.items.compactMap { $0["data"]?["text"]?.stringValue }
        XCTAssertEqual(texts.first, "first, edited")
        XCTAssertEqual(texts.count, 26)
        let ids = page.items.compactMap { $0["id"]?.intValue }
        // The edited message's id follows its own time (before every filler), not the edit's. (Two
        // fillers of one 16 ms may number newest first on a backward page: see the stop note.)
        XCTAssertLessThan(try XCTUnwrap(ids.first), try XCTUnwrap(ids.dropFirst().min()),
                          "ids follow each message's own time, not the time of the edit that named it first")
    }

    func testADirectInvitationAcceptedDuringTheCatchUpBringsTheRoomsWholeBacklog() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bobSession, _) = try await TestHomeserver.session("bob")
        let bob = RawMatrixClient(session: bobSession)
        let d = try await device(session)
        await d.vault.logout()

        // While alice is away bob opens a direct chat with her and writes more than one /sync
        // timeline holds (the room then comes back `limited`).
        let dm = try await bob.createRoom(name: "", invite: [session.userId], direct: true)
        for i in 1...130 { try await bob.sendText("backlog \(i)", room: dm) }

        try await d.restart(homeserver: try TestHomeserver.url())
        try await d.wait("the catch-up") { d.vault.getLastSyncTimestamp() > 0 }
        let direct = [session.userId, bobSession.userId].sorted().joined(separator: "_user_")
        try await d.wait("the backlog in the cache", seconds: 60) {
            if try d.rows(direct) < 130 { _ = try? await d.vault.syncNow() }
            return try d.rows(direct) == 130
        }
        let cached = await d.cached(.user(bobSession.userId), limit: 100)
        XCTAssertEqual(cached.compactMap { ($0 as? TextMessage)?.text }, (31...130).map { "backlog \($0)" },
                       "the newest 100 in order; all 130 sent before the join are cached")
    }

    /// Where the homeserver serves sliding sync (Synapse does), the list is read a window at a
    /// time, most recent first: pages of `limit` rooms with a cursor to the next, every room once,
    /// each as the full `/sync` list renders it (its last message and unread count), two requests
    /// a page however many rooms the user has.
    func testTheRoomListIsReadAWindowAtATimeMostRecentFirst() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        var rooms: [String] = []
        for i in 0..<7 {
            let (bob, room) = try await group(for: session)
            for j in 0...(i % 3) { _ = try await bob.sendText("room \(i) message \(j)", room: room) }
            rooms.append(room)
        }
        let backend = MatrixBackend(homeserver: try TestHomeserver.url(), session: session)
        // Each room as `/sync` renders it (its own lookup), for comparison.
        var whole: [JSONValue] = []
        for room in rooms { whole.append(try await backend.conversation(with: room, type: .group)) }

        var query = ConversationQuery()
        query.limit = 3
        var pages: [[JSONValue]] = []
        var requests: [Int] = []
        repeat {
            let before = backend.statistics.requests
            let page = try await backend.conversations(query)
            requests.append(backend.statistics.requests - before)
            pages.append(page.items)
            query.cursor = page.nextCursor
        } while query.cursor != nil && pages.count < 10
        XCTAssertEqual(pages.map(\.count), [3, 3, 1], "windows of three")
        XCTAssertEqual(Array(requests.dropFirst()), [2, 2], "the window, then its rooms: two requests a page")
        XCTAssertLessThanOrEqual(requests.first ?? 0, 3, "the first page also asks /versions once")
        let ids = pages.flatMap { $0.compactMap { $0["conversationId"]?.stringValue } }
        XCTAssertEqual(ids, rooms.reversed().map { "group_\($0)" }, "most recent first, every room once")
        let byId = Dictionary(uniqueKeysWithValues: whole.compactMap { c in c["conversationId"]?.stringValue.map { ($0, c) } })
        for item in pages.joined() {
            let id = item["conversationId"]?.stringValue ?? "?"
            XCTAssertEqual(item["lastMessage"]?["id"], byId[id]?["lastMessage"]?["id"], id)
            XCTAssertEqual(item["unreadMessageCount"], byId[id]?["unreadMessageCount"], id)
        }
        XCTAssertEqual(pages.first?.first?["unreadMessageCount"]?.intValue, 1, "room 6 holds one message: one unread")

        query.cursor = "ss:nope"
        do {
            _ = try await backend.conversations(query)
            XCTFail("a cursor this backend did not give")
        } catch {
            guard case .server(400, "ERR_INVALID_CURSOR", _) = error else { return XCTFail("\(error)") }
        }
    }

    /// A lookup reads its own room (a `/sync` filtered to it), never the whole list: one request,
    /// a fraction of the list's bytes, the same conversation the list gives.
    func testALookupReadsItsOwnRoomNotTheWholeList() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        var rooms: [String] = []
        for i in 0..<6 {
            let (bob, room) = try await group(for: session)
            for j in 0..<4 { _ = try await bob.sendText("room \(i) message \(j)", room: room) }
            rooms.append(room)
        }
        let backend = MatrixBackend(homeserver: try TestHomeserver.url(), session: session)
        let beforeList = backend.statistics
        let list = try await backend.conversations(ConversationQuery()).items
        let listBytes = backend.statistics.bytes - beforeList.bytes
        let listed = try XCTUnwrap(list.first { $0["conversationId"]?.stringValue == "group_\(rooms[2])" })

        let before = backend.statistics
        let found = try await backend.conversation(with: rooms[2], type: .group)
        let after = backend.statistics
        XCTAssertEqual(found["lastMessage"]?["data"]?["text"]?.stringValue, "room 2 message 3")
        XCTAssertEqual(found["lastMessage"]?["id"], listed["lastMessage"]?["id"], "the list's own answer for that room")
        XCTAssertEqual(found["unreadMessageCount"], listed["unreadMessageCount"])
        XCTAssertEqual(after.requests - before.requests, 1, "the room's own /sync, nothing else")
        XCTAssertLessThan(after.bytes - before.bytes, listBytes / 3, "one room of six read (\(after.bytes - before.bytes) against \(listBytes) bytes)")
    }

    /// While the realtime connection is up, the list it keeps is the answer: built once, then read
    /// again with no request while nothing changed, one request for the rooms a change touched,
    /// rooms left dropped; the same renderings as a backend without a connection gives; and
    /// requests again once the connection is down.
    func testTheConnectionKeepsTheListAndAListReadAgainWithNothingNewMakesNoRequest() async throws {
        try await checkTheKeptList(slidingSync: true)
    }

    /// The same where the homeserver has no sliding sync (the feature hidden from the backend):
    /// the list is built from one `/sync`, then kept the same way.
    func testTheKeptListWithoutSlidingSyncIsBuiltFromSyncAndKeptTheSameWay() async throws {
        try await checkTheKeptList(slidingSync: false)
    }

    func checkTheKeptList(slidingSync: Bool) async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        var rooms: [(bob: RawMatrixClient, room: String)] = []
        for i in 0..<5 {
            let (bob, room) = try await group(for: session)
            try await bob.sendText("room \(i)", room: room)
            rooms.append((bob, room))
        }
        let identities = MemoryMessageIdentities()
        let backend = MatrixBackend(homeserver: try TestHomeserver.url(), session: session)
        backend.attach(identities: identities)
        backend.hidesSlidingSync = !slidingSync
        _ = try await backend.login(userId: session.userId)
        try await backend.connect()
        var query = ConversationQuery()
        query.limit = 3
        func ids(_ items: [JSONValue]) -> [String] { items.compactMap { $0["conversationId"]?.stringValue } }
        func all() async throws -> (items: [JSONValue], requests: Int) {
            let before = backend.statistics.requests
            var items: [JSONValue] = []
            var q = query
            for _ in 0..<10 {
                let page = try await backend.conversations(q)
                items += page.items
                guard let next = page.nextCursor else { break }
                q.cursor = next
            }
            return (items, backend.statistics.requests - before)
        }
        let cold = try await all()
        XCTAssertEqual(ids(cold.items), rooms.reversed().map { "group_\($0.room)" }, "most recent first, in pages of 3")
        // Sliding sync: a window (and its rooms' /sync) per 100 rooms; without: one /sync.
        XCTAssertEqual(cold.requests, slidingSync ? 3 : 1, "built once for the whole list (with /versions asked once)")
        let warm = try await all()
        XCTAssertEqual(warm.items, cold.items)
        XCTAssertEqual(warm.requests, 0, "nothing new: no request")

        // A message in the oldest room: it moves to the top, for one request (its room alone).
        try await rooms[0].bob.sendText("news", room: rooms[0].room)
        var moved = warm
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            moved = try await all()
            if ids(moved.items).first == "group_\(rooms[0].room)" { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTAssertEqual(ids(moved.items).first, "group_\(rooms[0].room)")
        XCTAssertEqual(moved.items.first?["lastMessage"]?["data"]?["text"]?.stringValue, "news")
        XCTAssertLessThanOrEqual(moved.requests, 1, "only the room that changed")
        let again = try await all()
        XCTAssertEqual(again.requests, 0)

        // The same renderings as a list read without a connection (same id map).
        let bare = MatrixBackend(homeserver: try TestHomeserver.url(), session: session)
        bare.attach(identities: identities)
        _ = try await bare.login(userId: session.userId)
        var fresh: [JSONValue] = []
        var q = ConversationQuery()
        q.limit = 3
        for _ in 0..<10 {
            let page = try await bare.conversations(q)
            fresh += page.items
            guard let next = page.nextCursor else { break }
            q.cursor = next
        }
        XCTAssertEqual(fresh, moved.items)

        // A room left goes from the kept list.
        _ = try await RawMatrixClient(session: session).call("POST", "_matrix/client/v3/rooms/\(rooms[2].room)/leave", .object([:]))
        var after = moved
        while Date() < deadline.addingTimeInterval(10) {
            after = try await all()
            if !ids(after.items).contains("group_\(rooms[2].room)") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTAssertFalse(ids(after.items).contains("group_\(rooms[2].room)"))
        XCTAssertEqual(after.items.count, 4)

        await backend.disconnect()
        let disconnected = try await all()
        XCTAssertGreaterThan(disconnected.requests, 0, "no connection: the server is asked")
    }

    func testALookupFindsAConversationWhoseLatestEventsHoldNoMessage() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await group(for: session)
        let only = try await bob.sendText("the only message", room: room)
        // More than the list's 20 latest events, none of them a message.
        for i in 0..<24 { _ = try await react(bob, room, only, "r\(i)") }
        let backend = MatrixBackend(homeserver: try TestHomeserver.url(), session: session)
        let found = try await backend.conversation(with: room, type: .group)
        XCTAssertEqual(found["conversationId"]?.stringValue, "group_\(room)")
        XCTAssertEqual(found["lastMessage"]?["data"]?["text"]?.stringValue, "the only message",
                       "a 404 here would make the engine forget the cached conversation")
        do {
            _ = try await backend.conversation(with: "@nobody:localhost", type: .user)
            XCTFail("a user with no direct room has no conversation")
        } catch {
            guard case .server(404, _, _) = error else { return XCTFail("\(error)") }
        }
    }

    /// Receipts sent while the user was away reach the cache with the catch-up, in a room the
    /// catch-up `/sync` delivers and in one it leaves to be read back (more than its timeline
    /// holds): bob's read marks alice's message read; alice's own read on another device marks
    /// what she received up to it read, and nothing after it.
    func testReceiptsSentWhileAwayReachTheCacheWithTheCatchUp() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let aliceRaw = RawMatrixClient(session: session)
        let (bob, team) = try await group(for: session)
        let d = try await device(session)
        let bobId = bob.session.userId
        let mine = try await d.sendText(TextMessage(receiverUid: bobId, text: "read me", receiverType: .user))
        let invite = try await bob.call("GET", "_matrix/client/v3/sync", query: [("timeout", "0")])
        let dm = try XCTUnwrap(invite["rooms"]?["invite"]?.objectValue?.keys.first)
        try await bob.join(dm)
        await d.vault.logout()

        // Away: bob reads alice's message and writes two; alice, on another device, reads the
        // first. In the group bob writes 120 (more than a catch-up /sync timeline holds) and alice
        // reads up to the 110th.
        let history = try await bob.call("GET", "_matrix/client/v3/rooms/\(dm)/messages", query: [("dir", "b"), ("limit", "10")])
        let readMe = try XCTUnwrap((history["chunk"]?.arrayValue ?? []).first { $0["content"]?["body"]?.stringValue == "read me" }?["event_id"]?.stringValue)
        _ = try await bob.call("POST", "_matrix/client/v3/rooms/\(dm)/receipt/m.read/\(readMe)", .object([:]))
        let first = try await bob.sendText("first", room: dm)
        try await bob.sendText("second", room: dm)
        _ = try await aliceRaw.call("POST", "_matrix/client/v3/rooms/\(dm)/receipt/m.read/\(first)", .object([:]))
        var events: [String] = []
        for i in 1...120 { events.append(try await bob.sendText("g\(i)", room: team)) }
        _ = try await aliceRaw.call("POST", "_matrix/client/v3/rooms/\(team)/receipt/m.read/\(events[109])", .object([:]))

        try await d.restart(homeserver: try TestHomeserver.url())
        let direct = [session.userId, bobId].sorted().joined(separator: "_user_")
        try await d.wait("the catch-up", seconds: 60) {
            if try d.rows(direct) < 3 || d.rows("group_\(team)") < 120 { _ = try? await d.vault.syncNow() }
            return try d.rows(direct) == 3 && d.rows("group_\(team)") == 120
        }
        await d.vault.waitForSyncIdle()
        let dmRows = await d.cached(.user(bobId))
        XCTAssertEqual(dmRows.first { $0.id == mine.id }?.messageStatus, .read, "bob's receipt")
        XCTAssertGreaterThan((dmRows.first { ($0 as? TextMessage)?.text == "first" })?.readByMeAt ?? 0, 0, "alice's own receipt")
        XCTAssertEqual((dmRows.first { ($0 as? TextMessage)?.text == "second" })?.readByMeAt ?? 0, 0, "sent after what she read")
        let groupRows = await d.cached(.group(team), limit: 100)
        let read = Set(groupRows.filter { $0.readByMeAt > 0 }.compactMap { ($0 as? TextMessage)?.text })
        XCTAssertEqual(read, Set((21...110).map { "g\($0)" }), "read up to the 110th, in a room read back after the /sync")
    }

    func testAReadReceiptHeardInRealtimeSurvivesAnOnlineReadThatRendersNone() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bobSession, _) = try await TestHomeserver.session("bob")
        let bob = RawMatrixClient(session: bobSession)
        let d = try await device(session)
        let mine = try await d.sendText(TextMessage(receiverUid: bobSession.userId, text: "read me", receiverType: .user))
        let sync = try await bob.call("GET", "_matrix/client/v3/sync", query: [("timeout", "0")])
        let dm = try XCTUnwrap(sync["rooms"]?["invite"]?.objectValue?.keys.first)
        try await bob.join(dm)
        let history = try await bob.call("GET", "_matrix/client/v3/rooms/\(dm)/messages", query: [("dir", "b"), ("limit", "10")])
        let event = try XCTUnwrap((history["chunk"]?.arrayValue ?? []).first { $0["content"]?["body"]?.stringValue == "read me" }?["event_id"]?.stringValue)
        try await Task.sleep(for: .milliseconds(500)) // the long-poll is waiting on the server
        _ = try await bob.call("POST", "_matrix/client/v3/rooms/\(dm)/receipt/m.read/\(event)", .object([:]))
        try await d.wait("the receipt in the cache") {
            await d.cached(.user(bobSession.userId)).first { $0.id == mine.id }?.messageStatus == .read
        }

        // Synapse's pages carry no receipts: the server phase delivers and writes the message read still.
        let online = await d.request(.user(bobSession.userId)).fetchPrevious()
        let delivered = try XCTUnwrap(try online.server.get().first { $0.id == mine.id })
        XCTAssertEqual(delivered.messageStatus, .read)
        XCTAssertGreaterThan(delivered.readAt, 0)
        let after = await d.cached(.user(bobSession.userId)).first { $0.id == mine.id }
        XCTAssertEqual(after?.messageStatus, .read, "read after the server phase wrote over the row")
    }
}
