import Foundation
import VaultStore

/// One unsent message as an audit lists it (`chatvault outbox`): the outbox row's bookkeeping and
/// the size of its local copies, never its content. The query behind it does not read the row's
/// payload (text, caption, custom data, file names), so nothing of the message can leak through it.
package struct OutboxAuditEntry: Sendable, Equatable {
    package let localId: String
    package let conversationId: String
    /// `text`, `media`, `custom` or `interactive`.
    package let kind: String
    /// `pending`, `sending` (on the wire in this process) or `failed`.
    package let state: String
    /// A `MessageFailureReason` raw value, set only while failed.
    package let failureReason: String?
    /// Attempts that got no answer since the last manual retry.
    package let attempts: Int
    /// Compose time, epoch milliseconds.
    package let composedAt: Int64
    /// Local files copied into the cache for upload (`outgoing/<local id>/`), and their bytes.
    /// Attachments that were already uploaded when the message was sent are not counted.
    package let files: Int
    package let fileBytes: Int64
}

extension OutboxRows {
    /// Every unsent message in compose order, content-free (see `OutboxAuditEntry`).
    static func audit(inFlight: Set<String>, in db: Database) throws -> [OutboxAuditEntry] {
        let stmt = try db.prepare("""
            SELECT o.local_id, o.conversation_id, o.kind, o.state, o.failure_reason, o.attempts, o.created_at,
                   count(m.url_key), coalesce(sum(m.bytes), 0)
            FROM outbox o LEFT JOIN media m ON m.outgoing = 1 AND m.message_id = o.local_id
            GROUP BY o.local_id ORDER BY o.seq
            """)
        var entries: [OutboxAuditEntry] = []
        while try stmt.step() {
            let localId = stmt.text(0) ?? ""
            let failed = OutboxRow.State(stmt, at: 3) == .failed
            entries.append(OutboxAuditEntry(localId: localId, conversationId: stmt.text(1) ?? "", kind: stmt.text(2) ?? "",
                                            state: failed ? "failed" : (inFlight.contains(localId) ? "sending" : "pending"),
                                            failureReason: failed ? stmt.text(4) : nil, attempts: stmt.int(5), composedAt: stmt.int64(6),
                                            files: stmt.int(7), fileBytes: stmt.int64(8)))
        }
        return entries
    }
}

extension OfflineVault {
    /// The unsent outbox for an audit, in compose order, without any message content. Throws as
    /// `pendingMessages()` does (`ERROR_OFFLINE_MESSAGE_PERSIST_FAILED` when the cache cannot be
    /// read just now, `ERROR_OFFLINE_DISABLED` when offline support is not running).
    package func outboxAudit() async throws(CometChatException) -> [OutboxAuditEntry] {
        let cache = try outboxCache()
        do {
            return try await cache.writer.run { db in
                try OutboxRows.audit(inFlight: self.outbox.state.withLock { $0.inFlight }, in: db)
            }
        } catch {
            throw CometChatException(.offlineMessagePersistFailed, "The outbox could not be read just now. Try again.")
        }
    }
}
