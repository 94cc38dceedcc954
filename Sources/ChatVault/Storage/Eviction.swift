import Foundation
import Synchronization
import VaultStore

/// Keeps the cache within the configured limits (the reference's clamps are applied by
/// `OfflineConfig`):
///
/// 1. `cacheDurationDays`: a conversation with no new message and not opened for that long goes;
/// 2. `maxConversations`: beyond it, the least recently active conversations go;
/// 3. `maxMessagesPerConversation`: beyond it, a conversation's oldest messages go;
/// 4. `maxStorageSize`: while cached content (message, conversation and snapshot payloads; the
///    outbox excluded) exceeds it, the oldest messages go, then the least recently used snapshots.
///
/// Never evicted: an unsent message (no server id), and a conversation with unsent messages or
/// outbox rows, with everything in it.
package enum Evictor {
    package struct Report: Sendable, Equatable {
        package var conversations = 0
        package var messages = 0
        package var snapshots = 0
    }

    /// Conversations with their last activity (newest message, last update, last opened).
    static func activity(_ db: Database) throws -> [(id: String, at: Int64)] {
        let stmt = try db.prepare("""
            SELECT id, max(at) FROM (
                SELECT conversation_id AS id, max(sent_at) AS at FROM messages GROUP BY conversation_id
                UNION ALL SELECT id, max(last_message_at, updated_at) FROM conversations
                UNION ALL SELECT conversation_id, opened_at FROM conversation_opened
            ) GROUP BY id ORDER BY max(at) DESC, id
            """)
        var out: [(String, Int64)] = []
        while try stmt.step() { out.append((stmt.text(0) ?? "", stmt.int64(1))) }
        return out
    }

    /// Conversations that hold unsent messages: never evicted.
    static func protectedConversations(_ db: Database) throws -> Set<String> {
        Set(try db.texts("SELECT conversation_id FROM outbox UNION SELECT conversation_id FROM messages WHERE server_id IS NULL"))
    }

    static func removeConversation(_ id: String, in db: Database) throws -> Int {
        try db.run("DELETE FROM messages WHERE conversation_id = ? AND server_id IS NOT NULL", .text(id))
        let removed = db.changes
        try db.run("DELETE FROM conversations WHERE id = ?", .text(id))
        try db.run("DELETE FROM conversation_opened WHERE conversation_id = ?", .text(id))
        return removed
    }

    /// Cached content bytes counted against `maxStorageSize`. Unsent messages (no server id) are
    /// pending sends, part of the outbox, which the budget excludes.
    static func contentBytes(_ db: Database) throws -> Int64 {
        let messages = try db.scalarInt("SELECT coalesce(sum(length(payload)), 0) FROM messages WHERE server_id IS NOT NULL") ?? 0
        let conversations = try db.scalarInt("SELECT coalesce(sum(length(payload)), 0) FROM conversations") ?? 0
        let snapshots = try db.scalarInt("SELECT coalesce(sum(length(payload)), 0) FROM list_snapshots") ?? 0
        return messages + conversations + snapshots
    }

    static func run(_ config: OfflineConfig, now: Date, in db: Database) throws -> Report {
        var report = Report()
        let protected = try protectedConversations(db)
        var conversations = try activity(db)

        if config.cacheDurationDays > 0 {
            let cutoff = Int64(now.timeIntervalSince1970) - Int64(config.cacheDurationDays) * 86_400
            for c in conversations where c.at < cutoff && !protected.contains(c.id) {
                report.messages += try removeConversation(c.id, in: db)
                report.conversations += 1
            }
            conversations.removeAll { $0.at < cutoff && !protected.contains($0.id) }
        }

        if conversations.count > config.maxConversations {
            // Oldest first; protected ones count toward the cap but stay.
            var excess = conversations.count - config.maxConversations
            for c in conversations.reversed() where excess > 0 && !protected.contains(c.id) {
                report.messages += try removeConversation(c.id, in: db)
                report.conversations += 1
                excess -= 1
            }
        }

        let crowded = try db.prepare("""
            SELECT conversation_id FROM messages WHERE server_id IS NOT NULL
            GROUP BY conversation_id HAVING count(*) > ?
            """)
        try crowded.bind([.int(Int64(config.maxMessagesPerConversation))])
        var overfull: [String] = []
        while try crowded.step() { overfull.append(crowded.text(0) ?? "") }
        for id in overfull where !protected.contains(id) {
            try db.run("""
                DELETE FROM messages WHERE conversation_id = ? AND server_id IS NOT NULL AND row_id NOT IN (
                    SELECT row_id FROM messages WHERE conversation_id = ? AND server_id IS NOT NULL
                    ORDER BY sent_at DESC, server_id DESC LIMIT ?)
                """, .text(id), .text(id), .int(Int64(config.maxMessagesPerConversation)))
            report.messages += db.changes
        }

        if config.maxStorageSize > 0 {
            var excess = try contentBytes(db) - config.maxStorageSize
            if excess > 0 {
                // Just enough of the oldest messages to cover the excess, not a fixed batch (which
                // could empty a small cache that was one byte over).
                let oldest = try db.prepare("""
                    SELECT row_id, coalesce(length(payload), 0) FROM messages WHERE server_id IS NOT NULL AND conversation_id NOT IN (
                        SELECT conversation_id FROM outbox UNION SELECT conversation_id FROM messages WHERE server_id IS NULL)
                    ORDER BY sent_at, server_id
                    """)
                var doomed: [Int64] = []
                while excess > 0, try oldest.step() {
                    doomed.append(oldest.int64(0))
                    excess -= oldest.int64(1)
                }
                oldest.reset()
                for row in doomed { try db.run("DELETE FROM messages WHERE row_id = ?", .int(row)) }
                report.messages += doomed.count
            }
            // Then the least recently used snapshots.
            while excess > 0 {
                try db.run("""
                    DELETE FROM list_snapshots WHERE query_key = (
                        SELECT query_key FROM list_snapshots ORDER BY last_used, query_key LIMIT 1)
                    """)
                if db.changes == 0 { break }
                report.snapshots += db.changes
                excess = try contentBytes(db) - config.maxStorageSize
            }
        }
        return report
    }
}

/// Runs eviction after writes settle: each committed batch of the cache writer schedules a run
/// (coalesced: one per burst of writes, `VaultSettings.evictionDelay` after the first), on the
/// writer connection, within the configured limits.
final class EvictionScheduler: Sendable {
    private let settings: VaultSettings
    private let config: OfflineConfig
    private let session: VaultSession
    /// Told when a run removed whole conversations (their openings went with them).
    private let conversationsEvicted: @Sendable () -> Void
    private let pending = Mutex(false)

    init(settings: VaultSettings, config: OfflineConfig, session: VaultSession, conversationsEvicted: @escaping @Sendable () -> Void) {
        self.settings = settings
        self.config = config
        self.session = session
        self.conversationsEvicted = conversationsEvicted
    }

    /// Schedules a run after every batch that wrote something.
    func committed(_ committed: CacheWriter.Committed) {
        switch committed {
        case .realtime(_, let wrote): if wrote { self.schedule() }
        case .syncPage(let applied): if applied.inserted.count + applied.updated.count > 0 { self.schedule() }
        case .stored: self.schedule()
        case .removed, .media: break // removals make room; media has its own budget
        }
    }

    /// Runs eviction a moment after writes settle (coalesced: one run per burst of writes).
    func schedule() {
        guard pending.withLock({ pending in
            defer { pending = true }
            return !pending
        }) else { return }
        let delay = settings.evictionDelay
        Task.detached {
            try? await Task.sleep(for: delay)
            self.pending.withLock { $0 = false }
            _ = await self.runNow()
        }
    }

    /// Runs eviction now on the writer connection; nil when no cache is open.
    @discardableResult
    func runNow() async -> Evictor.Report? {
        guard let cache = session.openCache else { return nil }
        let config = self.config
        let now = settings.clock()
        let report = try? await cache.writer.run { db in try db.transaction { try Evictor.run(config, now: now, in: db) } }
        if let report, report.conversations > 0 { conversationsEvicted() }
        return report
    }
}

extension OfflineVault {
    /// Runs eviction now (for tools and tests); nil when no cache is open.
    @discardableResult
    package func evictNow() async -> Evictor.Report? {
        await eviction.runNow()
    }
}
