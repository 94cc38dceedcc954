import ChatVault
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore

/// One scenario of the catalogue.
struct Scenario: Sendable {
    /// Where a scenario runs when the store is the real Secret Service.
    enum Placement: Sendable {
        /// In this process, on the ambient session's keyring (items under a scenario-only app id).
        case here
        /// In a child process on a private bus with a throwaway gnome-keyring (it gets locked).
        case privateKeyring
        /// In a child process on a private bus without any Secret Service.
        case noSecretService
    }

    var name: String
    var summary: String
    var placement: Placement = .here
    /// Key stores the scenario means something for.
    var keystores: Set<String> = ["secret-service", "file", "memory"]
    var body: @Sendable (ScenarioContext) async throws -> (Expectation, Observation)
}

/// The whole catalogue, in the order it runs.
enum Catalogue {
    static let messages = 200
    static let pending = 5
    static let big = 1500

    static let all: [Scenario] = [
        Scenario(name: "fresh-create", summary: "no cache yet: an encrypted cache is created and proven") { ctx in
            let observed = try await ctx.open()
            ctx.check(CipherProof.header(of: ctx.directory.database) == .opaque, "the new database header is not encrypted")
            return (.ready(messages: 0, pending: 0), observed)
        },
        Scenario(name: "reopen", summary: "key found, key-check matches: ready, every row kept") { ctx in
            try await ctx.seed(messages: messages, pending: pending)
            return (.ready(messages: messages, pending: pending), try await ctx.open())
        },
        Scenario(name: "key-lost", summary: "key item deleted from an unlocked store: keyLost, old cache quarantined") { ctx in
            let id = try await ctx.seed(messages: messages, pending: pending)
            try ctx.store.delete(ctx.itemID(id))
            let observed = try await ctx.open()
            ctx.check(ctx.quarantineCount() == 1, "the old cache was not set aside in quarantine/")
            return (.ready(resets: [ResetRecord(reason: "keyLost", pendingMessagesLost: -1)], messages: 0, pending: 0), observed)
        },
        Scenario(name: "wrong-key", summary: "another key under the item: wrongKey, old cache quarantined") { ctx in
            let id = try await ctx.seed(messages: messages, pending: pending)
            try ctx.store.store(try CacheKey.generate(), keyId: "scenario-wrong-key", for: ctx.itemID(id), label: "chatvault scenario wrong key")
            return (.ready(resets: [ResetRecord(reason: "wrongKey", pendingMessagesLost: -1)], messages: 0, pending: 0), try await ctx.open())
        },
        Scenario(name: "damaged-header", summary: "first 64 bytes overwritten: corrupted, outbox unreadable (-1)") { ctx in
            try await ctx.seed(messages: messages, pending: pending)
            Damage.header(ctx.directory.database)
            return (.ready(resets: [ResetRecord(reason: "corrupted", pendingMessagesLost: -1)], messages: 0, pending: 0), try await ctx.open())
        },
        Scenario(name: "damaged-middle-page", summary: "a page in the middle overwritten: corrupted, unsent messages salvaged") { ctx in
            try await ctx.seed(messages: big, pending: pending)
            Damage.middlePage(ctx.directory.database)
            return (.ready(resets: [ResetRecord(reason: "corrupted", pendingMessagesLost: 0)], messages: 0, pending: pending), try await ctx.open())
        },
        Scenario(name: "truncated-file", summary: "database cut to half its size: corrupted; salvage zero-extends a copy, the unsent messages come back") { ctx in
            try await ctx.seed(messages: big, pending: pending)
            Damage.truncateHalf(ctx.directory.database)
            // SQLite refuses a file shorter than its header's page count as a whole; salvage
            // extends a copy to that count, and the outbox (created with the schema, in the first
            // pages) reads again: nothing lost.
            return (.ready(resets: [ResetRecord(reason: "corrupted", pendingMessagesLost: 0)], messages: 0, pending: pending), try await ctx.open())
        },
        Scenario(name: "garbage-wal", summary: "random bytes as the WAL: SQLite ignores it, every row kept") { ctx in
            try await ctx.seed(messages: messages, pending: pending)
            Damage.garbageWAL(ctx.directory.wal)
            return (.ready(messages: messages, pending: pending), try await ctx.open())
        },
        Scenario(name: "deleted-manifest", summary: "manifest.json deleted: rebuilt from the header and the key item, rows kept") { ctx in
            let id = try await ctx.seed(messages: messages, pending: pending)
            unlink(ctx.directory.manifest)
            let observed = try await ctx.open()
            ctx.check(ctx.manifest?.cacheId == id, "the manifest was not repaired with the same cache id")
            return (.ready(messages: messages, pending: pending), observed)
        },
        Scenario(name: "encryption-on-to-off", summary: "encryption turned off with unsent messages: migrated, nothing lost") { ctx in
            let id = try await ctx.seed(messages: messages, pending: pending)
            let observed = try await ctx.open(encryption: false)
            ctx.check(CipherProof.header(of: ctx.directory.database) == .plaintext, "the database is not plaintext after turning encryption off")
            if case .found = ctx.store.lookup(ctx.itemID(id)) { ctx.deviations.append("the unused key item was not deleted") }
            return (.ready(resets: [ResetRecord(reason: "encryptionChanged", pendingMessagesLost: 0)], messages: messages, pending: pending,
                           atRest: "NONE"), observed)
        },
        Scenario(name: "encryption-off-to-on", summary: "encryption turned on with unsent messages: migrated, no plaintext left") { ctx in
            try await ctx.seed(messages: messages, pending: pending, encryption: false)
            ctx.check(!ctx.plaintextHits().isEmpty, "control failed: the plaintext cache does not show the marker")
            let observed = try await ctx.open(encryption: true)
            let hits = ctx.plaintextHits()
            ctx.check(hits.isEmpty, "plaintext marker still found in: \(hits.joined(separator: ", "))")
            return (.ready(resets: [ResetRecord(reason: "encryptionChanged", pendingMessagesLost: 0)], messages: messages, pending: pending), observed)
        },
        Scenario(name: "escalation", summary: "a schema damaged in place fails every open: escalated after 3, outbox salvaged") { ctx in
            try await ctx.seed(messages: messages, pending: pending)
            let raw = try ctx.rawConnection()
            try raw.sync { db in try db.execute("DROP TABLE list_snapshots") }
            raw.close()
            for attempt in 1...2 {
                ctx.check(try await ctx.open(), .unavailable("unclassified"), step: "open \(attempt)")
            }
            return (.ready(resets: [ResetRecord(reason: "escalated", pendingMessagesLost: 0)], messages: 0, pending: pending), try await ctx.open())
        },
        Scenario(name: "locked-keyring", summary: "keyring locked: unavailable, no reset; after unlock ready with every row",
                 placement: .privateKeyring, keystores: ["secret-service", "memory"]) { ctx in
            try await ctx.seed(messages: messages, pending: pending)
            try ctx.lockKeyring()
            let locked = try await ctx.open()
            ctx.check(locked, .unavailable("locked"), step: "while locked")
            try ctx.unlockKeyring()
            return (.ready(messages: messages, pending: pending), try await ctx.open())
        },
        Scenario(name: "no-secret-service-online-only", summary: "no Secret Service, no cache, onlineOnly: no cache, nothing written",
                 placement: .noSecretService, keystores: ["secret-service", "memory"]) { ctx in
            ctx.removeSecretService()
            let observed = try await ctx.open(behavior: .onlineOnly)
            ctx.check(!FileManager.default.fileExists(atPath: ctx.directory.path), "something was written under onlineOnly")
            return (Expectation(outcome: "onlineOnly", offlineEnabled: false, messages: nil, pending: nil, atRest: "NONE"), observed)
        },
        Scenario(name: "no-secret-service-plaintext-fallback", summary: "no Secret Service, no cache, plaintextFallback: an honest plaintext cache",
                 placement: .noSecretService, keystores: ["secret-service", "memory"]) { ctx in
            ctx.removeSecretService()
            let observed = try await ctx.open(behavior: .plaintextFallback)
            ctx.check(CipherProof.header(of: ctx.directory.database) == .plaintext, "the fallback cache is not plaintext as reported")
            ctx.check(ctx.manifest?.encrypted == false, "the fallback cache is labelled encrypted")
            return (Expectation(outcome: "plaintextFallback", offlineEnabled: true, messages: 0, pending: 0, atRest: "NONE"), observed)
        },
        Scenario(name: "secret-service-gone-later", summary: "encrypted cache exists, then no Secret Service: unavailable, never reset or plaintext",
                 keystores: ["secret-service", "memory"]) { ctx in
            try await ctx.seed(messages: messages, pending: pending)
            let without = try await ctx.openWithoutSecretService(behavior: .plaintextFallback)
            ctx.check(without.outcome == "unavailable" && without.unavailableReason == "keyStoreMissing",
                      "without a Secret Service: \(without.outcome) \(without.unavailableReason ?? ""), expected unavailable (keyStoreMissing)")
            ctx.check(without.resets.isEmpty, "without a Secret Service: resets \(without.resets)")
            ctx.check(CipherProof.header(of: ctx.directory.database) == .opaque, "a plaintext cache appeared beside the encrypted one")
            return (.ready(messages: messages, pending: pending), try await ctx.open(behavior: .plaintextFallback))
        },
        Scenario(name: "second-process", summary: "a second process opens the same cache: clear error, nothing changed") { ctx in
            try await ctx.seed(messages: messages, pending: pending)
            var second: Observation?
            var unchanged = true
            let observed = try await ctx.open { _ in
                let before = ctx.fileDigest()
                second = try ctx.openInAnotherProcess()
                unchanged = ctx.fileDigest() == before
            }
            ctx.check(unchanged, "the second process changed the cache files")
            guard let second else { throw CLIError.failure("the second process reported nothing") }
            ctx.check(observed.outcome == "ready" && observed.messages == messages, "the first process did not hold a ready cache")
            return (.unavailable("cacheInUse"), second)
        },
    ] + keyManagement
}
