import Foundation
import VaultKeys
import VaultStore

/// A read of a cache's database that changes nothing (`status`, `audit`): a read-only connection
/// with the key the audit already looked up. Not attempted when a process that did not close the
/// cache left a write-ahead log behind and none holds it now: the last connection to close would
/// fold the log into the database, and that would be a change (the next open does it anyway).
enum ReadOnlyCache {
    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    static func read<R: Sendable>(directory: CacheDirectory, manifest: Manifest?, header: CipherProof.Header, key: CacheKey?, inUse: Bool,
                        what: String, _ body: (Database) throws -> R) -> Result<R, Refused> {
        func refused(_ why: String) -> Result<R, Refused> { .failure(Refused(description: why)) }
        guard let manifest else { return refused("no valid manifest") }
        var wal = stat()
        if !inUse, lstat(directory.database + "-wal", &wal) == 0, wal.st_size > 0 {
            return refused("a process that did not close the cache left a write-ahead log; reading now would fold it in, "
                           + "so \(what) is read after the next open")
        }
        let keying: ConnectionKeying
        switch header {
        case .missing, .empty: return refused("no database")
        case .unreadable: return refused("the database cannot be read")
        case .plaintext:
            guard !manifest.encrypted else { return refused("the database disagrees with its manifest") }
            keying = .plaintext
        case .opaque:
            guard let key else { return refused("the cache's key is not at hand") }
            keying = .encrypted(key, manifest.cipherProfile ?? .standard())
        }
        var options = ConnectionOptions()
        options.readOnly = true
        options.busyTimeoutMs = 500
        options.pageCacheKiB = 256
        do {
            let queue = try DatabaseQueue(path: directory.database, keying: keying, options: options, label: "status.read")
            defer { queue.close() }
            return .success(try queue.sync { db in try body(db) })
        } catch let error as DatabaseError {
            return refused("\(what) could not be read (SQLite \(error.extendedCode))")
        } catch {
            return refused("\(what) could not be read")
        }
    }
}
