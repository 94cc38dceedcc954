public import ChatVault

/// What tests read back from the server's side.
extension ChatVaultSimulator {
    /// How many messages the server stores (all conversations, replies included).
    public var messageCount: Int {
        state.withLock { $0.messages.count }
    }

    /// A conversation's message ids, oldest first (replies included).
    ///
    ///     simulator.messageIds(in: ChatVaultSimulator.conversationId(between: "alice", and: "bob"))
    public func messageIds(in conversationId: String) -> [Int] {
        state.withLock { $0.conversations[conversationId]?.messageIds ?? [] }
    }

    /// How many stored messages `sender` sent with this `localMessageId` (idempotent sends: at most one).
    public func storedCopies(ofLocalMessageId localMessageId: String, from sender: String) -> Int {
        state.withLock { state in state.messages.lazy.filter { $0.sender == sender && $0.localMessageId == localMessageId }.count }
    }

    /// A message's wire JSON as `viewer` would receive it (nil if it does not exist).
    ///
    ///     let json = simulator.messageJSON(id, as: "bob")
    public func messageJSON(_ id: Int, as viewer: String) -> JSONValue? {
        state.withLock { $0.message(id) == nil ? nil : $0.renderMessage(id, for: viewer) }
    }

    /// How many entries the change log holds (for every user).
    public var changeLogCount: Int {
        state.withLock { $0.log.count }
    }

    /// The sync token a device holds once it has read the change log up to `time` (server epoch
    /// seconds): for tests that resume from a known point without paging there first. The token
    /// format is the simulator's own; callers pass it through unread.
    ///
    ///     let page = try await bob.changes(since: simulator.changeToken(at: mark), limit: 10)
    public func changeToken(at time: Int64) -> String {
        ChangeToken.encode(time)
    }

    /// Compacts the change log, as a server that keeps limited history does: the changes logged
    /// before `time` are forgotten, so a sync token that has not seen all of them answers 410
    /// `ERR_SYNC_TOKEN_EXPIRED` (the engine must start over with nil), and nil replays only what
    /// is left (from `time` on). The truth itself (messages, conversations) is untouched. Raising
    /// only: an earlier `time` changes nothing.
    public func expireChangeTokens(before time: Int64) {
        state.withLock { $0.changeTokenFloor = max($0.changeTokenFloor, time) }
    }

    /// How many devices hold a realtime connection.
    public var connectedClientCount: Int {
        state.withLock { $0.connections.count }
    }

    /// Drops every realtime connection from the server's side (a server restart): each device gets
    /// `.disconnected` and must `connect()` again.
    public func dropAllConnections() {
        state.withLock { state in
            for (_, connection) in state.connections.sorted(by: { $0.key < $1.key }) { connection.continuation.yield(.disconnected) }
            state.connections.removeAll()
        }
    }
}
