public import ChatVault

/// Groups, members, scopes and bans.
extension ChatVaultSimulator {
    /// Adds a group; its owner becomes an admin, `members` join with their scopes.
    ///
    ///     try simulator.addGroup(SimulatedGroup(guid: "team", name: "Team", owner: "alice"),
    ///                            members: ["bob": .participant, "carol": .moderator])
    public func addGroup(_ group: SimulatedGroup, members: [String: GroupMemberScopeType] = [:]) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            guard !group.guid.isEmpty else { throw ServerState.rejected(400, "ERR_INVALID_GUID", "a guid must not be empty") }
            guard state.groups[group.guid] == nil else { throw ServerState.rejected(409, "ERR_GUID_ALREADY_EXISTS", "group \(group.guid) exists") }
            var all = members
            if let owner = group.owner { all[owner] = .admin }
            for uid in all.keys where state.users[uid] == nil { throw ServerState.rejected(404, "ERR_UID_NOT_FOUND", "no user \(uid)") }
            var stored = StoredGroup(info: group, createdAt: now, updatedAt: now)
            for (uid, scope) in all { stored.members[uid] = StoredMember(scope: scope, joinedAt: now) }
            state.groups[group.guid] = stored
        }
    }

    /// Adds a group with participants (the owner, if any, as admin).
    ///
    ///     try simulator.addGroup("team", name: "Team", type: .private, owner: "alice", members: ["bob", "carol"])
    public func addGroup(_ guid: String, name: String? = nil, type: GroupType = .public, owner: String? = nil,
                         members: [String] = [], tags: [String] = []) throws(SimulatorError) {
        try addGroup(SimulatedGroup(guid: guid, name: name, type: type, owner: owner, tags: tags),
                     members: Dictionary(members.map { ($0, .participant) }, uniquingKeysWith: { a, _ in a }))
    }

    /// Changes a group's details (not its guid).
    ///
    ///     try simulator.updateGroup("team") { $0.tags = ["work"] }
    public func updateGroup(_ guid: String, _ change: (inout SimulatedGroup) -> Void) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            guard var group = state.groups[guid] else { throw ServerState.rejected(404, "ERR_GUID_NOT_FOUND", "no group \(guid)") }
            change(&group.info)
            group.info.guid = guid
            group.updatedAt = now
            state.groups[guid] = group
        }
    }

    /// Adds members (an existing member keeps its scope; a banned user is refused).
    ///
    ///     try simulator.addMembers(["dave"], to: "team")
    public func addMembers(_ uids: [String], to guid: String, scope: GroupMemberScopeType = .participant) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            guard state.groups[guid] != nil else { throw ServerState.rejected(404, "ERR_GUID_NOT_FOUND", "no group \(guid)") }
            for uid in uids {
                guard state.users[uid] != nil else { throw ServerState.rejected(404, "ERR_UID_NOT_FOUND", "no user \(uid)") }
                guard state.groups[guid]!.banned[uid] == nil else { throw ServerState.rejected(403, "ERR_BANNED", "\(uid) is banned from \(guid)") }
                if state.groups[guid]!.members[uid] == nil { state.groups[guid]!.members[uid] = StoredMember(scope: scope, joinedAt: now) }
            }
        }
    }

    /// Removes a member (left or kicked): the group's conversation disappears from their lists
    /// and their change log says so.
    ///
    ///     try simulator.removeMember("bob", from: "team")
    public func removeMember(_ uid: String, from guid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            guard state.groups[guid]?.members.removeValue(forKey: uid) != nil else {
                throw ServerState.rejected(404, "ERR_NOT_A_MEMBER", "\(uid) is not a member of \(guid)")
            }
            state.record(.conversationRemoved(conversationId: ServerState.groupConversationId(guid), for: uid), at: now)
        }
    }

    /// Bans a user: removed from the members (if one) and listed among the banned members.
    ///
    ///     try simulator.ban("troll", from: "team")
    public func ban(_ uid: String, from guid: String) throws(SimulatorError) {
        try mutate { (state, now) throws(BackendError) in
            guard state.groups[guid] != nil else { throw ServerState.rejected(404, "ERR_GUID_NOT_FOUND", "no group \(guid)") }
            guard state.users[uid] != nil else { throw ServerState.rejected(404, "ERR_UID_NOT_FOUND", "no user \(uid)") }
            let member = state.groups[guid]!.members.removeValue(forKey: uid)
            state.groups[guid]!.banned[uid] = StoredMember(scope: member?.scope ?? .participant, joinedAt: member?.joinedAt ?? 0)
            if member != nil {
                state.record(.conversationRemoved(conversationId: ServerState.groupConversationId(guid), for: uid), at: now)
            }
        }
    }

    /// Lifts a ban (the user does not rejoin by itself).
    public func unban(_ uid: String, from guid: String) throws(SimulatorError) {
        try mutate { (state, _) throws(BackendError) in
            guard state.groups[guid]?.banned.removeValue(forKey: uid) != nil else {
                throw ServerState.rejected(404, "ERR_NOT_BANNED", "\(uid) is not banned from \(guid)")
            }
        }
    }

    /// Changes a member's scope.
    ///
    ///     try simulator.setScope(.moderator, of: "bob", in: "team")
    public func setScope(_ scope: GroupMemberScopeType, of uid: String, in guid: String) throws(SimulatorError) {
        try mutate { (state, _) throws(BackendError) in
            guard state.groups[guid]?.members[uid] != nil else {
                throw ServerState.rejected(404, "ERR_NOT_A_MEMBER", "\(uid) is not a member of \(guid)")
            }
            state.groups[guid]!.members[uid]!.scope = scope
        }
    }
}
