import Foundation
import VaultKeys

/// Reading what can still be read of a damaged cache, so unsent messages survive a reset: the
/// outbox, the upload batches kept in `kv` (`upload-batch|…`), and the `media` rows of the
/// outgoing copies (`outgoing = 1`) whose files under `outgoing/` stay in the cache directory.
///
/// How (ARCHITECTURE.md §5, ThreatModel.md C19):
/// - It never reads the damaged files themselves: opening them would replay and checkpoint their
///   WAL into them. It copies `cache.db` and its WAL into a private scratch directory
///   `quarantine/.salvage-<random>/` (0700, files 0600), works there, and removes it.
/// - A truncated file is zero-extended (SQLite refuses a file shorter than its header's page
///   count; SQLCipher reads an all-zero page as a blank one), so the pages before the cut read.
/// - Tables are read without their indexes (`NOT INDEXED`: a damaged index page costs nothing)
///   in rowid order; an unreadable range of rows is stepped over by seeking further rowids
///   (exponentially, then bisecting back to the first readable one), a single unreadable row
///   (a damaged overflow page) is skipped on its own.
/// - The outbox is counted by whichever access path still reads whole (the table, or any of its
///   indexes), so `pendingMessagesLost` is exact whenever any of them can be counted, and
///   `offlinePendingCountUnknown` (-1) only when none can.
enum Salvage {
    static let outboxColumns = ["local_id", "seq", "conversation_id", "kind", "state", "failure_reason", "attempts",
                                "created_at", "updated_at", "payload"]
    static let kvColumns = ["key", "value"]
    static let mediaColumns = ["url_key", "message_id", "local_file", "bytes", "mime", "outgoing", "created_at", "last_access"]
    /// The `kv` rows worth carrying into a new cache: the engine's upload batches
    /// (`UploadBatchRows.keyPrefix` in ChatVault) and the media key (`media.key`: the outgoing
    /// copies kept with the outbox are encrypted under it). Everything else in `kv` (sync points)
    /// is rebuilt from the server.
    static let keptKeyPrefixes = ["upload-batch|", "media.key"]
    /// Scratch directories under `quarantine/` start with this (entries never do).
    static let scratchPrefix = ".salvage-"

    struct Result {
        /// Outbox rows read, in compose order (`seq`).
        var outbox: [[DatabaseValue]] = []
        /// How many rows the old outbox held, when any access path could count them.
        var counted: Int?
        /// Every outbox row was read without error.
        var complete = false
        /// Upload batches (`kv` rows).
        var kv: [[DatabaseValue]] = []
        /// The outgoing copies' `media` rows.
        var media: [[DatabaseValue]] = []
        /// What salvage had to do, for the open report (no content).
        var notes: [String] = []

        static let unreadable = Result()

        /// Exact when the outbox could be read or counted, else `offlinePendingCountUnknown`.
        var pendingMessagesLost: Int {
            if complete { return 0 }
            if let counted { return max(0, counted - outbox.count) }
            return offlinePendingCountUnknown
        }

        var isEmpty: Bool { outbox.isEmpty && kv.isEmpty && media.isEmpty }
    }

    /// Why salvage could not even make its working copy (a full disk, an I/O error): the reset
    /// should wait rather than lose what could have been read.
    struct CopyFailed: Error {
        let error: SecureFileError
    }

    /// Salvages the cache of `directory` (its `cache.db` and WAL, as they are now) through a
    /// private copy, read under `keying` (an encrypted copy's page size is its profile's; a
    /// plaintext one's, its header's).
    static func run(directory: CacheDirectory, keying: ConnectionKeying, options: ConnectionOptions) throws(CopyFailed) -> Result {
        let (scratch, copy): (String, String)
        do throws(SecureFileError) {
            (scratch, copy) = try privateCopy(of: directory)
        } catch {
            throw CopyFailed(error: error)
        }
        defer { Quarantine.removeEntry(scratch) }
        return readCopy(copy, keying: keying, options: options)
    }

    /// Copies `cache.db` and its WAL (when there is one) into a new private scratch directory
    /// under `quarantine/` (0700, files 0600). Answers the directory (the caller removes it with
    /// `Quarantine.removeEntry`) and the copy's path; on failure nothing is left behind.
    static func privateCopy(of directory: CacheDirectory) throws(SecureFileError) -> (scratch: String, copy: String) {
        let scratch = "\(directory.quarantine)/\(scratchPrefix)\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
        let copy = "\(scratch)/cache.db"
        do throws(SecureFileError) {
            try SecureFiles.ensureDirectory(directory.quarantine)
            try SecureFiles.ensureDirectory(scratch)
            try copyFile(directory.database, to: copy)
            var st = stat()
            if lstat(directory.wal, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size > 0 {
                try copyFile(directory.wal, to: copy + "-wal")
            }
        } catch {
            Quarantine.removeEntry(scratch)
            throw error
        }
        return (scratch, copy)
    }

    /// Removes scratch directories a crash left behind (plaintext copies are scrubbed).
    static func removeLeftovers(in directory: CacheDirectory) {
        guard (try? SecureFiles.checkDirectory(directory.quarantine)) != nil,
              let names = try? FileManager.default.contentsOfDirectory(atPath: directory.quarantine) else { return }
        for name in names where name.hasPrefix(scratchPrefix) {
            let path = "\(directory.quarantine)/\(name)"
            guard (try? SecureFiles.checkDirectory(path)) != nil else { continue }
            Quarantine.removeEntry(path)
        }
    }

    // MARK: - Reading the copy

    static func readCopy(_ copy: String, keying: ConnectionKeying, options: ConnectionOptions) -> Result {
        var result = Result()
        let pageSize: Int
        switch keying {
        case .encrypted(_, let profile): pageSize = profile.pageSize
        case .plaintext: pageSize = plaintextPageSize(copy) ?? 4096
        }
        let size = CacheDirectory.fileSize(copy)
        if size % Int64(pageSize) != 0 {
            _ = truncate(copy, off_t((size / Int64(pageSize) + 1) * Int64(pageSize)))
            result.notes.append("salvage: the database file ended inside a page (truncated); it was zero-extended")
        }
        if let damage = WALCheck.repairInPlace(path: copy + "-wal") {
            result.notes.append("salvage: \(damage.description); the copy's WAL was repaired around the damaged frame")
        }
        var readOnly = options
        readOnly.readOnly = true
        readOnly.create = false
        var queue = try? DatabaseQueue(path: copy, keying: keying, options: readOnly, label: "salvage")
        if queue == nil, let pages = headerPageCount(copy, keying: keying, pageSize: pageSize) {
            // SQLite refuses a file shorter than the page count its header records: extend the
            // copy to it (sparse, costs no space); the missing pages read as blank.
            let wanted = Int64(pages) * Int64(pageSize)
            let current = CacheDirectory.fileSize(copy)
            if wanted > current && wanted <= 64 * current + (64 << 20) {
                _ = truncate(copy, off_t(wanted))
                result.notes.append("salvage: the database file was shorter than its \(pages) pages (truncated); the missing pages read as blank")
                queue = try? DatabaseQueue(path: copy, keying: keying, options: readOnly, label: "salvage")
            }
        }
        guard let queue else {
            result.notes.append("salvage: the old cache could not be opened at all")
            return result
        }
        let connection = Connection(queue: queue, path: copy, keying: keying, options: readOnly)
        defer { connection.close() }
        var r = result
        let outbox = readTable(connection, "outbox", columns: outboxColumns)
        r.outbox = outbox.rows.sorted { seqOf($0) < seqOf($1) }
        r.complete = outbox.complete
        r.counted = outbox.complete ? outbox.rows.count : count(connection, "outbox")
        let kv = readTable(connection, "kv", columns: kvColumns) { row in
            guard case .text(let key) = row[0] else { return false }
            return keptKeyPrefixes.contains { key.hasPrefix($0) }
        }
        r.kv = kv.rows
        let media = readTable(connection, "media", columns: mediaColumns) { row in
            if case .int(1) = row[5] { return true }
            return false
        }
        r.media = media.rows
        if !outbox.complete {
            r.notes.append("salvage: \(outbox.rows.count) unsent messages read, "
                + (r.counted.map { "\($0) counted" } ?? "the outbox could not be counted")
                + (outbox.skipped > 0 ? ", \(outbox.skipped) unreadable ranges skipped" : ""))
        }
        if !kv.complete || !media.complete {
            r.notes.append("salvage: some upload batches or outgoing copies' rows could not be read")
        }
        return r
    }

    /// The copy's read-only connection, reopened after every failed read: SQLCipher 4 leaves a
    /// connection that met a page failing its HMAC unable to read anything more (every later read
    /// fails with SQLITE_NOTADB), while 3.4.1 reports the page and reads on. Reopening a copy
    /// under a raw key costs well under a millisecond.
    final class Connection {
        private var queue: DatabaseQueue?
        private let path: String
        private let keying: ConnectionKeying
        private let options: ConnectionOptions

        init(queue: DatabaseQueue, path: String, keying: ConnectionKeying, options: ConnectionOptions) {
            self.queue = queue
            self.path = path
            self.keying = keying
            self.options = options
        }

        /// Runs `body` on the connection (reopened first if the last read failed).
        func read<R: Sendable>(_ body: (Database) throws -> R) throws -> R {
            let live: DatabaseQueue
            if let queue {
                live = queue
            } else {
                live = try DatabaseQueue(path: path, keying: keying, options: options, label: "salvage")
                queue = live
            }
            do {
                return try live.sync(body)
            } catch {
                live.close()
                queue = nil
                throw error
            }
        }

        func close() {
            queue?.close()
            queue = nil
        }
    }

    /// A table's rows in rowid order without any index, stepping over what cannot be read.
    /// `keep` filters the rows (the columns as selected). Rows of a `WITHOUT ROWID` table are
    /// not supported (the cache has none).
    static func readTable(_ connection: Connection, _ table: String, columns: [String],
                          keep: ([DatabaseValue]) -> Bool = { _ in true }) -> (rows: [[DatabaseValue]], complete: Bool, skipped: Int) {
        var rows: [[DatabaseValue]] = []
        var complete = true
        var skipped = 0
        // `rowid >= from`, not `rowid > last`: a seek for `last` itself would descend into the
        // damaged page that `last` bounds.
        var from = Int64.min
        var rounds = 0
        let sql = "SELECT rowid, \(columns.joined(separator: ", ")) FROM \(table) NOT INDEXED WHERE rowid >= ? ORDER BY rowid"
        scan: while rounds < 100_000 {
            rounds += 1
            var progressed = false
            var reachedEnd = false
            do {
                try connection.read { db in
                    let stmt = try db.prepare(sql)
                    defer { stmt.reset() }
                    try stmt.bind([.int(from)])
                    while try stmt.step() {
                        let rowid = stmt.int64(0)
                        let row = (1...Int32(columns.count)).map { stmt.value($0) }
                        progressed = true
                        if keep(row) { rows.append(row) }
                        guard rowid < Int64.max else { reachedEnd = true; return }
                        from = rowid + 1
                    }
                }
                break scan
            } catch {
                if reachedEnd { break scan }
                complete = false
                switch firstRow(connection, table, atLeast: from) {
                case .row(let next):
                    if progressed { continue scan }
                    // The seek reaches the next row but reading it fails (its own overflow
                    // page): skip that one row.
                    skipped += 1
                    guard next < Int64.max else { break scan }
                    from = next + 1
                case .none:
                    break scan
                case .failed:
                    guard let next = firstReadable(connection, table, from: from) else { break scan }
                    skipped += 1
                    from = next
                }
            }
        }
        return (rows, complete, skipped)
    }

    enum Probe: Equatable {
        case row(Int64)
        case none
        case failed
    }

    /// The rowid of the first row at or after `start` (only the table's b-tree pages on the
    /// way there are read, not the row's payload).
    static func firstRow(_ connection: Connection, _ table: String, atLeast start: Int64) -> Probe {
        do {
            return try connection.read { db -> Probe in
                let stmt = try db.prepare("SELECT rowid FROM \(table) NOT INDEXED WHERE rowid >= ? ORDER BY rowid LIMIT 1")
                defer { stmt.reset() }
                try stmt.bind([.int(start)])
                return try stmt.step() ? .row(stmt.int64(0)) : .none
            }
        } catch {
            return .failed
        }
    }

    /// After an unreadable range that starts at `from`, the smallest rowid from which a seek
    /// reads again: doubling steps find one, bisection walks back to the first.
    static func firstReadable(_ connection: Connection, _ table: String, from: Int64) -> Int64? {
        var bad = from
        var step: Int64 = 1
        var good: Int64?
        while good == nil {
            let (candidate, overflow) = bad.addingReportingOverflow(step)
            guard !overflow else { return nil }
            switch firstRow(connection, table, atLeast: candidate) {
            case .failed:
                bad = candidate
                step = step > Int64.max / 2 ? Int64.max : step * 2
            case .none, .row:
                // The seek reads again (rows may follow, or none): an overshoot past the last
                // row still bisects back to the rows just after the damage.
                good = candidate
            }
        }
        guard var hi = good else { return nil }
        var lo = bad
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2
            if firstRow(connection, table, atLeast: mid) == .failed { lo = mid } else { hi = mid }
        }
        return hi
    }

    /// `count(*)` by the table itself, then by each of its indexes: any path that reads whole
    /// gives the exact number of rows.
    static func count(_ connection: Connection, _ table: String) -> Int? {
        var paths = ["\(table) NOT INDEXED"]
        if let names = try? connection.read({ db in try db.texts("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = '\(table)' ORDER BY name") }) {
            paths += names.filter { $0.utf8.allSatisfy { $0 == 0x5f || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7a) } }
                .map { "\(table) INDEXED BY \($0)" }
        }
        for path in paths {
            if let n = (try? connection.read({ db in try db.scalarInt("SELECT count(*) FROM \(path)") })) ?? nil { return Int(clamping: n) }
        }
        return nil
    }

    private static func seqOf(_ row: [DatabaseValue]) -> Int64 {
        if case .int(let seq) = row[1] { return seq }
        return Int64.max
    }

    // MARK: - Restoring

    /// Inserts salvaged rows into a fresh cache. Outgoing copies' `media` rows come back only
    /// for the sends and upload batches that did (the others' files are orphans the engine
    /// removes).
    static func restore(_ result: Result, into db: Database) throws {
        try db.transaction {
            let outboxSQL = "INSERT OR IGNORE INTO outbox (\(outboxColumns.joined(separator: ", "))) VALUES (\(placeholders(outboxColumns.count)))"
            var owners = Set<String>()
            for row in result.outbox where row.count == outboxColumns.count {
                let stmt = try db.cached(outboxSQL)
                try stmt.bind(row)
                defer { stmt.reset() }
                _ = try stmt.step()
                if case .text(let id) = row[0] { owners.insert(id) }
            }
            let kvSQL = "INSERT OR IGNORE INTO kv (key, value) VALUES (?, ?)"
            for row in result.kv where row.count == 2 {
                let stmt = try db.cached(kvSQL)
                try stmt.bind(row)
                defer { stmt.reset() }
                _ = try stmt.step()
            }
            let mediaSQL = "INSERT OR IGNORE INTO media (\(mediaColumns.joined(separator: ", "))) VALUES (\(placeholders(mediaColumns.count)))"
            for row in result.media where row.count == mediaColumns.count {
                guard case .text(let owner) = row[1], owners.contains(owner) || (owner.hasPrefix("upload-") && !result.kv.isEmpty) else { continue }
                let stmt = try db.cached(mediaSQL)
                try stmt.bind(row)
                defer { stmt.reset() }
                _ = try stmt.step()
            }
        }
    }

    /// Merges salvaged rows into a cache that has rows of its own (a restore): unsent messages
    /// whose local id it lacks are appended after its own outbox (renumbered: `seq` is unique),
    /// with their outgoing copies' rows; upload batches it lacks are added. Its own media key is
    /// kept. Running it twice adds nothing the second time. Returns the messages added.
    static func merge(_ result: Result, into db: Database) throws -> Int {
        var added = 0
        try db.transaction {
            var next = (try db.scalarInt("SELECT coalesce(max(seq), 0) FROM outbox") ?? 0) + 1
            let exists = "SELECT 1 FROM outbox WHERE local_id = ?"
            let insert = "INSERT INTO outbox (\(outboxColumns.joined(separator: ", "))) VALUES (\(placeholders(outboxColumns.count)))"
            var owners = Set<String>()
            for row in result.outbox where row.count == outboxColumns.count {
                guard case .text(let id) = row[0] else { continue }
                let probe = try db.cached(exists)
                try probe.bind([.text(id)])
                let present = try probe.step()
                probe.reset()
                if present { continue }
                var renumbered = row
                renumbered[1] = .int(next)
                next += 1
                let stmt = try db.cached(insert)
                try stmt.bind(renumbered)
                defer { stmt.reset() }
                _ = try stmt.step()
                owners.insert(id)
                added += 1
            }
            for row in result.kv where row.count == 2 {
                if case .text(let key) = row[0], key == "media.key" { continue }
                let stmt = try db.cached("INSERT OR IGNORE INTO kv (key, value) VALUES (?, ?)")
                try stmt.bind(row)
                defer { stmt.reset() }
                _ = try stmt.step()
            }
            let mediaSQL = "INSERT OR IGNORE INTO media (\(mediaColumns.joined(separator: ", "))) VALUES (\(placeholders(mediaColumns.count)))"
            for row in result.media where row.count == mediaColumns.count {
                guard case .text(let owner) = row[1], owners.contains(owner) else { continue }
                let stmt = try db.cached(mediaSQL)
                try stmt.bind(row)
                defer { stmt.reset() }
                _ = try stmt.step()
            }
        }
        return added
    }

    private static func placeholders(_ n: Int) -> String {
        Array(repeating: "?", count: n).joined(separator: ", ")
    }

    // MARK: - Files

    /// Copies a file into a new 0600 file (symlinks refused), and syncs it.
    static func copyFile(_ source: String, to target: String) throws(SecureFileError) {
        let input = open(source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else { throw .system(source, operation: "open", errno: errno) }
        defer { close(input) }
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw .system(target, operation: "create", errno: errno) }
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(input, $0.baseAddress, $0.count) }
            if got < 0 {
                if errno == EINTR { continue }
                throw .system(source, operation: "read", errno: errno)
            }
            if got == 0 { break }
            var written = 0
            while written < got {
                let w = buffer.withUnsafeBytes { Glibc.write(output, $0.baseAddress! + written, got - written) }
                if w < 0 {
                    if errno == EINTR { continue }
                    throw .system(target, operation: "write", errno: errno)
                }
                written += w
            }
        }
    }

    /// The page count page 1's header records (offset 28), when that header is intact and the
    /// count valid (its change counter matches the version-valid-for number).
    static func headerPageCount(_ path: String, keying: ConnectionKeying, pageSize: Int) -> Int? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let header: [UInt8]
        switch keying {
        case .plaintext:
            var bytes = [UInt8](repeating: 0, count: 100)
            guard pread(fd, &bytes, 100, 0) == 100, Array(bytes[0..<16]) == CipherProof.plaintextHeader else { return nil }
            header = bytes
        case .encrypted(let key, let profile):
            // Page 1 keeps the salt in its first 16 bytes; the header fields follow, encrypted.
            guard let bytes = PageCipher.withDecryptedPage(fd, number: 1, pageSize: pageSize, reserve: PageCipher.reserve(useHMAC: profile.useHMAC),
                                                            key: key, { Array(CipherProof.plaintextHeader) + Array($0.prefix(84)) }) else { return nil }
            header = bytes
        }
        func be32(_ at: Int) -> Int { Int(header[at]) << 24 | Int(header[at + 1]) << 16 | Int(header[at + 2]) << 8 | Int(header[at + 3]) }
        let recordedSize = Int(header[16]) << 8 | Int(header[17])
        guard (recordedSize == 1 ? 65536 : recordedSize) == pageSize, be32(24) == be32(92), be32(28) > 0 else { return nil }
        return be32(28)
    }


    /// The page size a plaintext header records (bytes 16–17, big-endian; 1 means 65536).
    static func plaintextPageSize(_ path: String) -> Int? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 2)
        guard pread(fd, &bytes, 2, 16) == 2 else { return nil }
        let value = Int(bytes[0]) << 8 | Int(bytes[1])
        let size = value == 1 ? 65536 : value
        return (512...65536).contains(size) && size & (size - 1) == 0 ? size : nil
    }
}
