import Foundation

/// POSIX helpers for media files: whole writes and reads across EINTR and short counts, fsync,
/// private directories, temporary names. Errors carry the operation and errno, never content.
enum MediaFileIO {
    static func writeAll(_ fd: Int32, _ bytes: [UInt8], operation: String) throws(MediaFileError) {
        let failure = bytes.withUnsafeBytes { writeAll(fd, $0) }
        if failure != 0 { throw .io(operation: operation, errno: failure) }
    }

    static func writeAll(_ fd: Int32, _ bytes: Data, operation: String) throws(MediaFileError) {
        let failure = bytes.withUnsafeBytes { writeAll(fd, $0) }
        if failure != 0 { throw .io(operation: operation, errno: failure) }
    }

    /// Writes every byte; 0, or the errno of the write that failed.
    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard var next = bytes.baseAddress else { return 0 }
        var left = bytes.count
        while left > 0 {
            let n = Foundation.write(fd, next, left)
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            if n == 0 { return EIO }
            next += n
            left -= n
        }
        return 0
    }

    /// Reads up to `count` bytes (fewer only at end of file).
    static func read(_ fd: Int32, count: Int, operation: String) throws(MediaFileError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return Foundation.read(fd, base + got, count - got)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io(operation: operation, errno: errno)
            }
            if n == 0 { break }
            got += n
        }
        if got < count { buffer.removeLast(count - got) }
        return buffer
    }

    static func fsync(_ fd: Int32, operation: String) throws(MediaFileError) {
        while Foundation.fsync(fd) != 0 {
            if errno == EINTR { continue }
            throw .io(operation: operation, errno: errno)
        }
    }

    static func fsyncDirectory(_ path: String) throws(MediaFileError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .io(operation: "open directory for fsync", errno: errno) }
        defer { close(fd) }
        try fsync(fd, operation: "fsync directory")
    }

    /// A name for a temporary file that no committed media file has: `.cvm-<16 hex>.tmp`.
    static func temporaryName() -> String {
        ".cvm-\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
    }

    /// Creates a private temporary file (0600, never following a link) in `directory`.
    static func createTemporary(in directory: String) throws(MediaFileError) -> (fd: Int32, path: String) {
        for _ in 0..<8 {
            let path = "\(directory)/\(temporaryName())"
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 {
                // The umask can only take bits away; make it exactly 0600.
                _ = fchmod(fd, 0o600)
                return (fd, path)
            }
            if errno != EEXIST { throw .io(operation: "create temporary file", errno: errno) }
        }
        throw .io(operation: "create temporary file", errno: EEXIST)
    }

    /// Whether `name` is one plain file name (no separators, not "." or "..", not empty, no NUL).
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains("/") && !name.utf8.contains(0)
            && name.utf8.count <= 255
    }

    /// The directory exists as a directory of ours (not a link), or is created 0700 with any
    /// missing parents (each 0700).
    static func ensureDirectory(_ path: String) throws(MediaFileError) {
        var st = stat()
        if lstat(path, &st) == 0 {
            try checkOwnDirectory(st)
            return
        }
        guard errno == ENOENT else { throw .io(operation: "lstat directory", errno: errno) }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path { try ensureDirectory(parent) }
        if mkdir(path, 0o700) != 0 {
            guard errno == EEXIST else { throw .io(operation: "mkdir", errno: errno) }
        } else {
            _ = chmod(path, 0o700)
        }
        guard lstat(path, &st) == 0 else { throw .io(operation: "lstat directory", errno: errno) }
        try checkOwnDirectory(st)
    }

    private static func checkOwnDirectory(_ st: stat) throws(MediaFileError) {
        let type = st.st_mode & S_IFMT
        if type == S_IFLNK { throw .io(operation: "directory is a symbolic link; refused", errno: ELOOP) }
        if type != S_IFDIR { throw .io(operation: "not a directory", errno: ENOTDIR) }
        if st.st_uid != geteuid() { throw .io(operation: "directory belongs to another user; refused", errno: EPERM) }
    }

    /// Opens a media file for reading: a regular file, never through a symbolic link. Opened
    /// non-blocking, so a FIFO planted under the name is refused instead of hanging the open.
    static func openForReading(_ path: String) throws(MediaFileError) -> (fd: Int32, size: Int64) {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw .io(operation: "open media file", errno: errno) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = errno
            close(fd)
            throw .io(operation: "fstat media file", errno: e)
        }
        guard st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw .io(operation: "media file is not a regular file", errno: EINVAL)
        }
        return (fd, Int64(st.st_size))
    }
}
