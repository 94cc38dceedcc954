import Foundation
import VaultStore

/// A local file of a media send, copied into the cache (`outgoing/<local id>/<n>`).
struct OutgoingFile: Sendable, Equatable {
    /// Stable id of the file within its message (`<local id>-<n>`).
    let fileId: String
    let name: String
    let mimeType: String
    let size: Int64
    /// Relative to the cache directory.
    let relativePath: String
    /// The uploaded attachment, once the server has the bytes.
    var attachment: JSONValue?

    var json: JSONValue {
        var fields: [String: JSONValue] = ["id": .string(fileId), "name": .string(name), "mime": .string(mimeType),
                                           "size": .int(size), "path": .string(relativePath)]
        if let attachment { fields["attachment"] = attachment }
        return .object(fields)
    }

    init(fileId: String, name: String, mimeType: String, size: Int64, relativePath: String, attachment: JSONValue? = nil) {
        self.fileId = fileId
        self.name = name
        self.mimeType = mimeType
        self.size = size
        self.relativePath = relativePath
        self.attachment = attachment
    }

    init?(_ json: JSONValue) {
        guard let id = json["id"]?.stringValue, let path = json["path"]?.stringValue else { return nil }
        self.init(fileId: id, name: json["name"]?.stringValue ?? "", mimeType: json["mime"]?.stringValue ?? "application/octet-stream",
                  size: json["size"]?.intValue ?? 0, relativePath: path, attachment: json["attachment"].flatMap { $0.isNull ? nil : $0 })
    }
}

/// One row of the outbox: an unsent message in compose order.
struct OutboxRow: Sendable {
    /// Stored as its `StoredCode`.
    enum State: Sendable {
        case pending
        case failed
    }

    let localId: String
    var seq: Int64
    let conversationId: String
    let kind: OutboxKind
    var state: State
    var failureReason: MessageFailureReason?
    /// Attempts that got no answer (timeouts) since the last manual retry.
    var attempts: Int
    /// Compose time, epoch milliseconds.
    let createdAt: Int64
    /// The outgoing wire message (`OutgoingMessage.encode`).
    var message: JSONValue
    let senderUid: String
    var files: [OutgoingFile]

    var payload: [UInt8] {
        BinaryJSON.encode(.object(["message": message, "sender": .string(senderUid), "files": .array(files.map(\.json))]))
    }

    /// The outgoing message with every uploaded file among its attachments.
    var messageToSend: JSONValue {
        guard !files.isEmpty, case .object(var fields) = message else { return message }
        var data = fields["data"]?.objectValue ?? [:]
        data["attachments"] = .array((data["attachments"]?.arrayValue ?? []) + files.compactMap(\.attachment))
        fields["data"] = .object(data)
        return .object(fields)
    }

    /// Bytes of the local copies.
    var copiedBytes: Int64 { files.reduce(0) { $0 + $1.size } }
}

/// What `OutboxRows.enqueue` did.
enum EnqueueOutcome: Sendable {
    /// Committed; `evicted` is the message `.dropOldest` removed to make room, if any.
    case queued(evicted: OutboxRow?)
    /// Refused: no row was written.
    case refused(MessageFailureReason)
}

/// The outbox's SQL. Every function runs on the writer connection.
enum OutboxRows {
    /// The columns of `outbox` an `OutboxRow` is read from (and inserted into), in order.
    enum Column: String, RowColumns {
        case localId = "local_id", seq, conversationId = "conversation_id", kind, state, failureReason = "failure_reason",
             attempts, createdAt = "created_at", payload
    }

    static let columns = Column.list

    static func decode(_ stmt: Statement) throws -> OutboxRow {
        guard let localId = stmt.text(Column.localId.index), let kind = OutboxKind(rawValue: stmt.text(Column.kind.index) ?? ""),
              let bytes = stmt.blob(Column.payload.index) else { throw BinaryJSON.Malformed() }
        let payload = try BinaryJSON.decode(bytes)
        guard let message = payload["message"] else { throw BinaryJSON.Malformed() }
        return OutboxRow(localId: localId, seq: stmt.int64(Column.seq.index), conversationId: stmt.text(Column.conversationId.index) ?? "",
                         kind: kind, state: OutboxRow.State(stmt, at: Column.state.index) ?? .pending,
                         failureReason: stmt.text(Column.failureReason.index).flatMap(MessageFailureReason.init(rawValue:)),
                         attempts: stmt.int(Column.attempts.index), createdAt: stmt.int64(Column.createdAt.index), message: message,
                         senderUid: payload["sender"]?.stringValue ?? "",
                         files: (payload["files"]?.arrayValue ?? []).compactMap(OutgoingFile.init))
    }

    /// Every unsent message in compose order, or only the pending ones. A row that cannot be
    /// decoded (damaged in place) is left where it is and skipped, so it blocks nothing else.
    static func rows(pendingOnly: Bool, in db: Database) throws -> [OutboxRow] {
        let stmt = try db.cached("SELECT \(columns) FROM outbox\(pendingOnly ? " WHERE state = \(OutboxRow.State.pending.storedCode)" : "") ORDER BY seq")
        // Never left active (a statement in progress blocks VACUUM and checkpoints).
        defer { stmt.reset() }
        var rows: [OutboxRow] = []
        while try stmt.step() {
            if let row = try? decode(stmt) { rows.append(row) }
        }
        return rows
    }

    static func row(_ localId: String, in db: Database) throws -> OutboxRow? {
        let stmt = try db.cached("SELECT \(columns) FROM outbox WHERE local_id = ?")
        try stmt.bind([.text(localId)])
        defer { stmt.reset() }
        return try stmt.step() ? try decode(stmt) : nil
    }

    /// Admits a new send in one transaction (committed with `synchronous=FULL`, the writer's
    /// setting): the count cap and its overflow policy, then the media byte budget (evicting
    /// received media, least recently used first), then the row and its copies' media rows.
    /// A refusal rolls the whole transaction back: a `.dropOldest` eviction or a received-media
    /// eviction made before the refusal is undone, so a refused send changes nothing.
    /// - Parameters:
    ///   - inFlight: local ids on the wire now; never evicted.
    ///   - mediaBudget: `maxMediaCacheSize` (nil: unlimited).
    ///   - removeFiles: receives the files of evicted media and of an evicted message, to delete
    ///     once the transaction has committed (nothing on a refusal).
    /// How many messages wait to be sent (what the queue's cap counts).
    static func pendingCount(in db: Database) throws -> Int {
        Int(clamping: try db.scalarInt("SELECT count(*) FROM outbox WHERE state = \(OutboxRow.State.pending.storedCode)") ?? 0)
    }

    static func enqueue(_ row: OutboxRow, capacity: Int, policy: PendingMessageOverflowPolicy, inFlight: Set<String>,
                        mediaBudget: Int64?, removeFiles: inout [String], in db: Database) throws -> EnqueueOutcome {
        var removing: [String] = []
        let evicted: OutboxRow?
        do {
            evicted = try db.savepoint("enqueue") { () throws -> OutboxRow? in
                var evicted: OutboxRow?
                let queued = try pendingCount(in: db)
                if queued >= capacity {
                    guard policy == .dropOldest else { throw Refusal(reason: .queueFull) }
                    let candidates = try db.cached("SELECT \(columns) FROM outbox WHERE state = \(OutboxRow.State.pending.storedCode) ORDER BY seq")
                    defer { candidates.reset() }
                    while try candidates.step() {
                        let candidate = try decode(candidates)
                        if !inFlight.contains(candidate.localId) { evicted = candidate; break }
                    }
                    guard let victim = evicted else { throw Refusal(reason: .queueFull) }
                    candidates.reset()
                    try delete(victim.localId, in: db)
                    removing += victim.files.map(\.relativePath)
                }
                guard try makeRoom(for: row.copiedBytes, budget: mediaBudget, removeFiles: &removing, in: db) else {
                    throw Refusal(reason: .byteOverflow)
                }
                try db.run("INSERT INTO outbox (\(columns)) VALUES (?, ?, ?, ?, \(OutboxRow.State.pending.storedCode), NULL, 0, ?, ?)",
                           .text(row.localId), .int(row.seq), .text(row.conversationId), .text(row.kind.rawValue),
                           .int(row.createdAt), .blob(row.payload))
                for (i, file) in row.files.enumerated() {
                    try insertOutgoingMedia(key: "outgoing:\(row.localId):\(i)", owner: row.localId, file: file.relativePath,
                                            bytes: file.size, mime: file.mimeType, at: row.createdAt, in: db)
                }
                return evicted
            }
        } catch let refusal as Refusal {
            return .refused(refusal.reason)
        }
        removeFiles += removing
        return .queued(evicted: evicted)
    }

    /// Thrown inside `enqueue`'s transaction so a refusal rolls back what came before it.
    private struct Refusal: Error {
        let reason: MessageFailureReason
    }

    /// Makes room in the media byte budget for `bytes` more outgoing bytes (a send's copies or an
    /// upload batch's), evicting received media (`outgoing = 0`) least recently used first.
    /// Outgoing copies (unsent messages, kept upload batches) count toward the budget but are
    /// never evicted. Returns false, having deleted nothing, when even evicting every received
    /// file could not make room. Run it inside the caller's transaction.
    /// - Parameters:
    ///   - budget: `maxMediaCacheSize` (nil: unlimited, always true).
    ///   - removeFiles: receives the evicted files (relative to the cache directory), to delete
    ///     once the transaction has committed.
    static func makeRoom(for bytes: Int64, budget: Int64?, removeFiles: inout [String], in db: Database) throws -> Bool {
        guard let budget, bytes > 0 else { return true }
        let used = try db.scalarInt("SELECT coalesce(sum(bytes), 0) FROM media") ?? 0
        var excess = used + bytes - budget
        guard excess > 0 else { return true }
        // Only received media may go; other unsent messages' and batches' copies stay.
        let received = try db.scalarInt("SELECT coalesce(sum(bytes), 0) FROM media WHERE outgoing = 0") ?? 0
        guard received >= excess else { return false }
        let lru = try db.prepare("SELECT url_key, local_file, bytes FROM media WHERE outgoing = 0 ORDER BY last_access, url_key")
        var victims: [(String, String)] = []
        while excess > 0, try lru.step() {
            victims.append((lru.text(0) ?? "", lru.text(1) ?? ""))
            // Positive minus non-negative: a damaged row's negative size cannot overflow it.
            excess -= max(lru.int64(2), 0)
        }
        lru.reset()
        for (key, file) in victims {
            try db.run("DELETE FROM media WHERE url_key = ?", .text(key))
            removeFiles.append(file)
        }
        return true
    }

    /// The `media` row of an outgoing copy (`outgoing = 1`: counted, never evicted). `owner` is
    /// the send's local id, or `upload-<batch id>` for an upload batch.
    static func insertOutgoingMedia(key: String, owner: String, file: String, bytes: Int64, mime: String, at time: Int64,
                                    in db: Database) throws {
        try db.run("INSERT INTO media (url_key, message_id, local_file, bytes, mime, outgoing, created_at, last_access) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
                   .text(key), .text(owner), .text(file), .int(bytes), .text(mime), .int(time), .int(time))
    }

    /// The next compose-order number.
    static func nextSeq(in db: Database) throws -> Int64 {
        try CacheRows.nextOutboxSeq(db)
    }

    /// Deletes a row and its copies' media rows (the files are the caller's to remove).
    static func delete(_ localId: String, in db: Database) throws {
        try db.run("DELETE FROM outbox WHERE local_id = ?", .text(localId))
        try db.run("DELETE FROM media WHERE outgoing = 1 AND message_id = ?", .text(localId))
    }

    static func markFailed(_ localId: String, _ reason: MessageFailureReason, at time: Int64, in db: Database) throws {
        try db.run("UPDATE outbox SET state = \(OutboxRow.State.failed.storedCode), failure_reason = ?, updated_at = ? WHERE local_id = ?",
                   .text(reason.rawValue), .int(time), .text(localId))
    }

    /// Back to pending (a manual retry): the no-answer count starts again.
    static func markPending(_ localId: String, at time: Int64, in db: Database) throws {
        try db.run("UPDATE outbox SET state = \(OutboxRow.State.pending.storedCode), failure_reason = NULL, attempts = 0, updated_at = ? WHERE local_id = ?",
                   .int(time), .text(localId))
    }

    /// Counts one attempt that got no answer; returns the new count.
    static func countNoAnswer(_ localId: String, at time: Int64, in db: Database) throws -> Int {
        try db.run("UPDATE outbox SET attempts = attempts + 1, updated_at = ? WHERE local_id = ?", .int(time), .text(localId))
        return Int(try db.scalarInt("SELECT attempts FROM outbox WHERE local_id = ?", .text(localId)) ?? 0)
    }

    /// Records upload progress (the files' attachments).
    static func updateFiles(_ row: OutboxRow, in db: Database) throws {
        try db.run("UPDATE outbox SET payload = ? WHERE local_id = ?", .blob(row.payload), .text(row.localId))
    }

    /// The server accepted the message: the row leaves the outbox and the message enters the
    /// cache, in one transaction. Returns whether the row was still there.
    static func complete(_ localId: String, wire: JSONValue, message: BaseMessage, me: String, in db: Database) throws -> Bool {
        try db.transaction { () throws -> Bool in
            let present = try db.scalarInt("SELECT count(*) FROM outbox WHERE local_id = ?", .text(localId)) ?? 0
            try delete(localId, in: db)
            // A message already cached under this local id (an earlier ack) is replaced.
            try db.run("UPDATE messages SET local_id = NULL WHERE local_id = ? AND (server_id IS NULL OR server_id != ?)",
                       .text(localId), .int(Int64(message.id)))
            try MessageWriteBatch.storeServerCopy(wire, message, me: me, source: .realtime, in: db)
            try db.run("UPDATE messages SET local_id = ? WHERE server_id = ?", .text(localId), .int(Int64(message.id)))
            return present > 0
        }
    }
}
