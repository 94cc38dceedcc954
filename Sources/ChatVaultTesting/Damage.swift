import Foundation

/// Damage done to cache files as a failing disk or a careless tool would do it, for tests and the
/// CLI's scenarios. Garbage is random unless a pattern is given.
public enum Damage {
    /// Overwrites `count` bytes at `offset`, and syncs.
    public static func overwrite(_ path: String, at offset: Int, count: Int, pattern: [UInt8]? = nil) {
        let fd = open(path, O_WRONLY | O_NOFOLLOW)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        for i in bytes.indices { bytes[i] = pattern.map { $0[i % $0.count] } ?? UInt8.random(in: 0...255) }
        _ = pwrite(fd, &bytes, count, off_t(offset))
        fsync(fd)
    }

    /// Overwrites the first 64 bytes (for SQLCipher: the salt and the start of page 1).
    public static func header(_ path: String) { overwrite(path, at: 0, count: 64) }

    /// Overwrites 256 bytes inside the page in the middle of the file.
    public static func middlePage(_ path: String, pageSize: Int = 4096) {
        let pages = fileSize(path) / pageSize
        precondition(pages >= 3, "\(path) is too small to have a middle page")
        overwrite(path, at: (pages / 2) * pageSize + 512, count: 256)
    }

    /// Cuts the file to half its size.
    public static func truncateHalf(_ path: String) { truncate(path, off_t(fileSize(path) / 2)) }

    /// Replaces (or creates, 0600) a WAL with 8 KiB of random bytes.
    public static func garbageWAL(_ path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var garbage = (0..<8192).map { _ in UInt8.random(in: 0...255) }
        _ = write(fd, &garbage, garbage.count)
    }

    public static func fileSize(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : 0
    }
}
