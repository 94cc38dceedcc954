import Synchronization
import VaultStore

/// The seeds' static spelling, for apps ported from that SDK: `CometChat.isOfflineEnabled()` and
/// friends forward to one shared `OfflineVault` the app installs at start-up.
///
///     CometChat.offlineVault = try OfflineVault(config: config, settings: settings)
///     CometChat.addOfflineCacheResetListener("RESET", observer)
///     if CometChat.isOfflineEnabled() { … }
///
/// Without an installed vault, offline is simply not active: `isOfflineEnabled()` is false, the
/// status reports nothing achieved, and the cache size is 0.
extension CometChat {
    private static let shared = Mutex<OfflineVault?>(nil)

    /// The vault the static functions forward to.
    public static var offlineVault: OfflineVault? {
        get { shared.withLock { $0 } }
        set { shared.withLock { $0 = newValue } }
    }

    public static func isOfflineEnabled() -> Bool {
        offlineVault?.isOfflineEnabled() ?? false
    }

    public static func getOfflineEncryptionStatus() -> [String: Any] {
        if let vault = offlineVault { return vault.getOfflineEncryptionStatus() }
        return OfflineEncryptionStatus(enabled: false, atRest: OfflineEncryptionTier.NONE, keyStorage: OfflineEncryptionTier.NONE,
                                       cipherAvailable: CipherEngine.current.isAvailable, cipher: nil, leakage: nil).dictionary
    }

    public static func getCacheSize() -> Int64 {
        offlineVault?.getCacheSize() ?? 0
    }

    public static func clearOfflineCache() {
        offlineVault?.clearOfflineCache()
    }

    public static func addOfflineCacheResetListener(_ id: String, _ listener: any OfflineCacheResetListener) {
        offlineVault?.addOfflineCacheResetListener(id, listener)
    }

    public static func removeOfflineCacheResetListener(_ id: String) {
        offlineVault?.removeOfflineCacheResetListener(id)
    }
}
