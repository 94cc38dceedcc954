import Foundation
import XCTest
@testable import VaultKeys

final class CacheKeyTests: XCTestCase {
    private func hex(_ key: CacheKey) -> [UInt8] {
        key.withHexDigits { Array($0) }
    }

    func testTwoGeneratedKeysDiffer() throws {
        let a = try CacheKey.generate()
        let b = try CacheKey.generate()
        XCTAssertFalse(a.isEqual(to: b))
        XCTAssertNotEqual(hex(a), hex(b))
        XCTAssertTrue(a.isEqual(to: a))
    }

    func testHexDigitsAreSixtyFourLowercaseDigitsAndRoundTrip() throws {
        let key = try CacheKey.generate()
        let digits = hex(key)
        XCTAssertEqual(digits.count, 64)
        XCTAssertTrue(digits.allSatisfy { Array("0123456789abcdef".utf8).contains($0) })
        let parsed = try digits.withUnsafeBytes { try CacheKey.fromHex($0) }
        XCTAssertTrue(parsed.isEqual(to: key))
    }

    func testUppercaseHexIsAccepted() throws {
        let key = try CacheKey.generate()
        let upper = hex(key).map { $0 >= UInt8(ascii: "a") ? $0 - 32 : $0 }
        XCTAssertTrue(try upper.withUnsafeBytes { try CacheKey.fromHex($0) }.isEqual(to: key))
    }

    func testHexOfTheWrongLengthIsRejected() {
        for count in [0, 2, 62, 63, 65, 66] {
            let bytes = [UInt8](repeating: UInt8(ascii: "0"), count: count)
            XCTAssertThrowsError(try bytes.withUnsafeBytes { try CacheKey.fromHex($0) }, "\(count) digits") { error in
                XCTAssertEqual(error as? KeyMaterialError, .wrongLength(count / 2))
            }
        }
    }

    func testSixtyFourNonHexBytesAreRejectedBeforeTheKeyIsBuilt() {
        // The Secret Service store's check (CacheKey.fromHex itself is not called with these: see
        // SecretServiceKeyStore.parseKey).
        var notHex = [UInt8](repeating: UInt8(ascii: "a"), count: 64)
        notHex[17] = UInt8(ascii: "g")
        var space = [UInt8](repeating: UInt8(ascii: "0"), count: 64)
        space[63] = UInt8(ascii: " ")
        for bytes in [notHex, space, [UInt8](repeating: 0, count: 64)] {
            XCTAssertThrowsError(try bytes.withUnsafeBytes { try SecretServiceKeyStore.parseKey($0) }) { error in
                XCTAssertEqual(error as? KeyMaterialError, .malformed)
            }
        }
    }

    func testFromHexRejectsNonHexDigitsWithoutCrashing() {
        // A throwing fill used to free the key page twice (once in init, once in deinit).
        var notHex = [UInt8](repeating: UInt8(ascii: "a"), count: 64)
        notHex[40] = UInt8(ascii: "z")
        for _ in 0..<100 {
            XCTAssertThrowsError(try notHex.withUnsafeBytes { try CacheKey.fromHex($0) }) { error in
                XCTAssertEqual(error as? KeyMaterialError, .malformed)
            }
        }
    }

    func testCopyingNeedsExactlyThirtyTwoBytes() throws {
        XCTAssertThrowsError(try [UInt8](repeating: 1, count: 31).withUnsafeBytes { try CacheKey.copying($0) }) { error in
            XCTAssertEqual(error as? KeyMaterialError, .wrongLength(31))
        }
        let bytes = (0..<32).map { UInt8($0) }
        let key = try bytes.withUnsafeBytes { try CacheKey.copying($0) }
        XCTAssertEqual(key.withUnsafeBytes { Array($0) }, bytes)
        XCTAssertEqual(String(decoding: hex(key), as: UTF8.self),
                       "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
    }

    func testRawKeyLiteralIsSQLCiphersBlobForm() throws {
        let key = try [UInt8](repeating: 0xab, count: 32).withUnsafeBytes { try CacheKey.copying($0) }
        let literal = key.withRawKeyLiteral { String(decoding: $0, as: UTF8.self) }
        XCTAssertEqual(literal, "x'" + String(repeating: "ab", count: 32) + "'")
    }

    func testDescriptionsNeverShowTheKey() throws {
        let key = try CacheKey.generate()
        let digits = String(decoding: hex(key), as: UTF8.self)
        var dumped = ""
        dump(key, to: &dumped)
        for text in [key.description, key.debugDescription, "\(key)", String(reflecting: key), dumped,
                     "\(KeyLookup.found(key, keyId: "k"))", String(reflecting: KeyLookup.found(key, keyId: "k"))] {
            XCTAssertFalse(text.contains(digits.prefix(8)), text)
        }
        XCTAssertEqual(key.description, "CacheKey(<redacted>)")
        XCTAssertTrue(Mirror(reflecting: key).children.isEmpty)
    }

    func testCheckValueIsStablePerCacheIdAndDiffersAcrossKeysAndCacheIds() throws {
        let key = try CacheKey.generate()
        let other = try CacheKey.generate()
        let check = key.checkValue(cacheId: "cache-1")
        XCTAssertEqual(check.count, 64)
        XCTAssertEqual(check, key.checkValue(cacheId: "cache-1"))
        let copy = try hex(key).withUnsafeBytes { try CacheKey.fromHex($0) }
        XCTAssertEqual(copy.checkValue(cacheId: "cache-1"), check, "the same key material gives the same check")
        XCTAssertNotEqual(key.checkValue(cacheId: "cache-2"), check)
        XCTAssertNotEqual(other.checkValue(cacheId: "cache-1"), check)
        XCTAssertFalse(check.contains(String(decoding: hex(key), as: UTF8.self).prefix(16)))
    }

    func testKeyMaterialErrorsCarryNoMaterial() {
        XCTAssertEqual(KeyMaterialError.malformed.description, "key material is malformed")
        XCTAssertTrue(KeyMaterialError.wrongLength(31).description.contains("31"))
    }
}
