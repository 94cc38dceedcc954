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

/// The catch-up's resumable tokens: they round-trip, refuse what is not theirs, and fit the
/// engine's 4096-byte column whatever the number of gaps.
final class CatchUpPointTests: XCTestCase {
    func testTokensRoundTripRefuseGarbageAndStayWithinTheEnginesLimit() {
        let point = CatchUpPoint(since: "s1_2_3", next: "s9_9_9", gaps: [.init(room: "!a:x", from: "s1_2_3"), .init(room: "!b:x", from: "t5-6")])
        XCTAssertEqual(CatchUpPoint(token: point.token), point)
        for bad in ["cvm1.", "cvm1.!!!", "cvm1." + Data("[]".utf8).base64EncodedString(), "cvm1." + Data(#"{"s":"a","n":"b","g":[["not-a-room","f"]]}"#.utf8).base64EncodedString(),
                    "cvm1." + String(repeating: "A", count: 5000)] {
            XCTAssertNil(CatchUpPoint(token: bad), bad.prefix(40).description)
        }
        let many = CatchUpPoint(since: "s", next: "n", gaps: (0..<500).map { .init(room: "!room\($0):example.org", from: String(repeating: "t", count: 40)) })
        XCTAssertLessThanOrEqual(many.token.utf8.count, CatchUpPoint.maxTokenBytes)
        XCTAssertGreaterThan(CatchUpPoint(token: many.token)?.gaps.count ?? 0, 10)
    }
}
