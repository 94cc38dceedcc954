import Foundation
import VaultKeys

/// `recovery.json`, beside the manifest (0600): what a recovery secret needs to give back a
/// cache's key when the key store has lost it. Two layers, so that a rotation can re-seal the new
/// cache key without the user's secret:
///
/// - `recoveryKey`: a random 256-bit recovery key wrapped by the secret (PBKDF2-HMAC-SHA512 with a
///   cost of about half a second, then AES-256-GCM; `WrappedCacheKey`). The recovery key itself is
///   also kept inside the encrypted database (`kv` `recovery.key.<id>`), where only the cache key
///   reaches it.
/// - `cacheKeys`: the cache key sealed under the recovery key (AES-256-GCM, key id bound in). A
///   rotation adds the new key's seal before its swap and drops the old one after, so the file
///   always opens the key the database is under.
///
/// Without the secret the file reveals key ids and KDF parameters, nothing else. Ordinary opens
/// never read it.
package struct RecoveryFile: Codable, Sendable, Equatable {
    package static let name = "recovery.json"
    static let format = "chatvault-recovery-1"
    static let sizeLimit = 64 * 1024

    var format: String
    package var cacheId: String
    package var recoveryKeyId: String
    var recoveryKey: WrappedCacheKey
    var cacheKeys: [SealedCacheKey]

    static func rowName(_ recoveryKeyId: String) -> String { "recovery.key.\(recoveryKeyId)" }

    static func read(_ path: String) -> RecoveryFile? {
        guard let bytes = try? SecureFiles.read(path, limit: sizeLimit),
              let file = try? JSONDecoder().decode(RecoveryFile.self, from: Data(bytes)),
              file.format == format, KeyItemNames.isSafeComponent(file.cacheId), KeyItemNames.isSafeComponent(file.recoveryKeyId),
              file.cacheKeys.count <= 8 else { return nil }
        return file
    }

    func write(_ path: String) throws(SecureFileError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = (try? encoder.encode(self)) ?? Data()
        try SecureFiles.writeAtomically(path, data: Array(data) + [0x0a])
    }

    /// The cache key this file holds for `manifest` (the seal whose key matches its key check).
    /// `.wrongSecret` when the secret does not open the recovery key.
    func cacheKey(secret: RecoverySecret, cacheId: String, keyCheck: String?) throws(RecoverySecretError) -> CacheKey {
        let recovery = try recoveryKey.unwrap(with: secret)
        return try cacheKey(recoveryKey: recovery, cacheId: cacheId, keyCheck: keyCheck)
    }

    func cacheKey(recoveryKey recovery: CacheKey, cacheId: String, keyCheck: String?) throws(RecoverySecretError) -> CacheKey {
        for seal in cacheKeys {
            guard let key = try? seal.open(under: recovery) else { continue }
            if key.checkValue(cacheId: cacheId) == keyCheck { return key }
        }
        throw .unreadableWrapping
    }

    /// The recovery key kept in the database, if any.
    static func storedRecoveryKey(_ id: String, in db: Database) throws -> CacheKey? {
        let stmt = try db.cached("SELECT value FROM kv WHERE key = ?")
        try stmt.bind([.text(rowName(id))])
        defer { stmt.reset() }
        guard try stmt.step(), let raw = stmt.blob(0), raw.count == CacheKey.byteCount else { return nil }
        return try? raw.withUnsafeBytes { bytes throws(KeyMaterialError) in try CacheKey.copying(bytes) }
    }
}
