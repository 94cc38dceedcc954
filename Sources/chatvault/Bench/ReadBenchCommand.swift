import ChatVault
import Foundation
import Synchronization
import VaultStore

/// `chatvault bench reads [--runs N] [--messages M] [--conversations C] [--layout sync|conversation] [--json]`
///
/// Measures a cached page: the 30 newest messages of a conversation, read from a cache holding
/// `M` messages in `C` conversations (default 100,000 in 100), as `MessagesRequest.fetchPrevious`
/// serves it before asking the server, on an encrypted cache and on a plaintext one holding the
/// same messages, side by side in one process (see `ReadBenchFixture`; by default the messages are
/// written in sync order, conversations interleaved, as an app's cache fills). Designs:
///
/// - `bareSQLite`: the page's SQL alone on the cache's reader connection (the statement the
///   library runs, every column of every row read, payload bytes copied; nothing decoded): what
///   SQLite itself costs for these rows.
/// - `cachedPage`: the cached phase alone, as a request runs it on the reader connection
///   (`MessageRows.cachedPage`: the filter, the SQL page by index, every row decoded with the
///   trusted decoder into `BaseMessage`s).
/// - `fetchPreviousCachedPhase`: the whole public call, from `fetchPrevious(onCachedMessages:…)`
///   to its `onCachedMessages` callback (the request's task, the cached phase, media hydration,
///   delivery through the callback executor), against a server that cannot be reached.
/// - `filteredPage`: the same public call with `hideDeletedMessages`, `hideReplies` and
///   `set(types: ["text", "image"])`.
/// - `bareSQLiteCold`, `cachedPageCold`, `fetchPreviousCold`: the same with SQLite's page cache
///   emptied before each run (`sqlite3_db_release_memory` on the reader, outside the timing): every
///   database page the read touches is read again and, encrypted, decrypted. The operating
///   system's file cache stays warm. This is what an app meets after any write (in WAL mode a
///   commit by another connection empties the reader's cache) or on a chat not opened lately.
///
/// Warm designs read with SQLite's cache warm: each iteration reads the next conversation in turn
/// (so every conversation is read), once per cache, alternating which cache goes first; two
/// discarded passes over every conversation come first (the first opening of each conversation
/// is recorded with a commit, which empties the reader's cache; the second pass warms it). One design runs after the
/// other. Each run also counts the database pages the reader had to read (`pagesRead`).
/// Defaults: 300 runs.
///
/// For figures to quote, use a release build:
/// `CHATVAULT_BUILD_CONFIGURATION=release Scripts/chatvault bench reads` (the output says which
/// build ran). Compare ratios from one run; quote medians (shared/reference/performance-budget.md).
///
/// Budgets (shared/reference/performance-budget.md, revised 2026-12-04: each figure against a
/// floor measured beside it in the same run), all on the encrypted cache:
/// - warm: `cachedPage` (the internal page: SQLite read + decode) median ≤ 1 ms, and
///   `fetchPreviousCachedPhase` (the public call) median ≤ 2× that `cachedPage` median;
/// - cold: `cachedPageCold` and `fetchPreviousCold`, encrypted / plaintext each ≤ the engine's own
///   cold-read ratio on the same pages (`bareSQLiteCold` encrypted / plaintext: SQLCipher reading
///   the same pages cold, nothing decoded) + 0.1.
///
/// Exit status 0 when all hold, 1 when one does not (each failure said in words, beside its floor,
/// and listed in `budget.failures`) or the benchmark cannot run, 2 on a usage error.
///
/// `--json` prints one object with these stable fields (times in milliseconds):
///
///     benchmark          "reads"
///     layout             "sync" | "conversation"
///     runs               measured runs per design and cache
///     warmupRuns         discarded runs per design and cache before them
///     messages           messages in each cache
///     conversations      conversations they are spread over
///     pageRows           messages in each unfiltered page read
///     build              "debug" | "release": how this binary was compiled
///     engine             { cipher: SQLCipher version, sqlite: SQLite version }
///     caches             { encrypted, plaintext }, each: encrypted (bool), pageSize (bytes),
///                        databasePages, bytesOnDisk, seedSeconds
///     designs            { bareSQLite, cachedPage, fetchPreviousCachedPhase, filteredPage,
///                          bareSQLiteCold, cachedPageCold, fetchPreviousCold }, each:
///         encrypted, plaintext   { runs, medianMs, p90Ms (nearest rank), minMs, maxMs,
///                                  pagesRead (median database pages read per run) }
///         encryptedOverPlaintext ratio of the medians
///         rows                   messages in each page of this design
///     budget             { pageDesign: "cachedPage", pageMedianMs, maxPageMs: 1, pageWithinBudget,
///                          publicDesign: "fetchPreviousCachedPhase", publicOverPage,
///                          maxPublicOverPage: 2, publicWithinBudget,
///                          coldFloorDesign: "bareSQLiteCold", coldFloorEncryptedOverPlaintext,
///                          maxOverFloorRatio: 0.1, maxColdEncryptedOverPlaintext (the floor's + 0.1),
///                          coldPageEncryptedOverPlaintext, coldPageWithinBudget,
///                          coldPublicEncryptedOverPlaintext, coldPublicWithinBudget,
///                          withinBudget, failures: [human-readable strings] }
///
/// Prints no message text.
enum ReadBenchCommand {
    static let defaultRuns = 300
    static let defaultMessages = 100_000
    static let defaultConversations = 100
    /// The internal page (`cachedPage`, warm, encrypted): its median at most this.
    static let budgetPageMs = 1.0
    /// The public call (warm, encrypted): at most this many times the internal page.
    static let budgetPublicOverPage = 2.0
    /// Cold, encrypted / plaintext may exceed SQLCipher's own cold-read ratio by this much.
    static let budgetColdOverFloor = 0.1

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let json = args.flag("json")
        let runs = try args.int("runs", default: defaultRuns, range: 1...1_000_000)
        let messages = try args.int("messages", default: defaultMessages, range: 1...1_000_000)
        let conversations = try args.int("conversations", default: defaultConversations, range: 1...1000)
        let layoutName = args.string("layout") ?? ReadBenchFixture.Layout.sync.rawValue
        try args.rejectUnknown()
        guard let layout = ReadBenchFixture.Layout(rawValue: layoutName) else {
            throw CLIError.usage("--layout must be one of: " + ReadBenchFixture.Layout.allCases.map(\.rawValue).joined(separator: ", "))
        }
        guard messages >= conversations else { throw CLIError.usage("--messages must be at least --conversations") }
        guard (messages + conversations - 1) / conversations <= 1000 else {
            throw CLIError.usage("at most 1000 messages per conversation (the largest maxMessagesPerConversation)")
        }

        let scratch = try ScenariosCommand.makePrivateDirectory()
        let fixture = try await ReadBenchFixture.make(root: scratch.path, messages: messages, conversations: conversations, layout: layout)
        let outcome: Result<[ReadBenchmark.Result], any Error>
        do {
            outcome = .success(try await ReadBenchmark(fixture: fixture, runs: runs).run())
        } catch {
            outcome = .failure(error)
        }
        await fixture.close()
        withExtendedLifetime(scratch) {}  // the caches' directory lives until they are closed
        let results = try outcome.get()
        let report = ReadBenchReport(results: results, fixture: fixture, runs: runs, warmups: ReadBenchmark.warmups(fixture))

        return finish(report, json: json)
    }
}

/// Runs every design on both caches of a fixture, interleaved.
struct ReadBenchmark {
    enum Design: String, CaseIterable {
        case bareSQLite
        case cachedPage
        case fetchPreviousCachedPhase
        case filteredPage
        case bareSQLiteCold
        case cachedPageCold
        case fetchPreviousCold

        var title: String {
            switch self {
            case .bareSQLite: return "bare SQLite: the page's SQL, rows read, nothing decoded"
            case .cachedPage: return "cached page (MessageRows.cachedPage on the reader)"
            case .fetchPreviousCachedPhase: return "fetchPrevious → onCachedMessages (public API)"
            case .filteredPage: return "fetchPrevious, filtered (hideDeleted, hideReplies, types)"
            case .bareSQLiteCold: return "bare SQLite, SQLite's cache cold"
            case .cachedPageCold: return "cached page, SQLite's cache cold"
            case .fetchPreviousCold: return "fetchPrevious → onCachedMessages, SQLite's cache cold"
            }
        }

        /// Whether SQLite's page cache is emptied before each run.
        var cold: Bool { [.bareSQLiteCold, .cachedPageCold, .fetchPreviousCold].contains(self) }

        /// The kind of read, whatever the cache's state.
        var read: Read {
            switch self {
            case .bareSQLite, .bareSQLiteCold: return .bareSQLite
            case .cachedPage, .cachedPageCold: return .cachedPage
            case .fetchPreviousCachedPhase, .fetchPreviousCold: return .publicCall(filtered: false)
            case .filteredPage: return .publicCall(filtered: true)
            }
        }
    }

    enum Read {
        case bareSQLite
        case cachedPage
        case publicCall(filtered: Bool)
    }

    /// The timings of one design on one cache.
    struct Result {
        let design: Design
        let cache: String
        let timing: TimingSummary
        /// Median database pages the reader read per run.
        let pagesRead: Int
        /// Messages in each page.
        let rows: Int
    }

    /// What a page read: its size and ids, compared across caches and designs.
    struct PageDigest: Equatable {
        var rows = 0
        var firstId = 0
        var lastId = 0
        var idSum = 0
    }

    let fixture: ReadBenchFixture
    let runs: Int

    /// Two passes over every conversation: the public call records a conversation's first opening
    /// (a commit, which empties the reader's page cache), so the first pass writes and the second
    /// warms.
    static func warmups(_ fixture: ReadBenchFixture) -> Int { 2 * fixture.conversations }

    func run() async throws -> [Result] {
        let sides = [fixture.encrypted, fixture.plaintext]
        var samples: [Design: [String: [Double]]] = [:]
        var pages: [Design: [String: [Int]]] = [:]
        var rows: [Design: Int] = [:]
        let warmups = Self.warmups(fixture)
        // One design after the other: a write between two reads would empty the reader's cache
        // (WAL) and turn the other designs' warm reads into cold ones.
        for design in Design.allCases {
            for iteration in 0..<(warmups + runs) {
                let conversation = iteration % fixture.conversations
                var reference: PageDigest?
                for offset in sides.indices {
                    let side = sides[(offset + iteration) % sides.count]
                    if design.cold { try side.cache.reader.sync { $0.dropPageCache() } }
                    let missesBefore = try side.cache.reader.sync { $0.pageCacheMisses }
                    let (ms, digest) = try await measure(design.read, side, conversation: conversation)
                    let missesAfter = try side.cache.reader.sync { $0.pageCacheMisses }
                    // Every unfiltered page is as long as the conversations allow; the filtered
                    // page is whatever the filter leaves, the same on both caches.
                    let expected: Int? = design == .filteredPage ? nil : fixture.expectedPageRows
                    guard digest.rows == (expected ?? digest.rows), digest.rows > 0, digest == (reference ?? digest) else {
                        throw CLIError.failure("the \(design.rawValue) read on the \(side.id) cache returned a different page (\(digest.rows) messages, expected \(expected.map(String.init) ?? "the same as") the other cache)")
                    }
                    reference = digest
                    if iteration >= warmups {
                        samples[design, default: [:]][side.id, default: []].append(ms)
                        pages[design, default: [:]][side.id, default: []].append(missesAfter - missesBefore)
                        rows[design] = digest.rows
                    }
                }
            }
        }
        return Design.allCases.flatMap { design in
            sides.map { side in
                let read = (pages[design]?[side.id] ?? [0]).sorted()
                return Result(design: design, cache: side.id, timing: TimingSummary(samples[design]?[side.id] ?? []),
                              pagesRead: read[read.count / 2], rows: rows[design] ?? 0)
            }
        }
    }

    private func measure(_ read: Read, _ side: ReadBenchFixture.Side, conversation: Int) async throws -> (Double, PageDigest) {
        switch read {
        case .bareSQLite:
            let conversationId = ConversationID.direct(ReadBenchFixture.me, ReadBenchFixture.peer(conversation)).rawValue
            var watch = Stopwatch()
            let digest = try side.cache.reader.sync { db in try Self.bareRead(conversationId, limit: ReadBenchFixture.pageSize, in: db) }
            watch.lap("bareSQLite")
            return (watch.totalMs, digest)
        case .cachedPage:
            let query = ReadBenchFixture.request(side.vault, conversation: conversation).query
            let limits = side.vault.wireLimits
            var watch = Stopwatch()
            let page = try side.cache.reader.sync { db in
                try MessageRows.cachedPage(query, direction: .previous, me: ReadBenchFixture.me, limits: limits, in: db)
            }
            watch.lap("cachedPage")
            return (watch.totalMs, Self.digest(page))
        case .publicCall(let filtered):
            let request = filtered ? ReadBenchFixture.filteredRequest(side.vault, conversation: conversation)
                                   : ReadBenchFixture.request(side.vault, conversation: conversation)
            let clock = ContinuousClock()
            let (elapsed, page, error): (Duration, [BaseMessage], CometChatException?) = await withCheckedContinuation { continuation in
                let start = clock.now
                let cached = CachedPhase()
                request.fetchPrevious(onCachedMessages: { messages in
                    cached.record(clock.now - start, messages)
                }, onServerMessages: { _ in
                    continuation.resume(returning: (cached.elapsed, cached.messages, nil))
                }, onError: { error in
                    // Offline, the read ends here, after the cached page (delivered in order on the
                    // same executor).
                    continuation.resume(returning: (cached.elapsed, cached.messages, error))
                })
            }
            guard error?.errorCode == OfflineErrorCode.internetUnavailable.rawValue else {
                throw CLIError.failure("the \(side.id) read ended with \(error?.errorCode ?? "a server page") instead of ERROR_INTERNET_UNAVAILABLE")
            }
            return (elapsed.milliseconds, Self.digest(page))
        }
    }

    /// The unfiltered page's SQL as `MessageRows.page` runs it, every column of every row read
    /// (the payload copied out as bytes), nothing decoded.
    static func bareRead(_ conversationId: String, limit: Int, in db: Database) throws -> PageDigest {
        let stmt = try db.cached("""
            SELECT payload, status, source, local_id, sent_at, server_id FROM messages
            WHERE server_id IS NOT NULL AND conversation_id = ? ORDER BY sent_at DESC, server_id DESC LIMIT ?
            """)
        try stmt.bind([.text(conversationId), .int(Int64(limit))])
        defer { stmt.reset() }
        var ids: [Int] = []
        var bytes = 0
        while try stmt.step() {
            bytes &+= stmt.blob(0)?.count ?? 0
            bytes &+= stmt.int(1) &+ stmt.int(2) &+ (stmt.text(3)?.utf8.count ?? 0) &+ stmt.int(4)
            ids.append(stmt.int(5))
        }
        ids.reverse()
        guard bytes > 0 || ids.isEmpty else { throw CLIError.failure("the bare read found rows without payloads") }
        return PageDigest(rows: ids.count, firstId: ids.first ?? 0, lastId: ids.last ?? 0, idSum: ids.reduce(0, &+))
    }

    static func digest(_ page: [BaseMessage]) -> PageDigest {
        PageDigest(rows: page.count, firstId: page.first?.id ?? 0, lastId: page.last?.id ?? 0, idSum: page.reduce(0) { $0 &+ $1.id })
    }

    /// What the cached callback saw (set on the callback executor, read after the read ended there).
    final class CachedPhase: Sendable {
        private let seen = Mutex<(elapsed: Duration, messages: [BaseMessage])>((.zero, []))

        func record(_ elapsed: Duration, _ messages: [BaseMessage]) {
            seen.withLock { $0 = (elapsed, messages) }
        }

        var elapsed: Duration { seen.withLock { $0.elapsed } }
        var messages: [BaseMessage] { seen.withLock { $0.messages } }
    }
}

/// The figures, ratios and budget verdict of one `bench reads` run.
struct ReadBenchReport: BudgetedReport {
    let results: [ReadBenchmark.Result]
    let fixture: ReadBenchFixture
    let runs: Int
    let warmups: Int

    func result(_ design: ReadBenchmark.Design, _ cache: String) -> ReadBenchmark.Result? {
        results.first { $0.design == design && $0.cache == cache }
    }

    func timing(_ design: ReadBenchmark.Design, _ cache: String) -> TimingSummary {
        result(design, cache)?.timing ?? TimingSummary([.nan])
    }

    func ratio(_ design: ReadBenchmark.Design) -> Double {
        timing(design, "encrypted").medianMs / timing(design, "plaintext").medianMs
    }

    /// The verdict on this run's medians.
    var budget: ReadBudget {
        ReadBudget(pageMedianMs: timing(.cachedPage, "encrypted").medianMs,
                   publicMedianMs: timing(.fetchPreviousCachedPhase, "encrypted").medianMs,
                   coldFloorRatio: ratio(.bareSQLiteCold), coldPageRatio: ratio(.cachedPageCold),
                   coldPublicRatio: ratio(.fetchPreviousCold))
    }

    var pageMedian: Double { budget.pageMedianMs }
    var publicOverPage: Double { budget.publicOverPage }
    var coldFloorRatio: Double { budget.coldFloorRatio }
    var maxColdRatio: Double { budget.maxColdRatio }
    var coldPageRatio: Double { budget.coldPageRatio }
    var coldPublicRatio: Double { budget.coldPublicRatio }
    var pageWithinBudget: Bool { budget.pageWithinBudget }
    var publicWithinBudget: Bool { budget.publicWithinBudget }
    var coldPageWithinBudget: Bool { budget.coldPageWithinBudget }
    var coldPublicWithinBudget: Bool { budget.coldPublicWithinBudget }
    var withinBudget: Bool { budget.withinBudget }
    var failures: [String] { budget.failures }

    var json: JSON {
        func summary(_ r: ReadBenchmark.Result?) -> JSON {
            guard let r else { return .null }
            let t = r.timing
            return .object([("runs", .int(t.runs)), ("medianMs", .double(t.medianMs)), ("p90Ms", .double(t.p90Ms)),
                            ("minMs", .double(t.minMs)), ("maxMs", .double(t.maxMs)), ("pagesRead", .int(r.pagesRead))])
        }
        func cache(_ side: ReadBenchFixture.Side) -> JSON {
            .object([("encrypted", .bool(side.cache.isEncrypted)), ("pageSize", .int(side.pageSizeBytes)),
                     ("databasePages", .int(side.databasePages)), ("bytesOnDisk", .int(side.bytesOnDisk)),
                     ("seedSeconds", .double(side.seedSeconds))])
        }
        let engine = CipherEngine.current
        return .object([
            ("benchmark", .string("reads")),
            ("layout", .string(fixture.layout.rawValue)),
            ("runs", .int(runs)),
            ("warmupRuns", .int(warmups)),
            ("messages", .int(fixture.messages)),
            ("conversations", .int(fixture.conversations)),
            ("pageRows", .int(fixture.expectedPageRows)),
            ("build", .string(OpenBenchReport.build)),
            ("engine", .object([("cipher", .optional(engine.version)), ("sqlite", .string(engine.sqliteVersion))])),
            ("caches", .object([("encrypted", cache(fixture.encrypted)), ("plaintext", cache(fixture.plaintext))])),
            ("designs", .object(ReadBenchmark.Design.allCases.map { design in
                (design.rawValue, .object([
                    ("encrypted", summary(result(design, "encrypted"))),
                    ("plaintext", summary(result(design, "plaintext"))),
                    ("encryptedOverPlaintext", .double(ratio(design))),
                    ("rows", .int(result(design, "encrypted")?.rows ?? 0)),
                ]))
            })),
            ("budget", .object([
                ("pageDesign", .string(ReadBenchmark.Design.cachedPage.rawValue)),
                ("pageMedianMs", .double(pageMedian)),
                ("maxPageMs", .double(ReadBenchCommand.budgetPageMs)),
                ("pageWithinBudget", .bool(pageWithinBudget)),
                ("publicDesign", .string(ReadBenchmark.Design.fetchPreviousCachedPhase.rawValue)),
                ("publicOverPage", .double(publicOverPage)),
                ("maxPublicOverPage", .double(ReadBenchCommand.budgetPublicOverPage)),
                ("publicWithinBudget", .bool(publicWithinBudget)),
                ("coldFloorDesign", .string(ReadBenchmark.Design.bareSQLiteCold.rawValue)),
                ("coldFloorEncryptedOverPlaintext", .double(coldFloorRatio)),
                ("maxOverFloorRatio", .double(ReadBenchCommand.budgetColdOverFloor)),
                ("maxColdEncryptedOverPlaintext", .double(maxColdRatio)),
                ("coldPageEncryptedOverPlaintext", .double(coldPageRatio)),
                ("coldPageWithinBudget", .bool(coldPageWithinBudget)),
                ("coldPublicEncryptedOverPlaintext", .double(coldPublicRatio)),
                ("coldPublicWithinBudget", .bool(coldPublicWithinBudget)),
                ("withinBudget", .bool(withinBudget)),
                ("failures", .array(failures.map { .string($0) })),
            ])),
        ])
    }

    var table: String {
        let engine = CipherEngine.current
        let layout = fixture.layout == .sync ? "written in sync order (conversations interleaved)" : "written one conversation after the other"
        var lines = [
            "chatvault bench reads: a page of \(fixture.expectedPageRows) messages from \(fixture.messages) messages in \(fixture.conversations) conversation\(fixture.conversations == 1 ? "" : "s"), \(layout); SQLCipher \(engine.version ?? "none") on SQLite \(engine.sqliteVersion); \(OpenBenchReport.build) build",
            "\(runs) runs per design and cache after \(warmups) warm-ups, the conversations in turn; medians and p90 in ms; pages = database pages read per run",
            "",
        ]
        var table = Table(header: ["design", "encrypted median", "p90", "pages", "plaintext median", "p90", "pages", "encrypted / plaintext"])
        for design in ReadBenchmark.Design.allCases {
            let e = timing(design, "encrypted"), p = timing(design, "plaintext")
            table.rows.append([design.title, ms(e.medianMs), ms(e.p90Ms), String(result(design, "encrypted")?.pagesRead ?? 0),
                               ms(p.medianMs), ms(p.p90Ms), String(result(design, "plaintext")?.pagesRead ?? 0), ratioText(ratio(design))])
        }
        lines.append(table.render())
        lines.append("")
        var caches = Table(header: ["cache", "page size", "pages", "bytes on disk", "seeded in"])
        for side in [fixture.encrypted, fixture.plaintext] {
            caches.rows.append([side.id, String(side.pageSizeBytes), String(side.databasePages), String(side.bytesOnDisk),
                                String(format: "%.1f s", side.seedSeconds)])
        }
        lines.append(caches.render())
        lines.append("")
        let publicMedian = timing(.fetchPreviousCachedPhase, "encrypted").medianMs
        func pages(_ design: ReadBenchmark.Design) -> String {
            "\(result(design, "encrypted")?.pagesRead ?? 0)/\(result(design, "plaintext")?.pagesRead ?? 0) pages"
        }
        lines.append("budget: internal cached page (warm, encrypted) median \(ms(pageMedian)) ms ≤ \(ms(ReadBenchCommand.budgetPageMs)) ms: \(pageWithinBudget ? "ok" : "FAILED")")
        lines.append("budget: public call (warm, encrypted) \(ms(publicMedian)) ms = \(ratioText(publicOverPage)) the internal page \(ms(pageMedian)) ms, ≤ \(ratioText(ReadBenchCommand.budgetPublicOverPage)): \(publicWithinBudget ? "ok" : "FAILED")")
        lines.append("floor (cold): SQLCipher reading the same pages cold (bare SQLite, \(pages(.bareSQLiteCold))), encrypted / plaintext \(ratioText(coldFloorRatio)); allowed \(ratioText(maxColdRatio))")
        lines.append("budget: cached page cold (\(pages(.cachedPageCold))), encrypted / plaintext \(ratioText(coldPageRatio)) ≤ the floor's \(ratioText(coldFloorRatio)) + \(String(format: "%.1f", ReadBenchCommand.budgetColdOverFloor)): \(coldPageWithinBudget ? "ok" : "FAILED")")
        lines.append("budget: public call cold (\(pages(.fetchPreviousCold))), encrypted / plaintext \(ratioText(coldPublicRatio)) ≤ the floor's \(ratioText(coldFloorRatio)) + \(String(format: "%.1f", ReadBenchCommand.budgetColdOverFloor)): \(coldPublicWithinBudget ? "ok" : "FAILED")")
        lines.append(withinBudget ? "within budget" : "NOT within budget: " + failures.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }

    private func ms(_ value: Double) -> String {
        String(format: value < 10 ? "%.3f" : "%.1f", value)
    }

}

/// The budgets of `bench reads` applied to the medians of one run (shared/reference/
/// performance-budget.md, revised 2026-12-04); kept apart from the run so that the verdict can be
/// checked on figures given to it.
struct ReadBudget: BudgetVerdict {
    /// `cachedPage`, warm, encrypted: the internal page.
    let pageMedianMs: Double
    /// `fetchPreviousCachedPhase`, warm, encrypted: the public call.
    let publicMedianMs: Double
    /// `bareSQLiteCold`, encrypted / plaintext: SQLCipher reading the same pages cold.
    let coldFloorRatio: Double
    /// `cachedPageCold`, encrypted / plaintext.
    let coldPageRatio: Double
    /// `fetchPreviousCold`, encrypted / plaintext.
    let coldPublicRatio: Double

    var publicOverPage: Double { publicMedianMs / pageMedianMs }
    var maxColdRatio: Double { coldFloorRatio + ReadBenchCommand.budgetColdOverFloor }

    // Written so that a NaN (a design not measured) fails its check.
    var pageWithinBudget: Bool { pageMedianMs <= ReadBenchCommand.budgetPageMs }
    var publicWithinBudget: Bool { publicOverPage <= ReadBenchCommand.budgetPublicOverPage }
    var coldPageWithinBudget: Bool { coldPageRatio <= maxColdRatio }
    var coldPublicWithinBudget: Bool { coldPublicRatio <= maxColdRatio }
    var withinBudget: Bool { pageWithinBudget && publicWithinBudget && coldPageWithinBudget && coldPublicWithinBudget }

    var failures: [String] {
        var out: [String] = []
        if !pageWithinBudget {
            out.append("the encrypted cached page (warm) has a median of \(ms(pageMedianMs)) ms, above the \(ms(ReadBenchCommand.budgetPageMs)) ms budget")
        }
        if !publicWithinBudget {
            out.append("the public call (warm, encrypted) is \(ratioText(publicOverPage)) the internal cached page (\(ms(publicMedianMs)) ms over \(ms(pageMedianMs)) ms), above the allowed \(ratioText(ReadBenchCommand.budgetPublicOverPage))")
        }
        let floor = "SQLCipher's own cold-read ratio on the same pages, \(ratioText(coldFloorRatio)), + \(String(format: "%.1f", ReadBenchCommand.budgetColdOverFloor)) = \(ratioText(maxColdRatio))"
        if !coldPageWithinBudget {
            out.append("the cold cached page is \(ratioText(coldPageRatio)) slower encrypted than plaintext, above \(floor)")
        }
        if !coldPublicWithinBudget {
            out.append("the cold public call is \(ratioText(coldPublicRatio)) slower encrypted than plaintext, above \(floor)")
        }
        return out
    }

    private func ms(_ value: Double) -> String {
        value.isFinite ? String(format: value < 10 ? "%.3f" : "%.1f", value) : "n/a"
    }

}
