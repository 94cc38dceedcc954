import ChatVault

/// Bulk history for benchmarks and large tests: 100k messages take about a second.
extension ChatVaultSimulator {
    /// Seeds a one-to-one history: `count` text messages alternating between `a` and `b`,
    /// `spacing` seconds apart, the last one at `endingAt` (default now). Returns the new ids
    /// (contiguous, oldest first).
    ///
    /// Seeded messages are history: the change log records each at its `sentAt`, and no realtime
    /// event is sent. Seed before the clients under test sync.
    ///
    ///     let ids = try simulator.seedConversation(between: "alice", and: "bob", count: 1_000)
    @discardableResult
    public func seedConversation(between a: String, and b: String, count: Int, spacing: Int = 60, endingAt: Int? = nil,
                                 text: (Int) -> String = { "Message \($0 + 1)" }) throws(SimulatorError) -> Range<Int> {
        try seed(count: count, spacing: spacing, endingAt: endingAt, text: text) { i in
            i % 2 == 0 ? (a, .user(b)) : (b, .user(a))
        }
    }

    /// Seeds a group history: `count` text messages from `senders` in turn (default: the members,
    /// sorted), `spacing` seconds apart, the last one at `endingAt` (default now). Returns the new ids.
    ///
    ///     try simulator.seedConversation(inGroup: "team", count: 1_000)
    @discardableResult
    public func seedConversation(inGroup guid: String, count: Int, senders: [String]? = nil, spacing: Int = 60,
                                 endingAt: Int? = nil, text: (Int) -> String = { "Message \($0 + 1)" }) throws(SimulatorError) -> Range<Int> {
        let from = senders ?? state.withLock { $0.groups[guid].map { $0.members.keys.sorted() } ?? [] }
        guard !from.isEmpty else { throw SimulatorError("group \(guid) has no one to send") }
        return try seed(count: count, spacing: spacing, endingAt: endingAt, text: text) { i in (from[i % from.count], .group(guid)) }
    }

    private func seed(count: Int, spacing: Int, endingAt: Int?, text: (Int) -> String,
                      route: (Int) -> (String, MessageScope)) throws(SimulatorError) -> Range<Int> {
        guard count >= 0 else { throw SimulatorError("count must not be negative") }
        return try mutate { (state, now) throws(BackendError) in
            let end = endingAt ?? now
            let first = state.messages.count + 1
            state.messages.reserveCapacity(state.messages.count + count)
            state.log.reserveCapacity(state.log.count + count)
            var touched = Set<String>()
            for i in 0..<count {
                let (sender, scope) = route(i)
                let sentAt = end - (count - 1 - i) * spacing
                let id = try state.insert(MessageDraft(sender: sender, scope: scope, content: .text(text(i)), sentAt: sentAt),
                                          now: now, logTime: sentAt, keepSorted: false)
                touched.insert(state.messages[id - 1].conversationId)
            }
            for conversationId in touched.sorted() { state.restoreOrder(of: conversationId) }
            return first..<(state.messages.count + 1)
        }
    }
}

extension ServerState {
    /// Sorts a conversation's messages by (sentAt, id) again after bulk appends.
    mutating func restoreOrder(of conversationId: String) {
        guard var conversation = conversations.removeValue(forKey: conversationId) else { return }
        let ids = conversation.messageIds
        let sorted = zip(ids, ids.dropFirst()).allSatisfy { messages[$0 - 1].key < messages[$1 - 1].key }
        if !sorted { conversation.messageIds.sort { messages[$0 - 1].key < messages[$1 - 1].key } }
        conversations[conversationId] = conversation
    }
}
