import Foundation
import XCTest
@testable import ChatVault

/// A cached message's payload read in place (`BinaryObject`, `WireDecoder.message(stored:)`, what
/// a cached page does) gives the same message as the payload decoded whole, and damaged bytes are
/// refused exactly as `BinaryJSON.decode` refuses them.
final class StoredPayloadTests: XCTestCase {
    private let trusted = WireDecoder(limits: WireLimits(), trusted: true)

    private static let user: JSONValue = ["uid": "bob", "name": "Bob", "avatar": "https://a.example/bob.png", "status": "online",
                                          "tags": ["x", "y"], "metadata": ["k": [1, 2, ["deep": true]]], "lastActiveAt": 1_700_000_000]

    /// Messages of every category, with the optional parts a server sends.
    private static let messages: [JSONValue] = [
        ["id": 1, "conversationId": "alice_user_bob", "sender": user, "receiver": "alice", "receiverType": "user", "category": "message",
         "type": "text", "sentAt": 1_700_000_001, "updatedAt": 1_700_000_002, "data": ["text": "héllo 👋 \u{0}after-nul"],
         "tags": ["pinned"], "mentionedMe": true, "mentionedUsers": [user], "readByMeAt": 1_700_000_003,
         "reactions": [["reaction": "👍", "count": 2, "reactedByMe": true]], "metadata": ["a": 1.5], "unknownField": ["kept": "as is"]],
        ["id": 2, "conversationId": "group_g", "senderUid": "carol", "receiver": "g", "receiverType": "group", "category": "message",
         "type": "image", "sentAt": 1_700_000_010, "parentId": 1, "deletedAt": 1_700_000_020, "deletedBy": "carol",
         "data": ["caption": "a photo", "metadata": ["inData": "wins"],
                  "attachments": [["name": "p.jpg", "extension": "jpg", "mimeType": "image/jpeg", "url": "https://m.example/p.jpg", "size": 1234],
                                  ["url": "https://m.example/q.png"]]]],
        ["id": 3, "conversationId": "alice_user_bob", "sender": ["uid": "alice"], "receiver": "bob", "category": "custom", "type": "location",
         "sentAt": 1_700_000_030, "data": ["customData": ["lat": 1.25, "lon": -3, "nested": [[], [:], .null]], "subType": "pin",
                                           "conversationText": "a place", "updateConversation": false], "localMessageId": "local-3"],
        ["id": 4, "conversationId": "group_g", "sender": ["uid": "dave"], "receiver": "g", "receiverType": "group", "category": "action",
         "type": "groupMember", "sentAt": 1_700_000_040, "data": ["action": "joined", "message": "dave joined"]],
        ["id": 5, "conversationId": "group_g", "sender": ["uid": "erin"], "receiver": "g", "receiverType": "group", "category": "interactive",
         "type": "form", "sentAt": 1_700_000_050, "editedAt": 1_700_000_060, "editedBy": "erin",
         "data": ["interactiveData": ["fields": [1, 2]], "allowSenderInteraction": true, "interactions": [["elementId": "a"]]]],
        ["id": 0, "conversationId": "alice_user_bob", "sender": ["uid": "alice"], "receiver": "bob", "type": "text", "sentAt": 1,
         "data": ["text": ""], "muid": "", "pinnedAt": .null],
    ]

    /// The message's fields as text, and its free-form values (compared as values: a dictionary's
    /// description depends on the instance, not only on its contents).
    private func digest(_ m: BaseMessage) -> (text: String, freeform: [JSONValue?]) {
        var freeform: [JSONValue?] = [m.metaData, m.sender?.metadata]
        var parts = ["\(type(of: m))", "\(m.id)", "\(m.sentAt)", m.conversationId, m.senderUid, m.receiverUid, m.receiverType.rawValue,
                     m.messageType.rawValue, m.messageCategory.rawValue, "\(m.updatedAt)", "\(m.deletedAt)", m.deletedBy, "\(m.editedAt)",
                     m.editedBy, "\(m.readByMeAt)", "\(m.parentMessageId)", "\(m.mentionedMe)", m.localMessageId ?? "-",
                     (m.tags ?? []).joined(separator: ","), m.mentionedUsers.map(\.uid).joined(separator: ","),
                     m.reactions.map { "\($0.reaction)\($0.count)\($0.reactedByMe)" }.joined()]
        if let s = m.sender {
            parts += [s.uid, s.name ?? "-", s.avatar ?? "-", s.status.rawValue, s.tags.joined(separator: ","), "\(s.lastActiveAt)"]
        }
        if let t = m as? TextMessage { parts.append(t.text) }
        if let media = m as? MediaMessage {
            parts += [media.caption ?? "-"] + media.attachments.map { "\($0.fileName)|\($0.fileExtension)|\($0.fileMimeType)|\($0.fileUrl)|\($0.fileSize)" }
        }
        if let c = m as? CustomMessage {
            parts += [c.subType ?? "-", c.conversationText ?? "-", "\(c.updateConversation)"]
            freeform.append(c.customData)
        }
        if let a = m as? ActionMessage { parts += [a.action ?? "-", a.message ?? "-"] }
        if let i = m as? InteractiveMessage {
            parts += ["\(i.allowSenderInteraction)"]
            freeform += [i.interactiveData, i.interactionGoal] + i.interactions.map { $0 }
        }
        return (parts.joined(separator: "\u{1}"), freeform)
    }

    func testAStoredMessageReadInPlaceIsTheSameMessage() throws {
        for (i, wire) in Self.messages.enumerated() {
            let stored = BinaryJSON.encode(wire)
            let whole = try trusted.message(try BinaryJSON.decode(stored))
            let object = try XCTUnwrap(try BinaryObject(payload: stored), "message \(i)")
            let inPlace = try trusted.message(stored: object)
            XCTAssertEqual(digest(inPlace).text, digest(whole).text, "message \(i)")
            XCTAssertEqual(digest(inPlace).freeform, digest(whole).freeform, "message \(i)")
        }
    }

    func testAStoredFieldOfTheWrongKindIsRefusedInPlaceAsWhole() throws {
        // A payload that is not what the decoder expects (here `sender` and `data` as strings) is
        // refused the same way in place as whole: a typed error naming the field.
        for (key, value) in [("sender", JSONValue.string("bob")), ("data", JSONValue.int(3)), ("sentAt", JSONValue.string("soon"))] {
            guard case .object(var fields) = Self.messages[0] else { return XCTFail("not an object") }
            fields[key] = value
            let stored = BinaryJSON.encode(.object(fields))
            let object = try XCTUnwrap(try BinaryObject(payload: stored))
            XCTAssertThrowsError(try trusted.message(stored: object), key) { error in
                XCTAssertEqual((error as? WireError)?.field, key)
            }
            XCTAssertThrowsError(try trusted.message(try BinaryJSON.decode(stored)), key)
        }
        // A stored value that is not an object at all reads as no object.
        XCTAssertNil(try BinaryObject(payload: BinaryJSON.encode(.array([1, 2]))))
    }

    func testDamagedBytesAreRefusedInPlaceExactlyWhenWholeDecodingRefusesThem() throws {
        var generator = SystemRandomNumberGenerator()
        for wire in Self.messages {
            let stored = BinaryJSON.encode(wire)
            var variants: [[UInt8]] = (0..<stored.count).map { Array(stored.prefix($0)) }   // every truncation
            variants.append(stored + [0])                                                   // trailing bytes
            for _ in 0..<300 {                                                              // random byte changes
                var damaged = stored
                for _ in 0..<Int.random(in: 1...3, using: &generator) {
                    damaged[Int.random(in: 0..<damaged.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                }
                variants.append(damaged)
            }
            for bytes in variants {
                let wholeAccepted = (try? BinaryJSON.decode(bytes)) != nil
                var object: BinaryObject?
                var inPlaceAccepted = true
                do { object = try BinaryObject(payload: bytes) } catch { inPlaceAccepted = false }
                XCTAssertEqual(wholeAccepted, inPlaceAccepted, "in place and whole disagree on \(bytes.count) bytes")
                // Whatever is accepted decodes or is refused with a typed error; nothing traps.
                if let object { _ = try? trusted.message(stored: object) }
            }
        }
    }
}
