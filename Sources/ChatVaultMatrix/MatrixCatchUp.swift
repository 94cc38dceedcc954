public import ChatVault
import Foundation

/// A room whose catch-up stopped at the cache's bound (`OfflineConfig.maxMessagesPerConversation`):
/// its newest messages are cached, older ones sent while the user was away are not. The gap is
/// recorded (in the engine's state store, inside the encrypted cache) until a read of the room
/// reaches its oldest missing event; an online read of the room goes to the server as every read
/// does, so nothing is hidden, only not yet cached.
public struct MatrixGap: Sendable, Equatable {
    /// The room.
    public var room: String
    /// The conversation the engine files the room under (the room id for a group, the direct
    /// chat's id for a direct room).
    public var conversationId: String
}

/// A catch-up part-way through, kept in the engine's state store (the encrypted cache), never in
/// the token: the point the catch-up `/sync` reached (`next`), and the rooms whose events it did
/// not deliver, most recent activity first, each read back from `next` to where the cache stands
/// (`to`: the old sync point, or empty for a room joined during the catch-up, read from its start).
///
/// The token the engine stores is `cvm2.<plan id>.<index>[.<skip>]`: the plan, how many of its
/// rooms are in the cache, and how many events of the next one (a room longer than a page goes
/// over several; read back between the plan's fixed points, it gives the same events again). A
/// restart, even after a SIGKILL, resumes where the last committed page ended, and hundreds of
/// rooms fit (the plan is kept whole, up to the store's 1 MiB; a token of the old kind held about 35).
struct CatchUpPlan: Sendable, Equatable {
    struct Room: Sendable, Equatable {
        var room: String
        /// Where reading back stops: the old sync point, empty for the room's start.
        var to: String
        /// The room's read receipts the `/sync` answered, applied after its events.
        var receipts: [Receipt] = []
    }

    /// A user read a room up to an event (an `m.read` receipt), at `ts` (ms).
    struct Receipt: Sendable, Equatable {
        /// The most a plan keeps per room (the user's own, and a direct room's other user).
        static let perRoom = 4

        var event: String
        var user: String
        var ts: Int64
    }

    /// The name the plan is kept under in the engine's state store.
    static let key = "matrix.catchup"
    static let prefix = "cvm2."

    /// Random, so a token of an older plan (or another cache) is never taken for this one.
    var id: String
    var next: String
    var rooms: [Room]

    init(id: String = CatchUpPlan.newId(), next: String, rooms: [Room]) {
        self.id = id
        self.next = next
        self.rooms = rooms
    }

    static func newId() -> String {
        var g = SystemRandomNumberGenerator()
        return (0..<2).map { _ in String(g.next() as UInt64, radix: 16) }.joined(separator: "x")
    }

    /// The plan as the store keeps it; nil for text that is not one (a damaged or foreign value).
    init?(text: String) {
        guard let json = try? JSONValue(jsonData: Data(text.utf8)), let id = json["id"]?.stringValue, Self.isId(id),
              let next = json["next"]?.stringValue, Self.isToken(next), let list = json["rooms"]?.arrayValue else { return nil }
        var rooms: [Room] = []
        rooms.reserveCapacity(list.count)
        for item in list {
            guard let fields = item.arrayValue, fields.count == 2 || fields.count == 3, let room = fields[0].stringValue, MatrixIds.isRoomId(room),
                  let to = fields[1].stringValue, to.isEmpty || Self.isToken(to) else { return nil }
            var receipts: [Receipt] = []
            for mark in fields.count == 3 ? fields[2].arrayValue ?? [.null] : [] {
                guard let parts = mark.arrayValue, parts.count == 3, let event = parts[0].stringValue, MatrixIds.isEventId(event),
                      let user = parts[1].stringValue, MatrixIds.isUserId(user), let ts = parts[2].intValue,
                      ts >= 0, ts <= WireLimits.maxWireNumber, receipts.count < Receipt.perRoom else { return nil }
                receipts.append(Receipt(event: event, user: user, ts: ts))
            }
            rooms.append(Room(room: room, to: to, receipts: receipts))
        }
        self.init(id: id, next: next, rooms: rooms)
    }

    var text: String {
        let json: JSONValue = ["id": .string(id), "next": .string(next),
                               "rooms": .array(rooms.map { room in
                                   var fields: [JSONValue] = [.string(room.room), .string(room.to)]
                                   if !room.receipts.isEmpty {
                                       fields.append(.array(room.receipts.map { [.string($0.event), .string($0.user), .int($0.ts)] }))
                                   }
                                   return .array(fields)
                               })]
        return String(decoding: json.jsonData(), as: UTF8.self)
    }

    /// The token of the point after the first `index` rooms and the first `skip` events of the
    /// next one (a room longer than a page is delivered over several).
    func token(at index: Int, skip: Int = 0) -> String {
        skip > 0 ? "\(Self.prefix)\(id).\(index).\(skip)" : "\(Self.prefix)\(id).\(index)"
    }

    /// The plan id, room index and events skipped a `cvm2.` token names; nil when it is not one.
    static func place(of token: String) -> (id: String, index: Int, skip: Int)? {
        guard token.hasPrefix(prefix), token.utf8.count <= 128 else { return nil }
        let parts = token.dropFirst(prefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3, isId(String(parts[0])) else { return nil }
        var numbers: [Int] = []
        for part in parts.dropFirst() {
            guard part.utf8.count <= 9, !part.isEmpty, part.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let n = Int(part) else { return nil }
            numbers.append(n)
        }
        if numbers.count == 2, numbers[1] == 0 { return nil }
        return (String(parts[0]), numbers[0], numbers.count == 2 ? numbers[1] : 0)
    }

    static func isId(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 40 && id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x7a).contains($0) }
    }

    /// A homeserver pagination or sync token as this backend passes it on.
    static func isToken(_ token: String) -> Bool {
        !token.isEmpty && token.utf8.count <= 1024 && !token.utf8.contains { $0 < 0x21 || $0 == 0x7f }
    }
}

extension MatrixBackend {
    /// The catch-up: `/sync?since=<token>` (at most `catchUpTimelineLimit` events per room, rooms
    /// most recently active first within the engine's `limit`); the rooms it did not deliver (cut short, or beyond the
    /// page) become a `CatchUpPlan` kept in the cache, read afterwards room by room, most recent
    /// first, about `limit` changes a page, each room back from the `/sync` point to the old one
    /// and at most the cache's
    /// `maxMessagesPerConversation` messages (older ones are a recorded gap: `recordedGaps`).
    /// Edits, redactions and reactions arrive as upserts or deletions of their message, read
    /// receipts (`m.read`) as `receipt`s after the messages they may name.
    /// - Throws: 400 `ERR_INVALID_LIMIT` for a limit below 1; 400 `ERR_SYNC_TOKEN_INVALID` for a
    ///   token that is not one of this backend's (or whose plan the cache no longer holds), or a
    ///   `since` the homeserver refuses (400 or 404), so the engine starts over from nil; a
    ///   transient 503 `ERR_MATRIX_STATE_UNAVAILABLE` when the cache refused to keep a plan.
    public func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
        guard limit >= 1 else { throw .server(status: 400, code: "ERR_INVALID_LIMIT", message: "limit must be at least 1") }
        if let token, token.hasPrefix(CatchUpPlan.prefix) {
            guard let place = CatchUpPlan.place(of: token), let plan = storedPlan(), plan.id == place.id,
                  place.index < plan.rooms.count || place.index == plan.rooms.count && place.skip == 0 else {
                throw .server(status: 400, code: BackendError.syncTokenInvalidCode, message: "not a sync token of this backend")
            }
            return try await fill(plan, from: place.index, skip: place.skip, limit: limit)
        }
        if let token, token.hasPrefix(LegacyCatchUpPoint.prefix) {
            // A catch-up an older version left part-way: its rooms become a plan.
            guard let old = LegacyCatchUpPoint(token: token) else {
                throw .server(status: 400, code: BackendError.syncTokenInvalidCode, message: "not a sync token of this backend")
            }
            let plan = CatchUpPlan(next: old.next, rooms: old.gaps.map { CatchUpPlan.Room(room: $0.room, to: $0.from) })
            try keep(plan)
            return try await fill(plan, from: 0, skip: 0, limit: limit)
        }
        var query = [("timeout", "0"), ("filter", Self.syncFilter(timelineLimit: min(limit, Self.catchUpTimelineLimit), receipts: true))]
        if let token {
            guard CatchUpPlan.isToken(token), token.utf8.count <= 4096 else {
                throw .server(status: 400, code: BackendError.syncTokenInvalidCode, message: "not a Matrix sync token")
            }
            query.append(("since", token))
        }
        let answer: MatrixHTTP.Answer
        do {
            answer = try await call("GET", "/_matrix/client/v3/sync", query: query)
        } catch .server(let status, let code, _) where token != nil && (status == 400 || status == 404) {
            // A `since` the server does not know: start over (the engine drops the token).
            throw .server(status: 400, code: BackendError.syncTokenInvalidCode, message: "the homeserver refused the sync token (\(code))")
        }
        guard let next = answer.json["next_batch"]?.stringValue, CatchUpPlan.isToken(next) else {
            throw MatrixHTTP.bad("the sync answer has no next_batch")
        }
        let (found, gaps) = try await process(sync: answer.json, since: token, budget: limit)
        let entries = try await entries(of: found)
        let now = answer.serverTime ?? Int64(Date().timeIntervalSince1970)
        guard token != nil, !gaps.isEmpty else {
            return ChangeLogPage(changes: entries, nextToken: next, serverTime: now, hasMore: false)
        }
        let plan = CatchUpPlan(next: next, rooms: gaps)
        try keep(plan)
        return ChangeLogPage(changes: entries, nextToken: plan.token(at: 0), serverTime: now, hasMore: true)
    }

    /// The plan the cache holds; nil when there is none (or it does not decode).
    func storedPlan() -> CatchUpPlan? {
        state.withLock { $0.store }.value(for: CatchUpPlan.key).flatMap(CatchUpPlan.init(text:))
    }

    /// Keeps `plan` in the cache (replacing an earlier one: its token is then refused), before any
    /// token naming it is answered.
    func keep(_ plan: CatchUpPlan) throws(BackendError) {
        do {
            try state.withLock { $0.store }.set(plan.text, for: CatchUpPlan.key)
        } catch {
            throw .server(status: 503, code: Self.stateUnavailableCode, message: "the cache could not keep the catch-up's rooms (\(error))")
        }
    }

    /// The code of the transient 503 answered when the cache refuses the catch-up's state.
    static let stateUnavailableCode = "ERR_MATRIX_STATE_UNAVAILABLE"

    /// The next part of a plan: its rooms in order, each read back once and delivered oldest
    /// first, up to about `limit` changes a page (a longer room goes on in the next page, its
    /// token saying how many of its events are delivered: the read-back from the plan's fixed
    /// points gives the same events again after a restart), at least one event a page.
    func fill(_ plan: CatchUpPlan, from index: Int, skip: Int, limit: Int) async throws(BackendError) -> ChangeLogPage {
        var found: [MatrixChange] = []
        var index = index
        var skip = skip
        while index < plan.rooms.count, found.isEmpty || found.count < limit {
            let room = plan.rooms[index]
            let events = try await readBack(room, of: plan, index: index)
            let end = min(events.count, skip + max(limit - found.count, 1))
            if skip < end {
                // Interpreted oldest first, as every other path does (ids are allocated in that order).
                found += try await interpret(Array(events[skip..<end]), room: room.room).map(\.change)
            }
            skip = end
            if skip >= events.count {
                // The room's receipts, which may name what was just read.
                found += room.receipts.compactMap { receipt($0, room: room.room).map(MatrixChange.read) }
                state.withLock { $0.readBack = nil }
                index += 1
                skip = 0
            }
        }
        let entries = try await entries(of: found)
        let now = Int64(Date().timeIntervalSince1970)
        guard index < plan.rooms.count else {
            return ChangeLogPage(changes: entries, nextToken: plan.next, serverTime: now, hasMore: false)
        }
        return ChangeLogPage(changes: entries, nextToken: plan.token(at: index, skip: skip), serverTime: now, hasMore: true)
    }

    /// One room's events from the plan's point back to where the cache stands, oldest first, at
    /// most about `messagesPerConversation` messages (the rest is a recorded gap); kept for the
    /// pages that deliver the rest of the room.
    func readBack(_ gap: CatchUpPlan.Room, of plan: CatchUpPlan, index: Int) async throws(BackendError) -> [JSONValue] {
        let key = "\(plan.id).\(index)"
        if let kept = state.withLock({ $0.readBack }), kept.key == key { return kept.events }
        let bound = state.withLock { $0.cached }.messagesPerConversation
        let path = "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(gap.room))/messages"
        var events: [JSONValue] = []
        var messages = 0
        var from = plan.next
        var more = true
        for _ in 0..<Self.readBackRequests where more && messages < bound {
            // Room for the relations around the messages (edits, reactions) in one request.
            let asked = min(1000, (bound - messages) * 5 / 4 + 10)
            var query = [("dir", "b"), ("from", from), ("limit", String(asked))]
            if !gap.to.isEmpty { query.append(("to", gap.to)) }
            let answer = try await call("GET", path, query: query)
            let chunk = answer.json["chunk"]?.arrayValue ?? []
            events += chunk
            messages += chunk.count(where: Self.isMessageEvent)
            // A chunk shorter than asked is the rest (Synapse fills a page while events remain).
            guard chunk.count >= asked, let end = answer.json["end"]?.stringValue, CatchUpPlan.isToken(end), end != from else {
                more = false
                break
            }
            from = end
        }
        if more { try await recordGap(room: gap.room, before: from, to: gap.to) } else { try forgetGap(room: gap.room) }
        events.reverse()
        state.withLock { $0.readBack = (key, events) }
        return events
    }

    /// Requests one room's read-back may take (each up to 1,000 events).
    static let readBackRequests = 8

    /// An event that is a message the cache shows (not an edit, a reaction or state).
    static func isMessageEvent(_ event: JSONValue) -> Bool {
        switch event["type"]?.stringValue {
        case "m.room.message", Self.customEventType:
            return event["content"]?["m.relates_to"]?["rel_type"]?.stringValue != "m.replace"
        default:
            return false
        }
    }

    // MARK: - Recorded gaps

    /// The name the recorded gaps are kept under: room → its oldest missing event.
    static let gapsKey = "matrix.gaps"

    /// The rooms whose catch-up stopped at the cache's bound and that no read has filled since.
    public var recordedGaps: [MatrixGap] {
        let me = self.me
        return storedGaps().keys.sorted().map { room in
            MatrixGap(room: room, conversationId: state.withLock { $0.rooms.place(room: room, sender: me, me: me) }.conversationId)
        }
    }

    func storedGaps() -> [String: String] {
        guard let text = state.withLock({ $0.store }).value(for: Self.gapsKey),
              let object = (try? JSONValue(jsonData: Data(text.utf8)))?.objectValue else { return [:] }
        return object.compactMapValues { $0.stringValue }
    }

    func storeGaps(_ gaps: [String: String]) throws(BackendError) {
        let text = gaps.isEmpty ? nil : String(decoding: JSONValue.object(gaps.mapValues { .string($0) }).jsonData(), as: UTF8.self)
        do {
            try state.withLock { $0.store }.set(text, for: Self.gapsKey)
        } catch {
            throw .server(status: 503, code: Self.stateUnavailableCode, message: "the cache could not record a gap (\(error))")
        }
    }

    /// Records that `room` has events older than `before` (down to `to`) the catch-up left out:
    /// the oldest missing message is what a read must reach to fill the gap.
    func recordGap(room: String, before: String, to: String) async throws(BackendError) {
        let filter: JSONValue = ["types": ["m.room.message", .string(Self.customEventType)]]
        var query = [("dir", "f"), ("to", before), ("limit", "20"), ("filter", String(decoding: filter.jsonData(), as: UTF8.self))]
        if !to.isEmpty { query.append(("from", to)) }
        let answer = try await call("GET", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(room))/messages", query: query)
        let chunk = answer.json["chunk"]?.arrayValue ?? []
        guard let oldest = chunk.first(where: Self.isMessageEvent)?["event_id"]?.stringValue, MatrixIds.isEventId(oldest) else {
            // Only edits or nothing at all: no message is missing.
            return try forgetGap(room: room)
        }
        var gaps = storedGaps()
        // An older gap of the room stays the one to reach: what lies between is missing too.
        if gaps[room] == nil {
            gaps[room] = oldest
            try storeGaps(gaps)
        }
    }

    func forgetGap(room: String) throws(BackendError) {
        var gaps = storedGaps()
        guard gaps.removeValue(forKey: room) != nil else { return }
        try storeGaps(gaps)
    }

    /// A read of `room` answered `page`: the room's gap is filled once a page holds its oldest
    /// missing message.
    func settleGap(room: String, page: [JSONValue]) {
        guard !page.isEmpty, let oldest = storedGaps()[room],
              let id = identities.existingId(for: MatrixIds.ref(room: room, event: oldest)),
              page.contains(where: { $0["id"]?.intValue == Int64(id) }) else { return }
        try? forgetGap(room: room)
    }
}

/// The catch-up token of earlier versions (`cvm1.` + base64url JSON holding its gaps), read only to
/// turn a catch-up left part-way into a plan.
struct LegacyCatchUpPoint: Sendable, Equatable {
    struct Gap: Sendable, Equatable {
        var room: String
        var from: String
    }

    static let prefix = "cvm1."

    var next: String
    var gaps: [Gap]

    init?(token: String) {
        guard token.hasPrefix(Self.prefix), token.utf8.count <= 4096 else { return nil }
        var text = String(token.dropFirst(Self.prefix.count)).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text), let json = try? JSONValue(jsonData: data),
              let since = json["s"]?.stringValue, CatchUpPlan.isToken(since), let next = json["n"]?.stringValue, CatchUpPlan.isToken(next),
              let list = json["g"]?.arrayValue else { return nil }
        var gaps: [Gap] = []
        for item in list {
            guard let pair = item.arrayValue, pair.count == 2, let room = pair[0].stringValue, MatrixIds.isRoomId(room),
                  let from = pair[1].stringValue, from.isEmpty || CatchUpPlan.isToken(from) else { return nil }
            gaps.append(Gap(room: room, from: from))
        }
        self.next = next
        self.gaps = gaps
    }
}
