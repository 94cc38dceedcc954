public import VaultStore

/// Told when the offline cache was reset: set aside because its key was lost or wrong, it was
/// damaged, a failure escalated, or the encryption setting changed (then migrated, with
/// `pendingMessagesLost == 0`).
///
/// Fires once per reset, through the callback executor, after the new cache is ready and before any
/// read is served from it. `pendingMessagesLost` is exact when the old outbox could be read or
/// salvaged, else `CometChat.offlinePendingCountUnknown` (-1).
///
///     final class ResetObserver: OfflineCacheResetListener {
///         func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) {
///             showBanner("Offline history was reset (\(reason))")
///         }
///     }
///     vault.addOfflineCacheResetListener("RESET", observer)   // held weakly: keep `observer`
public protocol OfflineCacheResetListener: AnyObject, Sendable {
    /// The cache was reset for `reason`; `pendingMessagesLost` unsent messages were lost with it
    /// (`CometChat.offlinePendingCountUnknown`, -1, when the number is unknown).
    /// `isOfflineEnabled()` is false during the call; the new cache serves once it returns.
    func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int)
}

extension OfflineCacheResetListener {
    /// Optional, as in the seeds.
    public func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) {}
}
