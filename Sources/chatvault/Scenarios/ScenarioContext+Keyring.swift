import ChatVault
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore

/// The keyring manipulations scenarios need, for the real Secret Service (inside the private
/// session the runner put them in) and for the memory store (simulated).
extension ScenarioContext {
    var usesSecretService: Bool { common.keystore == "secret-service" }

    func lockKeyring() throws {
        if usesSecretService {
            try HeadlessKeyring.lockDefaultCollection()
        } else {
            memory.simulate(.locked)
        }
    }

    func unlockKeyring() throws {
        if usesSecretService {
            try PrivateSession.startKeyring(replace: true)
        } else {
            memory.simulate(nil)
        }
    }

    /// For the memory store: behave as a bus with no Secret Service (the real case runs on a bus
    /// that has none).
    func removeSecretService() {
        if !usesSecretService { memory.simulate(.noProvider) }
    }

    /// Opens the cache from a context without any Secret Service, then restores it.
    func openWithoutSecretService(behavior: EncryptionFailureBehavior) async throws -> Observation {
        guard usesSecretService else {
            memory.simulate(.noProvider)
            defer { memory.simulate(nil) }
            return try await open(behavior: behavior)
        }
        let output = try PrivateSession.runChild(.noSecretService, ["open", "--dir", root, "--user", Self.user, "--app", Self.applicationId,
                                                                   "--keystore", "secret-service", "--failure-behavior", behavior.rawValue, "--json"])
        return try record(Observation(openJSON: output))
    }

    /// Runs `chatvault open` on this cache in another process.
    func openInAnotherProcess() throws -> Observation {
        let result = try Subprocess.run([Subprocess.selfPath, "open", "--dir", root, "--user", Self.user, "--app", Self.applicationId,
                                         "--keystore", common.keystore, "--key-dir", common.keyDirectory ?? "", "--json"],
                                        environment: ProcessInfo.processInfo.environment)
        return try record(Observation(openJSON: result.stdout))
    }

    private func record(_ observation: Observation) -> Observation {
        listenerCalls += observation.resets
        return observation
    }

    func quarantineCount() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.quarantine)) ?? []).count
    }

    /// Names and contents of the cache's files, except those a live connection changes (WAL, shm).
    func fileDigest() -> [String: Data] {
        var out: [String: Data] = [:]
        for name in ["cache.db", "manifest.json"] {
            out[name] = FileManager.default.contents(atPath: "\(directory.path)/\(name)") ?? Data()
        }
        return out
    }
}

extension Observation {
    /// Reads the `--json` output of `chatvault open`.
    init(openJSON data: Data) throws {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw CLIError.failure("the child printed no JSON report")
        }
        let status = object["status"] as? [String: Any] ?? [:]
        outcome = object["outcome"] as? String ?? "?"
        unavailableReason = object["unavailableReason"] as? String
        resets = (object["resets"] as? [[String: Any]] ?? []).map {
            ResetRecord(reason: $0["reason"] as? String ?? "?", pendingMessagesLost: $0["pendingMessagesLost"] as? Int ?? -99)
        }
        offlineEnabled = object["offlineEnabled"] as? Bool ?? false
        messages = object["messages"] as? Int
        pending = object["pending"] as? Int
        atRest = status["atRest"] as? String ?? "?"
        keyStorage = status["keyStorage"] as? String ?? "?"
        notes = object["notes"] as? [String] ?? []
    }
}
