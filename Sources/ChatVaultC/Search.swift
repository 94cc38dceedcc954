public import CChatVault
import ChatVault
import Foundation
import Synchronization

/// `cv_search_cursor`: where the next page of a search starts (the Swift cursor, an opaque value).
final class SearchCursorBox: Sendable {
    let cursor: CachedSearchCursor
    init(_ cursor: CachedSearchCursor) { self.cursor = cursor }
}

/// `cv_search_options`: the Swift options, changed by the setters (from any thread), copied by a search.
final class SearchOptionsBox: Sendable {
    let options = Mutex(CachedSearchOptions())
}

/// `cv_search_page`: a page as C reads it. Each hit's matches are converted once, from ranges of
/// String indices to UTF-8 byte offsets; its message is rendered as JSON when asked for.
final class SearchPageBox: Sendable {
    struct Hit: Sendable {
        let message: BaseMessage
        let text: String
        let snippet: String
        let textMatches: [cv_search_match]
        let snippetMatches: [cv_search_match]
    }

    let hits: [Hit]
    let next: CachedSearchCursor?
    let progress: SearchIndexProgress

    init(_ page: CachedSearchPage) {
        hits = page.hits.map { hit in
            Hit(message: hit.message, text: hit.text, snippet: hit.snippet,
                textMatches: Self.bytes(hit.matches, in: hit.text), snippetMatches: Self.bytes(hit.snippetMatches, in: hit.snippet))
        }
        next = page.nextCursor
        progress = page.indexProgress
    }

    /// Ranges of `text`'s indices as (byte start, byte length) in its UTF-8.
    static func bytes(_ ranges: [Range<String.Index>], in text: String) -> [cv_search_match] {
        let utf8 = text.utf8
        return ranges.map { r in
            let start = utf8.distance(from: utf8.startIndex, to: r.lowerBound)
            return cv_search_match(start: start, length: utf8.distance(from: r.lowerBound, to: r.upperBound))
        }
    }
}

let searchCursors = HandleTable<SearchCursorBox>(tag: 0x5d)
let searchOptions = HandleTable<SearchOptionsBox>(tag: 0x5e)
let searchPages = HandleTable<SearchPageBox>(tag: 0x5f)

/// The C enums of search, checked (a C enum may hold any integer).
enum CSearchEnums {
    static func order(_ order: cv_search_order) -> CachedSearchOrder? {
        switch order.rawValue {
        case CV_SEARCH_ORDER_NEWEST_FIRST.rawValue: return .newestFirst
        case CV_SEARCH_ORDER_OLDEST_FIRST.rawValue: return .oldestFirst
        case CV_SEARCH_ORDER_RELEVANCE.rawValue: return .relevance
        default: return nil
        }
    }
}

/// The most categories or types one option takes (a list this long is a mistake, not a filter).
private let maxListed = 100

/// A NULL-terminated array of non-empty UTF-8 strings (nil for a refused one; [] for NULL).
private func strings(_ array: UnsafePointer<UnsafePointer<CChar>?>?) -> [String]? {
    guard let array else { return [] }
    var out: [String] = []
    var i = 0
    while let item = array[i] {
        guard out.count < maxListed, let s = text(item), !s.isEmpty else { return nil }
        out.append(s)
        i += 1
    }
    return out
}

/// Outputs of a progress report (each may be NULL).
private func report(_ p: SearchIndexProgress, _ indexed: UnsafeMutablePointer<Int64>?, _ total: UnsafeMutablePointer<Int64>?,
                    _ complete: UnsafeMutablePointer<Bool>?) {
    indexed?.pointee = Int64(p.indexedMessages)
    total?.pointee = Int64(p.totalMessages)
    complete?.pointee = p.isComplete
}

// MARK: cursors

@c(cv_search_cursor_copy)
public func cvSearchCursorCopy(_ cursor: OpaquePointer?, _ out: ErrorOut) -> OpaquePointer? {
    guard let box = searchCursors.get(cursor) else { CError.invalid(out, "not a search cursor handle"); return nil }
    return searchCursors.insert(SearchCursorBox(box.cursor))
}

@c(cv_search_cursor_free)
public func cvSearchCursorFree(_ cursor: OpaquePointer?) {
    _ = searchCursors.remove(cursor)
}

// MARK: options

@c(cv_search_options_new)
public func cvSearchOptionsNew() -> OpaquePointer? {
    searchOptions.insert(SearchOptionsBox())
}

@c(cv_search_options_free)
public func cvSearchOptionsFree(_ options: OpaquePointer?) {
    _ = searchOptions.remove(options)
}

/// A setter: the options, or false with the argument error.
private func change(_ options: OpaquePointer?, _ out: ErrorOut, _ body: (inout CachedSearchOptions) -> Void) -> Bool {
    guard let box = searchOptions.get(options) else { CError.invalid(out, "not a search options handle"); return false }
    box.options.withLock { body(&$0) }
    return true
}

@c(cv_search_options_set_conversation)
public func cvSearchOptionsSetConversation(_ options: OpaquePointer?, _ type: cv_receiver_type, _ id: UnsafePointer<CChar>?,
                                           _ out: ErrorOut) -> Bool {
    guard searchOptions.get(options) != nil else { CError.invalid(out, "not a search options handle"); return false }
    guard let id else { return change(options, out) { $0.conversation = nil } }
    guard let id = text(id), !id.isEmpty else { CError.invalid(out, "id must be NULL or a UTF-8 string"); return false }
    guard let scope = CEnums.scope(type, id) else { CError.invalid(out, "type is not a cv_receiver_type"); return false }
    return change(options, out) { $0.conversation = scope }
}

@c(cv_search_options_set_sender)
public func cvSearchOptionsSetSender(_ options: OpaquePointer?, _ uid: UnsafePointer<CChar>?, _ out: ErrorOut) -> Bool {
    guard searchOptions.get(options) != nil else { CError.invalid(out, "not a search options handle"); return false }
    guard let uid else { return change(options, out) { $0.senderUid = nil } }
    guard let sender = text(uid), !sender.isEmpty else { CError.invalid(out, "uid must be NULL or a UTF-8 string"); return false }
    return change(options, out) { $0.senderUid = sender }
}

@c(cv_search_options_set_categories)
public func cvSearchOptionsSetCategories(_ options: OpaquePointer?, _ categories: UnsafePointer<UnsafePointer<CChar>?>?,
                                         _ out: ErrorOut) -> Bool {
    guard searchOptions.get(options) != nil else { CError.invalid(out, "not a search options handle"); return false }
    guard let list = strings(categories) else {
        CError.invalid(out, "categories must be at most \(maxListed) non-empty UTF-8 strings")
        return false
    }
    return change(options, out) { $0.categories = list }
}

@c(cv_search_options_set_types)
public func cvSearchOptionsSetTypes(_ options: OpaquePointer?, _ types: UnsafePointer<UnsafePointer<CChar>?>?, _ out: ErrorOut) -> Bool {
    guard searchOptions.get(options) != nil else { CError.invalid(out, "not a search options handle"); return false }
    guard let list = strings(types) else { CError.invalid(out, "types must be at most \(maxListed) non-empty UTF-8 strings"); return false }
    return change(options, out) { $0.types = list }
}

@c(cv_search_options_set_time_range)
public func cvSearchOptionsSetTimeRange(_ options: OpaquePointer?, _ sentAfter: Int64, _ sentBefore: Int64, _ out: ErrorOut) -> Bool {
    guard searchOptions.get(options) != nil else { CError.invalid(out, "not a search options handle"); return false }
    guard sentAfter >= 0, sentBefore >= 0 else { CError.invalid(out, "sent_after and sent_before are seconds since 1970 (0: no bound)"); return false }
    return change(options, out) {
        $0.sentAfter = sentAfter > 0 ? Int(sentAfter) : nil
        $0.sentBefore = sentBefore > 0 ? Int(sentBefore) : nil
    }
}

@c(cv_search_options_set_order)
public func cvSearchOptionsSetOrder(_ options: OpaquePointer?, _ order: cv_search_order, _ out: ErrorOut) -> Bool {
    guard searchOptions.get(options) != nil else { CError.invalid(out, "not a search options handle"); return false }
    guard let order = CSearchEnums.order(order) else { CError.invalid(out, "order is not a cv_search_order"); return false }
    return change(options, out) { $0.order = order }
}

@c(cv_search_options_set_limit)
public func cvSearchOptionsSetLimit(_ options: OpaquePointer?, _ limit: Int32, _ out: ErrorOut) -> Bool {
    guard searchOptions.get(options) != nil else { CError.invalid(out, "not a search options handle"); return false }
    guard (1...100).contains(limit) else { CError.invalid(out, "limit is 1 to 100"); return false }
    return change(options, out) { $0.limit = Int(limit) }
}

@c(cv_search_options_set_cursor)
public func cvSearchOptionsSetCursor(_ options: OpaquePointer?, _ cursor: OpaquePointer?, _ out: ErrorOut) -> Bool {
    guard searchOptions.get(options) != nil else { CError.invalid(out, "not a search options handle"); return false }
    guard let cursor else { return change(options, out) { $0.cursor = nil } }
    guard let box = searchCursors.get(cursor) else { CError.invalid(out, "not a search cursor handle"); return false }
    return change(options, out) { $0.cursor = box.cursor }
}

// MARK: pages

@c(cv_search_page_free)
public func cvSearchPageFree(_ page: OpaquePointer?) {
    _ = searchPages.remove(page)
}

@c(cv_search_page_get_hit_count)
public func cvSearchPageGetHitCount(_ page: OpaquePointer?) -> Int {
    searchPages.get(page)?.hits.count ?? 0
}

/// Hit `index` of a page, or nil with the argument error.
private func hit(_ page: OpaquePointer?, _ index: Int, _ out: ErrorOut) -> SearchPageBox.Hit? {
    guard let box = searchPages.get(page) else { CError.invalid(out, "not a search page handle"); return nil }
    guard index >= 0, index < box.hits.count else { CError.invalid(out, "index is past the page's last hit"); return nil }
    return box.hits[index]
}

@c(cv_search_page_get_message)
public func cvSearchPageGetMessage(_ page: OpaquePointer?, _ index: Int, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let hit = hit(page, index, out) else { return nil }
    return owned(CModels.messageText(hit.message))
}

@c(cv_search_page_get_text)
public func cvSearchPageGetText(_ page: OpaquePointer?, _ index: Int, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let hit = hit(page, index, out) else { return nil }
    return owned(hit.text)
}

@c(cv_search_page_get_snippet)
public func cvSearchPageGetSnippet(_ page: OpaquePointer?, _ index: Int, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let hit = hit(page, index, out) else { return nil }
    return owned(hit.snippet)
}

@c(cv_search_page_get_matches)
public func cvSearchPageGetMatches(_ page: OpaquePointer?, _ index: Int, _ field: cv_search_field,
                                   _ matchesOut: UnsafeMutablePointer<UnsafeMutablePointer<cv_search_match>?>?,
                                   _ countOut: UnsafeMutablePointer<Int>?, _ out: ErrorOut) -> Bool {
    matchesOut?.pointee = nil
    countOut?.pointee = 0
    guard let hit = hit(page, index, out) else { return false }
    let matches: [cv_search_match]
    switch field.rawValue {
    case CV_SEARCH_FIELD_TEXT.rawValue: matches = hit.textMatches
    case CV_SEARCH_FIELD_SNIPPET.rawValue: matches = hit.snippetMatches
    default: CError.invalid(out, "field is not a cv_search_field"); return false
    }
    guard let matchesOut, let countOut else { CError.invalid(out, "matches_out and count_out must not be NULL"); return false }
    guard !matches.isEmpty else { return true }
    guard let raw = malloc(matches.count * MemoryLayout<cv_search_match>.stride) else {
        CError.set(out, domain: CError.library, code: "ERR_RESOURCES", message: "out of memory")
        return false
    }
    let array = raw.bindMemory(to: cv_search_match.self, capacity: matches.count)
    array.initialize(from: matches, count: matches.count)
    matchesOut.pointee = array
    countOut.pointee = matches.count
    return true
}

@c(cv_search_page_get_next_cursor)
public func cvSearchPageGetNextCursor(_ page: OpaquePointer?, _ out: ErrorOut) -> OpaquePointer? {
    guard let box = searchPages.get(page) else { CError.invalid(out, "not a search page handle"); return nil }
    return box.next.flatMap { searchCursors.insert(SearchCursorBox($0)) }
}

@c(cv_search_page_get_index_progress)
public func cvSearchPageGetIndexProgress(_ page: OpaquePointer?, _ indexed: UnsafeMutablePointer<Int64>?,
                                         _ total: UnsafeMutablePointer<Int64>?, _ complete: UnsafeMutablePointer<Bool>?,
                                         _ out: ErrorOut) -> Bool {
    guard let box = searchPages.get(page) else { CError.invalid(out, "not a search page handle"); return false }
    report(box.progress, indexed, total, complete)
    return true
}

// MARK: searching

/// One `cv_vault_search_cached_messages`: its callback, live until it answered (or the vault's
/// free), held in the vault's registration table as a download is (its id never handed to C).
final class SearchCallback: CListener, @unchecked Sendable {
    private let callback: cv_search_callback
    private let state: CCallbackState

    init(callback: cv_search_callback, userData: UnsafeMutableRawPointer?, destroy: cv_destroy_notify?) {
        self.callback = callback
        state = CCallbackState(userData: userData, destroy: destroy)
    }

    func register(with vault: OfflineVault, id: String) {}
    func unregister(from vault: OfflineVault, id: String) {}
    func end() { state.end() }

    /// The answer, on the dispatching thread: the page is made only for a callback that still runs
    /// (the callback owns it).
    func finish(_ result: Result<CachedSearchPage, CometChatException>) {
        guard state.isLive else { return }
        let userData = state.userData.pointer
        switch result {
        case .success(let page): callback(searchPages.insert(SearchPageBox(page)), nil, userData)
        case .failure(let error): CBorrow.error(error) { callback(nil, $0, userData) }
        }
    }
}

/// A search's query and options as C gave them, or nil with the argument error.
private func searchArguments(_ query: UnsafePointer<CChar>?, _ options: OpaquePointer?, _ out: ErrorOut) -> (String, CachedSearchOptions)? {
    guard let query = text(query) else { CError.invalid(out, "query must be a UTF-8 string"); return nil }
    guard let options else { return (query, CachedSearchOptions()) }
    guard let box = searchOptions.get(options) else { CError.invalid(out, "not a search options handle"); return nil }
    return (query, box.options.withLock { $0 })
}

@c(cv_vault_search_cached_messages)
public func cvVaultSearchCachedMessages(_ vault: OpaquePointer?, _ query: UnsafePointer<CChar>?, _ options: OpaquePointer?,
                                        _ callback: cv_search_callback?, _ userData: UnsafeMutableRawPointer?,
                                        _ destroy: cv_destroy_notify?, _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    guard let (query, options) = searchArguments(query, options, out) else { return false }
    guard let callback else { CError.invalid(out, "a search needs a callback"); return false }
    let search = SearchCallback(callback: callback, userData: userData, destroy: destroy)
    // Registered before the search starts: its answer (on the dispatching thread) always finds it.
    let id = box.add(search)
    // The box weakly, as a send's and a download's closures hold it (the engine holds them).
    box.vault.searchCachedMessages(query, options: options, onSuccess: { [weak box] page in
        search.finish(.success(page))
        _ = box?.remove(id)
    }, onError: { [weak box] error in
        search.finish(.failure(error))
        _ = box?.remove(id)
    })
    return true
}

@c(cv_vault_search_cached_messages_sync)
public func cvVaultSearchCachedMessagesSync(_ vault: OpaquePointer?, _ query: UnsafePointer<CChar>?, _ options: OpaquePointer?,
                                            _ out: ErrorOut) -> OpaquePointer? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard let (query, options) = searchArguments(query, options, out) else { return nil }
    let engine = box.vault
    let answer = waitDispatching(box.dispatcher) { () async -> Result<CachedSearchPage, CometChatException> in
        do throws(CometChatException) {
            return .success(try await engine.searchCachedMessages(query, options: options))
        } catch {
            return .failure(error)
        }
    }
    switch answer {
    case .success(let page): return searchPages.insert(SearchPageBox(page))
    case .failure(let error): CError.from(out, error); return nil
    }
}

// MARK: the index

@c(cv_vault_get_search_index_progress)
public func cvVaultGetSearchIndexProgress(_ vault: OpaquePointer?, _ indexed: UnsafeMutablePointer<Int64>?,
                                          _ total: UnsafeMutablePointer<Int64>?, _ complete: UnsafeMutablePointer<Bool>?,
                                          _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    guard let progress = box.vault.searchIndexProgress() else {
        CError.from(out, CometChatException(.offlineDisabled, "no cache is open"))
        return false
    }
    report(progress, indexed, total, complete)
    return true
}

@c(cv_vault_wait_for_search_index_sync)
public func cvVaultWaitForSearchIndexSync(_ vault: OpaquePointer?, _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    let engine = box.vault
    waitDispatching(box.dispatcher) { await engine.waitForSearchIndex() }
    return true
}

/// A C search index listener: the background build's progress.
final class SearchIndexCallback: SearchIndexListener, CListener, @unchecked Sendable {
    private let callback: cv_search_index_callback
    private let state: CCallbackState

    init(callback: cv_search_index_callback, userData: UnsafeMutableRawPointer?, destroy: cv_destroy_notify?) {
        self.callback = callback
        state = CCallbackState(userData: userData, destroy: destroy)
    }

    func register(with vault: OfflineVault, id: String) { vault.addSearchIndexListener(id, self) }
    func unregister(from vault: OfflineVault, id: String) { vault.removeSearchIndexListener(id) }
    func end() { state.end() }

    func onSearchIndexProgress(_ progress: SearchIndexProgress) {
        guard state.isLive else { return }
        callback(Int64(progress.indexedMessages), Int64(progress.totalMessages), progress.isComplete, state.userData.pointer)
    }
}

@c(cv_vault_add_search_index_listener)
public func cvVaultAddSearchIndexListener(_ vault: OpaquePointer?, _ callback: cv_search_index_callback?,
                                          _ userData: UnsafeMutableRawPointer?, _ destroy: cv_destroy_notify?,
                                          _ out: ErrorOut) -> UInt32 {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return 0 }
    guard let callback else { CError.invalid(out, "a listener needs a callback"); return 0 }
    return box.add(SearchIndexCallback(callback: callback, userData: userData, destroy: destroy))
}
