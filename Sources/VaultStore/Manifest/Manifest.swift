package import Foundation
package import VaultKeys

/// The plaintext sidecar that describes a cache: small, versioned, written atomically.
///
/// It holds no message content, no user id and no key material. The key-check value is an HMAC
/// of a fixed label under the key: it tells a right key from a wrong one without opening the
/// database, and reveals nothing about the key.
package struct Manifest: Codable, Sendable, Equatable {
    /// The newest manifest format this code understands. A manifest is written as format 1 unless
    /// a key change is in progress (`keyChange`): then as format 2, so that an older ChatVault,
    /// which would not finish the change, leaves the cache alone (`newerManifest`) instead of
    /// taking a half-rotated database for a wrong key.
    package static let currentFormatVersion = 2

    package var formatVersion: Int
    /// A random identifier of this cache (a UUID); it names the key item.
    package var cacheId: String
    package var encrypted: Bool
    /// The tier holding the key (`KEYSTORE`, `SOFTWARE`, `NONE`).
    package var keyStorage: KeyStorageTier
    /// The store that holds the key (`secret-service`, `file`, `memory`), nil when plaintext.
    package var keyStore: String?
    /// A random identifier of the key (not the key), also kept on the key item.
    package var keyId: String?
    /// HMAC-SHA256 of a fixed label and the cache id under the key, hex.
    package var keyCheck: String?
    /// The cipher settings every connection pins; nil when plaintext.
    package var cipherProfile: CipherProfile?
    /// When the cache was created (ISO 8601).
    package var createdAt: String
    /// Unclassified open failures in a row; reset to 0 by a successful open.
    package var consecutiveUnclassifiedFailures: Int
    /// The SQLite result code of the last unclassified failure, for the audit.
    package var lastFailureCode: Int32?
    /// A key rotation or key move that has started and not finished (key ids and store names,
    /// never keys). Every open finishes or rolls it back before anything else (`KeyChange`).
    package var keyChange: KeyChange?

    package init(cacheId: String, encrypted: Bool, keyStorage: KeyStorageTier, keyStore: String?, keyId: String?,
                keyCheck: String?, cipherProfile: CipherProfile?, createdAt: Date) {
        formatVersion = Manifest.currentFormatVersion
        self.cacheId = cacheId
        self.encrypted = encrypted
        self.keyStorage = keyStorage
        self.keyStore = keyStore
        self.keyId = keyId
        self.keyCheck = keyCheck
        self.cipherProfile = cipherProfile
        self.createdAt = ISO8601DateFormatter().string(from: createdAt)
        consecutiveUnclassifiedFailures = 0
        lastFailureCode = nil
    }

    /// Whether the manifest is internally consistent and names nothing that could escape the
    /// cache directory or the key store's namespace.
    package var isWellFormed: Bool {
        guard formatVersion >= 1, KeyItemNames.isSafeComponent(cacheId), consecutiveUnclassifiedFailures >= 0 else { return false }
        if encrypted {
            guard keyStorage != .none, let keyCheck, keyCheck.count == 64, keyCheck.utf8.allSatisfy(isHexDigit),
                  let profile = cipherProfile, profile.isWellFormed,
                  let keyId, KeyItemNames.isSafeComponent(keyId) else { return false }
            if let keyStore, !KeyItemNames.isSafeComponent(keyStore) { return false }
        }
        if let keyChange {
            guard encrypted, keyChange.isWellFormed else { return false }
        }
        return true
    }

    private func isHexDigit(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66)
    }
}

/// Reading and writing `manifest.json`.
package enum ManifestFile {
    package static let name = "manifest.json"
    private static let sizeLimit = 64 * 1024

    /// What was found on disk.
    package enum State: Sendable, Equatable {
        case missing
        /// The file exists but could not be read now (EACCES, EMFILE, EIO…): transient, never
        /// a reason to rebuild anything.
        case unreadable(errno: Int32)
        /// Unparseable or inconsistent (the reason, free of content).
        case damaged(String)
        /// Written by a newer ChatVault: left alone.
        case newerFormat(Int)
        case valid(Manifest)
    }

    package static func read(directory: String) -> State {
        let path = "\(directory)/\(name)"
        let bytes: [UInt8]
        do {
            bytes = try SecureFiles.read(path, limit: sizeLimit)
        } catch .notFound {
            return .missing
        } catch {
            if let code = error.errno { return .unreadable(errno: code) }
            return .damaged(error.description)
        }
        if let probe = try? JSONDecoder().decode(FormatProbe.self, from: Data(bytes)),
           probe.formatVersion > Manifest.currentFormatVersion {
            return .newerFormat(probe.formatVersion)
        }
        guard let manifest = try? JSONDecoder().decode(Manifest.self, from: Data(bytes)) else {
            return .damaged("not a valid manifest")
        }
        guard manifest.isWellFormed else { return .damaged("inconsistent fields") }
        return .valid(manifest)
    }

    package static func write(_ manifest: Manifest, directory: String) throws(SecureFileError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var written = manifest
        written.formatVersion = manifest.keyChange == nil ? 1 : 2
        let data = (try? encoder.encode(written)) ?? Data()
        try SecureFiles.writeAtomically("\(directory)/\(name)", data: Array(data) + [0x0a])
    }

    private struct FormatProbe: Decodable {
        var formatVersion: Int
    }
}
