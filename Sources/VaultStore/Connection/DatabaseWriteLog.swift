import Foundation
internal import CSQLCipher

/// The row ids a connection wrote into one table, recorded by SQLite's update hook for the work
/// `Database.beforeCommit` does with them (the search index: `SearchIndex.flushPending`).
///
/// Why a hook and not a trigger: in an explicit transaction, a table with any `INSERT` trigger
/// gives every `INSERT` a statement journal (the trigger might fail half-way), and SQLCipher
/// encrypts each page it copies there. Measured with the sqlcipher shell on a table shaped like
/// `messages` (six b-trees), 20,000 single-row inserts in one transaction: 0.50 s without a
/// trigger, 1.75 s with one whose `WHEN` is always false (60 µs a row); unencrypted, 0.33 → 0.47 s.
/// The hook records a row id in memory and costs the statement nothing more.
final class WriteLog {
    /// The table, NUL-terminated, compared with what the hook reports.
    let table: [CChar]
    /// Inserted or updated rows of `main.<table>`, in the order written; may repeat, and may name
    /// rows a savepoint rolled back since (whoever takes them looks them up).
    var rows: [Int64] = []

    init(table: String) {
        self.table = Array(table.utf8CString)
    }
}

extension Database {
    /// Records the row id of every row inserted into (or updated in) `main.<table>` on this
    /// connection, until `nil` stops it; the rows wait for `takeWrittenRows()`. A rolled-back
    /// transaction forgets its rows. Deletions are not recorded (a `BEFORE DELETE` trigger sees
    /// the row while it still exists).
    package func recordWrittenRows(of table: String?) {
        guard let table else {
            sqlite3_update_hook(handle, nil, nil)
            sqlite3_rollback_hook(handle, nil, nil)
            writeLog = nil
            return
        }
        let log = WriteLog(table: table)
        writeLog = log
        // The log lives as long as the connection holds it; the hooks are removed or replaced
        // with it, and the connection closes before the `Database` (and its log) goes.
        let context = Unmanaged.passUnretained(log).toOpaque()
        sqlite3_update_hook(handle, { context, operation, database, table, rowid in
            guard operation != SQLITE_DELETE, let context, let database, let table,
                  strcmp(database, "main") == 0 else { return }
            let log = Unmanaged<WriteLog>.fromOpaque(context).takeUnretainedValue()
            guard log.table.withUnsafeBufferPointer({ $0.baseAddress.map { strcmp($0, table) } ?? 1 }) == 0 else { return }
            log.rows.append(rowid)
        }, context)
        sqlite3_rollback_hook(handle, { context in
            guard let context else { return }
            Unmanaged<WriteLog>.fromOpaque(context).takeUnretainedValue().rows.removeAll(keepingCapacity: true)
        }, context)
    }

    /// The rows recorded since the last call (sorted, each once), forgotten here.
    package func takeWrittenRows() -> [Int64] {
        guard let log = writeLog, !log.rows.isEmpty else { return [] }
        var rows = log.rows
        log.rows.removeAll(keepingCapacity: true)
        rows.sort()
        var unique: [Int64] = []
        unique.reserveCapacity(rows.count)
        for row in rows where unique.last != row { unique.append(row) }
        return unique
    }

    /// Rows recorded outside a transaction (a statement on its own, or a `COMMIT` not run by
    /// `transaction`): `beforeCommit` gets them at once, in a transaction of its own. Not atomic
    /// with the write it follows, and it reports no error (the write it follows has committed):
    /// should `BEGIN` fail (busy), the rows wait for the next transaction; should the work fail,
    /// or the process die in between, the rows are for whoever keeps what derives from them to
    /// notice (the search index's once-per-session check).
    func settleAutocommitWrites() {
        guard let log = writeLog, !log.rows.isEmpty, beforeCommit != nil, !inTransaction else { return }
        _ = try? transaction {}
    }
}
