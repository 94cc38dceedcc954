import Foundation
import VaultKeys

/// Why one step of a key change could not be made. Transient by nature: the change is abandoned
/// (or left for the next open to finish) and nothing is lost.
enum KeyStepError: Error {
    case keyStore(KeyUnavailableReason)
    /// The store the change needs is not configured in this session.
    case storeMissing(String)
    case file(SecureFileError)
    case database(any Error)
    /// Test seam (`KeyChangeCrashPoint`): stop here as if killed.
    case simulatedCrash

    var reason: UnavailableReason {
        switch self {
        case .keyStore(let reason): return .keyStore(reason)
        case .storeMissing(let name): return .keyStoreMissing(store: name, nil)
        case .file(let error): return DatabaseVerdict.reason(error)
        case .database(let error):
            if case .transient(let reason) = DatabaseVerdict(error) { return reason }
            return .migrationFailed(code: (error as? DatabaseError)?.primaryCode ?? 1)
        case .simulatedCrash: return .resources
        }
    }
}

/// The steps a rotation or a key move is made of, shared by the live change (`KeyManager`) and
/// by the open that finishes an interrupted one (`KeyChangeRecovery`). Each step is atomic on
/// its own (a rename, an atomic manifest write, a store's replace); their order is what keeps a
/// crash between any two of them harmless (see `KeyChange`).
struct KeyChangeSteps {
    let dir: CacheDirectory
    let config: StoreConfiguration

    func itemID(_ cacheId: String) -> KeyItemID {
        KeyItemID(applicationId: config.applicationId, account: config.account, cacheId: cacheId)
    }

    func store(named name: String) -> (any KeyStore)? {
        config.keyStores.first { $0.name == name }
    }

    func write(_ manifest: Manifest) throws(KeyStepError) {
        do {
            try ManifestFile.write(manifest, directory: dir.path)
        } catch {
            throw .file(error)
        }
    }

    /// The key in `item` when it is the one `check` names; nil when the item is absent or holds
    /// another key. Throws when the store cannot answer now.
    func checkedKey(in store: any KeyStore, _ item: KeyItemID, cacheId: String, check: String) throws(KeyStepError) -> CacheKey? {
        switch store.lookup(item) {
        case .unavailable(let reason): throw .keyStore(reason)
        case .absent: return nil
        case .found(let key, _): return key.checkValue(cacheId: cacheId) == check ? key : nil
        }
    }

    func put(_ key: CacheKey, keyId: String, in store: any KeyStore, _ item: KeyItemID, label: String) throws(KeyStepError) {
        do {
            try store.store(key, keyId: keyId, for: item, label: label)
        } catch {
            throw .keyStore(error.reason)
        }
    }

    func remove(_ item: KeyItemID, from store: any KeyStore) throws(KeyStepError) {
        do {
            try store.delete(item)
        } catch {
            throw .keyStore(error.reason)
        }
    }

    /// Whether the exported database is still waiting to be renamed into place.
    var hasExport: Bool {
        var st = stat()
        return lstat(dir.migrationTarget, &st) == 0 && st.st_mode & S_IFMT == S_IFREG
    }

    /// Removes an unfinished export and its media twins (the database and the media they came
    /// from are untouched).
    func removeExport() {
        for path in [dir.migrationTarget, dir.migrationTarget + "-journal", dir.migrationTarget + "-wal", dir.migrationTarget + "-shm"] {
            CacheDirectory.remove(path)
        }
        MediaRekey.removeTwins(dir)
    }

    /// Puts the verified export in place of the database. The old WAL is empty (the source was
    /// checkpointed with TRUNCATE and nothing writes under the lock) and must not be replayed
    /// into the new file, so it goes first; the rename is the instant the cache changes key.
    func swapExportIn() throws(KeyStepError) {
        CacheDirectory.remove(dir.wal)
        CacheDirectory.remove(dir.shm)
        guard rename(dir.migrationTarget, dir.database) == 0 else {
            throw .file(.system(dir.database, operation: "rename", errno: errno))
        }
        do {
            try SecureFiles.syncDirectory(dir.path)
        } catch {
            throw .file(error)
        }
        // The new database holds only the new media key: its files follow at once.
        try MediaRekey.finishSwaps(dir)
    }
}
