import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// The key-management scenarios: rotation (whole, and stopped past its swap), moving the key to
/// the other store, a recovery secret (right and wrong), restoring a quarantined cache whose key
/// came back, and export/import to another directory.
extension Catalogue {
    static let keyManagement: [Scenario] = [
        Scenario(name: "key-rotate", summary: "rotate the key: a new key, the cache rewritten under it, every row kept") { ctx in
            let id = try await ctx.seed(messages: messages, pending: pending)
            let before = ctx.manifest?.keyId
            guard case .found(let old, _) = ctx.store.lookup(ctx.itemID(id)) else { throw CLIError.failure("no key after seeding") }
            _ = try await ctx.open { vault in _ = try await vault.rotateOfflineCacheKey() }
            ctx.check(ctx.manifest?.keyId != before && ctx.manifest?.keyChange == nil, "the manifest does not name a new key")
            if case .found(let new, _) = ctx.store.lookup(ctx.itemID(id)) {
                ctx.check(!new.isEqual(to: old), "the store still holds the old key")
            } else {
                ctx.check(false, "the store lost the key")
            }
            return (.ready(messages: messages, pending: pending), try await ctx.open())
        },
        Scenario(name: "key-rotate-interrupted", summary: "a rotation stopped right after its swap: the next open finishes it, no reset") { ctx in
            try await ctx.seed(messages: messages, pending: pending)
            var config = StoreConfiguration(directory: ctx.directory, applicationId: ScenarioContext.applicationId, account: ctx.directory.account,
                                            keyLabel: "chatvault scenario key", encryption: true, failureBehavior: .onlineOnly, keyStores: [ctx.store])
            config.quarantine = QuarantinePolicy()
            do {
                _ = try KeyManager.rotate(config, crashAt: .rotateAfterRename)
                ctx.check(false, "the rotation did not stop at its crash point")
            } catch {
                ctx.check((error as? KeyManagementError) == .simulatedCrash, "the rotation failed otherwise: \(error)")
            }
            ctx.check(ctx.manifest?.keyChange?.phase == .swapping, "the manifest does not record the rotation in progress")
            let observed = try await ctx.open()
            ctx.check(ctx.manifest?.keyChange == nil, "the open left the rotation unfinished")
            return (.ready(messages: messages, pending: pending), observed)
        },
        Scenario(name: "key-move", summary: "move the key to the other store: the status follows, the old copy is gone",
                 keystores: ["secret-service", "file"]) { ctx in
            let id = try await ctx.seed(messages: messages, pending: pending)
            let vault = try KeyCommand.movingVault(ctx.common, root: ctx.root)
            let target = ctx.common.keystore == "file" ? "secret-service" : "file"
            _ = try await ctx.open(using: vault) { vault in _ = try await vault.moveOfflineCacheKey(toStore: target) }
            ctx.check(ctx.manifest?.keyStore == target, "the manifest names \(ctx.manifest?.keyStore ?? "nothing"), not \(target)")
            if case .found = ctx.store.lookup(ctx.itemID(id)) { ctx.check(false, "the old store still holds the key") }
            let observed = try await ctx.open(using: try KeyCommand.movingVault(ctx.common, root: ctx.root))
            let expectedTier = target == "file" ? "SOFTWARE" : "KEYSTORE"
            ctx.check(observed.keyStorage == expectedTier, "keyStorage is \(observed.keyStorage), expected \(expectedTier)")
            // Back where it was, so the scenario leaves the store as it found it.
            _ = try await ctx.open(using: try KeyCommand.movingVault(ctx.common, root: ctx.root)) { vault in
                _ = try await vault.moveOfflineCacheKey(toStore: ctx.common.keystore)
            }
            return (.ready(messages: messages, pending: pending), observed)
        },
        Scenario(name: "recover-with-secret", summary: "key lost after a recovery secret was made: reset, then recover(secret:) brings every row back") { ctx in
            let id = try await ctx.seed(messages: messages, pending: pending)
            var secret: RecoverySecret?
            _ = try await ctx.open { vault in secret = try await vault.createOfflineRecoverySecret().secret }
            try ctx.store.delete(ctx.itemID(id))
            let reset = try await ctx.open()
            ctx.check(reset.resets.map(\.reason) == ["keyLost"], "the key loss did not reset: \(reset.resets)")
            guard let secret else { throw CLIError.failure("no recovery secret") }
            _ = try await ctx.open { vault in _ = try await vault.recoverOfflineCache(secret: secret) }
            ctx.check(ctx.manifest?.cacheId == id, "the recovered cache is not the old one")
            return (.ready(messages: messages, pending: pending), try await ctx.open())
        },
        Scenario(name: "recover-wrong-secret", summary: "a wrong recovery secret: a typed error, nothing changes") { ctx in
            let id = try await ctx.seed(messages: messages, pending: pending)
            _ = try await ctx.open { vault in _ = try await vault.createOfflineRecoverySecret() }
            try ctx.store.delete(ctx.itemID(id))
            _ = try await ctx.open()
            let before = ctx.fileDigest()
            _ = try await ctx.open { vault in
                do {
                    _ = try await vault.recoverOfflineCache(secret: try RecoverySecret.generate())
                    ctx.check(false, "a wrong secret was accepted")
                } catch {
                    ctx.check((error as? KeyManagementError) == .wrongSecret, "a wrong secret gave \(error), expected wrongSecret")
                }
            }
            ctx.check(ctx.manifest?.cacheId != id, "the old cache came back with a wrong secret")
            ctx.check(ctx.fileDigest()["cache.db"] != nil && ctx.quarantineCount() == 1, "the quarantine changed: \(before.count) files before")
            return (.ready(messages: 0, pending: 0), try await ctx.open())
        },
        Scenario(name: "quarantine-restore", summary: "the key comes back (keyring restored from backup): the open says so, restore brings the cache back") { ctx in
            let id = try await ctx.seed(messages: messages, pending: pending)
            guard case .found(let key, let keyId) = ctx.store.lookup(ctx.itemID(id)) else { throw CLIError.failure("no key after seeding") }
            try ctx.store.delete(ctx.itemID(id))
            _ = try await ctx.open()
            try ctx.store.store(key, keyId: keyId, for: ctx.itemID(id), label: "chatvault scenario key from a backup")
            var entry: String?
            _ = try await ctx.open { _ in entry = ctx.lastAttempt?.restorableCaches.first }
            ctx.check(entry != nil, "the open did not report the restorable cache")
            _ = try await ctx.open { vault in _ = try await vault.restoreQuarantinedOfflineCache(id: entry ?? "") }
            ctx.check(ctx.manifest?.cacheId == id, "the restored cache is not the old one")
            return (.ready(messages: messages, pending: pending), try await ctx.open())
        },
        Scenario(name: "export-import", summary: "export to one file, import on another machine (another directory): every row and unsent message") { ctx in
            try await ctx.seed(messages: messages, pending: pending)
            let file = "\(ctx.root)/moved.cvx"
            var secret: RecoverySecret?
            _ = try await ctx.open { vault in secret = try await vault.exportOfflineCache(to: file).secret }
            guard let secret else { throw CLIError.failure("no export secret") }
            let exported = FileManager.default.contents(atPath: file) ?? Data()
            let leaks = String(decoding: exported, as: UTF8.self).contains(ScenarioContext.marker)
            ctx.check(!exported.isEmpty && !leaks, "the export file is missing or holds plaintext")
            let newMachine: String = ctx.root + "/new-machine"
            let elsewhere: OfflineVault = try makeVault(ctx.common, root: newMachine, encryption: true, behavior: .onlineOnly, memory: ctx.memory)
            _ = try await ctx.open(using: elsewhere) { vault in _ = try await vault.importOfflineCache(from: file, secret: secret) }
            let later: OfflineVault = try makeVault(ctx.common, root: newMachine, encryption: true, behavior: .onlineOnly, memory: ctx.memory)
            let observed: Observation = try await ctx.open(using: later)
            let expected: Expectation = .ready(messages: messages, pending: pending)
            return (expected, observed)
        },
    ]
}
