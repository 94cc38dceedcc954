public import ChatVault

/// Users, presence, blocks and friendships.
extension ChatVaultSimulator {
    /// Adds a user.
    ///
    ///     try simulator.addUser(SimulatedUser(uid: "alice", name: "Alice", tags: ["vip"], status: .online))
    ///
    /// - Throws: `SimulatorError` if the uid is empty or taken.
    public func addUser(_ user: SimulatedUser) throws(SimulatorError) {
        try mutate { (state, _) throws(BackendError) in
            guard !user.uid.isEmpty else { throw ServerState.rejected(400, "ERR_INVALID_UID", "a uid must not be empty") }
            guard state.users[user.uid] == nil else { throw ServerState.rejected(409, "ERR_UID_ALREADY_EXISTS", "user \(user.uid) exists") }
            state.users[user.uid] = user
        }
    }

    /// Adds users named after their uids.
    ///
    ///     try simulator.addUsers("alice", "bob", "carol")
    public func addUsers(_ uids: String...) throws(SimulatorError) {
        for uid in uids { try addUser(SimulatedUser(uid: uid)) }
    }

    /// Changes a user's profile (not its uid).
    ///
    ///     try simulator.updateUser("bob") { $0.tags = ["support"]; $0.isAgentic = true }
    public func updateUser(_ uid: String, _ change: (inout SimulatedUser) -> Void) throws(SimulatorError) {
        try mutate { (state, _) throws(BackendError) in
            guard var user = state.users[uid] else { throw ServerState.rejected(404, "ERR_UID_NOT_FOUND", "no user \(uid)") }
            change(&user)
            user.uid = uid
            state.users[uid] = user
        }
    }

    /// Sets a user's presence; going offline records `lastActiveAt` as now.
    ///
    ///     try simulator.setPresence("bob", .online)
    public func setPresence(_ uid: String, _ status: UserStatus) throws(SimulatorError) {
        let now = self.now
        try updateUser(uid) { user in
            user.status = status
            user.lastActiveAt = now
        }
    }

    /// The user as stored (nil if unknown).
    public func user(_ uid: String) -> SimulatedUser? {
        state.withLock { $0.users[uid] }
    }

    /// `blocker` blocks `blocked`: hidden from `blocker`'s lists where the query says so, and no
    /// direct messages either way.
    ///
    ///     try simulator.block("spammer", by: "alice")
    public func block(_ blocked: String, by blocker: String) throws(SimulatorError) {
        try mutate { (state, _) throws(BackendError) in
            guard state.users[blocked] != nil, state.users[blocker] != nil, blocked != blocker else {
                throw ServerState.rejected(404, "ERR_UID_NOT_FOUND", "both users must exist and differ")
            }
            state.blocks.insert(Pair(blocker, blocked))
        }
    }

    /// Lifts a block.
    public func unblock(_ blocked: String, by blocker: String) {
        _ = state.withLock { $0.blocks.remove(Pair(blocker, blocked)) }
    }

    /// Declares two users friends (`UserQuery.friendsOnly`). Users who share a one-to-one
    /// conversation with at least one message are friends too.
    ///
    ///     try simulator.makeFriends("alice", "carol")
    public func makeFriends(_ a: String, _ b: String) throws(SimulatorError) {
        try mutate { (state, _) throws(BackendError) in
            guard state.users[a] != nil, state.users[b] != nil else { throw ServerState.rejected(404, "ERR_UID_NOT_FOUND", "both users must exist") }
            state.friendships.insert(.unordered(a, b))
        }
    }
}
