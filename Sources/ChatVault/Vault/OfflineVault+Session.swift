/// What the engine does once a user's server session has started (after `login`), beside the
/// cache. Each capability that keeps server-derived state fresh at login hooks in here.
extension OfflineVault {
    func sessionStarted() async {
        await refreshBlockedUsersAtLogin()
    }
}
