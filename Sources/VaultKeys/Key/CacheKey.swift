import Foundation
internal import CCrypto

/// A 256-bit cache key: 32 bytes from the OS CSPRNG, kept in locked memory, zeroed when released.
///
/// The key never appears in a description, a mirror, a log or an error:
///
///     let key = try CacheKey.generate()
///     print(key)          // CacheKey(<redacted>)
///
/// `CacheKey` is immutable after creation and safe to share between threads.
public final class CacheKey: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key length in bytes (AES-256).
    public static let byteCount = 32

    // One page, mlocked and excluded from core dumps where the kernel allows it.
    private let page: UnsafeMutableRawPointer
    private let pageSize: Int

    private init(filling fill: (UnsafeMutableRawBufferPointer) throws(KeyMaterialError) -> Void) throws(KeyMaterialError) {
        let size = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)
        guard let raw = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              raw != MAP_FAILED else {
            throw KeyMaterialError.outOfMemory
        }
        // Best effort: a failed mlock (RLIMIT_MEMLOCK) or madvise still leaves a working key.
        _ = mlock(raw, size)
        _ = madvise(raw, size, MADV_DONTDUMP)
        page = raw
        pageSize = size
        // Every stored property is set: if `fill` throws, Swift runs `deinit`, which wipes and
        // unmaps the page (doing it here too would unmap it twice).
        try fill(UnsafeMutableRawBufferPointer(start: raw, count: Self.byteCount))
    }

    deinit {
        OPENSSL_cleanse(page, pageSize)
        munlock(page, pageSize)
        munmap(page, pageSize)
    }

    /// A fresh key from OpenSSL's `RAND_bytes`, whose DRBG is seeded from the kernel (`getrandom`).
    package static func generate() throws(KeyMaterialError) -> CacheKey {
        OpenSSLLifetime.ensure()
        return try CacheKey { (buffer) throws(KeyMaterialError) in
            // OpenSSL 3's default DRBG is seeded from getrandom(2) and reseeds itself.
            guard let base = buffer.baseAddress,
                  RAND_bytes(base.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1 else {
                throw KeyMaterialError.randomSourceFailed
            }
        }
    }

    /// A key copied from exactly 32 bytes (a key read back from a store). The caller zeroes its source.
    public static func copying(_ bytes: UnsafeRawBufferPointer) throws(KeyMaterialError) -> CacheKey {
        guard bytes.count == byteCount, let source = bytes.baseAddress else {
            throw KeyMaterialError.wrongLength(bytes.count)
        }
        return try CacheKey { buffer in
            buffer.baseAddress!.copyMemory(from: source, byteCount: byteCount)
        }
    }

    /// A key parsed from 64 hexadecimal digits (the form the Secret Service item holds).
    /// The caller zeroes its source buffer.
    package static func fromHex(_ hex: UnsafeRawBufferPointer) throws(KeyMaterialError) -> CacheKey {
        guard hex.count == byteCount * 2 else { throw KeyMaterialError.wrongLength(hex.count / 2) }
        return try CacheKey { (buffer) throws(KeyMaterialError) in
            for i in 0..<byteCount {
                guard let hi = hexValue(hex[2 * i]), let lo = hexValue(hex[2 * i + 1]) else {
                    OPENSSL_cleanse(buffer.baseAddress, buffer.count)
                    throw KeyMaterialError.malformed
                }
                buffer[i] = hi << 4 | lo
            }
        }
    }

    /// Runs `body` with the 32 key bytes. Do not copy them out.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: page, count: Self.byteCount))
    }

    /// Runs `body` with the key as 64 lowercase hex digits in a buffer that is zeroed afterwards.
    package func withHexDigits<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withScratch(count: Self.byteCount * 2) { (scratch) throws(E) -> R in
            writeHex(into: scratch)
            return try body(UnsafeRawBufferPointer(scratch))
        }
    }

    /// Runs `body` with SQLCipher's raw-key literal `x'<64 hex>'` in a buffer zeroed afterwards.
    /// Passing this form to `sqlite3_key` skips the passphrase KDF entirely.
    package func withRawKeyLiteral<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withScratch(count: Self.byteCount * 2 + 3) { (scratch) throws(E) -> R in
            scratch[0] = UInt8(ascii: "x")
            scratch[1] = UInt8(ascii: "'")
            writeHex(into: UnsafeMutableRawBufferPointer(rebasing: scratch[2..<(2 + Self.byteCount * 2)]))
            scratch[scratch.count - 1] = UInt8(ascii: "'")
            return try body(UnsafeRawBufferPointer(scratch))
        }
    }

    /// Constant-time comparison of two keys.
    package func isEqual(to other: CacheKey) -> Bool {
        CRYPTO_memcmp(page, other.page, Self.byteCount) == 0
    }

    public var description: String { "CacheKey(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }

    private func writeHex(into out: UnsafeMutableRawBufferPointer) {
        let digits: StaticString = "0123456789abcdef"
        let bytes = UnsafeRawBufferPointer(start: page, count: Self.byteCount)
        digits.withUTF8Buffer { table in
            for (i, byte) in bytes.enumerated() {
                out[2 * i] = table[Int(byte >> 4)]
                out[2 * i + 1] = table[Int(byte & 0x0f)]
            }
        }
    }
}

/// Runs `body` with a scratch buffer that is zeroed and freed afterwards, whatever happens.
func withScratch<R, E: Error>(count: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 16)
    defer {
        OPENSSL_cleanse(scratch.baseAddress, count)
        scratch.deallocate()
    }
    return try body(scratch)
}

private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}

/// Why key material could not be made or read. Never carries the material itself.
public enum KeyMaterialError: Error, Equatable, Sendable, CustomStringConvertible {
    case randomSourceFailed
    case outOfMemory
    case wrongLength(Int)
    case malformed

    public var description: String {
        switch self {
        case .randomSourceFailed: return "the system random source failed"
        case .outOfMemory: return "could not allocate locked memory for a key"
        case .wrongLength(let n): return "key material has the wrong length (\(n) bytes, expected \(CacheKey.byteCount))"
        case .malformed: return "key material is malformed"
        }
    }
}
