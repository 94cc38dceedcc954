import Foundation
import Synchronization
package import VaultStore

/// The local search index of the open cache (issue 24): kept by the engine's writer connection,
/// built in the background for the rows it does not hold yet, asked by `searchCachedMessages`.
///
/// How it is kept: when a cache is attached, the writer connection gets the SQL function
/// `chatvault_search_text(payload)` (what of a stored message is searchable, `SearchText`), TEMP
/// triggers on `messages` that take a row's words out of the index before the row changes or goes,
/// and an update hook recording every row inserted or changed (`Database.recordWrittenRows`),
/// indexed with the others of its transaction just before it commits (`flushPending`), or at once
/// after a statement outside any transaction. Every write of the engine goes through that
/// connection (the one write path, the eviction, `clearOfflineCache`, the outbox), so the index
/// never disagrees with the rows, in the same transaction. Triggers and hook live on this
/// connection only: a tool or a key change that opens the file without them writes rows without
/// touching the index, and the background build picks up any row the index does not hold.
///
/// The build: rows are visited in `row_id` order, 400 per transaction, each transaction indexing
/// those of its rows the index misses and recording how far it came (`kv` `search.build`), so a
/// kill loses at most one batch and the next open goes on from there. It starts after ready, runs
/// at utility priority, yields the writer between batches, and stops when the cache closes.
final class SearchIndex: Sendable {
    /// The version of what is indexed (`SearchText`'s rules and the table's options). An index
    /// built under another is emptied and built again. 2: no prefix indexes.
    static let format = "2"
    /// Rows per build transaction.
    static let batch = 400

    private struct State {
        var progress: [ObjectIdentifier: SearchIndexProgress] = [:]
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Caches whose writer could not be set up (the index is not kept there this session).
        var unkept: Set<ObjectIdentifier> = []
        /// Caches whose build is due or running (due from the attach, so a wait right after login
        /// waits for the build `startBuild` starts a moment later).
        var building: Set<ObjectIdentifier> = []
        /// Caches whose build task runs.
        var running: Set<ObjectIdentifier> = []
    }

    private let session: VaultSession
    private let settings: VaultSettings
    private let state = Mutex(State())
    let listeners = ListenerRegistry<any SearchIndexListener>()

    init(settings: VaultSettings, session: VaultSession) {
        self.settings = settings
        self.session = session
    }

    /// The function's body: a stored payload's searchable text ("" when it does not decode, so
    /// the row counts as indexed and the build does not visit it again).
    @Sendable static func text(_ payload: [UInt8]?) -> String? {
        guard let payload else { return "" }
        return SearchText.indexable(payload: payload) ?? ""
    }

    /// Row ids written in the current transaction (recorded by the writer's update hook:
    /// `Database.recordWrittenRows`), handed over to SQL just before it commits (`flushPending`).
    /// TEMP, in memory.
    static let pendingTable = """
        CREATE TEMP TABLE IF NOT EXISTS search_pending (row_id INTEGER PRIMARY KEY)
        """

    /// Only what must see a row before it changes: FTS4 reads a row's old words back through the
    /// view, so they leave the index while the row still holds them. New rows and new words are
    /// the update hook's (`flushPending`): an `INSERT` trigger, even one that never fires, gives
    /// every insert in a transaction a statement journal that SQLCipher encrypts page by page
    /// (`WriteLog`), which cost the catch-up ingest two thirds of its rate (bench search).
    static let triggers = [
        // A payload rewritten with the same words (a receipt, a reaction, a reply counted) keeps
        // its entry: only a changed text (an edit, a deletion) or a moved row leaves the index.
        """
        CREATE TEMP TRIGGER IF NOT EXISTS search_before_update BEFORE UPDATE OF row_id, payload ON main.messages
        WHEN EXISTS (SELECT 1 FROM search_index_docsize WHERE docid = old.row_id)
            AND (old.row_id != new.row_id
                 OR (old.payload IS NOT new.payload AND chatvault_search_text(old.payload) IS NOT chatvault_search_text(new.payload)))
        BEGIN DELETE FROM search_index WHERE docid = old.row_id; END
        """,
        """
        CREATE TEMP TRIGGER IF NOT EXISTS search_before_delete BEFORE DELETE ON main.messages
        WHEN EXISTS (SELECT 1 FROM search_index_docsize WHERE docid = old.row_id)
        BEGIN DELETE FROM search_index WHERE docid = old.row_id; END
        """,
    ]

    /// Indexes the rows the transaction wrote (inserted, or updated: those whose words left the
    /// index before the update) that the index does not hold, in row-id order, in one statement:
    /// FTS4 writes its pending terms out at every statement's savepoint, so one statement per row
    /// made ingest 6–7 times slower than one `INSERT … SELECT` (bench search). Runs as the writer's
    /// `beforeCommit`, inside the transaction. `CROSS JOIN` keeps the pending ids the outer loop
    /// (each looked up by row id): left to itself the planner may scan `messages` and probe the
    /// pending set, reading every cached row at every commit.
    static func flushPending(_ db: Database) throws {
        let rows = db.takeWrittenRows()
        guard !rows.isEmpty else { return }
        let pend = try db.cached("INSERT INTO temp.search_pending (row_id) VALUES (?)")
        for row in rows {
            try pend.bind(.int(row), at: 1)
            while try pend.step() {}
        }
        try db.run("""
            INSERT INTO search_index (docid, body)
            SELECT m.row_id, chatvault_search_text(m.payload) FROM temp.search_pending p CROSS JOIN messages m ON m.row_id = p.row_id
            WHERE NOT EXISTS (SELECT 1 FROM search_index_docsize d WHERE d.docid = m.row_id)
            ORDER BY p.row_id
            """)
        try db.run("DELETE FROM temp.search_pending")
    }

    /// Sets up the cache's connections (before it serves): the function on both, the table if it
    /// went missing, an index of another format emptied, the triggers on the writer.
    func attached(_ cache: VaultCache) {
        let id = ObjectIdentifier(cache)
        do {
            try cache.writer.sync { db in
                try db.defineTextFunction(SearchIndexSchema.function, Self.text)
                try db.execute(Self.pendingTable)
                try db.transaction {
                    try db.execute(SearchIndexSchema.createTable)
                    if try db.scalarText("SELECT CAST(value AS TEXT) FROM kv WHERE key = ?", .text(SearchIndexSchema.formatKey)) != Self.format {
                        try SearchIndexSchema.recreate(db)
                        try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(SearchIndexSchema.formatKey), .text(Self.format))
                    }
                }
                for trigger in Self.triggers { try db.execute(trigger) }
                db.recordWrittenRows(of: "messages")
                db.beforeCommit = { db in try SearchIndex.flushPending(db) }
            }
            try cache.reader.sync { db in
                try db.defineTextFunction(SearchIndexSchema.function, Self.text)
                try db.defineRealFunction(SearchEngine.rankFunction, SearchEngine.bm25)
            }
            state.withLock { s in
                s.unkept.remove(id)
                s.building.insert(id)
            }
        } catch {
            // Writes still work (no trigger, no index upkeep); search answers that it is unavailable.
            state.withLock { _ = $0.unkept.insert(id) }
        }
    }

    /// Whether the index is kept on `cache` this session.
    func isKept(_ cache: VaultCache) -> Bool {
        state.withLock { !$0.unkept.contains(ObjectIdentifier(cache)) }
    }

    /// Starts the background build for `cache` (after ready). Reports progress to the listeners.
    func startBuild(_ cache: VaultCache) {
        guard isKept(cache) else { return }
        let first = state.withLock { s -> Bool in
            s.building.insert(ObjectIdentifier(cache))
            return s.running.insert(ObjectIdentifier(cache)).inserted
        }
        guard first else { return }
        Task.detached(priority: .utility) { [weak self] in await self?.build(cache) }
    }

    /// How far the index of the open cache is, read from the file (counts, not rows), or nil
    /// when none is open.
    func progress() -> SearchIndexProgress? {
        guard let cache = session.openCache else { return nil }
        return try? cache.reader.sync { db in try SearchIndexRows.progress(in: db) }
    }

    /// Waits until the open cache's index is complete (or the cache closes).
    func waitUntilBuilt() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { s -> Bool in
                guard let cache = session.openCache, s.building.contains(ObjectIdentifier(cache)) else { return true }
                s.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// The cache closed: nobody waits for its build any more.
    func closed(_ cache: VaultCache) {
        let woken = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.progress[ObjectIdentifier(cache)] = nil
            s.unkept.remove(ObjectIdentifier(cache))
            s.building.remove(ObjectIdentifier(cache))
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in woken { waiter.resume() }
    }

    private func build(_ cache: VaultCache) async {
        let id = ObjectIdentifier(cache)
        var failures = 0
        var first = true
        while session.openCache === cache {
            do {
                let firstOfSession = first
                let progress = try await cache.writer.run { db in try Self.step(db, firstOfSession: firstOfSession) }
                first = false
                failures = 0
                let changed = state.withLock { s -> Bool in
                    defer { s.progress[id] = progress }
                    return s.progress[id] != progress
                }
                if changed { publish(progress) }
                if progress.isComplete { break }
            } catch {
                // The cache closed, or the writer is busy or short of space: try again a little
                // later, while the cache is still open (never a reset, never a loss: the index is
                // derived, and the batch rolled back).
                failures += 1
                // After 50 failures in a row this session gives up (the next open builds on from
                // the recorded cursor); whoever waits is told.
                guard session.openCache === cache, failures < 50 else { break }
                try? await Task.sleep(for: .milliseconds(min(2_000, 50 * failures)))
            }
            await Task.yield()
        }
        let woken = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.building.remove(id)
            s.running.remove(id)
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in woken { waiter.resume() }
    }

    private func publish(_ progress: SearchIndexProgress) {
        let listeners = listeners.live()
        guard !listeners.isEmpty else { return }
        settings.callbackExecutor.execute {
            for listener in listeners { listener.onSearchIndexProgress(progress) }
        }
    }

    /// One build transaction: the next `batch` rows after the recorded cursor, those the index
    /// misses indexed, the cursor moved past them; `complete` recorded once no row is left. Answers
    /// the progress counted in the file (two counts: about 0.04 ms at 100,000 messages).
    static func step(_ db: Database, firstOfSession: Bool) throws -> SearchIndexProgress {
        try db.transaction {
            var stateText = try db.scalarText("SELECT CAST(value AS TEXT) FROM kv WHERE key = ?", .text(SearchIndexSchema.buildStateKey))
            // Once per session, a complete index is checked for rows it misses (written by a tool
            // without the triggers, or by a transaction that ended some other way): a scan of the
            // row ids (a covering index) against the index's own table of rows. Any missing: the
            // build goes over the rows again, indexing only those.
            if stateText == "complete", firstOfSession,
               try db.scalarInt("""
                   SELECT EXISTS (SELECT 1 FROM messages m WHERE NOT EXISTS (SELECT 1 FROM search_index_docsize d WHERE d.docid = m.row_id))
                   """) == 1 {
                try db.run("DELETE FROM kv WHERE key = ?", .text(SearchIndexSchema.buildStateKey))
                stateText = nil
            }
            if stateText == "complete" { return try SearchIndexRows.progress(in: db) }
            let cursor = stateText.flatMap { Int64($0) } ?? Int64.min
            let end = try db.scalarInt("SELECT max(row_id) FROM (SELECT row_id FROM messages WHERE row_id > ? ORDER BY row_id LIMIT \(batch))",
                                       .int(cursor))
            if let end {
                try db.run("""
                    INSERT INTO search_index (docid, body)
                    SELECT row_id, chatvault_search_text(payload) FROM messages m
                    WHERE row_id > ? AND row_id <= ?
                      AND NOT EXISTS (SELECT 1 FROM search_index_docsize d WHERE d.docid = m.row_id)
                    """, .int(cursor), .int(end))
                try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(SearchIndexSchema.buildStateKey), .text(String(end)))
            } else {
                try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(SearchIndexSchema.buildStateKey), .text("complete"))
            }
            return try SearchIndexRows.progress(in: db)
        }
    }
}

/// The index's bookkeeping as the package's tools read it (`chatvault status`).
package enum SearchIndexRows {
    /// Rows the index holds against rows in `messages`, and whether the build has completed.
    /// Reads only counts and `kv` (no message, no function needed).
    package static func progress(in db: Database) throws -> SearchIndexProgress {
        let total = Int(try db.scalarInt("SELECT count(*) FROM messages") ?? 0)
        let complete = try db.scalarText("SELECT CAST(value AS TEXT) FROM kv WHERE key = ?", .text(SearchIndexSchema.buildStateKey)) == "complete"
        let indexed = complete ? total : min(total, Int(try db.scalarInt("SELECT count(*) FROM search_index_docsize") ?? 0))
        return SearchIndexProgress(indexedMessages: indexed, totalMessages: total, isComplete: complete)
    }

    /// What a search reports with its page: `progress(in:)`, except that a complete index answers
    /// from its own count of rows, FTS4's document total in `search_index_stat` (one small row,
    /// written in the same transactions as the rows it counts), instead of counting `messages`,
    /// which reads every page of its smallest index: at 100,000 messages, 3.6 ms of a 7.2 ms
    /// search once those pages had left the page cache (bench search). Falls back to
    /// `progress(in:)` when the total is missing or does not parse.
    package static func quickProgress(in db: Database) throws -> SearchIndexProgress {
        guard try db.scalarText("SELECT CAST(value AS TEXT) FROM kv WHERE key = ?", .text(SearchIndexSchema.buildStateKey)) == "complete" else {
            return try progress(in: db)
        }
        let stmt = try db.cached("SELECT value FROM search_index_stat WHERE id = 0")
        let blob: [UInt8]? = try stmt.step() ? stmt.blob(0) : nil
        stmt.reset()
        guard let blob, let documents = documentTotal(blob) else { return try progress(in: db) }
        return SearchIndexProgress(indexedMessages: documents, totalMessages: documents, isComplete: true)
    }

    /// The first varint of FTS4's `%_stat` row 0 (the number of documents): seven bits a byte,
    /// least significant first, high bit set while more follow. Nil for a blob that ends early,
    /// runs past ten bytes or overflows (it comes from the file: nothing here traps).
    package static func documentTotal(_ blob: [UInt8]) -> Int? {
        var value: UInt64 = 0
        for (i, byte) in blob.prefix(10).enumerated() {
            let bits = UInt64(byte & 0x7f)
            let shift = UInt64(7 * i)
            guard shift < 64, bits <= (UInt64.max >> shift) else { return nil }
            value |= bits << shift
            if byte & 0x80 == 0 { return value <= UInt64(Int.max) ? Int(value) : nil }
        }
        return nil
    }
}
