import ChatVault
import Foundation

/// How events that point at other events (`m.relates_to`, redactions) reach the engine: ids for
/// the events they name, the relations Synapse bundles into an event (`unsigned["m.relations"]`:
/// the latest edit, the thread summary), reply links, and the reaction map that lets a redaction
/// of a reaction be told apart from a deleted message after a restart.
extension MatrixBackend {
    // MARK: - Ids

    /// The engine's ids for `refs` (allocated for refs seen first, each from its own time).
    func ids(for refs: [MessageRef]) throws(BackendError) -> [String: Int] {
        do {
            return try identities.ids(for: refs)
        } catch {
            throw .server(status: 503, code: "ERR_MATRIX_IDS", message: "\(error)")
        }
    }

    /// The most events a batch fetches to learn the time of an event its relations name.
    static let maxTargetFetches = 50

    /// The events a batch's relations name that need ids of their own: thread roots, quoted and
    /// reacted messages (not edits and redactions: an edit's original is fetched and rendered,
    /// a redaction needs an id only for a message already known).
    static func targets(of events: [JSONValue]) -> [String] {
        var out: [String] = []
        for event in events {
            let relation = event["content"]?["m.relates_to"]
            switch event["type"]?.stringValue {
            case "m.room.message", customEventType:
                if relation?["rel_type"]?.stringValue == "m.thread", let root = relation?["event_id"]?.stringValue { out.append(root) }
                if let quoted = quotedEvent(relation) { out.append(quoted) }
            case "m.reaction":
                if let target = relation?["event_id"]?.stringValue { out.append(target) }
            default:
                continue
            }
        }
        return out.filter(MatrixIds.isEventId)
    }

    /// Ids of a batch: each message's own (from its own `origin_server_ts`), and those of the
    /// messages its relations name outside the batch: the id given before, else one allocated
    /// from that event's own time (fetched), never from the time of the event that names it.
    func batchIds(_ events: [JSONValue], room: String) async throws(BackendError) -> [String: Int] {
        var ids = try ids(for: Self.refs(of: events, room: room))
        var fetches = 0
        for target in Set(Self.targets(of: events)).sorted() {
            let ref = MatrixIds.ref(room: room, event: target)
            guard ids[ref] == nil else { continue }
            if let known = identities.existingId(for: ref) {
                ids[ref] = known
                continue
            }
            guard fetches < Self.maxTargetFetches else { continue }
            fetches += 1
            guard let event = try? await fetchEvent(room: room, event: target),
                  event["event_id"]?.stringValue == target else { continue }
            let type = event["type"]?.stringValue
            guard type == "m.room.message" || type == Self.customEventType else { continue }
            ids.merge(try self.ids(for: [MessageRef(ref, timeMs: Self.time(event["origin_server_ts"]))])) { a, _ in a }
        }
        return ids
    }

    // MARK: - Replies

    /// The event a reply quotes (`m.in_reply_to`), or nil; a thread's fallback reply
    /// (`is_falling_back`) quotes nothing.
    static func quotedEvent(_ relation: JSONValue?) -> String? {
        guard let quoted = relation?["m.in_reply_to"]?["event_id"]?.stringValue, MatrixIds.isEventId(quoted) else { return nil }
        if relation?["rel_type"]?.stringValue == "m.thread", relation?["is_falling_back"]?.boolValue == true { return nil }
        return quoted
    }

    /// A reply's body without its fallback quote: the leading lines that start with `>` and the
    /// blank line after them (what Element puts before the reply's own text).
    static func strippingReplyFallback(_ body: String) -> String {
        guard body.hasPrefix(">") else { return body }
        var lines = body.split(separator: "\n", omittingEmptySubsequences: false)[...]
        while let first = lines.first, first.hasPrefix(">") { lines = lines.dropFirst() }
        if let first = lines.first, first.isEmpty { lines = lines.dropFirst() }
        return lines.joined(separator: "\n")
    }

    /// The fallback Element expects in a reply's content: the quoted event's first lines in
    /// `body` and an `<mx-reply>` block in `formatted_body`.
    static func replyContent(_ content: [String: JSONValue], quoting event: JSONValue, room: String) -> [String: JSONValue] {
        guard let eventId = event["event_id"]?.stringValue, MatrixIds.isEventId(eventId) else { return content }
        var out = content
        let sender = event["sender"]?.stringValue ?? ""
        // The quoted text as it now reads (its latest edit), as Element quotes it.
        let edit = latestEdit(of: eventId, sender: sender, among: [event["unsigned"]?["m.relations"]?["m.replace"]])
        let shown = edit?["content"]?["m.new_content"]?["body"]?.stringValue ?? event["content"]?["body"]?.stringValue ?? ""
        let quotedBody = edit == nil ? strippingReplyFallback(shown) : shown
        let body = content["body"]?.stringValue ?? ""
        let quotedLines = quotedBody.split(separator: "\n", omittingEmptySubsequences: false).prefix(5)
        let quote = quotedLines.enumerated().map { i, line in i == 0 ? "> <\(sender)> \(line)" : "> \(line)" }.joined(separator: "\n")
        out["body"] = .string(quote + "\n\n" + body)
        let link = "https://matrix.to/#/\(escapeHTML(room))/\(escapeHTML(eventId))"
        out["format"] = "org.matrix.custom.html"
        out["formatted_body"] = .string("<mx-reply><blockquote><a href=\"\(link)\">In reply to</a> "
            + "<a href=\"https://matrix.to/#/\(escapeHTML(sender))\">\(escapeHTML(sender))</a><br>"
            + escapeHTML(quotedBody).replacingOccurrences(of: "\n", with: "<br>")
            + "</blockquote></mx-reply>" + escapeHTML(body).replacingOccurrences(of: "\n", with: "<br>"))
        var relation = content["m.relates_to"]?.objectValue ?? [:]
        relation["m.in_reply_to"] = ["event_id": .string(eventId)]
        out["m.relates_to"] = .object(relation)
        return out
    }

    static func escapeHTML(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    // MARK: - Edits

    /// The newest valid `m.replace` of an event among `candidates` (the bundled one Synapse puts in
    /// `unsigned["m.relations"]["m.replace"]`, the edit being handled): from the event's own
    /// sender, with `m.new_content`, pointing at it.
    static func latestEdit(of eventId: String, sender: String, among candidates: [JSONValue?]) -> JSONValue? {
        var best: JSONValue?
        for case let edit? in candidates {
            guard edit["sender"]?.stringValue == sender, edit["content"]?["m.new_content"]?.objectValue != nil,
                  edit["content"]?["m.relates_to"]?["event_id"]?.stringValue == eventId,
                  edit["unsigned"]?["redacted_because"] == nil else { continue }
            if let b = best, time(b["origin_server_ts"]) >= time(edit["origin_server_ts"]) { continue }
            best = edit
        }
        return best
    }

    // MARK: - The reaction map

    /// What the cache remembers of one reaction event: the message it is on, its key, its sender.
    struct KnownReaction: Sendable, Equatable {
        var target: String
        var key: String
        var sender: String
        var ts: Int64
    }

    static func reactionKey(room: String, event: String) -> String { "matrix.reaction." + MatrixIds.ref(room: room, event: event) }
    static func annotatedKey(room: String, event: String) -> String { "matrix.annotated." + MatrixIds.ref(room: room, event: event) }

    /// Records reactions seen (and that their messages have reactions), so that a later redaction
    /// of one is a reaction's removal, and a page of those messages brings their counts.
    func remember(reactions: [(id: String, reaction: KnownReaction)], room: String, cleared: [String] = []) {
        guard !reactions.isEmpty || !cleared.isEmpty else { return }
        var values: [String: String?] = [:]
        for (id, r) in reactions {
            let json: JSONValue = ["t": .string(r.target), "k": .string(r.key), "s": .string(r.sender), "ts": .int(r.ts)]
            values[Self.reactionKey(room: room, event: id)] = String(decoding: json.jsonData(), as: UTF8.self)
            values[Self.annotatedKey(room: room, event: r.target)] = "1"
        }
        for target in cleared { values[Self.annotatedKey(room: room, event: target)] = .some(nil) }
        try? state.withLock { $0.store }.set(values)
    }

    /// A reaction event remembered before, or nil.
    func knownReaction(room: String, event: String) -> KnownReaction? {
        guard let text = state.withLock({ $0.store }).value(for: Self.reactionKey(room: room, event: event)),
              let json = try? JSONValue(jsonData: Data(text.utf8)),
              let target = json["t"]?.stringValue, MatrixIds.isEventId(target),
              let key = json["k"]?.stringValue, !key.isEmpty, key.utf8.count <= 255,
              let sender = json["s"]?.stringValue, MatrixIds.isUserId(sender) else { return nil }
        return KnownReaction(target: target, key: key, sender: sender, ts: Self.time(json["ts"]))
    }

    /// The events of `room` among `events` that have had reactions (their counts are fetched
    /// when they are rendered: Synapse bundles no reaction counts).
    func annotated(room: String, events: [String]) -> Set<String> {
        let keys = events.map { Self.annotatedKey(room: room, event: $0) }
        let found = state.withLock { $0.store }.values(for: keys)
        return Set(events.filter { found[Self.annotatedKey(room: room, event: $0)] != nil })
    }

    /// Rendered messages of `room` with their reaction counts, for those that have had reactions.
    func withKnownReactions(_ messages: [JSONValue], room: String) async throws(BackendError) -> [JSONValue] {
        var events: [Int: String] = [:]
        for m in messages {
            guard let id = m["id"]?.intValue, let ref = identities.ref(for: Int(id)), let place = MatrixIds.parse(ref: ref),
                  place.room == room else { continue }
            events[Int(id)] = place.event
        }
        let reacted = annotated(room: room, events: Array(events.values))
        guard !reacted.isEmpty else { return messages }
        var out: [JSONValue] = []
        out.reserveCapacity(messages.count)
        for m in messages {
            if let id = m["id"]?.intValue, let event = events[Int(id)], reacted.contains(event) {
                out.append(try await withReactions(m, room: room, event: event))
            } else {
                out.append(m)
            }
        }
        return out
    }

    /// The realtime shape of a reaction (`reactionAdded` / `reactionRemoved`), without the message.
    func reactionJSON(id: String, reaction r: KnownReaction, messageId: Int, room: String) -> JSONValue {
        let me = self.me
        let place = state.withLock { $0.rooms.place(room: room, sender: r.sender, me: me) }
        return [
            "reaction": ["id": .string(id), "messageId": .int(Int64(messageId)), "reaction": .string(r.key), "uid": .string(r.sender),
                         "reactedAt": .int(r.ts / 1000), "reactedBy": ["uid": .string(r.sender)]],
            "receiverId": .string(place.receiver), "receiverType": .string(place.receiverType.rawValue),
            "conversationId": .string(place.conversationId),
        ]
    }
}
