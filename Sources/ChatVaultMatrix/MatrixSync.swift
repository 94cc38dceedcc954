public import ChatVault
import Foundation

/// What one `/sync` answer meant to the engine, oldest first.
enum MatrixChange: Sendable {
    case message(JSONValue, ownEcho: Bool)
    /// An `m.replace` event, as it came: resolved by the path that needs it (the catch-up from
    /// the cached copy of its target when it can, realtime and the rest by fetching the target).
    case edit(JSONValue, room: String)
    /// A message redacted: its id, and its event for a path that renders it as deleted (realtime).
    case deleted(id: Int, conversationId: String, room: String, event: String)
    case left(conversationId: String, room: String)
    /// Someone reacted: the realtime shape of `reactionAdded`, and the message's place.
    case reacted(JSONValue, room: String, event: String)
    /// A reaction was taken back (its annotation redacted): the shape of `reactionRemoved`.
    case unreacted(JSONValue, room: String, event: String)
    /// Someone read a room up to a message (`m.read`): the realtime shape of `messagesRead`.
    case read(JSONValue)
}

extension MatrixBackend {
    /// The inline `/sync` filter: the rooms' timelines (at most `limit` events each), the user's
    /// account data (`m.direct`), no presence. `rooms`: only those rooms (one conversation's
    /// lookup), else every room.
    static func syncFilter(timelineLimit: Int, receipts: Bool = false, rooms: [String]? = nil) -> String {
        var room: [String: JSONValue] = [
            "timeline": ["limit": .int(Int64(timelineLimit))],
            "state": ["lazy_load_members": true],
            "ephemeral": ["types": receipts ? ["m.receipt"] : []],
        ]
        if let rooms { room["rooms"] = .array(rooms.map { .string($0) }) }
        let filter: JSONValue = [
            "room": .object(room),
            "presence": ["types": []],
            "account_data": ["types": ["m.direct"]],
        ]
        return String(decoding: filter.jsonData(), as: UTF8.self)
    }

    /// The most events of one room a catch-up `/sync` asks for; a room with more is read back
    /// with `/messages` from the plan. Small, because one `/sync` answers every room at once: with
    /// hundreds of rooms, 100 events each made an answer whose parsed form alone took over 100 MiB
    /// (`bench matrix`, 300 rooms), and a room cut short had its events read twice.
    static let catchUpTimelineLimit = 20

    /// A catch-up's changes as the engine's change log. An edit, or a reaction added or taken
    /// back, whose target is cached (or rendered earlier in this catch-up) is applied to that copy
    /// without a request (`resolvesRelationsLocally`); one whose target is not is resolved by
    /// fetching it, as realtime does. A redaction is a deletion by id: the engine marks its cached
    /// copy deleted (and leaves alone a message it does not hold), so nothing is fetched for it.
    func entries(of found: [MatrixChange]) async throws(BackendError) -> [ChangeLogEntry] {
        let local = resolvesRelationsLocally
        // Each relation's target as this catch-up last rendered it: its cached copy (one read of
        // the cache for the batch), then whatever the changes before it made of it.
        var copies = local ? cachedTargets(of: found) : [:]
        if local { clearAnnotations(of: found.compactMap { if case .message(let m, _) = $0 { m } else { nil } }) }
        var entries: [ChangeLogEntry] = []
        for change in found {
            switch change {
            case .message(let m, _):
                entries.append(.messageUpserted(m))
                if local, let id = m["id"]?.intValue { copies[Int(id)] = m }
            case .edit(let edit, let room):
                let target = Self.editTarget(edit).flatMap { identities.existingId(for: MatrixIds.ref(room: room, event: $0)) }
                if local, let target, let copy = copies[target] {
                    switch Self.applying(edit: edit, to: copy) {
                    case .applied(let edited):
                        entries.append(.messageUpserted(edited))
                        copies[target] = edited
                        continue
                    case .unchanged:
                        continue
                    case .needsOriginal:
                        break
                    }
                }
                if let edited = try await editedMessage(edit, room: room) {
                    entries.append(.messageUpserted(edited))
                    if local, let target { copies[target] = edited }
                }
            case .deleted(let id, let conversationId, let room, let event):
                entries.append(.messageDeleted(id: id, conversationId: conversationId))
                // The engine keeps the copy's content and stamps the deletion: later relations of
                // this message in the batch ask the server.
                copies[id] = nil
                // Asking resolved nothing here: the answer went unused. Kept when resolving
                // locally is off, so `bench matrix` measures the catch-up as it was.
                if !local { _ = try? await fetchMessage(room: room, event: event) }
            case .left(let conversationId, let room):
                entries.append(.conversationRemoved(conversationId: conversationId))
                // Gone with its messages: no gap of it is left to fill.
                try? forgetGap(room: room)
            case .read(let json):
                entries.append(.receipt(json))
            case .reacted(let json, let room, let event), .unreacted(let json, let room, let event):
                let adding: Bool
                if case .reacted = change { adding = true } else { adding = false }
                let messageId = json["reaction"]?["messageId"]?.intValue.map { Int($0) }
                if local, let messageId, let copy = copies[messageId], let a = Self.annotation(of: json),
                   let counted = recounted(copy, room: room, event: event, reaction: a, adding: adding) {
                    entries.append(.messageUpserted(counted))
                    copies[messageId] = counted
                    continue
                }
                // The catch-up carries a reaction as an upsert of its message with the counts.
                note([change])
                if let counted = try? await reactedMessage((room, event)) {
                    entries.append(.messageUpserted(counted))
                    if local, let messageId { copies[messageId] = counted }
                }
            }
        }
        return entries
    }

    /// The cached copies of the messages `found`'s edits and reactions name (those with ids).
    func cachedTargets(of found: [MatrixChange]) -> [Int: JSONValue] {
        var ids: [Int] = []
        for change in found {
            switch change {
            case .edit(let edit, let room):
                if let target = Self.editTarget(edit), let id = identities.existingId(for: MatrixIds.ref(room: room, event: target)) { ids.append(id) }
            case .reacted(let json, _, _), .unreacted(let json, _, _):
                if let id = json["reaction"]?["messageId"]?.intValue { ids.append(Int(id)) }
            default:
                continue
            }
        }
        guard !ids.isEmpty else { return [:] }
        return state.withLock { $0.cached }.messages(ids: ids)
    }

    /// The event an `m.replace` edits, when the edit is well formed (new content, a target id).
    static func editTarget(_ edit: JSONValue) -> String? {
        guard let target = edit["content"]?["m.relates_to"]?["event_id"]?.stringValue, MatrixIds.isEventId(target),
              edit["content"]?["m.new_content"]?.objectValue != nil else { return nil }
        return target
    }

    /// The current end of the homeserver's log: a `/sync` without a token and without rooms, whose
    /// `next_batch` is the token; the server's clock as its time.
    public func latestSyncPoint() async throws(BackendError) -> ChangeLogPage {
        let filter: JSONValue = ["room": ["rooms": []], "presence": ["types": []], "account_data": ["types": ["m.direct"]]]
        let answer = try await call("GET", "/_matrix/client/v3/sync", query: [
            ("timeout", "0"), ("filter", String(decoding: filter.jsonData(), as: UTF8.self)),
        ])
        guard let next = answer.json["next_batch"]?.stringValue, !next.isEmpty, next.utf8.count <= 4096 else {
            throw MatrixHTTP.bad("the sync answer has no next_batch")
        }
        if let events = answer.json["account_data"]?["events"]?.arrayValue { applyAccountData(events) }
        return ChangeLogPage(changes: [], nextToken: next, serverTime: answer.serverTime ?? Int64(Date().timeIntervalSince1970), hasMore: false)
    }

    func applyAccountData(_ events: [JSONValue]) {
        for event in events where event["type"]?.stringValue == "m.direct" {
            if let content = event["content"] { adoptDirect(content) }
        }
    }

    /// Turns a `/sync` answer into changes, oldest first across rooms. With a `since` point (a
    /// catch-up), rooms are taken most recently active first; a room whose timeline was cut
    /// (`limited`), or that would take this page past `budget` changes, is not delivered here: it
    /// comes back as a gap, to be read back from the answer's point to `since` (a room joined
    /// during the catch-up, to its start), the gaps most recently active first.
    func process(sync json: JSONValue, since: String?, budget: Int = .max) async throws(BackendError) -> (changes: [MatrixChange], gaps: [CatchUpPlan.Room]) {
        if let events = json["account_data"]?["events"]?.arrayValue { applyAccountData(events) }
        var gaps: [CatchUpPlan.Room] = []
        if let invites = json["rooms"]?["invite"]?.objectValue {
            for (room, value) in invites.sorted(by: { $0.key < $1.key }) {
                let inviteState = value["invite_state"]?["events"]?.arrayValue ?? []
                if let invitation = groupInvitation(room: room, inviteState: inviteState) {
                    // A group's invitation waits for the user's answer.
                    invitationContinuation.yield(invitation)
                    continue
                }
                let joined = await acceptDirectInvite(room: room, inviteState: inviteState)
                // Joined during a catch-up: the room's whole backlog (sent while the invitation
                // waited) is read from its start, not only what follows the join.
                if joined, since != nil { gaps.append(CatchUpPlan.Room(room: room, to: "")) }
            }
        }
        var timeline: [(room: String, events: [JSONValue], marks: [CatchUpPlan.Receipt])] = []
        var changes: [(ts: Int64, order: Int, change: MatrixChange)] = []
        var order = 0
        var planned = 0
        if let joined = json["rooms"]?["join"]?.objectValue {
            // Most recent activity first (the last timeline event's time; the room id breaks ties).
            let rooms = joined.filter { MatrixIds.isRoomId($0.key) }.map { (room: $0.key, value: $0.value, latest: Self.latest($0.value)) }
                .sorted { ($0.latest, $1.room) > ($1.latest, $0.room) }
            for (room, value, _) in rooms {
                let events = value["timeline"]?["events"]?.arrayValue ?? []
                if let since, value["timeline"]?["limited"]?.boolValue == true
                    || !events.isEmpty && planned > 0 && planned + events.count > max(budget, 1) {
                    // Its receipts wait in the plan for the room's events.
                    let marks = marksWorthKeeping(Self.readMarks(value["ephemeral"]?["events"]?.arrayValue ?? []), room: room)
                    gaps.append(CatchUpPlan.Room(room: room, to: since, receipts: marks))
                    continue
                }
                planned += events.count
                timeline.append((room, events, Self.readMarks(value["ephemeral"]?["events"]?.arrayValue ?? [])))
            }
        }
        for (room, events, marks) in timeline {
            for change in try await interpret(events, room: room) {
                changes.append((change.ts, order, change.change))
                order += 1
            }
            // After the timeline: a receipt may name a message this answer brought.
            for mark in marks {
                guard let json = receipt(mark, room: room) else { continue }
                changes.append((mark.ts, order, .read(json)))
                order += 1
            }
        }
        if let left = json["rooms"]?["leave"]?.objectValue {
            let me = self.me
            for room in left.keys.sorted() where MatrixIds.isRoomId(room) {
                let place = state.withLock { $0.rooms.place(room: room, sender: me, me: me) }
                changes.append((Int64.max, order, .left(conversationId: place.conversationId, room: room)))
                order += 1
            }
        }
        return (changes.sorted { ($0.ts, $0.order) < ($1.ts, $1.order) }.map(\.change), gaps)
    }

    /// The time of a joined room's last timeline event in a `/sync` answer (0 when it has none).
    static func latest(_ room: JSONValue) -> Int64 {
        time(room["timeline"]?["events"]?.arrayValue?.last?["origin_server_ts"])
    }

    /// The `m.read` receipts of a room's `m.receipt` ephemeral events: which event each user read
    /// up to, and when (ms).
    static func readMarks(_ events: [JSONValue]) -> [CatchUpPlan.Receipt] {
        var out: [CatchUpPlan.Receipt] = []
        for event in events where event["type"]?.stringValue == "m.receipt" {
            for (eventId, kinds) in (event["content"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) where MatrixIds.isEventId(eventId) {
                for (user, info) in (kinds["m.read"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) where MatrixIds.isUserId(user) {
                    out.append(CatchUpPlan.Receipt(event: eventId, user: user, ts: time(info["ts"])))
                }
            }
        }
        return out
    }

    /// A read mark as `messagesRead` shapes it; nil when the cache has no id for its message (an id
    /// is never given from the time of an event that names the message, here the receipt).
    func receipt(_ mark: CatchUpPlan.Receipt, room: String) -> JSONValue? {
        guard let id = identities.existingId(for: MatrixIds.ref(room: room, event: mark.event)) else { return nil }
        let me = self.me
        let place = state.withLock { $0.rooms.place(room: room, sender: mark.user, me: me) }
        return [
            "messageId": .int(Int64(id)), "sender": ["uid": .string(mark.user)],
            "receiverId": .string(place.receiver), "receiverType": .string(place.receiverType.rawValue),
            "conversationId": .string(place.conversationId), "receiptType": "read",
            "timestamp": .int(mark.ts / 1000), "readAt": .int(mark.ts / 1000),
        ]
    }

    /// The read marks of a room the cache acts on: the user's own (unread counts), and in a direct
    /// room the other user's (the user's messages read); at most a few.
    func marksWorthKeeping(_ marks: [CatchUpPlan.Receipt], room: String) -> [CatchUpPlan.Receipt] {
        let me = self.me
        let direct = state.withLock { $0.rooms.place(room: room, sender: me, me: me) }.receiverType == .user
        return Array(marks.filter { $0.user == me || direct }.prefix(CatchUpPlan.Receipt.perRoom))
    }

    /// One room's timeline events as changes (with each one's time).
    func interpret(_ events: [JSONValue], room: String) async throws(BackendError) -> [(ts: Int64, change: MatrixChange)] {
        ensureDirectMap()
        let ids = try await batchIds(events, room: room)
        let me = self.me
        var out: [(Int64, MatrixChange)] = []
        var seen: [String: KnownReaction] = [:]
        var reactions: [(id: String, reaction: KnownReaction)] = []
        for event in events {
            let ts = Self.time(event["origin_server_ts"])
            let content = event["content"]
            switch event["type"]?.stringValue {
            case "m.room.message", Self.customEventType:
                if content?["m.relates_to"]?["rel_type"]?.stringValue == "m.replace" {
                    if Self.editTarget(event) != nil { out.append((ts, .edit(event, room: room))) }
                } else if let message = renderMessage(event, room: room, ids: ids) {
                    let own = event["sender"]?.stringValue == me && event["unsigned"]?["transaction_id"]?.stringValue != nil
                    out.append((ts, .message(message, ownEcho: own)))
                }
            case "m.room.redaction":
                guard let target = (event["redacts"] ?? content?["redacts"])?.stringValue, MatrixIds.isEventId(target),
                      let sender = event["sender"]?.stringValue else { continue }
                if let id = ids[MatrixIds.ref(room: room, event: target)] ?? identities.existingId(for: MatrixIds.ref(room: room, event: target)) {
                    let place = state.withLock { $0.rooms.place(room: room, sender: sender, me: me) }
                    out.append((ts, .deleted(id: id, conversationId: place.conversationId, room: room, event: target)))
                } else if let reaction = seen[target] ?? knownReaction(room: room, event: target),
                          let messageId = ids[MatrixIds.ref(room: room, event: reaction.target)]
                            ?? identities.existingId(for: MatrixIds.ref(room: room, event: reaction.target)) {
                    // A reaction taken back (Element redacts the annotation).
                    out.append((ts, .unreacted(reactionJSON(id: target, reaction: reaction, messageId: messageId, room: room),
                                               room: room, event: reaction.target)))
                }
            case "m.reaction":
                guard let json = reactionEvent(event, room: room, ids: ids),
                      let id = event["event_id"]?.stringValue,
                      let target = content?["m.relates_to"]?["event_id"]?.stringValue,
                      let key = content?["m.relates_to"]?["key"]?.stringValue,
                      let sender = event["sender"]?.stringValue else { continue }
                let known = KnownReaction(target: target, key: key, sender: sender, ts: ts)
                seen[id] = known
                reactions.append((id, known))
                // A reaction redacted already (a page read after the fact) counts for nothing.
                if event["unsigned"]?["redacted_because"] != nil { continue }
                out.append((ts, .reacted(json, room: room, event: target)))
            case "m.room.member":
                let membership = content?["membership"]?.stringValue
                if event["state_key"]?.stringValue == me, membership == "leave" || membership == "ban" {
                    let place = state.withLock { $0.rooms.place(room: room, sender: me, me: me) }
                    out.append((ts, .left(conversationId: place.conversationId, room: room)))
                }
            default:
                continue
            }
        }
        remember(reactions: reactions, room: room)
        return out
    }

    /// The message an `m.replace` event edits, as it now reads (this edit, or a later one).
    func editedMessage(_ edit: JSONValue, room: String) async throws(BackendError) -> JSONValue? {
        guard let target = Self.editTarget(edit),
              let editor = edit["sender"]?.stringValue,
              let original = try? await fetchEvent(room: room, event: target),
              original["sender"]?.stringValue == editor else { return nil }
        return try await renderFetched(original, room: room, edit: edit)
    }

    func fetchEvent(room: String, event: String) async throws(BackendError) -> JSONValue {
        try await call("GET", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(room))/event/\(MatrixHTTP.segment(event))").json
    }

    /// One event of `room`, rendered as it now stands (its latest edit, its reply link, and its
    /// reaction counts when it has had reactions, or always with `reactions`); nil when it is not
    /// a message.
    func fetchMessage(room: String, event: String, reactions: Bool = false) async throws(BackendError) -> JSONValue? {
        let json = try await fetchEvent(room: room, event: event)
        return try await renderFetched(json, room: room, reactions: reactions)
    }

    /// A fetched event rendered with ids for it and what it names, and its reaction counts.
    func renderFetched(_ json: JSONValue, room: String, edit: JSONValue? = nil, reactions: Bool = false) async throws(BackendError) -> JSONValue? {
        ensureDirectMap()
        let ids = try await batchIds([json], room: room)
        guard let message = renderMessage(json, room: room, ids: ids, edit: edit),
              let event = json["event_id"]?.stringValue else { return nil }
        if reactions { return try await withReactions(message, room: room, event: event) }
        return try await withKnownReactions([message], room: room).first ?? message
    }

    // MARK: - Realtime

    /// Starts the `/sync` long-poll loop from the current point and reports `.connected`; returns
    /// at once when already connected. A failed poll ends the connection (`.disconnected`).
    public func connect() async throws(BackendError) {
        if state.withLock({ $0.connected }) { return }
        let start = try await latestSyncPoint().nextToken
        let generation = state.withLock { s -> Int in
            s.connection += 1
            s.connected = true
            return s.connection
        }
        continuation.yield(.connected)
        // The loop holds the backend only for one poll at a time: a backend the app drops ends it.
        let task = Task { [weak self] in
            var since = start
            while !Task.isCancelled {
                guard let backend = self, let next = await backend.pollOnce(since: since, generation: generation) else { return }
                since = next
            }
        }
        state.withLock { s in
            if s.connection == generation { s.loop = task } else { task.cancel() }
        }
    }

    /// Stops the long-poll loop; reports `.disconnected` if it was connected.
    public func disconnect() async {
        let (loop, was) = state.withLock { s -> (Task<Void, Never>?, Bool) in
            s.connection += 1
            defer { s.loop = nil; s.connected = false }
            return (s.loop, s.connected)
        }
        loop?.cancel()
        if was { continuation.yield(.disconnected) }
    }

    /// The long-poll loop of one connection: ends (and reports `.disconnected`) on the first
    /// failure; the engine reconnects with its backoff.
    /// One long-poll of a connection: delivers what it brought and answers the next point, or nil
    /// when the connection is over (superseded, or failed: then `.disconnected` is reported and the
    /// engine reconnects with its backoff).
    private func pollOnce(since: String, generation: Int) async -> String? {
        let wait = configuration.pollTimeoutMs
        do {
            let answer = try await call("GET", "/_matrix/client/v3/sync", query: [
                ("since", since), ("timeout", String(wait)), ("filter", Self.syncFilter(timelineLimit: 100, receipts: true)),
            ], timeout: TimeInterval(wait) / 1000 + configuration.requestTimeout)
            guard state.withLock({ $0.connection == generation }) else { return nil }
            guard let next = answer.json["next_batch"]?.stringValue, !next.isEmpty, next.utf8.count <= 4096 else {
                throw MatrixHTTP.bad("the sync answer has no next_batch")
            }
            let changes = try await process(sync: answer.json, since: nil).changes
            noteListChanges(answer.json, generation: generation)
            note(changes)
            for change in changes {
                guard state.withLock({ $0.connection == generation }) else { return nil }
                switch change {
                case .message(let m, let ownEcho): if !ownEcho { continuation.yield(.messageReceived(m)) }
                case .edit(let edit, let room):
                    if let m = try await editedMessage(edit, room: room) { continuation.yield(.messageEdited(m)) }
                case .deleted(_, _, let room, let event):
                    if let m = try? await fetchMessage(room: room, event: event) { continuation.yield(.messageDeleted(m)) }
                case .reacted(let r, let room, let event), .unreacted(let r, let room, let event):
                    // With the message as it now stands, so the cache's counts follow.
                    var json = r
                    if case .object(var o) = r, let message = try? await reactedMessage((room, event)) {
                        o["message"] = message
                        json = .object(o)
                    }
                    if case .reacted = change { continuation.yield(.reactionAdded(json)) } else { continuation.yield(.reactionRemoved(json)) }
                case .read(let r): continuation.yield(.messagesRead(r))
                case .left: continue
                }
            }
            return next
        } catch {
            let drop = state.withLock { s -> Bool in
                guard s.connection == generation else { return false }
                s.connection += 1
                s.connected = false
                s.loop = nil
                return true
            }
            if drop { continuation.yield(.disconnected) }
            return nil
        }
    }
}
