import ChatVaultAudit
import Foundation
import VaultKeys
import VaultStore

/// `chatvault audit --dir D [--user U] [--json] [--html FILE] [--runs FILE[,FILE…]]`: what happened
/// to one cache over time, from its audit journal (inside the encrypted database, read-only with
/// the key; and `audit.json` beside it, kept while none could open), its quarantine and its
/// status: opens, resets, their delivery to the app's reset listeners (which ids, on which
/// executor, how long after the open began, cached reads before), transient refusals, restores.
/// `--runs` adds tables of scenario runs: a `ResetAudit` report (`AuditReport.json()`) or the
/// output of `chatvault scenarios --json`. Changes nothing; prints no message content, no user id,
/// no key material.
enum AuditCommand {
    static func run(_ raw: [String]) throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let given = absolutePath(try args.required("dir"))
        let user = args.string("user")
        let html = args.string("html").map(absolutePath)
        let runFiles = args.string("runs").map { $0.split(separator: ",").map { absolutePath(String($0)) } } ?? []
        try args.rejectUnknown()
        if let html { try ScenarioReport.checkDestination(html, option: "--html") }
        let runs = try runFiles.map(ScenarioRuns.load)

        let directory = try StatusCommand.resolve(given, user: user, applicationId: common.applicationId)
        let history = CacheHistory.read(directory, common: common)
        if let html { try AuditPage.write(history, runs: runs, to: html) }
        if common.json {
            emit(history.json(runs: runs).render())
        } else {
            emit(history.text(runs: runs))
            if let html { emit("\nReport written to \(html)") }
        }
        return 0
    }
}

/// One cache's history as the audit reads it.
struct CacheHistory {
    var directory: String
    var cacheId: String?
    var encrypted: Bool
    var keyLookup: String
    var inUse: Bool
    /// "read", or why the database's journal could not be read.
    var databaseJournal: String
    var besideEntries: Int
    var timeline: [AuditEntry]
    var quarantine: [String]

    static func read(_ directory: CacheDirectory, common: CommonOptions) -> CacheHistory {
        let audit = Audit(directory: directory, common: common, marker: "")
        let manifest: Manifest? = { if case .valid(let m) = ManifestFile.read(directory: directory.path) { return m }; return nil }()
        let header = CipherProof.header(of: directory.database)
        let (_, keyLookup, _, key) = audit.keyItem(manifest)
        let inUse = audit.isLocked()
        let inside = ReadOnlyCache.read(directory: directory, manifest: manifest, header: header, key: key, inUse: inUse,
                                        what: "the journal") { db in try AuditJournal.entries(in: db) }
        let beside = AuditJournal.beside(directory)
        var all: [AuditEntry] = []
        var state = "read"
        switch inside {
        case .success(let entries): all = entries
        case .failure(let why): state = why.description
        }
        all += beside
        let timeline = AuditJournal.inTimeOrder(all)
        return CacheHistory(directory: directory.path, cacheId: manifest?.cacheId, encrypted: header == .opaque, keyLookup: keyLookup,
                            inUse: inUse, databaseJournal: state, besideEntries: beside.count, timeline: timeline,
                            quarantine: audit.quarantineEntries())
    }

    // MARK: - What the timeline adds up to

    struct Summary {
        var opens = 0
        var resets: [String: Int] = [:]
        var deliveries = 0
        var deliveredToNoListener = 0
        var deliveredAfterReads = 0
        var refusals: [String: Int] = [:]
        var restores = 0
    }

    var summary: Summary {
        var s = Summary()
        for entry in timeline {
            switch entry.kind {
            case .opened: s.opens += 1
            case .reset: s.resets[entry.reason ?? "?", default: 0] += 1
            case .delivered:
                s.deliveries += 1
                if (entry.listeners ?? []).isEmpty { s.deliveredToNoListener += 1 }
                if (entry.readsServedBefore ?? 0) > 0 { s.deliveredAfterReads += 1 }
            case .refused: s.refusals[entry.reason ?? "?", default: 0] += 1
            case .restored: s.restores += 1
            case .cleared, .keyChanged: break
            }
        }
        return s
    }

    static func counts(_ map: [String: Int]) -> String {
        map.isEmpty ? "none" : map.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }

    static func time(_ entry: AuditEntry) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: entry.date)
    }

    static func lost(_ n: Int?) -> String {
        guard let n else { return "?" }
        return n < 0 ? "unknown" : String(n)
    }

    /// The event's name and its details, in words.
    static func describe(_ e: AuditEntry) -> (String, String) {
        switch e.kind {
        case .opened:
            return ("opened", [e.outcome ?? "?", e.reason.map { "(\($0))" }].compactMap { $0 }.joined(separator: " "))
        case .reset:
            return ("reset", "\(e.reason ?? "?"); unsent messages lost: \(lost(e.pendingMessagesLost))")
        case .delivered:
            let listeners = e.listeners ?? []
            var words = listeners.isEmpty ? "\(e.reason ?? "?") reached NO listener" : "\(e.reason ?? "?") told to \(listeners.count) listener\(listeners.count == 1 ? "" : "s") (\(listeners.joined(separator: ", ")))"
            if let released = e.released, !released.isEmpty { words += "; released without removal: \(released.joined(separator: ", "))" }
            words += "; executor \(e.executor ?? "?")"
            if let ms = e.millisecondsAfterOpen { words += String(format: ", %.1f ms after the open began", ms) }
            words += ", \(e.readsServedBefore ?? 0) cached reads before"
            return ("delivered", words)
        case .refused: return ("refused", "\(e.reason ?? "?"): unavailable, nothing touched")
        case .restored: return ("restored", "from \(e.detail ?? "?")")
        case .cleared: return ("cleared", "the cached data wiped on request")
        case .keyChanged: return ("key", e.detail ?? "changed")
        }
    }

    // MARK: - Output

    func text(runs: [ScenarioRuns]) -> String {
        let s = summary
        var lines = [
            "cache:        \(directory)",
            "cache id:     \(cacheId ?? "none")",
            "encrypted:    \(encrypted ? "yes" : "no"); key: \(keyLookup); in use: \(inUse ? "yes" : "no")",
            "journal:      database \(databaseJournal); \(besideEntries) entr\(besideEntries == 1 ? "y" : "ies") beside it",
            "quarantine:   \(quarantine.isEmpty ? "empty" : quarantine.joined(separator: ", "))",
            "",
            "opens \(s.opens); resets: \(Self.counts(s.resets)); delivered \(s.deliveries) (to no listener: \(s.deliveredToNoListener), "
                + "after cached reads: \(s.deliveredAfterReads)); refusals: \(Self.counts(s.refusals)); restores \(s.restores)",
            "",
        ]
        if timeline.isEmpty { lines.append("The journal is empty.") }
        for entry in timeline {
            let (event, details) = Self.describe(entry)
            lines.append("\(Self.time(entry))  \(event.padding(toLength: 10, withPad: " ", startingAt: 0))  \(details)")
        }
        for run in runs {
            lines.append("")
            lines.append("\(run.title):")
            for row in run.rows {
                lines.append("  \(row.name.padding(toLength: 38, withPad: " ", startingAt: 0))  \(row.verdict.padding(toLength: 10, withPad: " ", startingAt: 0))  \(row.resets)\(row.notes.isEmpty ? "" : "  " + row.notes.joined(separator: "; "))")
            }
        }
        return lines.joined(separator: "\n")
    }

    func json(runs: [ScenarioRuns]) -> JSON {
        let s = summary
        func counts(_ map: [String: Int]) -> JSON { .object(map.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) }) }
        return .object([
            ("directory", .string(directory)), ("cacheId", .optional(cacheId)), ("encrypted", .bool(encrypted)),
            ("keyLookup", .string(keyLookup)), ("inUse", .bool(inUse)),
            ("journal", .object([("database", .string(databaseJournal)), ("besideEntries", .int(besideEntries))])),
            ("quarantine", .array(quarantine.map { .string($0) })),
            ("summary", .object([
                ("opens", .int(s.opens)), ("resets", counts(s.resets)), ("deliveries", .int(s.deliveries)),
                ("deliveredToNoListener", .int(s.deliveredToNoListener)), ("deliveredAfterReads", .int(s.deliveredAfterReads)),
                ("refusals", counts(s.refusals)), ("restores", .int(s.restores)),
            ])),
            ("timeline", .array(timeline.map(Self.entryJSON))),
            ("runs", .array(runs.map { $0.json })),
        ])
    }

    static func entryJSON(_ e: AuditEntry) -> JSON {
        var fields: [(String, JSON)] = [("at", .string(time(e))), ("kind", .string(e.kind.rawValue))]
        if let v = e.outcome { fields.append(("outcome", .string(v))) }
        if let v = e.reason { fields.append(("reason", .string(v))) }
        if let v = e.pendingMessagesLost { fields.append(("pendingMessagesLost", .int(Int64(v)))) }
        if let v = e.listeners { fields.append(("listeners", .array(v.map { .string($0) }))) }
        if let v = e.released { fields.append(("released", .array(v.map { .string($0) }))) }
        if let v = e.executor { fields.append(("executor", .string(v))) }
        if let v = e.onMainThread { fields.append(("onMainThread", .bool(v))) }
        if let v = e.millisecondsAfterOpen { fields.append(("millisecondsAfterOpen", .double(v))) }
        if let v = e.readsServedBefore { fields.append(("readsServedBefore", .int(Int64(v)))) }
        if let v = e.cacheId { fields.append(("cacheId", .string(v))) }
        if let v = e.detail { fields.append(("detail", .string(v))) }
        return .object(fields)
    }
}

/// A table of scenario runs read from a file: the kit's `AuditReport` or `chatvault scenarios
/// --json` output.
struct ScenarioRuns {
    struct Row {
        var name: String
        var verdict: String
        var resets: String
        var notes: [String]
    }

    var title: String
    var rows: [Row]

    static func load(_ path: String) throws -> ScenarioRuns {
        guard let data = FileManager.default.contents(atPath: path) else { throw CLIError.failure("--runs: cannot read \(path)") }
        if let report = try? AuditReport.decode(data) {
            return ScenarioRuns(report, title: "ResetAudit runs (\((path as NSString).lastPathComponent))")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let scenarios = object["scenarios"] as? [[String: Any]] else {
            throw CLIError.failure("--runs: \(path) is neither a ResetAudit report nor `chatvault scenarios --json` output")
        }
        return ScenarioRuns(title: "chatvault scenarios (\((path as NSString).lastPathComponent))", rows: scenarios.map { s in
            let calls = (s["listenerCalls"] as? [[String: Any]] ?? []).map { "\($0["reason"] as? String ?? "?")(\(CacheHistory.lost($0["pendingMessagesLost"] as? Int)))" }
            return Row(name: s["name"] as? String ?? "?", verdict: s["verdict"] as? String ?? "?",
                       resets: calls.isEmpty ? "no reset" : calls.joined(separator: ", "), notes: s["deviations"] as? [String] ?? [])
        })
    }

    init(title: String, rows: [Row]) {
        self.title = title
        self.rows = rows
    }

    init(_ report: AuditReport, title: String) {
        self.title = title
        rows = report.scenarios.map { run in
            let resets = run.launches.flatMap(\.resets).map { "\($0.reason ?? "?")(\(CacheHistory.lost($0.pendingMessagesLost)))" }
            return Row(name: run.name, verdict: run.findings.isEmpty ? "ok" : "\(run.findings.count) finding\(run.findings.count == 1 ? "" : "s")",
                       resets: resets.isEmpty ? "no reset" : resets.joined(separator: ", "),
                       notes: run.findings.map { "\($0.kind.rawValue): expected \($0.expected); seen \($0.seen)" })
        }
    }

    var json: JSON {
        .object([("title", .string(title)), ("rows", .array(rows.map { r in
            .object([("name", .string(r.name)), ("verdict", .string(r.verdict)), ("resets", .string(r.resets)),
                     ("notes", .array(r.notes.map { .string($0) }))])
        }))])
    }
}
