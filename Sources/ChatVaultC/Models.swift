import ChatVault
import Foundation

/// Models as the JSON text the C API documents (`cv_vault_fetch_messages_sync`): the public
/// fields of the Swift models, translated, nothing computed here.
enum CModels {
    static func message(_ m: BaseMessage) -> JSONValue {
        var o: [String: JSONValue] = [
            "id": .int(Int64(m.id)),
            "conversationId": .string(m.conversationId),
            "sender": .string(m.senderUid),
            "receiver": .string(m.receiverUid),
            "receiverType": .string(m.receiverType.rawValue),
            "category": .string(m.messageCategory.rawValue),
            "type": .string(m.messageType.rawValue),
            "sentAt": .int(Int64(m.sentAt)),
            "editedAt": .double(m.editedAt),
            "deletedAt": .double(m.deletedAt),
            "deliveredAt": .double(m.deliveredAt),
            "readAt": .double(m.readAt),
            "status": .string(m.messageStatus.rawValue),
            "source": .string(m.source.rawValue),
            "parentMessageId": .int(Int64(m.parentMessageId)),
            "replyCount": .int(Int64(m.replyCount)),
            "quotedMessageId": .int(Int64(m.quotedMessageId)),
            "reactions": .array(m.reactions.map { ["reaction": .string($0.reaction), "count": .int(Int64($0.count)), "reactedByMe": .bool($0.reactedByMe)] }),
        ]
        o["localMessageId"] = m.localMessageId.map { .string($0) } ?? .null
        if let reason = m.failureReason { o["failureReason"] = .string(reason.rawValue) }
        if let text = m as? TextMessage { o["text"] = .string(text.text) }
        if let media = m as? MediaMessage, let attachment = media.attachment {
            var a: [String: JSONValue] = ["url": .string(attachment.fileUrl)]
            if let path = attachment.localPath { a["localPath"] = .string(path) }
            o["attachment"] = .object(a)
            if let caption = media.caption { o["caption"] = .string(caption) }
        }
        if let custom = m as? CustomMessage, let data = custom.customData { o["customData"] = data }
        return .object(o)
    }

    static func conversation(_ c: Conversation) -> JSONValue {
        var o: [String: JSONValue] = [
            "conversationId": c.conversationId.map { .string($0) } ?? .null,
            "conversationType": .string(c.conversationType.rawValue),
            "unreadMessageCount": .int(Int64(c.unreadMessageCount)),
            "updatedAt": .double(c.updatedAt),
            "lastMessage": c.lastMessage.map(message) ?? .null,
        ]
        if let user = c.conversationWith as? User { o["with"] = .string(user.uid) }
        if let group = c.conversationWith as? Group { o["with"] = .string(group.guid) }
        return .object(o)
    }

    /// A two-phase read's result: {"cached": [...] | null, "server": [...] | null, "serverError": {...} | null}.
    static func phases<Item>(cached: [Item]?, server: Result<[Item], CometChatException>, _ render: (Item) -> JSONValue) -> JSONValue {
        var o: [String: JSONValue] = ["cached": cached.map { .array($0.map(render)) } ?? .null]
        switch server {
        case .success(let items):
            o["server"] = .array(items.map(render))
            o["serverError"] = .null
        case .failure(let error):
            o["server"] = .null
            o["serverError"] = ["code": .string(error.errorCode), "message": .string(error.errorDescription)]
        }
        return .object(o)
    }

    /// JSON text, written directly (Foundation's JSONSerialization took ~7 ms for a 30-message page
    /// here, 97 % of the C call: `chatvault bench capi`). Keys sorted, no spaces, strings escaped
    /// as RFC 8259 requires, a non-finite number as null; nesting is what the models build (shallow).
    static func text(_ value: JSONValue) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(4096)
        write(value, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out += Array("null".utf8)
        case .bool(let b): out += Array((b ? "true" : "false").utf8)
        case .int(let n): out += Array(String(n).utf8)
        case .double(let d):
            if !d.isFinite { out += Array("null".utf8) } else if d == d.rounded(), abs(d) < 1e15 { out += Array(String(Int64(d)).utf8) } else { out += Array("\(d)".utf8) }
        case .string(let s): quote(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(item, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let fields):
            out.append(UInt8(ascii: "{"))
            for (i, key) in fields.keys.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                quote(key, into: &out)
                out.append(UInt8(ascii: ":"))
                write(fields[key] ?? .null, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func quote(_ s: String, into out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0a: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0d: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20: out += [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xf)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
