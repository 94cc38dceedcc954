import ChatVault
import ChatVaultSimulator
import XCTest

/// The realtime connection: connect/disconnect events and the messages of one's conversations.
final class RealtimeTests: SimulatorTestCase {
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
            guard let events = first else { throw Timeout(expected: count) }
            return events
        }
    }

    struct Timeout: Error {
        let expected: Int
    }

    func kinds(_ events: [RealtimeEvent]) -> [String] {
        events.map { event in
            switch event {
            case .connected: return "connected"
            case .disconnected: return "disconnected"
            case .messageReceived(let json): return "received \(json["id"]!.intValue!)"
            case .messageEdited(let json): return "edited \(json["id"]!.intValue!)"
            case .messageDeleted(let json): return "deleted \(json["id"]!.intValue!)"
            case .reactionAdded(let json): return "reacted \(json["reaction"]?["messageId"]?.intValue ?? -1)"
            case .reactionRemoved(let json): return "unreacted \(json["reaction"]?["messageId"]?.intValue ?? -1)"
            case .messagesDelivered(let json): return "delivered \(json["messageId"]?.intValue ?? -1)"
            case .messagesRead(let json): return "read \(json["messageId"]?.intValue ?? -1)"
            }
        }
    }

    func testMessagesEditsAndDeletesArriveWhileConnected() async throws {
        let bob = simulator.client(for: "bob")
        try simulator.postText("before", from: "alice", to: .user("bob"))
        try await bob.connect()
        XCTAssertTrue(bob.isConnected)
        let id = try simulator.postText("hi <@uid:bob>", from: "alice", to: .user("bob"))
        try simulator.postText("not for bob", from: "alice", to: .user("carol"))
        let teamId = try simulator.postText("team", from: "carol", to: .group("team"))
        try simulator.edit(id, to: .text("hi again"))
        try simulator.delete(id)
        await bob.disconnect()
        let events = try await next(6, of: bob)
        XCTAssertEqual(kinds(events), ["connected", "received \(id)", "received \(teamId)", "edited \(id)", "deleted \(id)", "disconnected"])
        if case .messageReceived(let json) = events[1] { XCTAssertEqual(json["mentionedMe"], true, "rendered for bob") }
    }

    func testEveryTruthWriteSendsAnEventReactionsAndReceiptsIncluded() async throws {
        let bob = simulator.client(for: "bob")
        let id = try simulator.postText("vote", from: "alice", to: .user("bob"))
        try await bob.connect()
        try simulator.react("👍", to: id, by: "alice")
        try simulator.react("👍", to: id, by: "alice") // no change, no event
        try simulator.unreact("👍", to: id, by: "alice")
        try simulator.markDelivered(upTo: id, by: "bob")
        try simulator.markRead(upTo: id, by: "bob")
        try simulator.markRead(upTo: id, by: "bob") // receipts only move forward
        try simulator.pin(id, by: "alice")
        try simulator.unpin(id)
        try simulator.save(id, for: "alice") // alice's own bookmark: bob hears nothing
        try simulator.save(id, for: "bob")
        await bob.disconnect()
        let events = try await next(9, of: bob)
        XCTAssertEqual(kinds(events), ["connected", "reacted \(id)", "unreacted \(id)", "delivered \(id)", "read \(id)",
                                       "edited \(id)", "edited \(id)", "edited \(id)", "disconnected"])
        guard case .reactionAdded(let added) = events[1] else { return XCTFail("expected a reaction") }
        XCTAssertEqual(added["reaction"]?["uid"], "alice")
        XCTAssertEqual(added["reaction"]?["reaction"], "👍")
        XCTAssertEqual(added["receiverType"], "user")
        XCTAssertEqual(added["message"]?["reactions"]?.arrayValue?.count, 1, "the message as it stands")
        guard case .reactionRemoved(let removed) = events[2] else { return XCTFail("expected a removal") }
        XCTAssertEqual(removed["message"]?["reactions"]?.arrayValue?.count ?? 0, 0)
        guard case .messagesRead(let read) = events[4] else { return XCTFail("expected a read receipt") }
        XCTAssertEqual(read["sender"]?["uid"], "bob")
        XCTAssertEqual(read["receiverId"], "alice")
        XCTAssertEqual(read["receiptType"], "read")
        XCTAssertEqual(read["conversationId"], "alice_user_bob")
    }

    func testTheSendingDeviceDoesNotHearItsOwnSendButOtherDevicesDo() async throws {
        let phone = simulator.client(for: "alice"), laptop = simulator.client(for: "alice"), bob = simulator.client(for: "bob")
        for client in [phone, laptop, bob] { try await client.connect() }
        XCTAssertEqual(simulator.connectedClientCount, 3)
        let sent = try await phone.send(["receiver": "bob", "type": "text", "data": ["text": "x"]], localMessageId: "l")
        let id = sent["id"]!.intValue!
        await phone.disconnect()
        await assertEqual(kinds(try await next(2, of: phone)), ["connected", "disconnected"])
        await assertEqual(kinds(try await next(2, of: laptop)), ["connected", "received \(id)"])
        await assertEqual(kinds(try await next(2, of: bob)), ["connected", "received \(id)"])
    }

    func testGoingOfflineDisconnectsAndConnectingOfflineFails() async throws {
        let bob = simulator.client(for: "bob")
        try await bob.connect()
        try await bob.connect()  // already connected: no second event
        bob.network = .offline
        XCTAssertFalse(bob.isConnected)
        try simulator.postText("missed", from: "alice", to: .user("bob"))
        await XCTAssertThrowsBackendError(.unreachable, try await bob.connect())
        bob.network = .online
        try await bob.connect()
        let id = try simulator.postText("caught", from: "alice", to: .user("bob"))
        await assertEqual(kinds(try await next(4, of: bob)), ["connected", "disconnected", "connected", "received \(id)"])
    }

    func testServerDropAndLogoutDisconnectButTheStreamCarriesTheNextLogin() async throws {
        let bob = simulator.client(for: "bob")
        try await bob.connect()
        simulator.dropAllConnections()
        XCTAssertFalse(bob.isConnected)
        bob.deliver(.messageReceived(["id": "hostile"]))
        try await bob.connect()
        await bob.logout()
        XCTAssertFalse(bob.isConnected)
        await assertEqual(statusAndCode(await backendError(try await bob.connect())), "401 ERR_NOT_LOGGED_IN")
        _ = try await bob.login(userId: "bob")
        try await bob.connect()
        let id = try simulator.postText("after the login", from: "alice", to: .user("bob"))
        let events = try await next(7, of: bob)
        XCTAssertEqual(events[2], .messageReceived(["id": "hostile"]))
        XCTAssertEqual(kinds(events.enumerated().filter { $0.offset != 2 }.map(\.element)),
                       ["connected", "disconnected", "connected", "disconnected", "connected", "received \(id)"],
                       "logout drops the connection; the same stream goes on with the next login")
        await bob.logout()
        await assertEqual(kinds(try await next(1, of: bob)), ["disconnected"], "iterated again: the stream is still open")
    }

    func testConnectFaultsAndNoEventsWhileDisconnected() async throws {
        let bob = simulator.client(for: "bob")
        bob.failNext(.connect, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
        await assertEqual(statusAndCode(await backendError(try await bob.connect())), "503 ERR_SERVICE_UNAVAILABLE")
        try simulator.postText("nobody listens", from: "alice", to: .user("bob"))
        try await bob.connect()
        await assertEqual(kinds(try await next(1, of: bob)), ["connected"])
    }
}
