import Foundation

/// Local search over every cached message (issue 24), beside the seeds' contract: a keyword
/// request (`set(searchKeyword:)`) is still the server's alone; this answers from the encrypted
/// cache, offline too.
///
///     var options = CachedSearchOptions()
///     options.conversation = .user("bob")
///     let page = try await vault.searchCachedMessages("train \"offline cache\" -windows", options: options)
///     for hit in page.hits { show(hit.message, excerpt: hit.snippet, highlight: hit.snippetMatches) }
///     if !page.indexComplete { showNote("Still indexing older messages") }
///
/// The query: words (all must match), `"phrases"`, `prefix*`, `-word` to exclude; case and
/// accents do not matter, CJK text is found by any run of its characters. Whatever is typed is
/// taken as words, never as operators; a query with nothing to find is refused with
/// `ERROR_INVALID_SEARCH_QUERY`.
extension OfflineVault {
    /// Searches the cached messages of the logged-in user.
    /// - Throws: `ERROR_INVALID_SEARCH_QUERY` (`details` says why), `ERROR_OFFLINE_DISABLED` when no
    ///   cache is open, `ERROR_OFFLINE_MESSAGE_PERSIST_FAILED` when the cache could not be read just
    ///   now (busy, an I/O error): nothing was changed, try again.
    public func searchCachedMessages(_ query: String, options: CachedSearchOptions = CachedSearchOptions()) async throws(CometChatException)
        -> CachedSearchPage {
        try await search.search(query, options: options)
    }

    /// Closure form of `searchCachedMessages(_:options:)`; callbacks on the callback executor.
    public func searchCachedMessages(_ query: String, options: CachedSearchOptions = CachedSearchOptions(),
                                     onSuccess: @escaping @Sendable (CachedSearchPage) -> Void,
                                     onError: @escaping @Sendable (CometChatException) -> Void) {
        let executor = settings.callbackExecutor
        Task.detached {
            do throws(CometChatException) {
                let page = try await self.searchCachedMessages(query, options: options)
                executor.execute { onSuccess(page) }
            } catch {
                executor.execute { onError(error) }
            }
        }
    }

    /// How far the search index of the open cache is built; nil when no cache is open.
    public func searchIndexProgress() -> SearchIndexProgress? {
        searchIndex.progress()
    }

    /// Waits until every cached message is in the search index (or the cache closes).
    public func waitForSearchIndex() async {
        await searchIndex.waitUntilBuilt()
    }

    /// Registers a listener of the index build (held weakly; one per id).
    public func addSearchIndexListener(_ id: String, _ listener: any SearchIndexListener) {
        searchIndex.listeners.add(id, listener)
    }

    /// Removes the listener registered under `id`, if any.
    public func removeSearchIndexListener(_ id: String) {
        searchIndex.listeners.remove(id)
    }
}

extension CometChat {
    /// `OfflineVault.searchCachedMessages(_:options:onSuccess:onError:)` on the installed vault.
    /// Without one, `onError` gets `ERROR_USER_NOT_LOGGED_IN` on the main queue.
    ///
    ///     CometChat.searchCachedMessages("pizza", onSuccess: { page in show(page.hits) }, onError: { print($0.errorCode) })
    public static func searchCachedMessages(_ query: String, options: CachedSearchOptions = CachedSearchOptions(),
                                            onSuccess: @escaping @Sendable (CachedSearchPage) -> Void,
                                            onError: @escaping @Sendable (CometChatException) -> Void) {
        guard let vault = offlineVault else {
            return CallbackExecutor.main.execute { onError(CometChatException(.userNotLoggedIn, "no OfflineVault: set CometChat.offlineVault")) }
        }
        vault.searchCachedMessages(query, options: options, onSuccess: onSuccess, onError: onError)
    }

    /// `OfflineVault.searchCachedMessages(_:options:)` on the installed vault.
    /// - Throws: as the vault's; `ERROR_USER_NOT_LOGGED_IN` without an installed vault.
    public static func searchCachedMessages(_ query: String, options: CachedSearchOptions = CachedSearchOptions()) async throws(CometChatException)
        -> CachedSearchPage {
        guard let vault = offlineVault else { throw CometChatException(.userNotLoggedIn, "no OfflineVault: set CometChat.offlineVault") }
        return try await vault.searchCachedMessages(query, options: options)
    }
}
