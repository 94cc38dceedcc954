import Foundation

/// A file-system check or operation on private files failed. Carries paths and errno, never content.
package enum SecureFileError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path does not exist.
    case notFound(String)
    /// The path is a symbolic link; links are refused so nobody can redirect our writes.
    case symlink(String)
    /// The path is not of the expected kind (a directory where a file is expected, or the reverse).
    case wrongKind(String)
    /// The path belongs to another user.
    case wrongOwner(String, uid: UInt32)
    /// Group or others have access (`mode` shows the permission bits).
    case tooOpen(String, mode: UInt32)
    /// A file is larger than the caller allows.
    case tooLarge(String, bytes: Int64)
    /// A system call failed.
    case system(String, operation: String, errno: Int32)

    package var description: String {
        switch self {
        case .notFound(let p): return "\(p) does not exist"
        case .symlink(let p): return "\(p) is a symbolic link; refused"
        case .wrongKind(let p): return "\(p) is not of the expected kind"
        case .wrongOwner(let p, let uid): return "\(p) belongs to uid \(uid), not to this user; refused"
        case .tooOpen(let p, let mode): return "\(p) has mode \(String(mode, radix: 8)); group and others must have no access"
        case .tooLarge(let p, let bytes): return "\(p) is unexpectedly large (\(bytes) bytes)"
        case .system(let p, let op, let e): return "\(op) \(p) failed: \(String(cString: strerror(e))) (errno \(e))"
        }
    }

    /// The errno of a failed system call, if that is what this is.
    package var errno: Int32? {
        if case .system(_, _, let e) = self { return e }
        return nil
    }

    /// A refusal on security grounds (as opposed to an I/O failure or a missing file).
    package var isRefusal: Bool {
        switch self {
        case .symlink, .wrongKind, .wrongOwner, .tooOpen: return true
        default: return false
        }
    }
}

/// Private files and directories: 0700 directories, 0600 files, owned by us, never symlinks.
package enum SecureFiles {
    /// Checks an existing directory: a real directory (not a link), ours, no group/other access.
    package static func checkDirectory(_ path: String) throws(SecureFileError) {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            let e = Foundation.errno
            if e == ENOENT { throw .notFound(path) }
            throw .system(path, operation: "lstat", errno: e)
        }
        try checkMode(path, st, expectDirectory: true)
    }

    /// Checks an existing regular file: not a link, ours, no group/other access.
    package static func checkFile(_ path: String) throws(SecureFileError) {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            let e = Foundation.errno
            if e == ENOENT { throw .notFound(path) }
            throw .system(path, operation: "lstat", errno: e)
        }
        try checkMode(path, st, expectDirectory: false)
    }

    /// Creates the directory (and missing parents, each 0700) or checks the existing one.
    package static func ensureDirectory(_ path: String) throws(SecureFileError) {
        do {
            try checkDirectory(path)
            return
        } catch .notFound {
            // create below
        }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path, access(parent, F_OK) != 0 {
            try ensureParents(parent)
        }
        if mkdir(path, 0o700) != 0, Foundation.errno != EEXIST {
            throw .system(path, operation: "mkdir", errno: Foundation.errno)
        }
        try checkDirectory(path)
    }

    private static func ensureParents(_ path: String) throws(SecureFileError) {
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path, access(parent, F_OK) != 0 {
            try ensureParents(parent)
        }
        if mkdir(path, 0o700) != 0, Foundation.errno != EEXIST {
            throw .system(path, operation: "mkdir", errno: Foundation.errno)
        }
    }

    private static func checkMode(_ path: String, _ st: stat, expectDirectory: Bool) throws(SecureFileError) {
        let type = st.st_mode & S_IFMT
        if type == S_IFLNK { throw .symlink(path) }
        if expectDirectory ? type != S_IFDIR : type != S_IFREG { throw .wrongKind(path) }
        if st.st_uid != geteuid() { throw .wrongOwner(path, uid: st.st_uid) }
        let permissions = UInt32(st.st_mode) & 0o7777
        if permissions & 0o077 != 0 { throw .tooOpen(path, mode: permissions) }
    }

    /// Reads a whole private file (checked as `checkFile`) of at most `limit` bytes.
    /// The caller owns the returned bytes; for secrets, prefer `withContents`.
    package static func read(_ path: String, limit: Int) throws(SecureFileError) -> [UInt8] {
        try withContents(path, limit: limit) { Array($0) }
    }

    /// Reads a private file into a scratch buffer that is zeroed after `body` returns.
    package static func withContents<R>(_ path: String, limit: Int, _ body: (UnsafeRawBufferPointer) throws(SecureFileError) -> R) throws(SecureFileError) -> R {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let e = Foundation.errno
            if e == ENOENT { throw .notFound(path) }
            if e == ELOOP { throw .symlink(path) }
            throw .system(path, operation: "open", errno: e)
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .system(path, operation: "fstat", errno: Foundation.errno) }
        try checkMode(path, st, expectDirectory: false)
        if st.st_size > limit { throw .tooLarge(path, bytes: Int64(st.st_size)) }
        let size = Int(st.st_size)
        return try withScratch(count: max(size, 1)) { (buffer) throws(SecureFileError) -> R in
            var got = 0
            while got < size {
                let n = Foundation.read(fd, buffer.baseAddress! + got, size - got)
                if n < 0 {
                    if Foundation.errno == EINTR { continue }
                    throw .system(path, operation: "read", errno: Foundation.errno)
                }
                if n == 0 { break }
                got += n
            }
            return try body(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
        }
    }

    /// Writes a file atomically: a 0600 temporary file beside it, fsync, rename over, fsync the
    /// directory. After a crash the path holds either the old or the new content, never a mix.
    package static func writeAtomically(_ path: String, _ bytes: UnsafeRawBufferPointer) throws(SecureFileError) {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let temp = "\(directory)/.\(name).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .system(temp, operation: "create", errno: Foundation.errno) }
        var ok = false
        defer {
            if !ok { unlink(temp) }
        }
        let outcome = writeAll(fd, bytes, path: temp)
        close(fd)
        try outcome.get()
        guard rename(temp, path) == 0 else { throw .system(path, operation: "rename", errno: Foundation.errno) }
        ok = true
        try syncDirectory(directory)
    }

    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String) -> Result<Void, SecureFileError> {
        var written = 0
        while written < bytes.count {
            let n = write(fd, bytes.baseAddress! + written, bytes.count - written)
            if n < 0 {
                if Foundation.errno == EINTR { continue }
                return .failure(.system(path, operation: "write", errno: Foundation.errno))
            }
            written += n
        }
        guard fsync(fd) == 0 else { return .failure(.system(path, operation: "fsync", errno: Foundation.errno)) }
        return .success(())
    }

    /// Writes `data` atomically (see `writeAtomically(_:_:)`).
    package static func writeAtomically(_ path: String, data: [UInt8]) throws(SecureFileError) {
        let outcome = data.withUnsafeBytes { raw in
            Result { () throws(SecureFileError) in try writeAtomically(path, raw) }
        }
        try outcome.get()
    }

    /// fsyncs a directory so a rename or unlink inside it survives power loss.
    package static func syncDirectory(_ directory: String) throws(SecureFileError) {
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .system(directory, operation: "open", errno: Foundation.errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .system(directory, operation: "fsync", errno: Foundation.errno) }
    }
}
