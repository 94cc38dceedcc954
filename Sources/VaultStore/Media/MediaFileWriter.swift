package import Foundation

/// Writes one media file atomically: bytes go to a temporary file (0600, `.cvm-<hex>.tmp`) in
/// `directory` (created 0700 if missing); `commit` fsyncs it, renames it to `name` and fsyncs the
/// directory, so a crash or a failed download never leaves a partial file under the final name.
/// With `key` the file is the encrypted format (`MediaFileFormat`); without, the plain bytes
/// (an app opens it directly).
///
///     let writer = try MediaFileWriter(directory: mediaDirectory, key: key, maxBytes: limit)
///     for try await piece in download { try writer.append(piece) }
///     let onDisk = try writer.commit(as: "att-42")
///
/// At most one chunk (64 KiB) of plaintext is held in memory. One writer belongs to one task at
/// a time (it is not `Sendable`). After any error the writer is spent: later calls throw and the
/// temporary file is removed by `abort()` or when the writer goes away.
package final class MediaFileWriter {
    private let directory: String
    private let maxBytes: Int64
    private let cipher: MediaChunkCipher?
    private var fd: Int32
    private var temporaryPath: String?
    private var pending: [UInt8] = []
    private var chunkIndex: UInt64 = 0
    private var failed = false
    private var finished = false

    /// The plaintext bytes appended so far.
    package private(set) var plaintextBytes: Int64 = 0

    /// Creates the temporary file (and `directory` if missing). `maxBytes` limits the plaintext.
    package init(directory: String, key: MediaKey?, maxBytes: Int64 = .max) throws(MediaFileError) {
        try MediaFileIO.ensureDirectory(directory)
        var header: [UInt8] = []
        if let key {
            var fileId = [UInt8](repeating: 0, count: MediaFileFormat.fileIdCount)
            try MediaCrypto.randomBytes(&fileId)
            let authenticated = MediaFileFormat.authenticatedHeader(chunkSize: MediaFileFormat.chunkSize, fileId: fileId)
            let cipher = try MediaChunkCipher(key: key, authenticatedHeader: authenticated, fileId: fileId)
            header = authenticated + (try cipher.headerTag())
            self.cipher = cipher
        } else {
            cipher = nil
        }
        let (fd, path) = try MediaFileIO.createTemporary(in: directory)
        self.directory = directory
        self.maxBytes = maxBytes
        self.fd = fd
        temporaryPath = path
        if !header.isEmpty {
            do {
                try MediaFileIO.writeAll(fd, header, operation: "write media header")
            } catch {
                abort()
                throw error
            }
        }
    }

    deinit {
        if !finished { abort() }
    }

    /// Appends plaintext. Throws `.tooLarge` (and appends nothing) when the total would pass `maxBytes`.
    package func append(_ bytes: Data) throws(MediaFileError) {
        try checkUsable()
        guard Int64(bytes.count) <= maxBytes - plaintextBytes else { throw .tooLarge(limit: maxBytes) }
        do throws(MediaFileError) {
            if let cipher {
                // Over the raw bytes: slicing a `Data` per chunk would copy it.
                var failure: MediaFileError?
                bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
                    var offset = 0
                    while offset < raw.count {
                        if pending.count == MediaFileFormat.chunkSize {
                            // More follows, so the buffered chunk is not the last.
                            do throws(MediaFileError) { try emit(cipher, final: false) } catch {
                                failure = error
                                return
                            }
                        }
                        let take = min(MediaFileFormat.chunkSize - pending.count, raw.count - offset)
                        pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + take)]))
                        offset += take
                    }
                }
                if let failure { throw failure }
            } else {
                try MediaFileIO.writeAll(fd, bytes, operation: "write media file")
            }
        } catch {
            failed = true
            throw error
        }
        plaintextBytes += Int64(bytes.count)
    }

    /// Finishes the file (the final chunk), fsyncs it, renames it to `name` in the directory
    /// (replacing a file of that name) and fsyncs the directory. Returns the bytes on disk.
    /// `name` must be one plain file name (no "/").
    /// - Parameter durable: false for a disposable file (a decrypted view): no fsync of the file or
    ///   the directory; the rename still makes it appear whole or not at all.
    @discardableResult
    package func commit(as name: String, durable: Bool = true) throws(MediaFileError) -> Int64 {
        try checkUsable()
        guard MediaFileIO.isPlainName(name) else { throw .io(operation: "commit: not a plain file name", errno: EINVAL) }
        guard let temporaryPath else { throw .io(operation: "commit: no temporary file", errno: EBADF) }
        do throws(MediaFileError) {
            if let cipher { try emit(cipher, final: true) }
            if durable { try MediaFileIO.fsync(fd, operation: "fsync media file") }
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw MediaFileError.io(operation: "fstat media file", errno: errno) }
            close(fd)
            fd = -1
            guard rename(temporaryPath, "\(directory)/\(name)") == 0 else {
                throw MediaFileError.io(operation: "rename media file into place", errno: errno)
            }
            self.temporaryPath = nil
            finished = true
            if durable { try MediaFileIO.fsyncDirectory(directory) }
            return Int64(st.st_size)
        } catch {
            failed = true
            throw error
        }
    }

    /// Removes the temporary file; the writer is spent. Also done when an uncommitted writer goes away.
    package func abort() {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        if let temporaryPath {
            unlink(temporaryPath)
            self.temporaryPath = nil
        }
        MediaCrypto.cleanse(&pending)
        pending = []
        finished = true
    }

    /// Removes the temporary files (`.cvm-<hex>.tmp`) that writers killed before `commit` or
    /// `abort` left in `directory` (a crash, SIGKILL); returns how many. Call it only while no
    /// writer is at work in that directory (when the cache opens): it removes theirs too.
    @discardableResult
    package static func removeLeftovers(in directory: String) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
        var removed = 0
        for name in names where name.hasPrefix(".cvm-") && name.hasSuffix(".tmp") {
            var st = stat()
            let path = "\(directory)/\(name)"
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            if unlink(path) == 0 { removed += 1 }
        }
        return removed
    }

    private func checkUsable() throws(MediaFileError) {
        if finished { throw .io(operation: "media writer already committed or aborted", errno: EBADF) }
        if failed { throw .io(operation: "media writer failed earlier", errno: EIO) }
    }

    /// Seals the buffered plaintext as the next chunk and writes it.
    private func emit(_ cipher: MediaChunkCipher, final: Bool) throws(MediaFileError) {
        let sealed = try cipher.seal(pending, index: chunkIndex, final: final)
        try MediaFileIO.writeAll(fd, sealed, operation: "write media chunk")
        MediaCrypto.cleanse(&pending)
        pending.removeAll(keepingCapacity: true)
        chunkIndex += 1
    }
}
