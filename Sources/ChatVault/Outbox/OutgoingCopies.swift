import Foundation
import VaultStore

/// The cache's own copies of the files a media send uploads: `outgoing/<local id>/<n>`, 0600 in
/// 0700 directories, written and synced before the send reports pending, so a queued media
/// message survives a restart even if the app's original file is gone.
enum OutgoingCopies {
    static let chunk = 1 << 20

    /// Copies `paths` for the send `localId`. Nothing is left behind on failure.
    /// - Throws: `ERROR_OFFLINE_MEDIA_COPY_FAILED` (a missing or unreadable file, not a regular
    ///   file, a full disk); the sentence names no path.
    /// - Parameter key: the media key of an encrypted cache: each copy is written encrypted
    ///   (`MediaFileWriter`); nil keeps plain copies.
    static func copy(_ paths: [String], localId: String, into directory: CacheDirectory, key: MediaKey? = nil) throws(CometChatException) -> [OutgoingFile] {
        guard isSafeComponent(localId) else { throw failure("the message's local id is unusable") }
        let folder = directory.outgoing + "/" + localId
        var files: [OutgoingFile] = []
        do {
            try makePrivateDirectory(directory.outgoing)
            try makePrivateDirectory(folder)
            for (index, source) in paths.enumerated() {
                let relative = "outgoing/\(localId)/\(index)"
                let size = try copyFile(from: source, to: directory.path + "/" + relative, key: key)
                let name = (source as NSString).lastPathComponent
                files.append(OutgoingFile(fileId: "\(localId)-\(index)", name: name, mimeType: mimeType(forName: name),
                                          size: size, relativePath: relative))
            }
            try syncDirectory(folder)
            try syncDirectory(directory.outgoing)
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
        return files
    }

    /// Removes the copies of one send.
    static func remove(localId: String, in directory: CacheDirectory) {
        guard isSafeComponent(localId) else { return }
        try? FileManager.default.removeItem(atPath: directory.outgoing + "/" + localId)
    }

    /// Removes files named relative to the cache directory (evicted media, an evicted send's copies).
    static func removeFiles(_ relative: [String], in directory: CacheDirectory) {
        for path in relative where !path.isEmpty && !path.hasPrefix("/") && !path.split(separator: "/").contains("..") {
            try? FileManager.default.removeItem(atPath: directory.path + "/" + path)
        }
    }

    /// Removes the copy folders of sends that are no longer in the outbox (a reset that could not
    /// salvage them, a crash between a commit and a cleanup).
    static func removeOrphans(keeping localIds: Set<String>, in directory: CacheDirectory) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.outgoing) else { return }
        for name in names where !localIds.contains(name) && isSafeComponent(name) && !name.hasPrefix("upload-") {
            try? FileManager.default.removeItem(atPath: directory.outgoing + "/" + name)
        }
    }

    static func isSafeComponent(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 128 && name != "." && name != ".."
            && name.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0)) }
    }

    static func failure(_ sentence: String) -> CometChatException {
        CometChatException(.offlineMediaCopyFailed, "The media file could not be copied for offline send: \(sentence).")
    }

    static func makePrivateDirectory(_ path: String) throws(CometChatException) {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw failure("a cache folder could not be created (errno \(errno))") }
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { throw failure("a cache folder is not a directory") }
    }

    /// Copies one file and syncs it; returns its size. The source is opened non-blocking, so a
    /// FIFO (or a device) is refused as "not a regular file" instead of blocking the caller until
    /// some writer opens it; for a regular file the flag changes nothing.
    static func copyFile(from source: String, to destination: String, key: MediaKey? = nil) throws(CometChatException) -> Int64 {
        let input = open(source, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard input >= 0 else { throw failure("the file cannot be opened (errno \(errno))") }
        defer { close(input) }
        var info = stat()
        guard fstat(input, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw failure("it is not a regular file") }
        if let key { return try encryptedCopy(input, to: destination, key: key) }
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw failure("the copy cannot be created (errno \(errno))") }
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: chunk)
        var total: Int64 = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, chunk) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("the file cannot be read (errno \(errno))")
            }
            if count == 0 { break }
            var written = 0
            while written < count {
                let n = buffer.withUnsafeBytes { write(output, $0.baseAddress! + written, count - written) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw failure("the copy cannot be written (errno \(errno))")
                }
                written += n
            }
            total += Int64(count)
        }
        guard fsync(output) == 0 else { throw failure("the copy cannot be synced (errno \(errno))") }
        return total
    }

    /// Copies an open file into `destination`, encrypted under `key` (written atomically: a
    /// temporary file beside it, fsynced, renamed); returns the plaintext length.
    private static func encryptedCopy(_ input: Int32, to destination: String, key: MediaKey) throws(CometChatException) -> Int64 {
        let folder = (destination as NSString).deletingLastPathComponent
        let name = (destination as NSString).lastPathComponent
        do {
            let writer = try MediaFileWriter(directory: folder, key: key)
            var buffer = [UInt8](repeating: 0, count: chunk)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, chunk) }
                if count < 0 {
                    if errno == EINTR { continue }
                    writer.abort()
                    throw failure("the file cannot be read (errno \(errno))")
                }
                if count == 0 { break }
                try writer.append(Data(buffer[0..<count]))
            }
            try writer.commit(as: name)
            return writer.plaintextBytes
        } catch let error as CometChatException {
            throw error
        } catch {
            throw failure("the copy cannot be written (\(error))")
        }
    }

    static func syncDirectory(_ path: String) throws(CometChatException) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("a cache folder cannot be opened (errno \(errno))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw failure("a cache folder cannot be synced (errno \(errno))") }
    }

    /// A MIME type from a file name's extension (the common ones; otherwise octet-stream).
    static func mimeType(forName name: String) -> String {
        let types = [
            "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp", "heic": "image/heic",
            "svg": "image/svg+xml", "mp4": "video/mp4", "mov": "video/quicktime", "webm": "video/webm", "mkv": "video/x-matroska",
            "mp3": "audio/mpeg", "m4a": "audio/mp4", "ogg": "audio/ogg", "opus": "audio/opus", "wav": "audio/wav", "flac": "audio/flac",
            "pdf": "application/pdf", "txt": "text/plain", "json": "application/json", "zip": "application/zip",
        ]
        return types[(name as NSString).pathExtension.lowercased()] ?? "application/octet-stream"
    }
}
