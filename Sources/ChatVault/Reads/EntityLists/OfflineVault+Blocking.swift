import Foundation
import VaultStore

/// `blockUsers` / `unblockUsers`: forwarded to the server, never queued. Once the server accepts,
/// the cached blocked-users list (the first cached page of `BlockedUserRequest`) changes too; a
/// refused or unanswered call changes nothing.
extension OfflineVault {
    /// Blocks users. The result maps each uid to `"success"` or `"fail"`; the users the server
    /// blocked join the cached blocked-users list before `onSuccess` runs.
    ///
    ///     vault.blockUsers(["spammer"], onSuccess: { result in print(result["spammer"] ?? "") },
    ///                      onError: { error in print(error?.errorCode ?? "") })
    ///
    /// Offline it fails with `ERROR_INTERNET_UNAVAILABLE` and changes nothing; with no answer,
    /// `ERROR_REQUEST_TIMEOUT` (the next refresh shows what the server did); a server's code passes
    /// through; nobody logged in: `ERROR_USER_NOT_LOGGED_IN`, before any server call.
    public func blockUsers(_ uids: [String], onSuccess: @escaping @Sendable ([String: Any]) -> Void,
                           onError: @escaping @Sendable (CometChatException?) -> Void) {
        deliverBlocking(onSuccess: onSuccess, onError: onError) { () async throws(CometChatException) -> [String: String] in
            try await self.blockUsers(uids)
        }
    }

    /// Unblocks users. The result maps each uid to `"success"` or `"fail"`; the users the server
    /// unblocked leave the cached blocked-users list before `onSuccess` runs.
    ///
    ///     vault.unblockUsers(["bob"], onSuccess: { _ in }, onError: { _ in })
    public func unblockUsers(_ uids: [String], onSuccess: @escaping @Sendable ([String: Any]) -> Void,
                             onError: @escaping @Sendable (CometChatException?) -> Void) {
        deliverBlocking(onSuccess: onSuccess, onError: onError) { () async throws(CometChatException) -> [String: String] in
            try await self.unblockUsers(uids)
        }
    }

    /// Blocks users (async form of `blockUsers(_:onSuccess:onError:)`).
    ///
    ///     let result = try await vault.blockUsers(["spammer"])   // ["spammer": "success"]
    ///
    /// - Throws: `ERROR_INTERNET_UNAVAILABLE` offline (nothing changed), or the server's error.
    public func blockUsers(_ uids: [String]) async throws(CometChatException) -> [String: String] {
        let accepted = try await changeBlocks(uids, block: true)
        let done = Set(accepted)
        if let me = userId, !accepted.isEmpty, let cache = openCache(of: me) {
            let rows = await profiles(of: accepted)
            _ = try? await cache.writer.run { db in try db.transaction { try BlockedUserRows.add(rows, in: db) } }
        }
        return Self.outcome(uids, done)
    }

    /// Unblocks users (async form of `unblockUsers(_:onSuccess:onError:)`).
    ///
    ///     let result = try await vault.unblockUsers(["bob"])     // ["bob": "success"]
    ///
    /// - Throws: `ERROR_INTERNET_UNAVAILABLE` offline (nothing changed), or the server's error.
    public func unblockUsers(_ uids: [String]) async throws(CometChatException) -> [String: String] {
        let accepted = try await changeBlocks(uids, block: false)
        if let me = userId, !accepted.isEmpty, let cache = openCache(of: me) {
            _ = try? await cache.writer.run { db in try db.transaction { try BlockedUserRows.remove(accepted, in: db) } }
        }
        return Self.outcome(uids, Set(accepted))
    }

    // MARK: Internals

    /// Asks the server; the uids it accepted, among those asked for (in the order asked).
    private func changeBlocks(_ uids: [String], block: Bool) async throws(CometChatException) -> [String] {
        guard userId != nil else { throw CometChatException(.userNotLoggedIn, "Nobody is logged in.") }
        let answer: [String: Bool]
        do {
            answer = block ? try await backend.blockUsers(uids) : try await backend.unblockUsers(uids)
        } catch {
            // No answer is not "no connection": the server may have acted on it.
            if error == .timedOut { throw CometChatException(.requestTimedOut, "The server did not answer; the change may have been made.") }
            throw Self.exception(for: error)
        }
        var seen = Set<String>()
        return uids.filter { answer[$0] == true && seen.insert($0).inserted }
    }

    /// The profiles of users just blocked, for the list; a user the server does not describe
    /// (or describes badly) is listed by uid alone.
    private func profiles(of uids: [String]) async -> [BlockedUserRow] {
        let decoder = WireDecoder(limits: wireLimits)
        var found: [String: BlockedUserRow] = [:]
        var start = 0
        while start < uids.count {
            let chunk = Array(uids[start..<min(start + 100, uids.count)])
            start += chunk.count
            var query = UserQuery()
            query.uids = chunk
            query.limit = chunk.count
            guard let page = try? await backend.users(query), page.items.count <= wireLimits.maxListCount else { continue }
            for item in page.items {
                if let user = try? decoder.user(item), chunk.contains(user.uid) {
                    found[user.uid] = BlockedUserRow(uid: user.uid, wire: item)
                }
            }
        }
        return uids.map { found[$0] ?? .bare($0) }
    }

    private static func outcome(_ uids: [String], _ done: Set<String>) -> [String: String] {
        var result: [String: String] = [:]
        for uid in uids { result[uid] = done.contains(uid) ? "success" : "fail" }
        return result
    }

    private func deliverBlocking(onSuccess: @escaping @Sendable ([String: Any]) -> Void,
                                 onError: @escaping @Sendable (CometChatException?) -> Void,
                                 _ body: @escaping @Sendable () async throws(CometChatException) -> [String: String]) {
        let executor = settings.callbackExecutor
        Task {
            do throws(CometChatException) {
                let result = try await body()
                executor.execute { onSuccess(result) }
            } catch {
                executor.execute { onError(error) }
            }
        }
    }
}
