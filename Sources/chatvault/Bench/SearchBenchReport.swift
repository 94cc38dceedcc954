import ChatVault
import Foundation
import VaultStore

/// The figures and budget verdict of one `bench search` run.
struct SearchBenchReport: BudgetedReport {
    let sizing: SearchBenchCommand.Sizing
    let conversations: Int
    let cache: SearchBenchmark.CacheFigures
    let queries: [SearchBenchmark.QueryResult]
    let progressCount: TimingSummary
    let ingest: SearchBenchmark.Ingest
    let size: SearchBenchmark.Size
    let build: SearchBenchmark.Build

    var budget: SearchBudget {
        SearchBudget(queries: queries.compactMap { r in
            r.query.budget.map { kind in
                SearchBudget.Query(id: r.query.id, text: r.query.text, kind: kind, rows: r.matchingMessages, publicMs: r.publicAPI.medianMs,
                                   bareMatchMs: r.bareMatch.medianMs, sqlAloneMs: r.sqlAlone.medianMs)
            }
        }, ingestWithPerSecond: ingest.withMedian, ingestWithoutPerSecond: ingest.withoutMedian,
        indexOverDatabase: max(size.indexOverDatabase, size.rebuiltIndexOverDatabase),
        buildPeakAboveKiB: build.peakAboveKiB)
    }

    var withinBudget: Bool { budget.withinBudget }
    var failures: [String] { budget.failures }

    var json: JSON {
        func summary(_ t: TimingSummary) -> JSON {
            .object([("runs", .int(t.runs)), ("medianMs", .double(t.medianMs)), ("p90Ms", .double(t.p90Ms)),
                     ("minMs", .double(t.minMs)), ("maxMs", .double(t.maxMs))])
        }
        func rates(_ samples: [Double]) -> JSON {
            guard !samples.isEmpty else { return .null }
            return .object([("medianMessagesPerSecond", .double(TimingSummary(samples).medianMs)),
                            ("minMessagesPerSecond", .double(samples.min() ?? .nan)),
                            ("maxMessagesPerSecond", .double(samples.max() ?? .nan))])
        }
        let engine = CipherEngine.current
        let verdict = budget
        return .object([
            ("benchmark", .string("search")),
            ("build", .string(OpenBenchReport.build)),
            ("engine", .object([("cipher", .optional(engine.version)), ("sqlite", .string(engine.sqliteVersion))])),
            ("messages", .int(sizing.messages)),
            ("conversations", .int(conversations)),
            ("runs", .int(sizing.runs)),
            ("warmupRuns", .int(SearchBenchCommand.warmups)),
            ("limit", .int(SearchBenchQuery.limit)),
            ("cache", .object([
                ("pageSize", .int(cache.pageSize)), ("databasePages", .int(cache.databasePages)),
                ("bytesOnDisk", .int(Int(cache.bytesOnDisk))), ("seedSeconds", .double(cache.seedSeconds)),
                ("seedMessagesPerSecond", .double(Double(sizing.messages) / cache.seedSeconds)),
            ])),
            ("queries", .array(queries.map { r in
                .object([
                    ("id", .string(r.query.id)), ("title", .string(r.query.title)), ("query", .string(r.query.text)),
                    ("match", .string(r.query.match)), ("scope", .string(r.query.inConversation ? "conversation" : "everything")),
                    ("order", .string(r.query.orderName)), ("indexHits", .int(r.indexHits)),
                    ("matchingMessages", .int(r.matchingMessages)), ("pageRows", .int(r.pageRows)),
                    ("budget", r.query.budget.map { .string($0.rawValue) } ?? .null),
                    ("maxMs", r.query.budget.map { .double($0.maxMs) } ?? .null),
                    ("bareMatch", summary(r.bareMatch)), ("sqlAlone", summary(r.sqlAlone)), ("publicAPI", summary(r.publicAPI)),
                    ("publicOverSqlAlone", .double(r.publicOverSqlAlone)),
                    ("plan", .array(r.plan.map { .string($0) })),
                ])
            })),
            ("progressCount", summary(progressCount)),
            ("ingest", .object([
                ("messages", .int(ingest.messages)), ("pageSize", .int(ingest.pageSize)), ("runs", .int(ingest.runs)),
                ("withIndex", rates(ingest.withIndex)), ("withoutIndex", rates(ingest.withoutIndex)),
                ("perPageFloor", rates(ingest.perPage)),
                ("withOverWithout", .double(ingest.ratio)), ("perPageFloorOverWithout", .double(ingest.perPageRatio)),
                ("ftsAloneFloor", rates(ingest.ftsAlone)), ("ftsAloneFloorOverWithout", .double(ingest.ftsAloneRatio)),
                ("functionMicrosPerMessage", .double(ingest.functionMicrosMedian)),
                ("triggersDropped", .array(ingest.triggersDropped.map { .string($0) })),
            ])),
            ("size", .object([
                ("pageSize", .int(size.pageSize)), ("pagesWithIndex", .int(size.pagesWithIndex)),
                ("pagesWithoutIndex", .int(size.pagesWithoutIndex)), ("indexPages", .int(size.indexPages)),
                ("indexOverDatabase", .double(size.indexOverDatabase)), ("pagesAfterRebuild", .int(size.pagesAfterRebuild)),
                ("rebuiltIndexPages", .int(size.rebuiltIndexPages)), ("rebuiltIndexOverDatabase", .double(size.rebuiltIndexOverDatabase)),
            ])),
            ("indexBuild", .object([
                ("messages", .int(build.messages)), ("loginMs", .double(build.loginMs)), ("seconds", .double(build.seconds)),
                ("messagesPerSecond", .double(build.messagesPerSecond)), ("baselineKiB", .int(build.baselineKiB)),
                ("peakKiB", .int(build.peakKiB)), ("peakAboveBaselineKiB", .int(build.peakAboveKiB)), ("peakReset", .bool(build.peakReset)),
            ])),
            ("budget", .object([
                ("queries", .array(verdict.queries.map { q in
                    .object([("id", .string(q.id)), ("kind", .string(q.kind.rawValue)), ("medianMs", .double(q.publicMs)),
                             ("maxMs", .double(q.kind.maxMs)), ("bareMatchMs", .double(q.bareMatchMs)),
                             ("sqlAloneMs", .double(q.sqlAloneMs)), ("withinBudget", .bool(q.withinBudget))])
                })),
                ("queriesWithinBudget", .bool(verdict.queriesWithinBudget)),
                ("ingestWithOverWithout", .double(verdict.ingestRatio)),
                ("minIngestWithOverWithout", .double(SearchBudget.minIngestRatio)),
                ("ingestWithinBudget", .bool(verdict.ingestWithinBudget)),
                ("indexOverDatabase", .double(verdict.indexOverDatabase)),
                ("maxIndexOverDatabase", .double(SearchBudget.maxIndexOverDatabase)),
                ("sizeWithinBudget", .bool(verdict.sizeWithinBudget)),
                ("buildPeakAboveBaselineMiB", .double(verdict.buildPeakAboveMiB)),
                ("maxBuildPeakAboveBaselineMiB", .double(SearchBudget.maxBuildPeakMiB)),
                ("memoryWithinBudget", .bool(verdict.memoryWithinBudget)),
                ("withinBudget", .bool(verdict.withinBudget)),
                ("failures", .array(verdict.failures.map { .string($0) })),
            ])),
        ])
    }

    var table: String {
        let engine = CipherEngine.current
        var lines = [
            "chatvault bench search: \(sizing.messages) messages in \(conversations) conversation\(conversations == 1 ? "" : "s"), encrypted; SQLCipher \(engine.version ?? "none") on SQLite \(engine.sqliteVersion); \(OpenBenchReport.build) build",
            "\(sizing.runs) runs per query after \(SearchBenchCommand.warmups) warm-ups, one query after the other (each warm as it leaves the cache), limit \(SearchBenchQuery.limit), newest first unless said; medians (p90) in ms; floors on the same reader connection",
            "",
        ]
        var table = Table(header: ["query", "matching / index hits", "floor: bare MATCH", "floor: engine's SQL alone", "public API", "API / SQL", "budget"])
        for r in queries {
            table.rows.append([
                r.query.title, "\(r.matchingMessages) / \(r.indexHits)", "\(ms(r.bareMatch.medianMs)) (\(ms(r.bareMatch.p90Ms)))",
                "\(ms(r.sqlAlone.medianMs)) (\(ms(r.sqlAlone.p90Ms)))", "\(ms(r.publicAPI.medianMs)) (\(ms(r.publicAPI.p90Ms)))",
                ratioText(r.publicOverSqlAlone), r.query.budget.map { "≤ \(ms($0.maxMs))" } ?? "-",
            ])
        }
        lines.append(table.render())
        lines.append("each search also reads its indexProgress: \(ms(progressCount.medianMs)) ms alone, page cache dropped (p90 \(ms(progressCount.p90Ms)))")
        lines.append("")
        lines.append("query plans (EXPLAIN QUERY PLAN of the engine's statement):")
        for r in queries {
            lines.append("  \(r.query.id): " + r.plan.joined(separator: "; "))
        }
        lines.append("")
        var other = Table(header: ["measure", "figure"])
        other.rows = [
            ["seeding through the write-through, index kept", String(format: "%.1f s (%.0f msg/s)", cache.seedSeconds, Double(sizing.messages) / cache.seedSeconds)],
            ["ingest, sync pages of \(ingest.pageSize), with the index (median of \(ingest.withIndex.count))", rate(ingest.withMedian)],
            ["ingest, without it (search triggers dropped; median of \(ingest.withoutIndex.count))", rate(ingest.withoutMedian)],
            ["floor: the index written once per page (one INSERT … SELECT in docid order; median of \(ingest.perPage.count))",
             "\(rate(ingest.perPageMedian)) = \(ratioText(ingest.perPageRatio)) without the index"],
            ["floor: FTS4 alone writing the same texts, a page per transaction, added to the ingest without it (median of \(ingest.ftsAlone.count))",
             "\(rate(ingest.ftsAloneMedian)) = \(ratioText(ingest.ftsAloneRatio)) without the index"],
            ["the index's function alone over the same rows", String(format: "%.2f µs a message", ingest.functionMicrosMedian)],
            ["database without the index (VACUUMed)", pages(size.pagesWithoutIndex)],
            ["index as the triggers kept it", "\(pages(size.indexPages)) = \(percent(size.indexOverDatabase)) of the database without it"],
            ["index as the background build made it", "\(pages(size.rebuiltIndexPages)) = \(percent(size.rebuiltIndexOverDatabase))"],
            ["building the index of \(build.messages) messages (login included, \(ms(build.loginMs)) ms)",
             String(format: "%.2f s = %.0f msg/s", build.seconds, build.messagesPerSecond)],
            ["peak memory while building", String(format: "%.1f MiB above the baseline (%d over %d KiB%@)", Double(build.peakAboveKiB) / 1024,
                                                   build.peakKiB, build.baselineKiB, build.peakReset ? "" : "; VmHWM could not be reset")],
        ]
        lines.append(other.render())
        lines.append("")
        let verdict = budget
        for q in verdict.queries {
            lines.append("budget: \(q.kind.title), '\(q.text)' (\(q.rows) messages): \(ms(q.publicMs)) ms ≤ \(ms(q.kind.maxMs)) ms (floors: bare MATCH \(ms(q.bareMatchMs)) ms, the engine's SQL alone \(ms(q.sqlAloneMs)) ms): \(q.withinBudget ? "ok" : "MISSED")")
        }
        lines.append("budget: ingest with the index = \(ratioText(verdict.ingestRatio)) without it (floors: the index written once per page, \(ratioText(ingest.perPageRatio)); FTS4 alone, \(ratioText(ingest.ftsAloneRatio))), ≥ \(ratioText(SearchBudget.minIngestRatio)): \(verdict.ingestWithinBudget ? "ok" : "MISSED")")
        lines.append("budget: the index = \(percent(verdict.indexOverDatabase)) of the database without it (the larger of the two), ≤ \(percent(SearchBudget.maxIndexOverDatabase)): \(verdict.sizeWithinBudget ? "ok" : "MISSED")")
        lines.append("budget: building the index peaks \(String(format: "%.1f", verdict.buildPeakAboveMiB)) MiB above the baseline, ≤ \(Int(SearchBudget.maxBuildPeakMiB)) MiB: \(verdict.memoryWithinBudget ? "ok" : "MISSED")")
        lines.append(withinBudget ? "within budget" : "NOT within budget: " + failures.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }

    private func ms(_ value: Double) -> String {
        value.isFinite ? String(format: value < 10 ? "%.3f" : "%.1f", value) : "n/a"
    }

    private func rate(_ value: Double) -> String {
        value.isFinite ? String(format: "%.0f msg/s", value) : "n/a"
    }

    private func percent(_ value: Double) -> String {
        value.isFinite ? String(format: "%.1f %%", value * 100) : "n/a"
    }

    private func pages(_ count: Int) -> String {
        String(format: "%d pages (%.1f MiB)", count, Double(count * size.pageSize) / 1_048_576)
    }
}

/// The budgets of issue 24 applied to one run's figures; kept apart from the run so that the
/// verdict can be checked on figures given to it.
struct SearchBudget: BudgetVerdict {
    struct Query {
        let id: String
        let text: String
        let kind: SearchBenchQuery.Budget
        /// Messages the query matches.
        let rows: Int
        /// The public call's median.
        let publicMs: Double
        /// The floors' medians.
        let bareMatchMs: Double
        let sqlAloneMs: Double

        // Written so that a NaN (not measured) fails.
        var withinBudget: Bool { publicMs <= kind.maxMs }
    }

    /// Ingest with the index at least this share of the ingest without it.
    static let minIngestRatio = 0.75
    /// The index at most this share of the database without it.
    static let maxIndexOverDatabase = 0.6
    /// Building the index: peak resident memory at most this far above the baseline.
    static let maxBuildPeakMiB = 64.0

    let queries: [Query]
    let ingestWithPerSecond: Double
    let ingestWithoutPerSecond: Double
    let indexOverDatabase: Double
    let buildPeakAboveKiB: Int

    var ingestRatio: Double { ingestWithPerSecond / ingestWithoutPerSecond }
    var buildPeakAboveMiB: Double { Double(buildPeakAboveKiB) / 1024 }

    var queriesWithinBudget: Bool { !queries.isEmpty && queries.allSatisfy(\.withinBudget) }
    var ingestWithinBudget: Bool { ingestRatio >= Self.minIngestRatio }
    var sizeWithinBudget: Bool { indexOverDatabase <= Self.maxIndexOverDatabase }
    var memoryWithinBudget: Bool { buildPeakAboveMiB <= Self.maxBuildPeakMiB }
    var withinBudget: Bool { queriesWithinBudget && ingestWithinBudget && sizeWithinBudget && memoryWithinBudget }

    var failures: [String] {
        var out: [String] = []
        if queries.isEmpty { out.append("no query was measured") }
        for q in queries where !q.withinBudget {
            out.append("\(q.kind.title) ('\(q.text)', \(q.rows) messages) has a median of \(ms(q.publicMs)) ms through the public API, above \(ms(q.kind.maxMs)) ms; its floors: the bare MATCH \(ms(q.bareMatchMs)) ms, the engine's SQL alone \(ms(q.sqlAloneMs)) ms")
        }
        if !ingestWithinBudget {
            out.append("ingest with the index runs at \(ratioText(ingestRatio)) the rate without it (\(rate(ingestWithPerSecond)) against \(rate(ingestWithoutPerSecond))), below \(ratioText(Self.minIngestRatio))")
        }
        if !sizeWithinBudget {
            out.append(String(format: "the index takes %.1f %% of the database without it, above %.0f %%", indexOverDatabase * 100, Self.maxIndexOverDatabase * 100))
        }
        if !memoryWithinBudget {
            out.append(String(format: "building the index peaks %.1f MiB above the baseline, above %.0f MiB", buildPeakAboveMiB, Self.maxBuildPeakMiB))
        }
        return out
    }

    private func ms(_ value: Double) -> String {
        value.isFinite ? String(format: value < 10 ? "%.3f" : "%.1f", value) : "n/a"
    }

    private func rate(_ value: Double) -> String {
        value.isFinite ? String(format: "%.0f msg/s", value) : "n/a"
    }
}
