import Foundation
import VaultKeys

/// The open procedure (ARCHITECTURE.md §5): decides from the manifest, the key lookup and a probe
/// of the database whether a cache is ready, temporarily unavailable, or must be reset.
///
///     let report = CacheOpener.open(configuration)
///     switch report.outcome {
///     case .ready: use(report.cache!)
///     case .unavailable(let why): retryLater(why)      // nothing was touched
///     case .onlineOnly, .plaintextFallback: …
///     }
///     CacheOpener.acknowledge(report.resets, in: configuration.directory)   // after telling listeners
///
/// Rules it never breaks: a transient condition (locked keyring, missing bus, busy database, full
/// disk, a file that cannot be opened right now) never resets or touches the cache; a reset sets
/// the old files aside in `quarantine/` and is abandoned (never turned into a deletion) when it
/// cannot; nothing is labelled encrypted before the cipher is proven.
package enum CacheOpener {
    package static func open(_ configuration: StoreConfiguration) -> OpenReport {
        var procedure = OpenProcedure(configuration)
        return procedure.run()
    }

    /// Lets the key store an `open(configuration)` is about to ask get ready (`KeyStore.prepare`:
    /// for the Secret Service, the D-Bus connection and session), so that this slow part of a
    /// first open overlaps the open's own file work. Only the store the manifest names, only for
    /// an encrypted cache with a valid manifest: nothing is asked that the open would not ask.
    /// Blocks; run it beside `open`, e.g. on a global queue just before.
    package static func prepareKeyStore(_ configuration: StoreConfiguration) {
        guard configuration.encryption, case .valid(let manifest) = ManifestFile.read(directory: configuration.directory.path),
              manifest.encrypted, let store = KeyStoreSelection.store(for: manifest, among: configuration.keyStores) else { return }
        store.prepare()
    }

    /// Records that resets from an `OpenReport` have been delivered to the reset listeners, so the
    /// next open does not announce them again. Until then every successful open reports them.
    package static func acknowledge(_ resets: [CacheReset], in directory: CacheDirectory) {
        Quarantine(directory: directory, policy: QuarantinePolicy(), now: { Date() }).markReported(resets.compactMap(\.quarantinedAs))
    }
}

/// A failure inside the procedure, already classified.
enum OpenStop: Error {
    case unavailable(UnavailableReason)
    case cannotEncrypt(EncryptionUnavailable)
}

/// Where a database problem sends the procedure.
enum DatabaseVerdict {
    case damaged
    case transient(UnavailableReason)
    case unclassified(Int32)

    init(_ error: any Error) {
        switch error {
        case let e as DatabaseError:
            switch e.failureClass {
            case .damaged: self = .damaged
            case .busy: self = .transient(.databaseBusy)
            case .diskFull: self = .transient(.diskFull)
            case .readOnly: self = .transient(.readOnly)
            case .resources: self = .transient(.resources)
            case .cannotOpen, .unclassified: self = .unclassified(e.primaryCode)
            }
        case let problem as Schema.Problem:
            switch problem {
            case .empty: self = .damaged
            case .newer(let version): self = .transient(.newerSchema(version))
            case .mismatch: self = .unclassified(1)
            }
        case let e as SecureFileError:
            self = DatabaseVerdict(e)
        case let failure as Quarantine.Failure:
            self = DatabaseVerdict(failure.error)
        case let stop as OpenStop:
            if case .unavailable(let reason) = stop { self = .transient(reason) } else { self = .unclassified(1) }
        default:
            self = .unclassified(1)
        }
    }

    init(_ error: SecureFileError) {
        if error.isRefusal {
            self = .transient(.unsafeFiles(error.description))
        } else {
            self = .transient(UnavailableReason.forErrno(error.errno ?? 0))
        }
    }
}

extension UnavailableReason {
    /// The transient reason an errno stands for (file-system trouble is never grounds for a reset).
    static func forErrno(_ code: Int32) -> UnavailableReason {
        switch code {
        case ENOSPC, EDQUOT, EFBIG: return .diskFull
        case EROFS, EACCES, EPERM: return .readOnly
        default: return .resources
        }
    }
}

struct OpenProcedure {
    let config: StoreConfiguration
    let dir: CacheDirectory
    let engine: CipherEngine
    let quarantine: Quarantine
    var notes: [String] = []
    var resets: [CacheReset] = []
    var lock: DirectoryLock?
    var feasibility: Feasibility?
    var pendingSalvage = Salvage.Result()
    /// Which of `-wal` and `-shm` existed when the lock was taken (nil before).
    var companionsAtLock: [String]?

    init(_ config: StoreConfiguration) {
        self.config = config
        dir = config.directory
        engine = config.cipherEngine ?? .current
        quarantine = Quarantine(directory: config.directory, policy: config.quarantine, now: config.now)
    }

    mutating func run() -> OpenReport {
        do {
            let (cache, fallback) = try openOrCreate()
            // Resets an earlier run performed but never delivered are announced now, once.
            let known = Set(resets.compactMap(\.quarantinedAs))
            let earlier = quarantine.unreportedResets().filter { !known.contains($0.quarantinedAs ?? "") }
            let outcome: OpenReport.Outcome = fallback.map { .plaintextFallback($0) } ?? .ready
            let restorable = restorableEntries()
            for name in restorable {
                notes.append("quarantine/\(name) can be restored: the key it needs is in its store again ('chatvault quarantine restore \(name)')")
            }
            var report = OpenReport(outcome: outcome, resets: earlier + resets, cache: cache, notes: notes)
            report.restorable = restorable
            return report
        } catch let stop as OpenStop {
            removeEmptyCompanionsThisOpenCreated()
            lock?.release()
            switch stop {
            case .unavailable(let reason):
                return OpenReport(outcome: .unavailable(reason), resets: [], cache: nil, notes: notes)
            case .cannotEncrypt(let why):
                return OpenReport(outcome: .onlineOnly(why), resets: [], cache: nil, notes: notes)
            }
        } catch {
            removeEmptyCompanionsThisOpenCreated()
            lock?.release()
            let reason: UnavailableReason
            switch DatabaseVerdict(error) {
            case .transient(let r): reason = r
            case .damaged, .unclassified: reason = .unclassified(code: 1, attempt: 0, of: config.escalationThreshold)
            }
            notes.append("open failed: \(error)")
            return OpenReport(outcome: .unavailable(reason), resets: [], cache: nil, notes: notes)
        }
    }

    // MARK: - Entry

    /// Returns the open cache and, when encryption was requested but could not run under
    /// `.plaintextFallback`, why.
    mutating func openOrCreate() throws -> (VaultCache, EncryptionUnavailable?) {
        if dir.exists {
            do {
                try SecureFiles.checkDirectory(dir.path)
            } catch {
                throw OpenStop.unavailable(.unsafeFiles(error.description))
            }
            // A directory we may not write (0500, a read-only mount) is read-only. SQLite would
            // only say CANTOPEN (14) when it fails to create the -wal or -shm.
            if access(dir.path, W_OK | X_OK) != 0 { throw OpenStop.unavailable(.forErrno(errno)) }
        } else {
            // No cache yet: decide whether anything may be written before creating the directory.
            if config.encryption, case .cannotRun(let why) = encryptionFeasibility(), config.failureBehavior == .onlineOnly {
                throw OpenStop.cannotEncrypt(why)
            }
            do {
                try SecureFiles.ensureDirectory(dir.path)
            } catch {
                throw OpenStop.unavailable(DatabaseVerdict.reason(error))
            }
        }
        switch DirectoryLock.acquire(dir.lockFile) {
        case .success(let acquired):
            lock = acquired
            companionsAtLock = dir.databaseFiles.dropFirst().filter { access($0, F_OK) == 0 }
        case .failure(.held(let pid)): throw OpenStop.unavailable(.cacheInUse(pid: pid))
        case .failure(.system(let error)): throw OpenStop.unavailable(DatabaseVerdict.reason(error))
        }
        for file in dir.databaseFiles + [dir.manifest] {
            do {
                try SecureFiles.checkFile(file)
            } catch .notFound {
                continue
            } catch {
                throw OpenStop.unavailable(DatabaseVerdict.reason(error))
            }
            // A database file we may not write (0400) is read-only, before SQLite sees it: SQLite
            // would open it read-only, serve it as if ready, and create a -shm with its mode that
            // keeps the cache unusable after the mode is fixed.
            if file != dir.manifest, access(file, R_OK | W_OK) != 0 { throw OpenStop.unavailable(.forErrno(errno)) }
        }
        // Finish what a crash interrupted before looking at anything.
        try quarantine.rollForward()
        Salvage.removeLeftovers(in: dir)
        try resumeKeyChange()
        removeMigrationLeftovers()

        let header = CipherProof.header(of: dir.database)
        if case .unreadable(let code) = header { throw OpenStop.unavailable(.forErrno(code)) }
        let state = ManifestFile.read(directory: dir.path)
        if config.pruneQuarantineDuringOpen, case .valid(let manifest) = state {
            quarantine.prune(currentCacheId: manifest.cacheId, keyStores: config.keyStores,
                             applicationId: config.applicationId, account: config.account)
        }
        switch state {
        case .unreadable(let code):
            throw OpenStop.unavailable(.forErrno(code))
        case .newerFormat(let version):
            throw OpenStop.unavailable(.newerManifest(version))
        case .missing, .damaged:
            if header == .missing || header == .empty {
                if header == .empty { notes.append("an empty database file without a manifest was replaced") }
                return try createFresh(afterReset: false)
            }
            notes.append("the manifest was missing or damaged; inferring it from the database")
            return try infer(header: header, hint: nil)
        case .valid(let manifest):
            switch header {
            case .missing, .empty, .unreadable:
                // A cache existed here (its manifest says so) but its database is gone or emptied.
                try reset(.corrupted, manifest: manifest, salvageWith: nil)
                return try createFresh(afterReset: true)
            case .plaintext where manifest.encrypted, .opaque where !manifest.encrypted:
                notes.append("the manifest contradicts the database header; inferring it from the database")
                return try infer(header: header, hint: manifest)
            default:
                return try openExisting(manifest)
            }
        }
    }

    // MARK: - Existing caches

    mutating func openExisting(_ manifest: Manifest) throws -> (VaultCache, EncryptionUnavailable?) {
        if manifest.encrypted != config.encryption {
            return try changeEncryption(manifest)
        }
        if manifest.encrypted {
            let (key, store) = try verifiedKey(for: manifest, onLost: .keyLost, onWrong: .wrongKey)
            guard let key, let store else { return try createFresh(afterReset: true) }
            return try (openDatabase(manifest, keying: .encrypted(key, manifest.cipherProfile ?? .standard()), store: store), nil)
        }
        return try (openDatabase(manifest, keying: .plaintext, store: nil), nil)
    }

    /// Looks up and checks the key of an encrypted cache. On a lost or wrong key it performs the
    /// reset (quarantine) and returns nil, so the caller creates the replacement.
    mutating func verifiedKey(for manifest: Manifest, onLost: OfflineCacheResetReason, onWrong: OfflineCacheResetReason) throws -> (CacheKey?, (any KeyStore)?) {
        guard engine.isAvailable else { throw OpenStop.unavailable(.cipherUnavailable) }
        guard let store = KeyStoreSelection.store(for: manifest, among: config.keyStores) else {
            if let name = manifest.keyStore, config.keyStores.contains(where: { $0.tier == manifest.keyStorage }) {
                throw OpenStop.unavailable(.keyStoreMissing(store: name, nil))
            }
            throw OpenStop.unavailable(.keyStorageNotAccepted(manifest.keyStorage))
        }
        switch store.lookup(itemID(manifest.cacheId)) {
        case .unavailable(let reason) where reason.meansStoreMissing:
            throw OpenStop.unavailable(.keyStoreMissing(store: store.name, reason))
        case .unavailable(let reason):
            throw OpenStop.unavailable(.keyStore(reason))
        case .absent:
            try reset(onLost, manifest: manifest, salvageWith: nil)
            return (nil, nil)
        case .found(let key, _):
            guard key.checkValue(cacheId: manifest.cacheId) == manifest.keyCheck else {
                try reset(onWrong, manifest: manifest, salvageWith: nil)
                return (nil, nil)
            }
            return (key, store)
        }
    }

    /// Opens the database of a valid manifest; classifies any failure.
    mutating func openDatabase(_ manifest: Manifest, keying: ConnectionKeying, store: (any KeyStore)?) throws -> VaultCache {
        // Before any connection replays the WAL: SQLite would drop acknowledged commits after a
        // damaged frame without a word (WALCheck).
        if let damage = WALCheck.inspect(path: dir.wal) {
            notes.append(damage.description)
            try reset(.corrupted, manifest: manifest, salvageWith: keying)
            return try createFresh(afterReset: true).0
        }
        do {
            return try connect(manifest, keying: keying, store: store)
        } catch {
            switch DatabaseVerdict(error) {
            case .transient(let reason):
                throw OpenStop.unavailable(reason)
            case .damaged:
                // The key is right (its check value matched): a manifest whose cipher profile
                // disagrees with the database is repaired, not taken for damage (ManifestHint).
                if case .encrypted(let key, let profile) = keying, let proven = profileProvenByDatabase(key: key, failed: profile) {
                    return try openWithProvenProfile(manifest, key: key, profile: proven, store: store)
                }
                try reset(.corrupted, manifest: manifest, salvageWith: keying)
                return try createFresh(afterReset: true).0
            case .unclassified(let code):
                notes.append("unclassified open failure: \(error)")
                try escalateIfRecurring(manifest, code: code, salvageWith: keying)
                return try createFresh(afterReset: true).0
            }
        }
    }

    /// Counts an unclassified failure in the manifest and, once the same failure has recurred on
    /// `escalationThreshold` consecutive counted opens, resets the cache as `.escalated`
    /// (returning so the caller creates the replacement). Otherwise throws `unavailable`.
    ///
    /// Only the first open of a login counts (`countsTowardEscalation`), and only the same result
    /// code in a row: retries a second apart never add up to a reset, and a different failure
    /// starts the count again.
    mutating func escalateIfRecurring(_ manifest: Manifest, code: Int32, salvageWith keying: ConnectionKeying?) throws {
        var counted = manifest
        if config.countsTowardEscalation {
            counted.consecutiveUnclassifiedFailures = manifest.lastFailureCode == code ? manifest.consecutiveUnclassifiedFailures + 1 : 1
            counted.lastFailureCode = code
        }
        let attempt = counted.consecutiveUnclassifiedFailures
        if config.countsTowardEscalation && attempt >= config.escalationThreshold {
            try reset(.escalated, manifest: counted, salvageWith: keying)
            return
        }
        if config.countsTowardEscalation { try? ManifestFile.write(counted, directory: dir.path) }
        throw OpenStop.unavailable(.unclassified(code: code, attempt: attempt, of: config.escalationThreshold))
    }

    /// Opens writer and reader, migrates and verifies the schema, checks integrity, proves the
    /// cipher. Throws the raw error for classification.
    mutating func connect(_ manifest: Manifest, keying: ConnectionKeying, store: (any KeyStore)?, creating: Bool = false) throws -> VaultCache {
        var options = config.connection
        options.create = creating
        var writer = try DatabaseQueue(path: dir.database, keying: keying, options: options, label: "writer")
        let size = CacheDirectory.fileSize(dir.database) + CacheDirectory.fileSize(dir.wal)
        // A migration writes into the file: never into a damaged one. Check first then, whatever
        // the size (migrations are rare); otherwise small caches are checked now, large ones in
        // the background.
        let migrating = try !creating && writer.sync { db in try Schema.needsMigration(db) }
        let checkNow = migrating || (config.synchronousIntegrityCheckLimit >= 0 && size <= config.synchronousIntegrityCheckLimit)
        if checkNow, !creating {
            if try !writer.sync({ db in try IntegrityCheck.run(db) }) {
                // Damage confined to the search index is repaired (the index is derived): the file
                // is written again without it, and the index built again after ready. Anything
                // else resets. The writer's WAL is folded in and the writer closed first.
                _ = try? writer.sync { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
                writer.close()
                if case .notRepaired(let why) = SearchIndexRepair.repair(directory: dir, keying: keying, options: options, engine: engine) {
                    notes.append("quick_check failed; not a search index repair: \(why)")
                    throw DatabaseError(extendedCode: 11, message: "quick_check failed", operation: "quick_check")
                }
                writer = try DatabaseQueue(path: dir.database, keying: keying, options: options, label: "writer")
                notes.append("the search index was damaged: it was dropped and is built again (no message was lost)")
            }
        }
        try writer.sync { db in try Schema.prepare(db, expectExisting: !creating) }
        var provenCipher: String?
        if case .encrypted(_, let profile) = keying {
            // Prove the cipher: the engine names itself, and the file on disk is not plaintext.
            try writer.sync { db in try db.execute("PRAGMA wal_checkpoint(PASSIVE)") }
            switch CipherProof.header(of: dir.database) {
            case .opaque where engine.isAvailable:
                break
            case .unreadable(let code):
                // Could not look (no file descriptor left…): says nothing about the cipher.
                throw OpenStop.unavailable(.forErrno(code))
            default:
                // Keyed, yet written in clear: no cipher is really running. A new cache is not
                // created (encryption cannot run); an existing one waits, never reset.
                throw creating ? OpenStop.cannotEncrypt(.cipherNotProven) : OpenStop.unavailable(.cipherUnavailable)
            }
            provenCipher = profile.cipherDescription(engine: engine)
        }
        var readerOptions = config.connection
        readerOptions.readOnly = true
        let reader = try DatabaseQueue(path: dir.database, keying: keying, options: readerOptions, label: "reader")
        // The background check's connection is opened by the check itself, after ready.
        let backgroundCheck = !checkNow && !creating ? (keying, readerOptions) : nil
        var final = manifest
        if config.countsTowardEscalation && (final.consecutiveUnclassifiedFailures != 0 || final.lastFailureCode != nil) {
            final.consecutiveUnclassifiedFailures = 0
            final.lastFailureCode = nil
            try? ManifestFile.write(final, directory: dir.path)
        }
        guard let lock else { throw OpenStop.unavailable(.cacheInUse(pid: nil)) }
        return VaultCache(directory: dir, manifest: final, keyStoreName: store?.name, provenCipher: provenCipher,
                          backgroundCheck: backgroundCheck, writer: writer, reader: reader, lock: lock)
    }

    // MARK: - Creating

    enum Feasibility {
        case ok(any KeyStore)
        case cannotRun(EncryptionUnavailable)
        case transient(KeyUnavailableReason)
    }

    /// Whether an encrypted cache can be created now, and in which store. A missing store (no bus,
    /// no provider) moves on to the next accepted tier; a closed one (locked) stops: we wait for
    /// it rather than fall back.
    mutating func encryptionFeasibility() -> Feasibility {
        if let known = feasibility { return known }
        let answer = probeFeasibility()
        // A transient answer may change within the procedure (it waits for nothing); the others
        // are kept so the stores are asked once and a fallback is noted once.
        if case .transient = answer {} else { feasibility = answer }
        return answer
    }

    private mutating func probeFeasibility() -> Feasibility {
        guard engine.isAvailable else { return .cannotRun(.cipherNotProven) }
        var missing: [String: KeyUnavailableReason] = [:]
        for (index, store) in config.keyStores.enumerated() {
            switch store.availability() {
            case .available:
                if index > 0 {
                    notes.append("key storage fell back to the \(store.tier.rawValue) tier (\(store.name)): " + missing.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.rawValue)" }.joined(separator: ", "))
                }
                return .ok(store)
            case .unavailable(let reason) where reason.meansStoreMissing:
                missing[store.name] = reason
            case .unavailable(let reason):
                return .transient(reason)
            }
        }
        return .cannotRun(.noKeyStore(missing))
    }

    /// Creates an empty cache (encrypted if configured and possible). Never over a database that
    /// still holds data: a fresh cache is only created where there is none, or after a reset has
    /// set the old one aside.
    mutating func createFresh(afterReset: Bool) throws -> (VaultCache, EncryptionUnavailable?) {
        if dir.hasDatabase && !afterReset {
            throw OpenStop.unavailable(.unclassified(code: 1, attempt: 0, of: config.escalationThreshold))
        }
        for path in dir.databaseFiles + [dir.manifest] { CacheDirectory.remove(path) }
        var created: (VaultCache, EncryptionUnavailable?)
        if config.encryption {
            switch encryptionFeasibility() {
            case .ok(let store):
                created = (try createEncrypted(in: store), nil)
            case .transient(let reason):
                throw OpenStop.unavailable(.keyStore(reason))
            case .cannotRun(let why):
                guard config.failureBehavior == .plaintextFallback else { throw OpenStop.cannotEncrypt(why) }
                notes.append("encryption cannot run (\(why)); an unencrypted cache was created as configured (plaintextFallback)")
                created = (try createPlaintext(), why)
            }
        } else {
            created = (try createPlaintext(), nil)
        }
        if !pendingSalvage.isEmpty {
            let salvaged = pendingSalvage
            try created.0.writer.sync { db in try Salvage.restore(salvaged, into: db) }
            notes.append("\(salvaged.outbox.count) unsent messages and \(salvaged.kv.count) upload batches were salvaged into the new cache")
            pendingSalvage = Salvage.Result()
        }
        return created
    }

    mutating func createEncrypted(in store: any KeyStore) throws -> VaultCache {
        let key = try CacheKey.generate()
        let cacheId = UUID().uuidString.lowercased()
        let keyId = UUID().uuidString.lowercased()
        do {
            try store.store(key, keyId: keyId, for: itemID(cacheId), label: config.keyLabel)
        } catch {
            throw OpenStop.unavailable(.keyStore(error.reason))
        }
        let profile = CipherProfile.standard(engine: engine)
        let manifest = Manifest(cacheId: cacheId, encrypted: true, keyStorage: store.tier, keyStore: store.name, keyId: keyId,
                                keyCheck: key.checkValue(cacheId: cacheId), cipherProfile: profile, createdAt: config.now())
        do {
            let cache = try connect(manifest, keying: .encrypted(key, profile), store: store, creating: true)
            try ManifestFile.write(manifest, directory: dir.path)
            return cache
        } catch {
            for path in dir.databaseFiles { CacheDirectory.remove(path) }
            try? store.delete(itemID(cacheId))
            throw creationFailure(error)
        }
    }

    mutating func createPlaintext() throws -> VaultCache {
        let manifest = Manifest(cacheId: UUID().uuidString.lowercased(), encrypted: false, keyStorage: .none, keyStore: nil,
                                keyId: nil, keyCheck: nil, cipherProfile: nil, createdAt: config.now())
        do {
            let cache = try connect(manifest, keying: .plaintext, store: nil, creating: true)
            try ManifestFile.write(manifest, directory: dir.path)
            return cache
        } catch {
            for path in dir.databaseFiles { CacheDirectory.remove(path) }
            throw creationFailure(error)
        }
    }

    func creationFailure(_ error: any Error) -> any Error {
        if error is OpenStop { return error }
        switch DatabaseVerdict(error) {
        case .transient(let reason): return OpenStop.unavailable(reason)
        case .damaged, .unclassified: return OpenStop.unavailable(.readOnly)
        }
    }

    // MARK: - Resets

    /// Sets the current cache aside (quarantine) after salvaging what can be read of its outbox.
    /// The salvaged rows are re-inserted by `createFresh` through `pendingSalvage`. When the files
    /// cannot be set aside, the reset is abandoned: the cache is unavailable, nothing is deleted.
    mutating func reset(_ reason: OfflineCacheResetReason, manifest: Manifest?, salvageWith keying: ConnectionKeying?) throws {
        var salvage = Salvage.Result.unreadable
        if let keying, CipherProof.header(of: dir.database) != .missing {
            do {
                salvage = try Salvage.run(directory: dir, keying: keying, options: config.connection)
                notes += salvage.notes
            } catch {
                // No room (or no way) to copy what could be read: wait rather than lose it.
                notes.append("the \(reason.rawValue) reset waits: the damaged cache could not be copied for salvage (\(error.error))")
                throw OpenStop.unavailable(DatabaseVerdict.reason(error.error))
            }
        }
        // A plaintext copy may not stay behind when the app asks for encryption.
        let lost = salvage.pendingMessagesLost
        let entry: String
        do {
            entry = try quarantine.setAside(reason: reason, pendingMessagesLost: lost, keepPlaintext: !config.encryption)
        } catch {
            notes.append("the \(reason.rawValue) reset could not set the cache aside (\(error.error)); it stays as it is")
            throw OpenStop.unavailable(DatabaseVerdict.reason(error.error))
        }
        pendingSalvage = salvage
        resets.append(CacheReset(reason: reason, pendingMessagesLost: lost, quarantinedAs: entry))
        notes.append("reset \(reason.rawValue): \(lost == offlinePendingCountUnknown ? "unknown number of" : String(lost)) unsent messages lost")
        quarantine.prune(currentCacheId: nil, keyStores: config.keyStores, applicationId: config.applicationId, account: config.account)
    }

    // MARK: - Helpers

    /// Entries set aside for a lost or wrong key whose key is back in its store. Asks the store
    /// only when there are such entries (after a key reset, for the quarantine's lifetime).
    func restorableEntries() -> [String] {
        quarantine.entries().filter { entry in
            guard let notice = entry.notice, notice.moving != true, notice.restoring != true, notice.replacedBy == nil,
                  notice.reason == .keyLost || notice.reason == .wrongKey else { return false }
            return Quarantine.keyPresent(entry, keyStores: config.keyStores, applicationId: config.applicationId, account: config.account) == true
        }.map(\.name)
    }

    func itemID(_ cacheId: String) -> KeyItemID {
        KeyItemID(applicationId: config.applicationId, account: config.account, cacheId: cacheId)
    }

    /// After a failed open (a full disk…), removes the `-wal` and `-shm` this open created and that
    /// hold nothing, so a transient failure leaves the directory as it found it. A `-wal` with
    /// content is never touched (it may hold commits); the `-shm`, only an index of the `-wal`
    /// that SQLite rebuilds, goes only when the `-wal` is missing or empty. Runs while the lock
    /// is held and after this open's connections are gone; files that were there before stay.
    func removeEmptyCompanionsThisOpenCreated() {
        guard lock != nil, let before = companionsAtLock else { return }
        func isRegular(_ path: String) -> Bool {
            var st = stat()
            return lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG
        }
        if !before.contains(dir.wal), isRegular(dir.wal), CacheDirectory.fileSize(dir.wal) == 0 { CacheDirectory.remove(dir.wal) }
        if !before.contains(dir.shm), isRegular(dir.shm), CacheDirectory.fileSize(dir.wal) == 0 { CacheDirectory.remove(dir.shm) }
    }

    /// A `cache.db.next` left by an interrupted encryption change is never needed: the old
    /// database is intact until the rename, after which the target no longer exists. A plaintext
    /// leftover is scrubbed.
    func removeMigrationLeftovers() {
        for path in [dir.migrationTarget, dir.migrationTarget + "-journal", dir.migrationTarget + "-wal", dir.migrationTarget + "-shm"] {
            var st = stat()
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            CipherProof.header(of: dir.migrationTarget) == .plaintext ? CacheDirectory.scrubAndRemove(path) : CacheDirectory.remove(path)
        }
    }
}

extension DatabaseVerdict {
    /// The unavailable reason for a file-system failure.
    static func reason(_ error: SecureFileError) -> UnavailableReason {
        if case .transient(let reason) = DatabaseVerdict(error) { return reason }
        return .resources
    }
}
