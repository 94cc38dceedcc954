import ChatVaultSimulator
import Foundation
import XCTest
@testable import ChatVault

/// C23: a malicious or broken server can neither crash nor bloat the client. Numbers out of range,
/// negative ids, nesting and size (known and unknown fields alike) are refused with a typed error
/// before anything is cached; the cache is then unchanged and still reads back. Values nested
/// 100,000 deep in memory are measured, compared, hashed and encoded without recursion.
final class HostilePayloadTests: XCTestCase {
    static let invalid = "ERROR_INVALID_SERVER_RESPONSE"

    /// JSON numbers as a server's JSON text carries them (parsed, not built).
    static func number(_ text: String) -> JSONValue {
        (try? JSONValue(jsonData: Data(text.utf8))) ?? .null
    }

    static let hugeNumbers: [(String, JSONValue)] = [
        ("9223372036854775807", number("9223372036854775807")),
        ("1e19", number("1e19")),
        ("2^63 as a double", .double(9_223_372_036_854_775_808)),
        ("Int64.max", .int(.max)),
        ("2^53 + 1", .int((1 << 53) + 1)),
    ]

    static func setting(_ key: String, _ value: JSONValue) -> @Sendable (JSONValue) -> JSONValue {
        { v in
            var o = v.objectValue ?? [:]
            o[key] = value
            return .object(o)
        }
    }

    /// `levels` arrays around `inner`, built without recursion.
    static func nested(_ levels: Int, around inner: JSONValue = 1) -> JSONValue {
        var value = inner
        for i in 0..<levels { value = i % 2 == 0 ? .array([value]) : .object(["k": value]) }
        return value
    }

    /// Takes a deeply nested value apart level by level: releasing it whole is the Swift
    /// runtime's own recursion, which a value 100,000 deep overflows.
    static func dismantle(_ value: inout JSONValue) {
        while true {
            switch value {
            case .array(let items) where !items.isEmpty: value = items[items.count - 1]
            case .object(let fields) where !fields.isEmpty: value = fields.first?.value ?? .null
            default: return
            }
        }
    }

    // MARK: - Through the engine: a message page

    /// Caches six messages, serves the next page with its last item corrupted, and checks that the
    /// page is refused with the typed error (naming no content) and the cache is unchanged and
    /// still reads back.
    func assertMessagePageRefused(_ name: String, _ corrupt: @escaping @Sendable (JSONValue) -> JSONValue,
                                  file: StaticString = #filePath, line: UInt = #line) async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 6))
        await h.login()
        _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), ids, name, file: file, line: line)
        try h.whileAway { try h.simulator.edit(ids[0], to: .text("changed")) }
        h.client.failNext(.messages, with: .page { page in
            var items = page.items
            items[items.count - 1] = corrupt(items[items.count - 1])
            return WirePage(items: items, nextCursor: page.nextCursor)
        })
        let result = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        XCTAssertEqual(result.failureCode, Self.invalid, name, file: file, line: line)
        if case .failure(let error) = result.server {
            XCTAssertFalse(error.errorDescription.contains("xxxx") || error.errorDescription.contains("secret"),
                           "\(name): no payload content in the error", file: file, line: line)
        }
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), ids, "\(name): nothing of the refused page was cached", file: file, line: line)
        h.client.network = .offline
        let after = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        XCTAssertEqual(after.cached?.map(\.id), ids, "\(name): the cache still reads back", file: file, line: line)
        XCTAssertNotEqual((after.cached?.first as? TextMessage)?.text, "changed", name, file: file, line: line)
    }

    func testTimesAndIdsAtOrBeyond2To63AreRefusedAndTheCacheIsUnchanged() async throws {
        for field in ["updatedAt", "deletedAt", "editedAt", "readAt"] {
            for (label, number) in Self.hugeNumbers where !label.hasPrefix("2^53") {
                try await assertMessagePageRefused("\(field) = \(label)", Self.setting(field, number))
            }
        }
        for field in ["id", "sentAt", "parentId", "quotedMessageId"] {
            for (label, number) in Self.hugeNumbers {
                try await assertMessagePageRefused("\(field) = \(label)", Self.setting(field, number))
            }
        }
    }

    func testNegativeIdsWrongTypesAndNonFiniteNumbersAreRefused() async throws {
        let cases: [(String, @Sendable (JSONValue) -> JSONValue)] = [
            ("id 0", Self.setting("id", 0)),
            ("id -1", Self.setting("id", -1)),
            ("id -2^53", Self.setting("id", .int(-(1 << 53)))),
            ("parentId -1", Self.setting("parentId", -1)),
            ("quotedMessageId -1", Self.setting("quotedMessageId", -1)),
            ("id as a string", Self.setting("id", "12")),
            ("id as a fraction", Self.setting("id", 1.5)),
            ("updatedAt as a list", Self.setting("updatedAt", [1])),
            ("updatedAt NaN", Self.setting("updatedAt", .double(.nan))),
            ("updatedAt infinity", Self.setting("updatedAt", .double(.infinity))),
            ("deletedAt -infinity", Self.setting("deletedAt", .double(-.infinity))),
            ("deletedAt negative", Self.setting("deletedAt", -1)),
        ]
        for (name, corrupt) in cases { try await assertMessagePageRefused(name, corrupt) }
    }

    func testHugeArraysAreRefusedKnownOrUnknown() async throws {
        let limit = WireLimits().maxListCount
        let many = JSONValue.array(Array(repeating: "t", count: limit + 1))
        let millions = JSONValue.array(Array(repeating: .int(1 << 40), count: 400_000))
        try await assertMessagePageRefused("tags", Self.setting("tags", many))
        try await assertMessagePageRefused("mentionedUsers", Self.setting("mentionedUsers", .array(Array(repeating: ["uid": "bob"], count: limit + 1))))
        try await assertMessagePageRefused("an unknown field holding a huge list", Self.setting("extra", millions))
        try await assertMessagePageRefused("a huge list inside data", { v in
            var o = v.objectValue ?? [:]
            var data = o["data"]?.objectValue ?? [:]
            data["unknownList"] = millions
            o["data"] = .object(data)
            return .object(o)
        })
    }

    func testA100DeepFieldIsRefusedKnownOrUnknownAndTheCacheStillReadsBack() async throws {
        let deep = Self.nested(100)
        try await assertMessagePageRefused("100 deep in an unknown field", Self.setting("unknownField", deep))
        try await assertMessagePageRefused("100 deep in metadata", Self.setting("metadata", Self.nested(100, around: ["a": 1])))
        try await assertMessagePageRefused("100 deep in a known list (interactions)", { v in
            var o = v.objectValue ?? [:]
            var data = o["data"]?.objectValue ?? [:]
            data["interactions"] = .array([deep])
            o["data"] = .object(data)
            return .object(o)
        })
        try await assertMessagePageRefused("100 deep under a mentioned user", { v in
            var o = v.objectValue ?? [:]
            o["mentionedUsers"] = [["uid": "bob", "someday": deep]]
            return .object(o)
        })
    }

    func testOversizeUnknownFieldsAreRefusedAndTheCacheDoesNotGrow() async throws {
        let big = JSONValue.string(String(repeating: "x", count: 4 * 1024 * 1024))
        try await assertMessagePageRefused("a 4 MiB unknown field", Self.setting("secretPadding", big))
        try await assertMessagePageRefused("a 4 MiB unknown field inside data", { v in
            var o = v.objectValue ?? [:]
            var data = o["data"]?.objectValue ?? [:]
            data["padding"] = big
            o["data"] = .object(data)
            return .object(o)
        })
        // Several unknown fields, each under the free-form limit, still count as one item.
        let quarter = JSONValue.string(String(repeating: "x", count: 250 * 1024))
        try await assertMessagePageRefused("unknown fields adding up", { v in
            var o = v.objectValue ?? [:]
            for i in 0..<5 { o["pad\(i)"] = quarter }
            return .object(o)
        })
    }

    func testUnknownFieldsWithinTheLimitsAreStoredAndReadBack() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 3))
        await h.login()
        h.client.failNext(.messages, with: .page { page in
            WirePage(items: page.items.map(Self.setting("futureField", Self.nested(20, around: "x"))), nextCursor: page.nextCursor)
        })
        let result = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        XCTAssertEqual(try result.server.get().map(\.id), ids)
        h.client.network = .offline
        let after = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
        XCTAssertEqual(after.cached?.map(\.id), ids, "what is stored reads back")
    }

    // MARK: - Through the engine: conversations, threads, single items

    func testAConversationWithAHugeUpdatedAtOrUnreadCountIsRefusedAndTheCacheIsUnchanged() async throws {
        // (2^53 + 1 is a whole-number case: as a time, a double, it rounds to 2^53, the limit.)
        let cases: [(String, @Sendable (JSONValue) -> JSONValue)] = Self.hugeNumbers.flatMap { label, number in
            (label.hasPrefix("2^53") ? [] : [("updatedAt = \(label)", Self.setting("updatedAt", number))])
                + [("unreadMessageCount = \(label)", Self.setting("unreadMessageCount", number)),
                   ("lastReadMessageId = \(label)", Self.setting("lastReadMessageId", number))]
        } + [
            ("lastMessage.updatedAt = 1e19", { v in
                var o = v.objectValue ?? [:]
                o["lastMessage"] = Self.setting("updatedAt", Self.number("1e19"))(o["lastMessage"] ?? .null)
                return .object(o)
            }),
            ("lastReadMessageId -1", Self.setting("lastReadMessageId", -1)),
            ("100 deep unknown", Self.setting("unknownField", Self.nested(100))),
        ]
        for (name, corrupt) in cases {
            let h = try ReadHarness()
            _ = try h.simulator.seedConversation(between: "alice", and: "bob", count: 2)
            _ = try h.simulator.seedConversation(between: "alice", and: "carol", count: 2)
            await h.login()
            _ = await h.conversations().fetchNext()
            let before = try h.cachedConversationIds()
            XCTAssertEqual(before.count, 2, name)
            let rows = try before.map { try h.cachedConversationRow($0)?.updatedAt }
            h.client.failNext(.conversations, with: .page { page in
                WirePage(items: page.items.map(corrupt), nextCursor: page.nextCursor)
            })
            let result = await h.conversations().fetchNext()
            XCTAssertEqual(result.failureCode, Self.invalid, name)
            XCTAssertEqual(try h.cachedConversationIds(), before, name)
            XCTAssertEqual(try before.map { try h.cachedConversationRow($0)?.updatedAt }, rows, "\(name): cache unchanged")
            h.client.network = .offline
            let after = await h.conversations().fetchNext()
            XCTAssertEqual(after.cached?.count, 2, "\(name): the cache still reads back")

            // The single-item lookup of the same conversation.
            h.client.network = .online
            h.client.failNext(.conversation, with: .payload(corrupt))
            let single = await h.vault.getConversation(conversationWith: "bob", conversationType: .user)
            XCTAssertNotNil(single.cached, name)
            guard case .failure(let error) = single.server else { return XCTFail("\(name): accepted") }
            XCTAssertEqual(error.errorCode, Self.invalid, name)
            XCTAssertEqual(try before.map { try h.cachedConversationRow($0)?.updatedAt }, rows, "\(name): cache unchanged")
        }
    }

    func testAThreadWithAHugeUpdatedAtIsRefusedAndTheCacheIsUnchanged() async throws {
        for (label, number) in Self.hugeNumbers where !label.hasPrefix("2^53") {
            let h = try ReadHarness()
            try h.simulator.addGroup("team", owner: "alice", members: ["bob", "carol"])
            let parent = try h.simulator.postText("p", from: "bob", to: .group("team"))
            _ = try h.simulator.postText("r", from: "carol", to: .group("team"), parentId: parent)
            await h.login()
            _ = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
            let before = try h.allCachedMessageIds()
            h.client.failNext(.threads, with: .page { page in
                WirePage(items: page.items.map(Self.setting("updatedAt", number)), nextCursor: page.nextCursor)
            })
            let result = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
            XCTAssertEqual(result.failureCode, Self.invalid, label)
            XCTAssertEqual(try h.allCachedMessageIds(), before, "\(label): cache unchanged")
            h.client.network = .offline
            let after = await h.threads { $0.set(participatedByMe: false) }.fetchNext()
            XCTAssertEqual(after.cached?.map(\.parentMessageId), [parent], "\(label): the cache still reads back")
        }
    }

    func testGetMessageDetailsRefusesHugeTimesAndTheCacheIsUnchanged() async throws {
        for (label, number) in Self.hugeNumbers where !label.hasPrefix("2^53") {
            for field in ["updatedAt", "deletedAt"] {
                let h = try ReadHarness()
                let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 3))
                await h.login()
                _ = await h.messages { $0.set(uid: "bob") }.fetchPrevious()
                h.client.failNext(.message, with: .payload(Self.setting(field, number)))
                let result = await h.vault.getMessageDetails(ids[1])
                XCTAssertEqual(result.cached?.id, ids[1], "\(field) = \(label)")
                guard case .failure(let error) = result.server else { return XCTFail("\(field) = \(label): accepted") }
                XCTAssertEqual(error.errorCode, Self.invalid, "\(field) = \(label)")
                XCTAssertEqual(try h.cachedIds("alice_user_bob"), ids, "\(field) = \(label): cache unchanged")
                let again = await h.vault.getMessageDetails(ids[1])
                XCTAssertEqual(again.cached?.deletedAt, 0, "\(field) = \(label): the cached copy is the old one")
            }
        }
    }

    // MARK: - The decoder itself: typed errors naming the field

    func testTheDecoderNamesTheFieldAndTheProblemNeverTheValue() throws {
        let decoder = WireDecoder(limits: WireLimits())
        let base: JSONValue = ["id": 5, "conversationId": "a_user_b", "sender": ["uid": "b"], "receiver": "a",
                               "type": "text", "category": "message", "sentAt": 100, "data": ["text": "hi"]]
        XCTAssertNoThrow(try decoder.message(base))
        func problem(_ key: String, _ value: JSONValue) -> WireError? {
            do {
                _ = try decoder.message(Self.setting(key, value)(base))
                return nil
            } catch {
                return error
            }
        }
        XCTAssertEqual(problem("updatedAt", Self.number("1e19")), WireError(entity: "message", field: "updatedAt", problem: .invalid("out of range")))
        XCTAssertEqual(problem("deletedAt", Self.number("9223372036854775807")),
                       WireError(entity: "message", field: "deletedAt", problem: .invalid("out of range")))
        XCTAssertEqual(problem("id", .int(.max)), WireError(entity: "message", field: "id", problem: .invalid("out of range")))
        XCTAssertEqual(problem("id", 0), WireError(entity: "message", field: "id", problem: .invalid("out of range")))
        XCTAssertEqual(problem("id", "x"), WireError(entity: "message", field: "id", problem: .wrongType(expected: "a whole number")))
        XCTAssertEqual(problem("readAt", .double(.nan)), WireError(entity: "message", field: "readAt", problem: .invalid("out of range")))
        XCTAssertEqual(problem("zzz", .string(String(repeating: "secret", count: 200_000))),
                       WireError(entity: "message", field: "(item)", problem: .tooLong(limit: WireLimits().maxItemBytes)))
        XCTAssertEqual(problem("zzz", Self.nested(100)), WireError(entity: "message", field: "(item)", problem: .invalid("nested too deeply")))
        let text = problem("zzz", .string(String(repeating: "secret", count: 200_000)))?.description ?? ""
        XCTAssertFalse(text.contains("secret") || text.contains("zzz"), text)
        // The deepest structure the decoder knows, with free-form JSON at its limit, passes.
        let full = Self.nested(WireLimits().maxDepth - 1, around: ["a": 1])
        let conversation: JSONValue = ["conversationId": "a_user_b", "conversationType": "user", "conversationWith": ["uid": "b"],
                                       "lastMessage": Self.setting("mentionedUsers", [["uid": "c", "metadata": full]])(base)]
        XCTAssertNoThrow(try decoder.conversation(conversation))
        let stored = try BinaryJSON.decode(BinaryJSON.encode(conversation))
        XCTAssertEqual(stored, conversation, "what passes the decoder reads back from its stored form")
        XCTAssertNoThrow(try WireDecoder(limits: WireLimits(), trusted: true).conversation(stored))
    }

    // MARK: - 100,000 deep in memory

    func testAValueNested100000DeepInMemoryNeverOverflowsTheStack() throws {
        let depth = 100_000
        var deep = Self.nested(depth)
        var twin = Self.nested(depth)
        var other = Self.nested(depth, around: 2)
        defer {
            Self.dismantle(&deep)
            Self.dismantle(&twin)
            Self.dismantle(&other)
        }
        // The decoder: free-form, an unknown field, a known list, a whole item.
        let decoder = WireDecoder(limits: WireLimits())
        var message: JSONValue = ["id": 5, "conversationId": "a_user_b", "senderUid": "b", "receiver": "a", "type": "text",
                                  "sentAt": 100, "metadata": deep]
        XCTAssertThrowsError(try decoder.message(message)) { error in
            XCTAssertEqual(error as? WireError, WireError(entity: "message", field: "(item)", problem: .invalid("nested too deeply")))
        }
        message = .null
        XCTAssertThrowsError(try decoder.user(["uid": "b", "metadata": deep]))
        XCTAssertThrowsError(try decoder.conversation(["conversationId": "a_user_b", "conversationType": "user", "conversationWith": ["uid": "b", "x": deep]]))
        XCTAssertNotNil(deep.extentBreach(maxDepth: 32))
        // Equality and hashing.
        // (XCTAssertEqual would describe the values on failure: recursion of its own.)
        XCTAssertTrue(deep == twin)
        XCTAssertFalse(deep == other)
        XCTAssertEqual(deep.hashValue, twin.hashValue)
        XCTAssertEqual(Set([deep, twin, other]).count, 2)
        // Binary encoding writes it; decoding refuses it as malformed, never recursing past its bound.
        let bytes = BinaryJSON.encode(deep)
        XCTAssertNil(deep.extentBreach(maxDepth: .max, maxBytes: bytes.count), "measured as encoded")
        XCTAssertEqual(deep.extentBreach(maxDepth: .max, maxBytes: bytes.count - 1), .bytes)
        XCTAssertThrowsError(try BinaryJSON.decode(bytes))
        // Foundation: JSON text is "null", the Foundation form is cut at the bound.
        XCTAssertEqual(deep.jsonData(), Data("null".utf8))
        var levels = 0
        var current: Any = deep.foundationValue
        while true {
            if let array = current as? [Any], let first = array.first { current = first } else if let dict = current as? [String: Any], let first = dict.first?.value { current = first } else { break }
            levels += 1
        }
        XCTAssertEqual(levels, JSONValue.maxFoundationDepth)
        XCTAssertTrue(current is NSNull)
        var foundation: Any = 1
        for _ in 0...JSONValue.maxFoundationDepth { foundation = [foundation] }
        XCTAssertThrowsError(try JSONValue(foundation: foundation))
        XCTAssertThrowsError(try JSONValue(jsonData: Data((String(repeating: "[", count: depth) + String(repeating: "]", count: depth)).utf8)))
    }

    func testMeasuringMatchesTheStoredSize() {
        let values: [JSONValue] = [
            .null, true, 0, -1, .int(.max), .int(.min), 1.5, "", "héllo", .string(String(repeating: "x", count: 300)),
            [1, [2, [3]]], ["b": 1, "a": ["c": nil]], .array(Array(repeating: "t", count: 200)),
        ]
        for value in values {
            let size = BinaryJSON.encode(value).count
            XCTAssertNil(value.extentBreach(maxDepth: 64, maxBytes: size), "\(value)")
            XCTAssertEqual(value.extentBreach(maxDepth: 64, maxBytes: size - 1), .bytes, "\(value)")
            XCTAssertEqual(try BinaryJSON.decode(BinaryJSON.encode(value)), value)
        }
        XCTAssertEqual(Self.nested(3).extentBreach(maxDepth: 2), .depth)
        XCTAssertNil(Self.nested(3).extentBreach(maxDepth: 3))
    }
}
