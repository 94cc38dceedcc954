import Foundation

/// What encryption at rest is actually doing (`getOfflineEncryptionStatus()`).
///
/// Every field but `enabled` describes what was **achieved**: `enabled: true` with
/// `atRest: "NONE"` is the tell-tale of encryption requested but not running. The status never
/// contains the key, any part of it or its length.
public struct OfflineEncryptionStatus: Sendable, Equatable, CustomStringConvertible {
    /// What the app configured (offline on and `encryption` on).
    public var enabled: Bool
    /// `"SQLCIPHER"` when the open cache is encrypted and proven, else `"NONE"`.
    public var atRest: String
    /// `"KEYSTORE"`, `"SOFTWARE"` or `"NONE"`: where the open cache's key really is.
    public var keyStorage: String
    /// A cipher engine is present in this build (probed at run time, not assumed).
    public var cipherAvailable: Bool
    /// The cipher once proven by a keyed open and the file header, e.g. "AES-256-CBC/HMAC-SHA1".
    public var cipher: String?
    /// What is never covered, in words; nil when nothing is stored.
    public var leakage: String?

    /// The six keys, exactly: `enabled`, `atRest`, `keyStorage`, `cipherAvailable`, `cipher`,
    /// `leakage` (null values are `NSNull`).
    public var dictionary: [String: Any] {
        [
            "enabled": enabled,
            "atRest": atRest,
            "keyStorage": keyStorage,
            "cipherAvailable": cipherAvailable,
            "cipher": cipher.map { $0 as Any } ?? NSNull(),
            "leakage": leakage.map { $0 as Any } ?? NSNull(),
        ]
    }

    /// The status in one line for logs (every key but `leakage`).
    public var description: String {
        "enabled=\(enabled) atRest=\(atRest) keyStorage=\(keyStorage) cipherAvailable=\(cipherAvailable) cipher=\(cipher ?? "null")"
    }

    /// What an encrypted cache still shows to someone holding its files.
    /// (With a safe runtime directory for decrypted views: media, received and being sent, is encrypted.)
    public static let encryptedLeakage = "Not covered: while a user is logged in, decrypted views of opened media and of "
        + "files being sent sit in a private runtime directory (0700, removed at logout, clear, reset and the next start); "
        + "the manifest (cache id, key id, key-check value, cipher settings) is plaintext; file names, sizes, counts and "
        + "times are visible (a media file's size reveals its attachment's size). Not end-to-end encryption: the server "
        + "sees content."
    /// What an encrypted cache shows when there is no safe runtime directory: received media stays
    /// encrypted (read from memory), but copies of files being sent must stay plain to be uploaded.
    public static let encryptedLeakageWithoutViews = "Not covered: copies of files being sent (outgoing/) are stored "
        + "unencrypted until their send completes (there is no safe runtime directory to upload them from); the manifest "
        + "(cache id, key id, key-check value, cipher settings) is plaintext; file names, sizes, counts and times are "
        + "visible (a media file's size reveals its attachment's size). Not end-to-end encryption: the server sees content."
    /// What an unencrypted cache shows.
    public static let plaintextLeakage = "The cache is not encrypted: anyone who can read its files can read cached "
        + "messages, the outbox and media."
}
