/// What the vault does with what the realtime link hands on: once a user's server session has
/// started (after `login`, beside the cache; each capability that keeps server-derived state
/// fresh at login hooks in here), each realtime event, and a connection that has held.
extension OfflineVault {
    func sessionStarted() async {
        await blockedUsers.refreshAtLogin()
    }

    /// The connection has held: flush the outbox (when auto-send is on), then catch up (the
    /// sweep waits for the flush, at most `SyncSettings.flushWait`). The sweep runs whether or
    /// not auto-send is on.
    func connectionBecameStable() {
        if config.autoSendPendingOnReconnect { outbox.requestPass(all: true) }
        if openCache != nil { sync.requestSweep() }
    }

}
