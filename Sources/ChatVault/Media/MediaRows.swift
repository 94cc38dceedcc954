import Foundation
import VaultStore

/// What identifies a media file in the cache: an attachment URL without its query, fragment or
/// credentials (`scheme://host[:port]/path`, scheme and host lowercased). A presigned URL and its
/// re-signed successor share one key; the listener reports this form (`onMediaDownloaded`).
enum MediaURL {
    static let maxLength = 8192

    /// The key of an http(s) URL with a host, or of a Matrix content URI (`mxc://<server>/<id>`,
    /// which a Matrix backend downloads with its access token); nil for anything else (a relative
    /// path, `file:`, an oversized or malformed string).
    static func key(_ url: String) -> String? {
        guard !url.isEmpty, url.utf8.count <= maxLength, let parts = URLComponents(string: url),
              let scheme = parts.scheme?.lowercased(), let rawHost = parts.host, !rawHost.isEmpty else { return nil }
        if scheme == "mxc" {
            let id = parts.percentEncodedPath.dropFirst()
            guard parts.percentEncodedPath.hasPrefix("/"), !id.isEmpty, !id.contains("/"), parts.query == nil,
                  parts.port == nil else { return nil }
            return "mxc://\(rawHost)/\(id)"
        }
        guard scheme == "https" || scheme == "http" else { return nil }
        let host = rawHost.lowercased()
        var key = "\(scheme)://\(host)"
        if let port = parts.port { key += ":\(port)" }
        key += parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath
        return key
    }
}

/// One received media file the cache holds (a `media` row with `outgoing = 0`).
struct MediaFileRow: Sendable, Equatable {
    /// The file's name under `media/` (random hex: it reveals no URL, name or content).
    var name: String
    /// The plaintext length.
    var bytes: Int64
    var mime: String?
}

/// The received-media rows. The files live under `media/`; a row is written only once its file
/// is in place (so a crash leaves at most an unreferenced file, removed at the next attach).
enum MediaRows {
    static let folder = "media"

    static func row(_ key: String, in db: Database) throws -> MediaFileRow? {
        let stmt = try db.cached("SELECT local_file, bytes, mime FROM media WHERE url_key = ? AND outgoing = 0")
        try stmt.bind([.text(key)])
        defer { stmt.reset() }
        guard try stmt.step(), let name = fileName(stmt.text(0)) else { return nil }
        return MediaFileRow(name: name, bytes: stmt.int64(1), mime: stmt.text(2))
    }

    /// The rows of several keys at once (hydration of a page).
    static func rows(_ keys: Set<String>, in db: Database) throws -> [String: MediaFileRow] {
        var out: [String: MediaFileRow] = [:]
        for key in keys {
            if let row = try row(key, in: db) { out[key] = row }
        }
        return out
    }

    /// Records a downloaded file (replacing an older file of the same key, whose name is
    /// returned for removal).
    static func insert(_ key: String, messageId: String?, row: MediaFileRow, at time: Int64, in db: Database) throws -> String? {
        let previous = try self.row(key, in: db)?.name
        try db.run("DELETE FROM media WHERE url_key = ?", .text(key))
        try db.run("INSERT INTO media (url_key, message_id, local_file, bytes, mime, outgoing, created_at, last_access) VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
                   .text(key), messageId.map { .text($0) } ?? .null, .text("\(folder)/\(row.name)"), .int(row.bytes),
                   row.mime.map { .text($0) } ?? .null, .int(time), .int(time))
        return previous == row.name ? nil : previous
    }

    /// An explicit access (`getCachedMediaPath`, `downloadMedia`): the file becomes the most
    /// recently used. Bulk loads and syncs never call it.
    static func touch(_ key: String, at time: Int64, in db: Database) throws {
        try db.run("UPDATE media SET last_access = max(last_access, ?) WHERE url_key = ? AND outgoing = 0", .int(time), .text(key))
    }

    /// Forgets a file (deleted or damaged behind the library's back); returns its name.
    static func remove(_ key: String, in db: Database) throws -> String? {
        let name = try row(key, in: db)?.name
        try db.run("DELETE FROM media WHERE url_key = ? AND outgoing = 0", .text(key))
        return name
    }

    /// Trims received media to `budget` bytes, least recently accessed first (the row `keep`,
    /// just downloaded, is never a victim). Outgoing copies neither count nor go. Returns the
    /// names of the evicted files, to delete once the transaction has committed.
    static func trim(to budget: Int64, keep: String?, in db: Database) throws -> [String] {
        var used = try db.scalarInt("SELECT coalesce(sum(bytes), 0) FROM media WHERE outgoing = 0") ?? 0
        guard used > budget else { return [] }
        let lru = try db.prepare("SELECT url_key, local_file, bytes FROM media WHERE outgoing = 0 ORDER BY last_access, url_key")
        var victims: [(String, String?)] = []
        while used > budget, try lru.step() {
            let key = lru.text(0) ?? ""
            if key == keep { continue }
            victims.append((key, fileName(lru.text(1))))
            // Positive minus non-negative: a damaged row's negative size cannot overflow it.
            used -= max(lru.int64(2), 0)
        }
        lru.reset()
        for (key, _) in victims { try db.run("DELETE FROM media WHERE url_key = ? AND outgoing = 0", .text(key)) }
        return victims.compactMap(\.1)
    }

    /// Every file name the rows reference (the attach sweep removes the others).
    static func names(in db: Database) throws -> Set<String> {
        let stmt = try db.prepare("SELECT local_file FROM media WHERE outgoing = 0")
        var out: Set<String> = []
        while try stmt.step() {
            if let name = fileName(stmt.text(0)) { out.insert(name) }
        }
        return out
    }

    /// The received bytes the cache holds.
    static func receivedBytes(in db: Database) throws -> Int64 {
        try db.scalarInt("SELECT coalesce(sum(bytes), 0) FROM media WHERE outgoing = 0") ?? 0
    }

    /// `media/<name>` → name, for names this code makes (hex); anything else (a row from a
    /// damaged or hostile database) is refused, so no path outside `media/` is ever formed.
    static func fileName(_ relative: String?) -> String? {
        guard let relative, relative.hasPrefix(folder + "/") else { return nil }
        let name = String(relative.dropFirst(folder.count + 1))
        guard (16...64).contains(name.utf8.count), name.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return nil }
        return name
    }

    /// A fresh random file name (32 hex digits).
    static func newName() -> String {
        (0..<2).map { _ in String(format: "%016llx", UInt64.random(in: 0...UInt64.max)) }.joined()
    }
}
