import ChatVaultAudit
import Foundation
import VaultStore

/// `chatvault audit --html FILE`: the cache's history as one self-contained page (inline style, no
/// script, nothing fetched; 0600, written atomically): a summary, the timeline of opens, resets,
/// deliveries, refusals and restores, and the tables of scenario runs given with `--runs`. The same
/// facts as the text output: no message content, no user id, no key material.
enum AuditPage {
    static func write(_ history: CacheHistory, runs: [ScenarioRuns], to path: String) throws {
        try ScenarioReport.writePage(html(history, runs: runs, at: Date()), to: path, option: "--html")
    }

    /// The kit's runs alone (`chatvault audit-app --html`): the same runs table, no cache history.
    static func writeRuns(_ report: AuditReport, to path: String) throws {
        let runs = ScenarioRuns(report, title: "ResetAudit runs")
        let e = ScenarioReport.escape
        let page = """
            \(head("ChatVault app audit"))
            <p id="summary">\(report.scenarios.count) scenarios, \(report.appFindings.count) findings about the app, \
            \(report.libraryFindings.count) about the library; \(Int(report.milliseconds)) ms. Written \(e(ISO8601DateFormatter().string(from: Date()))).</p>
            \(table(runs))
            </body></html>
            """
        try ScenarioReport.writePage(page, to: path, option: "--html")
    }

    /// The page up to its first heading.
    static func head(_ title: String) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8">
        <title>\(ScenarioReport.escape(title))</title>
        <style>\(style)</style></head>
        <body>
        <h1>\(ScenarioReport.escape(title))</h1>
        """
    }

    static let style = """
        body { font: 14px/1.4 sans-serif; margin: 2em; color: #222; }
        h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.5em; }
        table { border-collapse: collapse; width: 100%; }
        th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
        th { background: #eee; }
        tr.reset td, tr.deviates td { background: #fde8e8; }
        tr.alarm td { background: #f8c8c8; font-weight: bold; }
        tr.delivered td { background: #eef6ee; }
        tr.refused td { background: #fff6dd; }
        tr.restored td { background: #e4eefc; }
        tr.ok td:nth-child(2) { color: #176b1a; font-weight: bold; }
        dl { display: grid; grid-template-columns: max-content auto; gap: 2px 1em; }
        dt { font-weight: bold; }
        """

    static func table(_ run: ScenarioRuns) -> String {
        let e = ScenarioReport.escape
        let body = run.rows.map { r in
            let kind = r.verdict == "ok" ? "ok" : r.verdict == "skipped" ? "skipped" : "deviates"
            return "<tr class=\"\(kind)\"><td>\(e(r.name))</td><td>\(e(r.verdict))</td><td>\(e(r.resets))</td><td>\(e(r.notes.joined(separator: "; ")))</td></tr>"
        }.joined(separator: "\n")
        return """
            <h2>\(e(run.title))</h2>
            <table class="runs"><thead><tr><th>scenario</th><th>verdict</th><th>resets (unsent lost)</th><th>findings</th></tr></thead>
            <tbody>
            \(body)
            </tbody></table>
            """
    }

    static func html(_ history: CacheHistory, runs: [ScenarioRuns], at date: Date) -> String {
        let e = ScenarioReport.escape
        let s = history.summary
        let rows = history.timeline.map { entry -> String in
            let (event, details) = CacheHistory.describe(entry)
            let kind = entry.kind == .delivered && (entry.listeners ?? []).isEmpty ? "alarm" : entry.kind.rawValue
            return "<tr class=\"\(kind)\"><td>\(e(CacheHistory.time(entry)))</td><td>\(e(event))</td><td>\(e(details))</td></tr>"
        }.joined(separator: "\n")
        let tables = runs.map(table).joined(separator: "\n")
        return """
            \(head("ChatVault cache audit"))
            <dl id="facts">
            <dt>cache id</dt><dd>\(e(history.cacheId ?? "none"))</dd>
            <dt>encrypted</dt><dd>\(history.encrypted ? "yes" : "no")</dd>
            <dt>key</dt><dd>\(e(history.keyLookup))</dd>
            <dt>journal</dt><dd>database: \(e(history.databaseJournal)); \(history.besideEntries) entries kept beside it</dd>
            <dt>quarantine</dt><dd>\(e(history.quarantine.isEmpty ? "empty" : history.quarantine.joined(separator: ", ")))</dd>
            </dl>
            <p id="summary">\(s.opens) opens; resets: \(e(CacheHistory.counts(s.resets))); \(s.deliveries) delivered \
            (to no listener: \(s.deliveredToNoListener), after cached reads: \(s.deliveredAfterReads)); \
            refusals: \(e(CacheHistory.counts(s.refusals))); \(s.restores) restores. Written \(e(ISO8601DateFormatter().string(from: date))).</p>
            <p>A reset sets the old cache aside (its key lost or wrong, the file damaged, failures escalated) or migrates it
            (encryption turned on or off); it is delivered to the app's reset listeners before the new cache serves a read.
            A refusal is a transient condition (a locked keyring, a busy file, another process): nothing was touched.</p>
            <h2>Timeline</h2>
            <table id="timeline"><thead><tr><th>when</th><th>event</th><th>details</th></tr></thead>
            <tbody>
            \(rows.isEmpty ? "<tr><td colspan=\"3\">The journal is empty.</td></tr>" : rows)
            </tbody></table>
            \(tables)
            </body></html>
            """
    }
}
