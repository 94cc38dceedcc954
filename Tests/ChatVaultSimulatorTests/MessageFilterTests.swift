import ChatVault
import ChatVaultSimulator
import XCTest

/// Each `MessageQuery` filter against hand-built truth, including the fields that depend on who asks.
final class MessageFilterTests: SimulatorTestCase {
    func testScopeSelectsOneConversationAndUnscopedSpansEveryVisibleOne() async throws {
        let direct = try simulator.postText("to bob", from: "alice", to: .user("bob"))
        let other = try simulator.postText("to carol", from: "alice", to: .user("carol"))
        let group = try simulator.postText("to team", from: "carol", to: .group("team"))
        let secret = try simulator.postText("hidden", from: "dave", to: .group("secret"))
        let bob = simulator.client(for: "bob")

        let withAlice = try await messages(bob) { $0.scope = .user("alice") }
        XCTAssertEqual(ids(withAlice), [direct])
        await assertEqual(ids(try await messages(bob) { $0.scope = .group("team") }), [group])
        await assertEqual(ids(try await messages(bob) { $0.scope = .group("secret") }), [secret], "bob owns secret")
        await assertEqual(Set(ids(try await messages(bob) { _ in })), [direct, group, secret], "not alice→carol")
        await assertFalse(ids(try await messages(bob) { _ in }).contains(other))
    }

    func testUnknownPeersAndGroupsAnswer404AndNonMembers403() async throws {
        let carol = simulator.client(for: "carol")
        let unknownUser = await backendError(try await self.messages(carol) { $0.scope = .user("nobody") })
        XCTAssertEqual(statusAndCode(unknownUser), "404 ERR_UID_NOT_FOUND")
        let unknownGroup = await backendError(try await self.messages(carol) { $0.scope = .group("nothing") })
        XCTAssertEqual(statusAndCode(unknownGroup), "404 ERR_GUID_NOT_FOUND")
        let notJoined = await backendError(try await self.messages(carol) { $0.scope = .group("secret") })
        XCTAssertEqual(statusAndCode(notJoined), "403 ERR_GROUP_NOT_JOINED")
    }

    func testSenderUidNarrowsAGroupToOneSender() async throws {
        let fromBob = try simulator.postText("b", from: "bob", to: .group("team"))
        try simulator.postText("c", from: "carol", to: .group("team"))
        let alice = simulator.client(for: "alice")
        await assertEqual(ids(try await messages(alice) { $0.scope = .group("team"); $0.senderUid = "bob" }), [fromBob])
    }

    func testThreadRepliesByParentAndHideReplies() async throws {
        let parent = try simulator.postText("question", from: "alice", to: .group("team"))
        let reply1 = try simulator.postText("answer 1", from: "bob", to: .group("team"), parentId: parent)
        let reply2 = try simulator.postText("answer 2", from: "carol", to: .group("team"), parentId: parent)
        let later = try simulator.postText("unrelated", from: "bob", to: .group("team"))
        let alice = simulator.client(for: "alice")

        await assertEqual(ids(try await messages(alice) { $0.parentMessageId = parent }), [reply1, reply2])
        await assertEqual(ids(try await messages(alice) { $0.scope = .group("team") }), [parent, reply1, reply2, later],
                       "replies are included unless hidden")
        await assertEqual(ids(try await messages(alice) { $0.scope = .group("team"); $0.hideReplies = true }), [parent, later])
        let parentJSON = try await alice.message(id: parent)
        XCTAssertEqual(parentJSON["replyCount"]?.intValue, 2)
        XCTAssertEqual(parentJSON["unreadRepliesCount"]?.intValue, 2)
        await assertEqual(try await alice.message(id: reply1)["parentId"]?.intValue, Int64(parent))
        let missingParent = await backendError(try await self.messages(alice) { $0.parentMessageId = 999 })
        XCTAssertEqual(statusAndCode(missingParent), "404 ERR_NOT_FOUND")
    }

    func testCategoriesAndTypes() async throws {
        let text = try simulator.postText("t", from: "alice", to: .user("bob"))
        let image = try simulator.postMedia(.image, [attachment("a.png", "image/png")], from: "alice", to: .user("bob"))
        let custom = try simulator.post(.custom(type: "location", data: ["lat": 1]), from: "alice", to: .user("bob"))
        let form = try simulator.post(.interactive(type: "form", data: ["fields": []]), from: "alice", to: .user("bob"))
        let bob = simulator.client(for: "bob")

        await assertEqual(ids(try await messages(bob) { $0.categories = ["message"] }), [text, image])
        await assertEqual(ids(try await messages(bob) { $0.categories = ["custom", "interactive"] }), [custom, form])
        await assertEqual(ids(try await messages(bob) { $0.types = ["image", "location"] }), [image, custom])
        await assertEqual(ids(try await messages(bob) { $0.categories = ["message"]; $0.types = ["text"] }), [text])
    }

    func testTags() async throws {
        let tagged = try simulator.postText("t", from: "alice", to: .user("bob"), tags: ["urgent", "billing"])
        try simulator.postText("u", from: "alice", to: .user("bob"))
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { $0.tags = ["billing", "other"] }), [tagged])
        await assertEqual(try await bob.message(id: tagged)["tags"], ["urgent", "billing"])
    }

    func testUnreadIsPerUserAndFollowsReadReceipts() async throws {
        let first = try simulator.postText("1", from: "alice", to: .group("team"))
        let second = try simulator.postText("2", from: "bob", to: .group("team"))
        let third = try simulator.postText("3", from: "alice", to: .group("team"))
        clock.advance(by: 5)
        try simulator.markRead(upTo: first, by: "bob")
        let bob = simulator.client(for: "bob"), carol = simulator.client(for: "carol")

        await assertEqual(ids(try await messages(bob) { $0.unread = true }), [third], "bob's own message is never unread")
        await assertEqual(ids(try await messages(carol) { $0.unread = true }), [first, second, third])
        let seen = try await bob.message(id: first)
        XCTAssertEqual(seen["readByMeAt"]?.intValue, Int64(clock.seconds))
        XCTAssertEqual(seen["deliveredToMeAt"]?.intValue, Int64(clock.seconds), "read implies delivered")
        await assertNil(try await bob.message(id: third)["readByMeAt"])
        _ = second
    }

    func testReadAtOfADirectMessageIsTheReceiversReceipt() async throws {
        let id = try simulator.postText("hi", from: "alice", to: .user("bob"))
        let alice = simulator.client(for: "alice")
        await assertNil(try await alice.message(id: id)["readAt"])
        clock.advance(by: 3)
        try simulator.markDelivered(upTo: id, by: "bob")
        clock.advance(by: 3)
        try simulator.markRead(upTo: id, by: "bob")
        let json = try await alice.message(id: id)
        XCTAssertEqual(json["deliveredAt"]?.intValue, Int64(clock.seconds - 3))
        XCTAssertEqual(json["readAt"]?.intValue, Int64(clock.seconds))
        XCTAssertNil(json["readByMeAt"], "alice's own message")
    }

    func testGroupReadAtWaitsForEveryOtherMember() async throws {
        let id = try simulator.postText("hi", from: "alice", to: .group("team"))
        let alice = simulator.client(for: "alice")
        try simulator.markRead(upTo: id, by: "bob")
        await assertNil(try await alice.message(id: id)["readAt"])
        clock.advance(by: 2)
        try simulator.markRead(upTo: id, by: "carol")
        await assertEqual(try await alice.message(id: id)["readAt"]?.intValue, Int64(clock.seconds))
    }

    func testHideDeleted() async throws {
        let kept = try simulator.postText("keep", from: "alice", to: .user("bob"))
        let gone = try simulator.postText("drop", from: "alice", to: .user("bob"))
        clock.advance(by: 1)
        try simulator.delete(gone)
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { _ in }), [kept, gone], "soft delete: still listed")
        await assertEqual(try await bob.message(id: gone)["deletedAt"]?.intValue, Int64(clock.seconds))
        await assertEqual(try await bob.message(id: gone)["deletedBy"], "alice")
        await assertEqual(ids(try await messages(bob) { $0.hideDeleted = true }), [kept])
    }

    func testMentionsOfMeAndOfChosenUsers() async throws {
        let mentionsBob = try simulator.postText("hey <@uid:bob>", from: "alice", to: .group("team"))
        let mentionsCarol = try simulator.postText("cc", from: "alice", to: .group("team"), mentions: ["carol"])
        try simulator.postText("plain", from: "alice", to: .group("team"))
        let bob = simulator.client(for: "bob")

        await assertEqual(ids(try await messages(bob) { $0.myMentionsOnly = true }), [mentionsBob])
        await assertEqual(ids(try await messages(bob) { $0.hasMentions = true }), [mentionsBob, mentionsCarol], "any mention")
        await assertEqual(ids(try await messages(bob) { $0.mentionedUIDs = ["carol", "dave"] }), [mentionsCarol])
        let json = try await bob.message(id: mentionsBob)
        XCTAssertEqual(json["mentionedMe"], true)
        XCTAssertEqual(json["mentionedUsers"]?.arrayValue?.first?["uid"], "bob")
        await assertEqual(try await bob.message(id: mentionsCarol)["mentionedMe"], false)
    }

    func testAttachmentsAndAttachmentTypes() async throws {
        try simulator.postText("t", from: "alice", to: .user("bob"))
        let image = try simulator.postMedia(.image, [attachment("a.png", "image/png")], from: "alice", to: .user("bob"))
        let file = try simulator.postMedia(.file, [attachment("a.pdf", "application/pdf")], from: "alice", to: .user("bob"))
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { $0.hasAttachments = true }), [image, file])
        await assertEqual(ids(try await messages(bob) { $0.attachmentTypes = [.file, .audio] }), [file])
    }

    func testHideMessagesFromBlockedUsersHidesOnlyWhomIBlocked() async throws {
        let fromBob = try simulator.postText("b", from: "bob", to: .group("team"))
        let fromCarol = try simulator.postText("c", from: "carol", to: .group("team"))
        try simulator.block("bob", by: "alice")
        let alice = simulator.client(for: "alice"), carol = simulator.client(for: "carol")
        await assertEqual(ids(try await messages(alice) { $0.hideMessagesFromBlockedUsers = true }), [fromCarol])
        await assertEqual(ids(try await messages(alice) { _ in }), [fromBob, fromCarol])
        await assertEqual(ids(try await messages(carol) { $0.hideMessagesFromBlockedUsers = true }), [fromBob, fromCarol])
        await assertEqual(try await alice.message(id: fromBob)["sender"]?["blockedByMe"], true)
        await assertEqual(try await simulator.client(for: "bob").message(id: fromBob)["sender"]?["blockedByMe"], false)
    }

    func testReactionsCountPerEmojiAndKnowWhetherIReacted() async throws {
        let id = try simulator.postText("nice", from: "alice", to: .group("team"))
        try simulator.postText("plain", from: "alice", to: .group("team"))
        try simulator.react("👍", to: id, by: "bob")
        try simulator.react("👍", to: id, by: "carol")
        try simulator.react("🎉", to: id, by: "carol")
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { $0.hasReactions = true }), [id])
        await assertEqual(try await bob.message(id: id)["reactions"], [
            ["reaction": "👍", "count": 2, "reactedByMe": true],
            ["reaction": "🎉", "count": 1, "reactedByMe": false],
        ])
        try simulator.unreact("👍", to: id, by: "bob")
        await assertEqual(try await bob.message(id: id)["reactions"]?.arrayValue?.first?["reactedByMe"], false)
    }

    func testPinnedIsSharedAndSavedIsPersonal() async throws {
        let pinned = try simulator.postText("p", from: "alice", to: .group("team"))
        let saved = try simulator.postText("s", from: "alice", to: .group("team"))
        try simulator.pin(pinned, by: "carol")
        try simulator.save(saved, for: "bob")
        let bob = simulator.client(for: "bob"), carol = simulator.client(for: "carol")
        await assertEqual(ids(try await messages(bob) { $0.pinned = true }), [pinned])
        await assertEqual(ids(try await messages(carol) { $0.pinned = true }), [pinned])
        await assertEqual(try await bob.message(id: pinned)["pinnedBy"], "carol")
        await assertEqual(ids(try await messages(bob) { $0.saved = true }), [saved])
        await assertEqual(ids(try await messages(carol) { $0.saved = true }), [])
        await assertEqual(try await bob.message(id: saved)["savedAt"]?.intValue, Int64(clock.seconds))
        await assertNil(try await carol.message(id: saved)["savedAt"])
    }

    func testSearchKeywordIsACaseInsensitiveSubstringOfTextAndCaption() async throws {
        let text = try simulator.postText("Quarterly REPORT attached", from: "alice", to: .user("bob"))
        let media = try simulator.postMedia(.file, [attachment("r.pdf", "application/pdf")], caption: "the report",
                                            from: "alice", to: .user("bob"))
        try simulator.postText("lunch?", from: "alice", to: .user("bob"))
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { $0.searchKeyword = "report" }), [text, media])
        await assertEqual(ids(try await messages(bob) { $0.searchKeyword = "" }).count, 3, "an empty keyword filters nothing")
    }

    func testHasLinks() async throws {
        let link = try simulator.postText("see HTTPS://example.com", from: "alice", to: .user("bob"))
        let plain = try simulator.postText("see example dot com", from: "alice", to: .user("bob"))
        let http = try simulator.postText("old http://x.test", from: "alice", to: .user("bob"))
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { $0.hasLinks = true }), [link, http])
        _ = plain
    }

    func testUpdatedAfterAndUpdatesOnly() async throws {
        let old = try simulator.postText("old", from: "alice", to: .user("bob"))
        let edited = try simulator.postText("typo", from: "alice", to: .user("bob"))
        let mark = clock.seconds
        clock.advance(by: 10)
        try simulator.edit(edited, to: .text("fixed"))
        let new = try simulator.postText("new", from: "alice", to: .user("bob"))
        let bob = simulator.client(for: "bob")

        await assertEqual(ids(try await messages(bob) { $0.updatedAfter = mark }), [edited, new])
        await assertEqual(ids(try await messages(bob) { $0.updatedAfter = mark; $0.updatesOnly = true }), [edited])
        let json = try await bob.message(id: edited)
        XCTAssertEqual(json["data"]?["text"], "fixed")
        XCTAssertEqual(json["editedAt"]?.intValue, Int64(clock.seconds))
        XCTAssertEqual(json["editedBy"], "alice")
        _ = old
    }

    func testInteractionGoalCompletedOnly() async throws {
        let goal = SimulatedInteractionGoal(kind: .allOf, elementIds: ["name", "submit"])
        let done = try simulator.post(.interactive(type: "form", data: ["x": 1], goal: goal), from: "alice", to: .user("bob"))
        let half = try simulator.post(.interactive(type: "form", data: ["x": 1], goal: goal), from: "alice", to: .user("bob"))
        let any = try simulator.post(.interactive(type: "card", data: [:], goal: .init(kind: .anyAction)), from: "alice", to: .user("bob"))
        let never = try simulator.post(.interactive(type: "card", data: [:], goal: .init(kind: .none)), from: "alice", to: .user("bob"))
        for (id, element) in [(done, "name"), (done, "submit"), (half, "name"), (any, "button"), (never, "button")] {
            try simulator.interact(with: id, elementId: element, by: "bob")
        }
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { $0.interactionGoalCompletedOnly = true }), [done, any])
        await assertEqual(try await bob.message(id: done)["data"]?["interactions"]?.arrayValue?.count, 2)
    }

    func testEnrichmentFlagsNeverFilter() async throws {
        let a = try simulator.postText("a", from: "alice", to: .user("bob"), tags: ["t"])
        let b = try simulator.postText("b", from: "bob", to: .user("alice"))
        let bob = simulator.client(for: "bob")
        let enriched = try await messages(bob) {
            $0.withTags = true; $0.withParent = true; $0.mentionsWithTagInfo = true
            $0.mentionsWithBlockedInfo = true; $0.hideQuotedMessages = true
        }
        XCTAssertEqual(ids(enriched), [a, b])
        await assertEqual(ids(try await messages(bob) { _ in }), [a, b])
        XCTAssertEqual(enriched.first?["tags"], ["t"], "tags are always included")
    }

    func testFiltersCombine() async throws {
        let match = try simulator.postText("hi <@uid:bob>", from: "alice", to: .group("team"), tags: ["x"])
        try simulator.postText("hi <@uid:bob>", from: "alice", to: .group("team"))
        try simulator.postText("no mention", from: "alice", to: .group("team"), tags: ["x"])
        let bob = simulator.client(for: "bob")
        await assertEqual(ids(try await messages(bob) { $0.scope = .group("team"); $0.tags = ["x"]; $0.myMentionsOnly = true; $0.unread = true }), [match])
    }

    func attachment(_ name: String, _ mime: String) -> SimulatedAttachment {
        SimulatedAttachment(name: name, mimeType: mime, url: "https://media.test/\(name)", size: 10)
    }
}
