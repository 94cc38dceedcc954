import Foundation

/// Reading what can still be read of a damaged cache's outbox, so unsent messages survive a reset.
enum Salvage {
    static let columns = "local_id, seq, conversation_id, kind, state, failure_reason, attempts, created_at, updated_at, payload"

    struct Result {
        /// Rows read, in compose order.
        var rows: [[DatabaseValue]]
        /// `count(*)` of the outbox, when it could be read.
        var counted: Int?
        /// Every row was read without error.
        var complete: Bool

        static let unreadable = Result(rows: [], counted: nil, complete: false)

        /// Exact when the outbox could be read or counted, else `offlinePendingCountUnknown`.
        var pendingMessagesLost: Int {
            if complete { return 0 }
            if let counted { return max(0, counted - rows.count) }
            return offlinePendingCountUnknown
        }
    }

    /// Reads the outbox of the database at `databasePath` row by row; stops at the first error.
    static func outbox(databasePath: String, keying: ConnectionKeying, options: ConnectionOptions) -> Result {
        var readOnly = options
        readOnly.readOnly = true
        readOnly.create = false
        guard let queue = try? DatabaseQueue(path: databasePath, keying: keying, options: readOnly, label: "salvage") else {
            return .unreadable
        }
        defer { queue.close() }
        return (try? queue.sync { db -> Result in
            var result = Result(rows: [], counted: nil, complete: false)
            result.counted = (try? db.scalarInt("SELECT count(*) FROM outbox")).flatMap { $0.map(Int.init) }
            do {
                let stmt = try db.prepare("SELECT \(columns) FROM outbox ORDER BY seq")
                while try stmt.step() {
                    result.rows.append((0..<stmt.columnCount).map { stmt.value($0) })
                }
                result.complete = true
            } catch {
                result.complete = false
            }
            return result
        }) ?? .unreadable
    }

    /// Inserts salvaged rows into a fresh cache's outbox.
    static func restore(_ rows: [[DatabaseValue]], into db: Database) throws {
        try db.transaction {
            let placeholders = Array(repeating: "?", count: 10).joined(separator: ", ")
            for row in rows where row.count == 10 {
                try db.run("INSERT OR IGNORE INTO outbox (\(columns)) VALUES (\(placeholders))", row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9])
            }
        }
    }
}
