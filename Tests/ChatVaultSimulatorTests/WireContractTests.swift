@testable import ChatVault
import ChatVaultSimulator
import XCTest

/// The wire contract: everything the simulator renders decodes through the engine's own
/// decoder, with the values it was given.
final class WireContractTests: SimulatorTestCase {
    /// Rich truth: every message kind, replies, mentions, reactions, pins, saves, receipts, edits,
    /// deletions, blocks, tags, feed items.
    func seedEverything() throws -> (text: Int, media: Int, custom: Int, form: Int, reply: Int, deleted: Int, action: Int) {
        try simulator.updateUser("alice") {
            $0.avatar = "https://avatars.test/alice.png"
            $0.link = "https://alice.test"
            $0.statusMessage = "busy"
            $0.metadata = ["team": "core", "nested": ["a": [1, 2, 3]]]
        }
        try simulator.updateGroup("team") {
            $0.icon = "https://icons.test/team.png"
            $0.description = "The team"
            $0.metadata = ["floor": 3]
        }
        try simulator.block("dave", by: "bob")
        let text = try simulator.postText("hello <@uid:bob>", from: "alice", to: .group("team"), tags: ["greeting"],
                                          metadata: ["priority": "high"])
        clock.advance(by: 1)
        let media = try simulator.postMedia(.image, [
            SimulatedAttachment(name: "a.png", mimeType: "image/png", url: "https://media.test/a.png", size: 100),
            SimulatedAttachment(name: "noext", mimeType: "application/octet-stream", url: "https://media.test/b"),
        ], caption: "two files", from: "bob", to: .user("alice"))
        let custom = try simulator.post(.custom(type: "location", data: ["lat": 48.85, "lng": 2.35], subType: "live",
                                                conversationText: "shared a location"), from: "carol", to: .group("team"))
        let form = try simulator.post(.interactive(type: "form", data: ["fields": [["id": "name"]]],
                                                   goal: .init(kind: .anyOf, elementIds: ["submit"]), allowSenderInteraction: true),
                                      from: "alice", to: .user("bob"))
        try simulator.interact(with: form, elementId: "submit", by: "bob")
        let reply = try simulator.postText("reply", from: "carol", to: .group("team"), parentId: text)
        let deleted = try simulator.postText("oops", from: "bob", to: .group("team"))
        let action = try simulator.post(.action(action: "joined", message: "dave joined"), from: "alice", to: .group("team"))
        clock.advance(by: 1)
        try simulator.delete(deleted)
        try simulator.react("👍", to: text, by: "bob")
        try simulator.pin(text, by: "carol")
        try simulator.save(text, for: "bob")
        try simulator.markDelivered(upTo: media, by: "alice")
        try simulator.markRead(upTo: text, by: "bob")
        try simulator.tagConversation("group_team", for: "bob", tags: ["work"])
        try simulator.pinConversation("group_team", for: "bob")
        try simulator.postFeedItem(to: "bob", category: "promo", categoryId: "spring", channelId: "push", content: ["title": "Sale"],
                                   tags: ["sale"], metadata: ["m": 1], sender: "system")
        try simulator.markFeedItemRead("feed-1")
        return (text, media, custom, form, reply, deleted, action)
    }

    func testEveryMessageKindDecodesWithItsValues() async throws {
        let seeded = try seedEverything()
        let bob = simulator.client(for: "bob")
        var query = MessageQuery()
        query.limit = 100
        let items = try await bob.messages(query).items
        XCTAssertEqual(items.count, 7)
        for item in items { _ = try decoder.message(item) }

        let textWire = try await bob.message(id: seeded.text)
        let text = try XCTUnwrap(try decoder.message(textWire) as? TextMessage)
        XCTAssertEqual(text.text, "hello <@uid:bob>")
        XCTAssertEqual(text.conversationId, "group_team")
        XCTAssertEqual(text.receiverType, .group)
        XCTAssertEqual(text.receiverUid, "team")
        XCTAssertEqual(text.sender?.uid, "alice")
        XCTAssertEqual(text.sender?.metadata?["team"], "core")
        XCTAssertEqual(text.tags, ["greeting"])
        XCTAssertEqual(text.metaData, ["priority": "high"])
        XCTAssertTrue(text.mentionedMe)
        XCTAssertEqual(text.mentionedUsers.map(\.uid), ["bob"])
        XCTAssertEqual(text.reactions.first?.reaction, "👍")
        XCTAssertEqual(text.reactions.first?.reactedByMe, true)
        XCTAssertEqual(text.replyCount, 1)
        XCTAssertEqual(text.pinnedBy, "carol")
        XCTAssertGreaterThan(text.pinnedAt, 0)
        XCTAssertGreaterThan(text.savedAt, 0)
        XCTAssertGreaterThan(text.readByMeAt, 0)
        XCTAssertEqual(text.messageCategory, .message)

        let mediaWire = try await bob.message(id: seeded.media)
        let media = try XCTUnwrap(try decoder.message(mediaWire) as? MediaMessage)
        XCTAssertEqual(media.messageType, .image)
        XCTAssertEqual(media.caption, "two files")
        XCTAssertEqual(media.attachments.map(\.fileUrl), ["https://media.test/a.png", "https://media.test/b"])
        XCTAssertEqual(media.attachment?.fileExtension, "png")
        XCTAssertEqual(media.attachment?.fileSize, 100)
        XCTAssertGreaterThan(media.deliveredAt, 0, "bob's own message, delivered to alice")

        let customWire = try await bob.message(id: seeded.custom)
        let custom = try XCTUnwrap(try decoder.message(customWire) as? CustomMessage)
        XCTAssertEqual(custom.type, "location")
        XCTAssertEqual(custom.subType, "live")
        XCTAssertEqual(custom.customData?["lat"], 48.85)
        XCTAssertEqual(custom.conversationText, "shared a location")

        let formWire = try await bob.message(id: seeded.form)
        let form = try XCTUnwrap(try decoder.message(formWire) as? InteractiveMessage)
        XCTAssertEqual(form.type, "form")
        XCTAssertTrue(form.allowSenderInteraction)
        XCTAssertEqual(form.interactionGoal?["type"], "anyOf")
        XCTAssertEqual(form.interactions.count, 1)

        let reply = try decoder.message(try await bob.message(id: seeded.reply))
        XCTAssertEqual(reply.parentMessageId, seeded.text)

        let deleted = try decoder.message(try await bob.message(id: seeded.deleted))
        XCTAssertGreaterThan(deleted.deletedAt, 0)
        XCTAssertEqual(deleted.deletedBy, "bob")

        let actionWire = try await bob.message(id: seeded.action)
        let action = try XCTUnwrap(try decoder.message(actionWire) as? ActionMessage)
        XCTAssertEqual(action.action, "joined")
        XCTAssertEqual(action.message, "dave joined")
    }

    func testSentMessagesDecodeWithTheirLocalId() async throws {
        let alice = simulator.client(for: "alice")
        let sent = try await alice.send(["receiver": "bob", "type": "text", "data": ["text": "hi"]], localMessageId: "local-9")
        let message = try decoder.message(sent)
        XCTAssertEqual(message.localMessageId, "local-9")
        XCTAssertEqual(message.muid, "local-9")
    }

    func testConversationsDecode() async throws {
        let seeded = try seedEverything()
        let bob = simulator.client(for: "bob")
        var query = ConversationQuery()
        query.includeBlockedUsers = true
        let items = try await bob.conversations(query).items
        XCTAssertEqual(items.count, 2)
        let decoded = try items.map { try decoder.conversation($0) }
        let team = try XCTUnwrap(decoded.first { $0.conversationId == "group_team" })
        XCTAssertEqual(team.conversationType, .group)
        XCTAssertEqual((team.conversationWith as? Group)?.guid, "team")
        XCTAssertEqual((team.conversationWith as? Group)?.hasJoined, true)
        XCTAssertEqual(team.tags, ["work"])
        XCTAssertEqual(team.pinnedBy, "bob")
        XCTAssertEqual(team.lastReadMessageId, seeded.text)
        XCTAssertEqual(team.lastMessage?.id, seeded.action)
        let direct = try decoder.conversation(try await bob.conversation(with: "alice", type: .user))
        XCTAssertEqual((direct.conversationWith as? User)?.uid, "alice")
        XCTAssertEqual(direct.unreadMessageCount, 1, "alice's form, unread by bob")
        XCTAssertEqual(direct.lastMessage?.id, seeded.form)
    }

    func testUsersGroupsMembersDecode() async throws {
        _ = try seedEverything()
        let bob = simulator.client(for: "bob")
        let users = try await bob.users(UserQuery()).items.map { try decoder.user($0) }
        XCTAssertEqual(users.map(\.uid), ["alice", "carol", "dave", "helper"])
        let alice = try XCTUnwrap(users.first)
        XCTAssertEqual(alice.avatar, "https://avatars.test/alice.png")
        XCTAssertEqual(alice.link, "https://alice.test")
        XCTAssertEqual(alice.statusMessage, "busy")
        XCTAssertEqual(alice.role, "admin")
        XCTAssertEqual(alice.status, .online)
        XCTAssertEqual(alice.tags, ["staff"])
        XCTAssertTrue(users[2].blockedByMe)
        XCTAssertTrue(users[3].isAgentic)
        let blocked = try await bob.blockedUsers(BlockedUserQuery()).items.map { try decoder.user($0) }
        XCTAssertEqual(blocked.map(\.uid), ["dave"])

        let groups = try await bob.groups(GroupQuery()).items.map { try decoder.group($0) }
        XCTAssertEqual(groups.map(\.guid), ["secret", "team"])
        let team = groups[1]
        XCTAssertEqual(team.icon, "https://icons.test/team.png")
        XCTAssertEqual(team.groupDescription, "The team")
        XCTAssertEqual(team.owner, "alice")
        XCTAssertEqual(team.membersCount, 3)
        XCTAssertEqual(team.scope, .participant)
        XCTAssertEqual(team.groupType, .public)
        XCTAssertEqual(groups[0].groupType, .private)
        XCTAssertEqual(groups[0].scope, .admin)

        let members = try await bob.groupMembers(GroupMemberQuery(guid: "team")).items.map { try decoder.groupMember($0) }
        XCTAssertEqual(members.map(\.uid), ["alice", "bob", "carol"])
        XCTAssertEqual(members.map(\.scope), [.admin, .participant, .moderator])
        XCTAssertEqual(members[0].guid, "team")
        try simulator.ban("dave", from: "secret")
        let banned = try await bob.bannedGroupMembers(GroupMemberQuery(guid: "secret")).items.map { try decoder.groupMember($0) }
        XCTAssertEqual(banned.map(\.uid), ["dave"])
    }

    func testReactionsThreadsFeedAndSessionDecode() async throws {
        let seeded = try seedEverything()
        let bob = simulator.client(for: "bob")
        let reactions = try await bob.reactions(ReactionQuery(messageId: seeded.text)).items.map { try decoder.reaction($0) }
        XCTAssertEqual(reactions.count, 1)
        XCTAssertEqual(reactions[0].uid, "bob")
        XCTAssertEqual(reactions[0].messageId, seeded.text)
        XCTAssertEqual(reactions[0].reactedBy?.uid, "bob")

        var threadQuery = ThreadQuery()
        threadQuery.participatedByMe = false
        let threads = try await bob.threads(threadQuery).items.map { try decoder.thread($0) }
        XCTAssertEqual(threads.count, 1)
        XCTAssertEqual(threads[0].parentMessage.id, seeded.text)
        XCTAssertEqual(threads[0].replyCount, 1)
        XCTAssertEqual(threads[0].lastReply?.id, seeded.reply)

        let feed = try await bob.notificationFeed(FeedQuery()).items.map { try decoder.feedItem($0) }
        XCTAssertEqual(feed.count, 1)
        XCTAssertEqual(feed[0].category, "promo")
        XCTAssertEqual(feed[0].categoryId, "spring")
        XCTAssertEqual(feed[0].tags, ["sale"])
        XCTAssertEqual(feed[0].sender, "system")
        XCTAssertGreaterThan(feed[0].readAt, 0)

        let session = try await bob.login(userId: "bob")
        XCTAssertEqual(try decoder.user(session.user).uid, "bob")
    }

    func testChangeLogAndRealtimeMessagesDecode() async throws {
        _ = try seedEverything()
        clock.advance(by: 1)
        let bob = simulator.client(for: "bob")
        let page = try await bob.changes(since: nil, limit: 1000)
        XCTAssertFalse(page.changes.isEmpty)
        for change in page.changes {
            if case .messageUpserted(let json) = change { _ = try decoder.message(json) }
        }
        try await bob.connect()
        let id = try simulator.postText("live", from: "alice", to: .user("bob"))
        for await event in bob.events {
            if case .messageReceived(let json) = event {
                XCTAssertEqual(try decoder.message(json).id, id)
                break
            }
        }
    }

    func testHostilePayloadsFailTheDecoderClearly() async throws {
        _ = try simulator.postText("hi", from: "alice", to: .user("bob"))
        let bob = simulator.client(for: "bob")
        bob.failNext(.messages, with: .payload { json in
            guard case .object(var fields) = json else { return json }
            fields["sentAt"] = nil
            return .object(fields)
        })
        let missing = try await bob.messages(MessageQuery()).items[0]
        XCTAssertThrowsError(try decoder.message(missing)) { error in
            XCTAssertEqual(error as? WireError, WireError(entity: "message", field: "sentAt", problem: .missing))
        }
        bob.failNext(.messages, with: .payload { json in
            guard case .object(var fields) = json else { return json }
            fields["data"] = ["text": .string(String(repeating: "x", count: 300 * 1024))]
            return .object(fields)
        })
        let huge = try await bob.messages(MessageQuery()).items[0]
        XCTAssertThrowsError(try decoder.message(huge)) { error in
            XCTAssertEqual((error as? WireError)?.field, "data.text")
        }
    }
}
