import CCrypto
package import Foundation

/// Why a recovery secret or a wrapped key cannot be used. Never carries the secret or the key.
public enum RecoverySecretError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not 36 characters of the base32 alphabet once spaces and dashes are dropped.
    case malformed
    /// The checksum does not match: a typo.
    case checksumMismatch
    /// The secret is well formed but does not open this wrapped key.
    case wrongSecret
    /// The wrapped key's record is damaged or of an unknown format.
    case unreadableWrapping
    /// The random source or the cipher failed.
    case cryptoFailure

    public var description: String {
        switch self {
        case .malformed: return "a recovery secret is 36 letters and digits (A-Z, 2-7), in groups of four"
        case .checksumMismatch: return "the recovery secret has a typo (its checksum does not match)"
        case .wrongSecret: return "this recovery secret does not open the wrapped key"
        case .unreadableWrapping: return "the wrapped key is damaged or of an unknown format"
        case .cryptoFailure: return "the random source or the cipher failed"
        }
    }
}

/// A secret the user keeps (printed once, typed back when the key is lost): 160 random bits as
/// 32 base32 characters (RFC 4648 alphabet, case and spacing ignored when typed), plus 4 check
/// characters (the first 20 bits of SHA-256 over the 20 bytes), shown as nine groups of four:
///
///     ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23-4567-ABCD
///
/// Its description never shows it; `formatted` does (for the one time it is printed).
public struct RecoverySecret: Sendable, Equatable, CustomStringConvertible {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)
    package static let randomBytes = 20

    let bytes: [UInt8]

    /// A fresh secret from OpenSSL's `RAND_bytes`.
    package static func generate() throws(RecoverySecretError) -> RecoverySecret {
        OpenSSLLifetime.ensure()
        var bytes = [UInt8](repeating: 0, count: randomBytes)
        guard RAND_bytes(&bytes, Int32(randomBytes)) == 1 else { throw .cryptoFailure }
        return RecoverySecret(bytes: bytes)
    }

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Reads a typed secret: case, spaces and dashes do not matter; a typo is `.checksumMismatch`.
    public init(parsing text: String) throws(RecoverySecretError) {
        let symbols = text.uppercased().utf8.filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "-") && $0 != UInt8(ascii: "\n") }
        guard symbols.count == 36 else { throw .malformed }
        var values: [UInt8] = []
        for s in symbols {
            guard let v = Self.alphabet.firstIndex(of: s) else { throw .malformed }
            values.append(UInt8(v))
        }
        let bytes = Self.unpack(Array(values.prefix(32)))
        guard Self.checksum(bytes) == Array(values.suffix(4)) else { throw .checksumMismatch }
        self.bytes = bytes
    }

    /// The secret as the user writes it down: nine groups of four.
    public var formatted: String {
        let symbols = Self.pack(bytes) + Self.checksum(bytes)
        let text = String(decoding: symbols.map { Self.alphabet[Int($0)] }, as: UTF8.self)
        return stride(from: 0, to: text.count, by: 4).map { i in
            String(text[text.index(text.startIndex, offsetBy: i)..<text.index(text.startIndex, offsetBy: min(i + 4, text.count))])
        }.joined(separator: "-")
    }

    public var description: String { "RecoverySecret(<redacted>)" }

    /// 5-bit values of the bytes, most significant first (160 bits: exactly 32 values).
    static func pack(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = 0, bits = 0
        for b in bytes {
            buffer = (buffer << 8) | Int(b)
            bits += 8
            while bits >= 5 {
                out.append(UInt8((buffer >> (bits - 5)) & 31))
                bits -= 5
            }
            buffer &= (1 << bits) - 1
        }
        return out
    }

    static func unpack(_ values: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = 0, bits = 0
        for v in values {
            buffer = (buffer << 5) | Int(v & 31)
            bits += 5
            if bits >= 8 {
                out.append(UInt8((buffer >> (bits - 8)) & 0xff))
                bits -= 8
            }
            buffer &= (1 << bits) - 1
        }
        return out
    }

    /// Four 5-bit values: the first 20 bits of SHA-256 over the bytes.
    static func checksum(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        _ = SHA256(bytes, bytes.count, &digest)
        return Array(pack(Array(digest.prefix(5))).prefix(4))
    }
}

/// A cache key wrapped by a recovery secret: PBKDF2-HMAC-SHA512 (slow on purpose) turns the secret
/// and a random salt into a 256-bit wrapping key, AES-256-GCM seals the cache key with the key id
/// as associated data. Without the secret it reveals nothing but the parameters; with a wrong one
/// the tag check fails (`.wrongSecret`). Stored as JSON beside the manifest (no key material in
/// clear; the record names the key id, never the key).
package struct WrappedCacheKey: Sendable, Equatable, Codable {
    package static let format = "chatvault-wrapped-key-1"
    /// PBKDF2-HMAC-SHA512 iterations: about half a second on a 2-core VM (measured by the tests'
    /// bench figure in the README).
    package static let defaultIterations = 1_000_000

    package var format: String
    package var keyId: String
    package var iterations: Int
    package var salt: Data
    package var nonce: Data
    package var sealed: Data
    package var tag: Data

    /// Seals `key` under `secret`.
    package static func wrap(_ key: CacheKey, keyId: String, secret: RecoverySecret,
                            iterations: Int = defaultIterations) throws(RecoverySecretError) -> WrappedCacheKey {
        OpenSSLLifetime.ensure()
        var salt = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&salt, 16) == 1 else { throw .cryptoFailure }
        var wrapping = try derive(secret, salt: salt, iterations: iterations)
        defer { for i in wrapping.indices { wrapping[i] = 0 } }
        let (nonce, sealed, tag) = try sealKey(key, keyId: keyId, wrapping: wrapping)
        return WrappedCacheKey(format: format, keyId: keyId, iterations: iterations, salt: Data(salt), nonce: nonce, sealed: sealed, tag: tag)
    }

    /// Opens the wrapped key with `secret` (the KDF's time, about half a second).
    package func unwrap(with secret: RecoverySecret) throws(RecoverySecretError) -> CacheKey {
        guard format == Self.format, iterations >= 1, iterations <= 100_000_000, salt.count == 16, nonce.count == 12,
              sealed.count == CacheKey.byteCount, tag.count == 16 else { throw .unreadableWrapping }
        var wrapping = try Self.derive(secret, salt: Array(salt), iterations: iterations)
        defer { for i in wrapping.indices { wrapping[i] = 0 } }
        return try Self.openKey(nonce: nonce, sealed: sealed, tag: tag, keyId: keyId, wrapping: wrapping)
    }

    /// AES-256-GCM of a cache key under a 256-bit wrapping key, the key id as associated data, a
    /// fresh random nonce: (nonce, sealed key, tag). The key is read in place: no copy of it is
    /// left in a heap buffer.
    static func sealKey(_ key: CacheKey, keyId: String, wrapping: [UInt8]) throws(RecoverySecretError) -> (Data, Data, Data) {
        OpenSSLLifetime.ensure()
        var nonce = [UInt8](repeating: 0, count: 12)
        guard RAND_bytes(&nonce, 12) == 1 else { throw .cryptoFailure }
        var sealed = [UInt8](repeating: 0, count: CacheKey.byteCount), tag = [UInt8](repeating: 0, count: 16)
        let ok = key.withUnsafeBytes { plain in
            gcm(encrypt: true, key: wrapping, nonce: nonce, aad: Array(keyId.utf8), input: plain, output: &sealed, tag: &tag)
        }
        guard ok else { throw .cryptoFailure }
        return (Data(nonce), Data(sealed), Data(tag))
    }

    /// Opens what `sealKey` sealed; `.wrongSecret` when the tag does not verify (another wrapping
    /// key, another key id, or a changed byte).
    static func openKey(nonce: Data, sealed: Data, tag: Data, keyId: String, wrapping: [UInt8]) throws(RecoverySecretError) -> CacheKey {
        var plain = [UInt8](repeating: 0, count: CacheKey.byteCount)
        defer { for i in plain.indices { plain[i] = 0 } }
        var tagBytes = Array(tag)
        let opened = Array(sealed).withUnsafeBytes { input in
            gcm(encrypt: false, key: wrapping, nonce: Array(nonce), aad: Array(keyId.utf8), input: input, output: &plain, tag: &tagBytes)
        }
        guard opened else { throw .wrongSecret }
        do {
            return try plain.withUnsafeBytes { raw throws(KeyMaterialError) in try CacheKey.copying(raw) }
        } catch {
            throw .cryptoFailure
        }
    }

    static func derive(_ secret: RecoverySecret, salt: [UInt8], iterations: Int) throws(RecoverySecretError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let ok = secret.bytes.withUnsafeBufferPointer { password in
            password.withMemoryRebound(to: CChar.self) { p in
                PKCS5_PBKDF2_HMAC(p.baseAddress, Int32(p.count), salt, Int32(salt.count), Int32(iterations), EVP_sha512(), 32, &out)
            }
        }
        guard ok == 1 else { throw .cryptoFailure }
        return out
    }

    /// AES-256-GCM in one call; on decryption false means the tag did not verify.
    static func gcm(encrypt: Bool, key: [UInt8], nonce: [UInt8], aad: [UInt8], input: UnsafeRawBufferPointer,
                    output: inout [UInt8], tag: inout [UInt8]) -> Bool {
        guard let ctx = EVP_CIPHER_CTX_new() else { return false }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var length: Int32 = 0
        guard EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), nil, nil, nil, encrypt ? 1 : 0) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(nonce.count), nil) == 1,
              EVP_CipherInit_ex(ctx, nil, nil, key, nonce, encrypt ? 1 : 0) == 1,
              EVP_CipherUpdate(ctx, nil, &length, aad, Int32(aad.count)) == 1,
              EVP_CipherUpdate(ctx, &output, &length, input.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(input.count)) == 1
        else { return false }
        if encrypt {
            var final: Int32 = 0
            var scratch = [UInt8](repeating: 0, count: 16)
            guard EVP_CipherFinal_ex(ctx, &scratch, &final) == 1 else { return false }
            return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, &tag) == 1
        }
        guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, &tag) == 1 else { return false }
        var final: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        return EVP_CipherFinal_ex(ctx, &scratch, &final) == 1
    }
}

/// A cache key sealed under another 256-bit key (a cache's recovery key): AES-256-GCM with the key
/// id as associated data. Fast (no KDF): the slow step is unwrapping the recovery key itself with
/// the user's secret (`WrappedCacheKey`), once per recovery.
package struct SealedCacheKey: Sendable, Equatable, Codable {
    package var keyId: String
    package var nonce: Data
    package var sealed: Data
    package var tag: Data

    package static func seal(_ key: CacheKey, keyId: String, under wrapping: CacheKey) throws(RecoverySecretError) -> SealedCacheKey {
        var wrappingBytes = wrapping.withUnsafeBytes { Array($0) }
        defer { for i in wrappingBytes.indices { wrappingBytes[i] = 0 } }
        let (nonce, sealed, tag) = try WrappedCacheKey.sealKey(key, keyId: keyId, wrapping: wrappingBytes)
        return SealedCacheKey(keyId: keyId, nonce: nonce, sealed: sealed, tag: tag)
    }

    /// The key, or `.wrongSecret` when `wrapping` is not the key it was sealed under (or the record
    /// was altered).
    package func open(under wrapping: CacheKey) throws(RecoverySecretError) -> CacheKey {
        guard nonce.count == 12, sealed.count == CacheKey.byteCount, tag.count == 16 else { throw .unreadableWrapping }
        var wrappingBytes = wrapping.withUnsafeBytes { Array($0) }
        defer { for i in wrappingBytes.indices { wrappingBytes[i] = 0 } }
        return try WrappedCacheKey.openKey(nonce: nonce, sealed: sealed, tag: tag, keyId: keyId, wrapping: wrappingBytes)
    }
}
