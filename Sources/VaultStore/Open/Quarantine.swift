import Foundation
package import VaultKeys

/// Caches set aside by a reset, under `quarantine/`, so that a key that comes back (a keyring
/// restored from backup) can still recover them. Bounded by count and age; when an entry is
/// pruned, its key item goes with it.
///
/// Each entry is a 0700 directory `<UTC time>-<reason>-<random>` holding the old `cache.db`,
/// WAL files and manifest, plus `reset.json`: the reason, the messages lost, whether the files
/// are still being moved, and whether the reset listener has been told.
///
/// Crash safety: the notice is written *before* any file moves (marked `moving`), so an open
/// that finds a `moving` entry finishes the move first (the files left in the cache directory
/// belong to that old cache: the replacement is only created after the move completes). A notice
/// stays `reported: false` until the engine has delivered it to the reset listeners; every
/// successful open reports the entries still unreported, so a crash never loses one.
///
/// Nothing is ever deleted because a move failed: a reset that cannot set the files aside is
/// abandoned (the cache is reported unavailable) and tried again at the next open. A plaintext
/// database is not kept when the app asks for encryption: it is overwritten and deleted instead.
struct Quarantine {
    let directory: CacheDirectory
    let policy: QuarantinePolicy
    let now: @Sendable () -> Date

    struct Notice: Codable {
        var reason: OfflineCacheResetReason
        var pendingMessagesLost: Int
        var at: Double
        var reported: Bool
        /// The files are still being moved in (a crash interrupted the reset).
        var moving: Bool?
        /// Plaintext database files are scrubbed rather than kept.
        var scrubPlaintext: Bool?
        /// This entry's files are being moved back into the cache directory (a restore); an open
        /// finishes the move when the directory is free of another cache, or abandons it.
        var restoring: Bool?
        /// Set aside to make room for a restored cache (that entry's name): not a reset, nothing
        /// to announce; its unsent messages were merged into the restored cache.
        var replacedBy: String?
        /// Written by an import (`CacheTransfer`) on its way to becoming the current cache.
        var imported: Bool?
        /// The outgoing copies went with the cache (its outbox could not be read, so none of its
        /// sends was salvaged): a restore brings them back with the rows that name them.
        var outgoing: Bool? = nil
    }

    static let noticeName = "reset.json"

    /// The cache files a reset sets aside, in the order they move: the manifest goes last, so a
    /// cache directory whose manifest is still there always has its notice-bearing entry. The
    /// received media folder goes with the database (its rows and, when encrypted, its key live
    /// there); the outgoing copies stay for the sends salvage keeps, and go with the cache when
    /// its outbox could not be read (none kept: they belong to the rows set aside).
    func movedFiles(outgoing: Bool) -> [String] {
        directory.databaseFiles + [directory.media, directory.recovery] + (outgoing ? [directory.outgoing] : []) + [directory.manifest]
    }

    /// Why a reset could not set the files aside (the reset is abandoned, nothing deleted).
    struct Failure: Error {
        let error: SecureFileError
    }

    /// Moves the cache's files into a new entry; returns its path relative to the cache directory.
    func setAside(reason: OfflineCacheResetReason, pendingMessagesLost: Int, keepPlaintext: Bool,
                  replacedBy: String? = nil) throws(Failure) -> String {
        let plaintext = CipherProof.header(of: directory.database) == .plaintext
        let label = replacedBy == nil ? reason.rawValue : "replaced"
        let name = "\(Quarantine.stamp(now()))-\(label)-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        let entry = "\(directory.quarantine)/\(name)"
        var notice = Notice(reason: reason, pendingMessagesLost: pendingMessagesLost, at: now().timeIntervalSince1970,
                            reported: replacedBy != nil, moving: true, scrubPlaintext: plaintext && !keepPlaintext, restoring: nil,
                            replacedBy: replacedBy, imported: nil, outgoing: replacedBy == nil && pendingMessagesLost < 0)
        do throws(SecureFileError) {
            try SecureFiles.ensureDirectory(directory.quarantine)
            try SecureFiles.ensureDirectory(entry)
            try Quarantine.write(notice, to: entry)
            try SecureFiles.syncDirectory(directory.quarantine)
            try move(into: entry, scrubPlaintext: notice.scrubPlaintext ?? false, outgoing: notice.outgoing ?? false)
            notice.moving = false
            try Quarantine.write(notice, to: entry)
        } catch {
            throw Failure(error: error)
        }
        return "quarantine/\(name)"
    }

    /// Moves (or, for plaintext that may not be kept, scrubs) whatever of the cache's files is
    /// still in the cache directory into `entry`.
    private func move(into entry: String, scrubPlaintext: Bool, outgoing: Bool) throws(SecureFileError) {
        for file in movedFiles(outgoing: outgoing) {
            var st = stat()
            guard lstat(file, &st) == 0 else { continue }
            if scrubPlaintext && (file == directory.media || file == directory.outgoing) {
                // Plain media of a plaintext cache that may not be kept: removed with it.
                try? FileManager.default.removeItem(atPath: file)
                continue
            }
            if scrubPlaintext && file != directory.manifest {
                CacheDirectory.scrubAndRemove(file)
                continue
            }
            let target = "\(entry)/\((file as NSString).lastPathComponent)"
            guard rename(file, target) == 0 else { throw .system(file, operation: "rename", errno: errno) }
        }
        try SecureFiles.syncDirectory(directory.path)
        try SecureFiles.syncDirectory(entry)
    }

    /// Finishes resets a crash interrupted (entries still marked `moving`). Throws when the move
    /// still cannot complete: the cache must then stay unavailable.
    func rollForward() throws(Failure) {
        // One listing for both passes: the first changes only entries the second skips.
        let listed = entries()
        for entry in listed where entry.notice?.moving == true {
            guard var notice = entry.notice else { continue }
            do throws(SecureFileError) {
                try move(into: entry.path, scrubPlaintext: notice.scrubPlaintext ?? false, outgoing: notice.outgoing ?? false)
                notice.moving = false
                try Quarantine.write(notice, to: entry.path)
            } catch {
                throw Failure(error: error)
            }
        }
        for entry in listed where entry.notice?.restoring == true {
            guard var notice = entry.notice else { continue }
            do throws(SecureFileError) {
                if directoryIsFree(ignoringFilesOf: entry.path) {
                    try moveBack(entry)
                } else {
                    // The cache it was to replace is still in place: the restore is abandoned.
                    notice.restoring = nil
                    try Quarantine.write(notice, to: entry.path)
                }
            } catch {
                throw Failure(error: error)
            }
        }
    }

    /// Whether the cache directory holds no cache of its own (files a restore already moved back
    /// from `entry` do not count).
    private func directoryIsFree(ignoringFilesOf entry: String) -> Bool {
        var st = stat()
        let manifestHere = lstat(directory.manifest, &st) == 0
        let databaseHere = lstat(directory.database, &st) == 0
        // A restore moves the manifest last: a manifest here means the move had finished, or
        // another cache is here. A database without a manifest is the entry's when the entry no
        // longer has one.
        if manifestHere { return false }
        if databaseHere { return lstat("\(entry)/cache.db", &st) != 0 }
        return true
    }

    /// Moves a restored entry's files back into the cache directory (the manifest last, so the
    /// cache is whole before it is named) and removes the entry.
    func moveBack(_ entry: Entry) throws(SecureFileError) {
        for file in movedFiles(outgoing: entry.notice?.outgoing ?? false) {
            let name = (file as NSString).lastPathComponent
            let source = "\(entry.path)/\(name)"
            var st = stat()
            guard lstat(source, &st) == 0 else { continue }
            if file == directory.outgoing {
                // Beside the copies of sends made since the reset (their folders are named by
                // local ids, unique): each send's folder moves back on its own.
                try SecureFiles.ensureDirectory(directory.outgoing)
                for send in (try? FileManager.default.contentsOfDirectory(atPath: source)) ?? [] {
                    let target = "\(directory.outgoing)/\(send)"
                    guard lstat(target, &st) != 0 else { continue }
                    guard rename("\(source)/\(send)", target) == 0 else { throw .system(source, operation: "rename", errno: errno) }
                }
                try SecureFiles.syncDirectory(directory.outgoing)
                continue
            }
            guard rename(source, file) == 0 else { throw .system(source, operation: "rename", errno: errno) }
        }
        try SecureFiles.syncDirectory(directory.path)
        Quarantine.removeEntry(entry.path)
        try? SecureFiles.syncDirectory(directory.quarantine)
    }

    /// Marks an entry as being restored (see `rollForward`).
    func markRestoring(_ entry: Entry) throws(SecureFileError) {
        guard var notice = entry.notice else { throw .notFound("\(entry.path)/\(Quarantine.noticeName)") }
        notice.restoring = true
        try Quarantine.write(notice, to: entry.path)
    }

    /// Records that the reset listener has been told about these entries.
    func markReported(_ relatives: [String]) {
        for relative in relatives {
            let path = "\(directory.path)/\(relative)"
            guard var notice = Quarantine.readNotice("\(path)/\(Quarantine.noticeName)"), !notice.reported else { continue }
            notice.reported = true
            try? Quarantine.write(notice, to: path)
        }
    }

    /// Resets whose listeners have not been told yet (completed moves only).
    func unreportedResets() -> [CacheReset] {
        entries().compactMap { entry in
            guard let notice = entry.notice, !notice.reported, notice.moving != true, notice.replacedBy == nil else { return nil }
            return CacheReset(reason: notice.reason, pendingMessagesLost: notice.pendingMessagesLost, quarantinedAs: "quarantine/\(entry.name)")
        }
    }

    struct Entry {
        var name: String
        var path: String
        var notice: Notice?
        var createdAt: Date
    }

    /// Entries, oldest first. A `quarantine` that is not a private directory of ours (a symlink
    /// planted there) is not listed at all, so nothing outside the cache is ever touched.
    func entries() -> [Entry] {
        guard (try? SecureFiles.checkDirectory(directory.quarantine)) != nil,
              let names = try? FileManager.default.contentsOfDirectory(atPath: directory.quarantine) else { return [] }
        // Salvage's scratch copies (`.salvage-…`) are not entries.
        return names.sorted().filter { !$0.hasPrefix(".") }.compactMap { name in
            let path = "\(directory.quarantine)/\(name)"
            guard (try? SecureFiles.checkDirectory(path)) != nil else { return nil }
            var st = stat()
            guard lstat(path, &st) == 0 else { return nil }
            let notice = Quarantine.readNotice("\(path)/\(Quarantine.noticeName)")
            let created = notice.map { Date(timeIntervalSince1970: $0.at) } ?? Date(timeIntervalSince1970: TimeInterval(st.st_mtim.tv_sec))
            return Entry(name: name, path: path, notice: notice, createdAt: created)
        }
    }

    /// Drops entries beyond the count or age limits, with their key items. An entry whose reset
    /// has not been reported yet keeps its notice (its cache files still go).
    func prune(currentCacheId: String?, keyStores: [any KeyStore], applicationId: String, account: String,
               shouldStop: () -> Bool = { false }) {
        let all = entries().filter { $0.notice?.moving != true && $0.notice?.restoring != true }
        let cutoff = now().addingTimeInterval(-policy.maxAge)
        var keep = all.filter { $0.createdAt >= cutoff }
        if keep.count > policy.maxEntries {
            // Over the count: what can still be restored (its key is back, or a recovery secret
            // opens it) is kept before what cannot; the newest first within each.
            let restorable = keep.filter { isRestorable($0, keyStores: keyStores, applicationId: applicationId, account: account) }
            let names = Set(restorable.map(\.name))
            let others = keep.filter { !names.contains($0.name) }
            keep = Array((others + restorable).suffix(policy.maxEntries))
        }
        let keptNames = Set(keep.map(\.name))
        for entry in all where !keptNames.contains(entry.name) {
            if shouldStop() { return }
            if case .valid(let old) = ManifestFile.read(directory: entry.path), old.encrypted, old.cacheId != currentCacheId,
               let store = KeyStoreSelection.store(for: old, among: keyStores) {
                try? store.delete(KeyItemID(applicationId: applicationId, account: account, cacheId: old.cacheId))
            }
            Quarantine.removeEntry(entry.path, keepNotice: entry.notice.map { !$0.reported } ?? false)
        }
    }

    /// Whether an entry could be restored now: it has a recovery file, or its key is in a store.
    func isRestorable(_ entry: Entry, keyStores: [any KeyStore], applicationId: String, account: String) -> Bool {
        var st = stat()
        if lstat("\(entry.path)/\(RecoveryFile.name)", &st) == 0 { return true }
        return Quarantine.keyPresent(entry, keyStores: keyStores, applicationId: applicationId, account: account) == true
    }

    /// Whether the key an entry needs is in its store now: nil when the entry is not an encrypted
    /// cache with a manifest, or the store cannot answer.
    static func keyPresent(_ entry: Entry, keyStores: [any KeyStore], applicationId: String, account: String) -> Bool? {
        guard case .valid(let manifest) = ManifestFile.read(directory: entry.path), manifest.encrypted,
              let store = KeyStoreSelection.store(for: manifest, among: keyStores) else { return nil }
        switch store.lookup(KeyItemID(applicationId: applicationId, account: account, cacheId: manifest.cacheId)) {
        case .found(let key, _): return key.checkValue(cacheId: manifest.cacheId) == manifest.keyCheck
        case .absent: return false
        case .unavailable: return nil
        }
    }

    /// Removes an entry's regular files (scrubbing plaintext database files) and the entry itself.
    /// Anything that is not a regular file is left alone.
    static func removeEntry(_ path: String, keepNotice: Bool = false) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        let plaintext = CipherProof.header(of: "\(path)/cache.db") == .plaintext
        for name in names where !(keepNotice && name == noticeName) {
            let file = "\(path)/\(name)"
            var st = stat()
            guard lstat(file, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            plaintext && name.hasPrefix("cache.db") ? CacheDirectory.scrubAndRemove(file) : CacheDirectory.remove(file)
        }
        if !keepNotice { rmdir(path) }
    }

    /// Deletes every entry holding a plaintext database (used when encryption is turned on, so no
    /// plaintext copy stays behind). Unreported notices survive.
    func purgePlaintext() {
        for entry in entries() where CipherProof.header(of: "\(entry.path)/cache.db") == .plaintext {
            Quarantine.removeEntry(entry.path, keepNotice: entry.notice.map { !$0.reported } ?? false)
        }
    }

    static func write(_ notice: Notice, to entry: String) throws(SecureFileError) {
        let data = (try? JSONEncoder().encode(notice)) ?? Data()
        try SecureFiles.writeAtomically("\(entry)/\(noticeName)", data: Array(data))
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

/// Which configured key store holds a manifest's key. By name when the manifest records one (a
/// store of the same tier that never held the key would answer "absent" and cost the cache);
/// by tier only for manifests that name no store.
package enum KeyStoreSelection {
    package static func store(for manifest: Manifest, among stores: [any KeyStore]) -> (any KeyStore)? {
        if let name = manifest.keyStore {
            return stores.first { $0.name == name && $0.tier == manifest.keyStorage }
        }
        return stores.first { $0.tier == manifest.keyStorage }
    }
}
