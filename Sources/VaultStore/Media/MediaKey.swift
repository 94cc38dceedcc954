import Foundation
internal import CCrypto
import VaultKeys

/// The key of a cache's media files: 32 random bytes. The media engine keeps it inside the
/// encrypted database (`raw` is for that); it never appears in a description, a mirror or an error:
///
///     let key = try MediaKey.generate()
///     print(key)          // MediaKey(<redacted>)
///
/// Equality is constant-time.
package struct MediaKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key length in bytes (AES-256).
    package static let byteCount = 32

    private let bytes: [UInt8]

    private init(checked bytes: [UInt8]) { self.bytes = bytes }

    /// A fresh key from OpenSSL's `RAND_bytes` (seeded from the kernel).
    package static func generate() throws(MediaFileError) -> MediaKey {
        var bytes = [UInt8](repeating: 0, count: byteCount)
        try MediaCrypto.randomBytes(&bytes)
        return MediaKey(checked: bytes)
    }

    /// A key read back from the database; nil unless exactly 32 bytes.
    package init?(raw: [UInt8]) {
        guard raw.count == Self.byteCount else { return nil }
        bytes = raw
    }

    /// The 32 key bytes, for storing them in the (encrypted) database. Do not log them.
    package var raw: [UInt8] { bytes }

    package static func == (lhs: MediaKey, rhs: MediaKey) -> Bool {
        guard lhs.bytes.count == rhs.bytes.count else { return false }
        return lhs.bytes.withUnsafeBytes { l in
            rhs.bytes.withUnsafeBytes { r in CRYPTO_memcmp(l.baseAddress, r.baseAddress, l.count) == 0 }
        }
    }

    package var description: String { "MediaKey(<redacted>)" }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// A media file could not be written or read. Carries what went wrong and errno, never file
/// content, key bytes or plaintext.
package enum MediaFileError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file is not a valid media file under this key: authentication failed, truncated,
    /// reordered or spliced chunks, a bad header, a wrong key, an empty or foreign file. The
    /// string names what failed (e.g. "chunk 3 failed authentication").
    case damaged(String)
    /// A system call failed (`operation` names it, e.g. "open temporary file").
    case io(operation: String, errno: Int32)
    /// More plaintext than the caller's limit (on append, or on read).
    case tooLarge(limit: Int64)
    /// `$XDG_RUNTIME_DIR` cannot hold decrypted views: unset, missing, not a directory, a symbolic
    /// link, owned by someone else, or open to group/others. The string says which.
    case noSafeRuntimeDirectory(String)
    /// OpenSSL refused an operation (the random source, a cipher initialisation); the string names it.
    case crypto(String)

    package var description: String {
        switch self {
        case .damaged(let what): return "media file damaged or not under this key: \(what)"
        case .io(let operation, let e): return "\(operation) failed: \(String(cString: strerror(e))) (errno \(e))"
        case .tooLarge(let limit): return "media file is larger than the limit of \(limit) bytes"
        case .noSafeRuntimeDirectory(let why): return "no safe runtime directory for decrypted media: \(why)"
        case .crypto(let what): return "OpenSSL failed: \(what)"
        }
    }
}
