public import VaultKeys
public import VaultStore

/// Key management for the logged-in user's cache (`KeyManager`): rotation and moving the key
/// between stores. Each closes the cache, makes the change with the cache's lock held (a crash at
/// any instant is finished or rolled back by the next open), and opens the cache again; the state
/// is `.opening` meanwhile, and the outbox and sync resume on the reopened cache.
extension OfflineVault {
    /// Replaces the cache's key with a new random one and rewrites the cache under it.
    ///
    ///     let report = try await vault.rotateOfflineCacheKey()
    ///     print(report.newKeyId)         // an id, never the key
    ///
    /// - Throws: `KeyManagementError`: `.unavailable` (locked keyring, full disk, busy…: nothing
    ///   changed, try again later), `.notEncrypted`, `.noCache` (nobody logged in), or
    ///   `.unfinished` (past the point of no return: the reopen already finished it).
    public func rotateOfflineCacheKey() async throws(KeyManagementError) -> KeyChangeReport {
        try await changeKey(journal: (.keyChanged, "rotated")) { configuration throws(KeyManagementError) in try KeyManager.rotate(configuration) }
    }

    /// Moves the cache's key to another configured store (`"secret-service"`, `"file"`, or a
    /// custom store's name); `getOfflineEncryptionStatus()["keyStorage"]` follows.
    public func moveOfflineCacheKey(toStore name: String) async throws(KeyManagementError) -> KeyChangeReport {
        try await changeKey(journal: (.keyChanged, "moved")) { configuration throws(KeyManagementError) in try KeyManager.move(configuration, to: name) }
    }

    /// Makes a recovery secret for the cache (opt-in): show `report.secret.formatted` to the user
    /// once, to write down; it is never stored or shown again. When the key is later lost or
    /// wrong, the reset happens as usual and `recoverOfflineCache(secret:)` brings the old cache
    /// back. Takes about half a second (the key derivation). A new secret replaces the old one.
    public func createOfflineRecoverySecret() async throws(KeyManagementError) -> RecoverySecretReport {
        try await changeKey { configuration throws(KeyManagementError) in try KeyManager.createRecoverySecret(configuration) }
    }

    /// Restores the quarantined cache the user's recovery secret opens, messages and outbox, as
    /// the current cache; the unsent messages of the cache it replaces are merged in, the rest of
    /// that cache is set aside (its other rows are copies of the server's). The key is stored again.
    ///
    ///     let secret = try RecoverySecret(parsing: typed)       // a typo: .checksumMismatch
    ///     let report = try await vault.recoverOfflineCache(secret: secret)
    ///
    /// - Throws: `.wrongSecret` (nothing changed; attempts are not limited, each takes the key
    ///   derivation's time), `.noRecoverableCache`, `.unavailable`.
    public func recoverOfflineCache(secret: RecoverySecret) async throws(KeyManagementError) -> CacheRestoreReport {
        try await changeKey(journal: (.restored, "recovery secret")) { configuration throws(KeyManagementError) in
            try KeyManager.recover(configuration, secret: secret)
        }
    }

    /// `recoverOfflineCache(secret:)` under the name the key-management issue gives it.
    public func recover(secret: RecoverySecret) async throws(KeyManagementError) -> CacheRestoreReport {
        try await recoverOfflineCache(secret: secret)
    }

    /// The logged-in user's quarantined caches, newest first. Asks the key store whether each
    /// one's key is present: blocks; call it off the main thread.
    public func quarantinedOfflineCaches() -> [QuarantinedCache] {
        let (userId, directory) = session.withLock { ($0.userId, $0.directory) }
        guard let userId, let directory else { return [] }
        return KeyManager.quarantined(storeConfiguration(directory: directory, userId: userId, countsTowardEscalation: false,
                                                         integrityCheckLimit: nil))
    }

    /// Restores a quarantined cache whose key is back in its store (`OpenAttempt.restorableCaches`).
    public func restoreQuarantinedOfflineCache(id: String) async throws(KeyManagementError) -> CacheRestoreReport {
        try await changeKey(journal: (.restored, "quarantine")) { configuration throws(KeyManagementError) in
            try KeyManager.restore(configuration, entry: id)
        }
    }

    /// Writes the cache (messages, outbox, media, the key wrapped by a one-time secret) to one file
    /// at `path` (created 0600) for another machine. Show `report.secret.formatted` to the user
    /// once: the file is useless without it.
    public func exportOfflineCache(to path: String) async throws(KeyManagementError) -> CacheExportReport {
        try await changeKey { configuration throws(KeyManagementError) in try CacheTransfer.export(configuration, to: path) }
    }

    /// Makes an exported cache the logged-in user's cache (the key stored in this machine's key
    /// store); what the current cache holds unsent is merged in, the rest set aside.
    public func importOfflineCache(from path: String, secret: RecoverySecret) async throws(KeyManagementError) -> CacheRestoreReport {
        try await changeKey(journal: (.restored, "import")) { configuration throws(KeyManagementError) in
            try CacheTransfer.importCache(configuration, from: path, secret: secret)
        }
    }

    /// Runs a key change on the lifecycle queue between a close and a reopen of the cache.
    /// `journal` names what a success leaves in the audit journal (written by the reopen).
    private func changeKey<T: Sendable>(journal: (kind: AuditEntry.Kind, detail: String)? = nil,
                                        _ change: @escaping @Sendable (StoreConfiguration) throws(KeyManagementError) -> T)
        async throws(KeyManagementError) -> T {
        let result: Result<T, KeyManagementError> = await withCheckedContinuation { continuation in
            lifecycle.async {
                let (userId, directory, state) = self.session.withLock { ($0.userId, $0.directory, $0.state) }
                guard let userId, let directory else { return continuation.resume(returning: .failure(.noCache)) }
                guard self.config.enabled, self.config.encryption else { return continuation.resume(returning: .failure(.notEncrypted)) }
                switch state {
                case .ready: break
                case .unavailable(let reason): return continuation.resume(returning: .failure(.unavailable(reason)))
                case .opening: return continuation.resume(returning: .failure(.unavailable(.cacheInUse(pid: nil))))
                default: return continuation.resume(returning: .failure(.notEncrypted))
                }
                self.closeLocked(state: .opening)
                let configuration = self.storeConfiguration(directory: directory, userId: userId, countsTowardEscalation: false,
                                                            integrityCheckLimit: nil)
                let outcome: Result<T, KeyManagementError>
                do throws(KeyManagementError) {
                    outcome = .success(try change(configuration))
                    if let journal { self.audit.enqueue(AuditEntry(kind: journal.kind, detail: journal.detail)) }
                } catch {
                    outcome = .failure(error)
                }
                let generation = self.session.withLock { $0.generation }
                self.attemptOpen(generation: generation, countsTowardEscalation: false) { _ in
                    continuation.resume(returning: outcome)
                }
            }
        }
        return try result.get()
    }
}
