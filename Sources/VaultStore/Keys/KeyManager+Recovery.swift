public import Foundation
public import VaultKeys

/// A recovery secret just made. Print `secret.formatted` once; nothing else ever shows it.
public struct RecoverySecretReport: Sendable {
    public let secret: RecoverySecret
    public let cacheId: String
    /// The key id the recovery file opens now (a rotation keeps it current).
    public let keyId: String
    /// Seconds the key derivation took (what each recovery attempt costs).
    public let kdfSeconds: Double
}

/// A cache set aside in `quarantine/` (by a reset, or to make room for a restored cache).
public struct QuarantinedCache: Sendable, Equatable {
    /// The entry's name (`chatvault quarantine restore ID`).
    public let id: String
    /// Why it was set aside: a reset reason (`keyLost`, `wrongKey`, `corrupted`, `escalated`,
    /// `encryptionChanged`), `replaced` (a restore took its place; its unsent messages were merged),
    /// or `imported` (an import that did not finish).
    public let reason: String
    public let at: Date
    public let bytes: Int64
    public let cacheId: String?
    public let encrypted: Bool
    /// Whether the key it needs is in its store now (nil: plaintext, or the store cannot answer).
    public let keyPresent: Bool?
    /// Whether it has a recovery file (a recovery secret can give its key back).
    public let recoverableWithSecret: Bool
    /// Unsent messages the reset could not carry over (-1: unknown).
    public let pendingMessagesLost: Int
    /// Whether the reset listener has been told.
    public let reported: Bool

    /// Restorable now without a secret (`KeyManager.restore`).
    public var restorable: Bool { keyPresent == true }
}

/// What a restore (or a recovery) gave back.
public struct CacheRestoreReport: Sendable, Equatable {
    /// The quarantine entry that is the current cache again.
    public let restoredEntry: String
    public let cacheId: String
    /// Rows of the restored cache, after the merge.
    public let messages: Int
    public let pending: Int
    /// Unsent messages of the cache it replaced, carried over into it.
    public let mergedPending: Int
    /// Where the replaced cache went (a quarantine entry), if there was one.
    public let replacedAs: String?
}

/// Recovery secrets, the quarantine, restores.
///
/// What a restore does with the cache it replaces (the fresh one the reset created): its unsent
/// messages and upload batches are merged into the restored cache (renumbered after the restored
/// outbox, never a local id twice), and the rest of it (messages, conversations: copies of what
/// the server holds, fetched again by the catch-up sync) is set aside in `quarantine/` as
/// `replaced`, where it ages out like any entry. Nothing unsent is lost either way.
extension KeyManager {
    /// Makes a recovery secret for the cache: a random recovery key, wrapped by the secret into
    /// `recovery.json` (about half a second of key derivation) and kept inside the database; the
    /// cache key sealed under it. A new secret replaces the previous one.
    package static func createRecoverySecret(_ configuration: StoreConfiguration) throws(KeyManagementError) -> RecoverySecretReport {
        let held = try openForChange(configuration)
        defer { held.lock.release() }
        let dir = held.config.directory
        let manifest = held.manifest
        let keyId = manifest.keyId ?? ""
        let secret: RecoverySecret
        let recoveryKey: CacheKey
        let wrapped: WrappedCacheKey
        let seal: SealedCacheKey
        let started = Date()
        do {
            secret = try RecoverySecret.generate()
            recoveryKey = try CacheKey.generate()
        } catch {
            throw .unavailable(.resources)
        }
        let recoveryKeyId = UUID().uuidString.lowercased()
        do throws(RecoverySecretError) {
            wrapped = try WrappedCacheKey.wrap(recoveryKey, keyId: recoveryKeyId, secret: secret)
            seal = try SealedCacheKey.seal(held.key, keyId: keyId, under: recoveryKey)
        } catch {
            throw .unavailable(.resources)
        }
        let kdfSeconds = Date().timeIntervalSince(started)
        let keying = ConnectionKeying.encrypted(held.key, manifest.cipherProfile ?? .standard())
        do {
            let db = try DatabaseQueue(path: dir.database, keying: keying, options: held.config.connection, label: "recovery")
            defer { db.close() }
            // The new recovery key goes in before the file names it; older ones go after, so the
            // file on disk always has its recovery key in the database.
            try db.sync { db in
                try recoveryKey.withUnsafeBytes { raw in
                    try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(RecoveryFile.rowName(recoveryKeyId)), .blob(Array(raw)))
                }
            }
            let file = RecoveryFile(format: RecoveryFile.format, cacheId: manifest.cacheId, recoveryKeyId: recoveryKeyId,
                                    recoveryKey: wrapped, cacheKeys: [seal])
            do {
                try file.write(dir.recovery)
            } catch {
                throw KeyStepError.file(error)
            }
            try db.sync { db in
                try db.run("DELETE FROM kv WHERE key LIKE 'recovery.key.%' AND key <> ?", .text(RecoveryFile.rowName(recoveryKeyId)))
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch let error as KeyStepError {
            throw .unavailable(error.reason)
        } catch {
            throw .unavailable(KeyStepError.database(error).reason)
        }
        return RecoverySecretReport(secret: secret, cacheId: manifest.cacheId, keyId: keyId, kdfSeconds: kdfSeconds)
    }

    /// The caches in `quarantine/`, newest first, with whether each could be restored now.
    package static func quarantined(_ configuration: StoreConfiguration) -> [QuarantinedCache] {
        let quarantine = Quarantine(directory: configuration.directory, policy: configuration.quarantine, now: configuration.now)
        return quarantine.entries().reversed().compactMap { entry -> QuarantinedCache? in
            guard let notice = entry.notice, notice.moving != true else { return nil }
            let manifest: Manifest? = if case .valid(let m) = ManifestFile.read(directory: entry.path) { m } else { nil }
            var st = stat()
            return QuarantinedCache(
                id: entry.name, reason: notice.imported == true ? "imported" : notice.replacedBy == nil ? notice.reason.rawValue : "replaced",
                at: entry.createdAt,
                bytes: CacheDirectory.treeSize(entry.path), cacheId: manifest?.cacheId, encrypted: manifest?.encrypted ?? false,
                keyPresent: Quarantine.keyPresent(entry, keyStores: configuration.keyStores, applicationId: configuration.applicationId,
                                                  account: configuration.account),
                recoverableWithSecret: lstat("\(entry.path)/\(RecoveryFile.name)", &st) == 0,
                pendingMessagesLost: notice.pendingMessagesLost, reported: notice.reported)
        }
    }

    /// Restores a quarantined cache whose key is in its store again (a keyring restored from
    /// backup) as the current cache; see the type's notes for what happens to the current one.
    package static func restore(_ configuration: StoreConfiguration, entry id: String) throws(KeyManagementError) -> CacheRestoreReport {
        let quarantine = Quarantine(directory: configuration.directory, policy: configuration.quarantine, now: configuration.now)
        guard let entry = quarantine.entries().first(where: { $0.name == id }) else { throw .noSuchEntry(id) }
        guard case .valid(let manifest) = ManifestFile.read(directory: entry.path), manifest.encrypted,
              let store = KeyStoreSelection.store(for: manifest, among: configuration.keyStores) else { throw .keyNotPresent(id) }
        let key: CacheKey
        switch store.lookup(KeyItemID(applicationId: configuration.applicationId, account: configuration.account, cacheId: manifest.cacheId)) {
        case .found(let found, _) where found.checkValue(cacheId: manifest.cacheId) == manifest.keyCheck: key = found
        case .unavailable(let reason): throw .unavailable(.keyStore(reason))
        default: throw .keyNotPresent(id)
        }
        let held = try openForChange(configuration, creatingIfMissing: true)
        defer { held.lock.release() }
        return try restoreEntry(entry, key: key, held: held, crashAt: nil)
    }

    /// Restores the newest quarantined cache that `secret` opens (its recovery file); each
    /// candidate costs the key derivation's time. `.wrongSecret` when none opens, and nothing changed.
    package static func recover(_ configuration: StoreConfiguration, secret: RecoverySecret) throws(KeyManagementError) -> CacheRestoreReport {
        try recover(configuration, secret: secret, crashAt: nil)
    }

    package static func recover(_ configuration: StoreConfiguration, secret: RecoverySecret,
                                crashAt: RestoreCrashPoint?) throws(KeyManagementError) -> CacheRestoreReport {
        let quarantine = Quarantine(directory: configuration.directory, policy: configuration.quarantine, now: configuration.now)
        var candidates = 0
        var damaged = 0
        for entry in quarantine.entries().reversed() where entry.notice?.moving != true {
            guard let file = RecoveryFile.read("\(entry.path)/\(RecoveryFile.name)"),
                  case .valid(let manifest) = ManifestFile.read(directory: entry.path), manifest.encrypted, file.cacheId == manifest.cacheId else { continue }
            candidates += 1
            let key: CacheKey
            do {
                key = try file.cacheKey(secret: secret, cacheId: manifest.cacheId, keyCheck: manifest.keyCheck)
            } catch .wrongSecret {
                continue
            } catch {
                damaged += 1
                continue
            }
            let held = try openForChange(configuration, creatingIfMissing: true)
            defer { held.lock.release() }
            return try restoreEntry(entry, key: key, held: held, crashAt: crashAt)
        }
        if candidates == 0 { throw .noRecoverableCache }
        if damaged > 0 && damaged == candidates { throw .verificationFailed("the recovery file") }
        throw .wrongSecret
    }

    /// Makes `entry` the current cache again (the current one, if any, set aside with its unsent
    /// messages merged in first). Crash-safe: the entry is marked `restoring` before anything
    /// moves, and `Quarantine.rollForward` finishes (or abandons) the move at the next open.
    static func restoreEntry(_ found: Quarantine.Entry, key: CacheKey, held: Held, crashAt: RestoreCrashPoint?) throws(KeyManagementError) -> CacheRestoreReport {
        let config = held.config
        let dir = config.directory
        let quarantine = Quarantine(directory: dir, policy: config.quarantine, now: config.now)
        // The open may have pruned or rolled entries: look again under the lock.
        guard let entry = quarantine.entries().first(where: { $0.name == found.name }),
              case .valid(var manifest) = ManifestFile.read(directory: entry.path), manifest.encrypted,
              key.checkValue(cacheId: manifest.cacheId) == manifest.keyCheck else { throw .noSuchEntry(found.name) }
        let entryDatabase = "\(entry.path)/cache.db"
        let keying = ConnectionKeying.encrypted(key, manifest.cipherProfile ?? .standard())
        let current = ConnectionKeying.encrypted(held.key, held.manifest.cipherProfile ?? .standard())

        // 1. The entry opens under its key and checks out; the current outbox is merged into it.
        var merged = 0
        var counts = CacheRows.Counts(conversations: 0, messages: 0, pending: 0)
        do {
            let carried = try Salvage.run(directory: dir, keying: current, options: config.connection)
            let db = try DatabaseQueue(path: entryDatabase, keying: keying, options: config.connection, label: "restore")
            defer { db.close() }
            try db.sync { db in
                guard try IntegrityCheck.run(db) else {
                    throw DatabaseError(extendedCode: 11, message: "the quarantined cache fails its check", operation: "restore")
                }
                try Schema.prepare(db, expectExisting: true)
                merged = try Salvage.merge(carried, into: db)
                counts = try CacheRows.counts(db)
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch let failure as Salvage.CopyFailed {
            throw .unavailable(DatabaseVerdict.reason(failure.error))
        } catch {
            if case .damaged = DatabaseVerdict(error) { throw .verificationFailed("the quarantined cache") }
            throw .unavailable(KeyStepError.database(error).reason)
        }
        if crashAt == .afterMerge { throw .simulatedCrash }

        // 2. The key goes into the store the current cache uses; the entry's manifest names it.
        let steps = KeyChangeSteps(dir: dir, config: config)
        do throws(KeyStepError) {
            try steps.put(key, keyId: manifest.keyId ?? "", in: held.store, steps.itemID(manifest.cacheId), label: config.keyLabel)
            manifest.keyStore = held.store.name
            manifest.keyStorage = held.store.tier
            manifest.keyChange = nil
            manifest.consecutiveUnclassifiedFailures = 0
            manifest.lastFailureCode = nil
            do {
                try ManifestFile.write(manifest, directory: entry.path)
                try quarantine.markRestoring(entry)
            } catch {
                throw KeyStepError.file(error)
            }
        } catch {
            throw .unavailable(error.reason)
        }
        if crashAt == .afterMarked { throw .simulatedCrash }

        // 3. The current cache steps aside (its unsent messages are already in the entry), then
        //    the entry's files move back. A crash in between is finished by the next open.
        var replacedAs: String?
        if CipherProof.header(of: dir.database) != .missing {
            do {
                replacedAs = try quarantine.setAside(reason: entry.notice?.reason ?? .keyLost, pendingMessagesLost: 0, keepPlaintext: false,
                                                     replacedBy: entry.name)
            } catch {
                throw .unfinished(DatabaseVerdict.reason(error.error))
            }
        }
        if crashAt == .afterReplacedSetAside { throw .simulatedCrash }
        do {
            try quarantine.moveBack(entry)
        } catch {
            throw .unfinished(DatabaseVerdict.reason(error))
        }
        return CacheRestoreReport(restoredEntry: entry.name, cacheId: manifest.cacheId, messages: counts.messages, pending: counts.pending,
                                  mergedPending: merged, replacedAs: replacedAs)
    }
}

/// Where a restore may be stopped by the test seam.
package enum RestoreCrashPoint: String, CaseIterable, Sendable {
    case afterMerge, afterMarked, afterReplacedSetAside
}
