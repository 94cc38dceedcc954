import ChatVault
import Foundation

/// A message about to be stored, from a test (`post`) or a client (`send`).
struct MessageDraft {
    var sender: String
    var scope: MessageScope
    var content: MessageContent
    var parentId = 0
    var mentions: [String] = []
    var tags: [String] = []
    var metadata: JSONValue?
    var quotedMessageId = 0
    var sentAt: Int?
    var muid: String?
    var localMessageId: String?
}

/// Every change to the truth. Each takes the server time and records itself in the change log.
extension ServerState {
    static func rejected(_ status: Int, _ code: String, _ message: String) -> BackendError {
        .server(status: status, code: code, message: message)
    }

    // MARK: Messages

    /// Validates and stores a message; returns its id.
    ///
    /// `logTime` is when the change log records it (the server time, or the `sentAt` of seeded
    /// history). With `keepSorted: false` the conversation's order is left for the caller to restore
    /// (bulk seeding sorts once at the end).
    mutating func insert(_ draft: MessageDraft, now: Int, logTime: Int? = nil, keepSorted: Bool = true) throws(BackendError) -> Int {
        guard users[draft.sender] != nil else { throw Self.rejected(404, "ERR_UID_NOT_FOUND", "no user \(draft.sender)") }
        let conversationId: String
        let kind: StoredConversation.Kind
        switch draft.scope {
        case .user(let uid):
            guard users[uid] != nil else { throw Self.rejected(404, "ERR_UID_NOT_FOUND", "no user \(uid)") }
            guard uid != draft.sender else { throw Self.rejected(400, "ERR_INVALID_RECEIVER", "a user cannot message themselves") }
            guard !hasBlocked(draft.sender, uid), !hasBlocked(uid, draft.sender) else {
                throw Self.rejected(403, "ERR_BLOCKED", "one of the users has blocked the other")
            }
            conversationId = Self.directConversationId(draft.sender, uid)
            kind = draft.sender <= uid ? .direct(draft.sender, uid) : .direct(uid, draft.sender)
        case .group(let guid):
            guard let group = groups[guid] else { throw Self.rejected(404, "ERR_GUID_NOT_FOUND", "no group \(guid)") }
            guard group.members[draft.sender] != nil else {
                throw Self.rejected(403, "ERR_NOT_A_MEMBER", "\(draft.sender) is not a member of group \(guid)")
            }
            conversationId = Self.groupConversationId(guid)
            kind = .group(guid)
        }
        try validate(draft.content)
        if draft.parentId != 0 {
            guard let parent = message(draft.parentId) else { throw Self.notFound("message \(draft.parentId)") }
            guard parent.conversationId == conversationId, parent.parentId == 0 else {
                throw Self.rejected(400, "ERR_INVALID_PARENT", "a reply must answer a top-level message of the same conversation")
            }
        }
        if draft.quotedMessageId != 0 && message(draft.quotedMessageId) == nil {
            throw Self.notFound("message \(draft.quotedMessageId)")
        }
        for uid in draft.mentions where users[uid] == nil {
            throw Self.rejected(404, "ERR_UID_NOT_FOUND", "no user \(uid) to mention")
        }

        let id = messages.count + 1
        let sentAt = draft.sentAt ?? now
        var stored = StoredMessage(id: id, muid: draft.muid, conversationId: conversationId, sender: draft.sender,
                                   receiver: draft.scope.id, receiverType: draft.scope.receiverType, content: draft.content,
                                   sentAt: sentAt, updatedAt: sentAt)
        stored.parentId = draft.parentId
        stored.tags = draft.tags
        stored.mentions = Self.unique(draft.mentions)
        stored.metadata = draft.metadata
        stored.quotedMessageId = draft.quotedMessageId
        stored.localMessageId = draft.localMessageId
        messages.append(stored)

        var conversation = conversations.removeValue(forKey: conversationId) ?? StoredConversation(id: conversationId, kind: kind)
        if keepSorted, let last = conversation.messageIds.last, stored.key < messages[last - 1].key {
            let at = lowerIndex(conversation.messageIds) { self.messages[$0 - 1].key < stored.key }
            conversation.messageIds.insert(id, at: at)
        } else {
            conversation.messageIds.append(id)
        }
        if draft.parentId != 0 {
            if messages[draft.parentId - 1].replyIds.isEmpty { conversation.threadParents.append(draft.parentId) }
            messages[draft.parentId - 1].replyIds.append(id)
        }
        conversations[conversationId] = conversation
        if case .direct(let a, let b) = kind {
            directConversations[a, default: []].insert(conversationId)
            directConversations[b, default: []].insert(conversationId)
        }
        if let local = draft.localMessageId { sentByLocalId[Pair(draft.sender, local)] = id }

        let time = logTime ?? now
        record(.upserted(messageId: id, onlyFor: nil), at: time)
        if draft.parentId != 0 { record(.upserted(messageId: draft.parentId, onlyFor: nil), at: time) }
        return id
    }

    private func validate(_ content: MessageContent) throws(BackendError) {
        switch content {
        case .text(let text):
            guard !text.isEmpty else { throw Self.rejected(400, "ERR_EMPTY_MESSAGE", "a text message needs text") }
        case .media(_, let attachments, _):
            guard !attachments.isEmpty else { throw Self.rejected(400, "ERR_NO_ATTACHMENTS", "a media message needs an attachment") }
            guard attachments.allSatisfy({ !$0.url.isEmpty }) else {
                throw Self.rejected(400, "ERR_INVALID_ATTACHMENT", "every attachment needs a URL")
            }
        case .custom(let type, _, _, _, _), .interactive(let type, _, _, _):
            guard !type.isEmpty else { throw Self.rejected(400, "ERR_INVALID_TYPE", "a custom or interactive message needs a type") }
        case .action:
            break
        }
    }

    static func unique(_ values: [String]) -> [String] {
        var seen = Set<String>()
        return values.filter { seen.insert($0).inserted }
    }

    /// Applies a change to a stored message (after the caller checked it exists), marks it updated
    /// and records it.
    mutating func update(_ id: Int, now: Int, onlyFor: String? = nil, bumpsRevision: Bool = true, _ change: (inout StoredMessage) -> Void) {
        change(&messages[id - 1])
        if bumpsRevision {
            messages[id - 1].updatedAt = max(messages[id - 1].updatedAt, now)
            messages[id - 1].revision += 1
        }
        record(.upserted(messageId: id, onlyFor: onlyFor), at: now)
    }

    func existing(_ id: Int) throws(BackendError) -> StoredMessage {
        guard let m = message(id) else { throw Self.notFound("message \(id)") }
        return m
    }

    // MARK: Edits, deletions, reactions (shared by the truth API and the clients)

    /// Applies an edit to a stored message (after the caller checked it may): `change`, then
    /// `editedAt`/`editedBy` and a new revision, a change-log upsert, and `.messageEdited` to the
    /// connected devices of the conversation except `excludedClient` (the device that edited).
    mutating func applyEdit(_ id: Int, by editor: String, now: Int, excluding excludedClient: Int? = nil,
                            _ change: (inout StoredMessage) -> Void) {
        update(id, now: now) {
            change(&$0)
            $0.editedAt = now
            $0.editedBy = editor
        }
        broadcast(messageId: id, excluding: excludedClient) { .messageEdited($0) }
    }

    /// Deletes a message softly (it stays, with `deletedAt`/`deletedBy`): a change-log upsert and
    /// deletion, and `.messageDeleted` to the connected devices except `excludedClient`. A message
    /// already deleted stays as it is. Returns whether it changed.
    @discardableResult
    mutating func softDelete(_ id: Int, by deleter: String, now: Int, excluding excludedClient: Int? = nil) -> Bool {
        guard messages[id - 1].deletedAt == 0 else { return false }
        update(id, now: now) {
            $0.deletedAt = now
            $0.deletedBy = deleter
        }
        record(.deleted(messageId: id), at: now)
        broadcast(messageId: id, excluding: excludedClient) { .messageDeleted($0) }
        return true
    }

    /// Gives (`present`) or takes back `uid`'s `reaction` on a stored message: a new revision and a
    /// change-log upsert when it changes anything. Sends no event (the caller decides). Returns
    /// whether it changed.
    @discardableResult
    mutating func setReaction(_ reaction: String, on id: Int, by uid: String, present: Bool, now: Int) -> Bool {
        let has = messages[id - 1].reactions.contains { $0.uid == uid && $0.reaction == reaction }
        guard has != present else { return false }
        if present {
            reactionSequence += 1
            let r = StoredReaction(sequence: reactionSequence, uid: uid, reaction: reaction, reactedAt: now)
            update(id, now: now) { $0.reactions.append(r) }
        } else {
            update(id, now: now) { $0.reactions.removeAll { $0.uid == uid && $0.reaction == reaction } }
        }
        return true
    }

    // MARK: Receipts

    /// Marks `uid`'s conversation read (or delivered) up to message `id`. Receipts only move forward.
    mutating func markReceipt(read: Bool, upTo id: Int, by uid: String, now: Int) throws(BackendError) {
        let m = try existing(id)
        guard canSee(message: m, viewer: uid) else { throw Self.rejected(403, "ERR_NOT_A_MEMBER", "\(uid) cannot see message \(id)") }
        let key = UserConversation(uid: uid, conversationId: m.conversationId)
        if let last = (read ? reads[key] : deliveries[key])?.last, last.upTo >= id { return }
        if read { reads[key, default: []].append(ReceiptMark(upTo: id, at: now)) } else {
            deliveries[key, default: []].append(ReceiptMark(upTo: id, at: now))
        }
        record(.upserted(messageId: id, onlyFor: nil), at: now)
    }

    // MARK: Send (from a client)

    /// Stores a message a client sent, once per (sender, localMessageId); returns its id.
    mutating func send(_ json: JSONValue, localMessageId: String, sender: String, now: Int) throws(BackendError) -> (id: Int, isNew: Bool) {
        guard !localMessageId.isEmpty else { throw Self.rejected(400, "ERR_INVALID_LOCAL_ID", "localMessageId must not be empty") }
        if let id = sentByLocalId[Pair(sender, localMessageId)] { return (id, false) }
        let draft = try Self.draft(from: json, sender: sender, localMessageId: localMessageId)
        return (try insert(draft, now: now), true)
    }

    /// Reads an outgoing message: the fields of the wire format that a client may set.
    static func draft(from json: JSONValue, sender: String, localMessageId: String) throws(BackendError) -> MessageDraft {
        func bad(_ field: String) -> BackendError {
            rejected(400, "ERR_INVALID_MESSAGE", "the outgoing message's \(field) is missing or invalid")
        }
        guard case .object = json else { throw bad("body") }
        guard let receiver = json["receiver"]?.stringValue, !receiver.isEmpty else { throw bad("receiver") }
        let receiverType = try json["receiverType"].map { (v) throws(BackendError) in
            guard let s = v.stringValue, let t = ReceiverType(rawValue: s) else { throw bad("receiverType") }
            return t
        } ?? .user
        let category = json["category"]?.stringValue ?? MessageCategory.message.rawValue
        guard let type = json["type"]?.stringValue, !type.isEmpty else { throw bad("type") }
        let data = json["data"]?.objectValue ?? [:]

        let content: MessageContent
        switch MessageCategory(rawValue: category) {
        case .message?:
            if type == MessageType.text.rawValue {
                guard let text = data["text"]?.stringValue else { throw bad("data.text") }
                content = .text(text)
            } else if let kind = AttachmentType(rawValue: type) {
                var attachments: [SimulatedAttachment] = []
                for item in data["attachments"]?.arrayValue ?? [] {
                    guard let url = item["url"]?.stringValue else { throw bad("data.attachments") }
                    attachments.append(SimulatedAttachment(name: item["name"]?.stringValue ?? "", fileExtension: item["extension"]?.stringValue,
                                                           mimeType: item["mimeType"]?.stringValue ?? "application/octet-stream",
                                                           url: url, size: Int(item["size"]?.intValue ?? 0)))
                }
                content = .media(kind, attachments: attachments, caption: data["caption"]?.stringValue)
            } else {
                throw bad("type")
            }
        case .custom?:
            content = .custom(type: type, data: data["customData"] ?? .object([:]), subType: data["subType"]?.stringValue,
                              conversationText: data["conversationText"]?.stringValue,
                              updateConversation: data["updateConversation"]?.boolValue ?? true)
        case .interactive?:
            var goal: SimulatedInteractionGoal?
            if let g = data["interactionGoal"], !g.isNull {
                guard let kind = g["type"]?.stringValue.flatMap(SimulatedInteractionGoal.Kind.init(rawValue:)) else {
                    throw bad("data.interactionGoal")
                }
                goal = SimulatedInteractionGoal(kind: kind, elementIds: (g["elementIds"]?.arrayValue ?? []).compactMap(\.stringValue))
            }
            content = .interactive(type: type, data: data["interactiveData"] ?? .object([:]), goal: goal,
                                   allowSenderInteraction: data["allowSenderInteraction"]?.boolValue ?? false)
        default:
            throw rejected(400, "ERR_INVALID_CATEGORY", "clients send message, custom or interactive messages only")
        }

        var draft = MessageDraft(sender: sender, scope: receiverType == .group ? .group(receiver) : .user(receiver), content: content)
        draft.parentId = Int(json["parentId"]?.intValue ?? 0)
        draft.quotedMessageId = Int(json["quotedMessageId"]?.intValue ?? 0)
        draft.tags = (json["tags"]?.arrayValue ?? []).compactMap(\.stringValue)
        var mentions = (json["mentionedUsers"]?.arrayValue ?? []).compactMap { $0.stringValue ?? $0["uid"]?.stringValue }
        if case .text(let text) = content { mentions += mentionedUIDs(in: text) }
        draft.mentions = unique(mentions)
        draft.metadata = data["metadata"] ?? json["metadata"]
        draft.muid = json["muid"]?.stringValue ?? localMessageId
        draft.localMessageId = localMessageId
        return draft
    }

    /// The uids of the SDK's mention markup, `<@uid:alice>`, in a text.
    static func mentionedUIDs(in text: String) -> [String] {
        var uids: [String] = []
        var rest = text[...]
        while let start = rest.range(of: "<@uid:") {
            rest = rest[start.upperBound...]
            guard let end = rest.firstIndex(of: ">") else { break }
            let uid = String(rest[..<end])
            if !uid.isEmpty { uids.append(uid) }
            rest = rest[rest.index(after: end)...]
        }
        return uids
    }

    // MARK: Media

    /// The registered URL `url` stands for (itself, or the original of a re-signed URL).
    func originalMediaURL(_ url: String) -> String {
        resignedURLs[url]?.original ?? url
    }

    /// Starts serving `url`: 403 `ERR_URL_EXPIRED` once it expired, 404 if unknown; else counts
    /// the download as started and in progress and answers what to stream.
    mutating func startDownload(url: String, now: Double) throws(BackendError) -> MediaServing {
        var original = url
        if let signed = resignedURLs[url] {
            guard now < signed.expiresAt else { throw Self.expired }
            original = signed.original
        }
        guard let media = media[original] else { throw Self.notFound("media") }
        if original == url, let expiresAt = media.expiresAt, now >= expiresAt { throw Self.expired }
        mediaServed[original, default: MediaServedCounts()].started += 1
        mediaServed[original, default: MediaServedCounts()].inProgress += 1
        return MediaServing(key: original, bytes: media.bytes, mimeType: media.mimeType,
                            behaviour: mediaBehaviours[original] ?? SimulatedMediaBehaviour())
    }

    static let expired = BackendError.server(status: 403, code: "ERR_URL_EXPIRED", message: "the media URL has expired")

    mutating func resign(url: String, messageId: Int, viewer: String, now: Double) throws(BackendError) -> String {
        guard let m = message(messageId), canSee(message: m, viewer: viewer) else { throw Self.notFound("message \(messageId)") }
        let original = resignedURLs[url]?.original ?? url
        guard m.content.attachments.contains(where: { $0.url == original }) else { throw Self.notFound("attachment") }
        resignSequence += 1
        let fresh = original + (original.contains("?") ? "&" : "?") + "sig=\(resignSequence)"
        resignedURLs[fresh] = (original, now + signedURLLifetime)
        return fresh
    }

    // MARK: Blocks

    mutating func setBlocked(_ blocked: Bool, _ uids: [String], by blocker: String) -> [String: Bool] {
        var result: [String: Bool] = [:]
        for uid in uids {
            guard users[uid] != nil, uid != blocker else {
                result[uid] = false
                continue
            }
            if blocked { blocks.insert(Pair(blocker, uid)) } else { blocks.remove(Pair(blocker, uid)) }
            result[uid] = true
        }
        return result
    }
}
