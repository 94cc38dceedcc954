import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// What `chatvault status` reports of the catch-up sync: the `sync_state` row, read through a
/// read-only connection (`PRAGMA query_only`) with the key the audit already looked up.
///
/// Reported: the sync point's server time (`last_sync_at`, "never" when 0) and its age against this
/// machine's clock, the last attempt (local clock), how the last sweep ended (`caughtUp`,
/// `partial`, `failed`) and the error code that stopped it. The token is the server's cursor:
/// opaque, and treated as secret-ish, so only whether one is stored is said. Nothing else of the
/// cache is read.
///
/// The audit changes nothing, so the row is not read when a process that did not close the cache
/// left a write-ahead log behind and no process holds the cache now: the last connection to close
/// folds that log into the database (what the next open does anyway), and that would be a change.
struct SyncAudit {
    /// nil: the row could not be read (`unavailable` says why).
    var record: SyncStateRecord?
    var unavailable: String?
    /// This machine's clock when the row was read (epoch seconds).
    var now: Int64

    static func read(directory: CacheDirectory, manifest: Manifest?, header: CipherProof.Header, key: CacheKey?, inUse: Bool,
                     now: Int64 = Int64(Date().timeIntervalSince1970)) -> SyncAudit {
        switch ReadOnlyCache.read(directory: directory, manifest: manifest, header: header, key: key, inUse: inUse, what: "the sync state",
                                  { db in try SyncStateRows.load(in: db) }) {
        case .success(let record): return SyncAudit(record: record, unavailable: nil, now: now)
        case .failure(let why): return SyncAudit(record: nil, unavailable: why.description, now: now)
        }
    }

    static func time(_ seconds: Int64) -> JSON {
        seconds > 0 ? .string(iso(seconds)) : .string("never")
    }

    static func iso(_ seconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    /// `status --json`'s `sync` object.
    var json: JSON {
        guard let record else {
            return .object([("available", .bool(false)), ("detail", .optional(unavailable))])
        }
        return .object([
            ("available", .bool(true)),
            ("syncPointStored", .bool(record.token != nil)),
            ("lastSyncAt", .int(record.lastSyncAt)),
            ("lastSync", Self.time(record.lastSyncAt)),
            ("lastSyncAgeSeconds", record.lastSyncAt > 0 ? .int(now - record.lastSyncAt) : .null),
            ("lastAttemptAt", .int(record.lastAttemptAt)),
            ("lastAttempt", Self.time(record.lastAttemptAt)),
            ("lastOutcome", .optional(record.lastOutcome?.rawValue)),
            ("lastErrorCode", .optional(record.lastErrorCode)),
        ])
    }

    /// The text form's line, from the JSON (`status` renders its table from the report).
    static func line(_ sync: JSON?) -> String {
        guard let sync, case .bool(true)? = sync["available"] else {
            if case .string(let why)? = sync?["detail"] { return "sync: unavailable (\(why))" }
            return "sync: unavailable"
        }
        func text(_ key: String) -> String {
            switch sync[key] {
            case .string(let s)?: return s
            case .int(let n)?: return String(n)
            case .bool(let b)?: return b ? "yes" : "no"
            default: return "-"
            }
        }
        let last: String
        if case .int(let age)? = sync["lastSyncAgeSeconds"] {
            last = "\(text("lastSync")) (\(age) s ago)"
        } else {
            last = "never"
        }
        var outcome = text("lastOutcome")
        if case .string(let code)? = sync["lastErrorCode"] { outcome += " (\(code))" }
        return "sync: last synced \(last); last attempt \(text("lastAttempt")); last outcome \(outcome == "-" ? "none" : outcome); "
            + "sync point stored: \(text("syncPointStored"))"
    }
}
