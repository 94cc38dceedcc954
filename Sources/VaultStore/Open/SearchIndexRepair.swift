import Foundation
import VaultKeys

/// A cache whose damage is confined to its search index is repaired, never reset (issue 24): the
/// index is derived from the messages, so dropping it and building it again loses nothing.
///
/// When `quick_check` fails, the open procedure closes its connection and asks `repair` before it
/// resets. The live files are not touched until a repaired file is proven:
/// 1. `cache.db` and its WAL are copied into a private scratch directory (`quarantine/.salvage-…`,
///    0700, like salvage). On the copy, the index's b-trees are taken out of the schema
///    (`writable_schema`: their pages become unreferenced and are never read again), and
///    `quick_check` runs again: if all it reports is pages nothing references ("Page N is never
///    used"), every damaged page was the index's.
/// 2. The copy is exported (`sqlcipher_export`, the same key and cipher profile) into a new file
///    beside it, which holds every table but the index, then gets an empty index; it must pass
///    `quick_check`.
/// 3. The new file takes the old one's place (the old WAL, checkpointed empty by the caller, is
///    removed first, so it is never replayed into the new file; the rename is the instant the
///    cache changes). The engine builds the index again in the background after ready.
/// Anything else (damage elsewhere, an error on the way) answers `false` with the live files as
/// they were: the usual reset follows. A kill before the rename leaves the scratch directory (removed
/// by the next salvage or repair) and the damaged cache, which the next open repairs again.
package enum SearchIndexRepair {
    /// The schema rows of the index: the FTS4 table and its own tables.
    static let names = [SearchIndexSchema.table] + SearchIndexSchema.shadowTables

    /// How a repair went; `notRepaired` says why in words for the open report (no content).
    enum Outcome: Equatable {
        case repaired
        case notRepaired(String)
    }

    static func repair(directory: CacheDirectory, keying: ConnectionKeying, options: ConnectionOptions, engine: CipherEngine) -> Outcome {
        let (scratch, copy): (String, String)
        do throws(SecureFileError) {
            (scratch, copy) = try Salvage.privateCopy(of: directory)
        } catch {
            return .notRepaired("no private copy could be made")
        }
        let rebuilt = "\(scratch)/rebuilt.db"
        defer { Quarantine.removeEntry(scratch) }
        var writable = options
        writable.create = false
        writable.readOnly = false
        var step = "opening the copy"
        do {
            let queue = try DatabaseQueue(path: copy, keying: keying, options: writable, label: "index-repair")
            step = "taking the index out of the copy's schema"
            _ = try queue.sync { db in try removeIndexFromSchema(db) }
            queue.close()
            step = "reopening the copy"
            let trial = try DatabaseQueue(path: copy, keying: keying, options: writable, label: "index-repair")
            step = "checking the copy"
            defer { trial.close() }
            let unexplained = try trial.sync { db -> Int in
                let problems = try findingsOutsideTheIndex(db, engine: engine)
                guard problems == 0 else { return problems }
                step = "exporting the copy"
                _ = try EncryptionMigration.export(db, to: rebuilt, keying: keying, engine: engine)
                return 0
            }
            guard unexplained == 0 else {
                return .notRepaired("the damage is not confined to the search index (\(unexplained) other findings)")
            }
            step = "checking the rewritten file"
            let fresh = try DatabaseQueue(path: rebuilt, keying: keying, options: writable, label: "index-repair")
            let intact = try fresh.sync { db -> Bool in
                try db.transaction {
                    try db.execute(SearchIndexSchema.createTable)
                    try db.run("DELETE FROM kv WHERE key = ?", .text(SearchIndexSchema.buildStateKey))
                }
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                return try IntegrityCheck.run(db)
            }
            fresh.close()
            guard intact else { return .notRepaired("the rewritten file did not pass its check") }
        } catch let error as DatabaseError {
            // SQLite's message names tables or pages at most, never content.
            return .notRepaired("\(step) failed (SQLite \(error.extendedCode): \(error.message))")
        } catch {
            return .notRepaired("\(step) failed")
        }
        CacheDirectory.remove(rebuilt + "-wal")
        CacheDirectory.remove(rebuilt + "-shm")
        CacheDirectory.remove(directory.wal)
        CacheDirectory.remove(directory.shm)
        guard rename(rebuilt, directory.database) == 0 else { return .notRepaired("the rewritten file could not take the old one's place") }
        try? SecureFiles.syncDirectory(directory.path)
        return .repaired
    }

    /// How many findings of the integrity check lie outside the index, on a copy whose schema no
    /// longer names it.
    /// - SQLite 3.15 (Debian's SQLCipher 3.4.1) checks the whole file: the index's pages are now
    ///   unreferenced ("never used"), and any other finding counts.
    /// - Newer SQLite (SQLCipher 4.x) stops the whole-file check at the first page whose HMAC
    ///   fails, unreferenced or not, so each remaining table is checked on its own
    ///   (`quick_check(table)`: the table, its indexes; from SQLite 3.33): a table that fails its
    ///   check, or cannot be checked, counts.
    static func findingsOutsideTheIndex(_ db: Database, engine: CipherEngine) throws -> Int {
        guard (engine.majorVersion ?? 3) >= 4 else {
            return try IntegrityCheck.problems(db).filter { !isUnreferencedPage($0) }.count
        }
        var findings = 0
        // The schema's own pages were all read when the copy was opened (its schema parsed).
        let tables = try db.texts("SELECT name FROM sqlite_master WHERE type = 'table' AND rootpage > 0")
        for table in tables {
            let escaped = table.replacingOccurrences(of: "'", with: "''")
            do {
                let lines = try db.texts("PRAGMA quick_check('\(escaped)')").flatMap { $0.split(separator: "\n").map(String.init) }
                findings += lines.filter { $0 != "ok" && !IntegrityCheck.isSearchIndexConsistencyCheck($0) }.count
            } catch {
                findings += 1
            }
        }
        return findings
    }

    /// "Page N is never used" (SQLite 3.15), "Page N: never used" (newer SQLite, SQLCipher 4.x), and
    /// the header line SQLite may put before them.
    package static func isUnreferencedPage(_ line: String) -> Bool {
        let text = line.trimmingCharacters(in: .whitespacesAndNewlines)
        if text == "*** in database main ***" { return true }
        guard text.hasPrefix("Page ") else { return false }
        let number: Substring
        if text.hasSuffix(" is never used") {
            number = text.dropFirst(5).dropLast(14)
        } else if text.hasSuffix(": never used") {
            number = text.dropFirst(5).dropLast(12)
        } else {
            return false
        }
        return !number.isEmpty && number.allSatisfy(\.isNumber)
    }

    /// Deletes the index's rows from `sqlite_master` (its pages stay in the file, unreferenced)
    /// and bumps the schema cookie so every connection reloads the schema. Answers whether the
    /// index was there.
    @discardableResult
    static func removeIndexFromSchema(_ db: Database) throws -> Bool {
        let placeholders = names.map { _ in "?" }.joined(separator: ", ")
        let count = try db.prepare("SELECT count(*) FROM sqlite_master WHERE name IN (\(placeholders)) OR tbl_name IN (\(placeholders))")
        try count.bind((names + names).map { .text($0) })
        let present = try count.step() ? count.int64(0) : 0
        guard present > 0 else { return false }
        let cookie = try db.scalarInt("PRAGMA schema_version") ?? 0
        try db.execute("PRAGMA writable_schema = ON")
        defer { try? db.execute("PRAGMA writable_schema = OFF") }
        try db.transaction {
            // Their automatic indexes too (`sqlite_autoindex_search_index_segdir_1`): newer SQLite
            // refuses a schema with an index whose table is gone.
            let stmt = try db.prepare("DELETE FROM sqlite_master WHERE name IN (\(placeholders)) OR tbl_name IN (\(placeholders))")
            try stmt.bind((names + names).map { .text($0) })
            while try stmt.step() {}
            try db.execute("PRAGMA schema_version = \(cookie + 1)")
        }
        return true
    }
}
