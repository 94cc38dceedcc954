import Foundation
import XCTest
@testable import VaultKeys

/// The recovery secret (issue 12's first piece): 160 random bits typed as nine groups of four
/// base32 characters with a checksum that catches typos, and a cache key wrapped under it with
/// PBKDF2-HMAC-SHA512 and AES-256-GCM that a wrong secret cannot open.
final class RecoverySecretTests: XCTestCase {
    func testASecretRoundTripsAsTypedAndCatchesTypos() throws {
        let secret = try RecoverySecret.generate()
        let text = secret.formatted
        XCTAssertEqual(text.count, 44, "nine groups of four, eight dashes")
        XCTAssertEqual(text.split(separator: "-").count, 9)
        XCTAssertTrue(text.allSatisfy { $0 == "-" || "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".contains($0) })
        XCTAssertEqual(try RecoverySecret(parsing: text), secret)
        XCTAssertEqual(try RecoverySecret(parsing: text.lowercased().replacingOccurrences(of: "-", with: " ")), secret, "case and spacing do not matter")
        XCTAssertFalse(secret.description.contains(String(text.prefix(4))) && secret.description.count > 30, "the description hides it")
        XCTAssertEqual(secret.description, "RecoverySecret(<redacted>)")
        XCTAssertNotEqual(try RecoverySecret.generate(), secret)

        // Every single-character typo is caught by the checksum (or the alphabet).
        var symbols = Array(text.replacingOccurrences(of: "-", with: ""))
        var caught = 0
        for i in 0..<symbols.count {
            let original = symbols[i]
            symbols[i] = original == "A" ? "B" : "A"
            do {
                _ = try RecoverySecret(parsing: String(symbols))
            } catch {
                caught += 1
            }
            symbols[i] = original
        }
        XCTAssertGreaterThanOrEqual(caught, 35, "a 20-bit checksum catches (almost) every one-character typo")
        for bad in ["", "ABCD", String(repeating: "A", count: 35), String(repeating: "1", count: 36), String(repeating: "A", count: 37)] {
            XCTAssertThrowsError(try RecoverySecret(parsing: bad)) { XCTAssertEqual($0 as? RecoverySecretError, .malformed) }
        }
    }

    func testAWrappedKeyOpensOnlyWithItsSecretAndRevealsNoKey() throws {
        let key = try CacheKey.generate()
        let secret = try RecoverySecret.generate()
        let wrapped = try WrappedCacheKey.wrap(key, keyId: "key-1", secret: secret, iterations: 10_000)
        XCTAssertTrue(try wrapped.unwrap(with: secret).isEqual(to: key))

        let json = try JSONEncoder().encode(wrapped)
        let decoded = try JSONDecoder().decode(WrappedCacheKey.self, from: json)
        XCTAssertTrue(try decoded.unwrap(with: secret).isEqual(to: key), "the record survives its JSON")
        let hex = key.withHexDigits { String(decoding: $0, as: UTF8.self) }
        XCTAssertNil(String(decoding: json, as: UTF8.self).range(of: hex), "no key in the record")
        XCTAssertFalse(String(decoding: json, as: UTF8.self).contains(secret.formatted))

        XCTAssertThrowsError(try wrapped.unwrap(with: try RecoverySecret.generate())) { XCTAssertEqual($0 as? RecoverySecretError, .wrongSecret) }
        var otherId = wrapped
        otherId.keyId = "key-2"
        XCTAssertThrowsError(try otherId.unwrap(with: secret)) { XCTAssertEqual($0 as? RecoverySecretError, .wrongSecret, "the key id is bound in") }
        var damaged = wrapped
        damaged.sealed[0] ^= 1
        XCTAssertThrowsError(try damaged.unwrap(with: secret)) { XCTAssertEqual($0 as? RecoverySecretError, .wrongSecret) }
        for mangle in [{ (w: inout WrappedCacheKey) in w.format = "other" }, { $0.salt = Data([1]) }, { $0.iterations = 0 },
                       { $0.tag = Data() }, { $0.iterations = Int.max }] {
            var bad = wrapped
            mangle(&bad)
            XCTAssertThrowsError(try bad.unwrap(with: secret)) { XCTAssertEqual($0 as? RecoverySecretError, .unreadableWrapping) }
        }
        let again = try WrappedCacheKey.wrap(key, keyId: "key-1", secret: secret, iterations: 10_000)
        XCTAssertNotEqual(again.salt, wrapped.salt, "a fresh salt and nonce every time")
        XCTAssertNotEqual(again.sealed, wrapped.sealed)
    }

    func testTheDefaultKDFIsSlowOnPurpose() throws {
        let key = try CacheKey.generate()
        let secret = try RecoverySecret.generate()
        let wrapped = try WrappedCacheKey.wrap(key, keyId: "k", secret: secret)
        XCTAssertEqual(wrapped.iterations, WrappedCacheKey.defaultIterations)
        let started = ContinuousClock.now
        _ = try wrapped.unwrap(with: secret)
        let elapsed = ContinuousClock.now - started
        // Not a timing budget (benchmarks do that): a floor that fails if the KDF were skipped.
        XCTAssertGreaterThan(elapsed, .milliseconds(50), "each attempt pays the KDF")
    }
}
