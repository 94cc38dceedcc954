import Foundation
public import VaultKeys
import Synchronization

/// An open cache: a writer and a reader connection (WAL), each on its own serial queue, and the
/// directory lock that keeps other processes out until `close()`.
public final class VaultCache: Sendable {
    public let directory: CacheDirectory
    /// The manifest as of the open.
    public let manifest: Manifest
    /// The store holding the key (nil for a plaintext cache).
    public let keyStoreName: String?
    /// The cipher description once proven by a keyed open and the file header, else nil.
    public let provenCipher: String?
    /// True when the database was too large to check during open: call `verifyIntegrity()`.
    public var needsBackgroundIntegrityCheck: Bool { checker.withLock { $0 != nil } }
    public let writer: DatabaseQueue
    public let reader: DatabaseQueue
    /// A connection of its own for the background check, so a long `quick_check` delays neither
    /// reads nor writes; closed once the check has run.
    private let checker: Mutex<DatabaseQueue?>
    private let lock: DirectoryLock
    private let closed = Mutex(false)

    init(directory: CacheDirectory, manifest: Manifest, keyStoreName: String?, provenCipher: String?,
         checker: DatabaseQueue?, writer: DatabaseQueue, reader: DatabaseQueue, lock: DirectoryLock) {
        self.directory = directory
        self.manifest = manifest
        self.keyStoreName = keyStoreName
        self.provenCipher = provenCipher
        self.checker = Mutex(checker)
        self.writer = writer
        self.reader = reader
        self.lock = lock
    }

    public var cacheId: String { manifest.cacheId }
    public var isEncrypted: Bool { manifest.encrypted && provenCipher != nil }
    public var keyStorage: KeyStorageTier { manifest.encrypted ? manifest.keyStorage : .none }
    public var isClosed: Bool { closed.withLock { $0 } }

    /// Checkpoints the WAL into the database, closes both connections and releases the lock.
    /// The files stay (logout keeps the cache).
    public func close() {
        let wasClosed = closed.withLock { state in
            defer { state = true }
            return state
        }
        guard !wasClosed else { return }
        let retired = checker.withLock { c -> DatabaseQueue? in
            defer { c = nil }
            return c
        }
        retired?.close()
        reader.close()
        _ = try? writer.sync { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        writer.close()
        lock.release()
    }

    deinit { close() }

    /// What a background integrity check found.
    public enum Integrity: Sendable, Equatable {
        case intact
        /// `quick_check` reported damage (or SQLCipher refused a page): grounds for a reset.
        case damaged
        /// The check could not run (out of memory, an I/O error, closed meanwhile): says nothing.
        case unknown
    }

    /// Runs `PRAGMA quick_check` on the background connection when there is one (closing it
    /// afterwards), else on the reader.
    public func verifyIntegrity() async -> Integrity {
        let connection = checker.withLock { $0 } ?? reader
        let result: Integrity
        do {
            result = try await connection.run { db in try IntegrityCheck.run(db) } ? .intact : .damaged
        } catch let error as DatabaseError where error.failureClass == .damaged {
            result = .damaged
        } catch {
            result = .unknown
        }
        if connection !== reader {
            let retired = checker.withLock { c -> DatabaseQueue? in
                defer { c = nil }
                return c
            }
            retired?.close()
        }
        return result
    }

    /// Bytes on disk: database, WAL and media directories.
    public func bytesOnDisk() -> Int64 { directory.bytesOnDisk() }
}

enum IntegrityCheck {
    /// `quick_check` reads every page (SQLCipher verifies each page's HMAC as it decrypts it) and
    /// checks the b-tree structure; "ok" is the only passing answer.
    ///
    /// SQLCipher 3.4.1 answers a page whose HMAC fails with rows ("… unable to get the page …"), so
    /// `false`. SQLCipher 4.x fails the statement instead, with a code that depends on the release
    /// (1, 7, 11 or 26; 4.18 returns a few rows, then SQLITE_ERROR "SQL logic error"), which alone
    /// would be `unclassified` (or even `resources`). So when the check fails with an error on 4.x,
    /// ask the engine which pages fail their HMAC (`authenticationFailures`): any such page means
    /// damage (`false`); none means the error says nothing about the file, and it is rethrown for
    /// the usual classification.
    ///
    /// Only ever run on a connection whose key is proven right: the manifest's key-check matched
    /// and page 1 decrypted (the probe), so a later page failing its HMAC is a damaged page, not a
    /// wrong key.
    static func run(_ db: Database, engine: CipherEngine = .current) throws -> Bool {
        do {
            let lines = try db.texts("PRAGMA quick_check")
            return lines == ["ok"]
        } catch {
            if (engine.majorVersion ?? 0) >= 4, !authenticationFailures(db).isEmpty { return false }
            throw error
        }
    }

    /// The pages of the main database whose HMAC does not verify under the connection's key, from
    /// SQLCipher 4's `PRAGMA cipher_integrity_check` (which reads the file itself, page by page, so
    /// it still answers after a page error). Empty when every page verifies, and also when the
    /// engine cannot tell (3.4.1 ignores the pragma; an unkeyed connection; the check failing):
    /// empty never proves the file intact, it only withholds the `damaged` verdict.
    static func authenticationFailures(_ db: Database) -> [String] {
        guard let lines = try? db.texts("PRAGMA cipher_integrity_check") else { return [] }
        return lines.filter { $0.hasPrefix("HMAC verification failed for page") }
    }
}
