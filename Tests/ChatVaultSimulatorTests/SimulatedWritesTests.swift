@testable import ChatVault
import ChatVaultSimulator
import Foundation
import XCTest

/// A device's writes on messages (`editMessage`, `deleteMessage`, `addReaction`,
/// `removeReaction`) and its uploads (`uploadMedia`): the server's rules, what the other users and
/// devices see (reads, change log, realtime), and the pipeline (network, faults, counters).
final class SimulatedWritesTests: SimulatorTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("simulated-writes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
        super.tearDown()
    }

    // MARK: Helpers

    func decoded(_ json: JSONValue) throws -> BaseMessage { try decoder.message(json) }

    func text(_ json: JSONValue) throws -> TextMessage { try XCTUnwrap(try decoder.message(json) as? TextMessage) }

    /// Writes `bytes` to a file of the test's directory; returns its path.
    func file(_ name: String, _ bytes: Data) throws -> String {
        let url = directory.appendingPathComponent(name)
        try bytes.write(to: url)
        return url.path
    }

    /// The next `count` events of a client's stream (fails after a second).
    func next(_ count: Int, of client: SimulatedClient) async throws -> [RealtimeEvent] {
        let stream = client.events
        return try await withThrowingTaskGroup(of: [RealtimeEvent]?.self) { group in
            group.addTask {
                var events: [RealtimeEvent] = []
                for await event in stream {
                    events.append(event)
                    if events.count == count { break }
                }
                return events
            }
            group.addTask {
                try await Task.sleep(for: .seconds(1))
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            return try XCTUnwrap(first, "expected \(count) events")
        }
    }

    func kinds(_ events: [RealtimeEvent]) -> [String] {
        events.map { event in
            switch event {
            case .connected: return "connected"
            case .disconnected: return "disconnected"
            case .messageReceived(let json): return "received \(json["id"]?.intValue ?? -1)"
            case .messageEdited(let json): return "edited \(json["id"]?.intValue ?? -1)"
            case .messageDeleted(let json): return "deleted \(json["id"]?.intValue ?? -1)"
            case .reactionAdded(let json): return "reacted \(json["reaction"]?["messageId"]?.intValue ?? -1)"
            case .reactionRemoved(let json): return "unreacted \(json["reaction"]?["messageId"]?.intValue ?? -1)"
            case .messagesDelivered(let json): return "delivered \(json["messageId"]?.intValue ?? -1)"
            case .messagesRead(let json): return "read \(json["messageId"]?.intValue ?? -1)"
            }
        }
    }

    func reactions(_ json: JSONValue) throws -> [ReactionCount] { try decoded(json).reactions }

    // MARK: Edit

    func testTheSenderEditsAndTheOtherUserSeesTheEditInReadsAndTheChangeLog() async throws {
        let id = try simulator.postText("hello", from: "alice", to: .user("bob"))
        let posted = Int64(clock.seconds)
        clock.advance(by: 5)
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")

        let answer = try text(try await alice.editMessage(id: id, changes: ["data": ["text": "hello, fixed"], "tags": ["fixed"]]))
        XCTAssertEqual(answer.id, id)
        XCTAssertEqual(answer.text, "hello, fixed")
        XCTAssertEqual(answer.editedAt, clock.now)
        XCTAssertEqual(answer.editedBy, "alice")
        XCTAssertEqual(answer.updatedAt, clock.now)
        XCTAssertEqual(answer.tags, ["fixed"])
        XCTAssertEqual(answer.status, "edited")

        let bobsView = try text(try await bob.message(id: id))
        XCTAssertEqual(bobsView.text, "hello, fixed")
        XCTAssertEqual(bobsView.editedBy, "alice")
        XCTAssertEqual(bobsView.editedAt, clock.now)

        let page = try await bob.changes(since: simulator.changeToken(at: posted), limit: 10)
        XCTAssertEqual(page.changes.count, 1, "the edit, and only it, after the post")
        guard case .messageUpserted(let json)? = page.changes.first else { return XCTFail("expected an upsert, got \(page.changes)") }
        XCTAssertEqual(try text(json).text, "hello, fixed")
        XCTAssertEqual(try text(json).editedAt, clock.now)
    }

    func testOnlyTheSenderMayEditAndOnlyAMessageTheyCanSee() async throws {
        let id = try simulator.postText("hello", from: "alice", to: .user("bob"))
        let before = simulator.messageJSON(id, as: "alice")
        let logCount = simulator.changeLogCount
        let bob = simulator.client(for: "bob"), carol = simulator.client(for: "carol"), alice = simulator.client(for: "alice")

        let notTheSender = await backendError(try await bob.editMessage(id: id, changes: ["data": ["text": "mine now"]]))
        XCTAssertEqual(statusAndCode(notTheSender), "403 ERR_NOT_THE_SENDER")
        XCTAssertEqual(notTheSender?.isTransient, false)
        await assertEqual(statusAndCode(await backendError(try await carol.editMessage(id: id, changes: ["data": ["text": "x"]]))),
                          "404 ERR_NOT_FOUND", "carol is not in the conversation")
        await assertEqual(statusAndCode(await backendError(try await alice.editMessage(id: 999, changes: ["data": ["text": "x"]]))),
                          "404 ERR_NOT_FOUND")
        XCTAssertEqual(simulator.messageJSON(id, as: "alice"), before)
        XCTAssertEqual(simulator.changeLogCount, logCount)
    }

    func testADeletedMessageEmptyTextAndMalformedEditsAreRefused() async throws {
        let deleted = try simulator.postText("gone", from: "alice", to: .user("bob"))
        try simulator.delete(deleted)
        let id = try simulator.postText("hello", from: "alice", to: .user("bob"))
        let before = simulator.messageJSON(id, as: "alice")
        let logCount = simulator.changeLogCount
        let alice = simulator.client(for: "alice")

        await assertEqual(statusAndCode(await backendError(try await alice.editMessage(id: deleted, changes: ["data": ["text": "back"]]))),
                          "400 ERR_MESSAGE_DELETED")
        let refusals: [(JSONValue, String)] = [
            (["data": ["text": ""]], "400 ERR_EMPTY_MESSAGE"),
            (["data": ["text": 42]], "400 ERR_INVALID_MESSAGE"),
            (["data": ["caption": "not media"]], "400 ERR_INVALID_MESSAGE"),
            (["data": ["customData": ["not": "custom"]]], "400 ERR_INVALID_MESSAGE"),
            (["data": "text"], "400 ERR_INVALID_MESSAGE"),
            (["tags": "one"], "400 ERR_INVALID_MESSAGE"),
            (["tags": [1]], "400 ERR_INVALID_MESSAGE"),
            ([:], "400 ERR_INVALID_MESSAGE"),
            ("just a string", "400 ERR_INVALID_MESSAGE"),
        ]
        for (changes, expected) in refusals {
            let error = await backendError(try await alice.editMessage(id: id, changes: changes))
            XCTAssertEqual(statusAndCode(error), expected, "\(changes)")
        }
        XCTAssertEqual(simulator.messageJSON(id, as: "alice"), before, "nothing changed")
        XCTAssertEqual(simulator.changeLogCount, logCount)
    }

    func testCaptionMetadataAndCustomDataEdits() async throws {
        let media = try simulator.postMedia(.image, [SimulatedAttachment(name: "a.png", mimeType: "image/png", url: "https://media.test/a.png")],
                                            caption: "old", from: "alice", to: .group("team"))
        let custom = try simulator.post(.custom(type: "location", data: ["lat": 1], subType: "live"), from: "alice", to: .group("team"),
                                        metadata: ["keep": false])
        let alice = simulator.client(for: "alice")

        let editedJSON = try await alice.editMessage(id: media, changes: ["data": ["caption": "new", "metadata": ["k": "v"]]])
        let edited = try XCTUnwrap(try decoded(editedJSON) as? MediaMessage)
        XCTAssertEqual(edited.caption, "new")
        XCTAssertEqual(edited.metaData, ["k": "v"])
        XCTAssertEqual(edited.attachments.first?.fileUrl, "https://media.test/a.png", "the attachments stay")

        let locationJSON = try await alice.editMessage(id: custom, changes: ["data": ["customData": ["lat": 2]]])
        let location = try XCTUnwrap(try decoded(locationJSON) as? CustomMessage)
        XCTAssertEqual(location.customData, ["lat": 2])
        XCTAssertEqual(location.subType, "live")
        XCTAssertEqual(location.metaData, ["keep": false], "untouched fields stay")
        let cleared = try await alice.editMessage(id: custom, changes: ["data": ["metadata": nil]])
        XCTAssertNil(try decoded(cleared).metaData, "null removes the metadata")
        await assertEqual(try await simulator.client(for: "bob").message(id: media)["data"]?["caption"], "new")
    }

    func testAnEditReachesTheOtherConnectedDevicesButNotTheEditingOne() async throws {
        let id = try simulator.postText("hello", from: "alice", to: .group("team"))
        let phone = simulator.client(for: "alice"), laptop = simulator.client(for: "alice")
        let bob = simulator.client(for: "bob"), dave = simulator.client(for: "dave")
        for client in [phone, laptop, bob, dave] { try await client.connect() }

        _ = try await phone.editMessage(id: id, changes: ["data": ["text": "hello, team"]])
        await phone.disconnect()
        await dave.disconnect()
        await assertEqual(kinds(try await next(2, of: phone)), ["connected", "disconnected"], "the editor does not hear its own edit")
        await assertEqual(kinds(try await next(2, of: dave)), ["connected", "disconnected"], "dave is not in team")
        await assertEqual(kinds(try await next(2, of: laptop)), ["connected", "edited \(id)"])
        let events = try await next(2, of: bob)
        XCTAssertEqual(kinds(events), ["connected", "edited \(id)"])
        guard case .messageEdited(let json) = events[1] else { return XCTFail("expected an edit") }
        XCTAssertEqual(try text(json).text, "hello, team")
        XCTAssertEqual(try text(json).editedBy, "alice")
    }

    // MARK: Delete

    func testDeleteIsIdempotentRecordedAndBroadcast() async throws {
        let id = try simulator.postText("oops", from: "alice", to: .user("bob"))
        let posted = Int64(clock.seconds)
        clock.advance(by: 2)
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        try await alice.connect()
        try await bob.connect()

        let deleted = try decoded(try await alice.deleteMessage(id: id))
        XCTAssertEqual(deleted.deletedAt, clock.now)
        XCTAssertEqual(deleted.deletedBy, "alice")
        XCTAssertEqual(deleted.status, "deleted")
        let logCount = simulator.changeLogCount
        clock.advance(by: 3)
        let again = try decoded(try await alice.deleteMessage(id: id))
        XCTAssertEqual(again.deletedAt, clock.now - 3, "the first deletion stands")
        XCTAssertEqual(simulator.changeLogCount, logCount, "deleting again records nothing")

        await bob.disconnect()
        await alice.disconnect()
        await assertEqual(kinds(try await next(3, of: bob)), ["connected", "deleted \(id)", "disconnected"], "one event, not two")
        await assertEqual(kinds(try await next(2, of: alice)), ["connected", "disconnected"])
        await assertEqual(try decoded(try await bob.message(id: id)).deletedBy, "alice")
        let changes = try await bob.changes(since: simulator.changeToken(at: posted), limit: 10).changes
        XCTAssertEqual(changes.count, 2)
        XCTAssertEqual(changes.last, .messageDeleted(id: id, conversationId: "alice_user_bob"))
    }

    func testGroupAdminsAndModeratorsMayDeleteOthersMessagesNobodyElseMay() async throws {
        let bobs = try simulator.postText("by bob", from: "bob", to: .group("team"))
        let carols = try simulator.postText("by carol", from: "carol", to: .group("team"))
        let direct = try simulator.postText("direct", from: "alice", to: .user("bob"))
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        let carol = simulator.client(for: "carol"), dave = simulator.client(for: "dave")

        await assertEqual(statusAndCode(await backendError(try await bob.deleteMessage(id: carols))), "403 ERR_NOT_THE_SENDER",
                          "a participant")
        await assertEqual(statusAndCode(await backendError(try await bob.deleteMessage(id: direct))), "403 ERR_NOT_THE_SENDER",
                          "the receiver of a direct message")
        await assertEqual(statusAndCode(await backendError(try await dave.deleteMessage(id: bobs))), "404 ERR_NOT_FOUND")
        await assertEqual(statusAndCode(await backendError(try await dave.deleteMessage(id: 999))), "404 ERR_NOT_FOUND")
        XCTAssertNil(simulator.messageJSON(carols, as: "carol")?["deletedAt"])
        XCTAssertNil(simulator.messageJSON(direct, as: "alice")?["deletedAt"])

        await assertEqual(try decoded(try await carol.deleteMessage(id: bobs)).deletedBy, "carol", "a moderator")
        await assertEqual(try decoded(try await alice.deleteMessage(id: carols)).deletedBy, "alice", "the owner, an admin")
    }

    // MARK: Reactions

    func testReactionsAddRemoveAndRepeatsWithCountsPerViewer() async throws {
        let id = try simulator.postText("vote", from: "alice", to: .group("team"))
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob"), carol = simulator.client(for: "carol")
        clock.advance(by: 1)

        await assertEqual(try reactions(try await bob.addReaction(messageId: id, reaction: "👍")),
                          [ReactionCount(reaction: "👍", count: 1, reactedByMe: true)])
        await assertEqual(try reactions(try await carol.addReaction(messageId: id, reaction: "👍")),
                          [ReactionCount(reaction: "👍", count: 2, reactedByMe: true)])
        let logCount = simulator.changeLogCount
        let updatedAt = simulator.messageJSON(id, as: "bob")?["updatedAt"]
        clock.advance(by: 1)
        await assertEqual(try reactions(try await bob.addReaction(messageId: id, reaction: "👍")),
                          [ReactionCount(reaction: "👍", count: 2, reactedByMe: true)], "adding it again changes nothing")
        await assertEqual(try reactions(try await bob.removeReaction(messageId: id, reaction: "🎉")),
                          [ReactionCount(reaction: "👍", count: 2, reactedByMe: true)], "removing one never given changes nothing")
        XCTAssertEqual(simulator.changeLogCount, logCount)
        XCTAssertEqual(simulator.messageJSON(id, as: "bob")?["updatedAt"], updatedAt)
        await assertEqual(try reactions(try await alice.message(id: id)), [ReactionCount(reaction: "👍", count: 2, reactedByMe: false)])

        let removed = try await bob.removeReaction(messageId: id, reaction: "👍")
        XCTAssertEqual(try reactions(removed), [ReactionCount(reaction: "👍", count: 1, reactedByMe: false)])
        XCTAssertEqual(try decoded(removed).updatedAt, clock.now)
        await assertEqual(try reactions(try await carol.message(id: id)), [ReactionCount(reaction: "👍", count: 1, reactedByMe: true)])
        await assertEqual(strings(try await alice.reactions(ReactionQuery(messageId: id)).items, "uid"), ["carol"])
        _ = try await carol.removeReaction(messageId: id, reaction: "👍")
        await assertNil(try await alice.message(id: id)["reactions"], "no reaction left")
    }

    func testReactionsAreOneTo64BytesOnAMessageTheUserCanSee() async throws {
        let id = try simulator.postText("vote", from: "alice", to: .group("team"))
        let bob = simulator.client(for: "bob"), dave = simulator.client(for: "dave")
        let longest = String(repeating: "👍", count: 16)  // 64 bytes of UTF-8
        let tooLong = longest + "!"
        for reaction in ["", tooLong] {
            await assertEqual(statusAndCode(await backendError(try await bob.addReaction(messageId: id, reaction: reaction))),
                              "400 ERR_INVALID_REACTION")
            await assertEqual(statusAndCode(await backendError(try await bob.removeReaction(messageId: id, reaction: reaction))),
                              "400 ERR_INVALID_REACTION")
        }
        XCTAssertNil(simulator.messageJSON(id, as: "bob")?["reactions"])
        await assertEqual(statusAndCode(await backendError(try await dave.addReaction(messageId: id, reaction: "👍"))), "404 ERR_NOT_FOUND")
        await assertEqual(statusAndCode(await backendError(try await bob.addReaction(messageId: 999, reaction: "👍"))), "404 ERR_NOT_FOUND")
        await assertEqual(try reactions(try await bob.addReaction(messageId: id, reaction: longest)),
                          [ReactionCount(reaction: longest, count: 1, reactedByMe: true)])
    }

    func testAReactionReachesTheOthersAsAReactionEventAndTheChangeLog() async throws {
        let id = try simulator.postText("vote", from: "alice", to: .group("team"))
        let posted = Int64(clock.seconds)
        clock.advance(by: 1)
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        try await alice.connect()
        try await bob.connect()

        _ = try await bob.addReaction(messageId: id, reaction: "🎉")
        _ = try await bob.addReaction(messageId: id, reaction: "🎉")
        await bob.disconnect()
        await assertEqual(kinds(try await next(2, of: bob)), ["connected", "disconnected"], "the reacting device hears nothing")
        let events = try await next(2, of: alice)
        XCTAssertEqual(kinds(events), ["connected", "reacted \(id)"])
        guard case .reactionAdded(let event) = events[1], let json = event["message"] else { return XCTFail("expected a reaction with its message") }
        XCTAssertEqual(try reactions(json), [ReactionCount(reaction: "🎉", count: 1, reactedByMe: false)], "rendered for alice")
        XCTAssertEqual(event["reaction"]?["uid"], "bob")
        XCTAssertEqual(event["conversationId"], "group_team")

        let changes = try await alice.changes(since: simulator.changeToken(at: posted), limit: 10).changes
        XCTAssertEqual(changes.count, 1, "the repeat recorded nothing")
        guard case .messageUpserted(let upserted)? = changes.first else { return XCTFail("expected an upsert") }
        XCTAssertEqual(try reactions(upserted), [ReactionCount(reaction: "🎉", count: 1, reactedByMe: false)])
    }

    // MARK: Uploads

    func testAnUploadDownloadsAsTheSameBytes() async throws {
        let bytes = Data([0xFF, 0xD8, 0xFF, 0xE0, 0, 1, 2, 3, 255])
        let path = try file("local-name.bin", bytes)
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")

        let answer = try await alice.uploadMedia(path: path, name: "cat photo.jpg", mimeType: "image/jpeg")
        XCTAssertEqual(Set(answer.objectValue?.keys.map { $0 } ?? []), ["name", "extension", "mimeType", "url", "size"])
        let attachment = try decoder.attachment(answer, path: "upload")
        XCTAssertEqual(attachment.fileName, "cat photo.jpg")
        XCTAssertEqual(attachment.fileExtension, "jpg")
        XCTAssertEqual(attachment.fileMimeType, "image/jpeg")
        XCTAssertEqual(attachment.fileSize, Double(bytes.count))
        let download = try await bob.downloadMedia(url: attachment.fileUrl)
        XCTAssertEqual(download.mimeType, "image/jpeg")
        XCTAssertEqual(download.contentLength, Int64(bytes.count))
        await assertEqual(try await download.allBytes(), bytes)

        let second = try await alice.uploadMedia(path: path, name: "cat photo.jpg", mimeType: "")
        XCTAssertNotEqual(second["url"], answer["url"], "every upload gets a fresh URL")
        XCTAssertEqual(second["mimeType"], "application/octet-stream")
        XCTAssertEqual(simulator.uploads.map(\.url), [attachment.fileUrl, second["url"]?.stringValue ?? ""])
        XCTAssertEqual(simulator.uploads.first?.uploader, "alice")
        XCTAssertEqual(simulator.uploads.first?.size, bytes.count)
        XCTAssertEqual(alice.callCount(.uploadMedia), 2)
    }

    func testUnreadableEmptyAndTooLargeFilesAreRefused() async throws {
        XCTAssertEqual(simulator.maxUploadBytes, 100 * 1024 * 1024)
        simulator.maxUploadBytes = 4
        let alice = simulator.client(for: "alice")
        let cases: [(String, String)] = [
            (directory.appendingPathComponent("missing").path, "400 ERR_FILE_UNREADABLE"),
            (directory.path, "400 ERR_FILE_UNREADABLE"),
            (try file("empty", Data()), "400 ERR_EMPTY_FILE"),
            (try file("five", Data([1, 2, 3, 4, 5])), "413 ERR_FILE_TOO_LARGE"),
        ]
        for (path, expected) in cases {
            let error = await backendError(try await alice.uploadMedia(path: path, name: "f", mimeType: "text/plain"))
            XCTAssertEqual(statusAndCode(error), expected, path)
            XCTAssertEqual(error?.isTransient, false)
        }
        XCTAssertEqual(simulator.uploads, [], "nothing stored")
        let fits = try await alice.uploadMedia(path: try file("four", Data([1, 2, 3, 4])), name: "four", mimeType: "text/plain")
        XCTAssertEqual(fits["size"], 4)
        XCTAssertNil(fits["extension"], "no dot, no extension")
        XCTAssertEqual(simulator.uploads.count, 1)
    }

    func testAMediaSendWithAnUploadedAttachmentRendersIt() async throws {
        let bytes = Data("PNG bytes".utf8)
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        let attachment = try await alice.uploadMedia(path: try file("a.png", bytes), name: "a.png", mimeType: "image/png")
        let sent = try await alice.send(["receiver": "bob", "type": "image", "data": ["caption": "look", "attachments": [attachment]]],
                                        localMessageId: "with-upload")
        let media = try XCTUnwrap(try decoded(sent) as? MediaMessage)
        let stored = try XCTUnwrap(media.attachments.first)
        XCTAssertEqual(media.attachments.count, 1)
        XCTAssertEqual(stored.fileUrl, attachment["url"]?.stringValue)
        XCTAssertEqual(stored.fileName, "a.png")
        XCTAssertEqual(stored.fileExtension, "png")
        XCTAssertEqual(stored.fileMimeType, "image/png")
        XCTAssertEqual(stored.fileSize, Double(bytes.count))
        let bobsView = try await bob.message(id: media.id)
        XCTAssertEqual(bobsView["data"]?["attachments"], [attachment], "the attachment as the upload answered it")
        await assertEqual(try await bob.downloadMedia(url: stored.fileUrl).allBytes(), bytes)
    }

    // MARK: The pipeline

    func testOfflineWritesAreUnreachableAndChangeNothing() async throws {
        let id = try simulator.postText("hello", from: "alice", to: .group("team"))
        let path = try file("a.txt", Data("x".utf8))
        let before = simulator.messageJSON(id, as: "alice")
        let logCount = simulator.changeLogCount
        let alice = simulator.client(for: "alice")
        alice.network = .offline

        await XCTAssertThrowsBackendError(.unreachable, try await alice.editMessage(id: id, changes: ["data": ["text": "x"]]))
        await XCTAssertThrowsBackendError(.unreachable, try await alice.deleteMessage(id: id))
        await XCTAssertThrowsBackendError(.unreachable, try await alice.addReaction(messageId: id, reaction: "👍"))
        await XCTAssertThrowsBackendError(.unreachable, try await alice.removeReaction(messageId: id, reaction: "👍"))
        await XCTAssertThrowsBackendError(.unreachable, try await alice.uploadMedia(path: path, name: "a.txt", mimeType: "text/plain"))
        XCTAssertEqual(simulator.messageJSON(id, as: "alice"), before)
        XCTAssertEqual(simulator.changeLogCount, logCount)
        XCTAssertEqual(simulator.uploads, [])
        for method in [SimulatedMethod.editMessage, .deleteMessage, .addReaction, .removeReaction, .uploadMedia] {
            XCTAssertEqual(alice.callCount(method), 1, "\(method)")
            XCTAssertEqual(alice.serverCallCount(method), 0, "\(method)")
        }
    }

    func testAckLostCommitsTheWriteThenTimesOut() async throws {
        let id = try simulator.postText("hello", from: "alice", to: .group("team"))
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        alice.failNext(.editMessage, with: .ackLost)
        await XCTAssertThrowsBackendError(.timedOut, try await alice.editMessage(id: id, changes: ["data": ["text": "edited"]]))
        await assertEqual(try text(try await bob.message(id: id)).text, "edited", "committed before the answer was lost")
        let retried = try text(try await alice.editMessage(id: id, changes: ["data": ["text": "edited"]]))
        XCTAssertEqual(retried.text, "edited", "retrying the edit is harmless")

        bob.failNext(.addReaction, with: .ackLost)
        await XCTAssertThrowsBackendError(.timedOut, try await bob.addReaction(messageId: id, reaction: "👍"))
        await assertEqual(try reactions(try await bob.message(id: id)), [ReactionCount(reaction: "👍", count: 1, reactedByMe: true)])

        alice.failNext(.deleteMessage, with: .ackLost)
        await XCTAssertThrowsBackendError(.timedOut, try await alice.deleteMessage(id: id))
        await assertEqual(try decoded(try await bob.message(id: id)).deletedBy, "alice")

        alice.failNext(.uploadMedia, with: .ackLost)
        let path = try file("a.txt", Data("x".utf8))
        await XCTAssertThrowsBackendError(.timedOut, try await alice.uploadMedia(path: path, name: "a.txt", mimeType: "text/plain"))
        XCTAssertEqual(simulator.uploads.count, 1, "stored before the answer was lost")
    }

    func testStatusAndTimeoutFaultsChangeNothing() async throws {
        let id = try simulator.postText("hello", from: "alice", to: .group("team"))
        let path = try file("a.txt", Data("x".utf8))
        let before = simulator.messageJSON(id, as: "alice")
        let logCount = simulator.changeLogCount
        let alice = simulator.client(for: "alice")
        for method in [SimulatedMethod.editMessage, .deleteMessage, .addReaction, .removeReaction, .uploadMedia] {
            alice.failNext(method, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
            alice.failNext(method, with: .timeout)
        }
        for _ in 0..<2 {
            let errors = [
                await backendError(try await alice.editMessage(id: id, changes: ["data": ["text": "x"]])),
                await backendError(try await alice.deleteMessage(id: id)),
                await backendError(try await alice.addReaction(messageId: id, reaction: "👍")),
                await backendError(try await alice.removeReaction(messageId: id, reaction: "👍")),
                await backendError(try await alice.uploadMedia(path: path, name: "a.txt", mimeType: "text/plain")),
            ]
            XCTAssertTrue(errors.allSatisfy { $0?.isTransient == true }, "\(errors)")
            XCTAssertTrue(errors.allSatisfy { statusAndCode($0) == "503 ERR_SERVICE_UNAVAILABLE" || $0 == .timedOut }, "\(errors)")
        }
        XCTAssertEqual(simulator.messageJSON(id, as: "alice"), before)
        XCTAssertEqual(simulator.changeLogCount, logCount)
        XCTAssertEqual(simulator.uploads, [])

        _ = try await alice.addReaction(messageId: id, reaction: "👍")
        XCTAssertNotEqual(simulator.messageJSON(id, as: "alice"), before, "the faults were used up; the next call goes through")
    }

    func testPayloadFaultShapesTheAnswerOfACommittedWrite() async throws {
        let id = try simulator.postText("hello", from: "alice", to: .group("team"))
        let bob = simulator.client(for: "bob")
        bob.failNext(.addReaction, with: .payload { _ in ["id": "not a number"] })
        await assertEqual(try await bob.addReaction(messageId: id, reaction: "👍"), ["id": "not a number"])
        await assertEqual(try reactions(try await bob.message(id: id)), [ReactionCount(reaction: "👍", count: 1, reactedByMe: true)])
        bob.failNext(.uploadMedia, with: .payload { _ in ["url": 1] })
        await assertEqual(try await bob.uploadMedia(path: try file("a.txt", Data("x".utf8)), name: "a.txt", mimeType: "text/plain"), ["url": 1])
    }

    func testCallCountersAndLogins() async throws {
        let id = try simulator.postText("hello", from: "alice", to: .group("team"))
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        _ = try await alice.editMessage(id: id, changes: ["tags": ["t"]])
        _ = try await alice.addReaction(messageId: id, reaction: "👍")
        _ = try await alice.removeReaction(messageId: id, reaction: "👍")
        _ = try await alice.uploadMedia(path: try file("a.txt", Data("x".utf8)), name: "a.txt", mimeType: "text/plain")
        _ = try await alice.deleteMessage(id: id)
        XCTAssertEqual(alice.calls, [.editMessage, .addReaction, .removeReaction, .uploadMedia, .deleteMessage])
        XCTAssertEqual(alice.serverCallCount(.deleteMessage), 1)

        _ = await backendError(try await bob.editMessage(id: id, changes: ["tags": ["t"]]))
        XCTAssertEqual(bob.callCount(.editMessage), 1, "a refused call counts")
        XCTAssertEqual(bob.serverCallCount(.editMessage), 1)

        await bob.logout()
        await assertEqual(statusAndCode(await backendError(try await bob.addReaction(messageId: id, reaction: "👍"))), "401 ERR_NOT_LOGGED_IN")
        await assertEqual(statusAndCode(await backendError(try await bob.uploadMedia(path: "/nonexistent", name: "x", mimeType: "x"))),
                          "401 ERR_NOT_LOGGED_IN", "the login comes before the file")
    }
}
