import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// The recovery verbs:
///
///     chatvault key recovery-secret --dir D --user U [--out FILE] [--json]
///     chatvault recover --dir D --user U [--json]            (the secret on standard input)
///     chatvault quarantine list --dir D --user U [--json]
///     chatvault quarantine restore ID --dir D --user U [--json]
///
/// The recovery secret is shown exactly once: on the terminal, or written to `--out FILE` (created
/// 0600, never over an existing file). It is refused on a pipe or a redirected standard output
/// (logs keep those), and never part of the JSON.
enum RecoveryCommands {
    static func createSecret(_ common: CommonOptions, root: String, user: String, out: String?) async throws -> Int32 {
        try requireSecretDestination(out, option: "out")
        let secretFile = try SecretFile(out)
        let vault = try makeVault(common, root: root, encryption: true, behavior: .onlineOnly)
        let report: RecoverySecretReport
        do {
            report = try await loggedIn(vault, user: user) { vault throws(KeyManagementError) in
                try await Progress(json: common.json).during("making the recovery secret") { () async throws(KeyManagementError) in
                    try await vault.createOfflineRecoverySecret()
                }
            }
        } catch let error as KeyManagementError {
            return KeyCommand.failure(error, common: common)
        }
        try secretFile?.write(report.secret)
        if common.json {
            emit(JSON.object([
                ("outcome", .string("created")), ("cacheId", .string(report.cacheId)), ("keyId", .string(report.keyId)),
                ("kdfSeconds", .double(report.kdfSeconds)), ("secretFile", .optional(out)),
                ("secretPrinted", .bool(out == nil)),
            ]).render())
            if out == nil { emit(report.secret.formatted) }
        } else if let out {
            emit("a recovery secret for cache \(report.cacheId) was written to \(out) (0600). Keep it somewhere safe and off this machine; it is not stored anywhere else.")
        } else {
            emit("Recovery secret for cache \(report.cacheId) (shown once; write it down and keep it off this machine):\n\n    \(report.secret.formatted)\n")
        }
        return 0
    }

    /// A secret is printed only to a terminal, or written to a new 0600 file.
    static func requireSecretDestination(_ out: String?, option: String) throws {
        guard out != nil || isatty(STDOUT_FILENO) == 1 else {
            throw CLIError.usage("the secret is only printed to a terminal; give --\(option) FILE to have it written (0600) instead")
        }
    }

    /// A new, empty 0600 file for a secret, created before the secret exists: a path that cannot
    /// be used stops the verb before anything is changed (a secret made and then lost would leave
    /// the user with none that works).
    final class SecretFile {
        let path: String
        private var fd: Int32
        private var written = false

        init?(_ path: String?) throws {
            guard let path else { return nil }
            self.path = path
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw CLIError.failure("cannot create \(path) (it must not exist yet): \(String(cString: strerror(errno)))") }
        }

        func write(_ secret: RecoverySecret) throws {
            let line = Array((secret.formatted + "\n").utf8)
            let count = line.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
            guard count == line.count, fsync(fd) == 0 else { throw CLIError.failure("could not write the secret to \(path)") }
            written = true
        }

        deinit {
            close(fd)
            if !written { unlink(path) }
        }
    }

    /// Reads a recovery secret from the first line of standard input.
    static func readSecret(_ verb: String) throws -> RecoverySecret {
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw CLIError.usage("\(verb) reads the secret from standard input")
        }
        do {
            return try RecoverySecret(parsing: line)
        } catch {
            throw CLIError.failure("the secret was not accepted: \(error)")
        }
    }

    /// `chatvault export --dir D --user U --to FILE [--secret-out FILE] [--json]`.
    static func export(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let target = absolutePath(try args.required("to"))
        let secretOut = args.string("secret-out").map(absolutePath)
        try args.rejectUnknown()
        try requireSecretDestination(secretOut, option: "secret-out")
        guard KeyCommand.hasCache(common, root: root, user: user) else { return KeyCommand.failure(.noCache, common: common) }
        let secretFile = try SecretFile(secretOut)
        let vault = try makeVault(common, root: root, encryption: true, behavior: .onlineOnly)
        let report: CacheExportReport
        do {
            report = try await loggedIn(vault, user: user) { vault throws(KeyManagementError) in
                try await Progress(json: common.json).during("exporting the cache") { () async throws(KeyManagementError) in
                    try await vault.exportOfflineCache(to: target)
                }
            }
        } catch let error as KeyManagementError {
            return KeyCommand.failure(error, common: common)
        }
        try secretFile?.write(report.secret)
        if common.json {
            emit(JSON.object([("outcome", .string("exported")), ("cacheId", .string(report.cacheId)), ("file", .string(target)),
                              ("bytes", .int(report.bytes)), ("files", .int(report.files)), ("secretFile", .optional(secretOut))]).render())
            if secretOut == nil { emit(report.secret.formatted) }
        } else {
            emit("exported cache \(report.cacheId) to \(target) (\(report.bytes >> 10) KiB, \(report.files) files).")
            emit(secretOut.map { "Its one-time secret was written to \($0) (0600)." }
                 ?? "One-time secret (shown once; needed by 'chatvault import'):\n\n    \(report.secret.formatted)\n")
        }
        return 0
    }

    /// `chatvault import --dir D --user U --from FILE [--json]`, the export's secret on stdin.
    static func importCache(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let source = absolutePath(try args.required("from"))
        try args.rejectUnknown()
        let secret = try readSecret("import")
        let vault = try makeVault(common, root: root, encryption: true, behavior: .onlineOnly)
        return try await restoring(vault, user: user, common: common) { vault throws(KeyManagementError) in
            try await vault.importOfflineCache(from: source, secret: secret)
        }
    }

    static func recover(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        try args.rejectUnknown()
        let secret = try readSecret("recover")
        let vault = try makeVault(common, root: root, encryption: true, behavior: .onlineOnly)
        return try await restoring(vault, user: user, common: common) { vault throws(KeyManagementError) in
            try await vault.recoverOfflineCache(secret: secret)
        }
    }

    static func quarantine(_ raw: [String]) async throws -> Int32 {
        guard let action = raw.first else { throw CLIError.usage("quarantine needs an action: list or restore ID") }
        var rest = Array(raw.dropFirst())
        var id: String?
        if action == "restore" {
            guard let first = rest.first, !first.hasPrefix("--") else { throw CLIError.usage("quarantine restore needs the entry's ID") }
            id = first
            rest.removeFirst()
        }
        var args = try Arguments(rest)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        try args.rejectUnknown()
        switch action {
        case "list":
            return list(common, root: root, user: user)
        case "restore":
            let vault = try makeVault(common, root: root, encryption: true, behavior: .onlineOnly)
            return try await restoring(vault, user: user, common: common) { [id] vault throws(KeyManagementError) in
                try await vault.restoreQuarantinedOfflineCache(id: id ?? "")
            }
        default:
            throw CLIError.usage("unknown quarantine action '\(action)': list or restore ID")
        }
    }

    /// Lists without opening the cache (read-only; asks the key store whether each key is there).
    static func list(_ common: CommonOptions, root: String, user: String) -> Int32 {
        let directory = CacheDirectory(root: root, account: CacheDirectory.account(applicationId: common.applicationId, userId: user))
        let stores: [any KeyStore] = [SecretServiceKeyStore(),
                                      SoftwareKeyStore(directory: common.keyDirectory ?? VaultSettings.defaultSoftwareKeyDirectory(applicationId: common.applicationId))]
        let configuration = StoreConfiguration(directory: directory, applicationId: common.applicationId, account: directory.account,
                                               keyLabel: "", encryption: true, failureBehavior: .onlineOnly,
                                               keyStores: common.keystore == "memory" ? [common.store()] : stores)
        let entries = KeyManager.quarantined(configuration)
        let formatter = ISO8601DateFormatter()
        if common.json {
            emit(JSON.object([("entries", .array(entries.map { entry in
                .object([
                    ("id", .string(entry.id)), ("reason", .string(entry.reason)), ("at", .string(formatter.string(from: entry.at))),
                    ("bytes", .int(entry.bytes)), ("cacheId", .optional(entry.cacheId)), ("encrypted", .bool(entry.encrypted)),
                    ("keyPresent", entry.keyPresent.map { .bool($0) } ?? .null), ("restorable", .bool(entry.restorable)),
                    ("recoverableWithSecret", .bool(entry.recoverableWithSecret)),
                    ("pendingMessagesLost", .int(entry.pendingMessagesLost)), ("reported", .bool(entry.reported)),
                ])
            }))]).render())
        } else {
            var table = Table(header: ["id", "reason", "time", "size", "key present", "recovery secret"])
            table.rows = entries.map { entry in
                [entry.id, entry.reason, formatter.string(from: entry.at), "\(entry.bytes >> 10) KiB",
                 entry.keyPresent.map { $0 ? "yes (restorable)" : "no" } ?? "unknown", entry.recoverableWithSecret ? "yes" : "no"]
            }
            emit(entries.isEmpty ? "no quarantined caches" : table.render())
        }
        return 0
    }

    static func restoring(_ vault: OfflineVault, user: String, common: CommonOptions,
                          _ body: (OfflineVault) async throws(KeyManagementError) -> CacheRestoreReport) async throws -> Int32 {
        let report: CacheRestoreReport
        do {
            report = try await loggedIn(vault, user: user) { vault throws(KeyManagementError) in
                try await Progress(json: common.json).during("restoring the cache") { () async throws(KeyManagementError) in try await body(vault) }
            }
        } catch let error as KeyManagementError {
            return KeyCommand.failure(error, common: common)
        }
        if common.json {
            emit(JSON.object([
                ("outcome", .string("restored")), ("restoredEntry", .string(report.restoredEntry)), ("cacheId", .string(report.cacheId)),
                ("messages", .int(report.messages)), ("pending", .int(report.pending)), ("mergedPending", .int(report.mergedPending)),
                ("replacedAs", .optional(report.replacedAs)),
            ]).render())
        } else {
            emit("restored cache \(report.cacheId) from \(report.restoredEntry): \(report.messages) messages, \(report.pending) unsent "
                 + "(\(report.mergedPending) of them composed since the reset)" + (report.replacedAs.map { "; the cache it replaced is in \($0)" } ?? ""))
        }
        return 0
    }

    /// Logs in, runs `body`, logs out. A cache that is not ready is a typed failure.
    static func loggedIn<T>(_ vault: OfflineVault, user: String,
                            _ body: (OfflineVault) async throws(KeyManagementError) -> T) async throws -> T {
        let attempt = await vault.login(userId: user)
        guard attempt.state == .ready else {
            await vault.logout()
            if case .unavailable(let reason) = attempt.state { throw KeyManagementError.unavailable(reason) }
            throw KeyManagementError.notEncrypted
        }
        do {
            let result = try await body(vault)
            await vault.logout()
            return result
        } catch {
            await vault.logout()
            throw error
        }
    }
}
