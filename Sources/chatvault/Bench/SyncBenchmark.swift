import ChatVault
import Foundation
import Synchronization
import VaultStore

/// `chatvault bench sync [--runs N] [--messages M] [--quick] [--json]`
///
/// Measures catch-up ingest: pages of the server's change log (`SyncBenchLog`: messages in sync
/// order over 100 conversations, 20 of them groups, from several senders, rendered as the
/// simulator renders them) written exactly as the sync engine writes them: `SyncPageRows.parse`,
/// `SyncPageRows.apply` and `SyncStateRows.advance` in one transaction per page
/// (`SyncPageRows.ingest`), on the cache's writer queue, into an encrypted cache and a plaintext
/// one (real ChatVault caches: `SyncBenchCache`). Building a page is not timed; parsing it is. Three
/// measurements:
///
/// - `pageSizes`: for page sizes 100, 500 and 2000 (`SyncSettings.pageSize`'s default), M messages
///   (default 20,000) into a fresh cache, N runs (default 5) per size and cache, the caches
///   alternating, pipelined as the engine runs it (page N+1 parsed on another thread while page N
///   is written; the M messages' pages built before the clock starts); messages per second of each
///   run (M over the wall time), median.
/// - `growth`: both caches grown together at the default page size (a page to each in turn) to
///   320,000 messages, one page at a time (parse then write, not pipelined; the log is never held
///   whole): the median rate of the pages ingested in the 20,000 messages after the
///   cache holds 10k, 100k and 300k messages (`slowestOverFastest`: how flat it stays).
/// - `sqliteFloor`: after each fresh run at the default page size, SQLite's own rate for the same
///   rows: the cache's messages copied into an in-memory temporary table (not timed), then inserted
///   back under new server ids by one `INSERT … SELECT` and commit per page (`SyncBenchCache.copyRate`):
///   no Swift code per row, nothing read from the file. The ingest cannot run faster than this on the
///   machine; the table says what share of it the ingest reaches.
/// - `memory`: 100,000 messages streamed into a fresh encrypted cache at the default page size:
///   peak resident memory (`VmHWM`, reset once the cache is open with `/proc/self/clear_refs`)
///   above the resident memory at that moment. Runs first.
///
/// `--quick` (CI-sized, figures meaningless): 1 run of 2,000 messages per page size, growth with
/// windows W of max(1,000, default page size) messages at checkpoints W, 3W and 5W, memory over
/// the first 2,000.
///
/// For figures to quote, use a release build:
/// `CHATVAULT_BUILD_CONFIGURATION=release Scripts/chatvault bench sync` (the output says which
/// build ran). Compare ratios from one run; quote medians.
///
/// Budgets (shared/reference/performance-budget.md, revised 2026-12-04: ratios to a floor measured
/// beside them in the same run, since the machines are shared and the engine's own speed moves):
///
/// - rate: the encrypted median at the default page size ≥ 85 % of `sqliteFloor`'s encrypted rate
///   (SQLite alone inserting the same rows into the same table and indexes);
/// - ratio: encrypted / plaintext time at the default page size ≤ the floor's own encrypted /
///   plaintext ratio + 0.1 (what encryption costs SQLite itself, on the same rows, plus a margin);
/// - growth: encrypted slowest / fastest checkpoint (10k to 300k cached) ≥ 0.8;
/// - memory: peak ≤ 64 MiB above the baseline.
///
/// Exit status: 0 when all hold, 1 when one does not (each failed check is printed in words beside
/// its floor and listed in `budget.failures`) or when the benchmark cannot run, 2 on a usage error.
///
/// `--json` prints one object with these stable fields:
///
///     benchmark          "sync"
///     quick              whether --quick sized it
///     build              "debug" | "release"
///     engine             { cipher, sqlite }
///     conversations      100
///     defaultPageSize    SyncSettings().pageSize
///     pageSizes          [ { pageSize, messages, runs,
///                            encrypted, plaintext: { medianMessagesPerSecond, minMessagesPerSecond,
///                                                    maxMessagesPerSecond, medianPageMs },
///                            encryptedOverPlaintext (time ratio of the medians) } ]
///     growth             { pageSize, windowMessages, checkpoints: [ { cachedMessages,
///                          encryptedMessagesPerSecond, plaintextMessagesPerSecond,
///                          encryptedOverPlaintext } ], encryptedSlowestOverFastest,
///                          plaintextSlowestOverFastest }
///     sqliteFloor        { pageSize, encryptedMessagesPerSecond, plaintextMessagesPerSecond,
///                          encryptedOverPlaintext } (medians over the fresh runs at the default size)
///     memory             { messages, pageSize, baselineKiB, peakKiB, peakAboveBaselineKiB, peakReset }
///     budget             { minShareOfFloor: 0.85, encryptedMessagesPerSecond,
///                          floorMessagesPerSecond, shareOfFloor, rateWithinBudget,
///                          encryptedOverPlaintext, floorEncryptedOverPlaintext,
///                          maxOverFloorRatio: 0.1, maxEncryptedOverPlaintext (the floor's + 0.1),
///                          ratioWithinBudget, slowestOverFastest, minSlowestOverFastest: 0.8,
///                          growthWithinBudget, peakAboveBaselineMiB, maxPeakAboveBaselineMiB: 64,
///                          memoryWithinBudget, withinBudget, failures: [human-readable strings] }
///                        (a figure that could not be measured is null and fails its check)
///
/// Prints no message text and no key material.
enum SyncBenchCommand {
    static let defaultRuns = 5
    static let defaultMessages = 20_000
    static let pageSizes = [100, 500, 2000]
    /// The encrypted ingest's share of SQLite's own rate on the same rows.
    static let budgetShareOfFloor = 0.85
    /// Encrypted / plaintext may exceed the floor's own ratio by this much.
    static let budgetRatioOverFloor = 0.1
    static let budgetFlatness = 0.8
    static let budgetPeakMiB = 64.0

    struct Sizing {
        var runs: Int
        var messages: Int
        var checkpoints: [Int]
        var window: Int
        var memoryMessages: Int
        var quick: Bool

        var growthTo: Int { (checkpoints.max() ?? 0) + window }
    }

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw, switches: ["json", "quick"])
        let json = args.flag("json")
        let quick = args.flag("quick")
        // Quick: windows of whole pages of the default size (at least 1,000 messages).
        let window = max(1_000, SyncBenchmark.defaultPageSize)
        var sizing = quick
            ? Sizing(runs: 1, messages: 2_000, checkpoints: [window, 3 * window, 5 * window], window: window, memoryMessages: 2_000, quick: true)
            : Sizing(runs: defaultRuns, messages: defaultMessages, checkpoints: [10_000, 100_000, 300_000], window: 20_000,
                     memoryMessages: 100_000, quick: false)
        sizing.runs = try args.int("runs", default: sizing.runs, range: 1...1_000)
        sizing.messages = try args.int("messages", default: sizing.messages, range: 100...10_000_000)
        try args.rejectUnknown()

        let scratch = try ScenariosCommand.makePrivateDirectory()
        var benchmark = SyncBenchmark(sizing: sizing, root: scratch.path)
        let report = try await benchmark.run()
        withExtendedLifetime(scratch) {}
        return finish(report, json: json)
    }
}

/// Runs the three measurements.
struct SyncBenchmark {
    let sizing: SyncBenchCommand.Sizing
    let root: String
    let log = SyncBenchLog()
    static let defaultPageSize = SyncSettings().pageSize

    struct Rate {
        var perSecond: [Double]
        var pageMs: [Double]

        var median: Double { TimingSummary(perSecond).medianMs }
        var min: Double { perSecond.min() ?? 0 }
        var max: Double { perSecond.max() ?? 0 }
        var medianPageMs: Double { TimingSummary(pageMs).medianMs }
    }

    struct PageSizeResult {
        let pageSize: Int
        let encrypted: Rate
        let plaintext: Rate

        /// Time per message, encrypted over plaintext (the inverse ratio of the rates).
        var ratio: Double { plaintext.median / encrypted.median }
    }

    struct Checkpoint {
        let cached: Int
        let encrypted: Double
        let plaintext: Double
        var ratio: Double { plaintext / encrypted }
    }

    /// SQLite's own rate for the same rows: what no ingest code can beat on this machine.
    struct Floor {
        let encrypted: [Double]
        let plaintext: [Double]
        /// NaN when not measured (no fresh run at the default page size): the checks then fail.
        var encryptedMedian: Double { encrypted.isEmpty ? .nan : TimingSummary(encrypted).medianMs }
        var plaintextMedian: Double { plaintext.isEmpty ? .nan : TimingSummary(plaintext).medianMs }
        var ratio: Double { plaintextMedian / encryptedMedian }
    }

    struct Memory {
        let messages: Int
        let baselineKiB: Int
        let peakKiB: Int
        let peakReset: Bool
        var aboveKiB: Int { Swift.max(peakKiB - baselineKiB, 0) }
    }

    private var serial = 0
    private var floorEncrypted: [Double] = []
    private var floorPlaintext: [Double] = []

    init(sizing: SyncBenchCommand.Sizing, root: String) {
        self.sizing = sizing
        self.root = root
    }

    mutating func run() async throws -> SyncBenchReport {
        // Memory first, while the process is young (its heap not yet grown by the rest).
        let memory = try await memoryRun()
        let growth = try await growthRun()
        var sizes: [PageSizeResult] = []
        for pageSize in SyncBenchCommand.pageSizes {
            var encrypted = Rate(perSecond: [], pageMs: [])
            var plaintext = Rate(perSecond: [], pageMs: [])
            for iteration in 0..<sizing.runs {
                for offset in 0..<2 {
                    let encryption = (offset + iteration) % 2 == 0
                    let (rate, pages) = try await freshRun(encryption: encryption, pageSize: pageSize)
                    if encryption {
                        encrypted.perSecond.append(rate)
                        encrypted.pageMs += pages
                    } else {
                        plaintext.perSecond.append(rate)
                        plaintext.pageMs += pages
                    }
                }
            }
            sizes.append(PageSizeResult(pageSize: pageSize, encrypted: encrypted, plaintext: plaintext))
        }
        return SyncBenchReport(sizing: sizing, sizes: sizes, growth: growth, memory: memory,
                               floor: Floor(encrypted: floorEncrypted, plaintext: floorPlaintext))
    }

    private mutating func open(encryption: Bool) async throws -> SyncBenchCache {
        serial += 1
        return try await SyncBenchCache.open("\(encryption ? "encrypted" : "plaintext")-\(serial)", root: root, encryption: encryption)
    }

    /// `sizing.messages` into a fresh cache, pipelined as the sync engine does it: page N+1 is
    /// parsed (validated, payloads encoded) on another thread while page N is written. The pages
    /// are built before the clock starts (building them is the server's work); the rate is the
    /// messages over the wall time from the first parse to the last commit, and each page's time
    /// is its share of that wall time.
    private mutating func freshRun(encryption: Bool, pageSize: Int) async throws -> (Double, [Double]) {
        let side = try await open(encryption: encryption)
        var pages: [Double] = []
        do {
            var built: [ChangeLogPage] = []
            var next = 1
            while next <= sizing.messages {
                let count = min(pageSize, sizing.messages - next + 1)
                built.append(log.page(from: next, count: count, hasMore: next + count <= sizing.messages))
                next += count
            }
            let limits = side.limits
            let clock = ContinuousClock()
            var mark = clock.now
            var current = SyncPageRows.prepare(built[0], limits: limits)
            for index in built.indices {
                let following = Mutex<SyncPageRows.PreparedPage?>(nil)
                let group = DispatchGroup()
                if index + 1 < built.count {
                    let page = built[index + 1]
                    DispatchQueue.global().async(group: group) { following.withLock { $0 = SyncPageRows.prepare(page, limits: limits) } }
                }
                try side.write(current, changes: built[index].changes.count)
                group.wait()
                let now = clock.now
                pages.append((now - mark).milliseconds)
                mark = now
                if let prepared = following.withLock({ $0 }) { current = prepared }
            }
            try verify(side, holds: sizing.messages)
            if pageSize == SyncBenchmark.defaultPageSize {
                let floor = try side.copyRate(messages: sizing.messages, pageSize: pageSize)
                if encryption { floorEncrypted.append(floor) } else { floorPlaintext.append(floor) }
            }
        } catch {
            await side.close()
            throw error
        }
        await side.close()
        try? FileManager.default.removeItem(atPath: "\(root)/\(encryption ? "encrypted" : "plaintext")-\(serial)")
        let seconds = pages.reduce(0, +) / 1_000
        return (Double(sizing.messages) / seconds, pages)
    }

    private func verify(_ side: SyncBenchCache, holds messages: Int) throws {
        let held = try side.messageCount()
        guard held == messages else { throw CLIError.failure("the cache holds \(held) messages after ingesting \(messages)") }
    }

    /// The peak memory of `sizing.memoryMessages` streamed into a fresh encrypted cache at the
    /// default page size (the peak reset once the cache is open).
    private mutating func memoryRun() async throws -> Memory {
        let side = try await open(encryption: true)
        let path = "\(root)/encrypted-\(serial)"
        do {
            let reset = ResidentMemory.resetPeak()
            let baseline = ResidentMemory.read()?.rssKiB ?? 0
            var next = 1
            while next <= sizing.memoryMessages {
                let count = min(SyncBenchmark.defaultPageSize, sizing.memoryMessages - next + 1)
                _ = try side.ingest(log.page(from: next, count: count, hasMore: next + count <= sizing.memoryMessages))
                next += count
            }
            let peak = ResidentMemory.read()?.peakKiB ?? 0
            try verify(side, holds: sizing.memoryMessages)
            await side.close()
            try? FileManager.default.removeItem(atPath: path)
            return Memory(messages: sizing.memoryMessages, baselineKiB: baseline, peakKiB: peak, peakReset: reset)
        } catch {
            await side.close()
            throw error
        }
    }

    /// Both caches grown to `sizing.growthTo` at the default page size, a page to each in turn (so
    /// both meet the same machine); at each checkpoint, the median rate of the pages ingested within
    /// the window after it.
    private mutating func growthRun() async throws -> [Checkpoint] {
        let encrypted = try await open(encryption: true)
        let encryptedPath = "\(root)/encrypted-\(serial)"
        let plaintext: SyncBenchCache
        do {
            plaintext = try await open(encryption: false)
        } catch {
            await encrypted.close()
            throw error
        }
        let plaintextPath = "\(root)/plaintext-\(serial)"
        var rates: [Bool: [Int: [Double]]] = [:]
        do {
            var next = 1
            while next <= sizing.growthTo {
                let cached = next - 1
                let count = min(SyncBenchmark.defaultPageSize, sizing.growthTo - cached)
                let page = log.page(from: next, count: count, hasMore: next + count <= sizing.growthTo)
                // The window a page belongs to: the checkpoint it starts at or after, within a window.
                let checkpoint = sizing.checkpoints.first { cached >= $0 && cached < $0 + sizing.window }
                // Alternate which cache goes first.
                let sides = [(true, encrypted), (false, plaintext)]
                for k in 0..<2 {
                    let (encryption, side) = sides[(k + cached / SyncBenchmark.defaultPageSize) % 2]
                    let ms = try side.ingest(page)
                    if let checkpoint { rates[encryption, default: [:]][checkpoint, default: []].append(Double(count) / (ms / 1_000)) }
                }
                next += count
            }
            try verify(encrypted, holds: sizing.growthTo)
            try verify(plaintext, holds: sizing.growthTo)
        } catch {
            await encrypted.close()
            await plaintext.close()
            throw error
        }
        await encrypted.close()
        await plaintext.close()
        try? FileManager.default.removeItem(atPath: encryptedPath)
        try? FileManager.default.removeItem(atPath: plaintextPath)
        func median(_ encryption: Bool, _ checkpoint: Int) -> Double {
            guard let samples = rates[encryption]?[checkpoint], !samples.isEmpty else { return 0 }
            return TimingSummary(samples).medianMs
        }
        return sizing.checkpoints.map { Checkpoint(cached: $0, encrypted: median(true, $0), plaintext: median(false, $0)) }
    }
}

/// The figures, ratios and budget verdict of one `bench sync` run.
struct SyncBenchReport: BudgetedReport {
    let sizing: SyncBenchCommand.Sizing
    let sizes: [SyncBenchmark.PageSizeResult]
    let growth: [SyncBenchmark.Checkpoint]
    let memory: SyncBenchmark.Memory
    let floor: SyncBenchmark.Floor

    var atDefault: SyncBenchmark.PageSizeResult? { sizes.first { $0.pageSize == SyncBenchmark.defaultPageSize } }
    var defaultRate: Double { atDefault?.encrypted.median ?? 0 }
    var defaultRatio: Double { atDefault?.ratio ?? .infinity }

    static func flatness(_ rates: [Double]) -> Double {
        guard let slowest = rates.min(), let fastest = rates.max(), fastest > 0 else { return 0 }
        return slowest / fastest
    }

    var encryptedFlatness: Double { Self.flatness(growth.map(\.encrypted)) }
    var plaintextFlatness: Double { Self.flatness(growth.map(\.plaintext)) }
    var peakAboveMiB: Double { Double(memory.aboveKiB) / 1024 }

    /// SQLite's own encrypted rate on the same rows (NaN when not measured).
    var floorRate: Double { floor.encryptedMedian }
    /// The encrypted ingest's share of that floor.
    var shareOfFloor: Double { defaultRate / floorRate }
    /// The largest encrypted / plaintext allowed: the floor's own ratio + 0.1.
    var maxRatio: Double { floor.ratio + SyncBenchCommand.budgetRatioOverFloor }

    // Written so that a NaN (a figure not measured) fails its check.
    var rateWithinBudget: Bool { shareOfFloor >= SyncBenchCommand.budgetShareOfFloor }
    var ratioWithinBudget: Bool { defaultRatio <= maxRatio }
    var growthWithinBudget: Bool { encryptedFlatness >= SyncBenchCommand.budgetFlatness }
    var memoryWithinBudget: Bool { peakAboveMiB <= SyncBenchCommand.budgetPeakMiB }
    var withinBudget: Bool { rateWithinBudget && ratioWithinBudget && growthWithinBudget && memoryWithinBudget }

    var failures: [String] {
        var out: [String] = []
        if !rateWithinBudget {
            out.append(floorRate.isFinite
                ? "encrypted ingest at \(SyncBenchmark.defaultPageSize) changes per page is \(rate(defaultRate)) messages/s, \(percent(shareOfFloor)) of SQLite alone inserting the same rows (\(rate(floorRate)) messages/s), below the required \(percent(SyncBenchCommand.budgetShareOfFloor))"
                : "SQLite alone was not measured at the default page size (\(SyncBenchmark.defaultPageSize)), so the ingest rate has no floor to be compared with")
        }
        if !ratioWithinBudget {
            out.append("encrypted / plaintext \(ratioText(defaultRatio)) at \(SyncBenchmark.defaultPageSize) changes per page is above SQLite alone's own \(ratioText(floor.ratio)) + \(String(format: "%.1f", SyncBenchCommand.budgetRatioOverFloor)) = \(ratioText(maxRatio))")
        }
        if !growthWithinBudget {
            out.append("the encrypted rate is not flat as the cache grows: slowest / fastest \(String(format: "%.2f", encryptedFlatness)) < \(SyncBenchCommand.budgetFlatness)")
        }
        if !memoryWithinBudget {
            out.append("peak memory \(String(format: "%.1f", peakAboveMiB)) MiB above the baseline for \(memory.messages) messages exceeds \(Int(SyncBenchCommand.budgetPeakMiB)) MiB")
        }
        return out
    }

    var json: JSON {
        func rateJSON(_ r: SyncBenchmark.Rate) -> JSON {
            .object([("medianMessagesPerSecond", .double(r.median)), ("minMessagesPerSecond", .double(r.min)),
                     ("maxMessagesPerSecond", .double(r.max)), ("medianPageMs", .double(r.medianPageMs))])
        }
        let engine = CipherEngine.current
        return .object([
            ("benchmark", .string("sync")),
            ("quick", .bool(sizing.quick)),
            ("build", .string(OpenBenchReport.build)),
            ("engine", .object([("cipher", .optional(engine.version)), ("sqlite", .string(engine.sqliteVersion))])),
            ("conversations", .int(SyncBenchLog().conversations)),
            ("defaultPageSize", .int(SyncBenchmark.defaultPageSize)),
            ("pageSizes", .array(sizes.map { s in
                .object([("pageSize", .int(s.pageSize)), ("messages", .int(sizing.messages)), ("runs", .int(sizing.runs)),
                         ("encrypted", rateJSON(s.encrypted)), ("plaintext", rateJSON(s.plaintext)),
                         ("encryptedOverPlaintext", .double(s.ratio))])
            })),
            ("growth", .object([
                ("pageSize", .int(SyncBenchmark.defaultPageSize)),
                ("windowMessages", .int(sizing.window)),
                ("checkpoints", .array(growth.map { c in
                    .object([("cachedMessages", .int(c.cached)), ("encryptedMessagesPerSecond", .double(c.encrypted)),
                             ("plaintextMessagesPerSecond", .double(c.plaintext)), ("encryptedOverPlaintext", .double(c.ratio))])
                })),
                ("encryptedSlowestOverFastest", .double(encryptedFlatness)),
                ("plaintextSlowestOverFastest", .double(plaintextFlatness)),
            ])),
            ("sqliteFloor", .object([
                ("pageSize", .int(SyncBenchmark.defaultPageSize)),
                ("encryptedMessagesPerSecond", .double(floor.encryptedMedian)),
                ("plaintextMessagesPerSecond", .double(floor.plaintextMedian)),
                ("encryptedOverPlaintext", .double(floor.ratio)),
            ])),
            ("memory", .object([
                ("messages", .int(memory.messages)), ("pageSize", .int(SyncBenchmark.defaultPageSize)),
                ("baselineKiB", .int(memory.baselineKiB)), ("peakKiB", .int(memory.peakKiB)),
                ("peakAboveBaselineKiB", .int(memory.aboveKiB)), ("peakReset", .bool(memory.peakReset)),
            ])),
            ("budget", .object([
                ("minShareOfFloor", .double(SyncBenchCommand.budgetShareOfFloor)),
                ("encryptedMessagesPerSecond", .double(defaultRate)),
                ("floorMessagesPerSecond", .double(floorRate)),
                ("shareOfFloor", .double(shareOfFloor)),
                ("rateWithinBudget", .bool(rateWithinBudget)),
                ("encryptedOverPlaintext", .double(defaultRatio)),
                ("floorEncryptedOverPlaintext", .double(floor.ratio)),
                ("maxOverFloorRatio", .double(SyncBenchCommand.budgetRatioOverFloor)),
                ("maxEncryptedOverPlaintext", .double(maxRatio)),
                ("ratioWithinBudget", .bool(ratioWithinBudget)),
                ("slowestOverFastest", .double(encryptedFlatness)),
                ("minSlowestOverFastest", .double(SyncBenchCommand.budgetFlatness)),
                ("growthWithinBudget", .bool(growthWithinBudget)),
                ("peakAboveBaselineMiB", .double(peakAboveMiB)),
                ("maxPeakAboveBaselineMiB", .int(Int(SyncBenchCommand.budgetPeakMiB))),
                ("memoryWithinBudget", .bool(memoryWithinBudget)),
                ("withinBudget", .bool(withinBudget)),
                ("failures", .array(failures.map { .string($0) })),
            ])),
        ])
    }

    var table: String {
        let engine = CipherEngine.current
        var lines = [
            "chatvault bench sync: change-log pages parsed and applied with their sync point, one transaction per page, \(SyncBenchLog().conversations) conversations; SQLCipher \(engine.version ?? "none") on SQLite \(engine.sqliteVersion); \(OpenBenchReport.build) build" + (sizing.quick ? "; --quick (figures not meaningful)" : ""),
            "\(sizing.messages) messages into a fresh cache, \(sizing.runs) run\(sizing.runs == 1 ? "" : "s") per page size and cache; medians in messages/s",
            "",
        ]
        var table = Table(header: ["page size", "encrypted median", "min", "plaintext median", "min", "encrypted / plaintext (time)"])
        for s in sizes {
            table.rows.append([String(s.pageSize) + (s.pageSize == SyncBenchmark.defaultPageSize ? " (default)" : ""),
                               rate(s.encrypted.median), rate(s.encrypted.min), rate(s.plaintext.median), rate(s.plaintext.min),
                               ratioText(s.ratio)])
        }
        lines.append(table.render())
        lines.append("")
        lines.append("floor: SQLite alone, the same rows (each cache's messages from memory by one INSERT … SELECT per \(SyncBenchmark.defaultPageSize) rows into the same table and indexes, no Swift code per row): encrypted \(rate(floor.encryptedMedian)), plaintext \(rate(floor.plaintextMedian)) messages/s, encrypted / plaintext \(ratioText(floor.ratio)); the ingest above runs at \(percent(shareOfFloor)) of it encrypted, \(percent((atDefault?.plaintext.median ?? .nan) / floor.plaintextMedian)) plaintext")
        lines.append("")
        lines.append("as the cache grows (both caches a page in turn, pages of \(SyncBenchmark.defaultPageSize); median page rate over the \(sizing.window) messages after each point):")
        var grow = Table(header: ["cached messages", "encrypted", "plaintext", "encrypted / plaintext (time)"])
        for c in growth { grow.rows.append([String(c.cached), rate(c.encrypted), rate(c.plaintext), ratioText(c.ratio)]) }
        lines.append(grow.render())
        lines.append("slowest / fastest: encrypted \(String(format: "%.2f", encryptedFlatness)), plaintext \(String(format: "%.2f", plaintextFlatness))")
        lines.append("")
        lines.append("memory: \(memory.messages) messages into the encrypted cache, peak RSS \(memory.peakKiB) KiB, \(String(format: "%.1f", peakAboveMiB)) MiB above the \(memory.baselineKiB) KiB baseline" + (memory.peakReset ? "" : " (peak not reset: since the process started)"))
        lines.append("")
        lines.append("budget: encrypted median at \(SyncBenchmark.defaultPageSize) per page \(rate(defaultRate)) messages/s = \(percent(shareOfFloor)) of the floor \(rate(floorRate)) (SQLite alone), ≥ \(percent(SyncBenchCommand.budgetShareOfFloor)): \(rateWithinBudget ? "ok" : "FAILED")")
        lines.append("budget: encrypted / plaintext \(ratioText(defaultRatio)) ≤ the floor's \(ratioText(floor.ratio)) + \(String(format: "%.1f", SyncBenchCommand.budgetRatioOverFloor)) = \(ratioText(maxRatio)): \(ratioWithinBudget ? "ok" : "FAILED")")
        lines.append("budget: encrypted slowest / fastest \(String(format: "%.2f", encryptedFlatness)) ≥ \(SyncBenchCommand.budgetFlatness): \(growthWithinBudget ? "ok" : "FAILED")")
        lines.append("budget: peak memory \(String(format: "%.1f", peakAboveMiB)) MiB ≤ \(Int(SyncBenchCommand.budgetPeakMiB)) MiB above baseline: \(memoryWithinBudget ? "ok" : "FAILED")")
        lines.append(withinBudget ? "within budget" : "NOT within budget: " + failures.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }

    private func rate(_ value: Double) -> String {
        value.isFinite && abs(value) < 1e15 ? String(Int(value.rounded())) : "n/a"
    }

    private func percent(_ value: Double) -> String {
        value.isFinite ? "\(Int((value * 100).rounded())) %" : "n/a"
    }

}
