/// A position in a list kept in one order (conversations, threads): a page starts strictly after it.
protocol ListCursor: Sendable {
    /// Whether `self` comes later in the list than `other`.
    func isAfter(_ other: Self) -> Bool
}

extension ListCursor {
    /// The later of two positions (nil counts as the list's start).
    static func later(_ a: Self?, _ b: Self?) -> Self? {
        guard let a else { return b }
        guard let b else { return a }
        return a.isAfter(b) ? a : b
    }

    /// The latest position among `cursors`.
    static func last(of cursors: [Self]) -> Self? {
        cursors.max { $1.isAfter($0) }
    }
}

/// Where a two-phase list request continues: the cache and the server keep positions of their own.
/// Offline the cache keeps paging; a server page realigns both on its far edge, so the next cached
/// and server pages describe the same slice again.
struct SplitPaging<Cursor: ListCursor>: Sendable {
    /// The server's token for its next page (nil: its first page, or none left when `serverDone`).
    var serverToken: String?
    var serverDone = false
    /// Where the last server page ended (the start of the next server slice).
    var serverEdge: Cursor?
    /// Where the last page (cached or server) ended: the next cached page starts after it.
    var cacheEdge: Cursor?

    /// A server page arrived ending at `edge` (never before where it started), with the server's
    /// token for the page after it (nil: none left).
    mutating func serverPage(nextToken: String?, edge: Cursor?, start: Cursor?) {
        serverToken = nextToken
        serverDone = nextToken == nil
        serverPage(edge: edge, start: start)
    }

    /// A server page arrived ending at `edge`, from a server that pages by position rather than by
    /// token: both positions move there (never back before `start`, even when a hostile page holds
    /// items behind it).
    mutating func serverPage(edge: Cursor?, start: Cursor?) {
        let edge = Cursor.later(edge, start)
        serverEdge = edge
        cacheEdge = edge
    }

    /// Offline, a cached page ending at `edge` was shown: the cache moves on, the server does not.
    mutating func cachedPageOffline(edge: Cursor?) {
        cacheEdge = Cursor.later(edge, cacheEdge)
    }
}
