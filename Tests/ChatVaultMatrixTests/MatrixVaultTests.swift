import ChatVault
import ChatVaultMatrix
import ChatVaultTesting
import Foundation
import Synchronization
import VaultKeys
import VaultStore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The offline engine over the Matrix backend and a real Synapse: the catch-up sync into the
/// encrypted cache (`source == .sync`), sends through the outbox into direct-message rooms, the
/// realtime path to the message listeners, two-phase pages, and message ids that survive a
/// restart (kept in the cache's `message_refs`).
final class MatrixVaultTests: XCTestCase {
    /// One user's engine over Matrix on an encrypted cache; `restart()` is an app relaunch (a new
    /// backend and engine on the same cache, key and device).
    final class Harness: @unchecked Sendable {
        let root = TemporaryDirectory()
        let runtime = TemporaryDirectory()
        let keyStore = MemoryKeyStore()
        let callbacks = DispatchQueue(label: "tests.matrix.callbacks")
        let session: MatrixSession
        let homeserver: URL
        private(set) var backend: MatrixBackend
        private(set) var vault: OfflineVault

        init(session: MatrixSession, homeserver: URL? = nil) throws {
            self.session = session
            self.homeserver = try homeserver ?? TestHomeserver.url()
            backend = MatrixBackend(homeserver: self.homeserver, session: session)
            vault = try Self.makeVault(backend, root: root.path, runtime: runtime.path, keyStore: keyStore, callbacks: callbacks)
        }

        static func makeVault(_ backend: any ChatBackend, root: String, runtime: String, keyStore: MemoryKeyStore,
                              callbacks: DispatchQueue) throws -> OfflineVault {
            let config = OfflineConfig.Builder().setEnabled(true).setEncryption(true).build()
            var settings = VaultSettings(applicationId: "org.chatvault.matrixtests", rootDirectory: root,
                                         keyStorage: [.custom(keyStore)], callbackExecutor: .queue(callbacks), retry: .manualOnly)
            settings.stableConnectionDelay = .milliseconds(20)
            settings.reconnect = RetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200))
            settings.evictionDelay = .seconds(3600)
            settings.sync.forceCooldown = .zero
            settings.media.runtimeDirectory = runtime
            return try OfflineVault(config: config, settings: settings, backend: backend)
        }

        func login(file: StaticString = #filePath, line: UInt = #line) async {
            let attempt = await vault.login(userId: session.userId)
            XCTAssertEqual(attempt.state, .ready, file: file, line: line)
        }

        func restart() async throws {
            await vault.logout()
            backend = MatrixBackend(homeserver: homeserver, session: session)
            vault = try Self.makeVault(backend, root: root.path, runtime: runtime.path, keyStore: keyStore, callbacks: callbacks)
            await login()
        }

        /// Waits until `condition` holds (polling), failing the test after `seconds`.
        func wait(_ what: String, seconds: Double = 20, file: StaticString = #filePath, line: UInt = #line,
                  _ condition: () async throws -> Bool) async throws {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if try await condition() { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            XCTFail("timed out waiting for \(what)", file: file, line: line)
            throw CancellationError()
        }

        /// Cached messages of a group room, oldest first: (id, text, source).
        func cached(group room: String) async throws -> [(id: Int, text: String, source: MessageSource)] {
            let request = MessagesRequest.MessageRequestBuilder(vault: vault).set(guid: room).set(limit: 50).build()
            let result = await request.fetchPrevious()
            return (result.cached ?? []).compactMap { m in
                guard let t = m as? TextMessage else { return nil }
                return (t.id, t.text, t.source)
            }
        }
    }

    /// Alice's engine logged in over Matrix (logged out at teardown), its first sweep done: the
    /// sync point is at the server's present.
    func loggedIn(_ session: MatrixSession, homeserver: URL? = nil) async throws -> Harness {
        let h = try Harness(session: session, homeserver: homeserver)
        addTeardownBlock { await h.vault.logout() }
        await h.login()
        try await h.wait("the first sweep") { h.vault.getLastSyncTimestamp() > 0 }
        await h.vault.waitForSyncIdle()
        return h
    }

    func groupRoom(for alice: MatrixSession) async throws -> (bob: RawMatrixClient, room: String) {
        let (bobSession, _) = try await TestHomeserver.session("bob")
        let bob = RawMatrixClient(session: bobSession)
        let room = try await bob.createRoom(name: "Team", invite: [alice.userId])
        try await RawMatrixClient(session: alice).join(room)
        return (bob, room)
    }

    func testMessagesSentWhileAwayAreCaughtUpIntoTheCacheAndKeepTheirIdsAcrossARestart() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await groupRoom(for: session)
        let h = try await loggedIn(session)
        await h.vault.logout()

        try await bob.sendText("while away 1", room: room)
        try await bob.sendText("while away 2", room: room)

        try await h.restart()
        let report = try await h.vault.syncNow()
        XCTAssertEqual(report.outcome, .caughtUp)
        XCTAssertEqual(report.newMessageCount, 2)
        await h.vault.waitForSyncIdle()
        let cached = try await h.cached(group: room)
        XCTAssertEqual(cached.map(\.text), ["while away 1", "while away 2"])
        XCTAssertTrue(cached.allSatisfy { $0.source == .sync }, "caught up by the sync: \(cached.map(\.source))")

        // After a restart the same events keep the same ids, and an id still finds its event.
        let ids = cached.map(\.id)
        guard ids.count == 2 else { return XCTFail("two messages expected") }
        try await h.restart()
        let again = try await h.cached(group: room)
        XCTAssertEqual(again.map(\.id), ids)
        let fetched = try await h.backend.message(id: ids[0])
        XCTAssertEqual(fetched["data"]?["text"]?.stringValue, "while away 1")
        let refs = try XCTUnwrap(h.vault.openCache).reader.sync { db in try db.scalarInt("SELECT count(*) FROM message_refs") }
        XCTAssertEqual(refs, 2, "each event's id is recorded in the encrypted cache")
    }

    func testASendFromTheEngineReachesTheOtherUserOnceInANewDirectRoom() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bobSession, _) = try await TestHomeserver.session("bob")
        let h = try Harness(session: session)
        addTeardownBlock { await h.vault.logout() }
        await h.login()
        let sent = Mutex<TextMessage?>(nil)
        let failed = Mutex<CometChatException?>(nil)
        h.vault.sendTextMessage(message: TextMessage(receiverUid: bobSession.userId, text: "hi bob", receiverType: .user),
                                onMessagePending: { _ in }, onMessageSent: { m in sent.withLock { $0 = m } },
                                onError: { e in failed.withLock { $0 = e } })
        try await h.wait("the send") { sent.withLock { $0 != nil } || failed.withLock { $0 != nil } }
        XCTAssertNil(failed.withLock { $0 }, "\(String(describing: failed.withLock { $0 }))")
        let message = try XCTUnwrap(sent.withLock { $0 })
        XCTAssertGreaterThan(message.id, 0)
        XCTAssertEqual(message.conversationId, [session.userId, bobSession.userId].sorted().joined(separator: "_user_"))

        // Bob is invited to a direct room holding the message once.
        let bob = RawMatrixClient(session: bobSession)
        let sync = try await bob.call("GET", "_matrix/client/v3/sync", query: [("timeout", "0")])
        let invites = try XCTUnwrap(sync["rooms"]?["invite"]?.objectValue)
        XCTAssertEqual(invites.count, 1)
        let room = try XCTUnwrap(invites.keys.first)
        try await bob.join(room)
        let history = try await bob.call("GET", "_matrix/client/v3/rooms/\(room)/messages", query: [("dir", "b"), ("limit", "50")])
        let texts = (history["chunk"]?.arrayValue ?? []).compactMap { $0["type"]?.stringValue == "m.room.message" ? $0["content"]?["body"]?.stringValue : nil }
        XCTAssertEqual(texts, ["hi bob"])
    }

    func testRealtimeMessagesReachTheListenersAndTheCache() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await groupRoom(for: session)
        let h = try Harness(session: session)
        addTeardownBlock { await h.vault.logout() }
        let heard = Mutex<[BaseMessage]>([])
        let stream = h.vault.messageEvents()
        let listening = Task {
            for await event in stream {
                if case .received(let m) = event { heard.withLock { $0.append(m) } }
            }
        }
        defer { listening.cancel() }
        await h.login()
        try await h.wait("the first sweep") { h.vault.getLastSyncTimestamp() > 0 }
        await h.vault.waitForSyncIdle()
        try await Task.sleep(for: .milliseconds(300)) // the long-poll is waiting on the server
        try await bob.sendText("live one", room: room)
        try await h.wait("the realtime message") { heard.withLock { !$0.isEmpty } }
        let m = try XCTUnwrap(heard.withLock { $0.first } as? TextMessage)
        XCTAssertEqual(m.text, "live one")
        XCTAssertEqual(m.source, .realtime)
        try await h.wait("the cached copy") { try await h.cached(group: room).map(\.text) == ["live one"] }
    }

    func testTheServerStoppedAndRestartedMidSessionLosesNothingAndSendsOnce() async throws {
        let server = try PrivateHomeserver.make()
        addTeardownBlock { server.stop() }
        try await server.start()
        let (session, _) = try await TestHomeserver.session("alice", on: server)
        let (bobSession, _) = try await TestHomeserver.session("bob", on: server)
        let bob = RawMatrixClient(session: bobSession, server: server.url)
        let room = try await bob.createRoom(name: "Team", invite: [session.userId])
        try await RawMatrixClient(session: session, server: server.url).join(room)
        let h = try await loggedIn(session, homeserver: server.url)

        server.stop()
        let pending = Mutex(false)
        let sent = Mutex<TextMessage?>(nil)
        let failed = Mutex<CometChatException?>(nil)
        h.vault.sendTextMessage(message: TextMessage(receiverUid: room, text: "sent while down", receiverType: .group),
                                onMessagePending: { _ in pending.withLock { $0 = true } },
                                onMessageSent: { m in sent.withLock { $0 = m } },
                                onError: { e in failed.withLock { $0 = e } })
        try await h.wait("pending") { pending.withLock { $0 } }
        try await Task.sleep(for: .seconds(1))
        XCTAssertNil(sent.withLock { $0 }, "nothing can be sent while the server is down")
        let queued = try await h.vault.pendingMessages()
        XCTAssertEqual(queued.count, 1, "the message waits in the outbox")
        let cachedWhileDown = try await h.cached(group: room)
        XCTAssertEqual(cachedWhileDown.count, 0, "only sent messages are in the conversation's cache")

        try await server.start()
        try await h.wait("the send after the restart", seconds: 60) { sent.withLock { $0 != nil } }
        XCTAssertGreaterThan(try XCTUnwrap(sent.withLock { $0 }).id, 0)
        let afterSend = try await h.vault.pendingMessages()
        XCTAssertTrue(afterSend.isEmpty)
        let history = try await bob.call("GET", "_matrix/client/v3/rooms/\(room)/messages", query: [("dir", "b"), ("limit", "50")])
        let texts = (history["chunk"]?.arrayValue ?? []).compactMap { $0["type"]?.stringValue == "m.room.message" ? $0["content"]?["body"]?.stringValue : nil }
        XCTAssertEqual(texts, ["sent while down"], "sent exactly once")

        // The connection came back too: what bob sends now reaches the cache.
        try await bob.sendText("after the restart", room: room)
        try await h.wait("bob's message after the restart", seconds: 30) {
            try await h.cached(group: room).map(\.text).contains("after the restart")
        }
        XCTAssertEqual(failed.withLock { $0 }?.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE,
                       "the only error is the seeds' \"queued, sent on reconnect\"")
    }

    func testMediaGoesUpAndComesBackThroughTheEncryptedMediaCache() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await groupRoom(for: session)
        let h = try await loggedIn(session)

        // Alice sends a photo through the outbox: uploaded, then an m.image event bob can fetch.
        let marker = "MATRIX-MEDIA-MARKER-" + UUID().uuidString
        let bytes = Data((marker + String(repeating: "x", count: 100_000)).utf8)
        let photo = URL(fileURLWithPath: h.root.path + "/photo.png")
        try bytes.write(to: photo)
        let sent = Mutex<MediaMessage?>(nil)
        let failed = Mutex<CometChatException?>(nil)
        h.vault.sendMediaMessage(message: MediaMessage(receiverUid: room, files: [photo], messageType: .image, receiverType: .group),
                                 onMessagePending: { _ in }, onMessageSent: { m in sent.withLock { $0 = m } },
                                 onError: { e in failed.withLock { $0 = e } })
        try await h.wait("the media send", seconds: 30) { sent.withLock { $0 != nil } || failed.withLock { $0 != nil } }
        XCTAssertNil(failed.withLock { $0 })
        let history = try await bob.call("GET", "_matrix/client/v3/rooms/\(room)/messages", query: [("dir", "b"), ("limit", "10")])
        let image = try XCTUnwrap((history["chunk"]?.arrayValue ?? []).first { $0["content"]?["msgtype"]?.stringValue == "m.image" })
        let mxc = try XCTUnwrap(image["content"]?["url"]?.stringValue)
        XCTAssertTrue(mxc.hasPrefix("mxc://"))
        let path = String(mxc.dropFirst("mxc://".count))
        var request = URLRequest(url: try TestHomeserver.url().appendingPathComponent("_matrix/client/v1/media/download/" + path))
        request.setValue("Bearer \(bob.session.accessToken)", forHTTPHeaderField: "Authorization")
        let (downloaded, _) = try await URLSession.shared.data(for: request)
        XCTAssertEqual(downloaded, bytes, "bob downloads what alice sent")

        // Bob's own image reaches alice's cache, and its bytes her media cache, encrypted at rest.
        let theirs = Data(("BOB-IMAGE-" + marker).utf8) + Data(repeating: 7, count: 50_000)
        var upload = URLRequest(url: try TestHomeserver.url().appendingPathComponent("_matrix/media/v3/upload"))
        upload.httpMethod = "POST"
        upload.setValue("Bearer \(bob.session.accessToken)", forHTTPHeaderField: "Authorization")
        upload.setValue("image/png", forHTTPHeaderField: "Content-Type")
        upload.httpBody = theirs
        let (uploaded, _) = try await URLSession.shared.data(for: upload)
        let theirURL = try XCTUnwrap(try JSONValue(jsonData: uploaded)["content_uri"]?.stringValue)
        _ = try await bob.call("PUT", "_matrix/client/v3/rooms/\(room)/send/m.room.message/\(UUID().uuidString)", [
            "msgtype": "m.image", "body": "bob.png", "url": .string(theirURL), "info": ["mimetype": "image/png", "size": .int(Int64(theirs.count))],
        ])
        let report = try await h.vault.syncNow()
        let received = try XCTUnwrap(report.messages.compactMap { $0 as? MediaMessage }.first { $0.attachment?.fileUrl == theirURL })
        let local = try await h.vault.downloadMedia(url: theirURL, messageServerId: received.id)
        XCTAssertFalse(local.isEmpty)
        let cachedBytes = try await h.vault.cachedMediaData(url: theirURL)
        XCTAssertEqual(cachedBytes, theirs)
        let mediaDirectory = try XCTUnwrap(h.vault.openCache).directory.media
        for file in try FileManager.default.contentsOfDirectory(atPath: mediaDirectory) {
            let stored = try Data(contentsOf: URL(fileURLWithPath: mediaDirectory + "/" + file))
            XCTAssertNil(stored.range(of: Data("BOB-IMAGE-".utf8)), "media at rest is encrypted")
        }
    }

    func testEditsDeletesReactionsAndBlocksGoBothWaysThroughTheEngine() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await groupRoom(for: session)
        let h = try await loggedIn(session)

        // Alice's own message: edited, reacted to, deleted through the engine; bob sees each.
        let sent = Mutex<TextMessage?>(nil)
        h.vault.sendTextMessage(message: TextMessage(receiverUid: room, text: "first draft", receiverType: .group),
                                onMessagePending: { _ in }, onMessageSent: { m in sent.withLock { $0 = m } }, onError: { _ in })
        try await h.wait("the send") { sent.withLock { $0 != nil } }
        let mine = try XCTUnwrap(sent.withLock { $0 })
        let edit = TextMessage(receiverUid: room, text: "final", receiverType: .group)
        edit.id = mine.id
        let edited = try await h.vault.editMessage(edit)
        XCTAssertEqual((edited as? TextMessage)?.text, "final")
        XCTAssertGreaterThan(edited.editedAt, 0)
        let reacted = try await h.vault.addReaction(messageId: mine.id, reaction: "👍")
        XCTAssertEqual(reacted.getReactions().map(\.reaction), ["👍"])
        let history = try await bob.call("GET", "_matrix/client/v3/rooms/\(room)/messages", query: [("dir", "b"), ("limit", "50")])
        let events = history["chunk"]?.arrayValue ?? []
        XCTAssertTrue(events.contains { $0["content"]?["m.new_content"]?["body"]?.stringValue == "final" }, "bob sees the edit")
        XCTAssertTrue(events.contains { $0["type"]?.stringValue == "m.reaction" }, "bob sees the reaction")
        let deleted = try await h.vault.deleteMessage(mine.id)
        XCTAssertGreaterThan(deleted.deletedAt, 0)

        // Bob's message, edited and redacted by bob: the catch-up brings both into alice's cache.
        let bobs = try await bob.sendText("bob's draft", room: room)
        _ = try await h.vault.syncNow()
        _ = try await bob.call("PUT", "_matrix/client/v3/rooms/\(room)/send/m.room.message/\(UUID().uuidString)", [
            "msgtype": "m.text", "body": "* bob's final",
            "m.new_content": ["msgtype": "m.text", "body": "bob's final"],
            "m.relates_to": ["rel_type": "m.replace", "event_id": .string(bobs)],
        ])
        _ = try await h.vault.syncNow()
        try await h.wait("bob's edit in the cache") { try await h.cached(group: room).map(\.text).contains("bob's final") }
        _ = try await bob.call("PUT", "_matrix/client/v3/rooms/\(room)/redact/\(bobs)/\(UUID().uuidString)", .object([:]))
        _ = try await h.vault.syncNow()
        let request = MessagesRequest.MessageRequestBuilder(vault: h.vault).set(guid: room).set(limit: 50).build()
        let page = await request.fetchPrevious()
        let cachedBobs = try XCTUnwrap((page.cached ?? []).first { $0.senderUid == bob.session.userId })
        XCTAssertGreaterThan(cachedBobs.deletedAt, 0, "bob's redaction reached the cache")

        // Blocking through the engine is the ignored-user list.
        let outcome = try await h.vault.blockUsers([bob.session.userId])
        XCTAssertEqual(outcome[bob.session.userId], "success")
        let ignored = try await RawMatrixClient(session: session).call("GET", "_matrix/client/v3/user/\(session.userId)/account_data/m.ignored_user_list")
        XCTAssertNotNil(ignored["ignored_users"]?[bob.session.userId])
    }

    func testTheConversationListIsTwoPhaseAndNamesRoomsAndDirectChats() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await groupRoom(for: session)
        try await bob.sendText("in the group", room: room)
        try await Task.sleep(for: .milliseconds(1100)) // the lists order by whole seconds first
        let h = try await loggedIn(session)
        let sent = Mutex<TextMessage?>(nil)
        h.vault.sendTextMessage(message: TextMessage(receiverUid: bob.session.userId, text: "direct", receiverType: .user),
                                onMessagePending: { _ in }, onMessageSent: { m in sent.withLock { $0 = m } }, onError: { _ in })
        try await h.wait("the direct send") { sent.withLock { $0 != nil } }
        let first = await ConversationRequest.ConversationRequestBuilder(limit: 30, vault: h.vault).build().fetchNext()
        let online = try first.server.get()
        let ids = Set(online.compactMap(\.conversationId))
        XCTAssertEqual(ids, ["group_\(room)", [session.userId, bob.session.userId].sorted().joined(separator: "_user_")])
        XCTAssertEqual(online.first?.conversationId, [session.userId, bob.session.userId].sorted().joined(separator: "_user_"),
                       "the newest conversation first")
        let second = await ConversationRequest.ConversationRequestBuilder(limit: 30, vault: h.vault).build().fetchNext()
        XCTAssertEqual(Set((second.cached ?? []).compactMap(\.conversationId)), ids, "the list is cached for the next read")
    }

    func testPagesAreTwoPhaseOnlineAndCachedOnlyOffline() async throws {
        let (session, _) = try await TestHomeserver.session("alice")
        let (bob, room) = try await groupRoom(for: session)
        for i in 1...3 { try await bob.sendText("page \(i)", room: room) }
        let h = try Harness(session: session)
        addTeardownBlock { await h.vault.logout() }
        await h.login()
        let first = await MessagesRequest.MessageRequestBuilder(vault: h.vault).set(guid: room).set(limit: 10).build().fetchPrevious()
        XCTAssertEqual(first.cached?.count, 0, "nothing cached yet")
        let online = try first.server.get().compactMap { ($0 as? TextMessage)?.text }
        XCTAssertEqual(online, ["page 1", "page 2", "page 3"])

        // The same cache with the server unreachable: the cached phase answers, the server phase says offline.
        await h.vault.logout()
        let deadServer = try XCTUnwrap(URL(string: "http://127.0.0.1:9"))
        let offline = try Harness.makeVault(MatrixBackend(homeserver: deadServer, session: session), root: h.root.path, runtime: h.runtime.path,
                                            keyStore: h.keyStore, callbacks: h.callbacks)
        _ = await offline.login(userId: session.userId)
        addTeardownBlock { await offline.logout() }
        let second = await MessagesRequest.MessageRequestBuilder(vault: offline).set(guid: room).set(limit: 10).build().fetchPrevious()
        XCTAssertEqual(second.cached?.compactMap { ($0 as? TextMessage)?.text }, ["page 1", "page 2", "page 3"])
        guard case .failure(let error) = second.server else { return XCTFail("offline, the server phase fails") }
        XCTAssertEqual(error.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
    }
}
