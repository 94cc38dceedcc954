package import Foundation
import Synchronization

/// Reads media files written by `MediaFileWriter`. With a key every chunk is authenticated before
/// any of its plaintext is handed out; any failure (a flipped bit, truncation, reordering, a chunk
/// from another file, a wrong key, a file that is not a media file) is `.damaged`. Lengths read
/// from the file are range-checked, so a hostile file cannot trap or make a huge allocation.
/// Without a key the file is taken as plain bytes.
package enum MediaFileReader {
    /// The whole plaintext (for small files and tests), refusing more than `maxBytes`.
    package static func read(_ path: String, key: MediaKey?, maxBytes: Int64) throws(MediaFileError) -> Data {
        let source = try MediaChunkSource(path: path, key: key)
        guard source.plaintextLength <= maxBytes else { throw .tooLarge(limit: maxBytes) }
        var data = Data()
        data.reserveCapacity(Int(clamping: source.plaintextLength))
        while let chunk = try source.next() {
            // A plain file may grow while it is read.
            guard Int64(chunk.count) <= maxBytes - Int64(data.count) else { throw .tooLarge(limit: maxBytes) }
            data.append(contentsOf: chunk)
        }
        return data
    }

    /// Whether `path` is a regular file that starts as an encrypted media file does (the format's
    /// magic). Says nothing of its integrity; a plain file (or none) is false.
    package static func isEncryptedMediaFile(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return false }
        var head = [UInt8](repeating: 0, count: MediaFileFormat.magic.count)
        let count = head.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        return count == head.count && head == MediaFileFormat.magic
    }

    /// Checks the whole file (every chunk's tag, the final marker) without keeping it; returns
    /// the plaintext length.
    package static func verify(_ path: String, key: MediaKey?) throws(MediaFileError) -> Int64 {
        let source = try MediaChunkSource(path: path, key: key)
        var total: Int64 = 0
        while var chunk = try source.next() {
            total += Int64(chunk.count)
            MediaCrypto.cleanse(&chunk)
        }
        return total
    }

    /// Decrypts to `destination` atomically (a 0600 temporary file beside it, fsync, rename,
    /// fsync of the directory, which must exist). Nothing is left at `destination` or beside it
    /// when the file fails to verify part-way.
    /// - Parameter durable: false for a disposable copy (a view in a tmpfs, made again when lost):
    ///   no fsync of the file or its directory; the rename still makes it appear whole or not at all.
    package static func decrypt(_ path: String, key: MediaKey?, to destination: String, durable: Bool = true) throws(MediaFileError) {
        let source = try MediaChunkSource(path: path, key: key)
        let name = (destination as NSString).lastPathComponent
        var directory = (destination as NSString).deletingLastPathComponent
        if directory.isEmpty { directory = "." }
        guard MediaFileIO.isPlainName(name) else { throw .io(operation: "decrypt: destination is not a file name", errno: EINVAL) }
        let (fd, temporary) = try MediaFileIO.createTemporary(in: directory)
        var isOpen = true
        do throws(MediaFileError) {
            while var chunk = try source.next() {
                try MediaFileIO.writeAll(fd, chunk, operation: "write decrypted media file")
                MediaCrypto.cleanse(&chunk)
            }
            if durable { try MediaFileIO.fsync(fd, operation: "fsync decrypted media file") }
            close(fd)
            isOpen = false
            guard rename(temporary, destination) == 0 else {
                throw MediaFileError.io(operation: "rename decrypted media file into place", errno: errno)
            }
        } catch {
            if isOpen { close(fd) }
            unlink(temporary)
            throw error
        }
        if durable { try MediaFileIO.fsyncDirectory(directory) }
    }

    /// The plaintext in chunks (64 KiB), each verified before it is yielded; an error ends the
    /// stream. Chunks are read on demand, one per `next()`, so a slow consumer holds one chunk.
    package static func chunks(_ path: String, key: MediaKey?) -> AsyncThrowingStream<Data, any Error> {
        let state = MediaChunkStreamState(path: path, key: key)
        return AsyncThrowingStream(unfolding: { try state.next() })
    }
}

/// The state behind `MediaFileReader.chunks`: opened on the first pull, closed at the end, on an
/// error, or when the stream is dropped.
private final class MediaChunkStreamState: Sendable {
    private enum Phase {
        case notOpened(path: String, key: MediaKey?)
        case reading(MediaChunkSource)
        case done
    }

    // The source is only touched under the lock.
    private let phase: Mutex<Phase>

    init(path: String, key: MediaKey?) {
        phase = Mutex(.notOpened(path: path, key: key))
    }

    func next() throws(MediaFileError) -> Data? {
        try phase.withLock { (phase) throws(MediaFileError) -> Data? in
            do throws(MediaFileError) {
                let source: MediaChunkSource
                switch phase {
                case .done:
                    return nil
                case .reading(let open):
                    source = open
                case .notOpened(let path, let key):
                    source = try MediaChunkSource(path: path, key: key)
                    phase = .reading(source)
                }
                guard var chunk = try source.next() else {
                    phase = .done
                    return nil
                }
                defer { MediaCrypto.cleanse(&chunk) }
                return Data(chunk)
            } catch {
                phase = .done
                throw error
            }
        }
    }
}

/// One media file being read: its descriptor, its layout and, with a key, its cipher.
/// `next()` returns the plaintext of each chunk in order (verified), then nil.
final class MediaChunkSource {
    private let fd: Int32
    private let cipher: MediaChunkCipher?
    private let chunkSize: Int
    private let chunkCount: UInt64
    private let lastSealedCount: Int
    private var index: UInt64 = 0
    private var plainEnded = false
    /// The plaintext length the file's size implies.
    let plaintextLength: Int64

    init(path: String, key: MediaKey?) throws(MediaFileError) {
        let (fd, size) = try MediaFileIO.openForReading(path)
        self.fd = fd
        guard let key else {
            cipher = nil
            chunkSize = MediaFileFormat.plainPieceSize
            chunkCount = 0
            lastSealedCount = 0
            plaintextLength = size
            return
        }
        do throws(MediaFileError) {
            let header = try MediaFileIO.read(fd, count: MediaFileFormat.headerCount, operation: "read media header")
            let (chunkSize, fileId) = try MediaFileFormat.parseHeader(header)
            let authenticated = Array(header[0..<MediaFileFormat.authenticatedHeaderCount])
            let cipher = try MediaChunkCipher(key: key, authenticatedHeader: authenticated, fileId: fileId)
            guard try cipher.headerTagMatches(Array(header[MediaFileFormat.authenticatedHeaderCount...])) else {
                throw MediaFileError.damaged("header failed authentication (a wrong key, or a damaged header)")
            }
            // The layout: full chunks of chunkSize + tag, then a last one of tag ... chunkSize + tag.
            let body = size - Int64(MediaFileFormat.headerCount)
            let sealedChunk = Int64(chunkSize + MediaFileFormat.tagCount)
            guard body > 0 else { throw MediaFileError.damaged("no chunks after the header (truncated)") }
            let count = (body - 1) / sealedChunk + 1
            let last = body - (count - 1) * sealedChunk
            guard last >= Int64(MediaFileFormat.tagCount) else {
                throw MediaFileError.damaged("last chunk shorter than its tag (truncated)")
            }
            self.cipher = cipher
            self.chunkSize = chunkSize
            chunkCount = UInt64(count)
            lastSealedCount = Int(last)
            plaintextLength = body - count * Int64(MediaFileFormat.tagCount)
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    /// The next chunk's plaintext, verified; nil after the last.
    func next() throws(MediaFileError) -> [UInt8]? {
        guard let cipher else {
            guard !plainEnded else { return nil }
            let piece = try MediaFileIO.read(fd, count: chunkSize, operation: "read media file")
            if piece.count < chunkSize { plainEnded = true }
            return piece.isEmpty ? nil : piece
        }
        guard index < chunkCount else { return nil }
        let final = index == chunkCount - 1
        let want = final ? lastSealedCount : chunkSize + MediaFileFormat.tagCount
        let sealed = try MediaFileIO.read(fd, count: want, operation: "read media chunk")
        guard sealed.count == want else { throw .damaged("chunk \(index) cut short (the file shrank while read)") }
        guard let plain = try cipher.open(sealed, index: index, final: final) else {
            throw .damaged(final ? "chunk \(index) (the last) failed authentication"
                                 : "chunk \(index) failed authentication")
        }
        index += 1
        return plain
    }
}
