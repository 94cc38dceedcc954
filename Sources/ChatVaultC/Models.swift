package import ChatVault
import Foundation

/// Models as the JSON text the C API documents (`cv_vault_fetch_messages_sync`): the public
/// fields of the Swift models, translated, nothing computed here. Written with `JSONWriter`, each
/// object's keys in sorted order.
enum CModels {
    static func message(_ m: BaseMessage, _ w: inout JSONWriter) {
        w.open()
        if let media = m as? MediaMessage, let attachment = media.attachment {
            w.key("attachment")
            w.open()
            w.key("extension"); w.string(attachment.fileExtension)
            w.key("fileName"); w.string(attachment.fileName)
            if let path = attachment.localPath { w.key("localPath"); w.string(path) }
            w.key("mimeType"); w.string(attachment.fileMimeType)
            w.key("size"); w.double(attachment.fileSize)
            w.key("url"); w.string(attachment.fileUrl)
            w.close()
        }
        if let media = m as? MediaMessage, let caption = media.caption { w.key("caption"); w.string(caption) }
        w.key("category"); w.string(m.messageCategory.rawValue)
        let custom = m as? CustomMessage
        w.key("conversationId"); w.string(m.conversationId)
        if let text = custom?.conversationText { w.key("conversationText"); w.string(text) }
        if let data = custom?.customData { w.key("customData"); w.value(data) }
        if let type = custom?.type { w.key("customType"); w.string(type) }
        w.key("deletedAt"); w.double(m.deletedAt)
        w.key("deliveredAt"); w.double(m.deliveredAt)
        w.key("editedAt"); w.double(m.editedAt)
        if let reason = m.failureReason { w.key("failureReason"); w.string(reason.rawValue) }
        w.key("id"); w.int(m.id)
        w.key("localMessageId"); w.string(m.localMessageId)
        w.key("parentMessageId"); w.int(m.parentMessageId)
        w.key("quotedMessageId"); w.int(m.quotedMessageId)
        w.key("reactions")
        w.array(m.reactions) { r, w in
            w.open()
            w.key("count"); w.int(r.count)
            w.key("reactedByMe"); w.bool(r.reactedByMe)
            w.key("reaction"); w.string(r.reaction)
            w.close()
        }
        w.key("readAt"); w.double(m.readAt)
        w.key("receiver"); w.string(m.receiverUid)
        w.key("receiverType"); w.string(m.receiverType.rawValue)
        w.key("replyCount"); w.int(m.replyCount)
        w.key("sender"); w.string(m.senderUid)
        w.key("sentAt"); w.int(m.sentAt)
        w.key("source"); w.string(m.source.rawValue)
        w.key("status"); w.string(m.messageStatus.rawValue)
        if let subType = custom?.subType { w.key("subType"); w.string(subType) }
        if let text = m as? TextMessage { w.key("text"); w.string(text.text) }
        w.key("type"); w.string(m.messageType.rawValue)
        w.close()
    }

    static func conversation(_ c: Conversation, _ w: inout JSONWriter) {
        w.open()
        w.key("conversationId"); w.string(c.conversationId)
        w.key("conversationType"); w.string(c.conversationType.rawValue)
        w.key("lastMessage")
        if let last = c.lastMessage { message(last, &w) } else { w.null() }
        w.key("unreadMessageCount"); w.int(c.unreadMessageCount)
        w.key("updatedAt"); w.double(c.updatedAt)
        if let user = c.conversationWith as? User { w.key("with"); w.string(user.uid) }
        if let group = c.conversationWith as? Group { w.key("with"); w.string(group.guid) }
        w.close()
    }

    /// One model as JSON text.
    static func text<Item>(_ item: Item, _ write: (Item, inout JSONWriter) -> Void) -> JSONText {
        var w = JSONWriter()
        write(item, &w)
        return w.finish()
    }

    /// Any JSONValue as JSON text (keys sorted).
    static func text(_ value: JSONValue) -> JSONText {
        var w = JSONWriter()
        w.value(value)
        return w.finish()
    }

    /// A message as JSON text (listeners, send stages).
    static func messageText(_ m: BaseMessage) -> JSONText { text(m, message) }

    /// A list of models as a JSON array.
    static func arrayText<Item>(_ items: [Item], _ write: (Item, inout JSONWriter) -> Void) -> JSONText {
        var w = JSONWriter(capacity: 512 * max(items.count, 1))
        w.array(items, write)
        return w.finish()
    }

    /// {"cached": …, "server": … | null, "serverError": {"code", "message"} | null}: both
    /// phases of a read, each written by its writer (a phase's absence as null).
    private static func twoPhases<Cached, Server>(_ cached: Cached?, _ server: Result<Server, CometChatException>, capacity: Int = 1024,
                                                  _ writeCached: (Cached, inout JSONWriter) -> Void,
                                                  _ writeServer: (Server, inout JSONWriter) -> Void) -> JSONText {
        var w = JSONWriter(capacity: capacity)
        w.open()
        w.key("cached")
        if let cached { writeCached(cached, &w) } else { w.null() }
        switch server {
        case .success(let value):
            w.key("server"); writeServer(value, &w)
            w.key("serverError"); w.null()
        case .failure(let error):
            w.key("server"); w.null()
            w.key("serverError")
            w.open()
            w.key("code"); w.string(error.errorCode)
            w.key("message"); w.string(error.errorDescription)
            w.close()
        }
        w.close()
        return w.finish()
    }

    /// A two-phase read's result: {"cached": [...] | null, "server": [...] | null, "serverError": {...} | null}.
    static func phases<Item>(cached: [Item]?, server: Result<[Item], CometChatException>,
                             _ write: (Item, inout JSONWriter) -> Void) -> JSONText {
        twoPhases(cached, server, capacity: 512 * max((cached?.count ?? 0) + ((try? server.get())?.count ?? 0), 1),
                  { items, w in w.array(items, write) }, { items, w in w.array(items, write) })
    }

    /// A lookup's result: {"cached": item | null, "server": item | null, "serverError": {...} | null}.
    static func lookup<Item>(cached: Item?, server: Result<Item?, CometChatException>, _ write: (Item, inout JSONWriter) -> Void) -> JSONText {
        twoPhases(cached, server, write) { item, w in if let item { write(item, &w) } else { w.null() } }
    }
}

/// For `chatvault bench capi` (same package, not part of the C API): the encoding of a page alone,
/// so the benchmark can report the JSON's share of a C call beside the hop's.
package enum CModelsProbe {
    package static func messagesPageJSON(_ page: TwoPhaseResult<BaseMessage>) -> Int {
        CModels.phases(cached: page.cached, server: page.server, CModels.message).count
    }
}
