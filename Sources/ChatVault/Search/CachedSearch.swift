/// How far the local search index of the open cache is built (issue 24). A cache opened with
/// messages the index does not hold yet (an existing cache, the first open after an upgrade, a
/// rebuilt index) is indexed in the background after ready; new messages are indexed as they are
/// written.
public struct SearchIndexProgress: Sendable, Equatable, CustomStringConvertible {
    /// Messages the index holds.
    public let indexedMessages: Int
    /// Messages in the cache.
    public let totalMessages: Int
    /// Every cached message is in the index.
    public let isComplete: Bool

    /// A progress report (the engine makes them; tests and tools compare with them).
    public init(indexedMessages: Int, totalMessages: Int, isComplete: Bool) {
        self.indexedMessages = indexedMessages
        self.totalMessages = totalMessages
        self.isComplete = isComplete
    }

    /// 0…1.
    public var fraction: Double {
        isComplete || totalMessages <= 0 ? 1 : min(1, Double(max(0, indexedMessages)) / Double(totalMessages))
    }

    /// "complete (N messages)" or "building (I of N messages)".
    public var description: String {
        isComplete ? "complete (\(totalMessages) messages)" : "building (\(indexedMessages) of \(totalMessages) messages)"
    }
}

/// Hears the background build of the search index. Registered by id with
/// `addSearchIndexListener`, held weakly; callbacks arrive on the callback executor.
///
///     final class IndexBadge: SearchIndexListener {
///         func onSearchIndexProgress(_ progress: SearchIndexProgress) { bar.fraction = progress.fraction }
///     }
public protocol SearchIndexListener: AnyObject, Sendable {
    /// The build advanced (every few hundred messages) or completed (`progress.isComplete`).
    func onSearchIndexProgress(_ progress: SearchIndexProgress)
}

/// The order of search results.
public enum CachedSearchOrder: Sendable, Equatable {
    /// Newest first (by `sentAt`).
    case newestFirst
    /// Oldest first.
    case oldestFirst
    /// Best match first: more of the query's words, and rarer ones, in a shorter text (BM25 over
    /// the index's counts); ties newest first.
    case relevance
}

/// Where the next page of a search starts: from `CachedSearchPage.nextCursor`, for the same query
/// and options. Opaque.
public struct CachedSearchCursor: Sendable, Equatable {
    let sentAt: Int64
    let rowId: Int64
    let score: Double
}

/// What a local search looks in and how its results come.
///
///     var options = CachedSearchOptions()
///     options.conversation = .group("hiking")
///     options.limit = 20
public struct CachedSearchOptions: Sendable, Equatable {
    /// Only this conversation (a user's or a group's); nil: every cached conversation.
    public var conversation: MessageScope?
    /// Only messages of these categories (`"message"`, `"custom"`, …); empty: any.
    public var categories: [String] = []
    /// Only messages of these types (`"text"`, `"image"`, `"file"`, …); empty: any.
    public var types: [String] = []
    /// Only messages sent by this user.
    public var senderUid: String?
    /// Only messages sent at or after this time (seconds since 1970).
    public var sentAfter: Int?
    /// Only messages sent before this time (seconds since 1970).
    public var sentBefore: Int?
    /// Newest first unless asked otherwise.
    public var order: CachedSearchOrder = .newestFirst
    /// Results per page, 1…100 (values outside are clamped).
    public var limit: Int = 20
    /// Where to go on from (`CachedSearchPage.nextCursor`); nil for the first page.
    public var cursor: CachedSearchCursor?

    /// Every conversation, newest first, 20 per page.
    public init() {}
}

/// One message a local search found.
public struct CachedSearchHit: Sendable {
    /// The message as a read delivers it (`localPath` set on cached attachments).
    public let message: BaseMessage
    /// What of the message was searched: a text message's text, a media message's caption and
    /// file names (one per line), a custom message's `conversationText`.
    public let text: String
    /// Where the query's words are in `text`, in order, for highlighting.
    public let matches: [Range<String.Index>]
    /// A short excerpt of `text` around the first match (about 12 words, `…` where cut).
    public let snippet: String
    /// Where the query's words are in `snippet`.
    public let snippetMatches: [Range<String.Index>]
}

/// A page of local search results.
public struct CachedSearchPage: Sendable {
    /// The messages found, in the order asked.
    public let hits: [CachedSearchHit]
    /// Where the next page starts; nil when this was the last.
    public let nextCursor: CachedSearchCursor?
    /// Whether every cached message was in the index when the search ran. While the background
    /// build is under way, older messages may be missing from the results.
    public let indexComplete: Bool
    /// How far the index was built.
    public let indexProgress: SearchIndexProgress
}
