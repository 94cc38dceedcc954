import ChatVault
import Foundation
import VaultStore

/// `chatvault bench search [--runs N] [--messages M] [--ingest-messages I] [--ingest-runs R] [--json]`
///
/// Measures local search (issue 24) on an encrypted cache of `M` messages (default 100,000 in 100
/// conversations; `SearchBenchFixture`, text with words at a realistic spread: `SearchBenchText`),
/// through the public API, each figure beside its floors measured in the same run on the same file:
///
/// - **Queries** (`SearchBenchQuery.all`): one word over everything at three frequencies (rare,
///   medium, common), two words in one conversation, a prefix of 3 letters and of 5 (the index has
///   no prefix index: both read every term they cover), the first page of 20 results of two words over
///   everything, and the common word by relevance (no budget). Each is timed three ways, in turn,
///   on the cache's reader connection, N runs (default 200) after 10 warm-ups, one query after
///   the other (so each meets SQLite's page cache as it leaves it: warm, unless its own rows do not
///   fit the reader's 16 MiB cache):
///   - `bareMatch` (floor): `SELECT docid FROM search_index WHERE search_index MATCH ?`, every
///     docid stepped through: what the FTS4 index alone costs;
///   - `sqlAlone` (floor): the engine's statement (`SearchEngine.statement`'s documented shape:
///     the same filters, order and limit, 21 rows), the rows' columns read and the payloads copied,
///     nothing decoded: what SQLite costs for the whole query;
///   - `publicAPI`: `vault.searchCachedMessages(query, options)` (limit 20) from the call to its
///     return: parsing, the reader hop, the SQL, decoding, the index progress, media hydration,
///     matches and snippets.
///   The floor's page and the public call's must hold the same messages (else exit 1). Beside
///   them, `progressCount`: what each search reads for its `indexProgress`
///   (`SearchIndexRows.quickProgress`), timed alone on the reader with its page cache dropped.
/// - **Ingest with the index** (`ingest`): `I` messages (default min(M, 20,000)) of the sync
///   benchmark's log (`SyncBenchLog`, this text) into a fresh encrypted cache, pages of 2000
///   prepared beforehand (`SyncPageRows.prepare`, as the sync engine prepares them off the writer)
///   and written as the sync engine writes them (`SyncPageRows.write`, one transaction each),
///   R runs (default 5) with the index kept and R with it off (the TEMP `search_*` triggers
///   dropped on that cache's writer connection and its row recording stopped: the rows are written
///   and nothing else), alternating; medians of messages per second over the writes' time. Beside
///   them, R runs of a floor for the index's upkeep (`perPage`): the upkeep off as above, and each
///   page's rows indexed in the page's own transaction by one `INSERT INTO search_index … SELECT …
///   ORDER BY row_id` after the page is written: what keeping the index costs when FTS4 is handed
///   a page's rows at once, in docid order, by code that knows which rows the page wrote. And,
///   after each run without the index (not timed: its rows' texts computed into a TEMP table),
///   FTS4 alone writing those texts, page by page, one transaction each, timed: added to that
///   run's time it is the rate no upkeep of this index can beat (`ftsAloneFloor`); and the
///   index's function alone over the same rows (`functionMicrosPerMessage`).
/// - **Index size** (`size`): the cache `VACUUM`ed, its pages counted; the index dropped and
///   recreated empty (`SearchIndexSchema.recreate`), `VACUUM`, counted again: the index's pages
///   are the difference (SQLCipher 3.4.1 has no `dbstat`). Then again after the rebuild below.
/// - **Building the index** (`build`): with the index emptied as above, a logout and a login; the
///   background build indexes the whole cache: the time from the login until the index is complete
///   (`waitForSearchIndex()`, asked again until the file says so; the login, a few milliseconds,
///   included), the rate, and the peak resident
///   memory meanwhile (`VmHWM`, reset just before the login through `/proc/self/clear_refs`)
///   above the resident memory at that moment.
///
/// Budgets (issue 24; medians of one run on the 2-core machine, 100,000 messages): public call
/// ≤ 5 ms for a one-word query over everything (each frequency), ≤ 2 ms for two words in one
/// conversation, ≤ 20 ms for a prefix query (both), ≤ 15 ms for the first page of 20 results with
/// snippets; ingest with the index ≥ 0.75 × without it; the index ≤ 60 % of the database without it
/// (the larger of the two sizes measured); building it peaks ≤ 64 MiB above the baseline. A missed
/// budget is said in words with its floors.
///
/// Exit status 0 when all hold, 1 when one does not or the benchmark cannot run, 2 on a usage
/// error. `--messages` shrinks everything for tests (the figures then mean little). For figures to
/// quote, use a release build: `CHATVAULT_BUILD_CONFIGURATION=release Scripts/chatvault bench search`.
///
/// `--json` prints one object with these stable fields (times in milliseconds):
///
///     benchmark        "search"
///     build            "debug" | "release"
///     engine           { cipher, sqlite }
///     messages, conversations, runs, warmupRuns, limit (20)
///     cache            { pageSize, databasePages, bytesOnDisk, seedSeconds, seedMessagesPerSecond }
///     queries          [ { id, title, query, match, scope ("everything" | "conversation"), order,
///                          indexHits (docids the MATCH finds), matchingMessages (after the
///                          engine's filters), pageRows, budget (kind or null), maxMs (or null),
///                          bareMatch, sqlAlone, publicAPI: { runs, medianMs, p90Ms, minMs, maxMs },
///                          publicOverSqlAlone, plan (EXPLAIN QUERY PLAN of the engine's statement) } ]
///     progressCount    { runs, medianMs, p90Ms, minMs, maxMs }
///     ingest           { messages, pageSize, runs, withIndex, withoutIndex, perPageFloor:
///                          { medianMessagesPerSecond, minMessagesPerSecond, maxMessagesPerSecond },
///                        withOverWithout, perPageFloorOverWithout, ftsAloneFloor: { runs, …
///                        msg/s }, ftsAloneFloorOverWithout, functionMicrosPerMessage, triggersDropped }
///     size             { pageSize, pagesWithIndex, pagesWithoutIndex, indexPages, indexOverDatabase,
///                        pagesAfterRebuild, rebuiltIndexPages, rebuiltIndexOverDatabase }
///     indexBuild       { messages, loginMs, seconds, messagesPerSecond, baselineKiB, peakKiB,
///                        peakAboveBaselineKiB, peakReset }
///     budget           { queries: [ { id, kind, medianMs, maxMs, bareMatchMs, sqlAloneMs, withinBudget } ],
///                        queriesWithinBudget, ingestWithOverWithout, minIngestWithOverWithout: 0.75,
///                        ingestWithinBudget, indexOverDatabase, maxIndexOverDatabase: 0.6,
///                        sizeWithinBudget, buildPeakAboveBaselineMiB, maxBuildPeakAboveBaselineMiB: 64,
///                        memoryWithinBudget, withinBudget, failures: [human-readable strings] }
///                      (a figure that could not be measured is null and fails its check)
///
/// Prints the query words (the benchmark's own) and no message text.
enum SearchBenchCommand {
    static let defaultRuns = 200
    static let warmups = 10
    static let defaultMessages = 100_000
    static let defaultRunsIngest = 5

    struct Sizing {
        var runs: Int
        var messages: Int
        var ingestMessages: Int
        var ingestRuns: Int
    }

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let json = args.flag("json")
        let runs = try args.int("runs", default: defaultRuns, range: 1...100_000)
        let messages = try args.int("messages", default: defaultMessages, range: 100...1_000_000)
        let ingestMessages = try args.int("ingest-messages", default: min(messages, 20_000), range: 100...1_000_000)
        let ingestRuns = try args.int("ingest-runs", default: defaultRunsIngest, range: 1...100)
        try args.rejectUnknown()
        let sizing = Sizing(runs: runs, messages: messages, ingestMessages: ingestMessages, ingestRuns: ingestRuns)

        let scratch = try ScenariosCommand.makePrivateDirectory()
        let progress = Progress(json: json)
        let report = try await SearchBenchmark(sizing: sizing, root: scratch.path, progress: progress).run()
        withExtendedLifetime(scratch) {}
        return finish(report, json: json)
    }
}

/// Runs the measurements in order: seed, queries, size, build, ingest.
struct SearchBenchmark {
    let sizing: SearchBenchCommand.Sizing
    let root: String
    let progress: Progress

    /// One query's figures.
    struct QueryResult {
        let query: SearchBenchQuery
        let indexHits: Int
        let matchingMessages: Int
        let pageRows: Int
        let bareMatch: TimingSummary
        let sqlAlone: TimingSummary
        let publicAPI: TimingSummary
        let plan: [String]

        var publicOverSqlAlone: Double { publicAPI.medianMs / sqlAlone.medianMs }
    }

    struct CacheFigures {
        let pageSize: Int
        let databasePages: Int
        let bytesOnDisk: Int64
        let seedSeconds: Double
    }

    struct Size {
        let pageSize: Int
        let pagesWithIndex: Int
        let pagesWithoutIndex: Int
        let pagesAfterRebuild: Int

        var indexPages: Int { pagesWithIndex - pagesWithoutIndex }
        var rebuiltIndexPages: Int { pagesAfterRebuild - pagesWithoutIndex }
        var indexOverDatabase: Double { Double(indexPages) / Double(pagesWithoutIndex) }
        var rebuiltIndexOverDatabase: Double { Double(rebuiltIndexPages) / Double(pagesWithoutIndex) }
    }

    struct Build {
        let messages: Int
        let loginMs: Double
        let seconds: Double
        let baselineKiB: Int
        let peakKiB: Int
        let peakReset: Bool

        var messagesPerSecond: Double { Double(messages) / seconds }
        var peakAboveKiB: Int { max(peakKiB - baselineKiB, 0) }
    }

    struct Ingest {
        /// How the index is kept while a cache ingests.
        enum Mode: CaseIterable {
            /// By the engine's triggers and row recording (what an app runs).
            case withIndex
            /// Not at all: the triggers dropped, the recording stopped.
            case withoutIndex
            /// The floor: upkeep off, each page's rows indexed by one statement in docid order.
            case perPage
        }

        let messages: Int
        let pageSize: Int
        let runs: Int
        let withIndex: [Double]
        let withoutIndex: [Double]
        let perPage: [Double]
        /// Per run without the index: the rate had FTS4 alone written the page's texts in its
        /// transactions (that run's time plus FTS4's), and the function's time per message.
        let ftsAlone: [Double]
        let functionMicros: [Double]
        let triggersDropped: [String]

        static func median(_ rates: [Double]) -> Double { rates.isEmpty ? .nan : TimingSummary(rates).medianMs }
        var withMedian: Double { Self.median(withIndex) }
        var withoutMedian: Double { Self.median(withoutIndex) }
        var perPageMedian: Double { Self.median(perPage) }
        var ratio: Double { withMedian / withoutMedian }
        var perPageRatio: Double { perPageMedian / withoutMedian }
        var ftsAloneMedian: Double { Self.median(ftsAlone) }
        var ftsAloneRatio: Double { ftsAloneMedian / withoutMedian }
        var functionMicrosMedian: Double { Self.median(functionMicros) }
    }

    func run() async throws -> SearchBenchReport {
        progress.show("seeding \(sizing.messages) messages…")
        let fixture = try await SearchBenchFixture.make(root: root, messages: sizing.messages)
        let queries: [QueryResult]
        let count: TimingSummary
        let cacheFigures: CacheFigures
        let size: Size
        let build: Build
        do {
            let cache = try fixture.cache()
            cacheFigures = try cache.reader.sync { db in
                CacheFigures(pageSize: Int(try db.scalarInt("PRAGMA page_size") ?? 0), databasePages: Int(try db.scalarInt("PRAGMA page_count") ?? 0),
                             bytesOnDisk: cache.bytesOnDisk(), seedSeconds: fixture.seedSeconds)
            }
            progress.show("timing queries…")
            (queries, count) = try await timeQueries(fixture)
            progress.show("measuring the index's size…")
            let (withIndex, withoutIndex) = try measureSizeAndEmpty(fixture)
            progress.show("building the index of \(sizing.messages) messages…")
            build = try await timeBuild(fixture)
            let afterRebuild = try vacuumedPages(try fixture.cache())
            size = Size(pageSize: cacheFigures.pageSize, pagesWithIndex: withIndex, pagesWithoutIndex: withoutIndex, pagesAfterRebuild: afterRebuild)
        } catch {
            await fixture.close()
            throw error
        }
        await fixture.close()
        try? FileManager.default.removeItem(atPath: "\(root)/search")
        progress.show("ingest with and without the index…")
        let ingest = try await timeIngest()
        progress.show("")
        return SearchBenchReport(sizing: sizing, conversations: fixture.conversations, cache: cacheFigures, queries: queries,
                                 progressCount: count, ingest: ingest, size: size, build: build)
    }

    // MARK: queries

    private func timeQueries(_ fixture: SearchBenchFixture) async throws -> ([QueryResult], TimingSummary) {
        let cache = try fixture.cache()
        let all = SearchBenchQuery.all
        var bare: [[Double]] = Array(repeating: [], count: all.count)
        var sql: [[Double]] = Array(repeating: [], count: all.count)
        var api: [[Double]] = Array(repeating: [], count: all.count)
        var counts: [Double] = []
        var pageRows = Array(repeating: 0, count: all.count)
        let clock = ContinuousClock()
        // One query after the other, so each is timed with SQLite's cache as that query leaves it
        // (a query whose rows do not fit the reader's page cache reads them again every time).
        for k in all.indices {
            let query = all[k]
            let (statement, args) = query.engineSQL(fixture)
            let options = query.options(fixture)
            for iteration in 0..<(SearchBenchCommand.warmups + sizing.runs) {
                // Bare MATCH: every docid.
                var start = clock.now
                let hits = try cache.reader.sync { db in try Self.bareMatch(query.match, in: db) }
                let bareMs = (clock.now - start).milliseconds
                // The engine's SQL, nothing decoded.
                start = clock.now
                let floorPage = try cache.reader.sync { db in try Self.sqlAlone(statement, args, in: db) }
                let sqlMs = (clock.now - start).milliseconds
                // The public call.
                start = clock.now
                let page: CachedSearchPage
                do {
                    page = try await fixture.vault.searchCachedMessages(query.text, options: options)
                } catch {
                    throw CLIError.failure("the search '\(query.text)' failed: \(error.errorCode) (\(error.errorDescription))")
                }
                let apiMs = (clock.now - start).milliseconds
                let ids = page.hits.map(\.message.id)
                guard ids == Array(floorPage.prefix(SearchBenchQuery.limit)), page.indexComplete,
                      page.hits.allSatisfy({ !$0.snippet.isEmpty && !$0.snippetMatches.isEmpty }) else {
                    throw CLIError.failure("the search '\(query.text)' returned \(ids.count) messages (index complete: \(page.indexComplete)), not the \(min(floorPage.count, SearchBenchQuery.limit)) its SQL finds, each with a snippet around a match")
                }
                if hits < floorPage.count { throw CLIError.failure("the bare MATCH of '\(query.text)' found fewer rows than the page") }
                if iteration >= SearchBenchCommand.warmups {
                    bare[k].append(bareMs)
                    sql[k].append(sqlMs)
                    api[k].append(apiMs)
                    pageRows[k] = ids.count
                }
            }
        }
        // What each search also pays for its `indexProgress` (`SearchIndexRows.quickProgress`),
        // with the page cache dropped first (as the queries above leave it, the engine's SQL alone
        // reading every hit's row).
        for iteration in 0..<(SearchBenchCommand.warmups + sizing.runs) {
            try cache.reader.sync { db in db.dropPageCache() }
            let start = clock.now
            _ = try cache.reader.sync { db in try SearchIndexRows.quickProgress(in: db) }
            if iteration >= SearchBenchCommand.warmups { counts.append((clock.now - start).milliseconds) }
        }
        var results: [QueryResult] = []
        for (k, query) in all.enumerated() {
            let (countSQL, countArgs) = query.countSQL(fixture)
            let (statement, args) = query.engineSQL(fixture)
            let (hits, matching, plan) = try cache.reader.sync { db in
                let hits = try Self.bareMatch(query.match, in: db)
                let stmt = try db.prepare(countSQL)
                try stmt.bind(countArgs)
                _ = try stmt.step()
                let matching = stmt.int(0)
                return (hits, matching, try Self.plan(statement, args, in: db))
            }
            results.append(QueryResult(query: query, indexHits: hits, matchingMessages: matching, pageRows: pageRows[k],
                                       bareMatch: TimingSummary(bare[k]), sqlAlone: TimingSummary(sql[k]),
                                       publicAPI: TimingSummary(api[k]), plan: plan))
        }
        return (results, TimingSummary(counts))
    }

    /// Every docid the `MATCH` finds; returns how many.
    static func bareMatch(_ match: String, in db: Database) throws -> Int {
        let stmt = try db.cached(SearchBenchQuery.bareMatchSQL)
        try stmt.bind([.text(match)])
        defer { stmt.reset() }
        var rows = 0
        var sum = 0
        while try stmt.step() {
            rows += 1
            sum &+= stmt.int(0)
        }
        withExtendedLifetime(sum) {}
        return rows
    }

    /// The engine's statement, every column of every row read (payloads copied), nothing decoded;
    /// returns the rows' server ids in order.
    static func sqlAlone(_ sql: String, _ args: [DatabaseValue], in db: Database) throws -> [Int] {
        let stmt = try db.cached(sql)
        try stmt.bind(args)
        defer { stmt.reset() }
        var ids: [Int] = []
        var payloadBytes = 0
        var others = 0
        while try stmt.step() {
            payloadBytes += stmt.blob(0)?.count ?? 0
            others &+= stmt.int(1) &+ stmt.int(2) &+ (stmt.text(3)?.utf8.count ?? 0) &+ stmt.int(4) &+ stmt.int(6)
            ids.append(stmt.int(5))
        }
        withExtendedLifetime(others) {}
        guard payloadBytes > 0 || ids.isEmpty else { throw CLIError.failure("the search's SQL found rows without payloads") }
        return ids
    }

    /// `EXPLAIN QUERY PLAN` of a statement: its steps' details, in order.
    static func plan(_ sql: String, _ args: [DatabaseValue], in db: Database) throws -> [String] {
        let stmt = try db.prepare("EXPLAIN QUERY PLAN " + sql)
        try stmt.bind(args)
        var steps: [String] = []
        while try stmt.step() { steps.append(stmt.text(stmt.columnCount - 1) ?? "") }
        return steps
    }

    // MARK: size and build

    /// The cache's pages after `VACUUM` (free pages returned, every b-tree packed).
    private func vacuumedPages(_ cache: VaultCache) throws -> Int {
        try cache.writer.sync { db in
            try db.execute("VACUUM")
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return Int(try db.scalarInt("PRAGMA page_count") ?? 0)
        }
    }

    /// The cache's pages with its index, then with the index emptied (`SearchIndexSchema.recreate`:
    /// dropped and created again, the build's cursor forgotten), each after `VACUUM`.
    private func measureSizeAndEmpty(_ fixture: SearchBenchFixture) throws -> (Int, Int) {
        let cache = try fixture.cache()
        let with = try vacuumedPages(cache)
        try cache.writer.sync { db in try db.transaction { try SearchIndexSchema.recreate(db) } }
        let without = try vacuumedPages(cache)
        let left = try cache.reader.sync { db in Int(try db.scalarInt("SELECT count(*) FROM search_index_docsize") ?? -1) }
        guard left == 0 else { throw CLIError.failure("the emptied index still holds \(left) rows") }
        return (with, without)
    }

    /// Logs out and in again, with the index empty: the background build indexes the whole cache.
    private func timeBuild(_ fixture: SearchBenchFixture) async throws -> Build {
        await fixture.vault.logout()
        let reset = ResidentMemory.resetPeak()
        let baseline = ResidentMemory.read()?.rssKiB ?? 0
        let clock = ContinuousClock()
        let start = clock.now
        let attempt = await fixture.vault.login(userId: SearchBenchFixture.me)
        let loggedIn = clock.now
        guard fixture.vault.openCache != nil else {
            throw CLIError.failure("the search benchmark's cache did not open again: \(attempt.state.code)")
        }
        try await SearchBenchFixture.waitForCompleteIndex(fixture.vault)
        let end = clock.now
        let peak = ResidentMemory.read()?.peakKiB ?? 0
        let indexed = try fixture.cache().reader.sync { db in Int(try db.scalarInt("SELECT count(*) FROM search_index_docsize") ?? 0) }
        guard indexed == fixture.messages else {
            throw CLIError.failure("the build indexed \(indexed) of \(fixture.messages) messages")
        }
        return Build(messages: fixture.messages, loginMs: (loggedIn - start).milliseconds, seconds: (end - start).milliseconds / 1_000,
                     baselineKiB: baseline, peakKiB: peak, peakReset: reset)
    }

    // MARK: ingest

    /// Fresh caches, written as the sync engine writes, with and without the index, alternating.
    private func timeIngest() async throws -> Ingest {
        let pageSize = SyncBenchmark.defaultPageSize
        let log = SyncBenchLog()
        var pages: [ChangeLogPage] = []
        var next = 1
        while next <= sizing.ingestMessages {
            let count = min(pageSize, sizing.ingestMessages - next + 1)
            let changes = (next..<(next + count)).map { i in
                ChangeLogEntry.messageUpserted(SearchBenchFixture.replacingText(log.message(i), with: SearchBenchText.body(i)))
            }
            let last = next + count - 1
            pages.append(ChangeLogPage(changes: changes, nextToken: "bench-\(last)", serverTime: Int64(SyncBenchLog.sentAt(last)),
                                       hasMore: last < sizing.ingestMessages))
            next += count
        }
        var rates: [Ingest.Mode: [Double]] = [:]
        var ftsAlone: [Double] = []
        var functionMicros: [Double] = []
        var dropped: [String] = []
        let modes = Ingest.Mode.allCases
        for iteration in 0..<sizing.ingestRuns {
            for offset in modes.indices {
                let mode = modes[(iteration + offset) % modes.count]
                let id = "ingest-\(mode)-\(iteration)"
                let run = try await ingestRun(id, pages: pages, mode: mode)
                rates[mode, default: []].append(run.rate)
                if mode == .withoutIndex {
                    dropped = run.dropped
                    if let floor = run.ftsAloneRate { ftsAlone.append(floor) }
                    if let micros = run.functionMicros { functionMicros.append(micros) }
                }
                try? FileManager.default.removeItem(atPath: "\(root)/\(id)")
            }
        }
        return Ingest(messages: sizing.ingestMessages, pageSize: pageSize, runs: sizing.ingestRuns, withIndex: rates[.withIndex] ?? [],
                      withoutIndex: rates[.withoutIndex] ?? [], perPage: rates[.perPage] ?? [], ftsAlone: ftsAlone,
                      functionMicros: functionMicros, triggersDropped: dropped)
    }

    private struct IngestRun {
        var rate: Double
        var dropped: [String]
        var ftsAloneRate: Double?
        var functionMicros: Double?
    }

    private func ingestRun(_ id: String, pages: [ChangeLogPage], mode: Ingest.Mode) async throws -> IngestRun {
        let (vault, cache) = try await openBenchVault(id, root: root, encryption: true, user: SyncBenchLog.me)
        do {
            // The empty cache's build done before the clock starts (it must not run during the ingest).
            try await SearchBenchFixture.waitForCompleteIndex(vault)
            var dropped: [String] = []
            if mode != .withIndex {
                dropped = try cache.writer.sync { db in
                    let names = try db.texts("SELECT name FROM sqlite_temp_master WHERE type = 'trigger' AND tbl_name = 'messages' AND name LIKE 'search%'")
                    for name in names { try db.execute("DROP TRIGGER temp.\(name)") }
                    db.recordWrittenRows(of: nil)
                    return names
                }
                guard !dropped.isEmpty else { throw CLIError.failure("no search trigger on the writer connection to drop") }
            }
            let limits = vault.wireLimits
            let prepared = pages.map { SyncPageRows.prepare($0, limits: limits) }
            let clock = ContinuousClock()
            var seconds = 0.0
            for (page, ready) in zip(pages, prepared) {
                let start = clock.now
                let counts = try cache.writer.sync { db in
                    try db.transaction {
                        let counts = try SyncPageRows.write(ready, me: SyncBenchLog.me, limits: limits, in: db)
                        if mode == .perPage { try Self.indexPage(page, in: db) }
                        return counts
                    }
                }
                seconds += (clock.now - start).milliseconds / 1_000
                guard counts.inserted == page.changes.count, counts.dropped == 0 else {
                    throw CLIError.failure("a page of \(page.changes.count) changes inserted \(counts.inserted) messages (\(counts.dropped) dropped)")
                }
            }
            let (rows, indexedRows) = try cache.reader.sync { db in
                (Int(try db.scalarInt("SELECT count(*) FROM messages") ?? 0),
                 Int(try db.scalarInt("SELECT count(*) FROM search_index_docsize") ?? 0))
            }
            guard rows == sizing.ingestMessages, indexedRows == (mode == .withoutIndex ? 0 : rows) else {
                throw CLIError.failure("the \(id) cache holds \(rows) messages, \(indexedRows) indexed, after ingesting \(sizing.ingestMessages)")
            }
            var run = IngestRun(rate: Double(sizing.ingestMessages) / seconds, dropped: dropped)
            if mode == .withoutIndex {
                let (fts, function) = try Self.timeFTSAlone(pages, cache: cache)
                run.ftsAloneRate = Double(sizing.ingestMessages) / (seconds + fts)
                run.functionMicros = function * 1_000_000 / Double(sizing.ingestMessages)
            }
            await vault.logout()
            return run
        } catch {
            await vault.logout()
            throw error
        }
    }

    /// FTS4's own cost on a cache ingested without the index: every row's text computed into a
    /// TEMP table (not timed), then written into the index page by page (the page's server ids),
    /// one transaction each, in docid order: the seconds FTS4 took, and the seconds the index's
    /// function takes over the same rows.
    static func timeFTSAlone(_ pages: [ChangeLogPage], cache: VaultCache) throws -> (fts: Double, function: Double) {
        let clock = ContinuousClock()
        let function = try cache.writer.sync { db in
            try db.execute("CREATE TEMP TABLE bench_texts (docid INTEGER PRIMARY KEY, server_id INTEGER, body TEXT)")
            let start = clock.now
            _ = try db.scalarInt("SELECT sum(length(\(SearchIndexSchema.function)(payload))) FROM messages")
            let seconds = (clock.now - start).milliseconds / 1_000
            try db.execute("INSERT INTO temp.bench_texts SELECT row_id, server_id, \(SearchIndexSchema.function)(payload) FROM messages")
            return seconds
        }
        var fts = 0.0
        for page in pages {
            guard let (low, high) = serverIds(page) else { continue }
            let start = clock.now
            try cache.writer.sync { db in
                try db.transaction {
                    try db.run("""
                        INSERT INTO search_index (docid, body) SELECT docid, body FROM temp.bench_texts
                        WHERE server_id BETWEEN ? AND ? ORDER BY docid
                        """, .int(low), .int(high))
                }
            }
            fts += (clock.now - start).milliseconds / 1_000
        }
        return (fts, function)
    }

    /// The lowest and highest server id of a page's messages.
    static func serverIds(_ page: ChangeLogPage) -> (Int64, Int64)? {
        let ids = page.changes.compactMap { change -> Int64? in
            if case .messageUpserted(let wire) = change { return wire["id"]?.intValue }
            return nil
        }
        guard let low = ids.min(), let high = ids.max() else { return nil }
        return (low, high)
    }

    /// The floor's upkeep: the page's messages (their server ids are the page's) indexed by one
    /// statement, in docid order, with the engine's own function.
    static func indexPage(_ page: ChangeLogPage, in db: Database) throws {
        guard let (low, high) = serverIds(page) else { return }
        try db.run("""
            INSERT INTO search_index (docid, body) SELECT row_id, \(SearchIndexSchema.function)(payload) FROM messages
            WHERE server_id BETWEEN ? AND ? ORDER BY row_id
            """, .int(low), .int(high))
    }
}
