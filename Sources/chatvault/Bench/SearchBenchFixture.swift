import ChatVault
import Foundation
import VaultStore

/// The cache `chatvault bench search` searches: a real encrypted ChatVault cache (SQLCipher, raw
/// 256-bit key from a memory key store) opened by an `OfflineVault` with no server, as `bench
/// reads` opens its caches (`openBenchVault`), holding `messages` messages written through the
/// engine's own write-through (`MessageRows.writeThrough`, 1,000 per transaction, in time order
/// across the conversations) on the engine's writer, whose triggers keep the search index as they
/// go: the index is the one an app's cache holds.
///
/// The messages are `bench reads`' (`ReadBenchFixture.richMessage`: one-to-one conversations, every
/// 13th an image with a caption and a file name, every 17th deleted, every 23rd a thread reply)
/// with the text of `SearchBenchText` (words at a realistic spread) in place of the filler.
final class SearchBenchFixture {
    static let me = ReadBenchFixture.me

    let root: String
    let messages: Int
    let conversations: Int
    let vault: OfflineVault
    /// How long seeding took, in seconds (the index kept by the triggers all along).
    let seedSeconds: Double

    private init(root: String, messages: Int, conversations: Int, vault: OfflineVault, seedSeconds: Double) {
        self.root = root
        self.messages = messages
        self.conversations = conversations
        self.vault = vault
        self.seedSeconds = seedSeconds
    }

    /// Conversations for `messages` messages: 100 for 100,000 (1,000 each), fewer for a small cache,
    /// never more than 1,000 messages in one (the largest `maxMessagesPerConversation`).
    static func conversations(for messages: Int) -> Int {
        max(min(100, max(1, messages / 100)), (messages + 999) / 1000)
    }

    /// The open cache (a new one after each login).
    func cache() throws -> VaultCache {
        guard let cache = vault.openCache else { throw CLIError.failure("the search benchmark's cache is not open") }
        return cache
    }

    static func make(root: String, messages: Int) async throws -> SearchBenchFixture {
        let conversations = conversations(for: messages)
        let (vault, cache) = try await openBenchVault("search", root: root, encryption: true, user: me)
        do {
            // An empty cache's build finishes at once; from then on the triggers keep the index.
            try await waitForCompleteIndex(vault)
            let limits = vault.wireLimits
            let started = ContinuousClock.now
            try cache.writer.sync { db in
                for start in stride(from: 0, to: messages, by: 1000) {
                    let wire = (start..<min(start + 1000, messages)).map { message($0, conversations: conversations) }
                    try db.transaction { try MessageRows.writeThrough(wire, me: me, limits: limits, in: db) }
                }
                try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            }
            let seedSeconds = (ContinuousClock.now - started).milliseconds / 1_000
            let (rows, indexed) = try cache.reader.sync { db in
                (Int(try db.scalarInt("SELECT count(*) FROM messages") ?? 0),
                 Int(try db.scalarInt("SELECT count(*) FROM search_index_docsize") ?? 0))
            }
            guard rows == messages, indexed == messages else {
                throw CLIError.failure("the search benchmark's cache holds \(rows) messages and indexes \(indexed) after seeding \(messages)")
            }
            try await waitForCompleteIndex(vault)
            return SearchBenchFixture(root: root, messages: messages, conversations: conversations, vault: vault, seedSeconds: seedSeconds)
        } catch {
            await vault.logout()
            throw error
        }
    }

    func close() async {
        await vault.logout()
    }

    /// Waits until the open cache's index is complete as the file says: `waitForSearchIndex()`,
    /// asked again while it is not (`login` returns before the engine starts the build, and a
    /// wait made before the build has started returns at once). Throws after `timeout`.
    static func waitForCompleteIndex(_ vault: OfflineVault, timeout: Duration = .seconds(600)) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            await vault.waitForSearchIndex()
            guard let progress = vault.searchIndexProgress() else {
                throw CLIError.failure("no cache is open while waiting for the search index")
            }
            if progress.isComplete { return }
            guard clock.now < deadline else { throw CLIError.failure("the search index is not complete after \(timeout): \(progress)") }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Message `i` of the cache: `ReadBenchFixture.richMessage` with `SearchBenchText.body(i)` as
    /// its text (or an image's caption).
    static func message(_ i: Int, conversations: Int) -> JSONValue {
        replacingText(ReadBenchFixture.richMessage(i, conversations: conversations), with: SearchBenchText.body(i))
    }

    /// `wire` with its text (or caption) replaced.
    static func replacingText(_ wire: JSONValue, with body: String) -> JSONValue {
        guard case .object(var fields) = wire, case .object(var data)? = fields["data"] else { return wire }
        if data["caption"] != nil {
            data["caption"] = .string(body)
        } else {
            data["text"] = .string(body)
        }
        fields["data"] = .object(data)
        return .object(fields)
    }

    /// The conversation the in-conversation query searches.
    var searchedConversation: Int { conversations / 2 }

    var searchedPeer: String { ReadBenchFixture.peer(searchedConversation) }

    var searchedConversationId: String { ConversationID.direct(Self.me, searchedPeer).rawValue }
}

/// One query of `bench search`: what the user types, the `MATCH` expression the engine makes of it
/// (`SearchQuery.match`: each term a quoted phrase, `*` after a prefix), where it looks, the order,
/// and the budget of issue 24 it answers to (nil: reported without one).
struct SearchBenchQuery: Sendable {
    enum Budget: String, CaseIterable, Sendable {
        case oneWord
        case twoWordsInConversation
        case prefix
        case firstPage

        /// The median the public call may take, in milliseconds (issue 24).
        var maxMs: Double {
            switch self {
            case .oneWord: return 5
            case .twoWordsInConversation: return 2
            case .prefix: return 20
            case .firstPage: return 15
            }
        }

        var title: String {
            switch self {
            case .oneWord: return "a one-word query over everything"
            case .twoWordsInConversation: return "a two-word query in one conversation"
            case .prefix: return "a prefix query"
            case .firstPage: return "the first page of 20 results with snippets"
            }
        }
    }

    let id: String
    let title: String
    let text: String
    let match: String
    let inConversation: Bool
    let order: CachedSearchOrder
    let budget: Budget?

    /// Limit 20 (the default page), newest first unless said.
    static let all: [SearchBenchQuery] = [
        .init(id: "oneWordRare", title: "one word, rare (passport, rank 2,000)", text: "passport", match: "\"passport\"",
              inConversation: false, order: .newestFirst, budget: .oneWord),
        .init(id: "oneWordMedium", title: "one word, medium (dinner, rank 100)", text: "dinner", match: "\"dinner\"",
              inConversation: false, order: .newestFirst, budget: .oneWord),
        .init(id: "oneWordCommon", title: "one word, common (tomorrow, rank 10)", text: "tomorrow", match: "\"tomorrow\"",
              inConversation: false, order: .newestFirst, budget: .oneWord),
        .init(id: "twoWordsInConversation", title: "two words in one conversation (meeting tomorrow)", text: "meeting tomorrow",
              match: "\"meeting\" \"tomorrow\"", inConversation: true, order: .newestFirst, budget: .twoWordsInConversation),
        .init(id: "prefix3", title: "prefix, 3 letters (tom*)", text: "tom*", match: "\"tom*\"",
              inConversation: false, order: .newestFirst, budget: .prefix),
        .init(id: "prefix5", title: "prefix, 5 letters (tomor*)", text: "tomor*", match: "\"tomor*\"",
              inConversation: false, order: .newestFirst, budget: .prefix),
        .init(id: "firstPage", title: "first page of 20 with snippets (dinner tomorrow)", text: "dinner tomorrow",
              match: "\"dinner\" \"tomorrow\"", inConversation: false, order: .newestFirst, budget: .firstPage),
        .init(id: "relevanceCommon", title: "one word, common, by relevance (BM25 of every hit)", text: "tomorrow",
              match: "\"tomorrow\"", inConversation: false, order: .relevance, budget: nil),
    ]

    static let limit = 20

    var orderName: String {
        switch order {
        case .newestFirst: return "newestFirst"
        case .oldestFirst: return "oldestFirst"
        case .relevance: return "relevance"
        }
    }

    func options(_ fixture: SearchBenchFixture) -> CachedSearchOptions {
        var options = CachedSearchOptions()
        options.limit = Self.limit
        options.order = order
        if inConversation { options.conversation = .user(fixture.searchedPeer) }
        return options
    }

    /// The floor with nothing but the index: every docid the `MATCH` finds.
    static let bareMatchSQL = "SELECT docid FROM search_index WHERE search_index MATCH ?"

    /// The statement `SearchEngine.statement` makes for this query (its documented shape, the same
    /// columns, filters, order and limit: the page plus one, to know whether more follow).
    func engineSQL(_ fixture: SearchBenchFixture) -> (String, [DatabaseValue]) {
        var args: [DatabaseValue] = [.text(match)]
        var select = "m.payload, m.status, m.source, m.local_id, m.sent_at, m.server_id, m.row_id"
        var from = "messages m"
        var clauses: [String] = []
        let orderBy: String
        if order == .relevance {
            from = "(SELECT docid, chatvault_rank(matchinfo(search_index, 'pcnalx')) AS score FROM search_index WHERE search_index MATCH ?) s "
                + "JOIN messages m ON m.row_id = s.docid"
            select += ", s.score"
            orderBy = "s.score DESC, m.sent_at DESC, m.row_id DESC"
        } else {
            clauses.append("m.row_id IN (SELECT docid FROM search_index WHERE search_index MATCH ?)")
            orderBy = order == .oldestFirst ? "m.sent_at ASC, m.row_id ASC" : "m.sent_at DESC, m.row_id DESC"
        }
        clauses.append("m.deleted_at = 0")
        if inConversation {
            clauses.append("m.conversation_id = ?")
            args.append(.text(fixture.searchedConversationId))
        }
        let sql = "SELECT \(select) FROM \(from) WHERE \(clauses.joined(separator: " AND ")) ORDER BY \(orderBy) LIMIT \(Self.limit + 1)"
        return (sql, args)
    }

    /// The messages the search can find (the engine's filters, no limit).
    func countSQL(_ fixture: SearchBenchFixture) -> (String, [DatabaseValue]) {
        var sql = "SELECT count(*) FROM messages m WHERE m.row_id IN (SELECT docid FROM search_index WHERE search_index MATCH ?) AND m.deleted_at = 0"
        var args: [DatabaseValue] = [.text(match)]
        if inConversation {
            sql += " AND m.conversation_id = ?"
            args.append(.text(fixture.searchedConversationId))
        }
        return (sql, args)
    }
}
