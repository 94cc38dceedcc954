import Foundation
package import VaultStore

/// One change of the catch-up log, validated (`SyncPageRows.parse`).
enum SyncChange: Sendable {
    /// A message's current state: new to the cache, or an edit, a deletion, a reaction or a
    /// receipt of one it holds; with its payload as stored (`BinaryJSON.encode`), encoded while
    /// parsing, off the writer.
    case upsert(JSONValue, BaseMessage, encoded: [UInt8])
    /// The server deleted a message; the log names it only by id.
    case deleted(id: Int, conversationId: String)
    /// The conversation is gone for this user.
    case conversationRemoved(String)
    /// A receipt up to a message.
    case receipt(MessageReceipt)
}

/// What the catch-up sync does to the cache for one page of the change log, inside the caller's
/// transaction (the sync engine commits it with `SyncStateRows.advance`, so the rows and the sync
/// point move together).
///
/// - An upserted message new to the cache is written with `source == .sync` (and moves its
///   conversation's last message and unread count as a realtime one does: `RealtimeRows`); one the
///   cache holds (a read's server phase or the realtime connection wrote it) is rewritten in place,
///   keeping how it first arrived, and is not reported as new.
/// - A deletion marks the cached copy deleted (`deletedAt`: the page's server time when the log
///   does not say); a message the cache does not hold is left alone.
/// - A receipt marks the cached messages up to its message read or delivered (`RealtimeRows`),
///   after the page's messages are written.
/// - A removed conversation goes with its messages; its unsent messages are removed from the
///   outbox (the caller reports them `.discarded` once the transaction commits), except those on
///   the wire at that moment, which report their own outcome.
package enum SyncPageRows {
    struct Applied: Sendable {
        /// Messages new to the cache, in log order (they reach `onMessagesSynced`).
        var inserted: [BaseMessage] = []
        /// Cached messages the page changed (edits, deletions, reactions, receipts).
        var updated: [BaseMessage] = []
        /// Conversations removed with their messages.
        var removedConversations: [String] = []
        /// Outbox rows removed with their conversations: to report `.discarded` after the commit.
        var discarded: [OutboxRow] = []
    }

    /// Validates a page's changes. An invalid change is dropped and counted (it never stops the
    /// sweep: the sync point still moves past it, as a realtime event that fails validation is
    /// dropped); nothing here traps on hostile input.
    static func parse(_ changes: [ChangeLogEntry], limits: WireLimits) -> (changes: [SyncChange], dropped: Int) {
        let decoder = WireDecoder(limits: limits)
        var out: [SyncChange] = []
        out.reserveCapacity(changes.count)
        var dropped = 0
        for change in changes {
            switch change {
            case .messageUpserted(let wire):
                guard let m = try? decoder.message(wire), m.id > 0 else {
                    dropped += 1
                    continue
                }
                out.append(.upsert(wire, m, encoded: BinaryJSON.encode(wire)))
            case .messageDeleted(let id, let conversationId):
                guard id > 0, Int64(id) <= WireLimits.maxWireNumber, Self.isUsableId(conversationId) else {
                    dropped += 1
                    continue
                }
                out.append(.deleted(id: id, conversationId: conversationId))
            case .conversationRemoved(let conversationId):
                guard Self.isUsableId(conversationId) else {
                    dropped += 1
                    continue
                }
                out.append(.conversationRemoved(conversationId))
            case .receipt(let wire):
                let type: MessageReceipt.ReceiptType = wire["receiptType"]?.stringValue == "delivered" ? .delivered : .read
                guard let receipt = try? RealtimeWire.receipt(wire, expected: type, decoder) else {
                    dropped += 1
                    continue
                }
                out.append(.receipt(receipt))
            }
        }
        return (out, dropped)
    }

    private static func isUsableId(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 1024
    }

    /// Applies validated changes in order, as a batch (`MessageWriteBatch`: the rows end as
    /// `RealtimeRows.apply` would leave them message by message, each conversation written once).
    /// - Parameters:
    ///   - serverTime: the page's server time (a deletion's time when the log does not carry it).
    ///   - inFlight: outbox rows on the wire now (left to report their own outcome).
    static func apply(_ changes: [SyncChange], me: String, limits: WireLimits, serverTime: Int64, inFlight: Set<String>,
                      in db: Database) throws -> Applied {
        var applied = Applied()
        var receipts: [MessageReceipt] = []
        let batch = try MessageWriteBatch(me: me, limits: limits, in: db)
        for change in changes {
            switch change {
            case .upsert(let wire, let m, let encoded):
                switch try batch.received(wire, m, source: .sync, encoded: encoded) {
                case .inserted:
                    applied.inserted.append(m)
                case .updated:
                    applied.updated.append(m)
                case .nothing:
                    break
                }
            case .deleted(let id, _):
                if let m = try markDeleted(id, at: serverTime, me: me, limits: limits, batch: batch, in: db) { applied.updated.append(m) }
            case .conversationRemoved(let id):
                // The removal reads and deletes conversation rows: what the batch holds goes first.
                try batch.flush(limits: limits)
                batch.forget()
                applied.discarded += try removeConversation(id, inFlight: inFlight, in: db)
                applied.removedConversations.append(id)
            case .receipt(let receipt):
                receipts.append(receipt)
            }
        }
        try batch.flush(limits: limits)
        // Receipts go last, on the page's rows as they end: a receipt covers the messages up to
        // its own (by id), wherever they stand in the page, and the unread count it leaves is
        // counted against the conversation's last message after the page.
        for receipt in receipts { try RealtimeRows.applyReceipt(receipt, me: me, limits: limits, in: db) }
        return applied
    }

    /// Marks a cached message deleted; nil when the cache does not hold it (or it no longer decodes).
    private static func markDeleted(_ id: Int, at time: Int64, me: String, limits: WireLimits, batch: MessageWriteBatch,
                                    in db: Database) throws -> BaseMessage? {
        let stmt = try db.cached("SELECT payload FROM messages WHERE server_id = ?")
        try stmt.bind([.int(Int64(id))])
        let payload: JSONValue? = try {
            defer { stmt.reset() }
            guard try stmt.step(), let bytes = stmt.blob(0) else { return nil }
            return try? BinaryJSON.decode(bytes)
        }()
        guard case .object(var fields)? = payload else { return nil }
        if fields["deletedAt"]?.doubleValue ?? 0 == 0 { fields["deletedAt"] = .int(max(time, 1)) }
        let wire = JSONValue.object(fields)
        guard let m = try? WireDecoder(limits: limits, trusted: true).message(wire), try batch.changed(wire, m) != nil else { return nil }
        return m
    }

    /// Removes a conversation the server no longer returns, with its cached messages and its
    /// unsent ones (those on the wire excepted). Returns the outbox rows removed.
    private static func removeConversation(_ id: String, inFlight: Set<String>, in db: Database) throws -> [OutboxRow] {
        let unsent = try OutboxRows.rows(pendingOnly: false, in: db).filter { $0.conversationId == id && !inFlight.contains($0.localId) }
        for row in unsent { try OutboxRows.delete(row.localId, in: db) }
        _ = try Evictor.removeConversation(id, in: db)
        return unsent
    }
}

// MARK: - For the package's tools

extension SyncPageRows {
    /// What `ingest` wrote: counts only (the tools print no message content).
    package struct PageCounts: Sendable, Equatable {
        package var inserted = 0
        package var updated = 0
        package var dropped = 0
    }

    /// One page of the change log as the sync engine writes it, for the package's tools
    /// (`chatvault bench sync`): `parse`, `apply` (nothing in flight) and `SyncStateRows.advance`.
    /// Call it inside a transaction, as the engine does, so the rows and the sync point commit
    /// together.
    package static func ingest(_ page: ChangeLogPage, me: String, limits: WireLimits, in db: Database) throws -> PageCounts {
        try write(prepare(page, limits: limits), me: me, limits: limits, in: db)
    }

    /// A page parsed (validated, payloads encoded) and ready to write: what the sync engine
    /// prepares off the writer, while the writer writes the page before it.
    package struct PreparedPage: Sendable {
        let page: ChangeLogPage
        let changes: [SyncChange]
        let dropped: Int
    }

    /// `parse`, for the package's tools (anywhere but the writer).
    package static func prepare(_ page: ChangeLogPage, limits: WireLimits) -> PreparedPage {
        let (changes, dropped) = parse(page.changes, limits: limits)
        return PreparedPage(page: page, changes: changes, dropped: dropped)
    }

    /// `apply` (nothing in flight) and `SyncStateRows.advance`, inside the caller's transaction.
    package static func write(_ prepared: PreparedPage, me: String, limits: WireLimits, in db: Database) throws -> PageCounts {
        let page = prepared.page
        let applied = try apply(prepared.changes, me: me, limits: limits, serverTime: page.serverTime, inFlight: [], in: db)
        try SyncStateRows.advance(token: page.nextToken, serverTime: page.serverTime, in: db)
        return PageCounts(inserted: applied.inserted.count, updated: applied.updated.count, dropped: prepared.dropped)
    }
}
