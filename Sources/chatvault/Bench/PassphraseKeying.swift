import Foundation
import VaultStore

/// Keying SQLCipher with a passphrase, for comparison only: ChatVault itself never does this (it
/// keys with a raw 256-bit key, which skips the KDF; ARCHITECTURE.md §2).
///
/// Only VaultStore's public API is used, which opens connections through `DatabaseQueue` (that
/// reads page 1 before anyone could set a pragma). So the passphrase database is reached with
/// `ATTACH DATABASE ? AS <schema> KEY ?` (the SQL form of `sqlite3_key` with a passphrase) on a
/// connection to an empty `:memory:` database.
///
/// ATTACH reads the attached file's schema at once, so the KDF runs inside the ATTACH with the
/// settings a new codec starts from: SQLCipher's process-wide defaults. A per-schema
/// `PRAGMA <schema>.kdf_iter` would come after the first read, too late (on 3.4.1 the open then
/// fails with SQLITE_NOTADB). The defaults are therefore set just around the ATTACH and put back
/// right after; `chatvault bench` opens nothing else while they are changed.
enum PassphraseKeying {
    /// SQLCipher 4's default PBKDF2 iteration count.
    static let iterations = 256_000
    /// The page size of ChatVault's profile (and SQLCipher 4's default).
    static let pageSize = 4096

    /// The engine's process-wide cipher defaults, to restore after each ATTACH.
    struct Defaults {
        let kdfIterations: Int
        let pageSize: Int
    }

    /// The KDF the passphrase design really runs on the linked engine: SQLCipher 3.x only has
    /// PBKDF2-HMAC-SHA1; 4.x defaults to PBKDF2-HMAC-SHA512.
    static var kdfName: String {
        (CipherEngine.current.majorVersion ?? 3) >= 4 ? "PBKDF2-HMAC-SHA512" : "PBKDF2-HMAC-SHA1"
    }

    static func currentDefaults(_ db: Database) throws -> Defaults {
        guard let iterations = try db.scalarText("PRAGMA cipher_default_kdf_iter").flatMap({ Int($0) }),
              let pageSize = try db.scalarText("PRAGMA cipher_default_page_size").flatMap({ Int($0) }) else {
            throw CLIError.failure("the linked engine does not report SQLCipher's cipher defaults: no cipher engine?")
        }
        return Defaults(kdfIterations: iterations, pageSize: pageSize)
    }

    /// Attaches `path` as `schema`, keyed with `passphrase` through PBKDF2 × `iterations`, with
    /// `pageSize` pages. `path` may be an empty file (sqlcipher_export fills it later).
    static func attach(_ db: Database, path: String, as schema: String, passphrase: [UInt8], restoring defaults: Defaults) throws {
        try db.execute("PRAGMA cipher_default_kdf_iter = \(iterations)")
        try db.execute("PRAGMA cipher_default_page_size = \(pageSize)")
        defer {
            try? db.execute("PRAGMA cipher_default_kdf_iter = \(defaults.kdfIterations)")
            try? db.execute("PRAGMA cipher_default_page_size = \(defaults.pageSize)")
        }
        // A one-off statement (not the connection's statement cache), so the bound passphrase is
        // released with it.
        let attach = try db.prepare("ATTACH DATABASE ? AS \(schema) KEY ?")
        try attach.bind([.text(path), .blob(passphrase)])
        while try attach.step() {}
    }

    /// Attaches `path` as `schema` with no key: a plaintext database, whatever `main` is keyed with.
    /// (An ATTACH without KEY would inherit the main database's key; `KEY ''` means none.)
    static func attachPlaintext(_ db: Database, path: String, as schema: String) throws {
        let attach = try db.prepare("ATTACH DATABASE ? AS \(schema) KEY ''")
        try attach.bind([.text(path)])
        while try attach.step() {}
    }
}

/// Overwrites a byte buffer with zeros (best effort: Swift may have copied it before).
func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { buffer in
        if let base = buffer.baseAddress { explicit_bzero(base, buffer.count) }
    }
}
