public import ChatVault

/// Messages posted as any user, and everything that happens to them afterwards. Each change is
/// stamped with the clock, recorded in the change log, and sent to the connected devices of the
/// conversation's participants: `.messageReceived`, `.messageEdited` (edits, tag and metadata
/// updates, pins, interactions; a bookmark only to its user's devices), `.messageDeleted`,
/// `.reactionAdded` / `.reactionRemoved`, `.messagesDelivered` / `.messagesRead`.
extension ChatVaultSimulator {
    /// Posts a message from `sender` to a user or a group; returns its id.
    ///
    ///     let id = try simulator.post(.text("hi <@uid:bob>"), from: "alice", to: .group("team"), mentions: ["bob"])
    ///     try simulator.post(.text("in the thread"), from: "bob", to: .group("team"), parentId: id)
    ///
    /// - Parameters:
    ///   - parentId: Makes it a thread reply to that top-level message of the same conversation.
    ///   - mentions: Mentioned uids (`mentionedUsers`; `mentionedMe` for them).
    ///   - sentAt: Backdates the message (epoch seconds); default now. The change log still
    ///     records it now.
    /// - Throws: `SimulatorError` for an unknown user or group, a sender outside the group, a
    ///   block between the two users, an empty text, a media message without attachments, a bad parent.
    @discardableResult
    public func post(_ content: MessageContent, from sender: String, to scope: MessageScope, parentId: Int? = nil,
                     mentions: [String] = [], tags: [String] = [], metadata: JSONValue? = nil, quotedMessageId: Int? = nil,
                     sentAt: Int? = nil) throws(SimulatorError) -> Int {
        var draft = MessageDraft(sender: sender, scope: scope, content: content)
        draft.parentId = parentId ?? 0
        draft.mentions = mentions
        draft.tags = tags
        draft.metadata = metadata
        draft.quotedMessageId = quotedMessageId ?? 0
        draft.sentAt = sentAt
        return try mutate { (state, now) throws(BackendError) in
            let id = try state.insert(draft, now: now)
            state.broadcast(messageId: id) { .messageReceived($0) }
            return id
        }
    }

    /// Posts a text message; returns its id. Mentions written `<@uid:bob>` in the text count too.
    ///
    ///     let id = try simulator.postText("hello", from: "alice", to: .user("bob"))
    @discardableResult
    public func postText(_ text: String, from sender: String, to scope: MessageScope, parentId: Int? = nil,
                         mentions: [String] = [], tags: [String] = [], metadata: JSONValue? = nil,
                         sentAt: Int? = nil) throws(SimulatorError) -> Int {
        try post(.text(text), from: sender, to: scope, parentId: parentId,
                 mentions: ServerState.unique(mentions + ServerState.mentionedUIDs(in: text)), tags: tags,
                 metadata: metadata, sentAt: sentAt)
    }

    /// Posts a media message; returns its id. Register the attachments' bytes with `registerMedia`.
    ///
    ///     try simulator.postMedia(.image, [SimulatedAttachment(name: "cat.jpg", mimeType: "image/jpeg",
    ///                                                          url: "https://media.test/cat.jpg")],
    ///                             caption: "my cat", from: "alice", to: .user("bob"))
    @discardableResult
    public func postMedia(_ type: AttachmentType, _ attachments: [SimulatedAttachment], caption: String? = nil,
                          from sender: String, to scope: MessageScope, parentId: Int? = nil,
                          tags: [String] = [], sentAt: Int? = nil) throws(SimulatorError) -> Int {
        try post(.media(type, attachments: attachments, caption: caption), from: sender, to: scope, parentId: parentId,
                 tags: tags, sentAt: sentAt)
    }

    /// Edits a message's content (`editedAt`, `editedBy`, `updatedAt` become now).
    ///
    ///     try simulator.edit(id, to: .text("hello, fixed"), by: "alice")
    public func edit(_ id: Int, to content: MessageContent, by editor: String? = nil) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            let m = try state.existing(id)
            guard m.content.category == content.category else {
                throw ServerState.rejected(400, "ERR_CATEGORY_CHANGE", "an edit keeps the message's category")
            }
            state.applyEdit(id, by: editor ?? m.sender, now: now) { $0.content = content }
        }
    }

    /// Changes a message's tags and metadata (an update, not an edit).
    ///
    ///     try simulator.updateMessage(id, tags: ["important"])
    public func updateMessage(_ id: Int, tags: [String]? = nil, metadata: JSONValue? = nil) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            _ = try state.existing(id)
            state.update(id, now: now) {
                if let tags { $0.tags = tags }
                if let metadata { $0.metadata = metadata }
            }
            state.broadcast(messageId: id) { .messageEdited($0) }
        }
    }

    /// Deletes a message softly: it stays, with `deletedAt`/`deletedBy` set.
    ///
    ///     try simulator.delete(id)
    public func delete(_ id: Int, by deleter: String? = nil) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            let m = try state.existing(id)
            state.softDelete(id, by: deleter ?? m.sender, now: now)
        }
    }

    /// `uid` reacts to a message (once per emoji and user).
    ///
    ///     try simulator.react("👍", to: id, by: "bob")
    public func react(_ reaction: String, to id: Int, by uid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            let m = try state.existing(id)
            guard state.canSee(message: m, viewer: uid) else { throw ServerState.rejected(403, "ERR_NOT_A_MEMBER", "\(uid) cannot see message \(id)") }
            guard !reaction.isEmpty else { return }
            state.setReactionAndBroadcast(reaction, on: id, by: uid, present: true, now: now)
        }
    }

    /// Takes a reaction back.
    ///
    ///     try simulator.unreact("👍", to: id, by: "bob")
    public func unreact(_ reaction: String, to id: Int, by uid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            _ = try state.existing(id)
            state.setReactionAndBroadcast(reaction, on: id, by: uid, present: false, now: now)
        }
    }

    /// Pins a message in its conversation (`pinnedAt`, `pinnedBy`), for everyone.
    ///
    ///     try simulator.pin(id, by: "alice")
    public func pin(_ id: Int, by uid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            _ = try state.existing(id)
            state.update(id, now: now) {
                $0.pinnedAt = now
                $0.pinnedBy = uid
            }
            state.broadcast(messageId: id) { .messageEdited($0) }
        }
    }

    /// Unpins a message.
    ///
    ///     try simulator.unpin(id)
    public func unpin(_ id: Int) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            _ = try state.existing(id)
            state.update(id, now: now) {
                $0.pinnedAt = 0
                $0.pinnedBy = nil
            }
            state.broadcast(messageId: id) { .messageEdited($0) }
        }
    }

    /// Saves (bookmarks) a message for one user only: `savedAt` for them, `MessageQuery.saved`.
    ///
    ///     try simulator.save(id, for: "bob")
    public func save(_ id: Int, for uid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            let m = try state.existing(id)
            guard state.canSee(message: m, viewer: uid) else { throw ServerState.rejected(403, "ERR_NOT_A_MEMBER", "\(uid) cannot see message \(id)") }
            state.update(id, now: now, onlyFor: uid, bumpsRevision: false) { $0.saves[uid] = now }
            state.broadcastEdit(messageId: id, onlyTo: uid)
        }
    }

    /// Removes `uid`'s bookmark.
    ///
    ///     try simulator.unsave(id, for: "bob")
    public func unsave(_ id: Int, for uid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            _ = try state.existing(id)
            state.update(id, now: now, onlyFor: uid, bumpsRevision: false) { $0.saves[uid] = nil }
            state.broadcastEdit(messageId: id, onlyTo: uid)
        }
    }

    /// `uid` interacts with an element of an interactive message (towards its goal).
    ///
    ///     try simulator.interact(with: formId, elementId: "submit", by: "bob")
    public func interact(with id: Int, elementId: String, by uid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            let m = try state.existing(id)
            guard m.content.category == .interactive else { throw ServerState.rejected(400, "ERR_NOT_INTERACTIVE", "message \(id) is not interactive") }
            state.update(id, now: now) { $0.interactions.append(StoredInteraction(elementId: elementId, uid: uid, at: now)) }
            state.broadcast(messageId: id) { .messageEdited($0) }
        }
    }

    /// `uid` has read its conversation up to message `id` (and everything before it) now:
    /// `readByMeAt` for them, `readAt` for the senders, unread counts. Receipts only move forward.
    ///
    ///     try simulator.markRead(upTo: id, by: "bob")
    public func markRead(upTo id: Int, by uid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in try state.markReceiptAndBroadcast(read: true, upTo: id, by: uid, now: now) }
    }

    /// `uid`'s devices got the conversation up to message `id` now (`deliveredToMeAt`, `deliveredAt`).
    public func markDelivered(upTo id: Int, by uid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in try state.markReceiptAndBroadcast(read: false, upTo: id, by: uid, now: now) }
    }
}
