import Foundation
internal import CSQLCipher
import VaultKeys

/// What the linked SQLite library really is, probed once per process.
///
/// If plain SQLite is linked by accident, `PRAGMA key` is ignored and `PRAGMA cipher_version`
/// returns nothing: the cache would be written in clear. Nothing is labelled encrypted until this
/// probe says a cipher is present and a keyed file's header proves it (`CipherProof`).
package struct CipherEngine: Sendable, Equatable {
    /// `PRAGMA cipher_version` (e.g. "3.4.1"), or nil when no cipher is linked.
    package let version: String?
    /// `PRAGMA cipher` on a keyed connection (e.g. "aes-256-cbc").
    package let cipherName: String?
    /// `sqlite_version()` of the linked engine (e.g. "3.15.2").
    package let sqliteVersion: String
    /// The level SQLCipher's own log was left at (`PRAGMA cipher_log_level`, SQLCipher 4.x): "NONE"
    /// unless `CHATVAULT_SQLCIPHER_LOG` asks for one. Nil when the engine has no such log (3.4.1).
    package let engineLogLevel: String?

    /// Whether a cipher engine is present in this build.
    package var isAvailable: Bool { !(version ?? "").isEmpty }

    /// The major SQLCipher version (3 or 4…), which decides the pragmas the profile needs.
    package var majorVersion: Int? { version.flatMap { Int($0.split(separator: ".").first ?? "") } }

    package init(version: String?, cipherName: String?, sqliteVersion: String, engineLogLevel: String? = nil) {
        self.version = version
        self.cipherName = cipherName
        self.sqliteVersion = sqliteVersion
        self.engineLogLevel = engineLogLevel
    }

    /// The probe result for this process.
    package static let current: CipherEngine = probe()

    static func probe() -> CipherEngine {
        var db: OpaquePointer?
        OpenSSLLifetime.ensure()
        guard sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let db else {
            sqlite3_close_v2(db)
            return CipherEngine(version: nil, cipherName: nil, sqliteVersion: String(cString: sqlite3_libversion()))
        }
        defer { sqlite3_close_v2(db) }
        // A throwaway raw key: the probe only asks the engine to describe itself.
        if let key = try? CacheKey.generate() {
            _ = key.withRawKeyLiteral { literal in sqlite3_key(db, literal.baseAddress, Int32(literal.count)) }
        }
        // First, so that not even the probe's own statements reach the engine's log.
        let logLevel = configureEngineLog(db)
        let version = scalar(db, "PRAGMA cipher_version")
        let cipher = scalar(db, "PRAGMA cipher")
        return CipherEngine(version: version?.isEmpty == false ? version : nil,
                            cipherName: cipher?.isEmpty == false ? cipher : nil,
                            sqliteVersion: String(cString: sqlite3_libversion()),
                            engineLogLevel: logLevel)
    }

    /// SQLCipher 4.x writes its own log to stderr (level WARN by default), e.g. "ERROR CORE …
    /// hmac check failed for pgno=24" for a damaged page: lines in the app's stderr that it cannot
    /// route, carrying nothing the library does not already report (the failure reaches the open
    /// procedure as a result code and is classified and noted there). So it is silenced, process
    /// wide, before the first keyed connection reads a page (every keyed connection asks for
    /// `.current` first). `CHATVAULT_SQLCIPHER_LOG=ERROR|WARN|INFO|DEBUG|TRACE` keeps it at that
    /// level, for debugging. Probed, not assumed: 3.4.1 (and 4.x before `cipher_log_level`) ignore
    /// the unknown pragma and answer nothing, which is recorded as nil.
    private static func configureEngineLog(_ db: OpaquePointer) -> String? {
        let asked = ProcessInfo.processInfo.environment["CHATVAULT_SQLCIPHER_LOG"]?.uppercased()
        let level: String = ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].first { $0 == asked } ?? "NONE"
        guard let answer = scalar(db, "PRAGMA cipher_log_level = \(level)"), !answer.isEmpty else { return nil }
        return answer
    }

    private static func scalar(_ db: OpaquePointer, _ sql: String) -> String? {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK else {
            sqlite3_finalize(stmt)
            return nil
        }
        defer { sqlite3_finalize(stmt) }
        guard sqlite3_step(stmt) == SQLITE_ROW, let text = sqlite3_column_text(stmt, 0) else { return nil }
        return String(cString: text)
    }
}

/// The cipher settings of a cache, set explicitly on every keyed connection and recorded in the
/// manifest, so a cache written under SQLCipher 3.4 still opens after an upgrade to 4.x (whose
/// defaults differ: SHA512 HMAC and KDF, 256,000 iterations).
package struct CipherProfile: Codable, Sendable, Equatable {
    /// How the key is given: always `raw` (a 256-bit key, no passphrase KDF).
    package var keying: String
    package var pageSize: Int
    package var useHMAC: Bool
    package var hmacAlgorithm: String
    package var kdfAlgorithm: String
    /// Iterations of the passphrase KDF; unused with raw keys but pinned so 4.x reads the same file.
    package var kdfIterations: Int
    /// Iterations of the HMAC key derivation from the encryption key.
    package var fastKdfIterations: Int
    /// The engine that created the cache, for the audit.
    package var createdBy: String

    /// The profile new caches get: SQLCipher 3.4's algorithms with a 4096-byte page.
    package static func standard(engine: CipherEngine = .current) -> CipherProfile {
        CipherProfile(keying: "raw", pageSize: 4096, useHMAC: true, hmacAlgorithm: "HMAC_SHA1",
                      kdfAlgorithm: "PBKDF2_HMAC_SHA1", kdfIterations: 64000, fastKdfIterations: 2,
                      createdBy: "SQLCipher \(engine.version ?? "none") on SQLite \(engine.sqliteVersion)")
    }

    /// Whether every field is one this code knows. A manifest is a file anyone with the user's
    /// rights can edit, and these values become pragmas: only allow-listed words and sane numbers.
    package var isWellFormed: Bool {
        keying == "raw" && (512...65536).contains(pageSize) && pageSize & (pageSize - 1) == 0
            && ["HMAC_SHA1", "HMAC_SHA256", "HMAC_SHA512"].contains(hmacAlgorithm)
            && ["PBKDF2_HMAC_SHA1", "PBKDF2_HMAC_SHA256", "PBKDF2_HMAC_SHA512"].contains(kdfAlgorithm)
            && (1...10_000_000).contains(kdfIterations) && (1...10_000).contains(fastKdfIterations)
            && createdBy.utf8.count < 256
    }

    /// The status string once proven, e.g. "AES-256-CBC/HMAC-SHA1".
    package func cipherDescription(engine: CipherEngine) -> String {
        let cipher = (engine.cipherName ?? "aes-256-cbc").uppercased()
        let mac = useHMAC ? hmacAlgorithm.replacingOccurrences(of: "_", with: "-") : "no HMAC"
        return "\(cipher)/\(mac)"
    }

    /// The pragmas that pin this profile on a freshly keyed connection, for the linked engine.
    /// `schema` prefixes them for an attached database (`enc.cipher_page_size`).
    func pragmas(engine: CipherEngine, schema: String? = nil) -> [String] {
        let p = schema.map { "\($0)." } ?? ""
        var out = [
            "PRAGMA \(p)cipher_page_size = \(pageSize)",
            "PRAGMA \(p)kdf_iter = \(kdfIterations)",
            "PRAGMA \(p)fast_kdf_iter = \(fastKdfIterations)",
            "PRAGMA \(p)cipher_use_hmac = \(useHMAC ? "ON" : "OFF")",
        ]
        if (engine.majorVersion ?? 3) >= 4 {
            // SQLCipher 4 made the algorithms selectable and changed the defaults: pin ours.
            out += [
                "PRAGMA \(p)cipher_hmac_algorithm = \(hmacAlgorithm)",
                "PRAGMA \(p)cipher_kdf_algorithm = \(kdfAlgorithm)",
                "PRAGMA \(p)cipher_plaintext_header_size = 0",
            ]
        }
        return out
    }
}

/// Proof, from the file itself, that a cache is encrypted.
package enum CipherProof {
    /// The 16 bytes every plaintext SQLite database starts with.
    package static let plaintextHeader: [UInt8] = Array("SQLite format 3".utf8) + [0]

    /// What the first 16 bytes of a database file say.
    package enum Header: Sendable, Equatable {
        /// No such file (ENOENT, and only that).
        case missing
        case empty
        case plaintext
        /// Not a plaintext header: an encrypted file (or garbage).
        case opaque
        /// The file could not be opened or read now (EMFILE, EACCES, EIO…): says nothing about it.
        case unreadable(errno: Int32)
    }

    package static func header(of path: String) -> Header {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            return e == ENOENT ? .missing : .unreadable(errno: e)
        }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 16)
        var n = 0
        while n < 16 {
            let got = read(fd, &bytes[n], 16 - n)
            if got < 0 {
                if errno == EINTR { continue }
                return .unreadable(errno: errno)
            }
            if got == 0 { break }
            n += got
        }
        if n == 0 { return .empty }
        return n == 16 && bytes == plaintextHeader ? .plaintext : .opaque
    }
}
