public import ChatVault
import Foundation

/// Reactions (`m.reaction` annotations), threads (`m.thread`) and the notification feed
/// (`/notifications`) over Matrix.
extension MatrixBackend {
    // MARK: - Reactions

    /// The annotations of an event: (annotation event id, key, sender, time ms), oldest first.
    func annotations(room: String, event: String) async throws(BackendError) -> [(id: String, key: String, sender: String, ts: Int64)] {
        var out: [(String, String, String, Int64)] = []
        var from: String?
        for _ in 0..<20 {
            var query = [("limit", "100"), ("dir", "f")]
            if let from { query.append(("from", from)) }
            let answer = try await call("GET", "/_matrix/client/v1/rooms/\(MatrixHTTP.segment(room))/relations/\(MatrixHTTP.segment(event))/m.annotation/m.reaction",
                                        query: query)
            for e in answer.json["chunk"]?.arrayValue ?? [] {
                guard let id = e["event_id"]?.stringValue, MatrixIds.isEventId(id),
                      let key = e["content"]?["m.relates_to"]?["key"]?.stringValue, !key.isEmpty, key.utf8.count <= 255,
                      let sender = e["sender"]?.stringValue, MatrixIds.isUserId(sender) else { continue }
                out.append((id, key, sender, Self.time(e["origin_server_ts"])))
            }
            guard let next = answer.json["next_batch"]?.stringValue, !next.isEmpty, next != from else { break }
            from = next
        }
        return out
    }

    /// A message with its reaction counts (`reactions`: emoji, count, reactedByMe, in first-use order).
    func withReactions(_ message: JSONValue, room: String, event: String) async throws(BackendError) -> JSONValue {
        guard case .object(var o) = message else { return message }
        let list = try await annotations(room: room, event: event)
        // Remembered, so a later page of this message brings its counts, a redaction of one of
        // them is known for a reaction's removal, and a catch-up counts the next one itself.
        learn(list, of: event, room: room)
        let rendered = Self.rendered(list.map { Annotation(id: $0.id, key: $0.key, sender: $0.sender) }, me: me)
        if !rendered.isEmpty { o["reactions"] = .array(rendered) }
        return .object(o)
    }

    /// Adds the user's `m.reaction` annotation with this key (once: one the user already has is not
    /// sent again); answers the message with its reaction counts.
    /// - Throws: 400 `ERR_INVALID_REACTION` for an empty reaction or one over 255 bytes.
    public func addReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue {
        guard !reaction.isEmpty, reaction.utf8.count <= 255 else {
            throw .server(status: 400, code: "ERR_INVALID_REACTION", message: "a reaction is 1 to 255 bytes")
        }
        let place = try event(of: messageId)
        let me = self.me
        if try await !annotations(room: place.room, event: place.event).contains(where: { $0.sender == me && $0.key == reaction }) {
            _ = try await call("PUT", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(place.room))/send/m.reaction/react-\(UUID().uuidString)",
                               json: ["m.relates_to": ["rel_type": "m.annotation", "event_id": .string(place.event), "key": .string(reaction)]])
        }
        return try await reactedMessage(place)
    }

    /// Redacts the user's own annotations with this key; answers the message with its reaction
    /// counts.
    public func removeReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue {
        let place = try event(of: messageId)
        let me = self.me
        for a in try await annotations(room: place.room, event: place.event) where a.sender == me && a.key == reaction {
            _ = try await call("PUT", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(place.room))/redact/\(MatrixHTTP.segment(a.id))/unreact-\(UUID().uuidString)",
                               json: .object([:]))
        }
        return try await reactedMessage(place)
    }

    func reactedMessage(_ place: (room: String, event: String)) async throws(BackendError) -> JSONValue {
        guard let message = try await fetchMessage(room: place.room, event: place.event, reactions: true) else {
            throw .server(status: 404, code: "ERR_NOT_FOUND", message: "the event is not a message")
        }
        return message
    }

    /// The message's annotations (`/relations`), only `reaction` if set, oldest first (`.previous`:
    /// newest first); the cursor is a position in that list.
    public func reactions(_ query: ReactionQuery) async throws(BackendError) -> WirePage {
        let place = try event(of: query.messageId)
        var list = try await annotations(room: place.room, event: place.event)
        if let only = query.reaction { list = list.filter { $0.key == only } }
        if query.direction == .previous { list.reverse() }
        let start = query.cursor.flatMap(Int.init).map { min(max($0, 0), list.count) } ?? 0
        let end = min(start + max(query.limit, 1), list.count)
        let items: [JSONValue] = list[start..<end].map { a in
            ["id": .string(a.id), "messageId": .int(Int64(query.messageId)), "reaction": .string(a.key), "uid": .string(a.sender),
             "reactedAt": .int(a.ts / 1000), "reactedBy": ["uid": .string(a.sender)]]
        }
        return WirePage(items: items, nextCursor: end < list.count ? String(end) : nil)
    }

    /// A reaction event as the realtime shape `reactionAdded` carries (without the message: the
    /// next read brings its counts).
    func reactionEvent(_ event: JSONValue, room: String, ids: [String: Int]) -> JSONValue? {
        guard let relation = event["content"]?["m.relates_to"], relation["rel_type"]?.stringValue == "m.annotation",
              let target = relation["event_id"]?.stringValue, MatrixIds.isEventId(target),
              let key = relation["key"]?.stringValue, !key.isEmpty, key.utf8.count <= 255,
              let id = event["event_id"]?.stringValue, MatrixIds.isEventId(id),
              let sender = event["sender"]?.stringValue, MatrixIds.isUserId(sender),
              let messageId = ids[MatrixIds.ref(room: room, event: target)] else { return nil }
        return reactionJSON(id: id, reaction: KnownReaction(target: target, key: key, sender: sender, ts: Self.time(event["origin_server_ts"])),
                            messageId: messageId, room: room)
    }

    // MARK: - Threads

    /// The room's threads (`/threads`, `include` participated or all), each root with its
    /// `m.thread` summary (reply count, latest reply); `nextCursor` is the homeserver's
    /// `next_batch`. A query without a scope is `ERR_MATRIX_UNSUPPORTED`.
    public func threads(_ query: ThreadQuery) async throws(BackendError) -> WirePage {
        guard let scope = query.scope else { throw unsupported("a thread list across conversations") }
        guard let room = try await room(for: scope, create: false) else { return WirePage(items: [], nextCursor: nil) }
        var q = [("limit", String(min(max(query.limit, 1), 100))), ("include", query.participatedByMe ? "participated" : "all")]
        if let cursor = query.cursor { q.append(("from", cursor)) }
        let answer = try await call("GET", "/_matrix/client/v1/rooms/\(MatrixHTTP.segment(room))/threads", query: q)
        let roots = answer.json["chunk"]?.arrayValue ?? []
        let latest = roots.compactMap { $0["unsigned"]?["m.relations"]?["m.thread"]?["latest_event"] }
        let ids = try await batchIds(roots + latest, room: room)
        var items: [JSONValue] = []
        for root in roots {
            guard let rendered = renderMessage(root, room: room, ids: ids), let parentId = rendered["id"] else { continue }
            // The engine writes the parent into the cached messages: with its counts, as a page does.
            let parent = try await withKnownReactions([rendered], room: room).first ?? rendered
            let summary = root["unsigned"]?["m.relations"]?["m.thread"]
            var o: [String: JSONValue] = [
                "parentMessageId": parentId, "parentMessage": parent,
                "replyCount": .int(min(max(summary?["count"]?.intValue ?? 0, 0), 1 << 31)),
                "conversationId": parent["conversationId"] ?? .null, "receiverType": parent["receiverType"] ?? .null,
                "receiverUid": parent["receiver"] ?? .null,
                "isSubscribed": .bool(summary?["current_user_participated"]?.boolValue ?? false),
            ]
            if let last = summary?["latest_event"], let reply = renderMessage(last, room: room, ids: ids) {
                o["lastReply"] = reply
                o["updatedAt"] = reply["sentAt"] ?? .null
            }
            items.append(.object(o))
        }
        return WirePage(items: items, nextCursor: answer.json["next_batch"]?.stringValue)
    }

    // MARK: - The notification feed: /notifications

    /// What the user's push rules notified (`/notifications`), newest first, as feed items of
    /// category `"matrix"` whose `channelId` is the room; `readState` applied; `nextCursor` is
    /// `next_token`.
    public func notificationFeed(_ query: FeedQuery) async throws(BackendError) -> WirePage {
        var q = [("limit", String(min(max(query.limit, 1), 100)))]
        if let cursor = query.cursor { q.append(("from", cursor)) }
        let answer = try await call("GET", "/_matrix/client/v3/notifications", query: q)
        let me = self.me
        var items: [JSONValue] = []
        for n in answer.json["notifications"]?.arrayValue ?? [] {
            guard let event = n["event"], let id = event["event_id"]?.stringValue, MatrixIds.isEventId(id),
                  let room = n["room_id"]?.stringValue, MatrixIds.isRoomId(room) else { continue }
            let read = n["read"]?.boolValue ?? false
            if query.readState == "read" && !read || query.readState == "unread" && read { continue }
            var o: [String: JSONValue] = [
                "id": .string(id), "receiver": .string(me), "receiverType": "user", "category": "matrix",
                "channelId": .string(room), "sentAt": .int(Self.time(n["ts"]) / 1000), "tags": [],
                "content": ["type": event["type"] ?? .null, "body": event["content"]?["body"] ?? .null],
            ]
            if let sender = event["sender"]?.stringValue, MatrixIds.isUserId(sender) { o["sender"] = ["uid": .string(sender)] }
            if read { o["readAt"] = .int(Self.time(n["ts"]) / 1000) }
            items.append(.object(o))
        }
        return WirePage(items: items, nextCursor: answer.json["next_token"]?.stringValue)
    }
}
