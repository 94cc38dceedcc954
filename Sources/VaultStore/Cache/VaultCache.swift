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
    static func run(_ db: Database) throws -> Bool {
        let lines = try db.texts("PRAGMA quick_check")
        return lines == ["ok"]
    }
}
