import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// `chatvault open --dir D --user U [--encryption on|off] [--failure-behavior …] [--integrity-wait S] [--keystore …]`:
/// opens the cache as an app would and reports the outcome, every reset-listener call, the status,
/// the row counts and the cache id.
///
/// A cache larger than the synchronous integrity-check limit (1 MiB) opens `ready` before its
/// `quick_check` has run; the check runs in the background and a damaged cache is reset moments
/// later. The audit waits for that check (up to `--integrity-wait` seconds, default 120) and
/// reports the state after it: `integrityCheck` is `notNeeded` (checked during the open),
/// `intact`, `damaged` (the cache was reset; the reset is among `resets`), `unknown`,
/// `interrupted` (the cache closed before the check ended: not checked, checked again at the next
/// open), or `pending` (still running when the wait ended: the cache is not yet known to be healthy).
enum OpenCommand {
    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let encryption = try args.choice("encryption", default: "on", among: ["on", "off"]) == "on"
        let behavior = EncryptionFailureBehavior(rawValue: try args.choice("failure-behavior", default: "onlineOnly",
                                                                           among: EncryptionFailureBehavior.allCases.map(\.rawValue)))!
        let wait = try args.int("integrity-wait", default: 120, range: 0...86_400)
        try args.rejectUnknown()

        let report = try await OpenReportJSON.open(common, root: root, user: user, encryption: encryption, behavior: behavior,
                                                   integrityWait: .seconds(wait))
        if common.json {
            emit(report.render())
        } else {
            emit(OpenReportJSON.table(report))
        }
        return 0
    }
}

enum OpenReportJSON {
    /// Opens, records, closes; the report as JSON (the same fields as `--json` prints).
    static func open(_ common: CommonOptions, root: String, user: String, encryption: Bool,
                     behavior: EncryptionFailureBehavior, memory: MemoryKeyStore? = nil,
                     integrityWait: Duration = .seconds(120)) async throws -> JSON {
        let vault = try makeVault(common, root: root, encryption: encryption, behavior: behavior, memory: memory)
        let recorder = ResetRecorder()
        vault.addOfflineCacheResetListener("chatvault-open", recorder)
        let started = Date()
        let attempt = await vault.login(userId: user)
        let elapsed = Date().timeIntervalSince(started)
        // A large cache's check runs after `ready`: the audit reports what it found, not the
        // state before it (a damaged cache would otherwise pass for a healthy one).
        let check = await vault.waitForIntegrityCheck(timeout: integrityWait)
        var (state, cacheId, notes) = (attempt.state, attempt.cacheId, attempt.notes)
        if let reopen = check.reopen {
            (state, cacheId) = (reopen.state, reopen.cacheId)
            notes += reopen.notes
        }
        if check.result == .pending {
            notes.append("the background integrity check was still running after \(integrityWait): the cache is not yet known to be intact")
        }
        let counts = rowCounts(vault)
        let fields: [(String, JSON)] = [
            ("outcome", .string(state.outcome)),
            ("unavailableReason", .optional(state.unavailableReason)),
            ("detail", .optional(state.detail)),
            ("integrityCheck", .string(check.result.rawValue)),
            ("resets", recorder.calls.json),
            ("listenerCalls", .int(recorder.calls.count)),
            ("offlineEnabled", .bool(vault.isOfflineEnabled())),
            ("status", vault.offlineEncryptionStatus().json),
            ("messages", counts.map { .int($0.messages) } ?? .null),
            ("pending", counts.map { .int($0.pending) } ?? .null),
            ("cacheId", .optional(cacheId)),
            ("notes", .array(notes.map { .string($0) })),
            ("milliseconds", .double(elapsed * 1000)),
        ]
        await vault.logout()
        return .object(fields)
    }

    static func table(_ report: JSON) -> String {
        func text(_ key: String) -> String {
            switch report[key] {
            case .string(let s)?: return s
            case .bool(let b)?: return b ? "yes" : "no"
            case .int(let n)?: return String(n)
            case .double(let d)?: return String(format: "%.1f", d)
            default: return "-"
            }
        }
        var table = Table(header: ["field", "value"])
        table.rows = [
            ["outcome", text("outcome") + (report["unavailableReason"].flatMap { if case .string(let s) = $0 { return " (\(s))" } else { return nil } } ?? "")],
            ["integrity check", text("integrityCheck")],
            ["offline enabled", text("offlineEnabled")],
            ["cache id", text("cacheId")],
            ["messages", text("messages")],
            ["pending", text("pending")],
            ["milliseconds", text("milliseconds")],
        ]
        if case .array(let resets)? = report["resets"] {
            for reset in resets {
                if case .string(let reason)? = reset["reason"], case .int(let lost)? = reset["pendingMessagesLost"] {
                    table.rows.append(["reset", "\(reason), pending messages lost: \(lost)"])
                }
            }
        }
        if case .object(let status)? = report["status"] {
            for (key, value) in status {
                let shown: String
                switch value {
                case .string(let s): shown = s
                case .bool(let b): shown = String(b)
                default: shown = "null"
                }
                table.rows.append(["status.\(key)", shown])
            }
        }
        if case .array(let notes)? = report["notes"] {
            for case .string(let note) in notes { table.rows.append(["note", note]) }
        }
        return table.render()
    }
}
