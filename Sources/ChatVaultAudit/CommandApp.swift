import ChatVault
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore

/// An app under audit that is a program: a C app through the C ABI (or any language over it). The
/// kit runs it once per launch, in the scenario's private D-Bus session, and reads what it says.
///
/// The program is given, in its environment:
/// - `CHATVAULT_AUDIT_STEP`: `seed` or `launch`;
/// - `CHATVAULT_AUDIT_APP_ID`, `CHATVAULT_AUDIT_ROOT`, `CHATVAULT_AUDIT_USER`, `CHATVAULT_AUDIT_PEER`:
///   the settings' `applicationId` and `root`, the user it logs in, the one it talks with;
/// - `CHATVAULT_AUDIT_ENCRYPTION` (`on`/`off`), `CHATVAULT_AUDIT_FAILURE_BEHAVIOR`
///   (`onlineOnly`/`plaintextFallback`);
/// - `CHATVAULT_AUDIT_MESSAGES`, `CHATVAULT_AUDIT_UNSENT`, `CHATVAULT_AUDIT_PAGE`: how many
///   messages the seed posts and caches, how many texts it leaves unsent (plus one photo), the
///   first screen's page size;
/// - `DBUS_SESSION_BUS_ADDRESS`: the scenario's private bus (its Secret Service: never the user's).
///
/// It builds its vault over its own simulator (`cv_vault_new_simulated`, with both users) and
/// attaches its listeners as it always does. At `seed` it posts the messages from the peer, logs
/// in online, reads the conversation until they are cached, goes offline and sends the unsent
/// texts and the photo; at `launch` it logs in offline and reads its first screen (one page of
/// the conversation). Its last line of output is a JSON object:
///
///     {"state": "ready", "unavailableReason": null, "offlineEnabled": true,
///      "status": {…cv_vault_get_encryption_status…}, "noticesAtFirstRead": [], "cachedMessages": 50,
///      "notices": [{"reason": "keyLost", "unsentMessagesLost": -1}], "pendingMessages": 4}
///
/// `notices` are what it showed the user (its banner), `noticesAtFirstRead` those already shown
/// when its first screen read. `Examples/audited-app/c/audited-app.c` is one such program.
struct CommandApp: Sendable {
    var arguments: [String]
    var environment: [String: String]

    struct Report: Decodable {
        struct Status: Decodable {
            var atRest: String?
            var keyStorage: String?
        }

        var state: String
        var unavailableReason: String?
        var offlineEnabled: Bool
        var status: Status?
        var noticesAtFirstRead: [ResetNotice]
        var notices: [ResetNotice]
        var cachedMessages: Int?
        var pendingMessages: Int?
    }

    /// Runs one launch (or the seed) and reads its report; the journal is read by the caller.
    func run(step: String, context: AuditContext, encryption: Bool, behavior: EncryptionFailureBehavior) throws -> Report {
        var env = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        env["DBUS_SESSION_BUS_ADDRESS"] = context.keyring.busAddress
        env["CHATVAULT_AUDIT_STEP"] = step
        env["CHATVAULT_AUDIT_APP_ID"] = AuditContext.applicationId
        env["CHATVAULT_AUDIT_ROOT"] = context.root
        env["CHATVAULT_AUDIT_USER"] = AuditContext.user
        env["CHATVAULT_AUDIT_PEER"] = AuditContext.peer
        env["CHATVAULT_AUDIT_ENCRYPTION"] = encryption ? "on" : "off"
        env["CHATVAULT_AUDIT_FAILURE_BEHAVIOR"] = behavior.rawValue
        env["CHATVAULT_AUDIT_MESSAGES"] = String(AuditContext.seededMessages)
        env["CHATVAULT_AUDIT_UNSENT"] = String(AuditContext.seededTexts)
        env["CHATVAULT_AUDIT_PAGE"] = String(AuditContext.pageSize)
        let result = try Subprocess.run(arguments, environment: env)
        let lastLine = String(decoding: result.stdout, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
        guard result.status == 0, let report = try? JSONDecoder().decode(Report.self, from: Data(lastLine.utf8)) else {
            let stderr = String(decoding: result.stderr.suffix(400), as: UTF8.self)
            throw AuditError.commandFailed("\(arguments.first ?? "?") at \(step) exited \(result.status) without a JSON report: \(stderr)")
        }
        return report
    }
}

/// The kit's own app, for the steps a program cannot be asked to do (hold the cache while a second
/// instance starts, make a recovery secret, restore): a vault with the kit's settings and no
/// listener of its own.
final class KitApp: AuditableApp {
    let vault: OfflineVault

    init(_ env: AuditEnvironment) throws {
        let settings = VaultSettings(applicationId: env.applicationId, callbackExecutor: .queue(DispatchQueue(label: "chatvault.audit.kit")))
        vault = try OfflineVault(config: env.apply(to: OfflineConfig.Builder().build()), settings: env.apply(to: settings), backend: env.backend)
    }

    func resetNotices() -> [ResetNotice] { [] }
}

/// The cache's journal read from outside (after a program's launch), changing nothing: the
/// database read-only with the key from the scenario's keyring, and the side file.
enum JournalReader {
    static func read(_ directory: CacheDirectory, keyStore: any KeyStore) -> [AuditEntry] {
        var all = AuditJournal.beside(directory)
        if case .valid(let manifest) = ManifestFile.read(directory: directory.path) {
            var keying: ConnectionKeying?
            if !manifest.encrypted {
                keying = .plaintext
            } else if case .found(let key, _) = keyStore.lookup(KeyItemID(applicationId: AuditContext.applicationId, account: directory.account,
                                                                          cacheId: manifest.cacheId)) {
                keying = .encrypted(key, manifest.cipherProfile ?? .standard())
            }
            var options = ConnectionOptions()
            options.readOnly = true
            if let keying, let queue = try? DatabaseQueue(path: directory.database, keying: keying, options: options, label: "audit.journal") {
                all += (try? queue.sync { db in try AuditJournal.entries(in: db) }) ?? []
                queue.close()
            }
        }
        return AuditJournal.inTimeOrder(all)
    }
}
