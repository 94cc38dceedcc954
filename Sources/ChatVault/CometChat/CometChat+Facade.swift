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

    /// Whether offline support is running on the shared vault (see
    /// `OfflineVault.isOfflineEnabled()`); false without one.
    public static func isOfflineEnabled() -> Bool {
        offlineVault?.isOfflineEnabled() ?? false
    }

    /// The shared vault's encryption status, the seeds' six keys (see
    /// `OfflineVault.getOfflineEncryptionStatus()`); without a vault, nothing achieved (`atRest`
    /// and `keyStorage` `NONE`, `enabled` false).
    public static func getOfflineEncryptionStatus() -> [String: Any] {
        if let vault = offlineVault { return vault.getOfflineEncryptionStatus() }
        return OfflineEncryptionStatus(enabled: false, atRest: OfflineEncryptionTier.NONE, keyStorage: OfflineEncryptionTier.NONE,
                                       cipherAvailable: CipherEngine.current.isAvailable, cipher: nil, leakage: nil).dictionary
    }

    /// Bytes on disk of the shared vault's cache (database, WAL, media); 0 without a vault. Reads
    /// the disk: call it off the main thread.
    public static func getCacheSize() -> Int64 {
        offlineVault?.getCacheSize() ?? 0
    }

    /// Wipes the shared vault's cache, failing its unsent messages `.discarded` (see
    /// `OfflineVault.clearOfflineCache()`); does nothing without a vault.
    public static func clearOfflineCache() {
        offlineVault?.clearOfflineCache()
    }

    /// Registers a reset listener on the shared vault (held weakly; one per id); does nothing
    /// without a vault.
    public static func addOfflineCacheResetListener(_ id: String, _ listener: any OfflineCacheResetListener) {
        offlineVault?.addOfflineCacheResetListener(id, listener)
    }

    /// Removes the shared vault's reset listener registered under `id`, if any.
    public static func removeOfflineCacheResetListener(_ id: String) {
        offlineVault?.removeOfflineCacheResetListener(id)
    }
}
