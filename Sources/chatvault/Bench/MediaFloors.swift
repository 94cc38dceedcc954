import CCrypto
import Foundation

/// The floors of `chatvault bench media`'s download budget, measured in the same process and run
/// as the downloads (shared/reference/performance-budget.md, revised 2026-12-04): what encrypting
/// a cached file must add to a plaintext download at the very least.
///
/// - `cipher`: AES-256-GCM of 1 MiB in one call (OpenSSL's EVP, a random key and nonce, the tag
///   taken), into a buffer allocated beforehand: the cipher alone, no file, no framing.
/// - `viewWrite`: 1 MiB written to a new file in the views' directory (a tmpfs: `/dev/shm` as the
///   benchmark sets it up) and closed, no `fsync` (views skip it); the file is removed untimed.
struct MediaFloors {
    let bytes: Int
    let directory: String
    private let plain: [UInt8]
    private var sealed: [UInt8]
    private var key = [UInt8](repeating: 0, count: 32)
    private var nonce = [UInt8](repeating: 0, count: 12)
    private var serial = 0

    init(bytes: Int, directory: String) throws {
        self.bytes = bytes
        self.directory = directory
        plain = [UInt8](MediaBenchmark.pattern(7).prefix(bytes))
        sealed = [UInt8](repeating: 0, count: bytes + 16)
        // As the library does before any other use (no atexit teardown under other threads).
        _ = chatvault_openssl_init_without_atexit()
        guard RAND_bytes(&key, Int32(key.count)) == 1, RAND_bytes(&nonce, Int32(nonce.count)) == 1 else {
            throw CLIError.failure("cannot draw a key for the AES-256-GCM floor")
        }
    }

    /// Milliseconds for one AES-256-GCM encryption of `bytes` (tag included).
    mutating func cipherMs() throws -> Double {
        guard let context = EVP_CIPHER_CTX_new() else { throw CLIError.failure("cannot make an OpenSSL cipher context") }
        defer { EVP_CIPHER_CTX_free(context) }
        let clock = ContinuousClock()
        let start = clock.now
        let count = plain.count
        let ok = sealed.withUnsafeMutableBufferPointer { out -> Bool in
            guard let base = out.baseAddress, EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1 else { return false }
            var length: Int32 = 0
            guard EVP_EncryptUpdate(context, base, &length, plain, Int32(count)) == 1 else { return false }
            var written = Int(length)
            guard EVP_EncryptFinal_ex(context, base + written, &length) == 1 else { return false }
            written += Int(length)
            return written == count && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, 16, base + written) == 1
        }
        let elapsed = (clock.now - start).milliseconds
        guard ok else { throw CLIError.failure("AES-256-GCM failed in the media floor") }
        return elapsed
    }

    /// Milliseconds to write `bytes` to a new file in `directory` and close it (no fsync).
    mutating func viewWriteMs() throws -> Double {
        serial += 1
        let path = "\(directory)/floor-\(serial).bin"
        let clock = ContinuousClock()
        let start = clock.now
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CLIError.failure("cannot create a file in the views' directory (errno \(errno))") }
        var done = 0
        let failed = plain.withUnsafeBytes { raw -> Bool in
            while done < raw.count {
                let n = write(fd, raw.baseAddress! + done, raw.count - done)
                if n < 0 { if errno == EINTR { continue }; return true }
                done += n
            }
            return false
        }
        close(fd)
        let elapsed = (clock.now - start).milliseconds
        unlink(path)
        guard !failed else { throw CLIError.failure("writing the view floor failed (errno \(errno))") }
        return elapsed
    }
}
