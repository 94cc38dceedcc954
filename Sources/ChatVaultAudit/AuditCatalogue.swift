import ChatVault
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore

/// One scenario: set up, break, relaunch (the launches are recorded by the context).
struct AuditScenario: Sendable {
    var name: String
    var summary: String
    /// Whether the private bus gets a keyring at the start.
    var secretService = true
    var expect: AuditExpectation
    var body: @Sendable (AuditContext) async throws -> Void
}

/// The kit's catalogue, in the order it runs. Each ends with a relaunch, so an announcement that
/// repeats (or a notice that does) is seen.
enum AuditCatalogue {
    static func reset(_ reason: String, unsentSurvive: Bool?) -> AuditExpectation {
        AuditExpectation(reset: reason, state: "ready", messagesSurvive: false, unsentSurvive: unsentSurvive)
    }
    static let kept = AuditExpectation(reset: nil, state: "ready", messagesSurvive: true, unsentSurvive: true)

    /// Seed, `damage`, relaunch twice.
    static func damaged(_ name: String, _ summary: String, _ expect: AuditExpectation,
                        _ damage: @escaping @Sendable (AuditContext) throws -> Void) -> AuditScenario {
        AuditScenario(name: name, summary: summary, expect: expect) { ctx in
            try await ctx.seed()
            try damage(ctx)
            try await ctx.launch("after")
            try await ctx.launch("relaunch")
        }
    }

    static let all: [AuditScenario] = [
        damaged("key-lost", "the key item deleted from the unlocked keyring: keyLost, the old cache set aside",
                reset("keyLost", unsentSurvive: false)) { ctx in try ctx.keyStore.delete(try ctx.keyItem()) },
        damaged("wrong-key", "another key under the item: wrongKey", reset("wrongKey", unsentSurvive: false)) { ctx in
            try ctx.keyStore.store(try CacheKey.generate(), keyId: "audit-wrong-key", for: try ctx.keyItem(), label: "chatvault audit wrong key")
        },
        damaged("damaged-header", "the file's first 64 bytes overwritten: corrupted", reset("corrupted", unsentSurvive: nil)) { ctx in
            Damage.header(ctx.directory.database)
        },
        damaged("damaged-middle-page", "a page in the middle overwritten: corrupted, unsent messages salvaged where readable",
                reset("corrupted", unsentSurvive: nil)) { ctx in Damage.middlePage(ctx.directory.database) },
        damaged("truncated-file", "the database cut to half its size: corrupted", reset("corrupted", unsentSurvive: nil)) { ctx in
            Damage.truncateHalf(ctx.directory.database)
        },
        damaged("damaged-wal", "random bytes as the WAL: ignored, nothing lost, no notice", kept) { ctx in Damage.garbageWAL(ctx.directory.wal) },
        damaged("deleted-manifest", "manifest.json deleted: rebuilt, nothing lost, no notice", kept) { ctx in unlink(ctx.directory.manifest) },
        AuditScenario(name: "escalation", summary: "a failure that recurs at every open: unavailable, then escalated at the threshold",
                      expect: AuditExpectation(reset: nil, state: "unavailable", unavailableReason: "unclassified", laterReset: "escalated",
                                               messagesSurvive: false, unsentSurvive: nil)) { ctx in
            try await ctx.seed()
            let raw = try ctx.rawConnection()
            try raw.sync { db in try db.execute("DROP TABLE list_snapshots") }
            raw.close()
            try await ctx.launch("after")
            var launches = 1
            while launches < 6, ctx.launches.last?.resets.isEmpty ?? true {
                launches += 1
                try await ctx.launch("retry \(launches)")
            }
            ctx.check(ctx.launches.last?.resets.map(\.reason) == ["escalated"], "an escalated reset at the app's threshold",
                      "\(ctx.launches.last?.resets.map { $0.reason ?? "?" } ?? []) after \(launches) launches")
            try await ctx.launch("relaunch")
        },
        AuditScenario(name: "encryption-on-to-off", summary: "the app turns encryption off: migrated, nothing lost",
                      expect: AuditExpectation(reset: "encryptionChanged", state: "ready", messagesSurvive: true, unsentSurvive: true)) { ctx in
            try await ctx.seed()
            try await ctx.launch("after", encryption: false)
            try await ctx.launch("relaunch", encryption: false)
        },
        AuditScenario(name: "encryption-off-to-on", summary: "the app turns encryption on: migrated, nothing lost",
                      expect: AuditExpectation(reset: "encryptionChanged", state: "ready", messagesSurvive: true, unsentSurvive: true)) { ctx in
            try await ctx.seed(encryption: false)
            try await ctx.launch("after", encryption: true)
            try await ctx.launch("relaunch", encryption: true)
        },
        AuditScenario(name: "locked-keyring", summary: "the keyring locked: unavailable, never a reset; unlocked: every row back",
                      expect: AuditExpectation(reset: nil, state: "unavailable", unavailableReason: "locked", messagesSurvive: true,
                                               unsentSurvive: true)) { ctx in
            try await ctx.seed()
            try ctx.keyring.lock()
            try await ctx.launch("after")
            try ctx.keyring.unlock()
            try await ctx.launch("relaunch")
        },
        AuditScenario(name: "no-secret-service-online-only", summary: "no Secret Service, onlineOnly: no cache, nothing written, no notice",
                      secretService: false,
                      expect: AuditExpectation(reset: nil, state: "onlineOnly", messagesSurvive: nil, unsentSurvive: nil)) { ctx in
            try await ctx.launch("after", behavior: .onlineOnly)
            ctx.check(!FileManager.default.fileExists(atPath: ctx.directory.path), "nothing written under onlineOnly", "a cache directory")
        },
        AuditScenario(name: "no-secret-service-plaintext-fallback", summary: "no Secret Service, plaintextFallback: an honest plaintext cache",
                      secretService: false,
                      expect: AuditExpectation(reset: nil, state: "plaintextFallback", messagesSurvive: nil, unsentSurvive: nil)) { ctx in
            try await ctx.launch("after", behavior: .plaintextFallback)
        },
        AuditScenario(name: "secret-service-gone-mid-session", summary: "the keyring daemon ends while the app runs: unavailable at the next launch, never a reset",
                      expect: AuditExpectation(reset: nil, state: "unavailable", unavailableReason: "keyStoreMissing", messagesSurvive: true,
                                               unsentSurvive: true)) { ctx in
            try await ctx.seed()
            try await ctx.launch("running") { _ in ctx.keyring.stopSecretService() }
            try await ctx.launch("after", behavior: .plaintextFallback)
            ctx.check(CipherProof.header(of: ctx.directory.database) == .opaque, "no plaintext cache beside the encrypted one", "a plaintext header")
            try ctx.keyring.startSecretService()
            try await ctx.launch("relaunch")
        },
        AuditScenario(name: "second-instance", summary: "the app started twice on one cache: the second is told cacheInUse, no notice",
                      expect: AuditExpectation(reset: nil, state: "unavailable", unavailableReason: "cacheInUse", messagesSurvive: true,
                                               unsentSurvive: true)) { ctx in
            try await ctx.seed()
            try await ctx.launch("first") { _ in try await ctx.launch("after") }
            try await ctx.launch("relaunch")
        },
        AuditScenario(name: "restore-from-quarantine", summary: "key lost, then back from a backup: reset, then the quarantined cache restored",
                      expect: AuditExpectation(reset: "keyLost", state: "ready", messagesSurvive: true, unsentSurvive: true)) { ctx in
            try await ctx.seed()
            let item = try ctx.keyItem()
            guard case .found(let key, let keyId) = ctx.keyStore.lookup(item) else { throw AuditError.seedFailed("no key after seeding") }
            try ctx.keyStore.delete(item)
            try await ctx.launch("after")
            try ctx.keyStore.store(key, keyId: keyId, for: item, label: "chatvault audit key from a backup")
            try await ctx.launch("restore") { app in
                let entry = app.vault.quarantinedOfflineCaches().first { $0.keyPresent == true }
                guard let entry else { return ctx.check(false, "the quarantined cache listed as restorable", "none") }
                _ = try await app.vault.restoreQuarantinedOfflineCache(id: entry.id)
            }
            try await ctx.launch("relaunch")
            ctx.check(ctx.launches.last?.journal.isEmpty == false, "the journal kept", "nothing")
        },
        AuditScenario(name: "recover-with-secret", summary: "key lost after a recovery secret was made: reset, then recovered with the secret",
                      expect: AuditExpectation(reset: "keyLost", state: "ready", messagesSurvive: true, unsentSurvive: true)) { ctx in
            try await ctx.seed()
            let secret = SecretBox()
            try await ctx.launch("make-secret") { app in secret.value = try await app.vault.createOfflineRecoverySecret().secret }
            try ctx.keyStore.delete(try ctx.keyItem())
            try await ctx.launch("after")
            try await ctx.launch("recover") { app in
                guard let value = secret.value else { return ctx.check(false, "a recovery secret", "none") }
                _ = try await app.vault.recoverOfflineCache(secret: value)
            }
            try await ctx.launch("relaunch")
        },
    ]
}

final class SecretBox: @unchecked Sendable {
    var value: RecoverySecret?
}
