import Foundation
import VaultKeys

/// The manifest is a hint, the database is the proof. `manifest.json` is a plaintext file anyone
/// with the user's rights can edit (or a tool can rewrite); when what it says disagrees with what
/// the database proves, the database wins, the manifest is repaired (atomic write), and nothing
/// is reset for it:
///
/// - A key whose key-check value matched is the right key. If the database then refuses to open
///   under the manifest's cipher profile, the profiles the cache could have been written with
///   (the standard one, then the recorded one with each page size and HMAC setting) are tried
///   before calling the cache damaged. Page 1 decrypts and verifies (HMAC) under exactly one.
/// - Without a manifest, a key that decrypts the database's pages into b-tree pages is that
///   database's key even when its header (the salt, page 1) is damaged: the cache is then
///   `.corrupted`, not `.wrongKey`.
extension OpenProcedure {
    /// Another cipher profile under which `key` opens the database (page 1 reads and verifies),
    /// when the one tried (`failed`) does not. Nil when `failed` itself opens (the trouble is
    /// elsewhere) or when none does.
    mutating func profileProvenByDatabase(key: CacheKey, failed: CipherProfile, path: String? = nil) -> CipherProfile? {
        if probe(.encrypted(key, failed), path: path) == .opens { return nil }
        for candidate in Self.candidateProfiles(around: failed, engine: engine) where candidate != failed {
            switch probe(.encrypted(key, candidate), path: path) {
            case .opens:
                notes.append("the manifest's cipher profile (page size \(failed.pageSize), HMAC \(failed.useHMAC ? "on" : "off")) "
                    + "disagreed with the database (page size \(candidate.pageSize), HMAC \(candidate.useHMAC ? "on" : "off")); it was repaired")
                return candidate
            case .refused, .failed:
                continue
            }
        }
        return nil
    }

    /// The profiles a cache of ours may have been written with, most likely first: the standard
    /// one, then the recorded one under every page size and HMAC setting.
    static func candidateProfiles(around recorded: CipherProfile, engine: CipherEngine) -> [CipherProfile] {
        var out: [CipherProfile] = []
        func add(_ p: CipherProfile) { if !out.contains(p) { out.append(p) } }
        var standard = CipherProfile.standard(engine: engine)
        standard.createdBy = recorded.createdBy
        add(standard)
        for base in [recorded, standard] {
            for size in [4096, 1024, 2048, 8192, 16384, 32768, 65536, 512] {
                for hmac in [true, false] {
                    var p = base
                    p.pageSize = size
                    p.useHMAC = hmac
                    add(p)
                }
            }
        }
        return out
    }

    enum ProbeOutcome: Equatable {
        case opens
        /// Not a database under this keying (or damaged page 1).
        case refused
        /// Busy, full, out of descriptors…: says nothing.
        case failed
    }

    /// Opens the database (or the copy at `path`) read-only under `keying` far enough to read
    /// page 1 and the schema.
    func probe(_ keying: ConnectionKeying, path: String? = nil) -> ProbeOutcome {
        var options = config.connection
        options.readOnly = true
        options.create = false
        do {
            try DatabaseQueue(path: path ?? dir.database, keying: keying, options: options, label: "probe").close()
            return .opens
        } catch {
            if case .damaged = DatabaseVerdict(error) { return .refused }
            return .failed
        }
    }

    /// Repairs the manifest with the profile the database proved, and opens with it.
    mutating func openWithProvenProfile(_ manifest: Manifest, key: CacheKey, profile: CipherProfile,
                                        store: (any KeyStore)?) throws -> VaultCache {
        var repaired = manifest
        repaired.cipherProfile = profile
        do {
            try ManifestFile.write(repaired, directory: dir.path)
        } catch {
            throw OpenStop.unavailable(DatabaseVerdict.reason(error))
        }
        return try openDatabase(repaired, keying: .encrypted(key, profile), store: store)
    }

    /// Whether one of `keys` is proven, by the pages themselves, to be the key of the database
    /// (used when SQLite cannot open it under any: a damaged header).
    func databaseKeyAmong(_ keys: [CacheKey], profile: CipherProfile) -> CacheKey? {
        let sizes = [profile.pageSize] + (profile.pageSize == 4096 ? [] : [4096])
        return keys.first { PageCipher.keyDecryptsPages(of: dir.database, key: $0, pageSizes: sizes) }
    }

    /// When the WAL is damaged (WALCheck), a copy of the database file alone for the inference's
    /// probes: a probe connection would replay the damaged WAL and, closing, checkpoint its valid
    /// prefix and delete it, so the damage would never be seen. Nil when the WAL is fine.
    func probeCopyIfTheWALIsDamaged() throws -> String? {
        guard WALCheck.inspect(path: dir.wal) != nil else { return nil }
        let scratch = "\(dir.quarantine)/\(Salvage.scratchPrefix)probe-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
        do throws(SecureFileError) {
            try SecureFiles.ensureDirectory(dir.quarantine)
            try SecureFiles.ensureDirectory(scratch)
            try Salvage.copyFile(dir.database, to: "\(scratch)/cache.db")
        } catch {
            Quarantine.removeEntry(scratch)
            throw OpenStop.unavailable(DatabaseVerdict.reason(error))
        }
        return "\(scratch)/cache.db"
    }
}
