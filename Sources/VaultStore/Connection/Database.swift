import Foundation
internal import CSQLCipher
import VaultKeys
import Synchronization

/// The C handle of one SQLite connection.
package typealias SQLiteConnection = OpaquePointer

/// Where the test seam may inject a failure (STYLE.md: "tests divert the wrappers to inject
/// SQLITE_BUSY, SQLITE_FULL, …" without touching the disk).
package enum FaultPoint: Sendable, Equatable {
    /// `sqlite3_open_v2`.
    case open
    /// The first read after keying (the probe that proves the key and the format).
    case probe
    /// Any statement step.
    case step
}

/// A test hook consulted at each `FaultPoint`; a non-nil result code replaces the real call's.
package typealias FaultInjector = @Sendable (FaultPoint, String) -> Int32?

/// A flag another thread raises to stop a long statement (`Database.interruptible`).
final class StopFlag: Sendable {
    private let raised = Atomic(false)

    func raise() { raised.store(true, ordering: .releasing) }

    var isRaised: Bool { raised.load(ordering: .acquiring) }
}

/// One SQLCipher connection. Not `Sendable`: it lives on one serial executor (`DatabaseQueue`).
///
/// Set-up happens in one ordered place (`DatabaseQueue.open`): key, cipher profile, prove the
/// cipher, then pragmas.
package final class Database {
    package let path: String
    let handle: SQLiteConnection
    private var statementCache: [String: Statement] = [:]
    package var faults: FaultInjector?
    /// The rows recorded for `beforeCommit` (`recordWrittenRows(of:)`), or nil.
    var writeLog: WriteLog?

    init(path: String, flags: Int32, faults: FaultInjector?) throws(DatabaseError) {
        self.path = path
        self.faults = faults
        OpenSSLLifetime.ensure()
        var db: SQLiteConnection?
        var rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, nil)
        if rc == SQLITE_OK, let injected = faults?(.open, path) { rc = injected }
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            let code = db.map { sqlite3_extended_errcode($0) } ?? rc
            let systemErrno = db.map { sqlite3_system_errno($0) } ?? 0
            sqlite3_close_v2(db)
            throw DatabaseError(extendedCode: code == SQLITE_OK ? rc : code, message: message, operation: "open", systemErrno: systemErrno)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
    }

    deinit {
        statementCache.removeAll()
        sqlite3_close_v2(handle)
    }

    func error(_ rc: Int32, _ operation: String) -> DatabaseError {
        DatabaseError(extendedCode: sqlite3_extended_errcode(handle) == SQLITE_OK ? rc : sqlite3_extended_errcode(handle),
                      message: String(cString: sqlite3_errmsg(handle)), operation: operation,
                      systemErrno: sqlite3_system_errno(handle))
    }

    /// Keys the connection with SQLCipher's raw-key form `x'<hex>'` (no KDF). The literal lives in a
    /// scratch buffer zeroed right after the call.
    func key(_ key: CacheKey) throws(DatabaseError) {
        let rc = key.withRawKeyLiteral { literal in
            sqlite3_key(handle, literal.baseAddress, Int32(literal.count))
        }
        guard rc == SQLITE_OK else { throw error(rc, "key") }
    }

    /// Runs `body` with a progress handler that stops the running statement (`SQLITE_INTERRUPT`)
    /// as soon as `stop` is raised, from any thread. Unlike `sqlite3_interrupt`, raising the flag
    /// never touches the connection, so it is safe while the connection closes. The handler runs
    /// every 1,000 virtual-machine instructions (microseconds apart), so a raised flag ends even a
    /// full `quick_check` of a large cache at once.
    func interruptible<R>(by stop: StopFlag, _ body: () throws -> R) rethrows -> R {
        let context = Unmanaged.passUnretained(stop).toOpaque()
        sqlite3_progress_handler(handle, 1_000, { context in
            guard let context else { return 0 }
            return Unmanaged<StopFlag>.fromOpaque(context).takeUnretainedValue().isRaised ? 1 : 0
        }, context)
        defer { sqlite3_progress_handler(handle, 0, nil, nil) }
        return try withExtendedLifetime(stop) { try body() }
    }

    /// Runs one or more statements without results. Never pass values in the SQL text: bind them.
    package func execute(_ sql: String) throws(DatabaseError) {
        if let injected = faults?(.step, sql) { throw DatabaseError(extendedCode: injected, message: "injected fault", operation: "exec") }
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, "exec") }
        settleAutocommitWrites()
    }

    /// Runs exactly one statement (no results). Anything after the first statement is refused, so
    /// text that reached a pragma from a file (a cipher profile) can never smuggle in a second one.
    func executeSingle(_ sql: String) throws(DatabaseError) {
        var stmt: OpaquePointer?
        let (rc, trailing) = sql.withCString { text -> (Int32, Bool) in
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v2(handle, text, -1, &stmt, &tail)
            var p = tail
            while let c = p?.pointee, c != 0 {
                if c != 0x20 && c != 0x0a && c != 0x09 && c != 0x0d && c != 0x3b { return (rc, true) }
                p = p?.successor()
            }
            return (rc, false)
        }
        defer { sqlite3_finalize(stmt) }
        guard rc == SQLITE_OK else { throw error(rc, "prepare") }
        guard !trailing else {
            throw DatabaseError(extendedCode: SQLITE_MISUSE, message: "more than one statement", operation: "prepare")
        }
        guard let stmt else { return }
        var step = sqlite3_step(stmt)
        while step == SQLITE_ROW { step = sqlite3_step(stmt) }
        guard step == SQLITE_DONE else { throw error(step, "step") }
    }

    /// A fresh prepared statement.
    package func prepare(_ sql: String) throws(DatabaseError) -> Statement {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else {
            sqlite3_finalize(stmt)
            throw error(rc, "prepare")
        }
        return Statement(database: self, handle: stmt, sql: sql)
    }

    /// A prepared statement kept for reuse on this connection (hot paths), reset and unbound.
    package func cached(_ sql: String) throws(DatabaseError) -> Statement {
        if let stmt = statementCache[sql] {
            stmt.resetAndClear()
            return stmt
        }
        let stmt = try prepare(sql)
        statementCache[sql] = stmt
        return stmt
    }

    /// The first column of the first row as text, or nil (no row, or NULL).
    package func scalarText(_ sql: String, _ values: DatabaseValue...) throws(DatabaseError) -> String? {
        let stmt = try prepare(sql)
        try stmt.bind(values)
        return try stmt.step() ? stmt.text(0) : nil
    }

    /// The first column of the first row as an integer, or nil.
    package func scalarInt(_ sql: String, _ values: DatabaseValue...) throws(DatabaseError) -> Int64? {
        let stmt = try prepare(sql)
        try stmt.bind(values)
        guard try stmt.step(), !stmt.isNull(0) else { return nil }
        return stmt.int64(0)
    }

    /// Runs a statement with bound values, ignoring any rows.
    package func run(_ sql: String, _ values: DatabaseValue...) throws(DatabaseError) {
        let stmt = try cached(sql)
        try stmt.bind(values)
        while try stmt.step() {}
    }

    /// Every first-column text of a query.
    package func texts(_ sql: String) throws(DatabaseError) -> [String] {
        let stmt = try prepare(sql)
        var out: [String] = []
        while try stmt.step() { out.append(stmt.text(0) ?? "") }
        return out
    }

    /// Work run inside every outermost transaction of `transaction` and `savepoint` just before it
    /// commits, as part of it (the search index's rows deferred to the end of the transaction). A
    /// throw rolls the whole transaction back. Rows recorded (`recordWrittenRows(of:)`) by a
    /// statement outside any transaction, or by a transaction committed some other way, get a
    /// transaction of their own right after it, where this runs (`settleAutocommitWrites`).
    package var beforeCommit: ((Database) throws -> Void)?

    /// Whether a transaction is open on this connection (`sqlite3_get_autocommit` is off).
    package var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Runs `body` in a transaction (`BEGIN IMMEDIATE` so writers queue instead of failing later).
    package func transaction<R>(_ body: () throws -> R) throws -> R {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try beforeCommit?(self)
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Runs `body` under a savepoint: on its own it is a transaction; inside one, a throw rolls
    /// back only what `body` did. `name` must be a plain identifier.
    package func savepoint<R>(_ name: String, _ body: () throws -> R) throws -> R {
        let outermost = !inTransaction
        try execute("SAVEPOINT \(name)")
        do {
            let result = try body()
            if outermost { try beforeCommit?(self) }
            try execute("RELEASE \(name)")
            return result
        } catch {
            try? execute("ROLLBACK TO \(name)")
            try? execute("RELEASE \(name)")
            throw error
        }
    }

    /// Frees every page this connection holds in SQLite's page cache (`sqlite3_db_release_memory`),
    /// so the next read decrypts what it touches again: benchmarks use it to time a cold page.
    /// The operating system's file cache is not affected.
    package func dropPageCache() {
        sqlite3_db_release_memory(handle)
    }

    /// Pages this connection has had to read (and, encrypted, decrypt) because they were not in
    /// its page cache, since it opened (`SQLITE_DBSTATUS_CACHE_MISS`).
    package var pageCacheMisses: Int {
        var current: Int32 = 0, highwater: Int32 = 0
        sqlite3_db_status(handle, SQLITE_DBSTATUS_CACHE_MISS, &current, &highwater, 0)
        return Int(current)
    }

    package var changes: Int { Int(sqlite3_changes(handle)) }
    package var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }
}

/// A value to bind.
package enum DatabaseValue: Sendable, Equatable {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])
}

/// A prepared statement. Columns are read by index (hot paths decode by index, not by name).
package final class Statement {
    unowned let database: Database
    let handle: OpaquePointer
    package let sql: String

    init(database: Database, handle: OpaquePointer, sql: String) {
        self.database = database
        self.handle = handle
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    func resetAndClear() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Ends the statement's current run (releasing its read snapshot) and clears its bindings.
    /// Call it when you stop stepping before the last row.
    package func reset() {
        resetAndClear()
    }

    package func bind(_ values: [DatabaseValue]) throws(DatabaseError) {
        for (i, value) in values.enumerated() { try bind(value, at: Int32(i + 1)) }
    }

    package func bind(_ value: DatabaseValue, at index: Int32) throws(DatabaseError) {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(handle, index)
        case .int(let v): rc = sqlite3_bind_int64(handle, index, v)
        case .double(let v): rc = sqlite3_bind_double(handle, index, v)
        case .text(let v): rc = sqlite3_bind_text(handle, index, v, -1, chatvault_sqlite_transient())
        case .blob(let v):
            rc = v.withUnsafeBytes { raw in
                sqlite3_bind_blob(handle, index, raw.baseAddress, Int32(raw.count), chatvault_sqlite_transient())
            }
        }
        guard rc == SQLITE_OK else { throw database.error(rc, "bind") }
    }

    /// Binds bytes without copying them (`SQLITE_STATIC`): the caller keeps them alive, unchanged,
    /// until the statement is reset — used for key literals, which live in zeroed scratch buffers.
    func bindNoCopy(_ bytes: UnsafeRawBufferPointer, at index: Int32) throws(DatabaseError) {
        let rc = sqlite3_bind_blob(handle, index, bytes.baseAddress, Int32(bytes.count), nil)
        guard rc == SQLITE_OK else { throw database.error(rc, "bind") }
    }

    /// Advances; true while a row is available.
    package func step() throws(DatabaseError) -> Bool {
        if let injected = database.faults?(.step, sql) {
            sqlite3_reset(handle)
            throw DatabaseError(extendedCode: injected, message: "injected fault", operation: "step")
        }
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE:
            sqlite3_reset(handle)
            database.settleAutocommitWrites()
            return false
        default:
            let err = database.error(rc, "step")
            sqlite3_reset(handle)
            throw err
        }
    }

    package func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    package func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    package func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(handle, column)) }
    package func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }

    package func text(_ column: Int32) -> String? {
        guard let c = sqlite3_column_text(handle, column) else { return nil }
        return String(cString: c)
    }

    package func blob(_ column: Int32) -> [UInt8]? {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard let base = sqlite3_column_blob(handle, column) else { return sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : [] }
        return Array(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// The column's value, whatever its type (used to copy rows between databases).
    package func value(_ column: Int32) -> DatabaseValue {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: return .int(int64(column))
        case SQLITE_FLOAT: return .double(double(column))
        case SQLITE_TEXT: return .text(text(column) ?? "")
        case SQLITE_BLOB: return .blob(blob(column) ?? [])
        default: return .null
        }
    }

    package var columnCount: Int32 { sqlite3_column_count(handle) }

    package func columnName(_ column: Int32) -> String {
        sqlite3_column_name(handle, column).map { String(cString: $0) } ?? ""
    }
}
