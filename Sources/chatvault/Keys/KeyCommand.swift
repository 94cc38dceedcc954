import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// `chatvault key rotate|move …`: key management through the library's public API (login, the
/// change, logout), as an app would call it.
///
///     chatvault key rotate --dir D --user U [--keystore …] [--json]
///     chatvault key move   --dir D --user U --to secret-service|file [--key-dir K] [--json]
///
/// Prints key ids and store names, never a key. Exit 1 with a typed error (`error`, `detail`)
/// when nothing was changed or the change waits for the next open.
enum KeyCommand {
    static func run(_ raw: [String]) async throws -> Int32 {
        guard let action = raw.first else { throw CLIError.usage("key needs an action: rotate, move or recovery-secret") }
        var args = try Arguments(Array(raw.dropFirst()), switches: ["json", "announce"])
        let common = try CommonOptions(&args)
        // For the crash tests: a line once logged in, just before the change starts.
        let announce = args.flag("announce")
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        switch action {
        case "rotate":
            try args.rejectUnknown()
            guard hasCache(common, root: root, user: user) else { return failure(.noCache, common: common) }
            let vault = try makeVault(common, root: root, encryption: true, behavior: .onlineOnly)
            return try await change(vault, user: user, common: common, verb: "rotated", announce: announce) { vault throws(KeyManagementError) in
                try await vault.rotateOfflineCacheKey()
            }
        case "move":
            let target = try args.choice("to", default: "", among: ["secret-service", "file"])
            try args.rejectUnknown()
            guard hasCache(common, root: root, user: user) else { return failure(.noCache, common: common) }
            let vault = try movingVault(common, root: root)
            return try await change(vault, user: user, common: common, verb: "moved", announce: announce) { vault throws(KeyManagementError) in
                try await vault.moveOfflineCacheKey(toStore: target)
            }
        case "recovery-secret":
            let out = args.string("out").map(absolutePath)
            try args.rejectUnknown()
            guard hasCache(common, root: root, user: user) else { return failure(.noCache, common: common) }
            return try await RecoveryCommands.createSecret(common, root: root, user: user, out: out)
        default:
            throw CLIError.usage("unknown key action '\(action)': rotate, move or recovery-secret")
        }
    }

    /// Whether the user has a cache to work on (the verbs log in, which would create one).
    static func hasCache(_ common: CommonOptions, root: String, user: String) -> Bool {
        let directory = CacheDirectory(root: root, account: CacheDirectory.account(applicationId: common.applicationId, userId: user))
        return FileManager.default.fileExists(atPath: directory.manifest) || directory.hasDatabase
    }

    /// An engine that accepts both the Secret Service and the key-file store (the one `--keystore`
    /// names first), so a key can be found in one and moved to the other.
    static func movingVault(_ common: CommonOptions, root: String) throws -> OfflineVault {
        let file = KeyStorageOption.software(directory: common.keyDirectory)
        let storage: [KeyStorageOption] = common.keystore == "file" ? [file, .secretService()] : [.secretService(), file]
        let config = OfflineConfig.Builder().setEnabled(true).setEncryption(true).build()
        let settings = VaultSettings(applicationId: common.applicationId, applicationName: "chatvault", rootDirectory: root,
                                     keyStorage: storage, callbackExecutor: .queue(DispatchQueue(label: "chatvault.cli.callbacks")),
                                     retry: .manualOnly)
        do {
            return try OfflineVault(config: config, settings: settings)
        } catch {
            throw CLIError.usage(String(describing: error))
        }
    }

    static func change(_ vault: OfflineVault, user: String, common: CommonOptions, verb: String, announce: Bool = false,
                       _ body: (OfflineVault) async throws(KeyManagementError) -> KeyChangeReport) async throws -> Int32 {
        let attempt = await vault.login(userId: user)
        guard attempt.state == .ready else {
            await vault.logout()
            let error: KeyManagementError = if case .unavailable(let reason) = attempt.state { .unavailable(reason) } else { .notEncrypted }
            return failure(error, common: common)
        }
        if announce { emit("changing") }
        let report: KeyChangeReport
        do {
            report = try await Progress(json: common.json).during(verb == "rotated" ? "rotating the key" : "moving the key") {
                () async throws(KeyManagementError) in try await body(vault)
            }
        } catch {
            await vault.logout()
            return failure(error, common: common)
        }
        let counts = rowCounts(vault)
        let status = vault.offlineEncryptionStatus()
        let state = vault.state
        await vault.logout()
        if common.json {
            emit(JSON.object([
                ("outcome", .string(verb)),
                ("cacheId", .string(report.cacheId)),
                ("oldKeyId", .string(report.oldKeyId)),
                ("newKeyId", .string(report.newKeyId)),
                ("fromStore", .string(report.fromStore)),
                ("toStore", .string(report.toStore)),
                ("state", .string(state.outcome)),
                ("status", status.json),
                ("messages", counts.map { .int($0.messages) } ?? .null),
                ("pending", counts.map { .int($0.pending) } ?? .null),
                ("seconds", .double(report.seconds)),
                ("databaseBytes", .int(report.databaseBytes)),
                ("peakBytes", .int(report.peakBytes)),
                ("notes", .array(report.notes.map { .string($0) })),
            ]).render())
        } else {
            emit("\(verb) the key of cache \(report.cacheId): key id \(report.oldKeyId) -> \(report.newKeyId), store \(report.fromStore) -> \(report.toStore); "
                 + "\(counts?.messages ?? 0) messages, \(counts?.pending ?? 0) pending; \(String(format: "%.2f", report.seconds)) s")
        }
        return 0
    }

    static func failure(_ error: KeyManagementError, common: CommonOptions) -> Int32 {
        if common.json {
            emit(JSON.object([("outcome", .string("failed")), ("error", .string(error.code)), ("detail", .string(error.description))]).render())
        } else {
            complain("the key was not changed: \(error)")
        }
        return 1
    }
}
