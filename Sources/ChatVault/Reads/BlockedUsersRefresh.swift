/// Placeholder hook, replaced by the blocked-users work: refreshing the cached blocked-users list
/// at login and on each catch-up sync.
extension OfflineVault {
    func refreshBlockedUsersAtLogin() async {}
}
