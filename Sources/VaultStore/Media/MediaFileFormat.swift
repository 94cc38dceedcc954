import Foundation
internal import CCrypto
import VaultKeys

/// The at-rest format of an encrypted media file ("CVM1", version 1).
///
/// A media file is written and read in a stream: one chunk of plaintext at a time is in memory,
/// so a 1 GiB attachment never is. All integers are big-endian.
///
///     header (44 bytes)
///       0   4  magic "CVM1"
///       4   1  version, 1
///       5   1  algorithm, 1 (AES-256-GCM chunks, HMAC-SHA256 per-file subkeys)
///       6   2  reserved, zero
///       8   4  chunk size: plaintext bytes of every chunk but the last (writer: 65,536;
///              a reader accepts 1 KiB ... 4 MiB and refuses anything else before allocating)
///      12  16  file id: random per file (RAND_bytes)
///      28  16  header tag: HMAC-SHA256(headerKey, bytes 0..<28), first 16 bytes
///     chunks, one after another, at least one
///       ciphertext (chunk size bytes; the final chunk 0 ... chunk size bytes) ‖ 16-byte GCM tag
///
///     chunkKey  = HMAC-SHA256(mediaKey, "ChatVault media v1 chunk key" ‖ file id)
///     headerKey = HMAC-SHA256(mediaKey, "ChatVault media v1 header key" ‖ file id)
///     nonce(i)  = 4 zero bytes ‖ i as UInt64 (the key is new for every file, so a counter is unique)
///     AAD(i)    = header bytes 0..<28 ‖ i as UInt64 ‖ final flag (1 for the last chunk, else 0)
///
/// Chunk `i` is AES-256-GCM under `chunkKey` with `nonce(i)` and `AAD(i)`. Every chunk but the last
/// is full, so the layout follows from the file's length; the final flag is authenticated, so:
///
/// - a bit flip anywhere (header, ciphertext, tag) fails the header tag or a chunk's tag;
/// - truncation at a chunk boundary leaves a last chunk sealed as "not final": it fails; truncation
///   mid-chunk or bytes appended change the layout: the last chunk fails;
/// - two chunks swapped fail (the index is in the nonce and the AAD);
/// - a chunk spliced in from another file fails (another file id: another key and AAD);
/// - a wrong key fails the header tag; a file swapped in from another cache too (another key);
/// - an empty plaintext still has one (empty) final chunk, so an empty file cannot be forged by
///   cutting a file down to its header.
///
/// A file moved to another name inside the same cache (under the same key) is not detected here:
/// the media engine records which file holds which attachment in the encrypted database.
/// Without a key a media file is the plain bytes, which an app opens directly.
enum MediaFileFormat {
    static let magic: [UInt8] = Array("CVM1".utf8)
    static let version: UInt8 = 1
    static let algorithm: UInt8 = 1
    /// Bytes of the header that the header tag and every chunk's AAD cover.
    static let authenticatedHeaderCount = 28
    static let headerCount = 44
    static let tagCount = 16
    static let fileIdCount = 16
    static let chunkSize = 65_536
    static let chunkSizeRange = 1024...(4 << 20)
    /// Plain files are read in pieces of this size.
    static let plainPieceSize = 65_536

    /// The header's first 28 bytes for a chunk size and file id.
    static func authenticatedHeader(chunkSize: Int, fileId: [UInt8]) -> [UInt8] {
        var header = magic + [version, algorithm, 0, 0]
        header += bigEndian(UInt32(truncatingIfNeeded: chunkSize))
        header += fileId
        return header
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
         UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    static func bigEndian(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
    }

    /// Parses and checks a header's plaintext fields; returns the chunk size and the file id.
    /// The header tag is checked by `MediaChunkCipher` (it needs the key).
    static func parseHeader(_ header: [UInt8]) throws(MediaFileError) -> (chunkSize: Int, fileId: [UInt8]) {
        guard header.count == headerCount else { throw .damaged("shorter than a media file header") }
        guard Array(header[0..<4]) == magic else { throw .damaged("no media file header (not an encrypted media file)") }
        guard header[4] == version else { throw .damaged("unknown media file version \(header[4])") }
        guard header[5] == algorithm else { throw .damaged("unknown media file algorithm \(header[5])") }
        guard header[6] == 0, header[7] == 0 else { throw .damaged("reserved header bytes are not zero") }
        let size = header[8..<12].reduce(0) { $0 << 8 | Int($1) }
        guard chunkSizeRange.contains(size) else { throw .damaged("chunk size \(size) out of range") }
        return (size, Array(header[12..<28]))
    }
}

/// OpenSSL for media files: random bytes, the per-file subkeys, the chunk cipher.
enum MediaCrypto {
    static func randomBytes(_ buffer: inout [UInt8]) throws(MediaFileError) {
        OpenSSLLifetime.ensure()
        let count = Int32(clamping: buffer.count)
        let ok = buffer.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, count) == 1 }
        guard ok else { throw .crypto("RAND_bytes") }
    }

    /// HMAC-SHA256(key, label ‖ fileId): 32 bytes.
    static func subkey(_ key: MediaKey, label: String, fileId: [UInt8]) throws(MediaFileError) -> [UInt8] {
        OpenSSLLifetime.ensure()
        let message = Array(label.utf8) + fileId
        return try hmac(key: key.raw, message)
    }

    static func hmac(key: [UInt8], _ message: [UInt8]) throws(MediaFileError) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: 32)
        var macLength: UInt32 = 0
        let ok = key.withUnsafeBytes { keyBytes in
            HMAC(EVP_sha256(), keyBytes.baseAddress, Int32(keyBytes.count), message, message.count, &mac, &macLength) != nil
        }
        guard ok, macLength == 32 else { throw .crypto("HMAC-SHA256") }
        return mac
    }

    static func cleanse(_ buffer: inout [UInt8]) {
        buffer.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
    }
}

/// The keys and cipher context of one encrypted media file. Zeroes its keys when released.
final class MediaChunkCipher {
    let authenticatedHeader: [UInt8]
    private var chunkKey: [UInt8]
    private var headerKey: [UInt8]
    private let context: OpaquePointer

    init(key: MediaKey, authenticatedHeader: [UInt8], fileId: [UInt8]) throws(MediaFileError) {
        OpenSSLLifetime.ensure()
        guard let context = EVP_CIPHER_CTX_new() else { throw .crypto("EVP_CIPHER_CTX_new") }
        self.context = context
        self.authenticatedHeader = authenticatedHeader
        chunkKey = []
        headerKey = []
        chunkKey = try MediaCrypto.subkey(key, label: "ChatVault media v1 chunk key", fileId: fileId)
        headerKey = try MediaCrypto.subkey(key, label: "ChatVault media v1 header key", fileId: fileId)
    }

    deinit {
        MediaCrypto.cleanse(&chunkKey)
        MediaCrypto.cleanse(&headerKey)
        EVP_CIPHER_CTX_free(context)
    }

    /// The 16-byte header tag.
    func headerTag() throws(MediaFileError) -> [UInt8] {
        Array(try MediaCrypto.hmac(key: headerKey, authenticatedHeader).prefix(MediaFileFormat.tagCount))
    }

    /// Whether `tag` is the header's tag (constant-time).
    func headerTagMatches(_ tag: [UInt8]) throws(MediaFileError) -> Bool {
        let expected = try headerTag()
        guard tag.count == expected.count else { return false }
        return expected.withUnsafeBytes { e in tag.withUnsafeBytes { t in CRYPTO_memcmp(e.baseAddress, t.baseAddress, e.count) == 0 } }
    }

    private func nonce(_ index: UInt64) -> [UInt8] { [0, 0, 0, 0] + MediaFileFormat.bigEndian(index) }

    private func aad(_ index: UInt64, final: Bool) -> [UInt8] {
        authenticatedHeader + MediaFileFormat.bigEndian(index) + [final ? 1 : 0]
    }

    /// Encrypts chunk `index`: ciphertext ‖ tag.
    func seal(_ plain: [UInt8], index: UInt64, final: Bool) throws(MediaFileError) -> [UInt8] {
        let iv = nonce(index)
        let aad = aad(index, final: final)
        // Every byte is written below (ciphertext, then the tag); on failure the array is dropped.
        var out = [UInt8](unsafeUninitializedCapacity: plain.count + MediaFileFormat.tagCount) { _, count in
            count = plain.count + MediaFileFormat.tagCount
        }
        let ok = chunkKey.withUnsafeBufferPointer { key -> Bool in
            out.withUnsafeMutableBufferPointer { out -> Bool in
                guard let outBase = out.baseAddress,
                      EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, key.baseAddress, iv) == 1 else { return false }
                var length: Int32 = 0
                guard EVP_EncryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1 else { return false }
                var written = 0
                if !plain.isEmpty {
                    guard EVP_EncryptUpdate(context, outBase, &length, plain, Int32(plain.count)) == 1 else { return false }
                    written = Int(length)
                }
                guard EVP_EncryptFinal_ex(context, outBase + written, &length) == 1 else { return false }
                written += Int(length)
                guard written == plain.count else { return false }
                return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(MediaFileFormat.tagCount), outBase + written) == 1
            }
        }
        guard ok else { throw .crypto("AES-256-GCM encryption") }
        return out
    }

    /// Decrypts and verifies chunk `index` (ciphertext ‖ tag); nil when it fails authentication.
    /// A plaintext that fails is zeroed, never returned.
    func open(_ sealed: [UInt8], index: UInt64, final: Bool) throws(MediaFileError) -> [UInt8]? {
        guard sealed.count >= MediaFileFormat.tagCount else { return nil }
        let cipherCount = sealed.count - MediaFileFormat.tagCount
        let iv = nonce(index)
        let aad = aad(index, final: final)
        var tag = Array(sealed[cipherCount...])
        var plain = [UInt8](repeating: 0, count: cipherCount + 16)
        var initialised = true
        let verified = chunkKey.withUnsafeBufferPointer { key -> Bool in
            plain.withUnsafeMutableBufferPointer { out -> Bool in
                guard let outBase = out.baseAddress,
                      EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, key.baseAddress, iv) == 1 else {
                    initialised = false
                    return false
                }
                var length: Int32 = 0
                guard EVP_DecryptUpdate(context, nil, &length, aad, Int32(aad.count)) == 1 else { return false }
                var written = 0
                if cipherCount > 0 {
                    let ok = sealed.withUnsafeBufferPointer { input in
                        EVP_DecryptUpdate(context, outBase, &length, input.baseAddress, Int32(cipherCount)) == 1
                    }
                    guard ok else { return false }
                    written = Int(length)
                }
                guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(MediaFileFormat.tagCount), &tag) == 1 else {
                    return false
                }
                guard EVP_DecryptFinal_ex(context, outBase + written, &length) == 1 else { return false }
                return written + Int(length) == cipherCount
            }
        }
        guard initialised else { throw .crypto("AES-256-GCM initialisation") }
        guard verified else {
            MediaCrypto.cleanse(&plain)
            return nil
        }
        plain.removeLast(16)
        return plain
    }
}
