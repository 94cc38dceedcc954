import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// `chatvault outbox --dir D --user U [--keystore …] [--key-dir K] [--app ID] [--json]`: lists the
/// unsent outbox of a cache (pending and failed messages, in compose order) without its content:
/// per message the local id, conversation id, kind, state, failure reason, no-answer attempts,
/// compose time, and the number and bytes of the files copied for upload. Never a text, caption,
/// custom data, metadata or file name: the engine's query does not read the rows' payloads.
///
/// The cache is opened as `open` opens it (same key stores, same lock), with the encryption its
/// manifest records, so listing never migrates a cache. A directory without a cache is an error
/// (nothing is created): exit 1, like `status`. A cache that cannot open (in use by another
/// process, keyring locked, no Secret Service…) is exit 1 with the outcome on stderr, like `seed`.
/// Usage errors are exit 2.
///
/// `--json` prints one object:
///
///     cacheId        the cache's id
///     encrypted      whether the cache is encrypted at rest
///     resets         reset-listener calls during this open (normally [])
///     count          unsent messages; pending, failed: how many of each
///     messages       [{ localId, conversationId, kind, state, failureReason, attempts,
///                       composedAt (ISO 8601, UTC, ms), composedAtMs (epoch ms), files, fileBytes }]
enum OutboxCommand {
    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        try args.rejectUnknown()

        let directory = CacheDirectory(root: root, account: CacheDirectory.account(applicationId: common.applicationId, userId: user))
        guard StatusCommand.isCache(directory) else { throw CLIError.failure("no cache found for that user in \(root)") }
        // The cache's own setting: a listing must never start an encryption migration.
        var encrypted = true
        if case .valid(let manifest) = ManifestFile.read(directory: directory.path) { encrypted = manifest.encrypted }

        let vault = try makeVault(common, root: root, encryption: encrypted, behavior: .onlineOnly)
        let recorder = ResetRecorder()
        vault.addOfflineCacheResetListener("chatvault-outbox", recorder)
        let attempt = await vault.login(userId: user)
        guard vault.isOfflineEnabled(), vault.openCache != nil else {
            await vault.logout()
            throw CLIError.failure("cannot list the outbox: the cache is \(attempt.state.outcome)"
                                   + (attempt.state.unavailableReason.map { " (\($0))" } ?? ""))
        }
        let entries: [OutboxAuditEntry]
        do {
            entries = try await vault.outboxAudit()
        } catch {
            await vault.logout()
            throw CLIError.failure("cannot list the outbox: \(error.errorCode)")
        }
        let status = vault.offlineEncryptionStatus()
        await vault.logout()

        let listing = OutboxListing(cacheId: attempt.cacheId, encrypted: status.atRest == OfflineEncryptionTier.SQLCIPHER,
                                    resets: recorder.calls, entries: entries)
        emit(common.json ? listing.json.render() : listing.table)
        return 0
    }
}

/// The outbox as `chatvault outbox` prints it.
struct OutboxListing {
    let cacheId: String?
    let encrypted: Bool
    let resets: [CacheReset]
    let entries: [OutboxAuditEntry]

    var pending: Int { entries.filter { $0.state != "failed" }.count }
    var failed: Int { entries.filter { $0.state == "failed" }.count }

    var json: JSON {
        .object([
            ("cacheId", .optional(cacheId)),
            ("encrypted", .bool(encrypted)),
            ("resets", resets.json),
            ("count", .int(entries.count)),
            ("pending", .int(pending)),
            ("failed", .int(failed)),
            ("messages", .array(entries.map { e in
                .object([
                    ("localId", .string(e.localId)),
                    ("conversationId", .string(e.conversationId)),
                    ("kind", .string(e.kind)),
                    ("state", .string(e.state)),
                    ("failureReason", .optional(e.failureReason)),
                    ("attempts", .int(e.attempts)),
                    ("composedAt", .string(Self.timestamp(e.composedAt))),
                    ("composedAtMs", .int(e.composedAt)),
                    ("files", .int(e.files)),
                    ("fileBytes", .int(e.fileBytes)),
                ])
            })),
        ])
    }

    var table: String {
        var lines = ["outbox of cache \(cacheId ?? "?") (\(encrypted ? "encrypted" : "plaintext")): "
                     + (entries.isEmpty ? "empty" : "\(entries.count) unsent (\(pending) pending, \(failed) failed)")]
        for reset in resets { lines.append("reset during this open: \(reset.reason.rawValue), pending messages lost: \(reset.pendingMessagesLost)") }
        if !entries.isEmpty {
            var table = Table(header: ["local id", "conversation", "kind", "state", "reason", "attempts", "composed at (UTC)", "files", "bytes"])
            table.rows = entries.map { e in
                [e.localId, e.conversationId, e.kind, e.state, e.failureReason ?? "-", String(e.attempts), Self.timestamp(e.composedAt),
                 String(e.files), String(e.fileBytes)]
            }
            lines += ["", table.render()]
        }
        return lines.joined(separator: "\n")
    }

    /// Epoch milliseconds as ISO 8601 in UTC with milliseconds.
    static func timestamp(_ milliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }
}
