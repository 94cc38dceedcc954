import ChatVault
@testable import ChatVaultMatrix
import Foundation
import XCTest

/// What a homeserver sends is checked field by field: events of the wrong shape are skipped,
/// never a crash; the access token never shows in a description or an error.
final class MatrixHostileEventTests: XCTestCase {
    let room = "!room:localhost"

    func backend() throws -> MatrixBackend {
        let session = MatrixSession(userId: "@alice:localhost", deviceId: "DEV", accessToken: "syt_secret_token_value")
        return MatrixBackend(homeserver: try XCTUnwrap(URL(string: "http://127.0.0.1:9")), session: session)
    }

    var valid: JSONValue {
        ["type": "m.room.message", "event_id": "$e1", "sender": "@bob:localhost", "origin_server_ts": 1_780_000_000_000,
         "content": ["msgtype": "m.text", "body": "hello"]]
    }

    func render(_ event: JSONValue, _ backend: MatrixBackend) -> JSONValue? {
        let ids = (try? backend.identities.ids(for: MatrixBackend.refs(of: [event], room: room))) ?? [:]
        return backend.renderMessage(event, room: room, ids: ids)
    }

    func testAValidEventRendersAndWrongShapesAreSkipped() throws {
        let backend = try backend()
        let good = try XCTUnwrap(render(valid, backend))
        XCTAssertEqual(good["data"]?["text"]?.stringValue, "hello")
        XCTAssertEqual(good["conversationId"]?.stringValue, "group_\(room)")
        XCTAssertEqual(good["sentAt"]?.intValue, 1_780_000_000)

        let hostile: [JSONValue] = [
            .null, "text", 42, [],
            ["type": "m.room.message"],
            ["type": "m.room.message", "event_id": 7, "sender": "@bob:localhost", "content": ["msgtype": "m.text", "body": "x"]],
            ["type": "m.room.message", "event_id": "no-dollar", "sender": "@bob:localhost", "content": ["msgtype": "m.text", "body": "x"]],
            ["type": "m.room.message", "event_id": "$e2", "sender": "bob", "content": ["msgtype": "m.text", "body": "x"]],
            ["type": "m.room.message", "event_id": "$e3", "sender": "@bob:localhost", "content": "not an object"],
            ["type": "m.room.message", "event_id": "$e4", "sender": "@bob:localhost", "content": ["msgtype": "m.text", "body": 5]],
            ["type": "m.room.message", "event_id": "$e5", "sender": "@bob:localhost", "content": ["msgtype": "m.image", "body": "x", "url": "https://evil"]],
            ["type": "m.room.message", "event_id": "$e6", "sender": "@bob:localhost", "content": ["msgtype": "m.unknown", "body": "x"]],
            ["type": "m.room.encrypted", "event_id": "$e7", "sender": "@bob:localhost", "content": ["algorithm": "m.megolm.v1.aes-sha2"]],
            ["type": "m.room.message", "event_id": .string("$" + String(repeating: "x", count: 300)), "sender": "@bob:localhost",
             "content": ["msgtype": "m.text", "body": "x"]],
        ]
        for (i, event) in hostile.enumerated() {
            XCTAssertNil(render(event, backend), "hostile event \(i) must be skipped")
        }
    }

    func testHostileNumbersAreClampedNotTrapped() throws {
        let backend = try backend()
        for ts: JSONValue in [-1, .int(.max), .int(.min), 1e300, "soon", .null] {
            guard case .object(var e) = valid else { return XCTFail() }
            e["origin_server_ts"] = ts
            e["event_id"] = .string("$t\(UUID().uuidString)")
            e["content"] = ["msgtype": "m.image", "body": "a.png", "url": "mxc://localhost/x",
                            "info": ["size": .int(.max), "mimetype": .string(String(repeating: "m", count: 1000))]]
            let m = try XCTUnwrap(render(.object(e), backend), "\(ts)")
            let sentAt = try XCTUnwrap(m["sentAt"]?.intValue)
            XCTAssertTrue(sentAt >= 0 && sentAt <= WireLimits.maxWireNumber)
            XCTAssertNil(m["data"]?["attachments"]?.arrayValue?.first?["size"], "a size over 2^53 is left out")
            XCTAssertNil(m["data"]?["attachments"]?.arrayValue?.first?["mimeType"], "an oversize mime type is left out")
        }
    }

    func testRandomMutationsOfAnEventNeverCrash() throws {
        let backend = try backend()
        var generator = SystemRandomNumberGenerator()
        let values: [JSONValue] = [.null, true, 0, -1, .int(.max), 1.5, "", "$x", "@u:s", "!r:s", [], [:], ["body": 1], ["rel_type": "m.thread", "event_id": 3]]
        let keys = ["type", "event_id", "sender", "origin_server_ts", "content", "unsigned", "redacts"]
        let contentKeys = ["msgtype", "body", "url", "info", "filename", "m.relates_to", "m.new_content", MatrixBackend.metadataKey, MatrixBackend.muidKey]
        for i in 0..<5000 {
            guard case .object(var e) = valid, case .object(var c)? = e["content"] else { return XCTFail() }
            for _ in 0..<3 {
                if Bool.random(using: &generator) {
                    e[keys.randomElement(using: &generator)!] = values.randomElement(using: &generator)!
                } else {
                    c[contentKeys.randomElement(using: &generator)!] = values.randomElement(using: &generator)!
                }
            }
            if e["content"] != nil, case .object = e["content"]! {} else if Bool.random(using: &generator) { e["content"] = .object(c) }
            e["event_id"] = e["event_id"] == valid["event_id"] ? .string("$m\(i)") : e["event_id"]
            _ = render(.object(e), backend)
            _ = MatrixBackend.messageData(c)
        }
    }

    /// A reply as Element sends it, with the relations Synapse bundles (its latest edit, a thread).
    var reply: JSONValue {
        ["type": "m.room.message", "event_id": "$reply", "sender": "@bob:localhost", "origin_server_ts": 1_780_000_000_500,
         "content": ["msgtype": "m.text", "body": "> <@carol:localhost> quoted\n> more\n\nthe reply",
                     "format": "org.matrix.custom.html", "formatted_body": "<mx-reply><blockquote>quoted</blockquote></mx-reply>the reply",
                     "m.relates_to": ["m.in_reply_to": ["event_id": "$e1"]]],
         "unsigned": ["m.relations": [
             "m.replace": ["type": "m.room.message", "event_id": "$edit", "sender": "@bob:localhost", "origin_server_ts": 1_780_000_001_000,
                           "content": ["msgtype": "m.text", "body": "* new", "m.new_content": ["msgtype": "m.text", "body": "the new reply"],
                                       "m.relates_to": ["rel_type": "m.replace", "event_id": "$reply"]]],
             "m.thread": ["count": 3, "current_user_participated": false],
         ]]]
    }

    func testRepliesAndBundledRelationsRenderAndTheirWrongShapesAreIgnored() throws {
        let backend = try backend()
        let quotedId = try backend.identities.id(for: MessageRef(MatrixIds.ref(room: room, event: "$e1"), timeMs: 1_780_000_000_000))
        var ids = (try? backend.identities.ids(for: MatrixBackend.refs(of: [reply], room: room))) ?? [:]
        ids[MatrixIds.ref(room: room, event: "$e1")] = quotedId
        let m = try XCTUnwrap(backend.renderMessage(reply, room: room, ids: ids))
        XCTAssertEqual(m["data"]?["text"]?.stringValue, "the new reply", "the bundled edit applies")
        XCTAssertEqual(m["editedAt"]?.intValue, 1_780_000_001)
        XCTAssertEqual(m["quotedMessageId"]?.intValue, Int64(quotedId))
        XCTAssertEqual(m["replyCount"]?.intValue, 3)

        // Without the edit the fallback quote is stripped; an edit by someone else is ignored.
        guard case .object(var e) = reply else { return XCTFail() }
        e["unsigned"] = ["m.relations": ["m.replace": ["sender": "@mallory:localhost", "origin_server_ts": 1_780_000_002_000,
                                                      "content": ["m.new_content": ["msgtype": "m.text", "body": "forged"],
                                                                  "m.relates_to": ["rel_type": "m.replace", "event_id": "$reply"]]]]]
        let plain = try XCTUnwrap(backend.renderMessage(.object(e), room: room, ids: ids))
        XCTAssertEqual(plain["data"]?["text"]?.stringValue, "the reply")
        XCTAssertNil(plain["editedAt"])

        XCTAssertEqual(MatrixBackend.strippingReplyFallback("> <@a:b> x\n\nreply"), "reply")
        XCTAssertEqual(MatrixBackend.strippingReplyFallback("> only a quote"), "")
        XCTAssertEqual(MatrixBackend.strippingReplyFallback("no quote\n> later"), "no quote\n> later")
        // A thread's fallback reply quotes nothing.
        XCTAssertNil(MatrixBackend.quotedEvent(["rel_type": "m.thread", "event_id": "$root", "is_falling_back": true,
                                                "m.in_reply_to": ["event_id": "$latest"]]))
        XCTAssertEqual(MatrixBackend.quotedEvent(["rel_type": "m.thread", "event_id": "$root", "m.in_reply_to": ["event_id": "$q"]]), "$q")

        // The fallback sent is escaped HTML and at most five quoted lines.
        let sent = MatrixBackend.replyContent(["msgtype": "m.text", "body": "<b>hi</b>"],
                                              quoting: ["event_id": "$q", "sender": "@c:d", "content": ["body": "1\n2\n3\n4\n5\n6\n<script>"]], room: room)
        XCTAssertEqual(sent["body"]?.stringValue, "> <@c:d> 1\n> 2\n> 3\n> 4\n> 5\n\n<b>hi</b>")
        XCTAssertFalse(sent["formatted_body"]?.stringValue?.contains("<script>") ?? true)
        XCTAssertFalse(sent["formatted_body"]?.stringValue?.contains("<b>") ?? true)
        XCTAssertEqual(sent["m.relates_to"]?["m.in_reply_to"]?["event_id"]?.stringValue, "$q")
    }

    func testRandomMutationsOfRepliesAndBundledRelationsNeverCrash() throws {
        let backend = try backend()
        var generator = SystemRandomNumberGenerator()
        let values: [JSONValue] = [.null, true, 0, -1, .int(.max), .int(.min), 1e300, "", "$e1", "$reply", "@bob:localhost", "> x", [], [:],
                                   ["event_id": "$e1"], ["m.new_content": 1], ["count": -5], ["count": .int(.max)]]
        let paths: [[String]] = [
            ["content", "body"], ["content", "m.relates_to"], ["content", "m.relates_to", "m.in_reply_to"],
            ["content", "m.relates_to", "m.in_reply_to", "event_id"], ["content", "m.relates_to", "rel_type"],
            ["unsigned"], ["unsigned", "m.relations"], ["unsigned", "m.relations", "m.replace"],
            ["unsigned", "m.relations", "m.replace", "sender"], ["unsigned", "m.relations", "m.replace", "content"],
            ["unsigned", "m.relations", "m.replace", "content", "m.new_content"], ["unsigned", "m.relations", "m.replace", "origin_server_ts"],
            ["unsigned", "m.relations", "m.thread"], ["unsigned", "m.relations", "m.thread", "count"], ["unsigned", "redacted_because"],
        ]
        func set(_ value: JSONValue, at path: ArraySlice<String>, in json: JSONValue) -> JSONValue {
            guard let key = path.first else { return value }
            var o = json.objectValue ?? [:]
            o[key] = set(value, at: path.dropFirst(), in: o[key] ?? .null)
            return .object(o)
        }
        let ids = (try? backend.identities.ids(for: MatrixBackend.refs(of: [reply, valid], room: room))) ?? [:]
        for _ in 0..<5000 {
            var e = reply
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                e = set(values.randomElement(using: &generator)!, at: paths.randomElement(using: &generator)![...], in: e)
            }
            if let m = backend.renderMessage(e, room: room, ids: ids) {
                XCTAssertNotNil(m["id"]?.intValue)
                if let count = m["replyCount"]?.intValue { XCTAssertTrue(count > 0 && count <= 1 << 31) }
                if let at = m["editedAt"]?.intValue { XCTAssertTrue(at >= 0 && at <= WireLimits.maxWireNumber) }
            }
            _ = MatrixBackend.quotedEvent(e["content"]?["m.relates_to"])
            _ = MatrixBackend.strippingReplyFallback(e["content"]?["body"]?.stringValue ?? "")
        }
    }

    func testAHostileStoredMapOrReactionIsIgnored() throws {
        let backend = try backend()
        let store = MemoryBackendState()
        backend.attach(state: store)
        for text in ["", "{", "[]", #"{"@bob:localhost": "!notalist"}"#, #"{"not-a-user": ["!r:s"]}"#, String(repeating: "[", count: 10_000)] {
            try store.set(text, for: MatrixBackend.directKey)
            backend.attach(state: store)
            backend.ensureDirectMap()
            XCTAssertEqual(backend.state.withLock { $0.rooms.roomWith }, [:], text.prefix(20).description)
        }
        for text in ["", "{", #"{"t": 1}"#, #"{"t": "$e1", "k": "", "s": "@bob:localhost"}"#, #"{"t": "$e1", "k": "x", "s": "bob"}"#] {
            try store.set(text, for: MatrixBackend.reactionKey(room: room, event: "$r"))
            XCTAssertNil(backend.knownReaction(room: room, event: "$r"), text)
        }
        try store.set(#"{"t": "$e1", "k": "👍", "s": "@bob:localhost", "ts": -5}"#, for: MatrixBackend.reactionKey(room: room, event: "$r"))
        XCTAssertEqual(backend.knownReaction(room: room, event: "$r"), .init(target: "$e1", key: "👍", sender: "@bob:localhost", ts: 0))
    }

    func testTheAccessTokenNeverShows() throws {
        let backend = try backend()
        XCTAssertFalse(backend.session.description.contains("syt_secret_token_value"))
        XCTAssertFalse(String(describing: backend.session).contains("syt_secret_token_value"))
        XCTAssertFalse("\(backend.session)".contains("syt_"))
    }
}

/// Matrix content URIs as the media cache keys them.
final class MatrixMediaURLTests: XCTestCase {
    func testContentURIsParseAndOnlyWellFormedOnes() {
        XCTAssertEqual(MatrixMedia.parse("mxc://localhost/AbC123")?.server, "localhost")
        XCTAssertEqual(MatrixMedia.parse("mxc://localhost/AbC123")?.id, "AbC123")
        for bad in ["", "mxc://", "mxc://server", "mxc:///id", "mxc://server/", "mxc://server/a/b", "https://server/id",
                    "mxc://server/id with space", "mxc://server/" + String(repeating: "x", count: 2000)] {
            XCTAssertNil(MatrixMedia.parse(bad), bad)
        }
    }
}

/// The catch-up's plan and tokens: the plan round-trips through the store's text, a token names
/// a plan and a room index and nothing else, 500 rooms fit, and what is not theirs is refused
/// without a trap, as is an older version's token that is not well formed.
final class CatchUpPlanTests: XCTestCase {
    func testPlansAndTokensRoundTripRefuseGarbageAndHoldHundredsOfRooms() throws {
        let plan = CatchUpPlan(next: "s9_9_9", rooms: [.init(room: "!a:x", to: "s1_2_3", receipts: [.init(event: "$e", user: "@bob:x", ts: 17)]),
                                                      .init(room: "!b:x", to: "")])
        XCTAssertEqual(CatchUpPlan(text: plan.text), plan, "rooms, their bounds and their receipts")
        let token = plan.token(at: 1)
        XCTAssertEqual(CatchUpPlan.place(of: token)?.id, plan.id)
        XCTAssertEqual(CatchUpPlan.place(of: token)?.index, 1)
        XCTAssertEqual(CatchUpPlan.place(of: token)?.skip, 0)
        XCTAssertEqual(CatchUpPlan.place(of: plan.token(at: 1, skip: 40))?.skip, 40, "part of a room delivered")
        XCTAssertEqual(plan.token(at: 1, skip: 0), token)
        XCTAssertNotEqual(CatchUpPlan(next: "n", rooms: []).id, CatchUpPlan(next: "n", rooms: []).id, "each plan its own id")
        for bad in ["cvm2.", "cvm2.abc", "cvm2.abc.", "cvm2..1", "cvm2.ABC.1", "cvm2.abc.-1", "cvm2.abc.99999999999",
                    "cvm2.abc.1x", "cvm2.a b.1", "cvm2.abc.1.0", "cvm2.abc.1.", "cvm2.abc.1.2.3", "cvm2.abc.1.-2", "cvm2." + String(repeating: "a", count: 200) + ".1"] {
            XCTAssertNil(CatchUpPlan.place(of: bad), bad)
        }
        for bad in ["", "{}", "[]", #"{"id":"abc","next":"n","rooms":[["not-a-room",""]]}"#, #"{"id":"abc","next":"","rooms":[]}"#,
                    #"{"id":"A B","next":"n","rooms":[]}"#, #"{"id":"abc","next":"n","rooms":[["!a:x","bad token"]]}"#,
                    #"{"id":"abc","next":"n","rooms":[["!a:x","",7]]}"#, #"{"id":"abc","next":"n","rooms":[["!a:x","",[["$e","@b:x",-1]]]]}"#,
                    #"{"id":"abc","next":"n","rooms":[["!a:x","",[["not-an-event","@b:x",1]]]]}"#,
                    #"{"id":"abc","next":"n","rooms":[["!a:x","",[["$e","@b:x",1],["$e","@b:x",1],["$e","@b:x",1],["$e","@b:x",1],["$e","@b:x",1]]]]}"#] {
            XCTAssertNil(CatchUpPlan(text: bad), bad)
        }
        let many = CatchUpPlan(next: "s_next", rooms: (0..<500).map { .init(room: "!room\($0):example.org", to: String(repeating: "t", count: 40)) })
        XCTAssertLessThan(many.text.utf8.count, 1 << 20, "within the state store's value limit")
        XCTAssertEqual(CatchUpPlan(text: many.text)?.rooms.count, 500)
        XCTAssertLessThanOrEqual(many.token(at: 500).utf8.count, 128)
    }

    func testAnOlderVersionsTokenIsReadForItsGapsAndGarbageIsRefused() {
        let json = #"{"s":"s1_2_3","n":"s9_9_9","g":[["!a:x","s1_2_3"],["!b:x",""]]}"#
        let token = "cvm1." + Data(json.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
        let old = LegacyCatchUpPoint(token: token)
        XCTAssertEqual(old?.next, "s9_9_9")
        XCTAssertEqual(old?.gaps.map(\.room), ["!a:x", "!b:x"])
        for bad in ["cvm1.", "cvm1.!!!", "cvm1." + Data("[]".utf8).base64EncodedString(),
                    "cvm1." + Data(#"{"s":"a","n":"b","g":[["not-a-room","f"]]}"#.utf8).base64EncodedString(),
                    "cvm1." + String(repeating: "A", count: 5000)] {
            XCTAssertNil(LegacyCatchUpPoint(token: bad), bad.prefix(40).description)
        }
    }
}
