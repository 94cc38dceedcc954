public import ChatVault
import Foundation

/// Reads and writes of `ChatBackend` over Matrix rooms and events.
extension MatrixBackend {
    // MARK: - Messages

    /// The room and event of an id the engine gave out; 404 for an id it never gave.
    func event(of id: Int) throws(BackendError) -> (room: String, event: String) {
        guard let ref = identities.ref(for: id), let parsed = MatrixIds.parse(ref: ref) else {
            throw .server(status: 404, code: "ERR_NOT_FOUND", message: "no Matrix event is known for this message id")
        }
        return parsed
    }

    /// A page of a room's `m.room.message` events (`/messages`, from a message through `/context`),
    /// with the counts of reactions seen before; `nextCursor` is the homeserver's pagination token.
    /// Only `scope`, the paging settings and `hideDeleted` are applied; a query without a scope is
    /// `ERR_MATRIX_UNSUPPORTED`, and a direct chat with no room yet is an empty page.
    public func messages(_ query: MessageQuery) async throws(BackendError) -> WirePage {
        guard query.limit >= 1 else { throw .server(status: 400, code: "ERR_INVALID_LIMIT", message: "limit must be at least 1") }
        guard let scope = query.scope else { throw unsupported("a message list across conversations") }
        guard let room = try await room(for: scope, create: false) else { return WirePage(items: [], nextCursor: nil) }
        let limit = min(query.limit, 1000)
        let backward = query.direction == .previous
        var from: String?
        if let anchor = query.cursor?.id ?? query.messageId {
            let place = try event(of: anchor)
            guard place.room == room else {
                throw .server(status: 404, code: "ERR_NOT_FOUND", message: "the message is not in this conversation")
            }
            let context = try await call("GET", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(room))/context/\(MatrixHTTP.segment(place.event))",
                                         query: [("limit", "0")])
            from = (backward ? context.json["start"] : context.json["end"])?.stringValue
            guard from != nil else { throw MatrixHTTP.bad("the context answer has no pagination token") }
        }
        var found: [JSONValue] = []
        var more = true
        for _ in 0..<20 where found.count < limit {
            var q = [("dir", backward ? "b" : "f"), ("limit", String(min(max((limit - found.count) * 2, 10), 100)))]
            if let from { q.append(("from", from)) }
            let answer = try await call("GET", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(room))/messages", query: q)
            let chunk = answer.json["chunk"]?.arrayValue ?? []
            // Interpreted oldest first, as every other path does: ids are allocated in that order,
            // so two messages stamped in the same 16 ms keep their order (a backward chunk lists
            // newest first, which numbered them the other way round); then newest first again, as
            // a backward page fills from its anchor.
            var changes = try await interpret(backward ? Array(chunk.reversed()) : chunk, room: room)
            note(changes.map(\.change))
            if backward { changes.reverse() }
            for change in changes {
                guard case .message(let m, _) = change.change, found.count < limit else { continue }
                if query.hideDeleted, m["deletedAt"] != nil { continue }
                found.append(m)
            }
            guard let end = answer.json["end"]?.stringValue, !end.isEmpty, end != from, !chunk.isEmpty else { more = false; break }
            from = end
        }
        if backward { found.reverse() }
        settleGap(room: room, page: found)
        // Synapse bundles edits and thread summaries, not reaction counts: those come per message
        // that has had reactions, so a page never writes a message over its cached counts.
        found = try await withKnownReactions(found, room: room)
        return WirePage(items: found, nextCursor: more ? from : nil)
    }

    /// One message by the id the engine gave its event, with its latest edit applied.
    /// - Throws: 404 `ERR_NOT_FOUND` for an id the engine never gave or an event that is not a
    ///   message.
    public func message(id: Int) async throws(BackendError) -> JSONValue {
        let place = try event(of: id)
        guard let message = try await fetchMessage(room: place.room, event: place.event) else {
            throw .server(status: 404, code: "ERR_NOT_FOUND", message: "the event is not a message")
        }
        return message
    }

    /// Sends the message as an event (`PUT …/send/{type}/{localMessageId}`: the transaction id, so
    /// the same send repeated on the same device is the same event), creating the direct-message
    /// room on the first send to a user; a quote becomes an `m.in_reply_to` reply with Element's
    /// fallback, a `parentId` an `m.thread` relation. Answers the event as read back, with its
    /// `localMessageId`.
    /// - Throws: 400 `ERR_INVALID_MESSAGE` for a message without a receiver or local id, or a quote
    ///   or parent in another room; the homeserver's error otherwise.
    public func send(_ message: JSONValue, localMessageId: String) async throws(BackendError) -> JSONValue {
        guard !localMessageId.isEmpty, localMessageId.utf8.count <= 255 else {
            throw .server(status: 400, code: "ERR_INVALID_MESSAGE", message: "a send needs a local message id")
        }
        guard let receiver = message["receiver"]?.stringValue,
              let type = message["receiverType"]?.stringValue.flatMap(ReceiverType.init(rawValue:)) else {
            throw .server(status: 400, code: "ERR_INVALID_MESSAGE", message: "a message needs receiver and receiverType")
        }
        let scope: MessageScope = type == .group ? .group(receiver) : .user(receiver)
        guard let room = try await room(for: scope, create: true) else { throw MatrixHTTP.bad("no room for the conversation") }
        var (eventType, content) = try Self.content(of: message)
        if let quoted = message["quotedMessageId"]?.intValue, quoted > 0, quoted <= WireLimits.maxWireNumber, eventType == "m.room.message",
           case .object(let c) = content {
            // A reply as Element sends it: the relation, and the fallback quote for older clients.
            let target = try event(of: Int(quoted))
            guard target.room == room else { throw .server(status: 400, code: "ERR_INVALID_MESSAGE", message: "the quoted message is in another conversation") }
            content = .object(Self.replyContent(c, quoting: try await fetchEvent(room: room, event: target.event), room: room))
        }
        if let parent = message["parentId"]?.intValue, parent > 0, parent <= WireLimits.maxWireNumber {
            let root = try event(of: Int(parent))
            guard root.room == room else { throw .server(status: 400, code: "ERR_INVALID_MESSAGE", message: "the thread's parent is in another conversation") }
            if case .object(var c) = content {
                var relation = c["m.relates_to"]?.objectValue ?? [:]
                relation["rel_type"] = "m.thread"
                relation["event_id"] = .string(root.event)
                c["m.relates_to"] = .object(relation)
                content = .object(c)
            }
        }
        let path = "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(room))/send/\(MatrixHTTP.segment(eventType))/\(MatrixHTTP.segment(localMessageId))"
        let answer = try await call("PUT", path, json: content)
        guard let eventId = answer.json["event_id"]?.stringValue, MatrixIds.isEventId(eventId) else {
            throw MatrixHTTP.bad("the send answered no event id")
        }
        guard case .object(var sent)? = try await fetchMessage(room: room, event: eventId) else {
            throw MatrixHTTP.bad("the sent event does not read back as a message")
        }
        sent["localMessageId"] = .string(localMessageId)
        return .object(sent)
    }

    /// Edits one of the user's own messages with an `m.replace` event (`m.new_content`): the text,
    /// caption, custom data or metadata `changes` holds. Answers the message as edited.
    /// - Throws: 403 `ERR_NOT_THE_SENDER` for someone else's message; 400 `ERR_EMPTY_MESSAGE` for
    ///   an empty text, `ERR_INVALID_MESSAGE` when nothing changes.
    public func editMessage(id: Int, changes: JSONValue) async throws(BackendError) -> JSONValue {
        let place = try event(of: id)
        let original = try await fetchEvent(room: place.room, event: place.event)
        guard original["sender"]?.stringValue == me else {
            throw .server(status: 403, code: "ERR_NOT_THE_SENDER", message: "only the sender edits a message")
        }
        guard let oldContent = original["content"]?.objectValue else { throw MatrixHTTP.bad("the edited event has no content") }
        var newContent = oldContent
        newContent["m.relates_to"] = nil
        if let text = changes["data"]?["text"]?.stringValue {
            guard !text.isEmpty else { throw .server(status: 400, code: "ERR_EMPTY_MESSAGE", message: "an edit cannot empty a message") }
            newContent["body"] = .string(text)
            // The old HTML (a reply's <mx-reply> quote among it) no longer matches the text.
            newContent["format"] = nil
            newContent["formatted_body"] = nil
        }
        if let caption = changes["data"]?["caption"]?.stringValue { newContent["body"] = .string(caption) }
        if let custom = changes["data"]?["customData"] { newContent["data"] = custom }
        if let metadata = changes["data"]?["metadata"] ?? changes["metadata"] { newContent[Self.metadataKey] = metadata.isNull ? nil : metadata }
        guard newContent != oldContent.filter({ $0.key != "m.relates_to" }) else {
            throw .server(status: 400, code: "ERR_INVALID_MESSAGE", message: "nothing to change")
        }
        var edit = newContent
        edit["body"] = .string("* " + (newContent["body"]?.stringValue ?? ""))
        edit["m.new_content"] = .object(newContent)
        edit["m.relates_to"] = ["rel_type": "m.replace", "event_id": .string(place.event)]
        let eventType = original["type"]?.stringValue ?? "m.room.message"
        let txn = "edit-" + UUID().uuidString
        _ = try await call("PUT", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(place.room))/send/\(MatrixHTTP.segment(eventType))/\(txn)",
                           json: .object(edit))
        guard let message = try await fetchMessage(room: place.room, event: place.event) else {
            throw MatrixHTTP.bad("the edited event does not read back as a message")
        }
        return message
    }

    /// Redacts the message's event; answers it as deleted (`deletedAt`, `deletedBy`).
    public func deleteMessage(id: Int) async throws(BackendError) -> JSONValue {
        let place = try event(of: id)
        let txn = "redact-" + UUID().uuidString
        _ = try await call("PUT", "/_matrix/client/v3/rooms/\(MatrixHTTP.segment(place.room))/redact/\(MatrixHTTP.segment(place.event))/\(txn)",
                           json: .object([:]))
        guard let message = try await fetchMessage(room: place.room, event: place.event) else {
            throw MatrixHTTP.bad("the redacted event does not read back")
        }
        return message
    }

    // MARK: - Conversations

    /// The joined rooms with a message among their 20 latest events, most recent first, as
    /// conversations (direct rooms as conversations with their user). Where the homeserver serves
    /// simplified sliding sync (MSC4186), one window of its room list per page, `limit` rooms
    /// wide, with a cursor to the next (`MatrixRoomList`); elsewhere every room from one `/sync`,
    /// the first `limit` of them, in one page. The other `ConversationQuery` filters are not
    /// applied (the engine's cached phase applies them).
    /// - Throws: 400 `ERR_INVALID_CURSOR` for a cursor this backend did not give.
    ///
    /// While the realtime connection is up, the list it keeps is answered instead
    /// (`KnownRooms`): built once per connection, then only the rooms the connection saw change
    /// are read again (one `/sync` filtered to them), so a list read twice with nothing new makes
    /// no request.
    public func conversations(_ query: ConversationQuery) async throws(BackendError) -> WirePage {
        let limit = min(max(query.limit, 1), MatrixRoomList.maxWindow)
        let offset = try MatrixRoomList.offset(of: query.cursor)
        if let known = try await keptConversations() {
            let end = offset + limit
            let items = offset < known.count ? Array(known[offset..<min(end, known.count)]) : []
            return WirePage(items: items, nextCursor: known.count > end ? MatrixRoomList.cursorPrefix + String(end) : nil)
        }
        if await offersSlidingSync() {
            return try await slidingConversations(from: offset, limit: limit)
        }
        guard query.cursor == nil else { throw MatrixRoomList.invalidCursor }
        return WirePage(items: Array(try await allConversations().prefix(limit)), nextCursor: nil)
    }

    /// Every joined room with a message among its latest events, newest first.
    func allConversations() async throws(BackendError) -> [JSONValue] {
        try await joinedConversations(rooms: nil).sorted { $0.0 > $1.0 }.map(\.1)
    }

    /// A room of the list: its last message's id (it follows the server time to 16 ms: the list's
    /// order), the room as a conversation, and the room.
    typealias Listed = (order: Int64, conversation: JSONValue, room: String)

    /// The joined rooms of one `/sync` answer (`rooms`: only those) with a message among their 20
    /// latest events, as conversations.
    func joinedConversations(rooms: [String]?) async throws(BackendError) -> [Listed] {
        let answer = try await call("GET", "/_matrix/client/v3/sync",
                                    query: [("timeout", "0"), ("filter", Self.syncFilter(timelineLimit: 20, rooms: rooms))])
        if let events = answer.json["account_data"]?["events"]?.arrayValue { applyAccountData(events) }
        var items: [Listed] = []
        for (room, value) in (answer.json["rooms"]?["join"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) where MatrixIds.isRoomId(room) {
            guard rooms?.contains(room) ?? true else { continue }
            let unread = value["unread_notifications"]?["notification_count"]?.intValue ?? 0
            if let (order, conversation) = try await listed(room: room, events: value["timeline"]?["events"]?.arrayValue ?? [], unread: unread) {
                items.append((order, conversation, room))
            }
        }
        return items
    }

    /// A room of a list as a conversation: its timeline's newest message as the last message (nil
    /// when those events hold none), with that message's id for the list's order.
    func listed(room: String, events: [JSONValue], unread: Int64) async throws(BackendError) -> (Int64, JSONValue)? {
        var last: JSONValue?
        let changes = try await interpret(events, room: room)
        note(changes.map(\.change))
        for change in changes {
            if case .message(let m, _) = change.change { last = m }
        }
        guard let last, let conversation = conversation(room: room, last: last, unread: unread) else { return nil }
        return (last["id"]?.intValue ?? 0, conversation)
    }

    /// A room as the engine's conversation, with its last message.
    func conversation(room: String, last: JSONValue, unread: Int64?) -> JSONValue? {
        guard let conversationId = last["conversationId"] else { return nil }
        let peer = state.withLock { $0.rooms.peerOf[room] }
        var o: [String: JSONValue] = [
            "conversationId": conversationId,
            "conversationType": .string(peer == nil ? "group" : "user"),
            "lastMessage": last,
            "updatedAt": .int(last["sentAt"]?.intValue ?? 0),
        ]
        if let unread { o["unreadMessageCount"] = .int(min(max(unread, 0), 1 << 31)) }
        if let peer {
            var user: [String: JSONValue] = ["uid": .string(peer)]
            if let name = state.withLock({ $0.rooms.names[peer] }) { user["name"] = .string(name) }
            o["conversationWith"] = .object(user)
        } else {
            o["conversationWith"] = ["guid": .string(room), "type": "private", "hasJoined": true]
        }
        return .object(o)
    }

    /// One conversation: its room found (a group's id is its room; a user's from `m.direct`), then
    /// that room alone read (a `/sync` filtered to it: its latest events and unread count, never
    /// the whole list); a room whose latest events hold no message answers from its newest
    /// message. 404 only when the server has no room for it, or no message in it.
    public func conversation(with id: String, type: ConversationType) async throws(BackendError) -> JSONValue {
        let scope: MessageScope = type == .group ? .group(id) : .user(id)
        guard let room = try await room(for: scope, create: false) else {
            throw .server(status: 404, code: "ERR_CONVERSATION_NOT_FOUND", message: "no such conversation")
        }
        if let found = try await joinedConversations(rooms: [room]).first?.1 { return found }
        var query = MessageQuery()
        query.scope = scope
        query.limit = 1
        guard let last = try await messages(query).items.last,
              let found = conversation(room: room, last: last, unread: nil) else {
            throw .server(status: 404, code: "ERR_CONVERSATION_NOT_FOUND", message: "no such conversation")
        }
        return found
    }
}
