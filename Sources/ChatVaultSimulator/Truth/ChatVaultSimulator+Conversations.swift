import ChatVault

/// Per-user conversation settings: tags, pins, deletion.
extension ChatVaultSimulator {
    /// Sets `uid`'s tags on a conversation (`ConversationQuery.tags`).
    ///
    ///     try simulator.tagConversation(ChatVaultSimulator.conversationId(between: "alice", and: "bob"),
    ///                                   for: "alice", tags: ["work"])
    public func tagConversation(_ conversationId: String, for uid: String, tags: [String]) throws(SimulatorError) {
        try changeConversation(conversationId, for: uid) { state, _ in state.tags = tags }
    }

    /// Pins a conversation for `uid`, by them or, with `bySystem`, by the app (`pinnedBy`
    /// "app_system"; `ConversationQuery.pinnedBy` "system").
    ///
    ///     try simulator.pinConversation("group_team", for: "alice")
    public func pinConversation(_ conversationId: String, for uid: String, bySystem: Bool = false) throws(SimulatorError) {
        try changeConversation(conversationId, for: uid) { state, now in
            state.pinnedAt = now
            state.pinnedBy = bySystem ? Self.systemPinner : uid
        }
    }

    /// Unpins a conversation for `uid`.
    ///
    ///     try simulator.unpinConversation("group_team", for: "alice")
    public func unpinConversation(_ conversationId: String, for uid: String) throws(SimulatorError) {
        try changeConversation(conversationId, for: uid) { state, _ in
            state.pinnedAt = 0
            state.pinnedBy = nil
        }
    }

    /// Deletes a conversation for `uid` only: it leaves their list (and their change log says so)
    /// until a newer message arrives. The messages stay.
    ///
    ///     try simulator.deleteConversation("alice_user_bob", for: "alice")
    public func deleteConversation(_ conversationId: String, for uid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            guard let conversation = state.conversations[conversationId], state.canSee(conversation: conversation, viewer: uid) else {
                throw ServerState.notFound("conversation \(conversationId)")
            }
            let key = UserConversation(uid: uid, conversationId: conversationId)
            state.userConversations[key, default: UserConversationState()].hiddenUpTo = conversation.messageIds.max() ?? 0
            state.record(.conversationRemoved(conversationId: conversationId, for: uid), at: now)
        }
    }

    private func changeConversation(_ conversationId: String, for uid: String,
                                    _ change: @escaping (inout UserConversationState, Int) -> Void) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            guard let conversation = state.conversations[conversationId], state.canSee(conversation: conversation, viewer: uid) else {
                throw ServerState.notFound("conversation \(conversationId)")
            }
            change(&state.userConversations[UserConversation(uid: uid, conversationId: conversationId), default: UserConversationState()], now)
        }
    }
}
