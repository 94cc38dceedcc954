import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

/// Edits, deletes and reactions against the simulator: never queued, and the cache changes only
/// once the server has accepted the change (seeds: "Edits, Deletes, and Reactions Need a
/// Connection").
final class NeverQueuedWritesTests: XCTestCase {
    // MARK: - Offline, no answer, lost answer

    func testOfflineEachChangeFailsInternetUnavailableAndNothingChangesAnywhere() async throws {
        let f = try await ChangeFixture()
        let rowBefore = try f.row(f.mine)
        let serverBefore = f.serverJSON(f.mine)
        f.h.client.network = .offline
        for change in Change.allCases {
            let result = await f.perform(change, on: f.mine, viaClosures: true)
            XCTAssertEqual(result.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE, "\(change)")
            XCTAssertEqual(try f.row(f.mine), rowBefore, "\(change): the cached copy is byte-for-byte unchanged")
            XCTAssertEqual(f.serverJSON(f.mine), serverBefore, "\(change): the server has nothing")
            XCTAssertEqual(f.h.client.callCount(change.method), 1, "\(change): tried once, at the call")
            XCTAssertEqual(f.h.client.serverCallCount(change.method), 0, "\(change)")
        }
        XCTAssertEqual(try f.h.rows().count, 0, "nothing entered the outbox")
        XCTAssertEqual(f.h.listener.events, [])

        // Nothing was queued: going back online sends nothing.
        f.h.client.network = .online
        try await Task.sleep(for: .milliseconds(150))
        for change in Change.allCases { XCTAssertEqual(f.h.client.callCount(change.method), 1, "\(change): never retried") }
        XCTAssertEqual(f.serverJSON(f.mine), serverBefore)
        XCTAssertEqual(try f.row(f.mine), rowBefore)
    }

    func testNoAnswerFailsRequestTimedOutAndTheCacheIsUnchanged() async throws {
        let f = try await ChangeFixture()
        let rowBefore = try f.row(f.mine)
        let serverBefore = f.serverJSON(f.mine)
        for change in Change.allCases {
            f.h.client.failNext(change.method, with: .timeout)
            let result = await f.perform(change, on: f.mine)
            XCTAssertEqual(result.errorCode, OfflineErrorCode.requestTimedOut.rawValue, "\(change)")
            XCTAssertEqual(try f.row(f.mine), rowBefore, "\(change)")
        }
        XCTAssertEqual(f.serverJSON(f.mine), serverBefore, "a timeout commits nothing on the server")
        XCTAssertEqual(try f.h.rows().count, 0)
    }

    func testALostAnswerFailsAndLeavesTheCacheAloneThoughTheServerAppliedItAndALaterReadReconciles() async throws {
        let f = try await ChangeFixture()
        let rowBefore = try f.row(f.mine)
        for change in Change.allCases {
            f.h.client.failNext(change.method, with: .ackLost)
            let result = await f.perform(change, on: f.mine)
            XCTAssertEqual(result.errorCode, OfflineErrorCode.requestTimedOut.rawValue, "\(change)")
            XCTAssertEqual(try f.row(f.mine), rowBefore, "\(change): the cache waits for an answer")
            XCTAssertTrue(change.applied(to: try XCTUnwrap(f.serverJSON(f.mine))), "\(change): the server did apply it")
        }
        XCTAssertEqual(try f.h.rows().count, 0)

        // The next server read brings the server's version into the cache.
        _ = await f.conversation().fetchPrevious()
        XCTAssertNotEqual(try f.row(f.mine), rowBefore)
        let cachedCopy = try await f.cachedMessage(f.mine)
        let cached = try XCTUnwrap(cachedCopy)
        for change in Change.allCases { XCTAssertTrue(change.applied(to: cached), "\(change) reconciled by the read") }
    }

    // MARK: - Refusals and hostile answers

    func testAServerRefusalPassesItsCodeThroughAndChangesNothing() async throws {
        let f = try await ChangeFixture()
        let rows = try [f.mine, f.theirs, f.gone].map { try f.row($0) }

        let edit = await f.perform(.edit, on: f.theirs)
        XCTAssertEqual(edit.errorCode, "ERR_NOT_THE_SENDER", "someone else's message")
        let delete = await f.perform(.delete, on: f.theirs)
        XCTAssertEqual(delete.errorCode, "ERR_NOT_THE_SENDER")
        let editDeleted = await f.perform(.edit, on: f.gone)
        XCTAssertEqual(editDeleted.errorCode, "ERR_MESSAGE_DELETED")
        f.h.client.failNext(.addReaction, with: .status(403, code: "ERR_REACTIONS_DISABLED"))
        let add = await f.perform(.addReaction, on: f.mine)
        XCTAssertEqual(add.errorCode, "ERR_REACTIONS_DISABLED")
        f.h.client.failNext(.removeReaction, with: .status(500, code: "not a code: original words"))
        let remove = await f.perform(.removeReaction, on: f.mine)
        XCTAssertEqual(remove.errorCode, "ERROR_SERVER", "a code that does not look like one is not passed through")

        for result in [edit, delete, editDeleted, add, remove] {
            let description = try XCTUnwrap(result.error).description
            XCTAssertFalse(description.contains("words"), "no content in errors: \(description)")
        }
        XCTAssertEqual(try [f.mine, f.theirs, f.gone].map { try f.row($0) }, rows)
        XCTAssertEqual(f.serverText(f.theirs), "bob's words")
        XCTAssertFalse(Change.delete.applied(to: try XCTUnwrap(f.serverJSON(f.theirs))))
    }

    func testAHostileAnswerIsRefusedWithInvalidServerResponseAndChangesNothing() async throws {
        let f = try await ChangeFixture()
        let rows = try [f.mine, f.theirs].map { try f.row($0) }
        let otherMessage = try XCTUnwrap(f.serverJSON(f.theirs))
        let huge = String(repeating: "x", count: WireLimits().maxTextBytes + 1)
        let answers: [(String, @Sendable (JSONValue) -> JSONValue)] = [
            ("a broken id", { _ in ["id": "not a number"] }),
            ("another message", { _ in otherMessage }),
            ("an oversized text", { json in
                guard case .object(var fields) = json else { return json }
                fields["data"] = ["text": .string(huge)]
                return .object(fields)
            }),
        ]
        for change in Change.allCases {
            for (what, transform) in answers {
                f.h.client.failNext(change.method, with: .payload(transform))
                let result = await f.perform(change, on: f.mine)
                XCTAssertEqual(result.errorCode, OfflineErrorCode.invalidServerResponse.rawValue, "\(change), \(what)")
                XCTAssertFalse(result.error?.description.contains("xxxx") ?? true, "no content in errors")
                XCTAssertEqual(try [f.mine, f.theirs].map { try f.row($0) }, rows, "\(change), \(what)")
            }
        }
        XCTAssertEqual(try f.h.rows().count, 0)
    }

    // MARK: - Success

    func testOnceAcceptedEachChangeReachesTheCacheAndOnSuccessGetsTheServersMessage() async throws {
        let f = try await ChangeFixture()
        for change in Change.allCases {
            let before = try f.row(f.mine)
            let result = await f.perform(change, on: f.mine, viaClosures: true)
            let message = try XCTUnwrap(result.message, "\(change): \(String(describing: result.error))")
            XCTAssertEqual(message.id, f.mine)
            XCTAssertTrue(change.applied(to: message), "\(change): onSuccess carries the change")
            XCTAssertTrue(change.applied(to: try XCTUnwrap(f.serverJSON(f.mine))), "\(change)")
            XCTAssertNotEqual(try f.row(f.mine), before, "\(change): the cached copy changed")
            // Read back through the cache alone (the cached phase, offline).
            let cachedCopy = try await f.cachedMessage(f.mine)
            let cached = try XCTUnwrap(cachedCopy)
            XCTAssertTrue(change.applied(to: cached), "\(change): the cached copy carries the change")
            XCTAssertEqual(cached.messageStatus, message.messageStatus)
        }
        let editedCopy = try await f.cachedMessage(f.mine)
        let edited = try XCTUnwrap(editedCopy)
        XCTAssertGreaterThan(edited.editedAt, 0)
        XCTAssertEqual(edited.editedBy, "alice")
        XCTAssertEqual(edited.deletedBy, "alice")
        XCTAssertEqual(edited.reactions.map(\.reaction), ["🎉"])
        XCTAssertEqual(try f.row(f.theirs) != nil, true, "the other message is untouched")
        XCTAssertEqual(try f.h.rows().count, 0, "nothing entered the outbox")
        XCTAssertEqual(f.h.listener.events, [])
    }

    func testEditsReplaceCaptionsCustomDataMetadataAndTagsAndTheCachedFiltersFollow() async throws {
        let f = try await ChangeFixture()
        let edit = TextMessage(receiverUid: "bob", text: "tagged words", receiverType: .user)
        edit.id = f.mine
        edit.tags = ["important"]
        edit.metaData = ["mood": "calm"]
        let edited = try await f.h.vault.editMessage(edit)
        XCTAssertEqual(edited.tags, ["important"])
        XCTAssertEqual(edited.metaData?["mood"], "calm")
        let tagged = try await f.cached { $0.setTags(["important"]) }
        XCTAssertEqual(tagged.map(\.id), [f.mine], "the cached tag filter sees the new tags")

        let caption = MediaMessage(receiverUid: "bob", fileurl: nil, messageType: .image, receiverType: .user)
        caption.id = f.photo
        caption.caption = "a new caption"
        let media = try await f.h.vault.editMessage(caption)
        XCTAssertEqual((media as? MediaMessage)?.caption, "a new caption")
        let custom = CustomMessage(receiverUid: "bob", receiverType: .user, customData: ["lat": 2], type: "location")
        custom.id = f.location
        let located = try await f.h.vault.editMessage(custom)
        XCTAssertEqual((located as? CustomMessage)?.customData, ["lat": 2])

        let cached = try await f.cached { _ in }
        XCTAssertEqual((cached.first { $0.id == f.photo } as? MediaMessage)?.caption, "a new caption")
        XCTAssertEqual((cached.first { $0.id == f.location } as? CustomMessage)?.customData, ["lat": 2])
        XCTAssertEqual((cached.first { $0.id == f.mine } as? TextMessage)?.text, "tagged words")

        // Reactions are answered from the cache too.
        _ = try await f.h.vault.removeReaction(messageId: f.mine, reaction: "👍")
        let reacted = try await f.cached { $0.has(reactions: true) }
        XCTAssertEqual(reacted.map(\.id), [], "no message has reactions any more")
        _ = try await f.h.vault.addReaction(messageId: f.theirs, reaction: "👀")
        let reactedAgain = try await f.cached { $0.has(reactions: true) }
        XCTAssertEqual(reactedAgain.map(\.id), [f.theirs])
    }

    func testAnAcceptedChangeToAMessageTheCacheDoesNotHoldIsNotInserted() async throws {
        let f = try await ChangeFixture()
        // Posted while this device is away: neither a read nor the realtime connection caches it.
        f.h.client.network = .offline
        let unseen = try f.h.simulator.postText("never read", from: "alice", to: .user("carol"))
        f.h.client.network = .online
        let message = try await f.h.vault.addReaction(messageId: unseen, reaction: "👍")
        XCTAssertEqual(message.reactions.map(\.reaction), ["👍"])
        XCTAssertNil(try f.row(unseen), "left to the next read of that conversation")
    }

    func testTheyNeverTouchTheOutbox() async throws {
        let f = try await ChangeFixture(configure: { $0.setAutoSendPendingOnReconnect(false) })
        f.h.client.network = .offline
        let unsent = f.h.text("still unsent")
        let recorder = f.h.send(unsent)
        await waitUntil { !recorder.errors.isEmpty }
        let outbox = try f.h.rows()
        XCTAssertEqual(outbox.count, 1)
        let events = f.h.listener.events
        f.h.client.network = .online
        for change in Change.allCases {
            let result = await f.perform(change, on: f.mine)
            XCTAssertNotNil(result.message, "\(change)")
        }
        XCTAssertEqual(try f.h.rows().map(\.0), outbox.map(\.0))
        XCTAssertEqual(try f.h.rows().map(\.1), outbox.map(\.1))
        XCTAssertEqual(try f.h.rows().map(\.3), outbox.map(\.3))
        XCTAssertEqual(f.h.listener.events, events)
        XCTAssertEqual(f.h.client.serverCallCount(.send), 0)

        // An unsent message has no server id: it is changed by discarding and re-sending.
        XCTAssertEqual(unsent.id, 0)
        unsent.text = "changed"
        do {
            _ = try await f.h.vault.editMessage(unsent)
            XCTFail("an unsent message cannot be edited")
        } catch {
            XCTAssertEqual(error.code, .invalidMessage)
        }
        XCTAssertEqual(try f.h.rows().map(\.0), outbox.map(\.0))
    }

    // MARK: - Offline support disabled, not logged in, invalid changes

    func testWithOfflineSupportDisabledTheyGoStraightToTheServerAndNothingIsCached() async throws {
        let h = try OutboxHarness(configure: { $0.setEnabled(false) })
        let mine = try h.simulator.postText("original words", from: "alice", to: .user("bob"))
        try h.simulator.react("👍", to: mine, by: "alice")
        let attempt = await h.vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .disabled)
        for change in Change.allCases {
            let result = await Change.perform(change, on: mine, vault: h.vault, viaClosures: change == .edit)
            let message = try XCTUnwrap(result.message, "\(change): \(String(describing: result.error))")
            XCTAssertTrue(change.applied(to: message), "\(change)")
            XCTAssertTrue(change.applied(to: try XCTUnwrap(h.simulator.messageJSON(mine, as: "alice"))), "\(change)")
        }
        XCTAssertNil(h.vault.openCache)
        XCTAssertEqual(h.vault.getCacheSize(), 0)
        let files = FileManager.default.enumerator(atPath: h.root.path)?.allObjects.compactMap { $0 as? String } ?? []
        XCTAssertEqual(files.filter { !$0.hasSuffix("/") && !Self.isDirectory(h.root.path + "/" + $0) }, [], "nothing written to disk")

        // Offline it fails the same way, with nothing to keep.
        h.client.network = .offline
        let offline = await Change.perform(.addReaction, on: mine, vault: h.vault)
        XCTAssertEqual(offline.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
    }

    func testNobodyLoggedInIsRefusedBeforeAnyServerCall() async throws {
        let h = try OutboxHarness()
        let mine = try h.simulator.postText("original words", from: "alice", to: .user("bob"))
        for change in Change.allCases {
            let result = await Change.perform(change, on: mine, vault: h.vault, viaClosures: change == .delete)
            XCTAssertEqual(result.errorCode, CometChatConstants.Errors.ERROR_USER_NOT_LOGGED_IN, "\(change)")
            XCTAssertEqual(h.client.callCount(change.method), 0, "\(change)")
        }
        await h.login()
        await h.vault.logout()
        let afterLogout = await Change.perform(.edit, on: mine, vault: h.vault)
        XCTAssertEqual(afterLogout.errorCode, CometChatConstants.Errors.ERROR_USER_NOT_LOGGED_IN)
        XCTAssertEqual(h.client.callCount(.editMessage), 0)
    }

    func testInvalidChangesAreRefusedBeforeAnyServerCall() async throws {
        let f = try await ChangeFixture()
        let vault = f.h.vault
        let rows = try [f.mine, f.photo, f.location].map { try f.row($0) }
        func text(_ body: String, id: Int) -> TextMessage {
            let m = TextMessage(receiverUid: "bob", text: body, receiverType: .user)
            m.id = id
            return m
        }
        let secret = "secret words " + String(repeating: "y", count: WireLimits().maxTextBytes)
        let nothingToChange = CustomMessage(receiverUid: "bob", receiverType: .user, customData: nil, type: "location")
        nothingToChange.id = f.location
        let bareMedia = MediaMessage(receiverUid: "bob", fileurl: nil, messageType: .image, receiverType: .user)
        bareMedia.id = f.photo
        let interactive = InteractiveMessage(receiverUid: "bob", type: "form", receiverType: .user, interactiveData: ["a": 1])
        interactive.id = f.mine
        let badTags = text("fine", id: f.mine)
        badTags.tags = [""]
        let edits: [(String, BaseMessage)] = [
            ("empty text", text("", id: f.mine)), ("blank text", text(" \n\t", id: f.mine)),
            ("no id", text("fine", id: 0)), ("negative id", text("fine", id: -3)), ("oversized text", text(secret, id: f.mine)),
            ("custom without changes", nothingToChange), ("media without changes", bareMedia),
            ("interactive", interactive), ("an empty tag", badTags),
        ]
        var errors: [CometChatException?] = []
        for (what, message) in edits {
            let result = await ChangeFixture.closureResult { vault.editMessage(message, onSuccess: $0, onError: $1) }
            XCTAssertEqual(result.errorCode, OfflineErrorCode.invalidMessage.rawValue, what)
            errors.append(result.error)
        }
        for id in [0, -1] {
            let result = await Change.perform(.delete, on: id, vault: vault, viaClosures: id == 0)
            XCTAssertEqual(result.errorCode, OfflineErrorCode.invalidMessage.rawValue, "delete \(id)")
        }
        let reactions: [(Int, String)] = [(0, "👍"), (f.mine, ""), (f.mine, "   "), (f.mine, String(repeating: "🎉", count: 17)), (f.mine, "a\u{7}b")]
        for (id, reaction) in reactions {
            for add in [true, false] {
                let result = await ChangeFixture.closureResult {
                    if add {
                        vault.addReaction(messageId: id, reaction: reaction, onSuccess: $0, onError: $1)
                    } else {
                        vault.removeReaction(messageId: id, reaction: reaction, onSuccess: $0, onError: $1)
                    }
                }
                XCTAssertEqual(result.errorCode, OfflineErrorCode.invalidMessage.rawValue, "reaction \(id) \(reaction.utf8.count) bytes")
                errors.append(result.error)
            }
        }
        for error in errors {
            XCTAssertFalse(error?.description.contains("secret") ?? true, "no content in errors")
        }
        for change in Change.allCases { XCTAssertEqual(f.h.client.callCount(change.method), 0, "\(change): never sent") }
        XCTAssertEqual(try [f.mine, f.photo, f.location].map { try f.row($0) }, rows)
    }

    // MARK: - The static facade

    func testTheStaticFacadeForwardsToTheSharedVault() async throws {
        let f = try await ChangeFixture()
        CometChat.offlineVault = f.h.vault
        defer { CometChat.offlineVault = nil }

        let edit = TextMessage(receiverUid: "bob", text: "edited words", receiverType: .user)
        edit.id = f.mine
        let edited = await ChangeFixture.closureResult { CometChat.editMessage(edit, onSuccess: $0, onError: $1) }
        XCTAssertEqual((edited.message as? TextMessage)?.text, "edited words")
        let again = TextMessage(receiverUid: "bob", text: "edited twice", receiverType: .user)
        again.id = f.mine
        let editedAgain = await ChangeFixture.closureResult { CometChat.edit(message: again, onSuccess: $0, onError: $1) }
        XCTAssertEqual((editedAgain.message as? TextMessage)?.text, "edited twice")
        let added = await ChangeFixture.closureResult { CometChat.addReaction(messageId: f.mine, reaction: "🎉", onSuccess: $0, onError: $1) }
        XCTAssertTrue(Change.addReaction.applied(to: try XCTUnwrap(added.message)))
        let removed = try await CometChat.removeReaction(messageId: f.mine, reaction: "👍")
        XCTAssertTrue(Change.removeReaction.applied(to: removed))
        _ = try await CometChat.addReaction(messageId: f.theirs, reaction: "👀")
        let unreacted = await ChangeFixture.closureResult { CometChat.removeReaction(messageId: f.theirs, reaction: "👀", onSuccess: $0, onError: $1) }
        XCTAssertEqual(unreacted.message?.reactions, [])
        let deleted = await ChangeFixture.closureResult { CometChat.delete(messageId: f.mine, onSuccess: $0, onError: $1) }
        XCTAssertGreaterThan(try XCTUnwrap(deleted.message).deletedAt, 0)
        let deletedToo = await ChangeFixture.closureResult { CometChat.deleteMessage(f.photo, onSuccess: $0, onError: $1) }
        XCTAssertGreaterThan(try XCTUnwrap(deletedToo.message).deletedAt, 0)
        let location = CustomMessage(receiverUid: "bob", receiverType: .user, customData: ["lat": 3], type: "location")
        location.id = f.location
        _ = try await CometChat.editMessage(location)
        _ = try await CometChat.deleteMessage(f.location)

        let cached = try await f.cached { _ in }
        XCTAssertEqual((cached.first { $0.id == f.mine } as? TextMessage)?.text, "edited twice")
        XCTAssertGreaterThan(cached.first { $0.id == f.mine }?.deletedAt ?? 0, 0)
        XCTAssertEqual(cached.first { $0.id == f.mine }?.reactions.map(\.reaction), ["🎉"])
        XCTAssertGreaterThan(cached.first { $0.id == f.photo }?.deletedAt ?? 0, 0)
        XCTAssertGreaterThan(cached.first { $0.id == f.location }?.deletedAt ?? 0, 0)

        CometChat.offlineVault = nil
        f.h.client.resetCallCounts()
        var codes: [String] = []
        do { _ = try await CometChat.deleteMessage(f.theirs) } catch { codes.append(error.errorCode) }
        do { _ = try await CometChat.editMessage(edit) } catch { codes.append(error.errorCode) }
        do { _ = try await CometChat.addReaction(messageId: f.theirs, reaction: "👍") } catch { codes.append(error.errorCode) }
        do { _ = try await CometChat.removeReaction(messageId: f.theirs, reaction: "👍") } catch { codes.append(error.errorCode) }
        XCTAssertEqual(codes, Array(repeating: CometChatConstants.Errors.ERROR_USER_NOT_LOGGED_IN, count: 4), "no vault")
        XCTAssertEqual(f.h.client.totalCallCount, 0)
    }

    private static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}

// MARK: - Support

/// One of the four never-queued changes, as the tests make it on alice's own message (which she
/// already reacted 👍 to): the text becomes "edited words", 🎉 is added, 👍 removed, the message deleted.
enum Change: CaseIterable, CustomStringConvertible {
    // Deletion last: a deleted message can no longer be edited.
    case edit, addReaction, removeReaction, delete

    var description: String {
        switch self {
        case .edit: return "edit"
        case .addReaction: return "add reaction"
        case .removeReaction: return "remove reaction"
        case .delete: return "delete"
        }
    }

    var method: SimulatedMethod {
        switch self {
        case .edit: return .editMessage
        case .addReaction: return .addReaction
        case .removeReaction: return .removeReaction
        case .delete: return .deleteMessage
        }
    }

    /// Whether `message` shows this change.
    func applied(to message: BaseMessage) -> Bool {
        switch self {
        case .edit: return (message as? TextMessage)?.text == "edited words" && message.editedAt > 0
        case .addReaction: return message.reactions.contains { $0.reaction == "🎉" && $0.reactedByMe && $0.count == 1 }
        case .removeReaction: return !message.reactions.contains { $0.reaction == "👍" }
        case .delete: return message.deletedAt > 0
        }
    }

    /// Whether the server's JSON of the message shows this change.
    func applied(to json: JSONValue) -> Bool {
        guard let message = try? WireDecoder(limits: WireLimits()).message(json) else { return false }
        return applied(to: message)
    }

    /// Makes the change through `vault`, with the closure form or the async form.
    static func perform(_ change: Change, on id: Int, vault: OfflineVault, viaClosures: Bool = false) async -> ChangeResult {
        if viaClosures {
            return await ChangeFixture.closureResult { onSuccess, onError in
                switch change {
                case .edit: vault.editMessage(Self.editedText(id), onSuccess: onSuccess, onError: onError)
                case .addReaction: vault.addReaction(messageId: id, reaction: "🎉", onSuccess: onSuccess, onError: onError)
                case .removeReaction: vault.removeReaction(messageId: id, reaction: "👍", onSuccess: onSuccess, onError: onError)
                case .delete: vault.deleteMessage(id, onSuccess: onSuccess, onError: onError)
                }
            }
        }
        do {
            switch change {
            case .edit: return ChangeResult(message: try await vault.editMessage(Self.editedText(id)), error: nil)
            case .addReaction: return ChangeResult(message: try await vault.addReaction(messageId: id, reaction: "🎉"), error: nil)
            case .removeReaction: return ChangeResult(message: try await vault.removeReaction(messageId: id, reaction: "👍"), error: nil)
            case .delete: return ChangeResult(message: try await vault.deleteMessage(id), error: nil)
            }
        } catch {
            return ChangeResult(message: nil, error: error)
        }
    }

    private static func editedText(_ id: Int) -> TextMessage {
        let message = TextMessage(receiverUid: "bob", text: "edited words", receiverType: .user)
        message.id = id
        return message
    }
}

/// What a change answered.
struct ChangeResult: Sendable {
    var message: BaseMessage?
    var error: CometChatException?
    var errorCode: String? { error?.errorCode }
}

/// Alice's cache holding her conversation with bob, read from the server: `mine` (her text, which
/// she reacted 👍 to), `theirs` (bob's text), `gone` (hers, deleted), `photo` (her image with a
/// caption) and `location` (her custom message).
final class ChangeFixture: @unchecked Sendable {
    let h: OutboxHarness
    let mine: Int
    let theirs: Int
    let gone: Int
    let photo: Int
    let location: Int

    init(configure: @escaping (OfflineConfig.Builder) -> Void = { _ in }, file: StaticString = #filePath, line: UInt = #line) async throws {
        h = try OutboxHarness(configure: configure)
        let simulator = h.simulator
        mine = try simulator.postText("original words", from: "alice", to: .user("bob"))
        theirs = try simulator.postText("bob's words", from: "bob", to: .user("alice"))
        gone = try simulator.postText("regretted words", from: "alice", to: .user("bob"))
        try simulator.delete(gone)
        photo = try simulator.postMedia(.image, [SimulatedAttachment(name: "cat.jpg", mimeType: "image/jpeg", url: "https://media.test/cat.jpg")],
                                        caption: "my cat", from: "alice", to: .user("bob"))
        location = try simulator.post(.custom(type: "location", data: ["lat": 1]), from: "alice", to: .user("bob"))
        try simulator.react("👍", to: mine, by: "alice")
        await h.login(file: file, line: line)
        let read = await conversation().fetchPrevious()
        guard case .success(let items) = read.server else {
            XCTFail("the seeding read failed: \(read.server)", file: file, line: line)
            throw CancellationError()
        }
        XCTAssertEqual(items.map(\.id), [mine, theirs, gone, photo, location], file: file, line: line)
        for id in items.map(\.id) { XCTAssertNotNil(try row(id), "cached", file: file, line: line) }
        h.client.resetCallCounts()
    }

    func conversation() -> MessagesRequest {
        MessagesRequest.MessageRequestBuilder(vault: h.vault).set(uid: "bob").set(limit: 50).build()
    }

    /// Everything the cache holds of a message: its payload and the columns written with it.
    func row(_ id: Int) throws -> String? {
        let cache = try XCTUnwrap(h.vault.openCache)
        return try cache.reader.sync { db in
            try db.scalarText("""
                SELECT hex(payload) || '|' || flags || '|' || updated_at || '|' || deleted_at || '|' || status || '|' ||
                    source || '|' || conversation_id || '|' || ifnull(local_id, '') FROM messages WHERE server_id = ?
                """, .int(Int64(id)))
        }
    }

    func serverJSON(_ id: Int) -> JSONValue? { h.simulator.messageJSON(id, as: "alice") }

    func serverText(_ id: Int) -> String? { serverJSON(id)?["data"]?["text"]?.stringValue }

    /// The cached phase of a read of the conversation, offline so only the cache answers.
    func cached(_ configure: (MessagesRequest.MessageRequestBuilder) -> Void) async throws -> [BaseMessage] {
        let builder = MessagesRequest.MessageRequestBuilder(vault: h.vault).set(uid: "bob").set(limit: 50)
        configure(builder)
        let network = h.client.network
        h.client.network = .offline
        defer { h.client.network = network }
        let result = await builder.build().fetchPrevious()
        return try XCTUnwrap(result.cached)
    }

    func cachedMessage(_ id: Int) async throws -> BaseMessage? {
        try await cached { _ in }.first { $0.id == id }
    }

    func perform(_ change: Change, on id: Int, viaClosures: Bool = false) async -> ChangeResult {
        await Change.perform(change, on: id, vault: h.vault, viaClosures: viaClosures)
    }

    /// Runs a closure-form call and waits for its one callback.
    static func closureResult(_ call: (@escaping @Sendable (BaseMessage) -> Void, @escaping @Sendable (CometChatException?) -> Void) -> Void) async -> ChangeResult {
        let outcome = Mutex<[ChangeResult]>([])
        call({ m in outcome.withLock { $0.append(ChangeResult(message: m, error: nil)) } },
             { e in outcome.withLock { $0.append(ChangeResult(message: nil, error: e ?? CometChatException(errorCode: "nil", errorDescription: "nil"))) } })
        await waitUntil { outcome.withLock { !$0.isEmpty } }
        try? await Task.sleep(for: .milliseconds(5))
        let results = outcome.withLock { $0 }
        XCTAssertEqual(results.count, 1, "one callback")
        return results.first ?? ChangeResult(message: nil, error: nil)
    }
}
