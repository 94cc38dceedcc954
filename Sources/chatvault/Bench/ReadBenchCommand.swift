import ChatVault
import Foundation
import Synchronization
import VaultStore

/// `chatvault bench reads [--runs N] [--messages M] [--conversations C] [--json]`
///
/// Measures a cached page: the 30 newest messages of a conversation, read from a cache holding
/// `M` messages in `C` conversations (default 100,000 in 100), as `MessagesRequest.fetchPrevious`
/// serves it before asking the server, on an encrypted cache and on a plaintext one holding the
/// same messages, side by side in one process (see `ReadBenchFixture`). Two designs:
///
/// - `cachedPage`: the cached phase alone, as a request runs it on the cache's reader connection
///   (`MessageRows.cachedPage`: the filter, the SQL page by index, every row decoded by column
///   index with the trusted decoder into `BaseMessage`s). The budget applies to it.
/// - `fetchPreviousCachedPhase`: the whole public call, from `fetchPrevious(onCachedMessages:…)`
///   to its `onCachedMessages` callback (the request's task, recording that the conversation was
///   opened, the cached phase, delivery through the callback executor), against a server that
///   cannot be reached. Reported beside it; not budgeted.
///
/// One design runs after the other (`fetchPrevious` writes, and a write makes the reader drop its
/// page cache). Within a design, each iteration reads the next conversation in turn (so every
/// conversation is read), once per cache, alternating which cache goes first; one discarded pass
/// over every conversation warms the caches first ("warm": the pages in SQLite's page cache).
/// Defaults: 300 runs.
///
/// For figures to quote, use a release build:
/// `CHATVAULT_BUILD_CONFIGURATION=release Scripts/chatvault bench reads` (the output says which
/// build ran). Compare ratios from one run; quote medians (shared/reference/performance-budget.md).
///
/// Exit status: 0 within budget (encrypted `cachedPage` median ≤ 1 ms, and encrypted / plaintext
/// ≤ 1.3), 1 when not (the failed checks are printed and listed in `budget.failures`) or when the
/// benchmark cannot run, 2 on a usage error.
///
/// `--json` prints one object with these stable fields (times in milliseconds):
///
///     benchmark          "reads"
///     runs               measured runs per design and cache
///     warmupRuns         discarded runs per design and cache before them
///     messages           messages in each cache
///     conversations      conversations they are spread over
///     pageRows           messages in each page read
///     build              "debug" | "release": how this binary was compiled
///     engine             { cipher: SQLCipher version, sqlite: SQLite version }
///     caches             { encrypted, plaintext }, each: encrypted (bool), pageSize (bytes),
///                        databasePages, bytesOnDisk, seedSeconds
///     designs            { cachedPage, fetchPreviousCachedPhase }, each:
///         encrypted, plaintext   { runs, medianMs, p90Ms (nearest rank), minMs, maxMs }
///         encryptedOverPlaintext ratio of the medians
///     budget             { design: "cachedPage", encryptedMedianMs: 1, maxEncryptedOverPlaintext: 1.3,
///                          medianWithinBudget, ratioWithinBudget, withinBudget,
///                          failures: [human-readable strings] }
///
/// Prints no message text.
enum ReadBenchCommand {
    static let defaultRuns = 300
    static let defaultMessages = 100_000
    static let defaultConversations = 100
    static let budgetMedianMs = 1.0
    static let budgetRatio = 1.3

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let json = args.flag("json")
        let runs = try args.int("runs", default: defaultRuns, range: 1...1_000_000)
        let messages = try args.int("messages", default: defaultMessages, range: 1...1_000_000)
        let conversations = try args.int("conversations", default: defaultConversations, range: 1...1000)
        try args.rejectUnknown()
        guard messages >= conversations else { throw CLIError.usage("--messages must be at least --conversations") }
        guard (messages + conversations - 1) / conversations <= 1000 else {
            throw CLIError.usage("at most 1000 messages per conversation (the largest maxMessagesPerConversation)")
        }

        let scratch = try ScenariosCommand.makePrivateDirectory()
        let fixture = try await ReadBenchFixture.make(root: scratch.path, messages: messages, conversations: conversations)
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

/// Runs both designs on both caches of a fixture, interleaved.
struct ReadBenchmark {
    enum Design: String, CaseIterable {
        case cachedPage
        case fetchPreviousCachedPhase

        var title: String {
            switch self {
            case .cachedPage: return "cached page (MessageRows.cachedPage on the reader)"
            case .fetchPreviousCachedPhase: return "fetchPrevious → onCachedMessages (public API)"
            }
        }
    }

    /// The timings of one design on one cache.
    struct Result {
        let design: Design
        let cache: String
        let timing: TimingSummary
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

    /// One pass over every conversation.
    static func warmups(_ fixture: ReadBenchFixture) -> Int { fixture.conversations }

    func run() async throws -> [Result] {
        let sides = [fixture.encrypted, fixture.plaintext]
        var samples: [Design: [String: [Double]]] = [:]
        let warmups = Self.warmups(fixture)
        // One design after the other: `fetchPrevious` records that the conversation was opened (a
        // write), and any write makes the reader drop its page cache (WAL), which would turn the
        // other design's warm reads into reads that decrypt again.
        for design in Design.allCases {
            for iteration in 0..<(warmups + runs) {
                let conversation = iteration % fixture.conversations
                var reference: PageDigest?
                for offset in sides.indices {
                    let side = sides[(offset + iteration) % sides.count]
                    let (ms, digest) = try await measure(design, side, conversation: conversation)
                    guard digest.rows == fixture.expectedPageRows, digest == (reference ?? digest) else {
                        throw CLIError.failure("the \(design.rawValue) read on the \(side.id) cache returned a different page (\(digest.rows) messages, expected \(fixture.expectedPageRows) like the other cache)")
                    }
                    reference = digest
                    if iteration >= warmups { samples[design, default: [:]][side.id, default: []].append(ms) }
                }
            }
        }
        return Design.allCases.flatMap { design in
            sides.map { side in Result(design: design, cache: side.id, timing: TimingSummary(samples[design]?[side.id] ?? [])) }
        }
    }

    private func measure(_ design: Design, _ side: ReadBenchFixture.Side, conversation: Int) async throws -> (Double, PageDigest) {
        switch design {
        case .cachedPage:
            let query = ReadBenchFixture.request(side.vault, conversation: conversation).query
            let limits = side.vault.wireLimits
            var watch = Stopwatch()
            let page = try side.cache.reader.sync { db in
                try MessageRows.cachedPage(query, direction: .previous, me: ReadBenchFixture.me, limits: limits, in: db)
            }
            watch.lap("cachedPage")
            return (watch.totalMs, Self.digest(page))
        case .fetchPreviousCachedPhase:
            let request = ReadBenchFixture.request(side.vault, conversation: conversation)
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

    func timing(_ design: ReadBenchmark.Design, _ cache: String) -> TimingSummary {
        results.first { $0.design == design && $0.cache == cache }!.timing
    }

    func ratio(_ design: ReadBenchmark.Design) -> Double {
        timing(design, "encrypted").medianMs / timing(design, "plaintext").medianMs
    }

    var encryptedMedian: Double { timing(.cachedPage, "encrypted").medianMs }
    var medianWithinBudget: Bool { encryptedMedian <= ReadBenchCommand.budgetMedianMs }
    var ratioWithinBudget: Bool { ratio(.cachedPage) <= ReadBenchCommand.budgetRatio }
    var withinBudget: Bool { medianWithinBudget && ratioWithinBudget }

    var failures: [String] {
        var out: [String] = []
        if !medianWithinBudget {
            out.append("encrypted cached-page median \(ms(encryptedMedian)) ms is above the \(ms(ReadBenchCommand.budgetMedianMs)) ms budget")
        }
        if !ratioWithinBudget {
            out.append("encrypted / plaintext \(ratioText(ratio(.cachedPage))) is above the allowed \(ratioText(ReadBenchCommand.budgetRatio))")
        }
        return out
    }

    var json: JSON {
        func summary(_ t: TimingSummary) -> JSON {
            .object([("runs", .int(t.runs)), ("medianMs", .double(t.medianMs)), ("p90Ms", .double(t.p90Ms)),
                     ("minMs", .double(t.minMs)), ("maxMs", .double(t.maxMs))])
        }
        func cache(_ side: ReadBenchFixture.Side) -> JSON {
            .object([("encrypted", .bool(side.cache.isEncrypted)), ("pageSize", .int(side.pageSizeBytes)),
                     ("databasePages", .int(side.databasePages)), ("bytesOnDisk", .int(side.bytesOnDisk)),
                     ("seedSeconds", .double(side.seedSeconds))])
        }
        let engine = CipherEngine.current
        return .object([
            ("benchmark", .string("reads")),
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
                    ("encrypted", summary(timing(design, "encrypted"))),
                    ("plaintext", summary(timing(design, "plaintext"))),
                    ("encryptedOverPlaintext", .double(ratio(design))),
                ]))
            })),
            ("budget", .object([
                ("design", .string(ReadBenchmark.Design.cachedPage.rawValue)),
                ("encryptedMedianMs", .double(ReadBenchCommand.budgetMedianMs)),
                ("maxEncryptedOverPlaintext", .double(ReadBenchCommand.budgetRatio)),
                ("medianWithinBudget", .bool(medianWithinBudget)),
                ("ratioWithinBudget", .bool(ratioWithinBudget)),
                ("withinBudget", .bool(withinBudget)),
                ("failures", .array(failures.map { .string($0) })),
            ])),
        ])
    }

    var table: String {
        let engine = CipherEngine.current
        var lines = [
            "chatvault bench reads: a page of \(fixture.expectedPageRows) messages from \(fixture.messages) messages in \(fixture.conversations) conversation\(fixture.conversations == 1 ? "" : "s"); SQLCipher \(engine.version ?? "none") on SQLite \(engine.sqliteVersion); \(OpenBenchReport.build) build",
            "\(runs) runs per design and cache after \(warmups) warm-ups, the conversations in turn; medians and p90 in ms",
            "",
        ]
        var table = Table(header: ["design", "encrypted median", "p90", "plaintext median", "p90", "encrypted / plaintext"])
        for design in ReadBenchmark.Design.allCases {
            let e = timing(design, "encrypted"), p = timing(design, "plaintext")
            table.rows.append([design.title, ms(e.medianMs), ms(e.p90Ms), ms(p.medianMs), ms(p.p90Ms), ratioText(ratio(design))])
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
        lines.append("budget: encrypted cached-page median \(ms(encryptedMedian)) ms ≤ \(ms(ReadBenchCommand.budgetMedianMs)) ms: \(medianWithinBudget ? "ok" : "FAILED")")
        lines.append("budget: encrypted / plaintext \(ratioText(ratio(.cachedPage))) ≤ \(ratioText(ReadBenchCommand.budgetRatio)): \(ratioWithinBudget ? "ok" : "FAILED")")
        lines.append(withinBudget ? "within budget" : "NOT within budget: " + failures.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }

    private func ms(_ value: Double) -> String {
        String(format: value < 10 ? "%.3f" : "%.1f", value)
    }

    private func ratioText(_ value: Double) -> String {
        String(format: "%.2f×", value)
    }
}
