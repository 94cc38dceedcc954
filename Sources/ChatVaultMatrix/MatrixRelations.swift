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

    /// What an `m.replace` does to a copy of the message it edits.
    enum EditOutcome: Equatable {
        /// The message as `renderMessage` would render it with this edit.
        case applied(JSONValue)
        /// Nothing: the copy shows a later edit already, or the message is deleted, or the edit is
        /// not its sender's (Matrix clients ignore it).
        case unchanged
        /// The copy does not hold what the rendering needs (the original's own content): ask.
        case needsOriginal
    }

    /// `copy` (a rendered message: the cache's copy, or one rendered earlier in the same catch-up)
    /// as it reads after `edit`, built as `renderMessage` builds an edited message: the edit's
    /// `m.new_content` (without a reply's fallback: new content has none) in `data` and `type`,
    /// `editedAt`, `editedBy`, `updatedAt`; the rest (sender, time, reply and thread links,
    /// reaction counts, receipts) kept. Where `renderMessage` falls back to the original event's
    /// content (new content it cannot show, metadata the edit leaves out) and the copy is itself
    /// an edit, the original is not at hand: `.needsOriginal`.
    static func applying(edit: JSONValue, to copy: JSONValue) -> EditOutcome {
        guard case .object(var o) = copy, let newContent = edit["content"]?["m.new_content"]?.objectValue,
              edit["unsigned"]?["redacted_because"] == nil else { return .needsOriginal }
        guard let editor = edit["sender"]?.stringValue, editor == copy["sender"]?["uid"]?.stringValue else { return .unchanged }
        if (copy["deletedAt"]?.doubleValue ?? 0) > 0 { return .unchanged }
        let at = time(edit["origin_server_ts"]) / 1000
        if let shown = copy["editedAt"]?.intValue, shown > at { return .unchanged }
        let wasEdited = (copy["editedAt"]?.intValue ?? 0) > 0
        var data: [String: JSONValue]
        switch copy["category"]?.stringValue {
        case "custom":
            guard let customData = newContent["data"] ?? (wasEdited ? nil : copy["data"]?["customData"]) else { return .needsOriginal }
            data = ["customData": customData]
            if let text = newContent["body"]?.stringValue { data["conversationText"] = .string(text) }
        case "message":
            guard let shown = messageData(newContent), case .object(let fields) = shown.data else { return .needsOriginal }
            data = fields
            o["type"] = .string(shown.type)
        default:
            return .needsOriginal
        }
        if let metadata = newContent[metadataKey], metadata.objectValue != nil {
            data["metadata"] = metadata
        } else if let kept = copy["data"]?["metadata"], kept.objectValue != nil {
            // The original's metadata shows through an edit without any; a copy already edited
            // may show the earlier edit's instead.
            guard !wasEdited else { return .needsOriginal }
            data["metadata"] = kept
        }
        o["data"] = .object(data)
        o["editedAt"] = .int(at)
        o["editedBy"] = .string(editor)
        o["updatedAt"] = .int(at)
        return .applied(.object(o))
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

    /// Records reaction events seen (each one's message, key and sender), so that a later
    /// redaction of one is known for a reaction's removal.
    func remember(reactions: [(id: String, reaction: KnownReaction)], room: String) {
        guard !reactions.isEmpty else { return }
        var values: [String: String?] = [:]
        for (id, r) in reactions {
            let json: JSONValue = ["t": .string(r.target), "k": .string(r.key), "s": .string(r.sender), "ts": .int(r.ts)]
            values[Self.reactionKey(room: room, event: id)] = String(decoding: json.jsonData(), as: UTF8.self)
        }
        try? state.withLock { $0.store }.set(values)
    }

    /// One annotation of a message: the reaction event, its key, its sender.
    struct Annotation: Sendable, Equatable {
        var id: String
        var key: String
        var sender: String
    }

    /// What the backend knows of a message's annotations (kept under `annotatedKey`): none seen
    /// (no value), some seen but not which (`"1"`), or all of them, oldest first (a JSON list of
    /// `[event, key, sender]`: the `/relations` answer, then each one added or taken back since).
    enum Annotations: Equatable {
        case none
        case unknown
        case known([Annotation])
    }

    /// The most annotations kept as a list for one message; a message with more is `.unknown`.
    static let maxKnownAnnotations = 2_000

    func knownAnnotations(room: String, event: String) -> Annotations {
        guard let text = state.withLock({ $0.store }).value(for: Self.annotatedKey(room: room, event: event)) else { return .none }
        guard let list = (try? JSONValue(jsonData: Data(text.utf8)))?.arrayValue else { return .unknown }
        var out: [Annotation] = []
        for item in list {
            guard let triple = item.arrayValue, triple.count == 3,
                  let id = triple[0].stringValue, MatrixIds.isEventId(id),
                  let key = triple[1].stringValue, !key.isEmpty, key.utf8.count <= 255,
                  let sender = triple[2].stringValue, MatrixIds.isUserId(sender) else { return .unknown }
            out.append(Annotation(id: id, key: key, sender: sender))
        }
        return .known(out)
    }

    func store(_ annotations: Annotations, room: String, event: String) {
        let value: String?
        switch annotations {
        case .none, .known([]): value = nil
        case .unknown: value = "1"
        case .known(let list) where list.count > Self.maxKnownAnnotations: value = "1"
        case .known(let list):
            let json = JSONValue.array(list.map { [.string($0.id), .string($0.key), .string($0.sender)] })
            value = String(decoding: json.jsonData(), as: UTF8.self)
        }
        try? state.withLock { $0.store }.set(value, for: Self.annotatedKey(room: room, event: event))
    }

    /// Records a message's annotations as `/relations` answered them (all of them).
    func learn(_ list: [(id: String, key: String, sender: String, ts: Int64)], of event: String, room: String) {
        remember(reactions: list.map { ($0.id, KnownReaction(target: event, key: $0.key, sender: $0.sender, ts: $0.ts)) }, room: room)
        annotationLock.withLock { _ in
            store(.known(list.map { Annotation(id: $0.id, key: $0.key, sender: $0.sender) }), room: room, event: event)
        }
    }

    /// A reaction added or taken back, from its realtime shape (`reactionJSON`).
    static func annotation(of json: JSONValue) -> Annotation? {
        guard let r = json["reaction"], let id = r["id"]?.stringValue, MatrixIds.isEventId(id),
              let key = r["reaction"]?.stringValue, !key.isEmpty, key.utf8.count <= 255,
              let sender = r["uid"]?.stringValue, MatrixIds.isUserId(sender) else { return nil }
        return Annotation(id: id, key: key, sender: sender)
    }

    /// Notes the reactions among `changes` for pages of their messages: a message with none seen
    /// before is marked as having some (its next rendering fetches which). A known list is left as
    /// it is: it changes only with the counts the cache is given (`learn`, `recounted`), so the two
    /// agree, which is what lets a catch-up count a reaction itself.
    func note(_ changes: [MatrixChange]) {
        for change in changes {
            guard case let (_, room, event, adding)? = Self.reactionChange(change), adding else { continue }
            annotationLock.withLock { _ in
                if knownAnnotations(room: room, event: event) == .none { store(.unknown, room: room, event: event) }
            }
        }
    }

    /// Starts the annotations of messages a catch-up delivers afresh as none: every annotation
    /// of a message comes after it in the room's timeline, so those of a message past the sync
    /// point come in this catch-up (in order, after it) or later, and are added as they come
    /// (the message's rendering in the catch-up carries no counts either).
    func clearAnnotations(of messages: [JSONValue]) {
        var keys: [String] = []
        for m in messages {
            guard let id = m["id"]?.intValue, let ref = identities.ref(for: Int(id)), let place = MatrixIds.parse(ref: ref) else { continue }
            keys.append(Self.annotatedKey(room: place.room, event: place.event))
        }
        guard !keys.isEmpty else { return }
        let store = state.withLock { $0.store }
        annotationLock.withLock { _ in
            let present = store.values(for: keys)
            guard !present.isEmpty else { return }
            try? store.set(Dictionary(present.keys.map { ($0, String?.none) }, uniquingKeysWith: { a, _ in a }))
        }
    }

    /// A reaction's change as (its realtime shape, room, the message's event, added).
    static func reactionChange(_ change: MatrixChange) -> (JSONValue, String, String, Bool)? {
        switch change {
        case .reacted(let json, let room, let event): return (json, room, event, true)
        case .unreacted(let json, let room, let event): return (json, room, event, false)
        default: return nil
        }
    }

    /// The cached copy of a message with a reaction added or taken back, its counts made from the
    /// message's known annotations (the reaction added or removed by its event id, so hearing it
    /// twice, from realtime and the catch-up, counts it once); nil when that cannot be exact: the
    /// annotations are not known, or the copy's counts do not match them (then the caller asks).
    func recounted(_ copy: JSONValue, room: String, event: String, reaction a: Annotation, adding: Bool) -> JSONValue? {
        guard case .object(var o) = copy else { return nil }
        let me = self.me
        let list: [Annotation]? = annotationLock.withLock { _ in
            var list: [Annotation]
            switch knownAnnotations(room: room, event: event) {
            case .unknown: return nil
            case .none: list = []
            case .known(let known): list = known
            }
            // The copy must show what the list says before the change: else one of them is behind.
            guard Self.counts(list, me: me) == Self.counts(copy["reactions"]) else { return nil }
            list.removeAll { $0.id == a.id }
            if adding { list.append(a) }
            store(.known(list), room: room, event: event)
            return list
        }
        guard let list else { return nil }
        let rendered = Self.rendered(list, me: me)
        if rendered.isEmpty { o["reactions"] = nil } else { o["reactions"] = .array(rendered) }
        return .object(o)
    }

    /// Reaction counts as a message carries them (`reactions`: emoji, count, reactedByMe, in
    /// first-use order).
    static func rendered(_ list: [Annotation], me: String) -> [JSONValue] {
        var order: [String] = []
        var counts: [String: (Int, Bool)] = [:]
        for a in list {
            if counts[a.key] == nil { order.append(a.key) }
            let c = counts[a.key] ?? (0, false)
            counts[a.key] = (c.0 + 1, c.1 || a.sender == me)
        }
        return order.map { key in
            let c = counts[key] ?? (0, false)
            return ["reaction": .string(key), "count": .int(Int64(c.0)), "reactedByMe": .bool(c.1)]
        }
    }

    /// Counts by key, to compare a list with a copy's `reactions`.
    static func counts(_ list: [Annotation], me: String) -> [String: [Int64]] {
        counts(.array(rendered(list, me: me)))
    }

    static func counts(_ reactions: JSONValue?) -> [String: [Int64]] {
        var out: [String: [Int64]] = [:]
        for r in reactions?.arrayValue ?? [] {
            guard let key = r["reaction"]?.stringValue, let n = r["count"]?.intValue else { continue }
            out[key] = [n, r["reactedByMe"]?.boolValue == true ? 1 : 0]
        }
        return out
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
