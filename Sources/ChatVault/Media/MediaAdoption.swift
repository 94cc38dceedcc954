import Foundation
import VaultStore

extension MediaCache {
    /// `.auto`: a media send was acknowledged; its copies become the cached bytes of the sent
    /// message's attachments (received-media rows under the server's URLs, encrypted like any
    /// received file: an encrypted copy is moved as it is, a plain one re-written), so the sender sees the picture offline without downloading it back. In
    /// `.off` nothing is kept (the caller removes the copies either way). Best effort: a copy
    /// that cannot be taken over is simply not cached. Returns how many were taken over.
    @discardableResult
    func adoptOutgoingCopies(_ row: OutboxRow, message: BaseMessage, cache: VaultCache) -> Int {
        let copies = row.files.compactMap { file -> KeptCopy? in
            guard let url = file.attachment?["url"]?.stringValue else { return nil }
            return KeptCopy(relativePath: file.relativePath, url: url, size: file.size, mime: file.mimeType)
        }
        let adopted = adoptCopies(copies, messageId: message.id, cache: cache)
        if adopted > 0 { hydrate([message]) }
        return adopted
    }

    /// A copy of a sent file, and the server URL its bytes now answer to.
    struct KeptCopy {
        let relativePath: String
        let url: String
        let size: Int64
        let mime: String
    }

    /// `.auto`: takes the copies over as received media of message `messageId` (see above).
    @discardableResult
    func adoptCopies(_ copies: [KeptCopy], messageId: Int, cache: VaultCache) -> Int {
        guard config.mediaCaching == .auto, !copies.isEmpty else { return 0 }
        let (generation, key) = state.withLock { ($0.generation, $0.key) }
        if cache.isEncrypted && key == nil { return 0 }
        var adopted = 0
        for file in copies {
            guard let urlKey = MediaURL.key(file.url), !file.relativePath.hasPrefix("/"),
                  !file.relativePath.split(separator: "/").contains("..") else { continue }
            let source = "\(cache.directory.path)/\(file.relativePath)"
            let name = MediaRows.newName()
            let bytes: Int64
            if key != nil, MediaFileReader.isEncryptedMediaFile(source) {
                // Encrypted under the same media key: the copy becomes the cached file as it is.
                guard (try? OutgoingCopies.makePrivateDirectory(cache.directory.media)) != nil,
                      rename(source, "\(cache.directory.media)/\(name)") == 0 else { continue }
                bytes = file.size
            } else {
                guard let imported = try? Self.importFile(source, into: cache.directory.media, as: name, key: key) else { continue }
                bytes = imported
            }
            let stored = MediaFileRow(name: name, bytes: bytes, mime: String(file.mime.prefix(255)))
            if record(stored, key: urlKey, messageId: messageId, cache: cache, generation: generation) { adopted += 1 }
        }
        return adopted
    }

    /// Copies a local file into `directory` as a media file (encrypted under `key` when given),
    /// atomically; returns the plaintext length.
    static func importFile(_ source: String, into directory: String, as name: String, key: MediaKey?) throws -> Int64 {
        let input = open(source, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard input >= 0 else { throw MediaFileError.io(operation: "open outgoing copy", errno: errno) }
        defer { close(input) }
        let writer = try MediaFileWriter(directory: directory, key: key)
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                writer.abort()
                throw MediaFileError.io(operation: "read outgoing copy", errno: errno)
            }
            if count == 0 { break }
            try writer.append(Data(buffer[0..<count]))
        }
        try writer.commit(as: name)
        return writer.plaintextBytes
    }
}
