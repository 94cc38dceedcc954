import Foundation
import VaultKeys

/// Caches set aside by a reset, under `quarantine/`, so that a key that comes back (a keyring
/// restored from backup) can still recover them. Bounded by count and age; when an entry is
/// pruned, its key item goes with it.
///
/// Each entry is a 0700 directory `<UTC time>-<reason>-<random>` holding the old `cache.db`,
/// WAL files and manifest, plus `reset.json` (the reason, the messages lost, whether the reset
/// listener has been told). A plaintext database is never kept when the app asks for encryption:
/// it is overwritten and deleted instead.
struct Quarantine {
    let directory: CacheDirectory
    let policy: QuarantinePolicy
    let now: @Sendable () -> Date

    struct Notice: Codable {
        var reason: OfflineCacheResetReason
        var pendingMessagesLost: Int
        var at: Double
        var reported: Bool
    }

    static let noticeName = "reset.json"

    /// Moves the cache's files into a new entry; returns its path relative to the cache directory.
    mutating func setAside(reason: OfflineCacheResetReason, pendingMessagesLost: Int, keepPlaintext: Bool) -> String? {
        let plaintext = CipherProof.header(of: directory.database) == .plaintext
        let files = directory.databaseFiles + [directory.manifest]
        guard policy.maxEntries > 0 else {
            for file in files { plaintext ? CacheDirectory.scrubAndRemove(file) : CacheDirectory.remove(file) }
            return nil
        }
        let stamp = Quarantine.stamp(now())
        let name = "\(stamp)-\(reason.rawValue)-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        let entry = "\(directory.quarantine)/\(name)"
        do {
            try SecureFiles.ensureDirectory(directory.quarantine)
            try SecureFiles.ensureDirectory(entry)
        } catch {
            // Cannot keep a copy: the files stay where they are and the caller's fresh cache
            // replaces them. Plaintext is still scrubbed.
            for file in files { plaintext ? CacheDirectory.scrubAndRemove(file) : CacheDirectory.remove(file) }
            return nil
        }
        for file in files {
            let target = "\(entry)/\((file as NSString).lastPathComponent)"
            if plaintext && !keepPlaintext && file != directory.manifest {
                CacheDirectory.scrubAndRemove(file)
            } else if rename(file, target) != 0 && errno != ENOENT {
                CacheDirectory.remove(file)
            }
        }
        let notice = Notice(reason: reason, pendingMessagesLost: pendingMessagesLost, at: now().timeIntervalSince1970, reported: false)
        if let data = try? JSONEncoder().encode(notice) {
            try? SecureFiles.writeAtomically("\(entry)/\(Quarantine.noticeName)", data: Array(data))
        }
        try? SecureFiles.syncDirectory(directory.path)
        return "quarantine/\(name)"
    }

    /// Records that the reset listener has been (or is about to be) told about an entry.
    func markReported(_ relative: String?) {
        guard let relative else { return }
        let path = "\(directory.path)/\(relative)/\(Quarantine.noticeName)"
        guard var notice = Quarantine.readNotice(path), !notice.reported else { return }
        notice.reported = true
        if let data = try? JSONEncoder().encode(notice) {
            try? SecureFiles.writeAtomically(path, data: Array(data))
        }
    }

    /// Resets set aside by an earlier run that stopped before the new cache existed.
    func takeUnreportedResets() -> [CacheReset] {
        entries().compactMap { entry in
            guard let notice = entry.notice, !notice.reported else { return nil }
            return CacheReset(reason: notice.reason, pendingMessagesLost: notice.pendingMessagesLost, quarantinedAs: "quarantine/\(entry.name)")
        }
    }

    struct Entry {
        var name: String
        var path: String
        var notice: Notice?
        var createdAt: Date
    }

    /// Entries, oldest first.
    func entries() -> [Entry] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.quarantine) else { return [] }
        return names.sorted().compactMap { name in
            let path = "\(directory.quarantine)/\(name)"
            var st = stat()
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else { return nil }
            let notice = Quarantine.readNotice("\(path)/\(Quarantine.noticeName)")
            let created = notice.map { Date(timeIntervalSince1970: $0.at) } ?? Date(timeIntervalSince1970: TimeInterval(st.st_mtim.tv_sec))
            return Entry(name: name, path: path, notice: notice, createdAt: created)
        }
    }

    /// Drops entries beyond the count or age limits, with their key items.
    mutating func prune(keepingCacheId: String?, keyStores: [any KeyStore], applicationId: String, account: String) {
        let all = entries()
        let current: String? = {
            if case .valid(let m) = ManifestFile.read(directory: directory.path) { return m.cacheId }
            return nil
        }()
        let cutoff = now().addingTimeInterval(-policy.maxAge)
        var keep = all.filter { $0.createdAt >= cutoff }
        if keep.count > policy.maxEntries { keep = Array(keep.suffix(policy.maxEntries)) }
        let keptNames = Set(keep.map(\.name))
        for entry in all where !keptNames.contains(entry.name) {
            if case .valid(let old) = ManifestFile.read(directory: entry.path), old.encrypted,
               old.cacheId != current, old.cacheId != keepingCacheId,
               let store = keyStores.first(where: { $0.name == old.keyStore }) {
                try? store.delete(KeyItemID(applicationId: applicationId, account: account, cacheId: old.cacheId))
            }
            Quarantine.removeEntry(entry.path)
        }
    }

    static func removeEntry(_ path: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        let plaintext = CipherProof.header(of: "\(path)/cache.db") == .plaintext
        for name in names {
            let file = "\(path)/\(name)"
            plaintext && name.hasPrefix("cache.db") ? CacheDirectory.scrubAndRemove(file) : CacheDirectory.remove(file)
        }
        rmdir(path)
    }

    /// Deletes every entry holding a plaintext database (used when encryption is turned on, so no
    /// plaintext copy stays behind).
    func purgePlaintext() {
        for entry in entries() where CipherProof.header(of: "\(entry.path)/cache.db") == .plaintext {
            Quarantine.removeEntry(entry.path)
        }
    }

    static func readNotice(_ path: String) -> Notice? {
        guard let bytes = try? SecureFiles.read(path, limit: 4096) else { return nil }
        return try? JSONDecoder().decode(Notice.self, from: Data(bytes))
    }

    static func stamp(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss.SSS'Z'"
        return formatter.string(from: date)
    }
}
