import Foundation
internal import CCrypto

/// Keys in files: one 0600 file per cache in a 0700 directory that must lie outside every cache
/// directory. Reported as tier `SOFTWARE`: the key is only as safe as the user's account, and the
/// status says so.
///
///     let store = SoftwareKeyStore(directory: "/home/me/.config/org.example.chat/cache-keys")
///
/// Files or directories that others can read, that belong to another user or that are symlinks are
/// refused (`.unavailable(.insecureStorage)`), never used and never "repaired".
///
/// `.absent` means the directory exists (and passes those checks), this store has written keys
/// into it (its marker file `.chatvault-key-store` is there), and the key's file is not in it. An
/// empty directory that merely exists (an empty mount point, one created while the real volume was
/// not mounted) proves nothing and answers `.unavailable(.other)`.
/// A missing directory is `.unavailable(.other)` for lookups and listings alike: it may be on a
/// volume that is not mounted, or `XDG_CONFIG_HOME` may differ from the run that stored the key,
/// and the store cannot tell "never stored" from "not reachable". Only `availability()` and
/// `store` create it (for a new key).
///
/// File format (binary): the 8 bytes `CVKEY1\n\0`, one byte key-id length, the key id (UTF-8),
/// then the 32 key bytes.
public struct SoftwareKeyStore: KeyStore {
    public let directory: String
    public var tier: KeyStorageTier { .software }
    public var name: String { "file" }

    private static let magic: [UInt8] = Array("CVKEY1\n\0".utf8)
    /// Written beside the first key: proof that "no file" in this directory means "no key".
    static let markerName = ".chatvault-key-store"

    private var marker: String { "\(directory)/\(Self.markerName)" }

    /// Whether this directory has held keys written by this store (and still exists).
    private func hasMarker() -> Bool {
        (try? SecureFiles.checkFile(marker)) != nil
    }
    private static let maxFileSize = 512

    public init(directory: String) {
        self.directory = directory
    }

    /// The file that holds one cache's key.
    package func path(for id: KeyItemID) -> String {
        "\(directory)/\(Self.fileStem(applicationId: id.applicationId, account: id.account)).\(id.cacheId).key"
    }

    private static func fileStem(applicationId: String, account: String) -> String {
        // The application id is hashed so odd characters can never reach the file system.
        "\(sha256Hex(applicationId).prefix(16)).\(account)"
    }

    private func unavailable(_ error: SecureFileError) -> KeyUnavailableReason {
        error.isRefusal ? .insecureStorage : .other
    }

    /// Nil when the directory exists and is private; else why a lookup or listing cannot answer.
    /// A missing directory is `.other`, never "no keys": see the type's documentation.
    private func checkDirectory() -> KeyUnavailableReason? {
        do {
            try SecureFiles.checkDirectory(directory)
            return nil
        } catch {
            return unavailable(error)
        }
    }

    /// `.available` when the directory exists and is private, creating it (0700, with missing
    /// parents) for a new key; else why not.
    public func availability() -> KeyStoreAvailability {
        do {
            try SecureFiles.ensureDirectory(directory)
            return .available
        } catch {
            return .unavailable(unavailable(error))
        }
    }

    /// `.found`; `.absent` only when the directory exists, is private, and has no file for this
    /// key; `.unavailable(.other)` when the directory itself is missing (unreachable, not "no
    /// key"), or the file is damaged; `.unavailable(.insecureStorage)` for a refused file or
    /// directory.
    public func lookup(_ id: KeyItemID) -> KeyLookup {
        guard KeyItemNames.isSafe(id) else { return .unavailable(.other) }
        if let refusal = checkDirectory() { return .unavailable(refusal) }
        do {
            return try SecureFiles.withContents(path(for: id), limit: Self.maxFileSize) { (bytes) throws(SecureFileError) -> KeyLookup in
                guard let (keyId, keyBytes) = Self.parse(bytes) else { return .unavailable(.other) }
                guard let key = try? CacheKey.copying(keyBytes) else { return .unavailable(.other) }
                return .found(key, keyId: keyId)
            }
        } catch .notFound {
            // Look again: the directory may have gone (an unmount) between the checks, and only a
            // directory this store has written keys into can say "no key".
            if let refusal = checkDirectory() { return .unavailable(refusal) }
            return hasMarker() ? .absent : .unavailable(.other)
        } catch {
            return .unavailable(unavailable(error))
        }
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer) -> (String, UnsafeRawBufferPointer)? {
        guard bytes.count > magic.count + 1, Array(bytes[0..<magic.count]) == magic else { return nil }
        let idLength = Int(bytes[magic.count])
        let idStart = magic.count + 1
        guard bytes.count == idStart + idLength + CacheKey.byteCount,
              let keyId = String(bytes: bytes[idStart..<(idStart + idLength)], encoding: .utf8) else { return nil }
        return (keyId, UnsafeRawBufferPointer(rebasing: bytes[(idStart + idLength)...]))
    }

    /// The account's keys, by file name. `.unavailable(.other)` when the directory is missing (as
    /// for `lookup`: an empty listing must mean "none"). A key file that is there but cannot be
    /// used now (refused as insecure, damaged, an I/O error) is listed too, with an empty key id,
    /// as a locked Secret Service item is: it may be the very key a manifest repair looks for, and
    /// its `lookup` says why it cannot be read. Leaving it out would make the listing claim a
    /// completeness it does not have.
    public func items(applicationId: String, account: String) -> KeyListing {
        if let refusal = checkDirectory() { return .unavailable(refusal) }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            return .unavailable(.other)
        }
        let prefix = Self.fileStem(applicationId: applicationId, account: account) + "."
        var found: [KeyItemSummary] = []
        for name in names.sorted() where name.hasPrefix(prefix) && name.hasSuffix(".key") {
            let cacheId = String(name.dropFirst(prefix.count).dropLast(4))
            // Not a name this store writes (its cache ids are safe components): not one of ours.
            guard KeyItemNames.isSafeComponent(cacheId) else { continue }
            let id = KeyItemID(applicationId: applicationId, account: account, cacheId: cacheId)
            switch lookup(id) {
            case .found(_, let keyId): found.append(KeyItemSummary(id: id, keyId: keyId))
            case .unavailable: found.append(KeyItemSummary(id: id, keyId: ""))
            case .absent: continue // deleted since the directory was read
            }
        }
        // Nothing found in a directory this store never wrote to proves nothing.
        if found.isEmpty && !hasMarker() { return .unavailable(.other) }
        return .items(found)
    }

    public func store(_ key: CacheKey, keyId: String, for id: KeyItemID, label: String) throws(KeyStoreError) {
        guard KeyItemNames.isSafe(id) else { throw KeyStoreError(.other, "unsafe characters in a key item name") }
        let idBytes = Array(keyId.utf8)
        guard idBytes.count < 256 else { throw KeyStoreError(.other, "key id too long") }
        do throws(SecureFileError) {
            try SecureFiles.ensureDirectory(directory)
            let size = Self.magic.count + 1 + idBytes.count + CacheKey.byteCount
            try withScratch(count: size) { (buffer) throws(SecureFileError) in
                buffer.copyBytes(from: Self.magic)
                buffer[Self.magic.count] = UInt8(idBytes.count)
                UnsafeMutableRawBufferPointer(rebasing: buffer[(Self.magic.count + 1)...]).copyBytes(from: idBytes)
                key.withUnsafeBytes { raw in
                    UnsafeMutableRawBufferPointer(rebasing: buffer[(Self.magic.count + 1 + idBytes.count)...]).copyMemory(from: raw)
                }
                try SecureFiles.writeAtomically(path(for: id), UnsafeRawBufferPointer(buffer))
            }
            if !hasMarker() { try SecureFiles.writeAtomically(marker, data: Array("ChatVault key store\n".utf8)) }
        } catch {
            throw KeyStoreError(unavailable(error), error.description)
        }
    }

    public func delete(_ id: KeyItemID) throws(KeyStoreError) {
        guard KeyItemNames.isSafe(id) else { return }
        let path = path(for: id)
        if unlink(path) != 0, errno != ENOENT {
            throw KeyStoreError(.other, SecureFileError.system(path, operation: "unlink", errno: errno).description)
        }
        try? SecureFiles.syncDirectory(directory)
    }

    public func locator(for id: KeyItemID) -> [String: String] {
        ["store": "file", "path": path(for: id)]
    }
}

/// Validation of the parts of a key item name that reach file names or D-Bus attributes.
package enum KeyItemNames {
    /// Cache ids and accounts are ours (UUIDs and hex digests); anything else came from a damaged or
    /// hostile manifest and must not be used to build a path.
    package static func isSafe(_ id: KeyItemID) -> Bool {
        isSafeComponent(id.cacheId) && isSafeComponent(id.account) && !id.applicationId.isEmpty
    }

    package static func isSafeComponent(_ text: String) -> Bool {
        !text.isEmpty && text.count <= 128 && text.utf8.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
                || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-")
        }
    }
}
