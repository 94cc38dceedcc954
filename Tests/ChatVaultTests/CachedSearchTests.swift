import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// Local search through the engine (issue 24): `searchCachedMessages` over messages the engine
/// cached, the index kept by the writer's triggers (edits, deletes, eviction, clear), the
/// background build of an existing cache, options and paging, matches and snippets.
final class CachedSearchTests: XCTestCase {
    typealias Corpus = SearchGroundworkTests.Corpus

    /// The corpus cached through a read of alice's conversation with bob: corpus id → server id.
    func cachedCorpus(_ h: ReadHarness) async throws -> (Corpus, [Int: Int]) {
        let corpus = try JSONDecoder().decode(Corpus.self, from: Data(contentsOf: SearchGroundworkTests.fixture))
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: corpus.messages.count) { corpus.messages[$0].text })
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: 50) }.fetchPrevious()
        var map: [Int: Int] = [:]
        for (i, m) in corpus.messages.enumerated() { map[m.id] = ids[i] }
        return (corpus, map)
    }

    func found(_ h: ReadHarness, _ query: String, _ adjust: (inout CachedSearchOptions) -> Void = { _ in }) async throws -> [Int] {
        var options = CachedSearchOptions()
        options.limit = 100
        adjust(&options)
        return try await h.vault.searchCachedMessages(query, options: options).hits.map(\.message.id)
    }

    /// Every page of a search from `options` on: the ids in order, and how many pages it took.
    func allPages(_ h: ReadHarness, _ query: String, _ start: CachedSearchOptions) async throws -> (ids: [Int], pages: Int) {
        var options = start
        var ids: [Int] = []
        var pages = 0
        while true {
            let page = try await h.vault.searchCachedMessages(query, options: options)
            ids += page.hits.map(\.message.id)
            pages += 1
            guard let next = page.nextCursor else { return (ids, pages) }
            options.cursor = next
        }
    }

    /// A connection to the cache's file with its key, as a tool would open it (no triggers).
    /// Alice logged in with a conversation with bob of `count` messages (`text(i)`) read into her
    /// cache; the ids in order. `waitForIndex`: until the index holds them.
    func cachedConversation(_ h: ReadHarness, count: Int, limit: Int, waitForIndex: Bool = true,
                            _ text: (Int) -> String) async throws -> [Int] {
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: count, text: text))
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: limit) }.fetchPrevious()
        if waitForIndex { await h.vault.waitForSearchIndex() }
        return ids
    }

    func toolConnection(_ h: ReadHarness, _ directory: CacheDirectory, cacheId: String) throws -> DatabaseQueue {
        guard case .valid(let manifest) = ManifestFile.read(directory: directory.path),
              case .found(let key, _) = h.keyStore.lookup(KeyItemID(applicationId: "org.chatvault.readtests", account: directory.account,
                                                                      cacheId: cacheId)) else { throw CocoaError(.fileReadNoPermission) }
        return try DatabaseQueue(path: directory.database, keying: .encrypted(key, manifest.cipherProfile ?? .standard()),
                                 options: ConnectionOptions(), label: "test.tool")
    }

    func testEveryCorpusQueryFindsExactlyItsMessagesThroughTheEngine() async throws {
        let h = try ReadHarness()
        let (corpus, map) = try await cachedCorpus(h)
        await h.vault.waitForSearchIndex()
        for q in corpus.queries {
            let ids = try await found(h, q.query).sorted()
            XCTAssertEqual(ids, q.ids.compactMap { map[$0] }.sorted(), q.query)
        }
        let page = try await h.vault.searchCachedMessages("linux")
        XCTAssertTrue(page.indexComplete)
        XCTAssertEqual(page.indexProgress.totalMessages, corpus.messages.count)
        XCTAssertEqual(page.hits.map(\.message.id), [map[10], map[8]].compactMap { $0 }, "newest first")
        XCTAssertTrue(page.hits.allSatisfy { $0.message is TextMessage && $0.message.messageStatus == .sent })
    }

    /// An edit takes the old words out of the index and puts the new ones in; a delete takes the
    /// message out; both at once (the same transaction as the row).
    func testEditsAndDeletesAreReflectedAtOnce() async throws {
        let h = try ReadHarness()
        let ids = try await cachedConversation(h, count: 3, limit: 10, waitForIndex: false) { ["alpha one", "beta two", "gamma three"][$0] }
        let alpha = try await found(h, "alpha")
        XCTAssertEqual(alpha, [ids[0]])

        try h.simulator.edit(ids[0], to: .text("delta four"))
        await waitUntil(10, "the edit cached") {
            h.callbacks.sync {}
            let payload = try? h.vault.openCache?.reader.sync { db in
                let stmt = try db.prepare("SELECT payload FROM messages WHERE server_id = \(ids[0])")
                return try stmt.step() ? stmt.blob(0) : nil
            }
            return payload.flatMap { $0 }.flatMap(SearchText.indexable(payload:)) == "delta four"
        }
        let afterEdit = (try await found(h, "alpha"), try await found(h, "delta"))
        XCTAssertEqual(afterEdit.0, [], "the old words left the index")
        XCTAssertEqual(afterEdit.1, [ids[0]], "the new ones are in it")

        try h.simulator.delete(ids[1])
        await waitUntil(10, "the delete cached") {
            h.callbacks.sync {}
            return (try? h.vault.openCache?.reader.sync { db in
                try db.scalarInt("SELECT deleted_at FROM messages WHERE server_id = ?", .int(Int64(ids[1])))
            }).flatMap { $0 }.map { $0 > 0 } ?? false
        }
        let beta = try await found(h, "beta")
        XCTAssertEqual(beta, [], "a deleted message has nothing to find")
        let gamma = try await found(h, "gamma")
        XCTAssertEqual(gamma, [ids[2]])
        try assertIndexMatchesRows(h)
    }

    /// A payload rewritten with the same words (a reply counted on its parent, a receipt, a
    /// reaction) keeps its index entry: the trigger compares the searchable text, so only an edit
    /// takes the row out (and the commit puts it back with its new words).
    func testARewriteWithTheSameWordsKeepsItsEntryAndAnEditReplacesIt() async throws {
        let h = try ReadHarness()
        let ids = try await cachedConversation(h, count: 3, limit: 10) { ["marten one", "stoat two", "ferret three"][$0] }
        let cache = try XCTUnwrap(h.vault.openCache)
        let indexedSQL = "SELECT count(*) FROM search_index_docsize WHERE docid = (SELECT row_id FROM messages WHERE server_id = ?)"
        func rewrite(_ id: Int, _ change: @escaping @Sendable ([String: JSONValue]) -> [String: JSONValue]) throws -> (during: Int64?, after: Int64?) {
            try cache.writer.sync { db in
                let during: Int64? = try db.transaction {
                    let stmt = try db.prepare("SELECT payload FROM messages WHERE server_id = ?")
                    try stmt.bind([.int(Int64(id))])
                    guard try stmt.step(), let bytes = stmt.blob(0), case .object(let fields) = try BinaryJSON.decode(bytes) else { return nil }
                    stmt.reset()
                    try db.run("UPDATE messages SET payload = ? WHERE server_id = ?", .blob(BinaryJSON.encode(.object(change(fields)))), .int(Int64(id)))
                    return try db.scalarInt(indexedSQL, .int(Int64(id)))
                }
                return (during, try db.scalarInt(indexedSQL, .int(Int64(id))))
            }
        }
        let counted = try rewrite(ids[0]) { var f = $0; f["replyCount"] = .int(3); return f }
        XCTAssertEqual(counted.during, 1, "the same words: the entry stays")
        XCTAssertEqual(counted.after, 1)
        let marten = try await found(h, "marten")
        XCTAssertEqual(marten, [ids[0]])

        let edited = try rewrite(ids[1]) { fields in
            var f = fields
            f["text"] = .string("weasel four")
            if case .object(var data)? = f["data"] { data["text"] = .string("weasel four"); f["data"] = .object(data) }
            return f
        }
        XCTAssertEqual(edited.during, 0, "new words: the old entry left before the row changed")
        XCTAssertEqual(edited.after, 1, "and the row is indexed again with its commit")
        let (stoat, weasel) = (try await found(h, "stoat"), try await found(h, "weasel"))
        XCTAssertEqual(stoat, [])
        XCTAssertEqual(weasel, [ids[1]])

        // Through the engine: a reply counted on its cached parent leaves the parent found.
        let reply = try h.simulator.postText("badger reply", from: "bob", to: .user("alice"), parentId: ids[2])
        await waitUntil(10, "the reply cached") { h.callbacks.sync {}; return (try? h.cachedIds("alice_user_bob").contains(reply)) ?? false }
        let (ferret, badger) = (try await found(h, "ferret"), try await found(h, "badger"))
        XCTAssertEqual(ferret, [ids[2]])
        XCTAssertEqual(badger, [reply])
        try assertIndexMatchesRows(h)
    }

    /// A server page read over a cached row (the edit learnt only through a read) re-indexes it;
    /// a page showing a message gone (deleted while away) takes it out of the index.
    func testAServerPageOverCachedRowsReindexesThem() async throws {
        let h = try ReadHarness()
        let ids = try await cachedConversation(h, count: 3, limit: 10, waitForIndex: false) { ["otter one", "heron two", "egret three"][$0] }
        try h.whileAway { try h.simulator.edit(ids[0], to: .text("badger four")) }
        _ = await h.messages { $0.set(uid: "bob").set(limit: 10) }.fetchPrevious()
        let otter = try await found(h, "otter")
        let badger = try await found(h, "badger")
        XCTAssertEqual(otter, [], "the old words left with the server's copy")
        XCTAssertEqual(badger, [ids[0]])
        try assertIndexMatchesRows(h)
    }

    /// Eviction deletes rows through the writer: their words go with them. `clearOfflineCache`
    /// empties the index with the rows, and what arrives afterwards is found again.
    func testEvictionAndClearAreReflectedAtOnce() async throws {
        let h = try ReadHarness(configure: { $0.setMaxMessagesPerConversation(2) })
        let ids = try await cachedConversation(h, count: 4, limit: 10, waitForIndex: false) { "word\($0) common" }
        let before = try await found(h, "common")
        XCTAssertEqual(before.sorted(), ids)
        await h.vault.evictNow()
        let after = try await found(h, "common")
        XCTAssertEqual(after.sorted(), Array(ids.suffix(2)), "the evicted messages are not found")
        let word0 = try await found(h, "word0")
        XCTAssertEqual(word0, [])
        try assertIndexMatchesRows(h)

        try await h.vault.clearOfflineCacheAndWait()
        let cleared = try await found(h, "common")
        XCTAssertEqual(cleared, [])
        await h.vault.waitForSearchIndex()
        XCTAssertEqual(h.vault.searchIndexProgress(), SearchIndexProgress(indexedMessages: 0, totalMessages: 0, isComplete: true))
        _ = await h.messages { $0.set(uid: "bob").set(limit: 10) }.fetchPrevious()
        let again = try await found(h, "common")
        XCTAssertEqual(again.sorted(), Array(ids.suffix(4)).filter { (try? h.cachedIds("alice_user_bob").contains($0)) ?? false }.sorted(),
                       "what is cached again is found again")
        XCTAssertFalse(again.isEmpty)
        try assertIndexMatchesRows(h)
    }

    /// Every row the index holds is a row of `messages` and the other way round, and FTS4's own
    /// consistency check of the index against its content passes.
    func assertIndexMatchesRows(_ h: ReadHarness, file: StaticString = #filePath, line: UInt = #line) throws {
        let cache = try XCTUnwrap(h.vault.openCache)
        let (rows, indexed, orphans) = try cache.writer.sync { db in
            (try db.scalarInt("SELECT count(*) FROM messages") ?? -1,
             try db.scalarInt("SELECT count(*) FROM search_index_docsize") ?? -1,
             try db.scalarInt("SELECT count(*) FROM search_index_docsize WHERE docid NOT IN (SELECT row_id FROM messages)") ?? -1)
        }
        XCTAssertEqual(indexed, rows, "every row indexed once", file: file, line: line)
        XCTAssertEqual(orphans, 0, "no index entry without its row", file: file, line: line)
        // A search's progress (the index's own document total once complete) agrees with the
        // exact counts after every phase that writes.
        let (exact, quick) = try cache.reader.sync { db in (try SearchIndexRows.progress(in: db), try SearchIndexRows.quickProgress(in: db)) }
        XCTAssertEqual(quick, exact, "a search's indexProgress", file: file, line: line)
    }

    /// A cache whose index misses rows (an existing cache, an index rebuilt) is built in the
    /// background after ready: progress reported to the listeners until complete; the messages
    /// are found afterwards.
    func testAnExistingCacheIsIndexedInTheBackgroundWithProgress() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 1_000) { "row \($0) needle\($0 % 10)" })
        await h.login()
        for _ in 0..<10 { _ = await h.messages { $0.set(uid: "bob").set(limit: 100) }.fetchPrevious() }
        var cached = try h.cachedIds("alice_user_bob").count
        while cached < 1_000 {
            let request = h.messages { $0.set(uid: "bob").set(limit: 100) }
            for _ in 0..<12 { _ = await request.fetchPrevious() }
            cached = try h.cachedIds("alice_user_bob").count
        }
        let cache = try XCTUnwrap(h.vault.openCache)
        await h.vault.logout()
        // As a cache from before the index: the index emptied by a connection of its own.
        try emptyIndex(h, cache.directory, cacheId: cache.cacheId)

        final class Heard: SearchIndexListener {
            let progress = Mutex<[SearchIndexProgress]>([])
            func onSearchIndexProgress(_ progress: SearchIndexProgress) { self.progress.withLock { $0.append(progress) } }
        }
        let heard = Heard()
        h.vault.addSearchIndexListener("bar", heard)
        h.client.network = .offline
        await h.login()
        await h.vault.waitForSearchIndex()
        await waitUntil(5, "the last progress delivered") { h.callbacks.sync {}; return heard.progress.withLock { $0.last?.isComplete == true } }
        let seen = heard.progress.withLock { $0 }
        XCTAssertGreaterThanOrEqual(seen.count, 2, "progress along the way, then complete")
        XCTAssertEqual(seen.map(\.indexedMessages), seen.map(\.indexedMessages).sorted(), "progress only grows")
        XCTAssertEqual(seen.last, SearchIndexProgress(indexedMessages: 1_000, totalMessages: 1_000, isComplete: true))
        let needle3 = try await found(h, "needle3")
        XCTAssertEqual(needle3.sorted(), ids.enumerated().filter { $0.offset % 10 == 3 }.map(\.element))
        try assertIndexMatchesRows(h)
    }

    func emptyIndex(_ h: ReadHarness, _ directory: CacheDirectory, cacheId: String) throws {
        let raw = try toolConnection(h, directory, cacheId: cacheId)
        try raw.sync { db in try db.transaction { try SearchIndexSchema.recreate(db) } }
        raw.close()
    }

    /// The build step on its own: a batch per transaction, its cursor recorded with it (a kill
    /// between two loses nothing), rows the triggers already indexed skipped, complete at the end.
    func testTheBuildGoesBatchByBatchAndSkipsRowsAlreadyIndexed() async throws {
        let h = try ReadHarness()
        _ = try h.simulator.seedConversation(between: "alice", and: "bob", count: 900) { "batch \($0)" }
        await h.login()
        let request = h.messages { $0.set(uid: "bob").set(limit: 100) }
        for _ in 0..<9 { _ = await request.fetchPrevious() }
        await h.vault.waitForSearchIndex()
        let cache = try XCTUnwrap(h.vault.openCache)
        try cache.writer.sync { db in
            try db.transaction { try SearchIndexSchema.recreate(db) }
            // One row indexed by its trigger (an edit) before the build reaches it.
            try db.run("UPDATE messages SET payload = payload || x'' WHERE row_id = (SELECT max(row_id) FROM messages)")
            let first = try SearchIndex.step(db, firstOfSession: true)
            XCTAssertFalse(first.isComplete)
            XCTAssertEqual(first.indexedMessages, SearchIndex.batch + 1, "the first batch and the edited row")
            let cursor = try XCTUnwrap(db.scalarText("SELECT CAST(value AS TEXT) FROM kv WHERE key = ?", .text(SearchIndexSchema.buildStateKey)))
            XCTAssertEqual(Int64(cursor), try db.scalarInt("SELECT max(row_id) FROM (SELECT row_id FROM messages ORDER BY row_id LIMIT \(SearchIndex.batch))"))
        }
        // A search meanwhile says the index is not complete, and how far it is.
        let partial = try await h.vault.searchCachedMessages("batch", options: { var o = CachedSearchOptions(); o.limit = 100; return o }())
        XCTAssertFalse(partial.indexComplete)
        XCTAssertEqual(partial.indexProgress, SearchIndexProgress(indexedMessages: SearchIndex.batch + 1, totalMessages: 900, isComplete: false))
        XCTAssertEqual(partial.hits.count, 100, "what is indexed is found")
        try cache.writer.sync { db in
            var last = try SearchIndex.step(db, firstOfSession: true)
            var steps = 2
            while !last.isComplete {
                last = try SearchIndex.step(db, firstOfSession: true)
                steps += 1
            }
            XCTAssertEqual(steps, 4, "900 rows: three batches, then the step that finds none")
            XCTAssertEqual(last, SearchIndexProgress(indexedMessages: 900, totalMessages: 900, isComplete: true))
            XCTAssertEqual(try db.scalarInt("SELECT count(*) FROM search_index_docsize"), 900, "no row twice")
        }
    }

    /// The index is inside the database, so it comes along wherever the database goes: a key
    /// rotation (the file exported under the new key), an export and an import on top of a
    /// cleared cache. Each reopen installs the writer's triggers again: a message arriving after
    /// the import is found.
    func testTheIndexComesAlongWithRotationExportAndImport() async throws {
        let h = try ReadHarness()
        let ids = try await cachedConversation(h, count: 40, limit: 50) { "lantern \($0)" }
        func lanterns() async throws -> [Int] { try await found(h, "lantern").sorted() }
        let before = try await lanterns()
        XCTAssertEqual(before, ids)

        _ = try await h.vault.rotateOfflineCacheKey()
        let rotated = try await lanterns()
        XCTAssertEqual(rotated, ids, "the index came along with the rotation")
        XCTAssertEqual(h.vault.searchIndexProgress()?.isComplete, true)
        try assertIndexMatchesRows(h)

        let path = h.root.path + "/transfer.export"
        let export = try await h.vault.exportOfflineCache(to: path)
        try await h.vault.clearOfflineCacheAndWait()
        let cleared = try await lanterns()
        XCTAssertEqual(cleared, [])
        _ = try await h.vault.importOfflineCache(from: path, secret: export.secret)
        await h.vault.waitForSearchIndex()
        let imported = try await lanterns()
        XCTAssertEqual(imported, ids, "the index came along with the export")
        try assertIndexMatchesRows(h)

        let late = try h.simulator.postText("lantern arriving late", from: "bob", to: .user("alice"))
        await waitUntil(10, "the new message cached") { h.callbacks.sync {}; return (try? h.cachedIds("alice_user_bob").contains(late)) ?? false }
        let withLate = try await found(h, "arriving")
        XCTAssertEqual(withLate, [late], "the reopened cache keeps its index")
    }

    /// An index made under an earlier format (format 1 had prefix indexes) is emptied, made again
    /// with this version's options on the next open and built in the background; the rows stay.
    func testAnIndexOfAnEarlierFormatIsMadeAgain() async throws {
        let h = try ReadHarness()
        let ids = try await cachedConversation(h, count: 12, limit: 20) { "lynx \($0)" }
        var cache = try XCTUnwrap(h.vault.openCache)
        let directory = cache.directory
        let cacheId = cache.cacheId
        await h.vault.logout()
        let raw = try toolConnection(h, directory, cacheId: cacheId)
        try raw.sync { db in
            try db.execute("DROP TABLE search_index")
            try db.execute("""
                CREATE VIRTUAL TABLE search_index USING fts4(content="search_content", body,
                    tokenize=unicode61 "remove_diacritics=1", prefix="2,3")
                """)
            try db.run("UPDATE kv SET value = '1' WHERE key = ?", .text(SearchIndexSchema.formatKey))
            try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, 'complete')", .text(SearchIndexSchema.buildStateKey))
        }
        raw.close()
        await h.login()
        await h.vault.waitForSearchIndex()
        cache = try XCTUnwrap(h.vault.openCache)
        let (definition, format) = try cache.reader.sync { db in
            (try db.scalarText("SELECT sql FROM sqlite_master WHERE name = 'search_index'") ?? "",
             try db.scalarText("SELECT CAST(value AS TEXT) FROM kv WHERE key = ?", .text(SearchIndexSchema.formatKey)))
        }
        XCTAssertFalse(definition.contains("prefix"), definition)
        XCTAssertEqual(format, SearchIndex.format)
        let lynx = try await found(h, "lynx")
        XCTAssertEqual(Set(lynx), Set(ids), "built again from the rows")
        try assertIndexMatchesRows(h)
    }

    /// Rows inserted in a transaction are indexed together just before it commits; a transaction
    /// that rolls back leaves nothing behind; a row written outside any transaction is indexed
    /// right after its statement; a row written by a connection without the upkeep (a tool) is
    /// found by the next session's check and indexed.
    func testDeferredRowsCommitWithTheirTransactionAndMissedRowsAreCaughtUp() async throws {
        let h = try ReadHarness()
        let ids = try await cachedConversation(h, count: 30, limit: 50) { "puffin \($0)" }
        let cache = try XCTUnwrap(h.vault.openCache)
        struct Abandon: Error {}
        let copyRow = """
            INSERT INTO messages (row_id, server_id, conversation_id, sender_id, receiver_id, receiver_type, category, type, sent_at, payload)
            SELECT row_id + 100000, server_id + 100000, conversation_id, sender_id, receiver_id, receiver_type, category, type, sent_at, payload
            FROM messages WHERE server_id = ?
            """
        let indexedCopies = "SELECT count(*) FROM search_index_docsize WHERE docid IN (SELECT row_id FROM messages WHERE server_id > 100000)"
        XCTAssertThrowsError(try cache.writer.sync { db in
            try db.transaction {
                try db.run(copyRow, .int(Int64(ids[0])))
                XCTAssertEqual(try db.scalarInt("SELECT count(*) FROM messages WHERE server_id > 100000"), 1)
                XCTAssertEqual(try db.scalarInt(indexedCopies), 0, "deferred to the commit")
                throw Abandon()
            }
        })
        XCTAssertEqual(try cache.writer.sync { db in db.takeWrittenRows() }, [], "rolled back with it")
        try assertIndexMatchesRows(h)
        try cache.writer.sync { db in try db.transaction { try db.run(copyRow, .int(Int64(ids[1]))) } }
        XCTAssertEqual(try cache.writer.sync { db in try db.scalarInt(indexedCopies) }, 1, "indexed with its commit")
        XCTAssertEqual(try cache.writer.sync { db in try db.scalarInt("SELECT count(*) FROM temp.search_pending") }, 0)
        try assertIndexMatchesRows(h)
        let twice = try await found(h, "puffin 1")
        XCTAssertEqual(twice.count, 2, "the copy is found once it committed")

        // Outside any transaction: the statement commits on its own, its row right after it.
        try cache.writer.sync { db in try db.run(copyRow.replacingOccurrences(of: "100000", with: "300000"), .int(Int64(ids[3]))) }
        XCTAssertEqual(try cache.writer.sync { db in try db.scalarInt(indexedCopies) }, 2, "indexed after its statement")
        try assertIndexMatchesRows(h)
        let copied = try await found(h, "puffin 3")
        XCTAssertEqual(copied.count, 2, "the statement's copy is found")

        // Only the triggers that must see a row before it changes: an INSERT trigger would give
        // every insert of a transaction an encrypted statement journal (`WriteLog`).
        let triggers = try cache.writer.sync { db in
            try db.texts("SELECT name FROM sqlite_temp_master WHERE type = 'trigger' AND tbl_name = 'messages' ORDER BY name")
        }
        XCTAssertEqual(triggers, ["search_before_delete", "search_before_update"])

        // A tool's row: no triggers on its connection.
        let directory = cache.directory
        let cacheId = cache.cacheId
        await h.vault.logout()
        let raw = try toolConnection(h, directory, cacheId: cacheId)
        try raw.sync { db in try db.run(copyRow.replacingOccurrences(of: "100000", with: "200000"), .int(Int64(ids[2]))) }
        raw.close()
        await h.login()
        await h.vault.waitForSearchIndex()
        try assertIndexMatchesRows(h)
        let thrice = try await found(h, "puffin 2")
        XCTAssertEqual(thrice.count, 2, "the tool's row was caught up")
    }

    /// The index's function reads only the searchable fields from a stored payload; for every
    /// kind of message the engine stores it answers what the decoded message's text is.
    func testTheIndexedTextOfAStoredPayloadIsTheDecodedMessagesText() async throws {
        let h = try ReadHarness()
        try h.simulator.addGroup("crew", members: ["alice", "bob"])
        var ids: [Int] = []
        ids += try h.simulator.seedConversation(between: "alice", and: "bob", count: 3) { ["plain words", "Crème brûlée", "東京タワー"][$0] }
        ids.append(try h.simulator.post(.media(.file, attachments: [
            SimulatedAttachment(name: "notes.pdf", mimeType: "application/pdf", url: "https://media.test/n.pdf", size: 3),
            SimulatedAttachment(name: "plan b.txt", mimeType: "text/plain", url: "https://media.test/p.txt", size: 3)], caption: "two files"),
            from: "bob", to: .user("alice")))
        ids.append(try h.simulator.post(.media(.image, attachments: [
            SimulatedAttachment(name: "x.jpg", mimeType: "image/jpeg", url: "https://media.test/x.jpg", size: 3)]), from: "bob", to: .user("alice")))
        ids.append(try h.simulator.post(.custom(type: "poll", data: ["q": "lunch?"], conversationText: "A poll"), from: "bob", to: .user("alice")))
        ids.append(try h.simulator.post(.custom(type: "poll", data: ["q": "dinner?"]), from: "bob", to: .user("alice")))
        ids.append(try h.simulator.post(.interactive(type: "form", data: ["title": "Sign up"]), from: "bob", to: .user("alice")))
        ids.append(try h.simulator.post(.text("in the group"), from: "bob", to: .group("crew")))
        try h.simulator.delete(ids[0])
        try h.simulator.edit(ids[1], to: .text("Crème caramel"))
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: 50) }.fetchPrevious()
        _ = await h.messages { $0.set(guid: "crew").set(limit: 50) }.fetchPrevious()
        let cache = try XCTUnwrap(h.vault.openCache)
        let payloads = try cache.reader.sync { db -> [[UInt8]] in
            let stmt = try db.prepare("SELECT payload FROM messages")
            var out: [[UInt8]] = []
            while try stmt.step() { out.append(stmt.blob(0) ?? []) }
            return out
        }
        XCTAssertGreaterThanOrEqual(payloads.count, ids.count - 1)
        let decoder = WireDecoder(limits: WireLimits(), trusted: true)
        var texts: [String] = []
        for payload in payloads {
            let object = try XCTUnwrap(try BinaryObject(payload: payload))
            let decoded = try decoder.message(stored: object)
            XCTAssertEqual(SearchText.indexable(payload: payload), SearchText.indexable(decoded), "\(decoded.messageType) \(type(of: decoded))")
            texts.append(SearchText.indexable(decoded))
        }
        XCTAssertTrue(texts.contains(SearchText.prepare("two files\nnotes.pdf\nplan b.txt")), "\(texts)")
        XCTAssertTrue(texts.contains("A poll"))
        XCTAssertTrue(texts.contains("Creme caramel") || texts.contains("Crème caramel"))
        XCTAssertNil(SearchText.indexable(payload: [0x01, 0x02]), "bytes that are no stored object")
    }

    // MARK: - Options, order, paging

    func testOptionsNarrowTheSearchAndPagesNeverRepeat() async throws {
        let h = try ReadHarness()
        try h.simulator.addGroup("hike", members: ["alice", "bob", "carol"])
        let direct = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 6, spacing: 60, endingAt: 10_000) { "trail map \($0)" })
        let group = Array(try h.simulator.seedConversation(inGroup: "hike", count: 6, senders: ["bob", "carol"], spacing: 60, endingAt: 20_000) { "trail snacks \($0)" })
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        _ = await h.messages { $0.set(guid: "hike").set(limit: 30) }.fetchPrevious()

        let all = try await found(h, "trail")
        XCTAssertEqual(all, (direct + group).reversed(), "newest first over every conversation")
        let inGroup = try await found(h, "trail") { $0.conversation = .group("hike") }
        XCTAssertEqual(inGroup, group.reversed())
        let withBob = try await found(h, "trail") { $0.conversation = .user("bob") }
        XCTAssertEqual(withBob, direct.reversed())
        let fromCarol = try await found(h, "trail") { $0.senderUid = "carol" }
        XCTAssertEqual(fromCarol, group.enumerated().filter { $0.offset % 2 == 1 }.map(\.element).reversed())
        let window = try await found(h, "trail") { $0.sentAfter = 10_000 - 120; $0.sentBefore = 20_000 - 240 }
        XCTAssertEqual(window, (Array(direct.suffix(3)) + Array(group.prefix(1))).reversed(), "from inclusive, before exclusive")
        let oldest = try await found(h, "trail") { $0.order = .oldestFirst }
        XCTAssertEqual(oldest, direct + group)
        let types = try await found(h, "trail") { $0.types = ["image"] }
        XCTAssertEqual(types, [])
        let categories = try await found(h, "trail") { $0.categories = ["message"] }
        XCTAssertEqual(categories.count, 12)

        // Pages of 5: every hit once, in order, then no cursor.
        var options = CachedSearchOptions()
        options.limit = 5
        let (paged, pages) = try await allPages(h, "trail", options)
        XCTAssertEqual(paged, all)
        XCTAssertEqual(pages, 3)
    }

    /// A word with many hits is answered by walking the time index (`timeWalkThreshold`): the
    /// pages are the same, in the same order, as the plan that reads every hit.
    func testAFrequentWordPagesInTimeOrderWhicheverPlanAnswers() async throws {
        let h = try ReadHarness()
        let bob = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 200, spacing: 60, endingAt: 100_000) { "common bob \($0)" })
        let carol = Array(try h.simulator.seedConversation(between: "alice", and: "carol", count: 200, spacing: 60, endingAt: 100_030) { "common carol \($0)" })
        await h.login()
        for uid in ["bob", "carol"] {
            let request = h.messages { $0.set(uid: uid).set(limit: 100) }
            _ = await request.fetchPrevious()
            _ = await request.fetchPrevious()
        }
        await h.vault.waitForSearchIndex()
        XCTAssertGreaterThanOrEqual(bob.count + carol.count, SearchEngine.timeWalkThreshold)
        let expected = zip(bob, carol).flatMap { [$0.0, $0.1] }   // carol's are 30 s later each time
        for order in [CachedSearchOrder.newestFirst, .oldestFirst] {
            var options = CachedSearchOptions()
            options.order = order
            options.limit = 70
            let paged = try await allPages(h, "common", options).ids
            XCTAssertEqual(paged, order == .newestFirst ? expected.reversed() : expected, "\(order)")
        }
        // The same statement without the walk answers the same first page.
        let cache = try XCTUnwrap(h.vault.openCache)
        let query = try SearchQuery("common")
        let (walked, read) = try cache.reader.sync { db -> ([Int64], [Int64]) in
            func ids(_ walk: Bool) throws -> [Int64] {
                let (sql, args) = SearchEngine.statement(query, options: CachedSearchOptions(), limit: 20, me: "alice", walkTime: walk)
                let stmt = try db.prepare(sql)
                try stmt.bind(args)
                var out: [Int64] = []
                while try stmt.step() { out.append(stmt.int64(Int32(MessageRow.read.count))) }
                return out
            }
            return (try ids(true), try ids(false))
        }
        XCTAssertEqual(walked, read)
        XCTAssertEqual(walked.count, 20)
    }

    func testRelevanceRanksMoreOfTheWordsFirstAndPagesThroughAll() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 5) {
            ["kayak", "kayak kayak kayak", "a long message that mentions a kayak only once among many other words here", "kayak kayak", "nothing"][$0]
        })
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        let ranked = try await found(h, "kayak") { $0.order = .relevance }
        XCTAssertEqual(ranked, [ids[1], ids[3], ids[0], ids[2]])
        var options = CachedSearchOptions()
        options.order = .relevance
        options.limit = 1
        let paged = try await allPages(h, "kayak", options).ids
        XCTAssertEqual(paged, ranked)
    }

    // MARK: - What is found, what is shown

    func testCaptionsFileNamesAndDeclaredTextAreFoundNeverCustomData() async throws {
        let h = try ReadHarness()
        let photo = try h.simulator.post(.media(.image, attachments: [
            SimulatedAttachment(name: "sunset_beach.jpg", mimeType: "image/jpeg", url: "https://media.test/sunset.jpg", size: 10)],
            caption: "Evening at the lake"), from: "bob", to: .user("alice"))
        let place = try h.simulator.post(.custom(type: "location", data: ["label": "secretvalley"], conversationText: "Shared a location"),
                                         from: "bob", to: .user("alice"))
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: 30) }.fetchPrevious()
        let lake = try await found(h, "lake")
        XCTAssertEqual(lake, [photo])
        let sunset = try await found(h, "sunset*")
        XCTAssertEqual(sunset, [photo])
        let location = try await found(h, "location")
        XCTAssertEqual(location, [place])
        let secret = try await found(h, "secretvalley")
        XCTAssertEqual(secret, [], "the app's custom data is never indexed")
        let lakePage = try await h.vault.searchCachedMessages("lake")
        let hit = try XCTUnwrap(lakePage.hits.first)
        XCTAssertEqual(hit.text, "Evening at the lake\nsunset_beach.jpg")
        XCTAssertEqual(hit.snippet, "Evening at the lake sunset_beach.jpg")
        XCTAssertEqual(hit.snippetMatches.map { String(hit.snippet[$0]) }, ["lake"])
    }

    func testMatchesAndSnippetsPointAtTheWordsAsWritten() throws {
        func marks(_ query: String, _ text: String) throws -> [String] {
            let needles = SearchHighlights.needles(try SearchQuery(query))
            return SearchHighlights.ranges(of: needles, in: text).map { String(text[$0]) }
        }
        XCTAssertEqual(try marks("creme brul*", "La Crème brûlée est là"), ["Crème", "brûlée"])
        XCTAssertEqual(try marks("\"creme brulee\"", "crème, brûlée; crème seule"), ["crème, brûlée"])
        XCTAssertEqual(try marks("isik", "IŞIK ve ışık"), ["IŞIK", "ışık"])
        XCTAssertEqual(try marks("タワー", "東京タワーの近く"), ["タワー"])
        XCTAssertEqual(try marks("京", "東京 and 京都"), ["京", "京"])
        XCTAssertEqual(try marks("linux -windows", "Linux, linux!"), ["Linux", "linux"])
        let long = (0..<40).map { "word\($0)" }.joined(separator: " ") + " target " + (0..<40).map { "tail\($0)" }.joined(separator: " ")
        let needles = SearchHighlights.needles(try SearchQuery("target"))
        let matches = SearchHighlights.ranges(of: needles, in: long)
        let (snippet, inSnippet) = SearchHighlights.snippet(of: long, matches: matches)
        XCTAssertTrue(snippet.hasPrefix("…") && snippet.hasSuffix("…"), snippet)
        XCTAssertLessThan(snippet.count, 110)
        XCTAssertEqual(inSnippet.map { String(snippet[$0]) }, ["target"])
        XCTAssertFalse(snippet.contains("word0 "), "cut before the match")
    }

    /// Whatever is typed: a typed error or an answer, never an SQL error or a crash.
    func testHostileQueriesThroughThePublicAPI() async throws {
        let h = try ReadHarness()
        _ = try await cachedCorpus(h)
        for text in ["", "   ", "\"\"", "*", "-linux", String(repeating: "x", count: 10_000), (0..<40).map { "w\($0)" }.joined(separator: " ")] {
            do {
                _ = try await h.vault.searchCachedMessages(text)
                XCTFail("\(text.prefix(20)) should be refused")
            } catch {
                XCTAssertEqual(error.errorCode, OfflineErrorCode.invalidSearchQuery.rawValue)
                XCTAssertFalse(error.errorDescription.contains("SQL"))
            }
        }
        for text in ["linux OR", "body:linux", "(linux)", "NEAR/2", "'; DROP TABLE messages; --", "linux\u{0}", "🍕", "x*****", "^linux"] {
            do {
                _ = try await h.vault.searchCachedMessages(text)
            } catch {
                XCTAssertEqual(error.errorCode, OfflineErrorCode.invalidSearchQuery.rawValue, text)
                XCTAssertEqual(error.details, "empty", "\(text): nothing but symbols")
            }
        }
        let orWord = try await found(h, "linux OR")
        XCTAssertEqual(orWord.count, 1, "OR is a word to find, not an operator")
    }

    func testWithoutAnOpenCacheASearchIsRefused() async throws {
        let h = try ReadHarness()
        do {
            _ = try await h.vault.searchCachedMessages("anything")
            XCTFail("no cache is open")
        } catch {
            XCTAssertEqual(error.errorCode, OfflineErrorCode.offlineDisabled.rawValue)
        }
        XCTAssertNil(h.vault.searchIndexProgress())
    }

    /// The index and the queries stay inside the encrypted file: after indexing and searching,
    /// no file under the cache root (the database, its WAL and shm, media, anything) holds a word
    /// of the messages or of the query in clear.
    func testNothingOfTheIndexOrTheQueryLeavesTheEncryptedFile() async throws {
        let h = try ReadHarness()
        let marker = "Zyxwvmarker"
        _ = try h.simulator.seedConversation(between: "alice", and: "bob", count: 50) { "\(marker)\($0 % 3) searchable words \($0)" }
        await h.login()
        _ = await h.messages { $0.set(uid: "bob").set(limit: 50) }.fetchPrevious()
        await h.vault.waitForSearchIndex()
        let hits = try await found(h, "\(marker.lowercased())1")
        XCTAssertEqual(hits.count, 17)
        _ = try await found(h, "zyxwvmark*")
        for needle in [marker, marker.lowercased(), "searchable"] {
            XCTAssertEqual(Self.files(containing: needle, under: h.root.path), [], needle)
        }
    }

    /// Every regular file under `path` whose bytes hold `marker`.
    static func files(containing marker: String, under path: String) -> [String] {
        var hits: [String] = []
        guard let walker = FileManager.default.enumerator(atPath: path) else { return [] }
        while let relative = walker.nextObject() as? String {
            let full = "\(path)/\(relative)"
            var st = stat()
            guard lstat(full, &st) == 0, st.st_mode & S_IFMT == S_IFREG, let data = FileManager.default.contents(atPath: full) else { continue }
            if data.range(of: Data(marker.utf8)) != nil { hits.append(relative) }
        }
        return hits
    }
}

/// A damaged page of the search index is repaired, never a reset of the cache (issue 24): the
/// index is derived, so it is dropped and built again; the messages and the outbox stay.
final class SearchIndexDamageTests: XCTestCase {
    /// A cache of `count` cached messages, its index complete, closed; answers the harness, the
    /// ids and the file's path and page size.
    func damagedIndexCache(adjust: @escaping (inout VaultSettings) -> Void = { _ in }) async throws -> (ReadHarness, [Int], CacheDirectory) {
        let h = try ReadHarness(settings: adjust)
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 200) { "harbour crane \($0)" })
        await h.login()
        let request = h.messages { $0.set(uid: "bob").set(limit: 100) }
        _ = await request.fetchPrevious()
        _ = await request.fetchPrevious()
        await h.vault.waitForSearchIndex()
        let cache = try XCTUnwrap(h.vault.openCache)
        let (root, pageSize) = try cache.writer.sync { db in
            (try db.scalarInt("SELECT rootpage FROM sqlite_master WHERE name = 'search_index_segdir'") ?? 0,
             try db.scalarInt("PRAGMA page_size") ?? 0)
        }
        let directory = cache.directory
        await h.vault.logout()
        XCTAssertGreaterThan(root, 1)
        // The index's page overwritten in the middle (its HMAC fails: SQLCipher refuses it).
        Damage.overwrite(directory.database, at: Int(root - 1) * Int(pageSize) + 512, count: 256)
        return (h, ids, directory)
    }

    final class Resets: OfflineCacheResetListener {
        let calls = Mutex(0)
        func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) { calls.withLock { $0 += 1 } }
    }

    /// The repair accepts only pages nothing references, as either engine words it.
    func testOnlyUnreferencedPagesAsEitherEngineReportsThemPassTheRepairsTrial() {
        for line in ["*** in database main ***", "Page 31 is never used", "Page 7: never used"] {
            XCTAssertTrue(SearchIndexRepair.isUnreferencedPage(line), line)
        }
        for line in ["Page 31: btreeInitPage() returns error code 11", "On tree page 4 cell 2: invalid page number 99",
                     "Page x is never used", "Page : never used", "row 3 missing from index messages_by_time", "ok"] {
            XCTAssertFalse(SearchIndexRepair.isUnreferencedPage(line), line)
        }
    }

    func testADamagedIndexPageFoundDuringTheOpenIsRepairedNotReset() async throws {
        let (h, ids, directory) = try await damagedIndexCache()
        let resets = Resets()
        h.vault.addOfflineCacheResetListener("resets", resets)
        h.client.network = .offline
        let attempt = await h.vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .ready)
        XCTAssertEqual(attempt.resets.count, 0, "never a reset for the index")
        XCTAssertTrue(attempt.notes.contains { $0.contains("search index was damaged") }, "\(attempt.notes)")
        h.callbacks.sync {}
        XCTAssertEqual(resets.calls.withLock { $0 }, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.quarantine + "/entries"), "nothing quarantined")
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), ids, "every message kept")
        await h.vault.waitForSearchIndex()
        let page = try await h.vault.searchCachedMessages("crane", options: { var o = CachedSearchOptions(); o.limit = 100; return o }())
        XCTAssertEqual(page.hits.count, 100)
        XCTAssertTrue(page.indexComplete)
        let all = try await h.vault.searchCachedMessages("harbour 17")
        XCTAssertEqual(all.hits.map(\.message.id), [ids[17]])
        let check = try XCTUnwrap(h.vault.openCache).writer.sync { db in try IntegrityCheck.problems(db) }
        XCTAssertEqual(check, [])
    }

    /// A large cache opens before its check; the check finds the damage after ready, and the
    /// reopen it causes repairs the index instead of resetting.
    func testADamagedIndexPageFoundByTheBackgroundCheckIsRepairedNotReset() async throws {
        let (h, ids, _) = try await damagedIndexCache { $0.synchronousIntegrityCheckLimit = 0 }
        let resets = Resets()
        h.vault.addOfflineCacheResetListener("resets", resets)
        h.client.network = .offline
        let attempt = await h.vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .ready)
        let check = await h.vault.waitForIntegrityCheck(timeout: .seconds(60))
        XCTAssertEqual(check.result, .repaired)
        XCTAssertEqual(check.reopen?.resets.count, 0)
        h.callbacks.sync {}
        XCTAssertEqual(resets.calls.withLock { $0 }, 0)
        XCTAssertEqual(try h.cachedIds("alice_user_bob"), ids)
        await h.vault.waitForSearchIndex()
        let found = try await h.vault.searchCachedMessages("harbour 42")
        XCTAssertEqual(found.hits.map(\.message.id), [ids[42]])
    }
}
