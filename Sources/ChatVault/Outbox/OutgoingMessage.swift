import Foundation

/// What an outbox row holds (its `kind` column): one of the four persistent sends.
enum OutboxKind: String, Sendable {
    case text, media, custom, interactive

    init?(of message: BaseMessage) {
        switch message {
        case is TextMessage: self = .text
        case is MediaMessage: self = .media
        case is CustomMessage: self = .custom
        case is InteractiveMessage: self = .interactive
        default: return nil
        }
    }

    /// Whether `message` (an acknowledgement decoded from the server) is of this kind, so the
    /// closures typed for the sent class can take it.
    func matches(_ message: BaseMessage) -> Bool {
        OutboxKind(of: message) == self
    }
}

/// The outgoing wire form of a message: the fields a client may set, as `ChatBackend.send` takes
/// them. Invalid sends are refused here, before anything is stored.
enum OutgoingMessage {
    /// Validates `message` and renders it. Attachments already uploaded (`MediaMessage.attachments`)
    /// go into `data.attachments`; local files are added by the outbox once uploaded.
    /// - Returns: the wire form and the kind of send it is.
    /// - Throws: `ERROR_INVALID_MESSAGE` with a fixed sentence naming the field (never its value).
    static func encode(_ message: BaseMessage, limits: WireLimits) throws(CometChatException) -> (wire: JSONValue, kind: OutboxKind) {
        guard let kind = OutboxKind(of: message) else { throw invalid("only text, media, custom and interactive messages can be sent") }
        try checkIdentifier(message.receiverUid, "receiverUid", limits)
        guard message.parentMessageId >= 0, message.quotedMessageId >= 0 else { throw invalid("a parent or quoted message id is negative") }
        var data: [String: JSONValue] = [:]
        let type: String
        let category: MessageCategory
        switch message {
        case let text as TextMessage:
            guard !text.text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { throw invalid("the text is empty") }
            guard text.text.utf8.count <= limits.maxTextBytes else { throw invalid("the text is too long") }
            data["text"] = .string(text.text)
            type = MessageType.text.rawValue
            category = .message
        case let media as MediaMessage:
            guard [.image, .video, .audio, .file].contains(media.messageType) else { throw invalid("a media message's type must be image, video, audio or file") }
            guard !media.localFiles.isEmpty || !media.attachments.isEmpty else { throw invalid("a media message needs files or attachments") }
            guard media.localFiles.count + media.attachments.count <= limits.maxListCount else { throw invalid("a media message has too many files") }
            if let caption = media.caption {
                guard caption.utf8.count <= limits.maxTextBytes else { throw invalid("the caption is too long") }
                data["caption"] = .string(caption)
            }
            if !media.attachments.isEmpty { data["attachments"] = .array(media.attachments.map(\.wire)) }
            type = media.messageType.rawValue
            category = .message
        case let custom as CustomMessage:
            guard let customData = custom.customData, !customData.isNull else { throw invalid("a custom message needs customData") }
            try checkFreeform(customData, "customData", limits)
            data["customData"] = customData
            if let subType = custom.subType { try checkIdentifier(subType, "subType", limits); data["subType"] = .string(subType) }
            if let text = custom.conversationText {
                guard text.utf8.count <= limits.maxNameBytes else { throw invalid("the conversation text is too long") }
                data["conversationText"] = .string(text)
            }
            data["updateConversation"] = .bool(custom.updateConversation)
            type = custom.type ?? "custom"
            try checkIdentifier(type, "type", limits)
            category = .custom
        case let interactive as InteractiveMessage:
            guard case .object = interactive.interactiveData else { throw invalid("interactiveData must be an object") }
            try checkFreeform(interactive.interactiveData, "interactiveData", limits)
            data["interactiveData"] = interactive.interactiveData
            if let goal = interactive.interactionGoal, !goal.isNull {
                try checkFreeform(goal, "interactionGoal", limits)
                data["interactionGoal"] = goal
            }
            data["allowSenderInteraction"] = .bool(interactive.allowSenderInteraction)
            type = interactive.type
            try checkIdentifier(type, "type", limits)
            category = .interactive
        default:
            throw invalid("only text, media, custom and interactive messages can be sent")
        }
        if let metadata = message.metaData, !metadata.isNull {
            try checkFreeform(metadata, "metadata", limits)
            data["metadata"] = metadata
        }
        var wire: [String: JSONValue] = [
            "receiver": .string(message.receiverUid),
            "receiverType": .string(message.receiverType.rawValue),
            "category": .string(category.rawValue),
            "type": .string(type),
            "data": .object(data),
        ]
        if message.parentMessageId > 0 { wire["parentId"] = .int(Int64(message.parentMessageId)) }
        if message.quotedMessageId > 0 { wire["quotedMessageId"] = .int(Int64(message.quotedMessageId)) }
        if let tags = message.tags, !tags.isEmpty {
            guard tags.count <= limits.maxListCount else { throw invalid("too many tags") }
            for tag in tags { try checkIdentifier(tag, "tags", limits) }
            wire["tags"] = .array(tags.map(JSONValue.string))
        }
        if !message.muid.isEmpty { wire["muid"] = .string(message.muid) }
        return (.object(wire), kind)
    }

    /// The changes of an edit, as `ChatBackend.editMessage` takes them, from the message the app
    /// edited (its `id` is checked by the caller): a text message's `text` (`data.text`, never
    /// empty), a media message's `caption` (`data.caption`, when set; "" removes it), a custom
    /// message's `customData` (`data.customData`, when set); for any of them `metaData`
    /// (`data.metadata`, when set; JSON null removes it) and `tags` (when set; [] removes them).
    /// - Throws: `ERROR_INVALID_MESSAGE` with a fixed sentence naming the field (never its value):
    ///   another kind of message, a field out of bounds, or nothing to change.
    static func encodeEdit(_ message: BaseMessage, limits: WireLimits) throws(CometChatException) -> JSONValue {
        let verb = "edited"
        var data: [String: JSONValue] = [:]
        switch message {
        case let text as TextMessage:
            guard !text.text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { throw invalid("the text is empty", verb) }
            guard text.text.utf8.count <= limits.maxTextBytes else { throw invalid("the text is too long", verb) }
            data["text"] = .string(text.text)
        case let media as MediaMessage:
            if let caption = media.caption {
                guard caption.utf8.count <= limits.maxTextBytes else { throw invalid("the caption is too long", verb) }
                data["caption"] = .string(caption)
            }
        case let custom as CustomMessage:
            if let customData = custom.customData, !customData.isNull {
                try checkFreeform(customData, "customData", limits, verb)
                data["customData"] = customData
            }
        default:
            throw invalid("only text, media and custom messages can be edited", verb)
        }
        if let metadata = message.metaData {
            if !metadata.isNull { try checkFreeform(metadata, "metadata", limits, verb) }
            data["metadata"] = metadata
        }
        var changes: [String: JSONValue] = [:]
        if !data.isEmpty { changes["data"] = .object(data) }
        if let tags = message.tags {
            guard tags.count <= limits.maxListCount else { throw invalid("too many tags", verb) }
            for tag in tags { try checkIdentifier(tag, "tags", limits, verb) }
            changes["tags"] = .array(tags.map(JSONValue.string))
        }
        guard !changes.isEmpty else { throw invalid("the edit changes nothing a client may edit", verb) }
        return .object(changes)
    }

    static func invalid(_ sentence: String, _ verb: String = "sent") -> CometChatException {
        CometChatException(.invalidMessage, "The message was not \(verb): \(sentence).")
    }

    private static func checkIdentifier(_ value: String, _ field: String, _ limits: WireLimits, _ verb: String = "sent") throws(CometChatException) {
        guard !value.isEmpty, value.utf8.count <= limits.maxIdentifierBytes,
              !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw invalid("\(field) is empty, too long or holds control characters", verb)
        }
    }

    private static func checkFreeform(_ value: JSONValue, _ field: String, _ limits: WireLimits, _ verb: String = "sent") throws(CometChatException) {
        // The depth first, without recursion: only a bounded value is turned into JSON text.
        guard value.extentBreach(maxDepth: limits.freeformDepth) == nil, value.jsonData().count <= limits.maxFreeformBytes else {
            throw invalid("\(field) is too large or too deeply nested", verb)
        }
    }
}

extension Attachment {
    /// The attachment as `data.attachments` carries it.
    var wire: JSONValue {
        var fields: [String: JSONValue] = [
            "name": .string(fileName), "extension": .string(fileExtension), "mimeType": .string(fileMimeType), "url": .string(fileUrl),
        ]
        if fileSize > 0 { fields["size"] = .int(Int64(fileSize)) }
        return .object(fields)
    }
}

extension MediaMessage {
    /// The local files this send must upload: `files`, then `filePath` when it is not among them.
    var localFiles: [String] {
        var paths = files.map(\.path)
        if let filePath, !filePath.isEmpty {
            let path = filePath.hasPrefix("file://") ? (URL(string: filePath)?.path ?? filePath) : filePath
            if !paths.contains(path) { paths.append(path) }
        }
        return paths
    }
}
