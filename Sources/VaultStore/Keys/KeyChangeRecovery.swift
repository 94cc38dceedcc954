import Foundation
import VaultKeys

/// The open's first look at a manifest: a key change a crash interrupted is finished or rolled
/// back before anything else reads the cache (`KeyChange` lists the phases). A store that cannot
/// answer now makes the cache unavailable (transient, nothing touched); nothing here resets.
extension OpenProcedure {
    mutating func resumeKeyChange() throws {
        guard case .valid(var manifest) = ManifestFile.read(directory: dir.path) else { return }
        guard let change = manifest.keyChange else {
            // Media twins beside a manifest with no rotation in progress are what a rolled-back
            // one left (a damaged manifest says nothing: they are left alone then).
            MediaRekey.removeTwins(dir)
            try? MediaRekey.finishSwaps(dir)
            return
        }
        let steps = KeyChangeSteps(dir: dir, config: config)
        do throws(KeyStepError) {
            switch change.kind {
            case .rotate: try resumeRotation(&manifest, change, steps)
            case .move: try resumeMove(&manifest, change, steps)
            }
        } catch {
            notes.append("an interrupted key \(change.kind.rawValue) could not be settled now (\(error.reason)); the cache waits")
            throw OpenStop.unavailable(error.reason)
        }
    }

    private mutating func resumeRotation(_ manifest: inout Manifest, _ change: KeyChange, _ steps: KeyChangeSteps) throws(KeyStepError) {
        guard let store = steps.store(named: change.toStore) else { throw .storeMissing(change.toStore) }
        let main = steps.itemID(manifest.cacheId)
        let staging = KeyChange.stagingItem(main)
        var phase = change.phase
        if phase == .exporting {
            // The old database and the main item are untouched: drop the export and the new key.
            steps.removeExport()
            try steps.remove(staging, from: store)
            manifest.keyChange = nil
            try steps.write(manifest)
            notes.append("an interrupted key rotation was rolled back (it had not reached the swap); the cache keeps its key")
            return
        }
        if phase == .swapping {
            let newKey = try steps.checkedKey(in: store, staging, cacheId: manifest.cacheId, check: change.toKeyCheck)
            if steps.hasExport {
                guard newKey != nil else {
                    // Without the new key the export is useless; the old database still serves.
                    steps.removeExport()
                    try? steps.remove(staging, from: store)
                    manifest.keyChange = nil
                    try steps.write(manifest)
                    notes.append("an interrupted key rotation was rolled back (its new key is gone); the cache keeps its key")
                    return
                }
                try steps.swapExportIn()
            } else if newKey != nil {
                // Renamed already: the media trees may still be mid-swap.
                try MediaRekey.finishSwaps(dir)
            } else {
                // No export and no new key. If the old key still opens the database, the swap
                // never happened (a record written by hand, or a staging item lost before the
                // swap): the record goes. Otherwise the database is under a key that is gone; the
                // manifest names the new key so the open reports what really happened.
                if let oldKey = try steps.checkedKey(in: store, main, cacheId: manifest.cacheId, check: manifest.keyCheck ?? ""),
                   opensDatabase(with: oldKey, profile: manifest.cipherProfile) {
                    manifest.keyChange = nil
                    try steps.write(manifest)
                    notes.append("a key rotation record without an export or a new key was dropped; the cache keeps its key")
                    return
                }
                notes.append("an interrupted key rotation had swapped the database but its new key is gone from \(store.name)")
            }
            manifest.keyId = change.toKeyId
            manifest.keyCheck = change.toKeyCheck
            manifest.keyChange?.phase = .storing
            try steps.write(manifest)
            phase = .storing
        }
        if phase == .storing {
            try MediaRekey.finishSwaps(dir)
            if try steps.checkedKey(in: store, main, cacheId: manifest.cacheId, check: change.toKeyCheck) == nil,
               let newKey = try steps.checkedKey(in: store, staging, cacheId: manifest.cacheId, check: change.toKeyCheck) {
                try steps.put(newKey, keyId: change.toKeyId, in: store, main, label: config.keyLabel)
            }
            try? steps.remove(staging, from: store)
            manifest.keyChange = nil
            try steps.write(manifest)
            notes.append("an interrupted key rotation was finished; the cache is under its new key")
        }
    }

    /// Whether `key` opens the database (a read-only probe; a busy file says no).
    private func opensDatabase(with key: CacheKey, profile: CipherProfile?) -> Bool {
        var options = config.connection
        options.readOnly = true
        guard let probe = try? DatabaseQueue(path: dir.database, keying: .encrypted(key, profile ?? .standard(engine: engine)),
                                             options: options, label: "rotation-probe") else { return false }
        defer { probe.close() }
        return (try? probe.sync { db in try db.scalarInt("SELECT count(*) FROM sqlite_master") }) != nil
    }

    private mutating func resumeMove(_ manifest: inout Manifest, _ change: KeyChange, _ steps: KeyChangeSteps) throws(KeyStepError) {
        let item = steps.itemID(manifest.cacheId)
        // The manifest names the store that certainly holds the key; the other copy is removed.
        // A store that cannot remove it now keeps the record, and the open goes on: the copy is
        // removed by a later open.
        let spare = change.phase == .storing ? change.toStore : change.fromStore
        guard let store = steps.store(named: spare) else {
            notes.append("an interrupted key move left a copy in \(spare), which this session does not have; it is removed when it is")
            return
        }
        do throws(KeyStepError) {
            try steps.remove(item, from: store)
        } catch {
            notes.append("an interrupted key move left a copy of the key in \(spare), not removable now (\(error.reason))")
            return
        }
        manifest.keyChange = nil
        try steps.write(manifest)
        notes.append(change.phase == .storing ? "an interrupted key move was rolled back; the key stays in \(change.fromStore)"
                     : "an interrupted key move was finished; the key is in \(change.toStore)")
    }
}
