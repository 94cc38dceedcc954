import ChatVault
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore

/// A reset as the listener saw it.
struct ResetRecord: Codable, Equatable, CustomStringConvertible {
    var reason: String
    var pendingMessagesLost: Int

    var description: String { "\(reason)(\(pendingMessagesLost))" }
}

/// What one open looked like from the outside.
struct Observation: Codable, Equatable {
    var outcome: String
    var unavailableReason: String?
    var resets: [ResetRecord]
    var offlineEnabled: Bool
    var messages: Int?
    var pending: Int?
    var atRest: String
    var keyStorage: String
    var notes: [String]
}

/// What a scenario expects of its final open. Nil fields are not checked.
struct Expectation: Codable, Equatable {
    var outcome: String
    var unavailableReason: String?
    var resets: [ResetRecord] = []
    var offlineEnabled: Bool
    var messages: Int?
    var pending: Int?
    var atRest: String?

    static func ready(resets: [ResetRecord] = [], messages: Int?, pending: Int?, atRest: String? = "SQLCIPHER") -> Expectation {
        Expectation(outcome: "ready", unavailableReason: nil, resets: resets, offlineEnabled: true, messages: messages, pending: pending, atRest: atRest)
    }

    static func unavailable(_ reason: String) -> Expectation {
        Expectation(outcome: "unavailable", unavailableReason: reason, resets: [], offlineEnabled: false, messages: nil, pending: nil, atRest: "NONE")
    }

    /// How `observed` deviates from this expectation, in words.
    func deviations(from observed: Observation) -> [String] {
        var out: [String] = []
        if observed.outcome != outcome { out.append("outcome \(observed.outcome), expected \(outcome)") }
        if let unavailableReason, observed.unavailableReason != unavailableReason {
            out.append("unavailable reason \(observed.unavailableReason ?? "none"), expected \(unavailableReason)")
        }
        if observed.resets != resets { out.append("resets \(observed.resets), expected \(resets)") }
        if observed.offlineEnabled != offlineEnabled { out.append("offlineEnabled \(observed.offlineEnabled), expected \(offlineEnabled)") }
        if let messages, observed.messages != messages { out.append("messages \(observed.messages.map(String.init) ?? "none"), expected \(messages)") }
        if let pending, observed.pending != pending { out.append("pending \(observed.pending.map(String.init) ?? "none"), expected \(pending)") }
        if let atRest, observed.atRest != atRest { out.append("atRest \(observed.atRest), expected \(atRest)") }
        return out
    }
}

/// The result of one scenario, as printed.
struct ScenarioResult: Codable {
    var name: String
    var summary: String
    var expected: Expectation?
    var observed: Observation?
    /// Every reset-listener call over the whole scenario (all its opens).
    var listenerCalls: [ResetRecord]
    var deviations: [String]
    var skipped: String?
    var milliseconds: Double

    var passed: Bool { skipped != nil || deviations.isEmpty }
    var verdict: String { skipped != nil ? "skipped" : deviations.isEmpty ? "ok" : "DEVIATES" }
}

/// One scenario's working state: a temporary root, the key store, the engine factory.
final class ScenarioContext {
    static let applicationId = "org.chatvault.scenarios"
    static let user = "scenario-user@example.org"
    static let marker = "chatvault-scenario-marker"

    let name: String
    private let scratch: TemporaryDirectory
    var root: String { scratch.path }
    let common: CommonOptions
    let memory: MemoryKeyStore
    let store: any KeyStore
    /// Checks on intermediate steps that failed.
    var deviations: [String] = []
    /// Every reset-listener call, over all opens.
    var listenerCalls: [ResetRecord] = []
    /// The last open's attempt (its notes and restorable caches).
    var lastAttempt: OpenAttempt?

    init(name: String, keystore: String, memory: MemoryKeyStore, keyDirectory: String) throws {
        self.name = name
        do {
            scratch = try TemporaryDirectory.create(prefix: "chatvault-scenario")
        } catch {
            throw CLIError.failure("\(error)")
        }
        var args = try Arguments(["--app", Self.applicationId, "--keystore", keystore, "--key-dir", keyDirectory])
        common = try CommonOptions(&args)
        self.memory = memory
        store = common.store(memory: memory)
    }

    var directory: CacheDirectory {
        CacheDirectory(root: root, account: CacheDirectory.account(applicationId: Self.applicationId, userId: Self.user))
    }

    func itemID(_ cacheId: String) -> KeyItemID {
        KeyItemID(applicationId: Self.applicationId, account: directory.account, cacheId: cacheId)
    }

    var manifest: Manifest? {
        if case .valid(let m) = ManifestFile.read(directory: directory.path) { return m }
        return nil
    }

    /// Logs in, observes, logs out.
    func open(encryption: Bool = true, behavior: EncryptionFailureBehavior = .onlineOnly,
              keep: ((OfflineVault) async throws -> Void)? = nil) async throws -> Observation {
        try await open(using: try makeVault(common, root: root, encryption: encryption, behavior: behavior, memory: memory), keep: keep)
    }

    /// Logs `vault` in, observes, logs out.
    func open(using vault: OfflineVault, keep: ((OfflineVault) async throws -> Void)? = nil) async throws -> Observation {
        let recorder = ResetRecorder()
        vault.addOfflineCacheResetListener("scenario", recorder)
        let attempt = await vault.login(userId: Self.user)
        // A cache over the synchronous check's limit opens ready and is checked right after: what
        // the scenario observes is the state once that check (and the reset it may cause) is over.
        _ = await vault.waitForIntegrityCheck(timeout: .seconds(120))
        let observation = observe(vault, attempt, recorder)
        lastAttempt = attempt
        try await keep?(vault)
        await vault.logout()
        return observation
    }

    func observe(_ vault: OfflineVault, _ attempt: OpenAttempt, _ recorder: ResetRecorder) -> Observation {
        let counts = rowCounts(vault)
        let status = vault.offlineEncryptionStatus()
        let resets = recorder.calls.map { ResetRecord(reason: $0.reason.rawValue, pendingMessagesLost: $0.pendingMessagesLost) }
        listenerCalls += resets
        return Observation(outcome: vault.state.outcome, unavailableReason: vault.state.unavailableReason, resets: resets,
                           offlineEnabled: vault.isOfflineEnabled(), messages: counts?.messages, pending: counts?.pending,
                           atRest: status.atRest, keyStorage: status.keyStorage, notes: attempt.notes)
    }

    /// Creates the cache and fills it; returns its cache id.
    @discardableResult
    func seed(messages: Int, pending: Int, encryption: Bool = true) async throws -> String {
        var cacheId = ""
        let seeded = try await open(encryption: encryption) { vault in
            guard let cache = vault.openCache else { return }
            cacheId = cache.cacheId
            try cache.writer.sync { db in
                try Seeder.fill(db, messages: messages, pending: pending, conversations: 10, marker: Self.marker)
            }
        }
        guard seeded.outcome == "ready", !cacheId.isEmpty else {
            throw CLIError.failure("could not create the scenario cache: \(seeded.outcome) \(seeded.unavailableReason ?? "")")
        }
        return cacheId
    }

    /// Records an intermediate check.
    func check(_ condition: Bool, _ what: String) {
        if !condition { deviations.append(what) }
    }

    /// Checks an intermediate open against an expectation.
    func check(_ observation: Observation, _ expectation: Expectation, step: String) {
        deviations += expectation.deviations(from: observation).map { "\(step): \($0)" }
    }

    /// Opens the cache's database directly with its key, bypassing the engine (to tamper with it).
    func rawConnection() throws -> DatabaseQueue {
        guard let manifest else { throw CLIError.failure("no manifest") }
        guard manifest.encrypted else { return try DatabaseQueue(path: directory.database, keying: .plaintext, options: ConnectionOptions(), label: "raw") }
        guard case .found(let key, _) = store.lookup(itemID(manifest.cacheId)) else { throw CLIError.failure("no key for the raw connection") }
        return try DatabaseQueue(path: directory.database, keying: .encrypted(key, manifest.cipherProfile ?? .standard()),
                                 options: ConnectionOptions(), label: "raw")
    }

    /// Files whose bytes contain the seeded marker.
    func plaintextHits() -> [String] {
        let audit = Audit(directory: directory, common: common, marker: Self.marker)
        return audit.listFiles().filter { !$0.isDirectory && audit.contains(Self.marker, file: "\(directory.path)/\($0.path)") }.map(\.path)
    }
}
