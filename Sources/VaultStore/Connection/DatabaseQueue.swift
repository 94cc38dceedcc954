import Foundation
import Synchronization
internal import CSQLCipher
package import VaultKeys

/// How a connection is keyed.
package enum ConnectionKeying: Sendable {
    /// A plaintext database.
    case plaintext
    /// An SQLCipher database under a raw key with this profile.
    case encrypted(CacheKey, CipherProfile)
}

/// Connection settings applied after keying.
package struct ConnectionOptions: Sendable {
    /// `PRAGMA busy_timeout` in milliseconds.
    package var busyTimeoutMs: Int = 2000
    /// Page cache per connection, in KiB (`PRAGMA cache_size = -N`): sized so warm reads find their
    /// pages already decrypted.
    package var pageCacheKiB: Int = 16 * 1024
    /// Never write (`PRAGMA query_only`): the reader connection and salvage probes. The file is
    /// still opened read-write, because a WAL database without its `-shm` cannot be opened
    /// read-only on SQLite 3.15.
    package var readOnly = false
    /// Create the file if missing.
    package var create = false
    /// Test seam.
    package var faults: FaultInjector?

    package init() {}
}

/// One connection and the serial queue it lives on. Every use of the connection goes through
/// `sync` or `run`, on that queue; the connection itself never leaves it.
package final class DatabaseQueue: @unchecked Sendable {
    private let queue: DispatchQueue
    private let queueKey = DispatchSpecificKey<UInt8>()
    // Touched only on `queue` (or during init, before the queue is shared).
    private var database: Database?
    /// The open connection's handle (as its address), for `interrupt()` from any thread; 0 once
    /// closed. Cleared (under its lock) before the connection closes, so an interrupt never
    /// reaches a closed one.
    private let interruptible: Mutex<Int>
    package let path: String

    /// Opens and sets up a connection in the one ordered place: open, key, pin the cipher profile,
    /// probe (the first read proves key and format), then pragmas.
    package init(path: String, keying: ConnectionKeying, options: ConnectionOptions, label: String) throws(DatabaseError) {
        self.path = path
        queue = DispatchQueue(label: "chatvault.db.\(label)")
        queue.setSpecific(key: queueKey, value: 1)
        if options.create && !options.readOnly {
            // SQLite creates files with 0644 (under the usual umask) and gives the WAL and shm
            // files the database file's mode: creating it 0600 first makes all three private.
            try DatabaseQueue.createPrivateFile(path)
        }
        let flags = SQLITE_OPEN_READWRITE | (options.create && !options.readOnly ? SQLITE_OPEN_CREATE : 0)
        let db = try Database(path: path, flags: flags, faults: options.faults)
        // Reachable by `interrupt()` only once the init has returned (nobody has the queue before).
        interruptible = Mutex(Int(bitPattern: db.handle))
        if case .encrypted(let key, let profile) = keying {
            try db.key(key)
            for pragma in profile.pragmas(engine: .current) { try db.executeSingle(pragma) }
        }
        try db.execute("PRAGMA busy_timeout = \(options.busyTimeoutMs)")
        // The probe: the first read of page 1. A wrong key or a damaged header fails here with
        // SQLITE_NOTADB (sqlite3_key itself never reports a wrong key).
        if let injected = options.faults?(.probe, path) {
            throw DatabaseError(extendedCode: injected, message: "injected fault", operation: "probe")
        }
        _ = try db.scalarInt("SELECT count(*) FROM sqlite_master")
        // Temp tables and sort spills stay in memory, never on disk in clear.
        try db.execute("PRAGMA temp_store = MEMORY")
        try db.execute("PRAGMA cache_size = -\(options.pageCacheKiB)")
        if options.readOnly {
            try db.execute("PRAGMA query_only = ON")
        } else {
            let mode = try db.scalarText("PRAGMA journal_mode = WAL")
            guard mode?.lowercased() == "wal" else {
                throw DatabaseError(extendedCode: SQLITE_ERROR, message: "could not enter WAL mode (\(mode ?? "nil"))", operation: "journal_mode")
            }
            // A send is acknowledged only after a durable commit (ARCHITECTURE.md §6).
            try db.execute("PRAGMA synchronous = FULL")
        }
        database = db
    }

    /// Makes the statement running on this connection (if any) stop soon with `SQLITE_INTERRUPT`
    /// (`sqlite3_interrupt`, which `PRAGMA quick_check` honours between pages). Any thread; a
    /// no-op once closed.
    package func interrupt() {
        interruptible.withLock { handle in
            if let connection = SQLiteConnection(bitPattern: handle) { sqlite3_interrupt(connection) }
        }
    }

    /// Creates `path` as an empty 0600 file unless it exists (symlinks refused).
    static func createPrivateFile(_ path: String) throws(DatabaseError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw DatabaseError(extendedCode: SQLITE_CANTOPEN, message: "cannot create the database file (errno \(errno))", operation: "create")
        }
        Foundation.close(fd)
    }

    /// Runs `body` on the connection's queue and waits. The result must be `Sendable`, so neither
    /// the connection nor one of its statements can leave the queue.
    package func sync<R: Sendable>(_ body: (Database) throws -> R) throws -> R {
        if DispatchQueue.getSpecific(key: queueKey) != nil {
            return try body(try live())
        }
        return try queue.sync { try body(try live()) }
    }

    /// Runs `body` on the connection's queue without blocking the caller.
    package func run<R: Sendable>(_ body: @escaping @Sendable (Database) throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try body(try self.live()) })
            }
        }
    }

    private func live() throws(DatabaseError) -> Database {
        guard let database else {
            throw DatabaseError(extendedCode: SQLITE_MISUSE, message: "the connection is closed", operation: "use")
        }
        return database
    }

    /// Closes the connection like `close()`, interrupting whatever runs on it meanwhile (every
    /// millisecond until the queue reaches the close), so a long statement stops rather than
    /// being waited for, where the engine honours `sqlite3_interrupt` (SQLite 3.15's
    /// `quick_check` does not, once under way: the close then waits for it).
    package func closeInterrupting() {
        guard DispatchQueue.getSpecific(key: queueKey) == nil else { return close() }
        let closed = DispatchSemaphore(value: 0)
        queue.async {
            self.interruptible.withLock { $0 = 0 }
            self.database = nil
            closed.signal()
        }
        while closed.wait(timeout: .now() + .milliseconds(1)) == .timedOut { interrupt() }
    }

    /// Closes the connection (idempotent). Later calls fail with SQLITE_MISUSE.
    package func close() {
        if DispatchQueue.getSpecific(key: queueKey) != nil {
            interruptible.withLock { $0 = 0 }
            database = nil
        } else {
            queue.sync {
                interruptible.withLock { $0 = 0 }
                database = nil
            }
        }
    }
}
