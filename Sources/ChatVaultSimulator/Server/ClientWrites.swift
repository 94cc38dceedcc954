import ChatVault
import Foundation

/// The writes a device makes on messages it can see (`SimulatedClient.editMessage`,
/// `deleteMessage`, `addReaction`, `removeReaction`) and its uploads: the server's checks, then
/// the shared cores of `Writes.swift`. Error messages are fixed sentences: they never carry a
/// message's content.
extension ServerState {
    /// A message `viewer` can read; 404 `ERR_NOT_FOUND` otherwise (unknown, or in a conversation
    /// the viewer is not part of).
    func visibleMessage(_ id: Int, to viewer: String) throws(BackendError) -> StoredMessage {
        guard let m = message(id), canSee(message: m, viewer: viewer) else { throw Self.notFound("message \(id)") }
        return m
    }

    // MARK: Edit

    /// `viewer` edits message `id` with `changes` (outgoing fields: `data.text`, `data.caption`,
    /// `data.metadata` or a top-level `metadata`, `data.customData`, `tags`). Only the sender may
    /// edit (403 `ERR_NOT_THE_SENDER`), never a deleted message (400 `ERR_MESSAGE_DELETED`).
    mutating func editMessage(_ id: Int, changes: JSONValue, by viewer: String, now: Int, excluding excludedClient: Int?) throws(BackendError) {
        let m = try visibleMessage(id, to: viewer)
        guard m.sender == viewer else { throw Self.rejected(403, "ERR_NOT_THE_SENDER", "only the sender may edit a message") }
        guard m.deletedAt == 0 else { throw Self.rejected(400, "ERR_MESSAGE_DELETED", "a deleted message cannot be edited") }
        let edit = try Self.edit(of: m, from: changes)
        applyEdit(id, by: viewer, now: now, excluding: excludedClient) {
            $0.content = edit.content
            $0.metadata = edit.metadata
            $0.tags = edit.tags
        }
    }

    /// What an edit makes of a message: its content, metadata and tags after `changes`.
    static func edit(of m: StoredMessage, from changes: JSONValue) throws(BackendError) -> (content: MessageContent, metadata: JSONValue?, tags: [String]) {
        func bad(_ field: String) -> BackendError {
            rejected(400, "ERR_INVALID_MESSAGE", "the edit's \(field) is invalid or does not apply to this message")
        }
        guard case .object(let fields) = changes else { throw bad("body") }
        var content = m.content
        var metadata = m.metadata
        var tags = m.tags
        var changesSomething = false

        let data: [String: JSONValue]
        switch fields["data"] {
        case nil: data = [:]
        case .object(let object)?: data = object
        default: throw bad("data")
        }
        if let value = data["text"] {
            guard case .text = content, let text = value.stringValue else { throw bad("data.text") }
            guard !text.isEmpty else { throw rejected(400, "ERR_EMPTY_MESSAGE", "a text message needs text") }
            content = .text(text)
            changesSomething = true
        }
        if let value = data["caption"] {
            guard case .media(let kind, let attachments, _) = content, value.isNull || value.stringValue != nil else { throw bad("data.caption") }
            content = .media(kind, attachments: attachments, caption: value.stringValue.flatMap { $0.isEmpty ? nil : $0 })
            changesSomething = true
        }
        if let value = data["customData"] {
            guard case .custom(let type, _, let subType, let conversationText, let updateConversation) = content, !value.isNull else {
                throw bad("data.customData")
            }
            content = .custom(type: type, data: value, subType: subType, conversationText: conversationText,
                              updateConversation: updateConversation)
            changesSomething = true
        }
        if let value = data["metadata"] ?? fields["metadata"] {
            metadata = value.isNull ? nil : value
            changesSomething = true
        }
        if let value = fields["tags"] {
            guard let items = value.arrayValue else { throw bad("tags") }
            var newTags: [String] = []
            for item in items {
                guard let tag = item.stringValue, !tag.isEmpty else { throw bad("tags") }
                newTags.append(tag)
            }
            tags = unique(newTags)
            changesSomething = true
        }
        guard changesSomething else { throw rejected(400, "ERR_INVALID_MESSAGE", "the edit changes no field a client may edit") }
        return (content, metadata, tags)
    }

    // MARK: Delete

    /// `viewer` deletes message `id`: the sender, or an admin or moderator (or the owner) of the
    /// group it was sent to (403 `ERR_NOT_THE_SENDER` otherwise). Deleting a deleted message
    /// changes nothing.
    mutating func deleteMessage(_ id: Int, by viewer: String, now: Int, excluding excludedClient: Int?) throws(BackendError) {
        let m = try visibleMessage(id, to: viewer)
        guard m.sender == viewer || moderates(m, viewer) else {
            throw Self.rejected(403, "ERR_NOT_THE_SENDER", "only the sender or a group's admin or moderator may delete a message")
        }
        softDelete(id, by: viewer, now: now, excluding: excludedClient)
    }

    /// Whether `uid` moderates the group a message was sent to (admin, moderator or owner).
    func moderates(_ m: StoredMessage, _ uid: String) -> Bool {
        guard case .group(let guid)? = conversations[m.conversationId]?.kind, let group = groups[guid] else { return false }
        if group.info.owner == uid { return true }
        guard let scope = group.members[uid]?.scope else { return false }
        return scope == .admin || scope == .moderator
    }

    // MARK: Reactions

    /// The longest reaction accepted, in UTF-8 bytes (what `WireDecoder` reads back).
    static let maxReactionBytes = 64

    /// `viewer` gives (`present`) or takes back a reaction on message `id`. A reaction is 1…64
    /// UTF-8 bytes (400 `ERR_INVALID_REACTION`). When it changes anything, the other connected
    /// devices get `.reactionAdded` / `.reactionRemoved` (with the message as it now stands).
    mutating func react(_ reaction: String, on id: Int, present: Bool, by viewer: String, now: Int, excluding excludedClient: Int?) throws(BackendError) {
        _ = try visibleMessage(id, to: viewer)
        guard (1...Self.maxReactionBytes).contains(reaction.utf8.count) else {
            throw Self.rejected(400, "ERR_INVALID_REACTION", "a reaction must be 1 to 64 bytes of UTF-8")
        }
        setReactionAndBroadcast(reaction, on: id, by: viewer, present: present, now: now, excluding: excludedClient)
    }

    // MARK: Uploads

    /// Stores uploaded bytes at a fresh URL (downloadable at once, never expiring) and answers the
    /// attachment, as `data.attachments` carries it. 400 `ERR_EMPTY_FILE` for no bytes, 413
    /// `ERR_FILE_TOO_LARGE` above `maxUploadBytes`.
    mutating func storeUpload(_ bytes: Data, name: String, mimeType: String, by uploader: String) throws(BackendError) -> JSONValue {
        guard !bytes.isEmpty else { throw Self.emptyFile }
        guard bytes.count <= maxUploadBytes else { throw Self.fileTooLarge }
        let type = mimeType.isEmpty ? "application/octet-stream" : mimeType
        let url = "https://uploads.chatvault.test/\(uploads.count + 1)/\(Self.pathComponent(name))"
        media[url] = StoredMedia(bytes: bytes, mimeType: type, expiresAt: nil)
        uploads.append(SimulatedUpload(url: url, name: name, mimeType: type, size: bytes.count, uploader: uploader))
        return Self.renderAttachment(SimulatedAttachment(name: name, mimeType: type, url: url, size: bytes.count))
    }

    static let emptyFile = BackendError.server(status: 400, code: "ERR_EMPTY_FILE", message: "the file is empty")
    static let fileTooLarge = BackendError.server(status: 413, code: "ERR_FILE_TOO_LARGE", message: "the file is larger than uploads may be")
    static let unreadableFile = BackendError.server(status: 400, code: "ERR_FILE_UNREADABLE", message: "the file cannot be read")

    /// A file name as one URL path component: unreserved ASCII kept, everything else percent-encoded.
    static func pathComponent(_ name: String) -> String {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let encoded = name.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
        return encoded.isEmpty || encoded == "." || encoded == ".." ? "file" : encoded
    }
}
