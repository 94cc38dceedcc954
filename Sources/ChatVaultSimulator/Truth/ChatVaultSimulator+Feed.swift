public import ChatVault

/// The notification feed (campaigns).
extension ChatVaultSimulator {
    /// Puts an item in `receiver`'s notification feed; returns its id ("feed-1", "feed-2"…).
    ///
    ///     let id = try simulator.postFeedItem(to: "alice", category: "promo", categoryId: "spring",
    ///                                         content: ["title": "Sale"], tags: ["sale"])
    @discardableResult
    public func postFeedItem(to receiver: String, category: String, categoryId: String = "", channelId: String? = nil,
                             content: JSONValue = .object([:]), tags: [String] = [], metadata: JSONValue? = nil,
                             sender: String? = nil, sentAt: Int? = nil) throws(SimulatorError) -> String {
        try mutate { (state, now) throws(BackendError) in
            guard state.users[receiver] != nil else { throw ServerState.rejected(404, "ERR_UID_NOT_FOUND", "no user \(receiver)") }
            let sequence = state.feed.count + 1
            let id = "feed-\(sequence)"
            state.feed.append(StoredFeedItem(sequence: sequence, id: id, receiver: receiver, category: category, categoryId: categoryId,
                                             channelId: channelId, content: content, sentAt: sentAt ?? now, metadata: metadata,
                                             tags: tags, sender: sender))
            return id
        }
    }

    /// Marks a feed item read now (`FeedQuery.readState` "read").
    public func markFeedItemRead(_ id: String) throws(SimulatorError) {
        try changeFeedItem(id) { item, now in
            if item.readAt == 0 { item.readAt = now }
            if item.deliveredAt == 0 { item.deliveredAt = now }
        }
    }

    /// Marks a feed item delivered now.
    public func markFeedItemDelivered(_ id: String) throws(SimulatorError) {
        try changeFeedItem(id) { item, now in
            if item.deliveredAt == 0 { item.deliveredAt = now }
        }
    }

    private func changeFeedItem(_ id: String, _ change: @escaping (inout StoredFeedItem, Int) -> Void) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            guard let index = state.feed.firstIndex(where: { $0.id == id }) else { throw ServerState.notFound("feed item \(id)") }
            change(&state.feed[index], now)
        }
    }
}
