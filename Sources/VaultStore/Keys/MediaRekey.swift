import Foundation
import VaultKeys

/// A rotation's media step: a new media key, and every encrypted media file (`media/`, the
/// received attachments; `outgoing/`, the copies of files being sent) rewritten under it into a
/// twin tree (`media.next/`, `outgoing.next/`) before the swap. Plain files (a plaintext copy made
/// without a safe runtime directory) and files the old key does not open are linked over as they
/// are. The twin trees replace the old ones right after the database is renamed into place, so
/// the new database (which holds only the new media key) never meets a file under the old one:
/// an open that finds a rotation past its swap finishes the directory swap first.
///
/// Directory swap, per tree: `X` → `X.old`, `X.next` → `X`, remove `X.old`. Each state a crash can
/// leave is finished by `finishSwaps` (a twin means the swap has not happened; an `.old` without
/// a twin means only the removal is left).
enum MediaRekey {
    static let trees = ["media", "outgoing"]
    static let keyRow = "media.key"

    static func next(_ dir: CacheDirectory, _ tree: String) -> String { "\(dir.path)/\(tree).next" }
    static func old(_ dir: CacheDirectory, _ tree: String) -> String { "\(dir.path)/\(tree).old" }

    /// The media key in a database (nil when the cache never made one).
    static func storedKey(in db: Database) throws -> MediaKey? {
        let stmt = try db.cached("SELECT value FROM kv WHERE key = ?")
        try stmt.bind([.text(keyRow)])
        defer { stmt.reset() }
        guard try stmt.step(), let raw = stmt.blob(0) else { return nil }
        return MediaKey(raw: raw)
    }

    /// Writes the twin trees under `newKey` and returns their size in bytes.
    static func writeTwins(_ dir: CacheDirectory, from oldKey: MediaKey, to newKey: MediaKey) throws(KeyStepError) -> Int64 {
        removeTwins(dir)
        var written: Int64 = 0
        for tree in trees {
            let source = "\(dir.path)/\(tree)"
            var st = stat()
            guard lstat(source, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { continue }
            let target = next(dir, tree)
            do throws(MediaFileError) {
                try MediaFileIO.ensureDirectory(target)
                let walker = FileManager.default.enumerator(atPath: source)
                while let relative = walker?.nextObject() as? String {
                    let path = "\(source)/\(relative)", destination = "\(target)/\(relative)"
                    guard lstat(path, &st) == 0 else { continue }
                    switch st.st_mode & S_IFMT {
                    case S_IFDIR:
                        try MediaFileIO.ensureDirectory(destination)
                    case S_IFREG:
                        written += try rewrite(path, to: destination, from: oldKey, to: newKey)
                    default:
                        continue // never follow or copy a link
                    }
                }
            } catch {
                removeTwins(dir)
                throw .file(.system(target, operation: "rewrite media (\(error))", errno: EIO))
            }
        }
        return written
    }

    /// One file: re-encrypted when the old key opens it, else linked as it is.
    private static func rewrite(_ path: String, to destination: String, from oldKey: MediaKey, to newKey: MediaKey) throws(MediaFileError) -> Int64 {
        let name = (destination as NSString).lastPathComponent
        let directory = (destination as NSString).deletingLastPathComponent
        if MediaFileReader.isEncryptedMediaFile(path), let source = try? MediaChunkSource(path: path, key: oldKey) {
            let writer = try MediaFileWriter(directory: directory, key: newKey)
            do throws(MediaFileError) {
                while let chunk = try source.next() { try writer.append(Data(chunk)) }
                return try writer.commit(as: name)
            } catch {
                writer.abort()
                // A file damaged mid-way is kept as it was (it was unreadable before, too).
                if case .damaged = error { return try link(path, destination) }
                throw error
            }
        }
        return try link(path, destination)
    }

    private static func link(_ path: String, _ destination: String) throws(MediaFileError) -> Int64 {
        guard Glibc.link(path, destination) == 0 else { throw .io(operation: "link media file", errno: errno) }
        var st = stat()
        return lstat(destination, &st) == 0 ? Int64(st.st_size) : 0
    }

    /// Puts the twin trees in place (after the database rename), finishing what a crash left.
    static func finishSwaps(_ dir: CacheDirectory) throws(KeyStepError) {
        for tree in trees {
            let current = "\(dir.path)/\(tree)", twin = next(dir, tree), retired = old(dir, tree)
            if exists(twin) {
                if exists(current) {
                    if exists(retired) { removeTree(retired) }
                    guard rename(current, retired) == 0 else { throw .file(.system(current, operation: "rename", errno: errno)) }
                }
                guard rename(twin, current) == 0 else { throw .file(.system(twin, operation: "rename", errno: errno)) }
                try? SecureFiles.syncDirectory(dir.path)
            }
            if exists(retired) { removeTree(retired) }
        }
    }

    /// Removes twin trees a rolled-back rotation left (the old trees are untouched).
    static func removeTwins(_ dir: CacheDirectory) {
        for tree in trees {
            removeTree(next(dir, tree))
        }
    }

    private static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// Removes a tree of ours; a link in its place is removed, never followed.
    private static func removeTree(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if st.st_mode & S_IFMT == S_IFDIR {
            try? FileManager.default.removeItem(atPath: path)
        } else {
            unlink(path)
        }
    }
}
