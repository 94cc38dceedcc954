/// Where a message row lives in the `messages` table: its `row_id` (the table's b-tree key) is
/// `cluster << 32 | n`, the cluster drawn from the conversation id and `n` counting up within it,
/// so a conversation's messages sit next to each other in the file whatever order they arrive in
/// (a catch-up sync or a busy realtime stream interleaves every conversation). A page of 30
/// messages then reads a handful of database pages instead of thirty, which is what an encrypted
/// cache pays for: every page read from the file is authenticated and decrypted.
///
/// `row_id` is internal: nothing outside the table refers to it, and its order means nothing but
/// this placement. Two conversations may share a cluster (a 31-bit hash): that only places them
/// together. A full cluster (2^32 rows) falls back to SQLite's own choice of key.
///
/// Every write places its rows at once, a catch-up sync page too: measured on 2,000-message pages
/// over 100 conversations, that costs the ingest about a third of its rate (~39k → ~23k msg/s
/// encrypted), where staging a page's rows and moving them later cost the writer four times as
/// much in all (moving a row rewrites its entry in every index).
package enum MessageClusters {
    /// Rows per cluster.
    package static let span: Int64 = 1 << 32

    /// The first `row_id` of a conversation's cluster: from `span` (cluster 1) to
    /// `(2^31 - 1) · span`, so every key of every cluster fits an `Int64`; cluster 0 holds nothing
    /// (rows written before clustering were there; schema version 4 moved them).
    package static func base(of conversationId: String) -> Int64 {
        // FNV-1a, 64-bit: stable across runs and builds (Swift's `Hasher` is seeded per process).
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in conversationId.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let cluster = Int64(hash % UInt64(Int32.max)) + 1
        return cluster << 32
    }

    /// `INSERT INTO messages (row_id, <columns>) …` for the columns named, their values bound as
    /// `?1 … ?n` in that order and the cluster's base (`base(of:)`) as `?(n+1)`: the row goes
    /// after the last row of its cluster.
    package static func insertSQL(columns: [String]) -> String {
        let base = "?\(columns.count + 1)"
        let values = columns.indices.map { "?\($0 + 1)" }.joined(separator: ", ")
        // The key is a scalar subquery inside VALUES: `INSERT … SELECT` reading the table it
        // inserts into makes SQLite stage every row in a temporary table first (5× slower here).
        return """
            INSERT INTO messages (row_id, \(columns.joined(separator: ", ")))
            VALUES ((SELECT CASE WHEN last IS NULL THEN \(base) WHEN last < \(base) + \(span - 1) THEN last + 1 ELSE NULL END
                     FROM (SELECT (SELECT row_id FROM messages WHERE row_id BETWEEN \(base) AND \(base) + \(span - 1)
                                   ORDER BY row_id DESC LIMIT 1) AS last)), \(values))
            """
    }

    /// Schema version 4: every row written before clustering moves into its cluster, in
    /// (conversation, time) order within each. Runs inside the migration's transaction.
    static func renumber(_ db: Database) throws {
        // Keys written before clustering are SQLite's own (1, 2, 3, …); should any have reached a
        // cluster's range, every row moves below zero first so no new key meets an old one.
        if let top = try db.scalarInt("SELECT max(row_id) FROM messages"), top >= span {
            try db.execute("UPDATE messages SET row_id = -row_id")
        }
        var rows: [(old: Int64, base: Int64)] = []
        let stmt = try db.prepare("SELECT row_id, conversation_id FROM messages ORDER BY conversation_id, sent_at, server_id, row_id")
        while try stmt.step() { rows.append((stmt.int64(0), base(of: stmt.text(1) ?? ""))) }
        try place(rows, in: db)
    }

    /// Gives each row the next key of its cluster, in the order given within a cluster, writing
    /// in key order (each cluster's last page is touched once, not once per row).
    private static func place(_ rows: [(old: Int64, base: Int64)], in db: Database) throws {
        guard !rows.isEmpty else { return }
        let last = try db.prepare("SELECT row_id FROM messages WHERE row_id BETWEEN ? AND ? ORDER BY row_id DESC LIMIT 1")
        var next: [Int64: Int64] = [:]
        var moves: [(old: Int64, new: Int64)] = []
        moves.reserveCapacity(rows.count)
        for row in rows {
            let key: Int64
            if let known = next[row.base] {
                key = known
            } else {
                try last.bind([.int(row.base), .int(row.base + (span - 1))])
                key = try last.step() ? last.int64(0) + 1 : row.base
                last.reset()
            }
            // A full cluster: the row stays where it is.
            guard key <= row.base + (span - 1) else { continue }
            next[row.base] = key + 1
            moves.append((row.old, key))
        }
        moves.sort { $0.new < $1.new }
        let update = try db.prepare("UPDATE messages SET row_id = ? WHERE row_id = ?")
        for move in moves {
            try update.bind([.int(move.new), .int(move.old)])
            while try update.step() {}
            update.reset()
        }
    }
}
