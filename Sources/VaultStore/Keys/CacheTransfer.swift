import Foundation
public import VaultKeys

/// An exported cache: what `export` wrote, and the one-time secret that opens it.
public struct CacheExportReport: Sendable {
    /// Print `secret.formatted` once: the export file is useless without it.
    public let secret: RecoverySecret
    public let cacheId: String
    public let bytes: Int64
    public let files: Int
}

/// Moving a cache to another machine as one file: the database exactly as it is on disk (still
/// encrypted under the cache key), the received media files (encrypted under the media key inside
/// the database), the recovery file if any, and the cache key wrapped by a one-time secret
/// (PBKDF2-HMAC-SHA512 then AES-256-GCM, as `WrappedCacheKey`). Unsent messages travel in the
/// database's outbox.
///
/// File layout: the 17 bytes `CHATVAULT-EXPORT\n`, a 4-byte big-endian header length, the header
/// (JSON: format, cache id, key id, key check, cipher profile, the wrapped key, the file list with
/// sizes), then the files' bytes in list order. Nothing in it is readable without the secret but
/// sizes and ids.
///
/// An import lands in a new quarantine entry and is then restored like any entry
/// (`KeyManager.restoreEntry`): the current cache's unsent messages are merged in and the rest of
/// it is set aside, and a stop at any instant is finished or abandoned by the next open.
package enum CacheTransfer {
    static let magic = Array("CHATVAULT-EXPORT\n".utf8)
    static let format = "chatvault-export-1"
    static let headerLimit = 1 << 20
    static let fileCountLimit = 1_000_000

    struct Header: Codable {
        var format: String
        var cacheId: String
        var keyId: String
        var keyCheck: String
        var cipherProfile: CipherProfile?
        var createdAt: String
        var wrappedKey: WrappedCacheKey
        var files: [Entry]
    }

    struct Entry: Codable {
        var name: String
        var size: Int64
    }

    /// Writes the cache of `configuration` to `path` (created 0600; never over an existing file).
    package static func export(_ configuration: StoreConfiguration, to path: String) throws(KeyManagementError) -> CacheExportReport {
        let held = try KeyManager.openForChange(configuration)
        defer { held.lock.release() }
        let dir = held.config.directory
        let manifest = held.manifest
        let secret: RecoverySecret
        let wrapped: WrappedCacheKey
        do throws(RecoverySecretError) {
            secret = try RecoverySecret.generate()
            wrapped = try WrappedCacheKey.wrap(held.key, keyId: manifest.keyId ?? "", secret: secret)
        } catch {
            throw .unavailable(.resources)
        }
        var files = [Entry(name: "cache.db", size: CacheDirectory.fileSize(dir.database))]
        if CacheDirectory.fileSize(dir.recovery) > 0 { files.append(Entry(name: RecoveryFile.name, size: CacheDirectory.fileSize(dir.recovery))) }
        if let walker = FileManager.default.enumerator(atPath: dir.media) {
            while let relative = walker.nextObject() as? String {
                var st = stat()
                guard lstat("\(dir.media)/\(relative)", &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
                files.append(Entry(name: "media/\(relative)", size: Int64(st.st_size)))
            }
        }
        let header = Header(format: format, cacheId: manifest.cacheId, keyId: manifest.keyId ?? "", keyCheck: manifest.keyCheck ?? "",
                            cipherProfile: manifest.cipherProfile, createdAt: manifest.createdAt, wrappedKey: wrapped, files: files)
        let headerBytes = Array((try? JSONEncoder().encode(header)) ?? Data())
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .fileUnusable("cannot create \(path) (it must not exist yet): \(String(cString: strerror(errno)))") }
        var total: Int64 = 0
        do throws(SecureFileError) {
            defer { close(fd) }
            var length = UInt32(headerBytes.count).bigEndian
            try writeAll(fd, magic, path)
            try withUnsafeBytes(of: &length) { raw throws(SecureFileError) in try writeAll(fd, Array(raw), path) }
            try writeAll(fd, headerBytes, path)
            for file in files {
                total += try copy(from: "\(dir.path)/\(file.name)", size: file.size, into: fd, path)
            }
            guard fsync(fd) == 0 else { throw .system(path, operation: "fsync", errno: errno) }
        } catch {
            unlink(path)
            throw .unavailable(DatabaseVerdict.reason(error))
        }
        return CacheExportReport(secret: secret, cacheId: manifest.cacheId, bytes: total + Int64(headerBytes.count + magic.count + 4),
                                 files: files.count)
    }

    /// Imports an exported cache and makes it the current cache of `configuration`.
    package static func importCache(_ configuration: StoreConfiguration, from path: String,
                                   secret: RecoverySecret) throws(KeyManagementError) -> CacheRestoreReport {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw .fileUnusable("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let header = try readHeader(fd)
        let key: CacheKey
        do {
            key = try header.wrappedKey.unwrap(with: secret)
        } catch .wrongSecret {
            throw .wrongSecret
        } catch {
            throw .fileUnusable("its wrapped key is damaged")
        }
        guard key.checkValue(cacheId: header.cacheId) == header.keyCheck else { throw .fileUnusable("its key does not match its cache") }

        let held = try KeyManager.openForChange(configuration, creatingIfMissing: true)
        defer { held.lock.release() }
        let dir = held.config.directory
        let quarantine = Quarantine(directory: dir, policy: held.config.quarantine, now: held.config.now)
        let name = "\(Quarantine.stamp(held.config.now()))-imported-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        let entryPath = "\(dir.quarantine)/\(name)"
        do throws(SecureFileError) {
            try SecureFiles.ensureDirectory(dir.quarantine)
            try SecureFiles.ensureDirectory(entryPath)
            let notice = Quarantine.Notice(reason: .keyLost, pendingMessagesLost: 0, at: held.config.now().timeIntervalSince1970,
                                           reported: true, moving: nil, scrubPlaintext: nil, restoring: nil, replacedBy: nil, imported: true)
            try Quarantine.write(notice, to: entryPath)
            for file in header.files {
                let target = "\(entryPath)/\(file.name)"
                try SecureFiles.ensureDirectory((target as NSString).deletingLastPathComponent)
                try copy(fd, size: file.size, to: target)
            }
            var manifest = Manifest(cacheId: header.cacheId, encrypted: true, keyStorage: held.store.tier, keyStore: held.store.name,
                                    keyId: header.keyId, keyCheck: header.keyCheck, cipherProfile: header.cipherProfile, createdAt: Date())
            manifest.createdAt = header.createdAt
            guard manifest.isWellFormed else { throw .wrongKind("\(path) (its header)") }
            try ManifestFile.write(manifest, directory: entryPath)
            try SecureFiles.syncDirectory(entryPath)
        } catch {
            Quarantine.removeEntry(entryPath)
            if case .wrongKind = error { throw .fileUnusable("its header names an inconsistent cache") }
            if case .notFound = error { throw .fileUnusable("it is shorter than its header says") }
            throw .unavailable(DatabaseVerdict.reason(error))
        }
        guard let entry = quarantine.entries().first(where: { $0.name == name }) else { throw .noSuchEntry(name) }
        do {
            return try KeyManager.restoreEntry(entry, key: key, held: held, crashAt: nil)
        } catch {
            if case .verificationFailed = error { Quarantine.removeEntry(entryPath) }
            throw error
        }
    }

    // MARK: - Reading and writing

    static func readHeader(_ fd: Int32) throws(KeyManagementError) -> Header {
        var prefix = [UInt8](repeating: 0, count: magic.count + 4)
        guard readFully(fd, &prefix), Array(prefix.prefix(magic.count)) == magic else { throw .fileUnusable("it is not a ChatVault export") }
        let length = prefix.suffix(4).reduce(0) { ($0 << 8) | Int($1) }
        guard length > 0, length <= headerLimit else { throw .fileUnusable("its header is damaged") }
        var bytes = [UInt8](repeating: 0, count: length)
        guard readFully(fd, &bytes), let header = try? JSONDecoder().decode(Header.self, from: Data(bytes)),
              header.format == format, KeyItemNames.isSafeComponent(header.cacheId), KeyItemNames.isSafeComponent(header.keyId),
              header.files.count <= fileCountLimit, header.files.first?.name == "cache.db",
              header.files.allSatisfy({ isSafeName($0.name) && $0.size >= 0 && $0.size <= 1 << 46 }),
              Set(header.files.map(\.name)).count == header.files.count else {
            throw .fileUnusable("its header is damaged or of an unknown format")
        }
        return header
    }

    /// `cache.db`, `recovery.json`, or `media/<name>` with plain components: nothing that could
    /// leave the entry directory.
    static func isSafeName(_ name: String) -> Bool {
        if name == "cache.db" || name == RecoveryFile.name { return true }
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 2, parts.count <= 8, parts[0] == "media" else { return false }
        return parts.dropFirst().allSatisfy { part in
            !part.isEmpty && part != "." && part != ".." && part.count <= 255
                && part.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "\\") }
        }
    }

    private static func readFully(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
        var done = 0
        while done < buffer.count {
            let n = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return read(fd, base + done, raw.count - done)
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            done += n
        }
        return true
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8], _ path: String) throws(SecureFileError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                return write(fd, base + done, raw.count - done)
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw .system(path, operation: "write", errno: errno) }
            done += n
        }
    }

    /// Appends `size` bytes of `source` to `fd`.
    private static func copy(from source: String, size: Int64, into fd: Int32, _ path: String) throws(SecureFileError) -> Int64 {
        let input = open(source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else { throw .system(source, operation: "open", errno: errno) }
        defer { close(input) }
        try pump(size, from: input, source, to: fd, path, shortIsMissing: false)
        return size
    }

    /// Writes the next `size` bytes of `fd` into a new 0600 file.
    private static func copy(_ fd: Int32, size: Int64, to target: String) throws(SecureFileError) {
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw .system(target, operation: "open", errno: errno) }
        defer { close(output) }
        try pump(size, from: fd, target, to: output, target, shortIsMissing: true)
        guard fsync(output) == 0 else { throw .system(target, operation: "fsync", errno: errno) }
    }

    /// Copies exactly `size` bytes from `input` to `output`, a MiB at a time. Input that ends early
    /// is `.notFound` (an export shorter than its header says) or an I/O error (a file that shrank).
    private static func pump(_ size: Int64, from input: Int32, _ source: String, to output: Int32, _ target: String,
                             shortIsMissing: Bool) throws(SecureFileError) {
        var left = size
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while left > 0 {
            let want = Int(min(Int64(buffer.count), left))
            let n = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, want) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                if shortIsMissing { throw .notFound(target) }
                throw .system(source, operation: "read", errno: n == 0 ? EIO : errno)
            }
            try writeAll(output, Array(buffer[0..<n]), target)
            left -= Int64(n)
        }
    }
}
