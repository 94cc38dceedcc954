import Foundation
import VaultStore

/// Answers a local search from the open cache (issue 24): the query parsed and escaped
/// (`SearchQuery`), the index asked on the reader connection (never the writer: a search does not
/// wait for ingest), the rows read and decoded as a read delivers them, `localPath` set, the
/// matches and a snippet computed in memory (`SearchHighlights`).
///
/// The SQL, newest first (`?` the query's MATCH, then each exclusion's):
///
///     SELECT <message columns>, m.row_id FROM messages m
///     WHERE m.row_id IN (SELECT docid FROM search_index WHERE search_index MATCH ?)
///       AND m.row_id NOT IN (SELECT docid FROM search_index WHERE search_index MATCH ?)
///       AND m.deleted_at = 0 AND <options> AND <after the cursor>
///     ORDER BY m.sent_at DESC, m.row_id DESC LIMIT ?
///
/// By relevance, each hit's BM25 score is computed from `matchinfo()` by the SQL function
/// `chatvault_rank` (defined on the reader when the cache is attached), and rows are ordered by it.
final class SearchEngine: Sendable {
    static let rankFunction = "chatvault_rank"
    static let maxLimit = 100

    private let session: VaultSession
    private let index: SearchIndex
    private let media: MediaCache
    private let wireLimits: WireLimits

    init(session: VaultSession, index: SearchIndex, media: MediaCache, wireLimits: WireLimits) {
        self.session = session
        self.index = index
        self.media = media
        self.wireLimits = wireLimits
    }

    /// Why a search could not run, before it reaches the cache.
    static func exception(for problem: SearchQuery.Problem) -> CometChatException {
        switch problem {
        case .empty:
            return CometChatException(.invalidSearchQuery, "The search has no words to look for.", details: "empty")
        case .onlyExclusions:
            return CometChatException(.invalidSearchQuery, "The search only excludes words: add a word to look for.", details: "onlyExclusions")
        case .tooLong(let limit):
            return CometChatException(.invalidSearchQuery, "The search is longer than \(limit) characters.", details: "tooLong")
        case .tooManyTerms(let limit):
            return CometChatException(.invalidSearchQuery, "The search has more than \(limit) words.", details: "tooManyTerms")
        }
    }

    func search(_ text: String, options: CachedSearchOptions) async throws(CometChatException) -> CachedSearchPage {
        let query: SearchQuery
        do {
            query = try SearchQuery(text)
        } catch {
            throw Self.exception(for: error)
        }
        guard let (me, cache) = session.current else {
            throw CometChatException(.offlineDisabled, "offline support is not active")
        }
        guard index.isKept(cache) else {
            throw CometChatException(.offlineMessagePersistFailed, "The search index is not available in this session. Try again after the next login.")
        }
        let limit = min(Self.maxLimit, max(1, options.limit))
        let decoder = WireDecoder(limits: wireLimits, trusted: true)
        let read: ([(BaseMessage, Int64, Double)], SearchIndexProgress)
        do {
            read = try await cache.reader.run { db in
                let rows = try Self.rows(query, options: options, limit: limit + 1, me: me, decoder: decoder, in: db)
                return (rows, try SearchIndexRows.quickProgress(in: db))
            }
        } catch {
            throw CometChatException(.offlineMessagePersistFailed, "The cache could not be searched just now. Try again.")
        }
        var rows = read.0
        let progress = read.1
        let more = rows.count > limit
        if more { rows.removeLast(rows.count - limit) }
        media.hydrate(rows.map(\.0))
        let needles = SearchHighlights.needles(query)
        let hits = rows.map { row -> CachedSearchHit in
            let text = SearchText.searchable(row.0)
            let matches = SearchHighlights.ranges(of: needles, in: text)
            let (snippet, snippetMatches) = SearchHighlights.snippet(of: text, matches: matches)
            return CachedSearchHit(message: row.0, text: text, matches: matches, snippet: snippet, snippetMatches: snippetMatches)
        }
        let next = more ? rows.last.map { CachedSearchCursor(sentAt: Int64($0.0.sentAt), rowId: $0.1, score: $0.2) } : nil
        return CachedSearchPage(hits: hits, nextCursor: next, indexComplete: progress.isComplete, indexProgress: progress)
    }

    /// Up to `limit` matching rows after the cursor, decoded, with their row ids and scores.
    static func rows(_ query: SearchQuery, options: CachedSearchOptions, limit: Int, me: String, decoder: WireDecoder,
                     in db: Database) throws -> [(BaseMessage, Int64, Double)] {
        // A frequent word is answered faster by walking the time index newest (or oldest) first
        // and stopping at the page's last hit than by reading every hit's row to sort them; a
        // rare one the other way round. One bounded count of the index's hits decides (bench
        // search: the common word 68 → 3 ms, the rare one stays 1.4 ms). Within one conversation
        // the conversation's index is walked anyway.
        var byTime = false
        if options.order != .relevance, options.conversation == nil {
            let hits = try db.scalarInt("SELECT count(*) FROM (SELECT docid FROM search_index WHERE search_index MATCH ? LIMIT \(timeWalkThreshold))",
                                        .text(query.match)) ?? 0
            byTime = hits >= Int64(timeWalkThreshold)
        }
        let (sql, args) = statement(query, options: options, limit: limit, me: me, walkTime: byTime)
        let stmt = try db.prepare(sql)
        try stmt.bind(args)
        let rowIdAt = Int32(MessageRow.read.count)
        var out: [(BaseMessage, Int64, Double)] = []
        while try stmt.step() {
            // A row that does not decode is left out, never the whole search.
            guard let message = try? MessageRows.decode(stmt, decoder) else { continue }
            out.append((message, stmt.int64(rowIdAt), options.order == .relevance ? stmt.double(rowIdAt + 1) : 0))
        }
        return out
    }

    /// From this many index hits on, a search without a conversation walks the time index.
    static let timeWalkThreshold = 256

    /// The statement for `query` and `options` with its arguments. `walkTime`: the hits are
    /// tested while `messages_by_time` is walked in the page's order (`+row_id` keeps SQLite from
    /// looking each hit up by its row id first).
    static func statement(_ query: SearchQuery, options: CachedSearchOptions, limit: Int, me: String,
                          walkTime: Bool = false) -> (String, [DatabaseValue]) {
        var args: [DatabaseValue] = []
        var clauses: [String] = []
        let relevance = options.order == .relevance
        var from = "messages m"
        var select = "\(MessageRows.columns.split(separator: ",").map { "m." + $0.trimmingCharacters(in: .whitespaces) }.joined(separator: ", ")), m.row_id"
        if relevance {
            from = "(SELECT docid, \(rankFunction)(matchinfo(search_index, 'pcnalx')) AS score FROM search_index WHERE search_index MATCH ?) s "
                + "JOIN messages m ON m.row_id = s.docid"
            select += ", s.score"
            args.append(.text(query.match))
        } else {
            clauses.append((walkTime ? "+" : "") + "m.row_id IN (SELECT docid FROM search_index WHERE search_index MATCH ?)")
            args.append(.text(query.match))
        }
        for exclusion in query.exclusions {
            clauses.append("m.row_id NOT IN (SELECT docid FROM search_index WHERE search_index MATCH ?)")
            args.append(.text(exclusion))
        }
        clauses.append("m.deleted_at = 0")
        if let scope = options.conversation {
            clauses.append("m.conversation_id = ?")
            args.append(.text(MessageRows.conversationId(for: scope, me: me)))
        }
        if let sender = options.senderUid {
            clauses.append("m.sender_id = ?")
            args.append(.text(sender))
        }
        if !options.categories.isEmpty {
            clauses.append("m.category IN (\(options.categories.map { _ in "?" }.joined(separator: ", ")))")
            args += options.categories.map { .text($0) }
        }
        if !options.types.isEmpty {
            clauses.append("m.type IN (\(options.types.map { _ in "?" }.joined(separator: ", ")))")
            args += options.types.map { .text($0) }
        }
        if let after = options.sentAfter {
            clauses.append("m.sent_at >= ?")
            args.append(.int(Int64(after)))
        }
        if let before = options.sentBefore {
            clauses.append("m.sent_at < ?")
            args.append(.int(Int64(before)))
        }
        let order: String
        switch options.order {
        case .newestFirst:
            order = "m.sent_at DESC, m.row_id DESC"
            if let c = options.cursor {
                clauses.append("(m.sent_at < ? OR (m.sent_at = ? AND m.row_id < ?))")
                args += [.int(c.sentAt), .int(c.sentAt), .int(c.rowId)]
            }
        case .oldestFirst:
            order = "m.sent_at ASC, m.row_id ASC"
            if let c = options.cursor {
                clauses.append("(m.sent_at > ? OR (m.sent_at = ? AND m.row_id > ?))")
                args += [.int(c.sentAt), .int(c.sentAt), .int(c.rowId)]
            }
        case .relevance:
            order = "s.score DESC, m.sent_at DESC, m.row_id DESC"
            if let c = options.cursor {
                clauses.append("(s.score < ? OR (s.score = ? AND (m.sent_at < ? OR (m.sent_at = ? AND m.row_id < ?))))")
                args += [.double(c.score), .double(c.score), .int(c.sentAt), .int(c.sentAt), .int(c.rowId)]
            }
        }
        let sql = "SELECT \(select) FROM \(from) WHERE \(clauses.joined(separator: " AND ")) ORDER BY \(order) LIMIT \(limit)"
        return (sql, args)
    }

    /// BM25 (k1 1.2, b 0.75) of one row from `matchinfo(…, 'pcnalx')`: phrases, columns (1), rows,
    /// average length, this row's length, then per phrase and column: hits here, hits in all rows,
    /// rows with a hit. A malformed blob scores 0.
    @Sendable static func bm25(_ blob: [UInt8]) -> Double {
        let count = blob.count / 4
        guard count >= 3 else { return 0 }
        func at(_ i: Int) -> Double {
            guard i < count else { return 0 }
            // matchinfo's integers are in the machine's byte order.
            var v: UInt32 = 0
            withUnsafeMutableBytes(of: &v) { raw in
                for k in 0..<4 { raw[k] = blob[i * 4 + k] }
            }
            return Double(v)
        }
        let phrases = Int(at(0)), columns = Int(at(1))
        guard columns >= 1, phrases >= 1, phrases <= 64, columns <= 8, count >= 3 + 2 * columns + 3 * phrases * columns else { return 0 }
        let rows = at(2)
        let average = max(1, at(3))
        let length = at(3 + columns)
        let k1 = 1.2, b = 0.75
        var score = 0.0
        for p in 0..<phrases {
            let base = 3 + 2 * columns + 3 * p * columns
            let tf = at(base), df = at(base + 2)
            guard tf > 0 else { continue }
            let idf = max(0.01, log((rows - df + 0.5) / (df + 0.5) + 1))
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
        }
        return score.isFinite ? score : 0
    }
}
