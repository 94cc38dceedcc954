import Foundation
import VaultKeys

/// Why a key change was not made. Every case but `.unfinished` means nothing changed: the cache
/// keeps its key, where it was, and opens as before.
public enum KeyManagementError: Error, Sendable, Equatable, CustomStringConvertible {
    /// There is no cache in the directory.
    case noCache
    /// The cache is not encrypted (or encryption cannot run here): there is no key to change.
    case notEncrypted
    /// The cache cannot be opened now (locked keyring, busy database, full disk, in use…).
    case unavailable(UnavailableReason)
    /// No key store of that name is configured.
    case unknownStore(String)
    /// The key already is in that store.
    case alreadyInStore(String)
    /// The rewritten database or the copied key did not verify; the change was abandoned.
    case verificationFailed(String)
    /// The change passed the point of no return and then stopped (the disk filled, the store
    /// closed): the cache is consistent, and its next open finishes the change.
    case unfinished(UnavailableReason)
    /// No quarantine entry of that name.
    case noSuchEntry(String)
    /// The key that quarantined cache needs is not in its store (use its recovery secret).
    case keyNotPresent(String)
    /// No quarantined cache has a recovery file.
    case noRecoverableCache
    /// The recovery secret opens none of the quarantined caches (a typo is caught earlier, by the
    /// secret's checksum). Attempts are not limited; each costs the key derivation's time.
    case wrongSecret
    /// An export file that cannot be used (not an export, damaged, or cannot be created).
    case fileUnusable(String)
    /// Test seam: the change stopped at a crash point, as if the process had been killed.
    case simulatedCrash

    public var code: String {
        switch self {
        case .noCache: return "noCache"
        case .notEncrypted: return "notEncrypted"
        case .unavailable: return "unavailable"
        case .unknownStore: return "unknownStore"
        case .alreadyInStore: return "alreadyInStore"
        case .verificationFailed: return "verificationFailed"
        case .unfinished: return "unfinished"
        case .noSuchEntry: return "noSuchEntry"
        case .keyNotPresent: return "keyNotPresent"
        case .noRecoverableCache: return "noRecoverableCache"
        case .wrongSecret: return "wrongSecret"
        case .fileUnusable: return "fileUnusable"
        case .simulatedCrash: return "simulatedCrash"
        }
    }

    public var description: String {
        switch self {
        case .noCache: return "there is no cache in this directory"
        case .notEncrypted: return "the cache is not encrypted: it has no key to change"
        case .unavailable(let reason): return "the cache cannot be opened now (\(reason.code): \(reason)); nothing changed, try again"
        case .unknownStore(let name): return "no key store named \(name) is configured"
        case .alreadyInStore(let name): return "the key already is in the \(name) key store"
        case .verificationFailed(let what): return "\(what) did not verify; the change was abandoned and nothing changed"
        case .unfinished(let reason): return "the key change stopped past its point of no return (\(reason.code)); the cache's next open finishes it"
        case .noSuchEntry(let id): return "there is no quarantined cache \(id)"
        case .keyNotPresent(let id): return "the key of quarantined cache \(id) is not in its key store; its recovery secret can restore it ('chatvault recover')"
        case .noRecoverableCache: return "no quarantined cache has a recovery file"
        case .wrongSecret: return "the secret opens none of the caches it was tried on (a quarantined cache, an export); nothing changed"
        case .fileUnusable(let why): return "the export file cannot be used: \(why)"
        case .simulatedCrash: return "stopped at a simulated crash point"
        }
    }
}

/// What a rotation or a move did (key ids and store names only).
public struct KeyChangeReport: Sendable, Equatable {
    public let cacheId: String
    public let oldKeyId: String
    public let newKeyId: String
    public let fromStore: String
    public let toStore: String
    /// Wall-clock seconds, the open included.
    public let seconds: Double
    /// The database's size afterwards.
    public let databaseBytes: Int64
    /// The most the database files took at once (old and new side by side during a rotation).
    public let peakBytes: Int64
    /// Notes of the open that preceded the change (an earlier change finished, a repair).
    public let notes: [String]
}

/// Where a change may be stopped by the test seam, in the order they are reached.
package enum KeyChangeCrashPoint: String, CaseIterable, Sendable {
    case rotateAfterJournal, rotateAfterStagingKey, rotateAfterExport, rotateAfterSwappingMarked, rotateAfterRename,
         rotateAfterManifestSwitch, rotateAfterMainKeyStored, rotateAfterStagingRemoved
    case moveAfterJournal, moveAfterCopy, moveAfterManifestSwitch, moveAfterOldRemoved
}

/// Key management beyond storage: rotating a cache's key and moving it between stores, each safe
/// against a crash at any instant (`KeyChange` records the change in the manifest; the next open
/// finishes or rolls it back).
///
///     let report = try KeyManager.rotate(configuration)       // a new key, the cache rewritten
///     let moved = try KeyManager.move(configuration, to: "file")
///
/// Both open the cache first (the open procedure: a cache that cannot open is not changed) and
/// hold its lock throughout; a cache open elsewhere is `.unavailable(.cacheInUse)`.
package enum KeyManager {
    /// Rotates the cache's key: a new random key, the database exported under it into
    /// `cache.db.next` (`sqlcipher_export`), verified (schema, row counts, `quick_check`),
    /// renamed into place; the new key replaces the old in the store only after that. The media
    /// key is rotated with it: every encrypted media file is rewritten under a new one
    /// (`MediaRekey`), swapped in with the database.
    package static func rotate(_ configuration: StoreConfiguration) throws(KeyManagementError) -> KeyChangeReport {
        try rotate(configuration, crashAt: nil)
    }

    /// Moves the key to the configured store named `storeName` (`secret-service`, `file`…): the
    /// key is copied, read back and checked, the manifest switched, then the old copy removed.
    package static func move(_ configuration: StoreConfiguration, to storeName: String) throws(KeyManagementError) -> KeyChangeReport {
        try move(configuration, to: storeName, crashAt: nil)
    }

    package static func rotate(_ configuration: StoreConfiguration, crashAt: KeyChangeCrashPoint?) throws(KeyManagementError) -> KeyChangeReport {
        let started = Date()
        let held = try openForChange(configuration)
        defer { held.lock.release() }
        let steps = KeyChangeSteps(dir: held.config.directory, config: held.config)
        let dir = steps.dir
        let store = held.store
        var manifest = held.manifest
        let main = steps.itemID(manifest.cacheId)
        let staging = KeyChange.stagingItem(main)
        let profile = manifest.cipherProfile ?? .standard()
        let newKey: CacheKey
        do {
            newKey = try CacheKey.generate()
        } catch {
            throw .unavailable(.resources)
        }
        let newKeyId = UUID().uuidString.lowercased()
        let newCheck = newKey.checkValue(cacheId: manifest.cacheId)
        let oldKeyId = manifest.keyId ?? ""
        if EncryptionMigration.shortfallForACopy(dir, alsoCopying: MediaRekey.trees.map { "\(dir.path)/\($0)" }) != nil {
            throw .unavailable(.diskFull)
        }
        func crash(_ point: KeyChangeCrashPoint) throws(KeyStepError) {
            if crashAt == point { throw .simulatedCrash }
        }

        // Up to the swap, a failure rolls back: the old database and the main item are untouched.
        var peak: Int64 = 0
        manifest.keyChange = KeyChange(kind: .rotate, phase: .exporting, fromKeyId: oldKeyId, toKeyId: newKeyId, toKeyCheck: newCheck,
                                       fromStore: store.name, toStore: store.name)
        do throws(KeyStepError) {
            try steps.write(manifest)
            try crash(.rotateAfterJournal)
            try steps.put(newKey, keyId: newKeyId, in: store, staging, label: held.config.keyLabel + " (rotation in progress)")
            try crash(.rotateAfterStagingKey)
            peak = try exportVerified(steps, from: .encrypted(held.key, profile), to: .encrypted(newKey, profile))
            peak += try rekeyMedia(steps, keying: .encrypted(newKey, profile))
            try resealRecovery(steps, cacheId: manifest.cacheId, newKey: newKey, newKeyId: newKeyId, keying: .encrypted(newKey, profile))
            try crash(.rotateAfterExport)
            manifest.keyChange?.phase = .swapping
            try steps.write(manifest)
        } catch {
            if case .simulatedCrash = error { throw .simulatedCrash }
            steps.removeExport()
            try? steps.remove(staging, from: store)
            manifest.keyChange = nil
            // If this write fails too, the next open rolls the change back (phase `exporting`).
            try? steps.write(manifest)
            if case .database(let cause) = error, case .damaged = DatabaseVerdict(cause) {
                throw .verificationFailed("the database rewritten under the new key")
            }
            throw .unavailable(error.reason)
        }

        // From here on the change only goes forward; what stops it is finished by the next open.
        do throws(KeyStepError) {
            try crash(.rotateAfterSwappingMarked)
            try steps.swapExportIn()
            try crash(.rotateAfterRename)
            manifest.keyId = newKeyId
            manifest.keyCheck = newCheck
            manifest.keyChange?.phase = .storing
            try steps.write(manifest)
            try crash(.rotateAfterManifestSwitch)
            try steps.put(newKey, keyId: newKeyId, in: store, main, label: held.config.keyLabel)
            try crash(.rotateAfterMainKeyStored)
            try? steps.remove(staging, from: store)
            try crash(.rotateAfterStagingRemoved)
            manifest.keyChange = nil
            try steps.write(manifest)
            dropStaleSeals(steps, keepingKeyId: newKeyId)
        } catch {
            if case .simulatedCrash = error { throw .simulatedCrash }
            throw .unfinished(error.reason)
        }
        return KeyChangeReport(cacheId: manifest.cacheId, oldKeyId: oldKeyId, newKeyId: newKeyId, fromStore: store.name, toStore: store.name,
                               seconds: Date().timeIntervalSince(started), databaseBytes: CacheDirectory.fileSize(dir.database),
                               peakBytes: peak, notes: held.notes)
    }

    package static func move(_ configuration: StoreConfiguration, to storeName: String,
                             crashAt: KeyChangeCrashPoint?) throws(KeyManagementError) -> KeyChangeReport {
        let started = Date()
        guard let target = configuration.keyStores.first(where: { $0.name == storeName }) else { throw .unknownStore(storeName) }
        let held = try openForChange(configuration)
        defer { held.lock.release() }
        let steps = KeyChangeSteps(dir: held.config.directory, config: held.config)
        var manifest = held.manifest
        let from = held.store
        guard from.name != target.name else { throw .alreadyInStore(storeName) }
        if case .unavailable(let reason) = target.availability() {
            throw .unavailable(reason.meansStoreMissing ? .keyStoreMissing(store: target.name, reason) : .keyStore(reason))
        }
        let item = steps.itemID(manifest.cacheId)
        let keyId = manifest.keyId ?? ""
        let check = manifest.keyCheck ?? ""
        func crash(_ point: KeyChangeCrashPoint) throws(KeyStepError) {
            if crashAt == point { throw .simulatedCrash }
        }
        manifest.keyChange = KeyChange(kind: .move, phase: .storing, fromKeyId: keyId, toKeyId: keyId, toKeyCheck: check,
                                       fromStore: from.name, toStore: target.name)
        var copied = true
        do throws(KeyStepError) {
            try steps.write(manifest)
            try crash(.moveAfterJournal)
            try steps.put(held.key, keyId: keyId, in: target, item, label: held.config.keyLabel)
            try crash(.moveAfterCopy)
            copied = try steps.checkedKey(in: target, item, cacheId: manifest.cacheId, check: check) != nil
            guard copied else { throw .keyStore(.other) }
            manifest.keyStore = target.name
            manifest.keyStorage = target.tier
            manifest.keyChange?.phase = .removing
            try steps.write(manifest)
        } catch {
            if case .simulatedCrash = error { throw .simulatedCrash }
            try? steps.remove(item, from: target)
            manifest = held.manifest
            try? steps.write(manifest)
            if !copied { throw .verificationFailed("the key read back from \(target.name)") }
            throw .unavailable(error.reason)
        }
        var notes = held.notes
        do throws(KeyStepError) {
            try crash(.moveAfterManifestSwitch)
            try steps.remove(item, from: from)
            try crash(.moveAfterOldRemoved)
            manifest.keyChange = nil
            try steps.write(manifest)
        } catch {
            if case .simulatedCrash = error { throw .simulatedCrash }
            // The cache already uses the new store; the old copy goes at a later open.
            notes.append("the key is in \(target.name); its old copy in \(from.name) could not be removed now (\(error.reason.code)) and is removed by a later open")
        }
        return KeyChangeReport(cacheId: manifest.cacheId, oldKeyId: keyId, newKeyId: keyId, fromStore: from.name, toStore: target.name,
                               seconds: Date().timeIntervalSince(started), databaseBytes: CacheDirectory.fileSize(steps.dir.database),
                               peakBytes: CacheDirectory.fileSize(steps.dir.database), notes: notes)
    }

    // MARK: - Helpers

    /// A cache opened by the open procedure (which finishes any earlier change), then closed with
    /// its lock kept, and the key the open proved.
    struct Held {
        let config: StoreConfiguration
        let lock: DirectoryLock
        let manifest: Manifest
        let store: any KeyStore
        let key: CacheKey
        let notes: [String]
    }

    static func openForChange(_ configuration: StoreConfiguration, creatingIfMissing: Bool = false) throws(KeyManagementError) -> Held {
        var config = configuration
        config.encryption = true
        config.failureBehavior = .onlineOnly
        let dir = config.directory
        guard dir.exists || creatingIfMissing else { throw .noCache }
        switch ManifestFile.read(directory: dir.path) {
        case .valid(let manifest) where !manifest.encrypted: throw .notEncrypted
        case .missing where !dir.hasDatabase && !creatingIfMissing: throw .noCache
        default: break
        }
        let report = CacheOpener.open(config)
        switch report.outcome {
        case .ready: break
        case .unavailable(let reason): throw .unavailable(reason)
        case .onlineOnly, .plaintextFallback:
            report.cache?.close()
            throw .notEncrypted
        }
        guard let cache = report.cache else { throw .noCache }
        guard cache.isEncrypted, let name = cache.keyStoreName, let store = config.keyStores.first(where: { $0.name == name }) else {
            cache.close()
            throw .notEncrypted
        }
        let manifest = cache.manifest
        guard let lock = cache.closeKeepingLock() else { throw .unavailable(.cacheInUse(pid: nil)) }
        let item = KeyItemID(applicationId: config.applicationId, account: config.account, cacheId: manifest.cacheId)
        switch store.lookup(item) {
        case .found(let key, _) where key.checkValue(cacheId: manifest.cacheId) == manifest.keyCheck:
            return Held(config: config, lock: lock, manifest: manifest, store: store, key: key, notes: report.notes)
        case .unavailable(let reason):
            lock.release()
            throw .unavailable(.keyStore(reason))
        default:
            // The key the open just used is gone or changed under us: another process is at work.
            lock.release()
            throw .unavailable(.keyStore(.other))
        }
    }

    /// A new media key in the exported database, and the media files rewritten under it into
    /// twin trees (`MediaRekey`). Returns the twins' bytes (for the peak). Nothing to do for a
    /// cache that never made a media key.
    static func rekeyMedia(_ steps: KeyChangeSteps, keying: ConnectionKeying) throws(KeyStepError) -> Int64 {
        do {
            let db = try DatabaseQueue(path: steps.dir.migrationTarget, keying: keying, options: steps.config.connection, label: "media-rekey")
            defer { db.close() }
            guard let oldKey = try db.sync({ db in try MediaRekey.storedKey(in: db) }) else { return 0 }
            let newKey = try MediaKey.generate()
            let written = try MediaRekey.writeTwins(steps.dir, from: oldKey, to: newKey)
            try db.sync { db in
                try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(MediaRekey.keyRow), .blob(newKey.raw))
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
            return written
        } catch let error as KeyStepError {
            throw error
        } catch {
            throw .database(error)
        }
    }

    /// A recovery file keeps opening the cache's key across a rotation: the new key is sealed under
    /// the recovery key (read from the exported database) and added before the swap.
    static func resealRecovery(_ steps: KeyChangeSteps, cacheId: String, newKey: CacheKey, newKeyId: String,
                               keying: ConnectionKeying) throws(KeyStepError) {
        guard var file = RecoveryFile.read(steps.dir.recovery), file.cacheId == cacheId else { return }
        let recoveryKey: CacheKey?
        do {
            let db = try DatabaseQueue(path: steps.dir.migrationTarget, keying: keying, options: steps.config.connection, label: "reseal")
            defer { db.close() }
            recoveryKey = try db.sync { db in try RecoveryFile.storedRecoveryKey(file.recoveryKeyId, in: db) }
        } catch {
            throw .database(error)
        }
        guard let recoveryKey else { return }
        do {
            let seal = try SealedCacheKey.seal(newKey, keyId: newKeyId, under: recoveryKey)
            file.cacheKeys = Array((file.cacheKeys.filter { $0.keyId != newKeyId } + [seal]).suffix(4))
        } catch {
            throw .keyStore(.other)
        }
        do {
            try file.write(steps.dir.recovery)
        } catch {
            throw .file(error)
        }
    }

    /// After a rotation, the recovery file keeps only the seal of the key in use.
    static func dropStaleSeals(_ steps: KeyChangeSteps, keepingKeyId keyId: String) {
        guard var file = RecoveryFile.read(steps.dir.recovery), file.cacheKeys.contains(where: { $0.keyId == keyId }) else { return }
        file.cacheKeys.removeAll { $0.keyId != keyId }
        try? file.write(steps.dir.recovery)
    }

    /// Exports the database under the new keying into `cache.db.next` and proves the copy: its
    /// schema, the same row counts as the source, and `quick_check`. Returns the peak bytes.
    static func exportVerified(_ steps: KeyChangeSteps, from source: ConnectionKeying, to target: ConnectionKeying) throws(KeyStepError) -> Int64 {
        let dir = steps.dir
        steps.removeExport()
        do {
            let reader = try DatabaseQueue(path: dir.database, keying: source, options: steps.config.connection, label: "rotation-source")
            defer { reader.close() }
            let counts = try reader.sync { db in try EncryptionMigration.export(db, to: dir.migrationTarget, keying: target, engine: .current) }
            let check = try DatabaseQueue(path: dir.migrationTarget, keying: target, options: steps.config.connection, label: "rotation-check")
            defer { check.close() }
            let (copied, intact) = try check.sync { db -> ([String: Int64], Bool) in
                try Schema.verify(db)
                return (try EncryptionMigration.rowCounts(db), try IntegrityCheck.run(db))
            }
            guard copied == counts, intact else {
                throw DatabaseError(extendedCode: 11, message: "the rewritten database does not match its source", operation: "rotation")
            }
            let peak = CacheDirectory.fileSize(dir.database) + CacheDirectory.fileSize(dir.wal) + CacheDirectory.fileSize(dir.migrationTarget)
                + CacheDirectory.fileSize(dir.migrationTarget + "-wal")
            try check.sync { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
            return peak
        } catch {
            steps.removeExport()
            throw .database(error)
        }
    }
}
