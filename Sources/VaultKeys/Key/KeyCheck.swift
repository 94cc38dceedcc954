import Foundation
internal import CCrypto

extension CacheKey {
    /// The key-check value: HMAC-SHA256 of a fixed label and the cache id under this key, as hex.
    ///
    /// It proves a stored key right or wrong for a cache without touching the database, and reveals
    /// nothing about the key (HMAC is a PRF). Kept in the plaintext manifest.
    package func checkValue(cacheId: String) -> String {
        OpenSSLLifetime.ensure()
        let message = Array("ChatVault key check v1|\(cacheId)".utf8)
        var mac = [UInt8](repeating: 0, count: 32)
        var macLength: UInt32 = 0
        withUnsafeBytes { key in
            _ = HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), message, message.count, &mac, &macLength)
        }
        return mac.prefix(Int(macLength)).map { String(format: "%02x", $0) }.joined()
    }
}

/// SHA-256 of `text`, lowercase hex. Used for names that must not show their input (user ids).
package func sha256Hex(_ text: String) -> String {
    var digest = [UInt8](repeating: 0, count: 32)
    let bytes = Array(text.utf8)
    _ = SHA256(bytes, bytes.count, &digest)
    return digest.map { String(format: "%02x", $0) }.joined()
}
