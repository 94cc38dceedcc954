import Foundation
import Synchronization
package import VaultKeys

/// The files of one cache directory (one app, one user), ARCHITECTURE.md §4.
package struct CacheDirectory: Sendable, Equatable {
    package let path: String

    package init(path: String) {
        self.path = path
    }

    /// The directory for a user under an app's root: the user id is never in clear in a path.
    package init(root: String, account: String) {
        path = "\(root)/\(account)"
    }

    /// The directory's name: the opaque per-user account (see `account(applicationId:userId:)`).
    package var account: String { (path as NSString).lastPathComponent }

    package var database: String { "\(path)/cache.db" }
    package var wal: String { "\(path)/cache.db-wal" }
    package var shm: String { "\(path)/cache.db-shm" }
    package var manifest: String { "\(path)/\(ManifestFile.name)" }
    package var lockFile: String { "\(path)/lock" }
    /// The cache key wrapped for the user's recovery secret (`RecoveryFile`), when one was made.
    package var recovery: String { "\(path)/\(RecoveryFile.name)" }
    package var quarantine: String { "\(path)/quarantine" }
    /// Where an encryption migration writes the new database before it replaces the old one.
    package var migrationTarget: String { "\(path)/cache.db.next" }
    package var media: String { "\(path)/media" }
    package var outgoing: String { "\(path)/outgoing" }

    /// The database and its WAL-mode companions.
    package var databaseFiles: [String] { [database, wal, shm] }

    package var exists: Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    package var hasDatabase: Bool {
        var st = stat()
        return lstat(database, &st) == 0 && st.st_size > 0
    }

    /// The opaque per-user name: the first 32 hex digits of SHA-256 over the app id and user id.
    package static func account(applicationId: String, userId: String) -> String {
        String(sha256Hex("chatvault-account|\(applicationId)|\(userId)").prefix(32))
    }

    /// Bytes used by the database files and media directories.
    package func bytesOnDisk() -> Int64 {
        var total: Int64 = 0
        for file in databaseFiles {
            var st = stat()
            if lstat(file, &st) == 0 { total += Int64(st.st_size) }
        }
        for dir in [media, outgoing] {
            total += CacheDirectory.treeSize(dir)
        }
        return total
    }

    static func treeSize(_ dir: String) -> Int64 {
        guard let walker = FileManager.default.enumerator(atPath: dir) else { return 0 }
        var total: Int64 = 0
        while let relative = walker.nextObject() as? String {
            var st = stat()
            if lstat("\(dir)/\(relative)", &st) == 0, st.st_mode & S_IFMT == S_IFREG { total += Int64(st.st_size) }
        }
        return total
    }

    /// The size of the file at `path` (0 when there is none; a symlink is not followed).
    static func fileSize(_ path: String) -> Int64 {
        var st = stat()
        return lstat(path, &st) == 0 ? Int64(st.st_size) : 0
    }

    /// Removes a file; a missing file is fine.
    static func remove(_ file: String) {
        unlink(file)
    }

    /// Overwrites a file's bytes with zeros through an open descriptor, then unlinks it: used for
    /// plaintext copies, so their content does not linger in the file's blocks.
    static func scrubAndRemove(_ file: String) {
        let fd = open(file, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd >= 0 {
            scrub(fd)
            close(fd)
        }
        unlink(file)
    }

    /// Zeros the whole file behind `fd` and syncs it.
    static func scrub(_ fd: Int32) {
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_size > 0 else { return }
        let chunk = [UInt8](repeating: 0, count: 1 << 16)
        var offset: off_t = 0
        while offset < st.st_size {
            let n = chunk.withUnsafeBytes { pwrite(fd, $0.baseAddress, min(chunk.count, Int(st.st_size - offset)), offset) }
            if n <= 0 { break }
            offset += off_t(n)
        }
        fsync(fd)
    }
}

/// The advisory lock that keeps one process (and one `VaultStore` instance) per cache.
///
/// `flock` locks belong to an open file description, so a second open in the same process is
/// refused too. The lock file holds the owner's pid for the error message.
package final class DirectoryLock: Sendable {
    private let fd: Mutex<Int32>
    package let path: String

    package enum Failure: Error, Sendable, Equatable {
        /// Another process (or another instance in this one) holds the cache.
        case held(byPid: Int32?)
        case system(SecureFileError)
    }

    package static func acquire(_ path: String) -> Result<DirectoryLock, Failure> {
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let e = errno
            // A directory (or another kind of file) where the lock file belongs is refused like a
            // symlink: a typed `unsafeFiles` for a person to fix, never a reset.
            return .failure(.system(e == ELOOP ? .symlink(path) : e == EISDIR ? .wrongKind(path) : .system(path, operation: "open", errno: e)))
        }
        var st = stat()
        if fstat(fd, &st) == 0, st.st_mode & S_IFMT != S_IFREG {
            close(fd)
            return .failure(.system(.wrongKind(path)))
        }
        if fstat(fd, &st) != 0 || st.st_uid != geteuid() || UInt32(st.st_mode) & 0o077 != 0 {
            close(fd)
            return .failure(.system(.tooOpen(path, mode: UInt32(st.st_mode) & 0o7777)))
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let e = errno
            var buffer = [UInt8](repeating: 0, count: 32)
            let n = pread(fd, &buffer, 31, 0)
            close(fd)
            if e == EWOULDBLOCK {
                let pid = n > 0 ? Int32(String(decoding: buffer[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) : nil
                return .failure(.held(byPid: pid))
            }
            return .failure(.system(.system(path, operation: "flock", errno: e)))
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return .success(DirectoryLock(fd: fd, path: path))
    }

    private init(fd: Int32, path: String) {
        self.fd = Mutex(fd)
        self.path = path
    }

    /// Releases the lock (idempotent).
    package func release() {
        fd.withLock { fd in
            guard fd >= 0 else { return }
            _ = ftruncate(fd, 0)
            flock(fd, LOCK_UN)
            close(fd)
            fd = -1
        }
    }

    deinit { release() }
}
