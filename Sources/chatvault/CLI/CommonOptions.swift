import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// Options shared by the verbs that open caches.
struct CommonOptions {
    static let defaultApplicationId = "org.chatvault.cli"
    static let defaultMarker = "chatvault-seed-marker"

    var json: Bool
    var applicationId: String
    var keystore: String
    var keyDirectory: String?

    init(_ args: inout Arguments) throws {
        json = args.flag("json")
        applicationId = args.string("app") ?? Self.defaultApplicationId
        keystore = try args.choice("keystore", default: "secret-service", among: ["secret-service", "file", "memory"])
        keyDirectory = args.string("key-dir")
        guard VaultSettings(applicationId: applicationId).hasValidApplicationId else {
            throw CLIError.usage("--app must be a reverse-DNS id (letters, digits, '.', '-', '_')")
        }
    }

    /// The key storage the engine accepts for `--keystore`.
    func keyStorage(memory: MemoryKeyStore? = nil) -> [KeyStorageOption] {
        switch keystore {
        case "file": return [.software(directory: keyDirectory)]
        case "memory": return [.custom(memory ?? MemoryKeyStore())]
        default: return [.secretService()]
        }
    }

    /// The key store itself (for audits and scenario set-up).
    func store(memory: MemoryKeyStore? = nil) -> any KeyStore {
        switch keystore {
        case "file": return SoftwareKeyStore(directory: keyDirectory ?? VaultSettings.defaultSoftwareKeyDirectory(applicationId: applicationId))
        case "memory": return memory ?? MemoryKeyStore()
        default: return SecretServiceKeyStore()
        }
    }
}

/// Absolute form of a user-given path.
func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return (path as NSString).standardizingPath }
    return ((FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path) as NSString).standardizingPath
}

/// The cached row counts of an open engine.
func rowCounts(_ vault: OfflineVault) -> CacheRows.Counts? {
    guard let cache = vault.openCache else { return nil }
    return try? cache.reader.sync { db in try CacheRows.counts(db) }
}

/// Records every reset-listener call.
final class ResetRecorder: OfflineCacheResetListener, @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [CacheReset] = []

    var calls: [CacheReset] {
        lock.lock()
        defer { lock.unlock() }
        return storage
    }

    func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) {
        lock.lock()
        storage.append(CacheReset(reason: reason, pendingMessagesLost: pendingMessagesLost, quarantinedAs: nil))
        lock.unlock()
    }
}

extension OfflineState {
    /// The CLI's `outcome` (`ready`, `unavailable`, `onlineOnly`, `plaintextFallback`, or the
    /// engine's own word for the rest).
    var outcome: String { code }

    var unavailableReason: String? {
        if case .unavailable(let reason) = self { return reason.code }
        return nil
    }

    var detail: String? {
        switch self {
        case .unavailable(let reason): return reason.description
        case .onlineOnly(let why), .plaintextFallback(let why): return why.description
        default: return nil
        }
    }
}

extension OfflineEncryptionStatus {
    var json: JSON {
        .object([
            ("enabled", .bool(enabled)), ("atRest", .string(atRest)), ("keyStorage", .string(keyStorage)),
            ("cipherAvailable", .bool(cipherAvailable)), ("cipher", .optional(cipher)), ("leakage", .optional(leakage)),
        ])
    }
}

extension Array where Element == CacheReset {
    var json: JSON {
        .array(map { .object([("reason", .string($0.reason.rawValue)), ("pendingMessagesLost", .int($0.pendingMessagesLost))]) })
    }
}
