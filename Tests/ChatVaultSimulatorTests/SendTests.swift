import ChatVault
import ChatVaultSimulator
import XCTest

/// `send(_:localMessageId:)`: validation, what is stored and returned, idempotency.
final class SendTests: SimulatorTestCase {
    func testATextSendIsStoredAndReturnedWithItsLocalId() async throws {
        let alice = simulator.client(for: "alice")
        let stored = try await alice.send(["receiver": "bob", "receiverType": "user", "category": "message", "type": "text",
                                           "data": ["text": "hi <@uid:bob>", "metadata": ["k": "v"]], "tags": ["t"]],
                                          localMessageId: "local-1")
        XCTAssertEqual(stored["localMessageId"], "local-1")
        XCTAssertEqual(stored["muid"], "local-1")
        XCTAssertEqual(stored["sender"]?["uid"], "alice")
        XCTAssertEqual(stored["conversationId"], "alice_user_bob")
        XCTAssertEqual(stored["sentAt"]?.intValue, Int64(clock.seconds))
        XCTAssertEqual(stored["tags"], ["t"])
        XCTAssertEqual(stored["data"]?["metadata"], ["k": "v"])
        XCTAssertEqual(stored["mentionedUsers"]?.arrayValue?.first?["uid"], "bob")
        let bobsView = try await simulator.client(for: "bob").message(id: Int(stored["id"]!.intValue!))
        XCTAssertEqual(bobsView["mentionedMe"], true)
    }

    func testMediaCustomInteractiveAndThreadedSends() async throws {
        let alice = simulator.client(for: "alice")
        let media = try await alice.send(["receiver": "team", "receiverType": "group", "type": "image",
                                          "data": ["caption": "look", "attachments": [["name": "a.png", "extension": "png", "mimeType": "image/png",
                                                                                       "url": "https://media.test/a.png", "size": 12]]]],
                                         localMessageId: "m")
        XCTAssertEqual(media["data"]?["attachments"]?.arrayValue?.first?["url"], "https://media.test/a.png")
        let custom = try await alice.send(["receiver": "team", "receiverType": "group", "category": "custom", "type": "location",
                                           "data": ["customData": ["lat": 1], "updateConversation": false]], localMessageId: "c")
        XCTAssertEqual(custom["category"], "custom")
        XCTAssertEqual(custom["data"]?["updateConversation"], false)
        let form = try await alice.send(["receiver": "team", "receiverType": "group", "category": "interactive", "type": "form",
                                         "data": ["interactiveData": ["f": 1], "interactionGoal": ["type": "anyOf", "elementIds": ["ok"]]]],
                                        localMessageId: "f")
        XCTAssertEqual(form["data"]?["interactionGoal"]?["type"], "anyOf")
        let parent = Int(media["id"]!.intValue!)
        let reply = try await alice.send(["receiver": "team", "receiverType": "group", "type": "text", "parentId": .int(Int64(parent)),
                                          "data": ["text": "more"]], localMessageId: "r")
        XCTAssertEqual(reply["parentId"]?.intValue, Int64(parent))
        await assertEqual(try await alice.message(id: parent)["replyCount"], 1)
    }

    func testInvalidSendsAreRefusedWithA4xxCodeAndNothingStored() async throws {
        let alice = simulator.client(for: "alice")
        let cases: [(JSONValue, String, String)] = [
            (["receiver": "ghost", "type": "text", "data": ["text": "x"]], "l1", "404 ERR_UID_NOT_FOUND"),
            (["receiver": "nogroup", "receiverType": "group", "type": "text", "data": ["text": "x"]], "l2", "404 ERR_GUID_NOT_FOUND"),
            (["receiver": "secret", "receiverType": "group", "type": "text", "data": ["text": "x"]], "l3", "403 ERR_NOT_A_MEMBER"),
            (["type": "text", "data": ["text": "x"]], "l4", "400 ERR_INVALID_MESSAGE"),
            (["receiver": "bob", "data": ["text": "x"]], "l5", "400 ERR_INVALID_MESSAGE"),
            (["receiver": "bob", "type": "text", "data": ["text": ""]], "l6", "400 ERR_EMPTY_MESSAGE"),
            (["receiver": "bob", "type": "image", "data": [:]], "l7", "400 ERR_NO_ATTACHMENTS"),
            (["receiver": "bob", "type": "sticker", "data": [:]], "l8", "400 ERR_INVALID_MESSAGE"),
            (["receiver": "bob", "category": "action", "type": "groupMember", "data": [:]], "l9", "400 ERR_INVALID_CATEGORY"),
            (["receiver": "bob", "type": "text", "data": ["text": "x"], "parentId": 999], "l10", "404 ERR_NOT_FOUND"),
            (["receiver": "bob", "receiverType": "robot", "type": "text", "data": ["text": "x"]], "l11", "400 ERR_INVALID_MESSAGE"),
            ("just a string", "l12", "400 ERR_INVALID_MESSAGE"),
            (["receiver": "alice", "type": "text", "data": ["text": "x"]], "l13", "400 ERR_INVALID_RECEIVER"),
            (["receiver": "bob", "type": "text", "data": ["text": "x"]], "", "400 ERR_INVALID_LOCAL_ID"),
        ]
        for (json, local, expected) in cases {
            let error = await backendError(try await alice.send(json, localMessageId: local))
            XCTAssertEqual(statusAndCode(error), expected, "\(local)")
            XCTAssertEqual(error?.isTransient, false)
        }
        XCTAssertEqual(simulator.messageCount, 0)
    }

    func testSameLocalIdFromAnotherUserIsAnotherMessage() async throws {
        let alice = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        let a = try await alice.send(["receiver": "bob", "type": "text", "data": ["text": "x"]], localMessageId: "same")
        let b = try await bob.send(["receiver": "alice", "type": "text", "data": ["text": "y"]], localMessageId: "same")
        XCTAssertNotEqual(a["id"], b["id"])
    }

    func testIdsAreSequential() async throws {
        let alice = simulator.client(for: "alice")
        var ids: [Int64] = []
        for i in 0..<5 {
            ids.append(try await alice.send(["receiver": "bob", "type": "text", "data": ["text": "x"]], localMessageId: "l\(i)")["id"]!.intValue!)
        }
        XCTAssertEqual(ids, [1, 2, 3, 4, 5])
    }
}
