import ChatVault

/// The realtime events beyond messages: reactions and receipts, and per-user changes. Every
/// truth-API write and every client write sends one to the connected devices it concerns.
extension ServerState {
    /// Gives or takes back a reaction (`setReaction`) and, when that changed anything, sends
    /// `.reactionAdded` / `.reactionRemoved` to the conversation's connected devices except
    /// `excludedClient`. Returns whether it changed.
    @discardableResult
    mutating func setReactionAndBroadcast(_ reaction: String, on id: Int, by uid: String, present: Bool, now: Int,
                                          excluding excludedClient: Int? = nil) -> Bool {
        let before = messages[id - 1].reactions.first { $0.uid == uid && $0.reaction == reaction }
        guard setReaction(reaction, on: id, by: uid, present: present, now: now) else { return false }
        let stored = present ? messages[id - 1].reactions.last { $0.uid == uid && $0.reaction == reaction } : before
        guard let stored else { return true }
        let message = messages[id - 1]
        broadcastEvent(about: id, excluding: excludedClient) { viewer in
            let event: [String: JSONValue] = [
                "reaction": renderReaction(stored, messageId: id, for: viewer),
                "receiverId": .string(message.receiver),
                "receiverType": .string(message.receiverType.rawValue),
                "conversationId": .string(message.conversationId),
                "parentMessageId": .int(Int64(message.parentId)),
                "message": renderMessage(id, for: viewer),
            ]
            return present ? .reactionAdded(.object(event)) : .reactionRemoved(.object(event))
        }
        return true
    }

    /// Marks a receipt (`markReceipt`) and, when it moved forward, sends `.messagesRead` /
    /// `.messagesDelivered` to the connected devices of the conversation (the reader's other
    /// devices too: they learn the conversation was read).
    mutating func markReceiptAndBroadcast(read: Bool, upTo id: Int, by uid: String, now: Int) throws(BackendError) {
        let m = try existing(id)
        let key = UserConversation(uid: uid, conversationId: m.conversationId)
        let before = (read ? reads[key] : deliveries[key])?.count ?? 0
        try markReceipt(read: read, upTo: id, by: uid, now: now)
        guard ((read ? reads[key] : deliveries[key])?.count ?? 0) > before else { return }
        let receiver: String
        switch conversations[m.conversationId]?.kind {
        case .direct(let a, let b)?: receiver = uid == a ? b : a
        default: receiver = m.receiver
        }
        broadcastEvent(about: id) { viewer in
            var receipt: [String: JSONValue] = [
                "messageId": .int(Int64(id)),
                "sender": renderUser(uid, for: viewer),
                "receiverId": .string(receiver),
                "receiverType": .string(m.receiverType.rawValue),
                "conversationId": .string(m.conversationId),
                "receiptType": .string(read ? "read" : "delivered"),
                "timestamp": .int(Int64(now)),
            ]
            receipt[read ? "readAt" : "deliveredAt"] = .int(Int64(now))
            return read ? .messagesRead(.object(receipt)) : .messagesDelivered(.object(receipt))
        }
    }

    /// Sends `.messageEdited` about message `id` to `uid`'s connected devices only (a change only
    /// that user sees, such as a bookmark).
    func broadcastEdit(messageId id: Int, onlyTo uid: String) {
        for (_, connection) in connections.sorted(by: { $0.key < $1.key }) where connection.uid == uid {
            connection.continuation.yield(.messageEdited(renderMessage(id, for: uid)))
        }
    }

    /// Sends an event built per viewer to every connected device of the conversation of message
    /// `id` (but not to `excludedClient`).
    private func broadcastEvent(about id: Int, excluding excludedClient: Int? = nil, _ event: (String) -> RealtimeEvent) {
        guard let conversation = conversations[messages[id - 1].conversationId] else { return }
        let participants = Set(participants(of: conversation))
        for (clientId, connection) in connections.sorted(by: { $0.key < $1.key })
        where clientId != excludedClient && participants.contains(connection.uid) {
            connection.continuation.yield(event(connection.uid))
        }
    }
}
