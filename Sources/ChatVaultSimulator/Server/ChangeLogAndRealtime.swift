import ChatVault

extension ServerState {
    // MARK: Change log

    /// The changes `viewer` may see after the sync point `token` (nil: from the start), oldest first.
    ///
    /// A token stands for a time (`ChangeToken`). Timestamps are whole seconds and the clock stands
    /// still between a test's steps, so the current second is never complete: a point at or after
    /// it is lowered to `now - 1`, and the changes of the current second come again until the
    /// clock moves on (replaying an upsert or a deletion is harmless). A page never splits one
    /// second's changes: it ends before a second that would not fit, unless that second alone
    /// fills the page, which then holds all of it (so a page can exceed `limit`).
    mutating func queryChanges(since token: String?, limit: Int, viewer: String, now: Int) throws(BackendError) -> ChangeLogPage {
        guard limit >= 1 else { throw .server(status: 400, code: "ERR_INVALID_LIMIT", message: "limit must be at least 1") }
        // Changes before `changeTokenFloor` are forgotten (compacted): a token that has not seen
        // all of them cannot resume, and nil replays what is left. Every token handed out from
        // here on stands for `floor - 1` or later, so paging after a start over never hits a 410.
        let oldestResumable = max(changeTokenFloor - 1, 0)
        var since = oldestResumable
        if let token {
            guard let time = ChangeToken.decode(token) else {
                throw .server(status: 400, code: BackendError.syncTokenInvalidCode, message: "not a sync token of this server")
            }
            guard time >= oldestResumable else {
                throw .server(status: 410, code: BackendError.syncTokenExpiredCode, message: "the change log no longer reaches this sync point")
            }
            since = time
        }
        sortLogIfNeeded()
        let after = min(since, Int64(now) - 1)
        var low = 0, high = log.count
        while low < high {
            let mid = (low + high) / 2
            if Int64(log[mid].time) <= after { low = mid + 1 } else { high = mid }
        }
        var page: [LogEntry] = []
        var more = false
        for entry in log[low...] where isVisible(entry, to: viewer) {
            if page.count >= limit, let last = page.last {
                if entry.time == last.time {
                    if page[0].time == entry.time {
                        page.append(entry)
                        continue
                    }
                    while page.last?.time == entry.time { page.removeLast() }
                }
                more = true
                break
            }
            page.append(entry)
        }
        let changes = page.map { entry -> ChangeLogEntry in
            switch entry.change {
            case .upserted(let id, _): return .messageUpserted(renderMessage(id, for: viewer))
            case .deleted(let id): return .messageDeleted(id: id, conversationId: messages[id - 1].conversationId)
            case .conversationRemoved(let conversationId, _): return .conversationRemoved(conversationId: conversationId)
            }
        }
        let reached = page.last.map { Int64($0.time) } ?? since
        return ChangeLogPage(changes: changes, nextToken: ChangeToken.encode(reached), serverTime: more ? reached : Int64(now), hasMore: more)
    }

    private func isVisible(_ entry: LogEntry, to viewer: String) -> Bool {
        switch entry.change {
        case .upserted(let id, let onlyFor):
            return (onlyFor == nil || onlyFor == viewer) && canSee(message: messages[id - 1], viewer: viewer)
        case .deleted(let id):
            return canSee(message: messages[id - 1], viewer: viewer)
        case .conversationRemoved(_, let uid):
            return uid == viewer
        }
    }

    // MARK: Realtime

    /// Sends an event about message `id` to every connected device of the conversation's
    /// participants (but not to `excludedClient`, the device that sent it), rendered for each.
    func broadcast(messageId id: Int, excluding excludedClient: Int? = nil, _ event: (JSONValue) -> RealtimeEvent) {
        let message = messages[id - 1]
        guard let conversation = conversations[message.conversationId] else { return }
        let participants = Set(participants(of: conversation))
        for (clientId, connection) in connections.sorted(by: { $0.key < $1.key })
        where clientId != excludedClient && participants.contains(connection.uid) {
            connection.continuation.yield(event(renderMessage(id, for: connection.uid)))
        }
    }
}
