internal import CCrypto

/// OpenSSL stays up until the process is gone. Its first initialisation would register an
/// `atexit` handler that frees its state while other threads (SQLCipher's codec on a
/// connection's queue, a key check) may still be inside it: a process exiting with a cache open
/// could crash in libcrypto. Every entry into libcrypto from ChatVault (keys, key checks,
/// database connections) calls `ensure()` first, so OpenSSL is initialised without that handler.
package enum OpenSSLLifetime {
    private static let initialised: Bool = chatvault_openssl_init_without_atexit() == 1

    /// Initialises OpenSSL without its exit handler (once; later calls cost a load).
    @discardableResult
    package static func ensure() -> Bool { initialised }
}
