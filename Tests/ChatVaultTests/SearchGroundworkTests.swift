import Foundation
import XCTest
@testable import ChatVault
import VaultStore

/// The search groundwork (issue 24, first step): the text transformation and the query language,
/// checked against FTS4 with the `unicode61` tokenizer inside a real encrypted cache, on a
/// multilingual corpus with known answers (`Fixtures/search/corpus.json`).
final class SearchGroundworkTests: XCTestCase {
    struct Corpus: Decodable {
        struct Message: Decodable { let id: Int; let text: String }
        struct Query: Decodable { let query: String; let ids: [Int] }
        let messages: [Message]
        let queries: [Query]
    }

    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/search/corpus.json")

    /// An index of the corpus inside an open encrypted cache (a throwaway table beside the real ones).
    func indexedCorpus() async throws -> (ReadHarness, VaultCache, Corpus) {
        let corpus = try JSONDecoder().decode(Corpus.self, from: Data(contentsOf: Self.fixture))
        let h = try ReadHarness()
        await h.login()
        let cache = try XCTUnwrap(h.vault.openCache)
        XCTAssertTrue(cache.isEncrypted)
        try cache.writer.sync { db in
            try db.execute("CREATE TABLE search_probe_docs (id INTEGER PRIMARY KEY, body TEXT)")
            try db.execute("""
                CREATE VIRTUAL TABLE search_probe USING fts4(content="search_probe_docs", body,
                    tokenize=unicode61 "remove_diacritics=1")
                """)
            for m in corpus.messages {
                let body = SearchText.prepare(m.text)
                try db.run("INSERT INTO search_probe_docs (id, body) VALUES (?, ?)", .int(Int64(m.id)), .text(body))
                try db.run("INSERT INTO search_probe (docid, body) VALUES (?, ?)", .int(Int64(m.id)), .text(body))
            }
        }
        return (h, cache, corpus)
    }

    func ids(_ query: SearchQuery, in cache: VaultCache) throws -> [Int] {
        try cache.reader.sync { db in
            var sql = "SELECT docid FROM search_probe WHERE search_probe MATCH ?"
            var args: [DatabaseValue] = [.text(query.match)]
            for exclusion in query.exclusions {
                sql += " AND docid NOT IN (SELECT docid FROM search_probe WHERE search_probe MATCH ?)"
                args.append(.text(exclusion))
            }
            let stmt = try db.prepare(sql + " ORDER BY docid")
            try stmt.bind(args)
            var out: [Int] = []
            while try stmt.step() { out.append(stmt.int(0)) }
            return out
        }
    }

    func testEveryCorpusQueryFindsExactlyItsMessages() async throws {
        let (_, cache, corpus) = try await indexedCorpus()
        XCTAssertGreaterThanOrEqual(corpus.queries.count, 25)
        for q in corpus.queries {
            let query = try SearchQuery(q.query)
            XCTAssertEqual(try ids(query, in: cache), q.ids, "\(q.query) → MATCH \(query.match) minus \(query.exclusions)")
        }
    }

    /// CJK text is indexed as bigrams plus the run's last character; a query is its bigrams.
    func testCJKRunsBecomeBigramsAndOtherTextPassesThrough() throws {
        XCTAssertEqual(SearchText.prepare("東京タワー"), " 東京 京タ タワ ワー ー ")
        XCTAssertEqual(SearchText.prepare("東京タワー", query: true), " 東京 京タ タワ ワー ")
        XCTAssertEqual(SearchText.prepare("京", query: true), " 京 ")
        XCTAssertEqual(SearchText.prepare("ışık café"), "işik café")
        XCTAssertEqual(try SearchQuery("タワー").match, "\"タワ ワー\"")
        XCTAssertEqual(try SearchQuery("京").match, "\"京*\"")
        XCTAssertEqual(try SearchQuery("Linux apps*").match, "\"linux\" \"apps*\"")
    }

    /// FTS4's document total (the first varint of `search_index_stat` row 0), read from the file:
    /// what it encodes, and nil, never a trap, for blobs that end early, run long or overflow.
    func testTheIndexDocumentTotalParsesAndRefusesMalformedBlobs() throws {
        XCTAssertEqual(SearchIndexRows.documentTotal([0x00]), 0)
        XCTAssertEqual(SearchIndexRows.documentTotal([0x7f, 0x05]), 127)
        XCTAssertEqual(SearchIndexRows.documentTotal([0xa0, 0x8d, 0x06, 0x03]), 100_000)
        XCTAssertEqual(SearchIndexRows.documentTotal([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), Int.max)
        XCTAssertNil(SearchIndexRows.documentTotal([]))
        XCTAssertNil(SearchIndexRows.documentTotal([0x80, 0x80]), "ends inside the varint")
        XCTAssertNil(SearchIndexRows.documentTotal([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), "past Int.max")
        XCTAssertNil(SearchIndexRows.documentTotal([UInt8](repeating: 0x80, count: 12)), "longer than ten bytes")
        var random = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let blob = (0..<Int.random(in: 0...14, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            if let total = SearchIndexRows.documentTotal(blob) { XCTAssertGreaterThanOrEqual(total, 0) }
        }
    }

    /// What is indexed of a message: its words, never its ids or the app's data.
    func testOnlyTheMessagesWordsAreIndexed() throws {
        let text = TextMessage(receiverUid: "bob", text: "hello there", receiverType: .user)
        XCTAssertEqual(SearchText.indexable(text), "hello there")
        let media = MediaMessage(receiverUid: "bob", files: [], messageType: .image, receiverType: .user)
        media.caption = "beach"
        media.attachments = [Attachment(fileName: "sunset.jpg", fileExtension: "jpg", fileMimeType: "image/jpeg", fileUrl: "https://x/1")]
        XCTAssertEqual(SearchText.indexable(media), "beach\nsunset.jpg")
        let custom = CustomMessage(receiverUid: "bob", receiverType: .user, customData: ["lat": 1], type: "location")
        XCTAssertEqual(SearchText.indexable(custom), "", "custom data is never indexed")
        custom.conversationText = "Shared a location"
        XCTAssertEqual(SearchText.indexable(custom), "Shared a location")
        text.deletedAt = 5
        XCTAssertEqual(SearchText.indexable(text), "", "a deleted message has nothing to find")
    }

    /// Whatever is typed reaches MATCH as quoted tokens (no SQL error, no operator of SQLite's
    /// syntax), or is refused with a typed problem.
    func testHostileQueriesAreEscapedOrRefusedNeverAnSQLError() async throws {
        let (_, cache, _) = try await indexedCorpus()
        let hostile = ["\"", "\"\"\"\"", "*", "-", "--", "- -linux", "a\"b", "NEAR/3 linux", "body:linux", "(linux OR pizza)",
                       "linux\u{0}pizza", "\u{0}", "'; DROP TABLE messages; --", "🍕", "x*****", "\"unclosed phrase",
                       "^linux", "linux AND NOT pizza", String(repeating: "linux ", count: 40), "東\"京", "-\"\"", "∗"]
        for text in hostile {
            do {
                let query = try SearchQuery(text)
                XCTAssertFalse(query.match.isEmpty)
                for part in [query.match] + query.exclusions {
                    // Only quoted token runs: letters, digits, marks, spaces and a trailing star.
                    XCTAssertTrue(part.hasPrefix("\"") && part.contains("\"") , "\(text): \(part)")
                }
                XCTAssertNoThrow(try ids(query, in: cache), "\(text) → \(query.match)")
            } catch {
                let problem = error
                XCTAssertTrue([.empty, .onlyExclusions, .tooManyTerms(limit: SearchQuery.maxTerms)].contains(problem), "\(text): \(problem)")
            }
        }
        XCTAssertEqual(try ids(SearchQuery("linux\u{0}pizza"), in: cache), [8], "NUL separates words")
        XCTAssertEqual(try ids(SearchQuery("linux OR"), in: cache), [10], "OR is a word that must match, not an operator")
        XCTAssertEqual(try ids(SearchQuery("(linux OR pizza)"), in: cache), [], "parentheses are not grouping: all three words must match")
        XCTAssertThrowsError(try SearchQuery(String(repeating: "x", count: 10_000))) { error in
            XCTAssertEqual(error as? SearchQuery.Problem, .tooLong(limit: SearchQuery.maxCharacters))
        }
        XCTAssertThrowsError(try SearchQuery("-linux")) { XCTAssertEqual($0 as? SearchQuery.Problem, .onlyExclusions) }
        XCTAssertThrowsError(try SearchQuery("  \"\" * - ")) { XCTAssertEqual($0 as? SearchQuery.Problem, .empty) }
    }

    /// The index design checked end to end on the engine's own rows: an application SQL function
    /// (`Database.defineTextFunction`) gives the indexable text of a stored payload, a view over
    /// `messages` exposes it as FTS4's external content (no second copy of the text), a message is
    /// found, leaves the index by `DELETE … WHERE docid` (FTS4 reads its old text through the view),
    /// and `snippet()` reads through the view too.
    func testAnIndexOverTheMessagesRowsThroughAFunctionAndAView() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 4) { i in
            ["Die Brücke ist gesperrt", "東京タワーで会いましょう", "offline search on the train", "nothing to see"][i]
        })
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        let cache = try XCTUnwrap(h.vault.openCache)
        func found(_ text: String) throws -> [Int] {
            let query = try SearchQuery(text)
            return try cache.writer.sync { db in
                let stmt = try db.prepare("""
                    SELECT m.server_id FROM probe_index JOIN messages m ON m.row_id = probe_index.docid
                    WHERE probe_index MATCH ? ORDER BY m.server_id
                    """)
                try stmt.bind([.text(query.match)])
                var out: [Int] = []
                while try stmt.step() { out.append(stmt.int(0)) }
                return out
            }
        }
        try cache.writer.sync { db in
            try db.defineTextFunction("probe_search_text") { payload in payload.flatMap(SearchText.indexable(payload:)) }
            try db.execute("CREATE VIEW probe_content AS SELECT row_id AS rowid, probe_search_text(payload) AS body FROM messages")
            try db.execute("""
                CREATE VIRTUAL TABLE probe_index USING fts4(content="probe_content", body, tokenize=unicode61 "remove_diacritics=1")
                """)
            try db.execute("INSERT INTO probe_index (docid, body) SELECT rowid, body FROM probe_content WHERE body IS NOT NULL")
        }
        XCTAssertEqual(try found("brucke"), [ids[0]])
        XCTAssertEqual(try found("タワー"), [ids[1]])
        XCTAssertEqual(try found("off* train"), [ids[2]])
        let snippet = try cache.writer.sync { db in
            try db.scalarText("SELECT snippet(probe_index) FROM probe_index WHERE probe_index MATCH 'train'")
        }
        XCTAssertEqual(snippet, "offline search on the <b>train</b>")
        // Out of the index first (FTS4 reads the old text through the view), then the row.
        try cache.writer.sync { db in
            try db.run("DELETE FROM probe_index WHERE docid = (SELECT row_id FROM messages WHERE server_id = ?)", .int(Int64(ids[2])))
            try db.run("DELETE FROM messages WHERE server_id = ?", .int(Int64(ids[2])))
        }
        XCTAssertEqual(try found("train"), [])
        XCTAssertEqual(try found("brucke"), [ids[0]], "the others stay")
    }
}
