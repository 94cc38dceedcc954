import ChatVault
import ChatVaultMatrix
import Foundation
import Synchronization
import XCTest

/// What the Matrix backend maps beyond messages, against the real Synapse: blocking
/// (`m.ignored_user_list`), the user directory, groups and their members and bans, reactions
/// (`m.annotation`), threads (`m.thread`) and the notification feed.
final class MatrixDirectoryTests: XCTestCase {
    struct Room {
        let alice: MatrixBackend
        let aliceSession: MatrixSession
        let bob: RawMatrixClient
        let room: String
    }

    func groupRoom(name: String = "Team") async throws -> Room {
        let (aliceSession, _) = try await TestHomeserver.session("alice")
        let (bobSession, _) = try await TestHomeserver.session("bob")
        let bob = RawMatrixClient(session: bobSession)
        let room = try await bob.createRoom(name: name, invite: [aliceSession.userId])
        try await RawMatrixClient(session: aliceSession).join(room)
        let alice = MatrixBackend(homeserver: try TestHomeserver.url(), session: aliceSession)
        alice.attach(identities: MemoryMessageIdentities())
        _ = try await alice.login(userId: aliceSession.userId)
        return Room(alice: alice, aliceSession: aliceSession, bob: bob, room: room)
    }

    /// Bob's message as alice's backend sees it (so it has an id in her map).
    func bobsMessage(_ r: Room, text: String) async throws -> JSONValue {
        try await r.bob.sendText(text, room: r.room)
        var query = MessageQuery()
        query.scope = .group(r.room)
        query.limit = 10
        let page = try await r.alice.messages(query)
        return try XCTUnwrap(page.items.last { $0["data"]?["text"]?.stringValue == text })
    }

    /// Invitations to groups wait for the user: heard in realtime, listed, declined or accepted
    /// through the backend; an invitation to a direct chat is still accepted by the backend itself.
    func testGroupInvitationsAreHeardListedAndAnsweredWhileDirectOnesAreAccepted() async throws {
        let r = try await groupRoom()
        let heard = Mutex<[MatrixInvitation]>([])
        let listening = Task { for await invitation in r.alice.invitationEvents { heard.withLock { $0.append(invitation) } } }
        defer { listening.cancel() }
        try await r.alice.connect()
        let club = try await r.bob.createRoom(name: "Book club", invite: [r.aliceSession.userId])
        let chess = try await r.bob.createRoom(name: "Chess", invite: [r.aliceSession.userId])
        let direct = try await r.bob.createRoom(name: "", invite: [r.aliceSession.userId], direct: true)
        let deadline = Date().addingTimeInterval(30)
        while heard.withLock({ $0.count }) < 2, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        XCTAssertEqual(Set(heard.withLock { $0 }.map(\.room)), [club, chess], "both group invitations heard, not the direct one")
        let bobId = r.bob.session.userId
        XCTAssertEqual(heard.withLock { $0 }.first { $0.room == club }, MatrixInvitation(room: club, name: "Book club", inviter: bobId))

        let waiting = try await r.alice.invitations()
        XCTAssertEqual(waiting.map(\.room).sorted(), [club, chess].sorted())
        XCTAssertEqual(waiting.first { $0.room == chess }?.name, "Chess")
        // The direct chat was joined without asking.
        var members: [String] = []
        while Date() < deadline {
            members = (try await r.bob.call("GET", "_matrix/client/v3/rooms/\(direct)/joined_members"))["joined"]?.objectValue.map { Array($0.keys) } ?? []
            if members.contains(r.aliceSession.userId) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        XCTAssertTrue(members.contains(r.aliceSession.userId), "the direct invitation accepted by the backend")

        try await r.alice.declineInvitation(club)
        try await r.alice.joinRoom(chess)
        let after = try await r.alice.invitations()
        XCTAssertTrue(after.isEmpty, "each answered: \(after.map(\.room))")
        let clubMembers = try await r.bob.call("GET", "_matrix/client/v3/rooms/\(club)/joined_members")
        XCTAssertNil(clubMembers["joined"]?[r.aliceSession.userId], "declined: alice never joined the club")
        try await r.bob.sendText("welcome", room: chess)
        try await r.bob.sendText("welcome", room: club)
        let conversations = try await r.alice.conversations(ConversationQuery())
        XCTAssertTrue(conversations.items.contains { $0["conversationId"]?.stringValue == "group_\(chess)" }, "the accepted group is a conversation")
        XCTAssertFalse(conversations.items.contains { $0["conversationId"]?.stringValue == "group_\(club)" })
        do {
            try await r.alice.declineInvitation("not a room")
            XCTFail("a string that is not a room id must be refused")
        } catch {
            guard case .server(404, "ERR_GUID_NOT_FOUND", _) = error else { return XCTFail("\(error)") }
        }
        await r.alice.disconnect()
    }

    func testBlockingIsTheIgnoredUserList() async throws {
        let r = try await groupRoom()
        let answer = try await r.alice.blockUsers([r.bob.session.userId, "not-a-matrix-id"])
        XCTAssertEqual(answer, [r.bob.session.userId: true, "not-a-matrix-id": false])
        let blocked = try await r.alice.blockedUsers(BlockedUserQuery())
        XCTAssertEqual(blocked.items.compactMap { $0["uid"]?.stringValue }, [r.bob.session.userId])
        XCTAssertEqual(blocked.items.first?["blockedByMe"]?.boolValue, true)
        let raw = try await RawMatrixClient(session: r.aliceSession)
            .call("GET", "_matrix/client/v3/user/\(r.aliceSession.userId)/account_data/m.ignored_user_list")
        XCTAssertNotNil(raw["ignored_users"]?[r.bob.session.userId], "stored where every Matrix client reads it")
        _ = try await r.alice.unblockUsers([r.bob.session.userId])
        let after = try await r.alice.blockedUsers(BlockedUserQuery())
        XCTAssertTrue(after.items.isEmpty)
    }

    func testGroupsMembersBansAndTheUserDirectory() async throws {
        let r = try await groupRoom(name: "Design review")
        let groups = try await r.alice.groups(GroupQuery())
        let group = try XCTUnwrap(groups.items.first { $0["guid"]?.stringValue == r.room })
        XCTAssertEqual(group["name"]?.stringValue, "Design review")
        XCTAssertEqual(group["owner"]?.stringValue, r.bob.session.userId)
        XCTAssertEqual(group["membersCount"]?.intValue, 2)

        let members = try await r.alice.groupMembers(GroupMemberQuery(guid: r.room))
        let scopes = Dictionary(uniqueKeysWithValues: members.items.compactMap { m in
            m["uid"]?.stringValue.map { ($0, m["scope"]?.stringValue ?? "") }
        })
        XCTAssertEqual(scopes, [r.bob.session.userId: "admin", r.aliceSession.userId: "participant"])

        let (carol, _) = try await TestHomeserver.session("carol")
        _ = try await r.bob.call("POST", "_matrix/client/v3/rooms/\(r.room)/ban", ["user_id": .string(carol.userId)])
        let banned = try await r.alice.bannedGroupMembers(GroupMemberQuery(guid: r.room))
        XCTAssertEqual(banned.items.compactMap { $0["uid"]?.stringValue }, [carol.userId])

        let local = String(r.bob.session.userId.dropFirst().prefix { $0 != ":" })
        var search = UserQuery()
        search.searchKeyword = local
        let users = try await r.alice.users(search)
        XCTAssertEqual(users.items.compactMap { $0["uid"]?.stringValue }, [r.bob.session.userId], "someone alice shares a room with")
    }

    func testReactionsAreAnnotationsCountedPerEmoji() async throws {
        let r = try await groupRoom()
        let message = try await bobsMessage(r, text: "react to me")
        let id = Int(try XCTUnwrap(message["id"]?.intValue))
        let once = try await r.alice.addReaction(messageId: id, reaction: "👍")
        let twice = try await r.alice.addReaction(messageId: id, reaction: "👍")
        XCTAssertEqual(once["reactions"], twice["reactions"], "adding a reaction the user already has changes nothing")
        XCTAssertEqual(twice["reactions"], [["reaction": "👍", "count": 1, "reactedByMe": true]])

        let found = try await eventId(of: "react to me", r)
        let bobEvent = try XCTUnwrap(found)
        _ = try await r.bob.call("PUT", "_matrix/client/v3/rooms/\(r.room)/send/m.reaction/\(UUID().uuidString)", [
            "m.relates_to": ["rel_type": "m.annotation", "event_id": .string(bobEvent), "key": "👍"],
        ])
        let list = try await r.alice.reactions(ReactionQuery(messageId: id))
        XCTAssertEqual(list.items.compactMap { $0["uid"]?.stringValue }, [r.aliceSession.userId, r.bob.session.userId])
        XCTAssertTrue(list.items.allSatisfy { $0["messageId"]?.intValue == Int64(id) })

        let removed = try await r.alice.removeReaction(messageId: id, reaction: "👍")
        XCTAssertEqual(removed["reactions"], [["reaction": "👍", "count": 1, "reactedByMe": false]])
    }

    func testRealtimeReactionsNameTheMessage() async throws {
        let r = try await groupRoom()
        let message = try await bobsMessage(r, text: "live reaction")
        let heard = EventRecorder(r.alice.events)
        try await r.alice.connect()
        try await heard.wait(for: "connected") { $0.contains(.connected) }
        let found = try await eventId(of: "live reaction", r)
        let event = try XCTUnwrap(found)
        _ = try await r.bob.call("PUT", "_matrix/client/v3/rooms/\(r.room)/send/m.reaction/\(UUID().uuidString)", [
            "m.relates_to": ["rel_type": "m.annotation", "event_id": .string(event), "key": "🎉"],
        ])
        let events = try await heard.wait(for: "the reaction") { $0.contains { if case .reactionAdded = $0 { true } else { false } } }
        guard case .reactionAdded(let json)? = events.first(where: { if case .reactionAdded = $0 { true } else { false } }) else { return XCTFail() }
        XCTAssertEqual(json["reaction"]?["messageId"], message["id"])
        XCTAssertEqual(json["reaction"]?["reaction"]?.stringValue, "🎉")
        XCTAssertEqual(json["conversationId"]?.stringValue, "group_\(r.room)")
        await r.alice.disconnect()
    }

    func testReadReceiptsArriveInRealtimeNamingTheMessage() async throws {
        let r = try await groupRoom()
        let mine = try await r.alice.send(["receiver": .string(r.room), "receiverType": "group", "category": "message", "type": "text",
                                           "data": ["text": "read me"]], localMessageId: "l-read")
        let heard = EventRecorder(r.alice.events)
        try await r.alice.connect()
        try await heard.wait(for: "connected") { $0.contains(.connected) }
        let found = try await eventId(of: "read me", r)
        let event = try XCTUnwrap(found)
        _ = try await r.bob.call("POST", "_matrix/client/v3/rooms/\(r.room)/receipt/m.read/\(event)", .object([:]))
        let events = try await heard.wait(for: "the receipt") { $0.contains { if case .messagesRead(let j) = $0 { j["sender"]?["uid"]?.stringValue == r.bob.session.userId } else { false } } }
        guard case .messagesRead(let json)? = events.first(where: { if case .messagesRead(let j) = $0 { j["sender"]?["uid"]?.stringValue == r.bob.session.userId } else { false } }) else { return XCTFail() }
        XCTAssertEqual(json["messageId"], mine["id"])
        XCTAssertEqual(json["receiptType"]?.stringValue, "read")
        XCTAssertGreaterThan(json["readAt"]?.intValue ?? 0, 0)
        await r.alice.disconnect()
    }

    func testThreadsAndRepliesRoundTrip() async throws {
        let r = try await groupRoom()
        let root = try await bobsMessage(r, text: "thread root")
        let reply = try await r.alice.send([
            "receiver": .string(r.room), "receiverType": "group", "category": "message", "type": "text",
            "data": ["text": "a reply"], "parentId": root["id"] ?? .null,
        ], localMessageId: "l-reply")
        XCTAssertEqual(reply["parentId"], root["id"], "the reply names its parent by the parent's id")
        var query = ThreadQuery()
        query.scope = .group(r.room)
        query.participatedByMe = false
        let threads = try await r.alice.threads(query)
        let thread = try XCTUnwrap(threads.items.first)
        XCTAssertEqual(thread["parentMessageId"], root["id"])
        XCTAssertEqual(thread["replyCount"]?.intValue, 1)
        XCTAssertEqual(thread["lastReply"]?["data"]?["text"]?.stringValue, "a reply")
    }

    func testTheNotificationFeedListsWhatNotifiedTheUser() async throws {
        let r = try await groupRoom()
        try await r.bob.sendText("notify alice", room: r.room)
        var feed = WirePage(items: [], nextCursor: nil)
        for _ in 0..<50 where feed.items.isEmpty {
            feed = try await r.alice.notificationFeed(FeedQuery())
            if feed.items.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        }
        let item = try XCTUnwrap(feed.items.first)
        XCTAssertEqual(item["channelId"]?.stringValue, r.room)
        XCTAssertEqual(item["sender"]?["uid"]?.stringValue, r.bob.session.userId)
        XCTAssertEqual(item["content"]?["body"]?.stringValue, "notify alice")
    }

    func eventId(of text: String, _ r: Room) async throws -> String? {
        let history = try await r.bob.call("GET", "_matrix/client/v3/rooms/\(r.room)/messages", query: [("dir", "b"), ("limit", "20")])
        return (history["chunk"]?.arrayValue ?? []).first { $0["content"]?["body"]?.stringValue == text }?["event_id"]?.stringValue
    }
}
