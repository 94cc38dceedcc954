import Foundation

/// `chatvault scenarios --report FILE.html`: the scenario runs as one self-contained HTML page
/// (inline style, no script, nothing fetched), readable in any browser without a server. It holds
/// what the table holds (names, verdicts, expected and observed outcomes, each reset the listener
/// heard with its count of unsent messages lost, what the cache kept, the deviations): never a
/// message text, a user id or key material. Written 0600, atomically (a temporary file renamed).
enum ScenarioReport {
    /// Refuses a destination whose directory does not exist, before any scenario runs.
    static func checkDestination(_ path: String, option: String = "--report") throws {
        var isDirectory: ObjCBool = false
        let directory = (path as NSString).deletingLastPathComponent
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw CLIError.usage("\(option): no directory \(directory)")
        }
    }

    static func write(_ results: [ScenarioResult], keystore: String, to path: String) throws {
        try writePage(html(results, keystore: keystore, at: Date()), to: path, option: "--report")
    }

    /// Writes a page 0600 through a temporary file renamed over `path`.
    static func writePage(_ page: String, to path: String, option: String) throws {
        let temporary = path + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(page.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CLIError.failure("\(option): \(path) could not be written")
        }
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw CLIError.failure("\(option): \(path) could not be written")
        }
    }

    /// Text as HTML (every character that could start markup or end an attribute escaped).
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    static func html(_ results: [ScenarioResult], keystore: String, at date: Date) -> String {
        let skipped = results.filter { $0.skipped != nil }.count
        let deviating = results.filter { !$0.passed }.count
        let ok = results.count - skipped - deviating
        let stamp = ISO8601DateFormatter().string(from: date)
        let header = ScenariosCommand.columns.map { "<th>\(escape($0))</th>" }.joined()
        let rows = results.map { r -> String in
            let cells = ScenariosCommand.cells(r).map { "<td>\(escape($0))</td>" }.joined()
            let detail = r.skipped.map { "skipped: " + $0 } ?? (r.deviations.isEmpty ? r.summary : r.deviations.joined(separator: "; "))
            let kind = r.skipped != nil ? "skipped" : r.deviations.isEmpty ? "ok" : "deviates"
            return "<tr class=\"\(kind)\">\(cells)</tr>\n<tr class=\"detail \(kind)\"><td colspan=\"\(ScenariosCommand.columns.count)\">\(escape(detail))</td></tr>"
        }.joined(separator: "\n")
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8">
            <title>ChatVault scenario report</title>
            <style>
            body { font: 14px/1.4 sans-serif; margin: 2em; color: #222; }
            h1 { font-size: 1.4em; }
            table { border-collapse: collapse; width: 100%; }
            th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
            th { background: #eee; }
            tr.ok td:nth-child(2) { color: #176b1a; font-weight: bold; }
            tr.deviates td { background: #fde8e8; }
            tr.deviates td:nth-child(2) { color: #a11; font-weight: bold; }
            tr.skipped td { color: #777; }
            tr.detail td { font-size: 0.9em; color: #555; border-top: none; }
            .summary { font-size: 1.1em; margin: 1em 0; }
            </style></head>
            <body>
            <h1>ChatVault scenario report</h1>
            <p class="summary" id="summary">\(ok) ok, \(deviating) deviating, \(skipped) skipped; key store: \(escape(keystore)); \
            run at \(escape(stamp)).</p>
            <p>Each scenario breaks a real cache (a lost or wrong key, a damaged file, a locked keyring…), reopens it, and
            compares what the library reported and what the reset listener heard with what the library guarantees.
            "rows kept" is messages/unsent messages after the scenario's last open; "lost" is what each reset told the
            listener about unsent messages (-1: not known).</p>
            <table id="scenarios">
            <thead><tr>\(header)</tr></thead>
            <tbody>
            \(rows)
            </tbody>
            </table>
            </body></html>
            """
    }
}
