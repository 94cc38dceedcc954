// A libFuzzer target over the engine's wire decoder and the form its ingest stores (C23).
//
// Built by Scripts/fuzz-wire with `swiftc -sanitize=fuzzer`, together with the real sources of
// the ChatVault module it exercises (Sources/ChatVault/Wire, Models and the enums they use), as
// one module: this file is not part of the Swift package. Nothing here may trap on any input
// except the checks below, each a broken C23 promise:
//
// - the JSON text reader (`JSONTextReader`, behind `JSONValue(jsonData:)`) refuses the text with
//   a `JSONTextError` or reads it, never trapping nor recursing (every input not marked below);
// - the decoder refuses a payload with a `WireError`, or accepts it; it never traps;
// - whatever it accepts fits `WireLimits` as a whole (size and depth, unknown fields included),
//   and every number it keeps converts to `Int64` the way the cache's rows convert it;
// - the stored form (`BinaryJSON`) of an accepted payload reads back equal, and decodes again
//   with the trusted decoder the cached reads use;
// - a stored message read in place (`BinaryObject`, `WireDecoder.message(stored:)`, the cached
//   page's path) decodes to the same message as the stored form decoded whole;
// - bytes read back from a damaged cache (`BinaryJSON.decode`, then the trusted decoder) are
//   refused or accepted, never a trap; read in place they are refused exactly when
//   `BinaryJSON.decode` refuses them;
// - a value nested far deeper than JSON text allows (built in memory) is refused without
//   overflowing the stack.
//
// Input: the first byte picks the entity and the mode; the rest is JSON text (or BinaryJSON
// bytes, for the damaged-cache mode).
import Foundation

private let limits = WireLimits()
private let decoder = WireDecoder(limits: limits)
private let trustedDecoder = WireDecoder(limits: limits, trusted: true)

private func check(_ condition: Bool, _ promise: StaticString) {
    if !condition { fatalError("C23 broken: \(promise)") }
}

/// The conversions the cache's rows make (`MessageRows.upsert`, `ConversationRows.activity`,
/// the thread cursor), without the clamping helper: they trap if the decoder let a number through
/// that does not fit.
private func ingestConversions(_ m: BaseMessage) {
    let values: [Int64] = [Int64(m.id), Int64(m.parentMessageId), Int64(m.sentAt), Int64(m.updatedAt.rounded(.down)),
                           Int64(m.deletedAt.rounded(.down)), Int64(m.editedAt.rounded(.down)), Int64(m.readAt.rounded(.down)),
                           Int64(m.deliveredAt.rounded(.down)), Int64(m.pinnedAt.rounded(.down)), Int64(m.savedAt.rounded(.down)),
                           Int64(m.quotedMessageId), Int64(m.replyCount)]
    check(values.allSatisfy { $0 >= -1 && $0 <= WireLimits.maxWireNumber }, "a message number out of range")
    check(m.id >= 1, "a message id below 1")
    if let media = m as? MediaMessage { for a in media.attachments { _ = Int64(a.fileSize.rounded(.down)) } }
    for user in m.mentionedUsers { _ = Int64(user.lastActiveAt.rounded(.down)) }
}

private enum Entity: UInt8, CaseIterable {
    case message, conversation, thread, user, group, groupMember, reaction, feedItem, attachment
}

/// Decodes as `entity`; the decoded model's numbers go through the row conversions.
private func decode(_ value: JSONValue, as entity: Entity, with decoder: WireDecoder) throws(WireError) {
    switch entity {
    case .message:
        ingestConversions(try decoder.message(value))
    case .conversation:
        let c = try decoder.conversation(value)
        _ = Int64(c.updatedAt.rounded(.down))
        _ = Int64(c.pinnedAt.rounded(.down))
        _ = Int64(c.unreadMessageCount) + Int64(c.lastReadMessageId)
        if let last = c.lastMessage { ingestConversions(last) }
    case .thread:
        let t = try decoder.thread(value)
        _ = Int(t.updatedAt.rounded(.down))
        ingestConversions(t.parentMessage)
        if let last = t.lastReply { ingestConversions(last) }
    case .user:
        let u = try decoder.user(value)
        _ = Int64(u.lastActiveAt.rounded(.down)) + Int64(u.deactivatedAt.rounded(.down))
    case .group:
        let g = try decoder.group(value)
        _ = Int64(g.createdAt) + Int64(g.updatedAt) + Int64(g.membersCount)
    case .groupMember:
        _ = Int64(try decoder.groupMember(value).joinedAt)
    case .reaction:
        let r = try decoder.reaction(value)
        check(r.messageId >= 1, "a reaction's message id below 1")
        _ = Int64(r.reactedAt.rounded(.down))
    case .feedItem:
        let f = try decoder.feedItem(value)
        _ = Int64(f.sentAt.rounded(.down)) + Int64(f.readAt.rounded(.down))
    case .attachment:
        _ = Int64(try decoder.attachment(value, path: "attachment").fileSize.rounded(.down))
    }
}

/// The server path: JSON text, decoded, then stored and read back as the cache does.
private func serverPayload(_ value: JSONValue, as entity: Entity) {
    do {
        try decode(value, as: entity, with: decoder)
    } catch {
        check(!error.field.isEmpty, "an error naming no field")
        return
    }
    // Accepted: it fits the limits as a whole, and what is stored reads back.
    check(value.extentBreach(maxDepth: limits.maxItemDepth, maxBytes: limits.maxItemBytes) == nil, "an accepted item beyond the limits")
    let stored = BinaryJSON.encode(value)
    check(value.extentBreach(maxDepth: .max, maxBytes: stored.count) == nil, "the measured size differs from the stored size")
    check(stored.isEmpty || value.extentBreach(maxDepth: .max, maxBytes: stored.count - 1) == .bytes, "the measured size differs from the stored size")
    guard let readBack = try? BinaryJSON.decode(stored) else { return check(false, "a stored item does not read back") }
    check(readBack == value, "a stored item reads back different")
    check(readBack.hashValue == value.hashValue, "equal values hash differently")
    do {
        try decode(readBack, as: entity, with: trustedDecoder)
    } catch {
        check(false, "a stored item fails the cached read's decoder")
    }
    if entity == .message { readInPlace(stored, whole: readBack) }
    _ = value.jsonData()
}

/// What the cached page keeps of a message, compared between the two ways of reading it (free-form
/// values as values: a dictionary's description depends on the instance).
private struct Digest: Equatable {
    var text: [String]
    var freeform: [JSONValue?]
}

private func digest(_ m: BaseMessage) -> Digest {
    var out = ["\(m.id)", "\(m.sentAt)", m.conversationId, m.senderUid, m.receiverUid, m.messageType.rawValue, m.messageCategory.rawValue,
               "\(m.updatedAt)", "\(m.deletedAt)", "\(m.editedAt)", "\(m.readByMeAt)", "\(m.parentMessageId)", m.sender?.name ?? "-",
               (m.tags ?? []).joined(separator: ","), m.mentionedUsers.map(\.uid).joined(separator: ","), "\(m.reactions.count)",
               m.localMessageId ?? "-"]
    var freeform: [JSONValue?] = [m.metaData, m.sender?.metadata]
    if let t = m as? TextMessage { out.append(t.text) }
    if let media = m as? MediaMessage { out += media.attachments.map(\.fileUrl) + [media.caption ?? "-"] }
    if let custom = m as? CustomMessage { freeform.append(custom.customData) }
    return Digest(text: out, freeform: freeform)
}

/// A stored message read as the cached page reads it: the same message as decoded whole.
private func readInPlace(_ stored: [UInt8], whole: JSONValue) {
    guard let object = try? BinaryObject(payload: stored) else { return check(false, "a stored message is refused in place") }
    guard let a = try? trustedDecoder.message(whole), let b = try? trustedDecoder.message(stored: object) else {
        return check(false, "a stored message fails the in-place read")
    }
    check(digest(a) == digest(b), "a stored message reads differently in place")
}

/// The disk path: bytes from a damaged cache row.
private func cachedRow(_ bytes: [UInt8], as entity: Entity) {
    let inPlace: BinaryObject??
    do { inPlace = .some(try BinaryObject(payload: bytes)) } catch { inPlace = .none }
    if let object = inPlace ?? nil { _ = try? trustedDecoder.message(stored: object) }
    guard let value = try? BinaryJSON.decode(bytes) else { return check(inPlace == nil, "damaged bytes accepted in place") }
    check(inPlace != nil, "intact bytes refused in place")
    if case .object = value { check((inPlace ?? nil) != nil, "a stored object not read as one in place") }
    _ = try? decode(value, as: entity, with: trustedDecoder)
    _ = BinaryJSON.encode(value)
}

/// A value nested `levels` deep in memory at one field of `value`: refused, never a crash.
private func deepInMemory(_ value: JSONValue, levels: Int, as entity: Entity) {
    guard case .object(var fields) = value else { return }
    var deep: JSONValue = 0
    for i in 0..<levels { deep = i % 2 == 0 ? .array([deep]) : .object(["k": deep]) }
    let key = fields.keys.sorted().first ?? "unknownField"
    fields[key] = deep
    var item = JSONValue.object(fields)
    do {
        try decode(item, as: entity, with: decoder)
        check(levels <= limits.maxItemDepth, "a value nested too deeply was accepted")
    } catch {}
    _ = BinaryJSON.encode(item)
    _ = item == item
    _ = item.hashValue
    // Taken apart level by level: releasing it whole is the runtime's own recursion.
    item = .null
    fields = [:]
    while true {
        switch deep {
        case .array(let items) where !items.isEmpty: deep = items[0]
        case .object(let inner) where !inner.isEmpty: deep = inner.first?.value ?? .null
        default: return
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func wireFuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let selector = data[0]
    let entity = Entity.allCases[Int(selector & 0x0f) % Entity.allCases.count]
    let body = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch selector >> 4 {
    case 0xf:
        cachedRow(body, as: entity)
    case 0xe:
        guard body.count >= 2, let value = try? JSONValue(jsonData: Data(body.dropFirst(2))) else { return 0 }
        deepInMemory(value, levels: Int(body[0]) << 8 | Int(body[1]), as: entity)
    default:
        guard let value = try? JSONValue(jsonData: Data(body)) else { return 0 }
        serverPayload(value, as: entity)
    }
    return 0
}
