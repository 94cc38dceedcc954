import Foundation
import VaultStore

/// Keeps the SDK's own blocked-users list (`blocked_users`, the cached page of
/// `BlockedUserRequest`) in step with the server: replaced at login and on each catch-up sync,
/// from every page of the users the logged-in user blocked.
final class BlockedUsersRefresh: Sendable {
    private let backend: any ChatBackend
    private let wireLimits: WireLimits
    private let session: VaultSession

    init(backend: any ChatBackend, wireLimits: WireLimits, session: VaultSession) {
        self.backend = backend
        self.wireLimits = wireLimits
        self.session = session
    }

    /// Pages asked for while refreshing: 1000 pages of 100 users. A server still paging beyond
    /// that (or handing back a cursor it gave before) is not trusted, and the old list stays.
    static let blockedRefreshPageLimit = 1000

    /// At login: the server session starts beside the cache open (see `login(userId:)`), so this
    /// waits for the open to settle, then refreshes. If the cache is not open by then (offline
    /// support unavailable), the list is left as it was until the next login or sync.
    func refreshAtLogin() async {
        guard let me = session.userId else { return }
        let deadline = ContinuousClock.now + .seconds(120)
        while session.userId == me, session.offlineState == .opening, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(2))
        }
        guard session.userId == me else { return }
        await refresh()
    }

    /// Replaces the cached blocked-users list with the server's, all pages of direction `.byMe`,
    /// in one transaction. On any failure (offline, a server error, a hostile page) the old list
    /// stays. A block or unblock that lands while the pages are fetched wins: the refresh notices
    /// the list changed under it and fetches again (up to three times).
    ///
    /// The catch-up sync calls this after each sweep.
    /// - Returns: whether the list was replaced.
    @discardableResult
    func refresh() async -> Bool {
        for _ in 0..<3 {
            guard let me = session.userId, let cache = session.openCache(of: me) else { return false }
            guard let revision = try? await cache.writer.run({ db in try BlockedUserRows.revision(db) }) else { return false }
            guard let rows = await fetchBlockedByMe() else { return false }
            let replaced = try? await cache.writer.run { db in
                try db.transaction { () throws -> Bool in
                    guard try BlockedUserRows.revision(db) == revision else { return false }
                    try BlockedUserRows.replace(with: rows, in: db)
                    return true
                }
            }
            guard let replaced else { return false }
            if replaced { return true }
        }
        return false
    }

    /// Every page of the users the logged-in user blocked, validated; nil on any failure.
    private func fetchBlockedByMe() async -> [BlockedUserRow]? {
        let decoder = WireDecoder(limits: wireLimits)
        var query = BlockedUserQuery()
        query.limit = 100
        query.direction = .byMe
        var rows: [BlockedUserRow] = []
        var seen = Set<String>()
        var cursors = Set<String>()
        for _ in 0..<Self.blockedRefreshPageLimit {
            guard let page = try? await backend.blockedUsers(query), page.items.count <= wireLimits.maxListCount else { return nil }
            for item in page.items {
                guard let user = try? decoder.user(item) else { return nil }
                if seen.insert(user.uid).inserted { rows.append(BlockedUserRow(uid: user.uid, wire: item)) }
            }
            guard let next = page.nextCursor else { return rows }
            guard cursors.insert(next).inserted else { return nil }
            query.cursor = next
        }
        return nil
    }
}

extension OfflineVault {
    /// Replaces the cached blocked-users list with the server's (see `BlockedUsersRefresh.refresh`).
    @discardableResult
    func refreshBlockedUsers() async -> Bool {
        await blockedUsers.refresh()
    }
}
