import Foundation

/// Telling a damaged WAL from a crash's torn tail, before SQLite recovers it.
///
/// SQLite's recovery keeps the frames up to the last commit frame before the first frame whose
/// salt or cumulative checksum is wrong, and silently drops everything after it
/// (https://www.sqlite.org/fileformat2.html#walformat). That is right for a crash in the middle
/// of writing the last transaction, and wrong when a flipped byte in an old frame hides later,
/// acknowledged commits: they vanish with the open reporting `ready`. The WAL header and frame
/// headers are not encrypted by SQLCipher, so this reads them without the key.
///
/// The decision (ThreatModel C19). After the first bad frame (or a bad WAL header), count the
/// commit frames that carry the current salts and whose own checksum verifies when chained from
/// the stored checksum of the frame before them (the bad frame itself counts by its commit flag):
/// - none or one: normal. Frames of an older WAL generation (other salts) are a stale tail; with
///   `synchronous = FULL` every transaction but the one being written when the crash came was
///   made durable before the next began, so a single commit after the break may be that
///   in-flight, never acknowledged transaction (its sectors written out of order). It is not
///   reported. Damage to the last committed transaction alone looks the same and is not
///   detected: the price of never reporting a normal crash.
/// - two or more: damage. A second commit can only follow a first one that completed, so the
///   frames SQLite would drop include acknowledged transactions. The cache is reset as
///   `.corrupted` (the damaged WAL is kept in its quarantine entry) after salvage has read a
///   copy whose WAL is repaired: the bad frame dropped, the later current-salt frames kept up to
///   their last commit, checksums recomputed.
enum WALCheck {
    struct Damage: CustomStringConvertible {
        /// The first bad frame (0-based), or -1 for a bad WAL header.
        let brokenAt: Int
        /// Verified commit frames after the break that SQLite would drop.
        let commitsDropped: Int

        var description: String {
            "the WAL is damaged " + (brokenAt < 0 ? "in its header" : "at frame \(brokenAt + 1)")
                + ": \(commitsDropped) committed transactions after it would be dropped silently"
        }
    }

    static let headerSize = 32
    static let frameHeaderSize = 24
    static let sizeLimit = 256 << 20

    /// Inspects the WAL at `path`; nil when it is absent, unreadable now, or not damaged.
    static func inspect(path: String) -> Damage? {
        guard let bytes = read(path) else { return nil }
        return analyse(bytes)?.damage
    }

    /// Rewrites a damaged WAL (a salvage copy) so SQLite recovers the frames after the break.
    /// Returns the damage found, nil when there was nothing to repair.
    @discardableResult
    static func repairInPlace(path: String) -> Damage? {
        guard let bytes = read(path), let analysis = analyse(bytes), let damage = analysis.damage else { return nil }
        let repaired = rebuild(bytes, analysis)
        let fd = open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var written = 0
        while written < repaired.count {
            let n = repaired.withUnsafeBytes { write(fd, $0.baseAddress! + written, repaired.count - written) }
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                return nil
            }
            written += n
        }
        fsync(fd)
        return damage
    }

    // MARK: - Parsing

    struct Analysis {
        var pageSize: Int
        var bigEndian: Bool
        var salt: [UInt8]
        var header: [UInt8]
        var headerValid: Bool
        /// Frames SQLite accepts (the valid prefix, through its last commit or not).
        var prefix: Int
        /// Frames after the break to keep in a repair (current salts), through their last commit.
        var kept: [Int]
        var damage: Damage?
    }

    static func analyse(_ b: [UInt8]) -> Analysis? {
        guard b.count >= headerSize else { return nil }
        let magic = be32(b, 0)
        let plausibleMagic = magic == 0x377f_0682 || magic == 0x377f_0683
        let bigEndian = magic & 1 == 1
        var pageSize = Int(be32(b, 8))
        if pageSize == 1 { pageSize = 65536 }
        let sizeValid = (512...65536).contains(pageSize) && pageSize & (pageSize - 1) == 0
        let headerChecksum = checksum(b, 0, 24, seed: (0, 0), bigEndian: bigEndian)
        let headerValid = plausibleMagic && be32(b, 4) == 3_007_000 && sizeValid
            && headerChecksum == (be32(b, 24), be32(b, 28))
        // A header that cannot be trusted still names the page size a cache of ours uses.
        let frameSize = frameHeaderSize + (sizeValid ? pageSize : 4096)
        let usedPageSize = frameSize - frameHeaderSize
        let frames = (b.count - headerSize) / frameSize
        guard frames > 0 else { return nil }
        func at(_ i: Int) -> Int { headerSize + i * frameSize }
        func salt(_ i: Int) -> ArraySlice<UInt8> { b[(at(i) + 8)..<(at(i) + 16)] }
        func stored(_ i: Int) -> (UInt32, UInt32) { (be32(b, at(i) + 16), be32(b, at(i) + 20)) }
        func verifies(_ i: Int, seed: (UInt32, UInt32)) -> Bool {
            let s = checksum(b, at(i), 8, seed: seed, bigEndian: bigEndian)
            return checksum(b, at(i) + frameHeaderSize, usedPageSize, seed: s, bigEndian: bigEndian) == stored(i)
        }
        let currentSalt = headerValid ? Array(b[16..<24]) : Array(salt(0))
        var prefix = 0
        if headerValid {
            var seed = headerChecksum
            while prefix < frames, Array(salt(prefix)) == currentSalt, be32(b, at(prefix)) != 0, verifies(prefix, seed: seed) {
                seed = stored(prefix)
                prefix += 1
            }
            if prefix == frames { return Analysis(pageSize: usedPageSize, bigEndian: bigEndian, salt: currentSalt, header: Array(b[0..<headerSize]),
                                                  headerValid: true, prefix: prefix, kept: [], damage: nil) }
        }
        // After the break: current-salt frames, the verified commits among them.
        var candidates: [Int] = []
        var commits = 0
        var lastCommit: Int?
        for j in prefix..<frames where Array(salt(j)) == currentSalt && be32(b, at(j)) != 0 {
            let isCommit = be32(b, at(j) + 4) != 0
            let chained = j > prefix && verifies(j, seed: stored(j - 1))
            if j == prefix {
                if isCommit { commits += 1 }
                continue // the bad frame itself is never replayed
            }
            candidates.append(j)
            if chained && isCommit {
                commits += 1
                lastCommit = j
            }
        }
        let kept = lastCommit.map { last in candidates.filter { $0 <= last } } ?? []
        let damage = commits >= 2 ? Damage(brokenAt: headerValid ? prefix : -1, commitsDropped: commits) : nil
        return Analysis(pageSize: usedPageSize, bigEndian: bigEndian, salt: currentSalt, header: Array(b[0..<headerSize]),
                        headerValid: headerValid, prefix: prefix, kept: kept, damage: damage)
    }

    /// The WAL SQLite will recover in full: the header (rebuilt when bad), the valid prefix and the
    /// kept frames, checksums chained anew.
    static func rebuild(_ b: [UInt8], _ a: Analysis) -> [UInt8] {
        var header = a.header
        if !a.headerValid {
            header = [UInt8](repeating: 0, count: headerSize)
            put32(&header, 0, a.bigEndian ? 0x377f_0683 : 0x377f_0682)
            put32(&header, 4, 3_007_000)
            put32(&header, 8, UInt32(a.pageSize == 65536 ? 1 : a.pageSize))
            header.replaceSubrange(16..<24, with: a.salt)
        }
        var seed = checksum(header, 0, 24, seed: (0, 0), bigEndian: a.bigEndian)
        put32(&header, 24, seed.0)
        put32(&header, 28, seed.1)
        var out = header
        let frameSize = frameHeaderSize + a.pageSize
        for i in Array(0..<(a.headerValid ? a.prefix : 0)) + a.kept {
            var frame = Array(b[(headerSize + i * frameSize)..<(headerSize + (i + 1) * frameSize)])
            seed = checksum(frame, 0, 8, seed: seed, bigEndian: a.bigEndian)
            seed = checksum(frame, frameHeaderSize, a.pageSize, seed: seed, bigEndian: a.bigEndian)
            put32(&frame, 16, seed.0)
            put32(&frame, 20, seed.1)
            out += frame
        }
        return out
    }

    /// SQLite's WAL checksum (`walChecksumBytes`) over `count` bytes from `offset`.
    static func checksum(_ b: [UInt8], _ offset: Int, _ count: Int, seed: (UInt32, UInt32), bigEndian: Bool) -> (UInt32, UInt32) {
        var (s1, s2) = seed
        var i = offset
        let end = offset + count
        b.withUnsafeBufferPointer { p in
            while i + 8 <= end {
                let x0 = bigEndian ? be32(p, i) : le32(p, i)
                let x1 = bigEndian ? be32(p, i + 4) : le32(p, i + 4)
                s1 = s1 &+ x0 &+ s2
                s2 = s2 &+ x1 &+ s1
                i += 8
            }
        }
        return (s1, s2)
    }

    private static func be32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }

    private static func be32(_ p: UnsafeBufferPointer<UInt8>, _ i: Int) -> UInt32 {
        UInt32(p[i]) << 24 | UInt32(p[i + 1]) << 16 | UInt32(p[i + 2]) << 8 | UInt32(p[i + 3])
    }

    private static func le32(_ p: UnsafeBufferPointer<UInt8>, _ i: Int) -> UInt32 {
        UInt32(p[i + 3]) << 24 | UInt32(p[i + 2]) << 16 | UInt32(p[i + 1]) << 8 | UInt32(p[i])
    }

    private static func put32(_ b: inout [UInt8], _ i: Int, _ v: UInt32) {
        b[i] = UInt8(v >> 24)
        b[i + 1] = UInt8((v >> 16) & 0xff)
        b[i + 2] = UInt8((v >> 8) & 0xff)
        b[i + 3] = UInt8(v & 0xff)
    }

    private static func read(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size >= headerSize, st.st_size <= sizeLimit else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var got = 0
        while got < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, $0.count - got, off_t(got)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            got += n
        }
        return bytes
    }
}
