import ChatVault
import Foundation

/// Matrix events as the engine's wire JSON. Every field is checked for its type and size before
/// it is used; an event that does not fit is skipped (nil), never a crash.
extension MatrixBackend {
    /// The custom event type a CometChat custom message travels as.
    public static let customEventType = "org.chatvault.custom"

    /// One timeline event as a message, or nil when it is not one the engine shows (state,
    /// reactions, edits, redactions, encrypted or unknown events, or a malformed one).
    ///
    /// The relations Synapse bundles are applied whichever path the event came by (a page, a
    /// context, a lookup, the catch-up, realtime): the latest edit from the sender
    /// (`unsigned["m.relations"]["m.replace"]`, or `edit` when it is newer), the thread summary's
    /// reply count; a reply (`m.in_reply_to`) links the quoted message and loses its fallback quote.
    func renderMessage(_ event: JSONValue, room: String, ids: [String: Int], edit: JSONValue? = nil) -> JSONValue? {
        guard let type = event["type"]?.stringValue, type == "m.room.message" || type == Self.customEventType,
              let eventId = event["event_id"]?.stringValue, MatrixIds.isEventId(eventId),
              let senderId = event["sender"]?.stringValue, MatrixIds.isUserId(senderId),
              let id = ids[MatrixIds.ref(room: room, event: eventId)],
              let original = event["content"]?.objectValue else { return nil }
        let relation = original["m.relates_to"]
        if relation?["rel_type"]?.stringValue == "m.replace" { return nil }
        let me = self.me
        let (receiver, receiverType, conversationId, names) = state.withLock { s in
            let place = s.rooms.place(room: room, sender: senderId, me: me)
            return (place.receiver, place.receiverType, place.conversationId, s.rooms.names)
        }
        let ts = Self.time(event["origin_server_ts"])
        var sender: [String: JSONValue] = ["uid": .string(senderId)]
        if let name = names[senderId] { sender["name"] = .string(name) }
        var o: [String: JSONValue] = [
            "id": .int(Int64(id)),
            "conversationId": .string(conversationId),
            "sender": .object(sender),
            "receiver": .string(receiver),
            "receiverType": .string(receiverType.rawValue),
            "sentAt": .int(ts / 1000),
        ]
        let bundled = event["unsigned"]?["m.relations"]
        let redacted = event["unsigned"]?["redacted_because"]
        // The content shown: the latest edit's new content, else the event's own.
        var content = original
        if redacted?.objectValue == nil,
           let latest = Self.latestEdit(of: eventId, sender: senderId, among: [bundled?["m.replace"], edit]),
           let newContent = latest["content"]?["m.new_content"]?.objectValue {
            content = newContent
            let at = Self.time(latest["origin_server_ts"]) / 1000
            o["editedAt"] = .int(at)
            o["editedBy"] = .string(senderId)
            o["updatedAt"] = .int(at)
        }
        let quoted = Self.quotedEvent(relation)
        if let redacted, redacted.objectValue != nil {
            o["category"] = "message"
            o["type"] = "text"
            o["data"] = .object([:])
            o["deletedAt"] = .int(max(Self.time(redacted["origin_server_ts"]) / 1000, 1))
            if let by = redacted["sender"]?.stringValue, MatrixIds.isUserId(by) { o["deletedBy"] = .string(by) }
        } else if type == Self.customEventType {
            guard let subtype = original["type"]?.stringValue, !subtype.isEmpty, subtype.utf8.count <= 255 else { return nil }
            o["category"] = "custom"
            o["type"] = .string(subtype)
            var data: [String: JSONValue] = ["customData": content["data"] ?? original["data"] ?? .object([:])]
            if let text = content["body"]?.stringValue { data["conversationText"] = .string(text) }
            o["data"] = .object(data)
        } else {
            var shown = content
            // The fallback quote is only in the reply's own body (an edit's new content has none).
            if quoted != nil, content == original, let body = shown["body"]?.stringValue {
                shown["body"] = .string(Self.strippingReplyFallback(body))
            }
            guard let data = Self.messageData(shown) ?? Self.messageData(original) else { return nil }
            o["category"] = "message"
            o["type"] = .string(data.type)
            o["data"] = data.data
        }
        if let metadata = content[Self.metadataKey] ?? original[Self.metadataKey], metadata.objectValue != nil {
            if case .object(var data) = o["data"] {
                data["metadata"] = metadata
                o["data"] = .object(data)
            }
        }
        if let muid = original[Self.muidKey]?.stringValue, !muid.isEmpty, muid.utf8.count <= 255 { o["muid"] = .string(muid) }
        if relation?["rel_type"]?.stringValue == "m.thread", let root = relation?["event_id"]?.stringValue,
           let parent = ids[MatrixIds.ref(room: room, event: root)] {
            o["parentId"] = .int(Int64(parent))
        }
        if let quoted, let quotedId = ids[MatrixIds.ref(room: room, event: quoted)] {
            o["quotedMessageId"] = .int(Int64(quotedId))
        }
        if let count = bundled?["m.thread"]?["count"]?.intValue, count > 0 {
            o["replyCount"] = .int(min(count, 1 << 31))
        }
        if let txn = event["unsigned"]?["transaction_id"]?.stringValue, !txn.isEmpty, txn.utf8.count <= 255 {
            o["localMessageId"] = .string(txn)
        }
        return .object(o)
    }

    /// The refs a batch of events needs ids for: each message's own, from its own time. The
    /// events its relations name get theirs in `batchIds` (never from the naming event's time).
    static func refs(of events: [JSONValue], room: String) -> [MessageRef] {
        var out: [MessageRef] = []
        for event in events {
            guard let eventId = event["event_id"]?.stringValue, MatrixIds.isEventId(eventId) else { continue }
            // Only messages get ids (state, reactions and redactions are not messages themselves).
            let type = event["type"]?.stringValue
            if type == "m.room.message" || type == customEventType {
                out.append(MessageRef(MatrixIds.ref(room: room, event: eventId), timeMs: time(event["origin_server_ts"])))
            }
        }
        return out
    }

    /// The content keys a message's CometChat fields travel under (Matrix clients ignore them).
    static let metadataKey = "org.chatvault.metadata"
    static let muidKey = "org.chatvault.muid"

    /// A time in milliseconds: whole, from 0 to 2^53.
    static func time(_ value: JSONValue?) -> Int64 {
        guard let n = value?.intValue else { return 0 }
        return min(max(n, 0), WireLimits.maxWireNumber)
    }

    /// `data` and `type` of an `m.room.message` content.
    static func messageData(_ content: [String: JSONValue]) -> (type: String, data: JSONValue)? {
        guard let msgtype = content["msgtype"]?.stringValue, let body = content["body"]?.stringValue else { return nil }
        switch msgtype {
        case "m.text", "m.notice", "m.emote":
            return ("text", .object(["text": .string(body)]))
        case "m.image", "m.file", "m.video", "m.audio":
            guard let url = content["url"]?.stringValue, url.hasPrefix("mxc://"), url.utf8.count <= 1024 else { return nil }
            let type = String(msgtype.dropFirst(2))
            let info = content["info"]
            let name = content["filename"]?.stringValue ?? body
            var attachment: [String: JSONValue] = ["url": .string(url), "name": .string(String(name.prefix(255)))]
            if let mime = info?["mimetype"]?.stringValue, mime.utf8.count <= 255 { attachment["mimeType"] = .string(mime) }
            if let size = info?["size"]?.intValue, size >= 0, size <= WireLimits.maxWireNumber { attachment["size"] = .int(size) }
            if let dot = name.lastIndex(of: "."), name.index(after: dot) < name.endIndex {
                attachment["extension"] = .string(String(name[name.index(after: dot)...].prefix(16)))
            }
            var data: [String: JSONValue] = ["attachments": [.object(attachment)]]
            if content["filename"]?.stringValue != nil, body != name { data["caption"] = .string(body) }
            return (type, .object(data))
        default:
            return nil
        }
    }

    /// The content of an outgoing message (engine wire JSON → Matrix).
    static func content(of message: JSONValue) throws(BackendError) -> (type: String, content: JSONValue) {
        let category = message["category"]?.stringValue ?? "message"
        let type = message["type"]?.stringValue ?? "text"
        let data = message["data"] ?? .object([:])
        var content: [String: JSONValue]
        var eventType = "m.room.message"
        switch (category, type) {
        case ("message", "text"):
            guard let text = data["text"]?.stringValue else {
                throw .server(status: 400, code: "ERR_INVALID_MESSAGE", message: "a text message needs data.text")
            }
            content = ["msgtype": "m.text", "body": .string(text)]
        case ("message", "image"), ("message", "file"), ("message", "video"), ("message", "audio"):
            guard let attachment = data["attachments"]?.arrayValue?.first, let url = attachment["url"]?.stringValue,
                  url.hasPrefix("mxc://") else {
                throw .server(status: 400, code: "ERR_INVALID_MESSAGE", message: "a media message needs an uploaded attachment")
            }
            let name = attachment["name"]?.stringValue ?? "file"
            var info: [String: JSONValue] = [:]
            if let mime = attachment["mimeType"]?.stringValue { info["mimetype"] = .string(mime) }
            if let size = attachment["size"]?.intValue { info["size"] = .int(size) }
            content = ["msgtype": .string("m." + type), "url": .string(url), "filename": .string(name),
                       "body": .string(data["caption"]?.stringValue ?? name), "info": .object(info)]
        case ("custom", _):
            eventType = customEventType
            content = ["type": .string(type), "data": data["customData"] ?? .object([:])]
            if let text = data["conversationText"]?.stringValue { content["body"] = .string(text) }
        default:
            throw .server(status: 501, code: unsupportedCode, message: "\(category)/\(type) messages have no Matrix counterpart in this backend")
        }
        if let metadata = data["metadata"] ?? message["metadata"], metadata.objectValue != nil { content[metadataKey] = metadata }
        if let muid = message["muid"]?.stringValue { content[muidKey] = .string(muid) }
        return (eventType, .object(content))
    }
}
