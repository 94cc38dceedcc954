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

    static func text(_ value: JSONValue) -> String {
        String(decoding: value.jsonData(), as: UTF8.self)
    }
}
