import Foundation
import VaultKeys

/// Turning encryption on or off for an existing cache: the readable cache is exported with
/// `sqlcipher_export` into `cache.db.next`, verified, and swapped in, so nothing is lost (the other
/// SDKs rebuild and lose unsent messages). Only an unreadable cache is rebuilt.
extension OpenProcedure {
    mutating func changeEncryption(_ manifest: Manifest) throws -> (VaultCache, EncryptionUnavailable?) {
        config.encryption ? try encrypt(manifest) : try decrypt(manifest)
    }

    /// Plaintext → encrypted. No plaintext copy stays behind: the old file is overwritten, its
    /// WAL too, and plaintext quarantine entries are purged.
    private mutating func encrypt(_ manifest: Manifest) throws -> (VaultCache, EncryptionUnavailable?) {
        let store: any KeyStore
        switch encryptionFeasibility() {
        case .ok(let chosen): store = chosen
        case .transient(let reason): throw OpenStop.unavailable(.keyStore(reason))
        case .cannotRun(let why):
            // Encryption cannot run: the plaintext cache is left exactly as it is.
            guard config.failureBehavior == .plaintextFallback else { throw OpenStop.cannotEncrypt(why) }
            notes.append("encryption cannot run (\(why)); the existing unencrypted cache stays in use (plaintextFallback)")
            return (try openDatabase(manifest, keying: .plaintext, store: nil), why)
        }
        let key = try CacheKey.generate()
        let keyId = UUID().uuidString.lowercased()
        let profile = CipherProfile.standard(engine: engine)
        var migrated = Manifest(cacheId: manifest.cacheId, encrypted: true, keyStorage: store.tier, keyStore: store.name,
                                keyId: keyId, keyCheck: key.checkValue(cacheId: manifest.cacheId), cipherProfile: profile,
                                createdAt: config.now())
        migrated.createdAt = manifest.createdAt
        let target: ConnectionKeying = .encrypted(key, profile)
        guard try migrate(from: .plaintext, to: target, storingKey: (key, keyId, store), manifest: manifest) else {
            return try createFresh(afterReset: true)
        }
        try swapIn(migrated, oldWasPlaintext: true)
        Quarantine(directory: dir, policy: config.quarantine, now: config.now).purgePlaintext()
        resets.append(CacheReset(reason: .encryptionChanged, pendingMessagesLost: 0, quarantinedAs: nil))
        notes.append("encryption turned on: the cache was migrated (sqlcipher_export), nothing lost")
        return (try openDatabase(migrated, keying: target, store: store), nil)
    }

    /// Encrypted → plaintext. Needs the old key; a locked keyring waits, a lost key rebuilds.
    private mutating func decrypt(_ manifest: Manifest) throws -> (VaultCache, EncryptionUnavailable?) {
        let (found, foundStore) = try verifiedKey(for: manifest, onLost: .encryptionChanged, onWrong: .encryptionChanged)
        guard let key = found, let store = foundStore else { return try createFresh(afterReset: true) }
        let source: ConnectionKeying = .encrypted(key, manifest.cipherProfile ?? .standard(engine: engine))
        var plain = Manifest(cacheId: manifest.cacheId, encrypted: false, keyStorage: .none, keyStore: nil, keyId: nil,
                             keyCheck: nil, cipherProfile: nil, createdAt: config.now())
        plain.createdAt = manifest.createdAt
        guard try migrate(from: source, to: .plaintext, storingKey: nil, manifest: manifest) else {
            return try createFresh(afterReset: true)
        }
        try swapIn(plain, oldWasPlaintext: false)
        try? store.delete(itemID(manifest.cacheId))
        resets.append(CacheReset(reason: .encryptionChanged, pendingMessagesLost: 0, quarantinedAs: nil))
        notes.append("encryption turned off: the cache was migrated (sqlcipher_export), nothing lost")
        return (try openDatabase(plain, keying: .plaintext, store: nil), nil)
    }

    /// Exports the current database into `cache.db.next` under `target` and verifies it.
    /// Returns false when the old cache is unreadable (it has then been reset); throws when the
    /// change cannot be made now (nothing changed: the old cache stays exactly as it was).
    ///
    /// Once the source has opened and its schema checks out, it is readable by definition: any
    /// later failure (a full disk during the export, a failed verification) abandons the change
    /// and never resets the cache.
    private mutating func migrate(from sourceKeying: ConnectionKeying, to target: ConnectionKeying,
                                  storingKey: (CacheKey, String, any KeyStore)?, manifest: Manifest) throws -> Bool {
        // Exporting would replay a damaged WAL and drop its later commits unseen (WALCheck).
        if let damage = WALCheck.inspect(path: dir.wal) {
            notes.append(damage.description)
            try reset(.corrupted, manifest: manifest, salvageWith: sourceKeying)
            return false
        }
        let source: DatabaseQueue
        do {
            source = try DatabaseQueue(path: dir.database, keying: sourceKeying, options: config.connection, label: "migration-source")
            try source.sync { db in try Schema.prepare(db, expectExisting: true) }
        } catch {
            switch DatabaseVerdict(error) {
            case .transient(let reason):
                throw OpenStop.unavailable(reason)
            case .damaged:
                notes.append("the cache could not be read for the encryption change (\(error)); rebuilding")
                try reset(.encryptionChanged, manifest: manifest, salvageWith: sourceKeying)
                return false
            case .unclassified(let code):
                try escalateIfRecurring(manifest, code: code, salvageWith: sourceKeying)
                return false
            }
        }
        defer { source.close() }
        try requireRoomForACopy()
        if let (key, keyId, store) = storingKey {
            do {
                try store.store(key, keyId: keyId, for: itemID(manifest.cacheId), label: config.keyLabel)
            } catch {
                throw OpenStop.unavailable(.keyStore(error.reason))
            }
        }
        removeMigrationLeftovers()
        do {
            let counts = try source.sync { db in try EncryptionMigration.export(db, to: dir.migrationTarget, keying: target, engine: engine) }
            let check = try DatabaseQueue(path: dir.migrationTarget, keying: target, options: config.connection, label: "migration-check")
            defer { check.close() }
            let copied = try check.sync { db -> [String: Int64] in
                try Schema.verify(db)
                return try EncryptionMigration.rowCounts(db)
            }
            guard copied == counts else {
                throw DatabaseError(extendedCode: 1, message: "row counts differ after export", operation: "migration")
            }
            try source.sync { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
            return true
        } catch {
            removeMigrationLeftovers()
            if let (_, _, store) = storingKey { try? store.delete(itemID(manifest.cacheId)) }
            notes.append("the encryption change failed and was abandoned (\(error)); the cache is unchanged")
            switch DatabaseVerdict(error) {
            case .transient(let reason): throw OpenStop.unavailable(reason)
            case .damaged, .unclassified:
                throw OpenStop.unavailable(.migrationFailed(code: (error as? DatabaseError)?.primaryCode ?? 1))
            }
        }
    }

    /// The export writes a full copy beside the original: refuse early (as a full disk) when the
    /// file system cannot hold it with a margin, rather than fail halfway.
    private mutating func requireRoomForACopy() throws {
        if let (needed, free) = EncryptionMigration.shortfallForACopy(dir) {
            notes.append("the encryption change needs about \(needed >> 10) KiB free; \(free >> 10) KiB are")
            throw OpenStop.unavailable(.diskFull)
        }
    }

    /// Replaces the old database with the migrated one. The old WAL is removed before the rename
    /// (a leftover WAL would be replayed into the new file), and a plaintext original is
    /// overwritten through a descriptor kept open across the rename.
    private mutating func swapIn(_ manifest: Manifest, oldWasPlaintext: Bool) throws {
        for companion in [dir.wal, dir.shm] {
            oldWasPlaintext ? CacheDirectory.scrubAndRemove(companion) : CacheDirectory.remove(companion)
        }
        let oldFd = open(dir.database, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        defer { if oldFd >= 0 { close(oldFd) } }
        guard rename(dir.migrationTarget, dir.database) == 0 else {
            throw OpenStop.unavailable(.readOnly)
        }
        try? SecureFiles.syncDirectory(dir.path)
        do {
            try ManifestFile.write(manifest, directory: dir.path)
        } catch {
            // The next open infers the manifest from the header and the key item.
            notes.append("the manifest could not be written after the migration: \(error)")
        }
        if oldWasPlaintext, oldFd >= 0 { CacheDirectory.scrub(oldFd) }
    }

    /// Rebuilds a manifest from the database itself: its header says plaintext or not, and for an
    /// encrypted file the account's key items are tried (the hinted cache id first).
    mutating func infer(header: CipherProof.Header, hint: Manifest?) throws -> (VaultCache, EncryptionUnavailable?) {
        // A damaged WAL must reach `openDatabase` as it is (WALCheck): the probes read a copy.
        let probeCopy = try probeCopyIfTheWALIsDamaged()
        defer { if let probeCopy { Quarantine.removeEntry((probeCopy as NSString).deletingLastPathComponent) } }
        let probePath = probeCopy ?? dir.database
        if header == .plaintext {
            do {
                var probeOptions = config.connection
                probeOptions.readOnly = true
                try DatabaseQueue(path: probePath, keying: .plaintext, options: probeOptions, label: "probe").close()
            } catch {
                switch DatabaseVerdict(error) {
                case .transient(let reason):
                    throw OpenStop.unavailable(reason)
                case .unclassified(let code):
                    // Without a manifest there is nowhere to count; never a reset on a guess.
                    throw OpenStop.unavailable(.unclassified(code: code, attempt: 0, of: config.escalationThreshold))
                case .damaged:
                    try reset(.corrupted, manifest: hint, salvageWith: .plaintext)
                    return try createFresh(afterReset: true)
                }
            }
            let cacheId = hint.map(\.cacheId) ?? UUID().uuidString.lowercased()
            let manifest = Manifest(cacheId: cacheId, encrypted: false, keyStorage: .none, keyStore: nil, keyId: nil,
                                    keyCheck: nil, cipherProfile: nil, createdAt: config.now())
            try writeRepaired(manifest)
            return try openExisting(manifest)
        }
        guard engine.isAvailable else { throw OpenStop.unavailable(.cipherUnavailable) }
        var candidates: [(any KeyStore, KeyItemSummary)] = []
        var blocked: KeyUnavailableReason?
        for store in config.keyStores {
            switch store.items(applicationId: config.applicationId, account: config.account) {
            // A rotation's staging item holds a key no manifest names (KeyChange).
            case .items(let list): candidates += list.filter { !$0.id.cacheId.hasSuffix(KeyChange.stagingSuffix) }.map { (store, $0) }
            case .unavailable(let reason): blocked = blocked ?? reason
            }
        }
        if let hinted = hint?.cacheId {
            candidates.sort { a, _ in a.1.id.cacheId == hinted }
        }
        var refusedKeys: [CacheKey] = []
        for (store, item) in candidates {
            let key: CacheKey
            let keyId: String
            switch store.lookup(item.id) {
            case .found(let k, let id): (key, keyId) = (k, id)
            case .unavailable(let reason): blocked = blocked ?? reason; continue
            case .absent: continue
            }
            var profile = hint?.cipherProfile ?? .standard(engine: engine)
            var probeOptions = config.connection
            probeOptions.readOnly = true
            do {
                try DatabaseQueue(path: probePath, keying: .encrypted(key, profile), options: probeOptions, label: "probe").close()
            } catch {
                // Only "not a database under this key" moves on to the next key; a busy, full or
                // failing file says nothing about the key and stops the inference.
                switch DatabaseVerdict(error) {
                case .damaged:
                    // A hinted profile may be what is wrong, not the key (ManifestHint).
                    guard let proven = profileProvenByDatabase(key: key, failed: profile, path: probePath) else {
                        refusedKeys.append(key)
                        continue
                    }
                    profile = proven
                case .transient(let reason): throw OpenStop.unavailable(reason)
                case .unclassified(let code): throw OpenStop.unavailable(.unclassified(code: code, attempt: 0, of: config.escalationThreshold))
                }
            }
            var manifest = Manifest(cacheId: item.id.cacheId, encrypted: true, keyStorage: store.tier, keyStore: store.name,
                                    keyId: keyId, keyCheck: key.checkValue(cacheId: item.id.cacheId), cipherProfile: profile,
                                    createdAt: config.now())
            if let hint, hint.cacheId == item.id.cacheId { manifest.createdAt = hint.createdAt }
            try writeRepaired(manifest)
            return try openExisting(manifest)
        }
        if let blocked { throw OpenStop.unavailable(.keyStore(blocked)) }
        // No key opens it. One whose pages decrypt is its key all the same: the header is
        // damaged, the key is not wrong (ManifestHint).
        if databaseKeyAmong(refusedKeys, profile: hint?.cipherProfile ?? .standard(engine: engine)) != nil {
            notes.append("a key item decrypts the database's pages but its header is damaged")
            try reset(.corrupted, manifest: hint, salvageWith: nil)
            return try createFresh(afterReset: true)
        }
        try reset(candidates.isEmpty ? .keyLost : .wrongKey, manifest: hint, salvageWith: nil)
        return try createFresh(afterReset: true)
    }

    private mutating func writeRepaired(_ manifest: Manifest) throws {
        do {
            try ManifestFile.write(manifest, directory: dir.path)
            notes.append("the manifest was repaired")
        } catch {
            throw OpenStop.unavailable(DatabaseVerdict.reason(error))
        }
    }
}

enum EncryptionMigration {
    /// Exports the main database of `db` into a new file at `path` keyed with `keying`, and returns
    /// the source's row counts for verification.
    static func export(_ db: Database, to path: String, keying: ConnectionKeying, engine: CipherEngine) throws -> [String: Int64] {
        let counts = try rowCounts(db)
        let version = try db.scalarInt("PRAGMA user_version") ?? 0
        try DatabaseQueue.createPrivateFile(path)
        let attach = try db.prepare("ATTACH DATABASE ? AS migration KEY ?")
        try attach.bind(.text(path), at: 1)
        switch keying {
        case .plaintext:
            // An empty key makes the attached database plaintext.
            try attach.bind(.text(""), at: 2)
            _ = try attach.step()
        case .encrypted(let key, let profile):
            // The raw-key literal is bound without a copy and zeroed when this closure returns.
            try key.withRawKeyLiteral { (literal) throws -> Void in
                try attach.bindNoCopy(literal, at: 2)
                _ = try attach.step()
                attach.resetAndClear()
            }
            for pragma in profile.pragmas(engine: engine, schema: "migration") { try db.executeSingle(pragma) }
        }
        do {
            _ = try db.scalarText("SELECT sqlcipher_export('migration')")
            try db.execute("PRAGMA migration.user_version = \(version)")
        } catch {
            try? db.execute("DETACH DATABASE migration")
            throw error
        }
        try db.execute("DETACH DATABASE migration")
        return counts
    }

    /// (needed, free) bytes when the file system cannot hold a copy of the database with a margin
    /// (an export writes a full copy beside the original); nil when it can, or cannot be asked.
    static func shortfallForACopy(_ dir: CacheDirectory, alsoCopying trees: [String] = []) -> (Int64, Int64)? {
        var fs = statvfs()
        guard statvfs(dir.path, &fs) == 0 else { return nil }
        let free = Int64(fs.f_bavail) * Int64(fs.f_frsize)
        let needed = 2 * (CacheDirectory.fileSize(dir.database) + CacheDirectory.fileSize(dir.wal)) + (1 << 20)
            + trees.reduce(0) { $0 + CacheDirectory.treeSize($1) }
        return free < needed ? (needed, free) : nil
    }

    static func rowCounts(_ db: Database) throws -> [String: Int64] {
        var counts: [String: Int64] = [:]
        for table in Schema.requiredColumns.keys {
            counts[table] = try db.scalarInt("SELECT count(*) FROM \(table)") ?? 0
        }
        return counts
    }
}
