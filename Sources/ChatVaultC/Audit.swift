import CChatVault
import ChatVault
import Foundation
import VaultStore

/// `cv_vault_get_audit_journal`: the cache's audit journal (`OfflineVault.offlineAuditJournal()`)
/// as a JSON array, oldest first.
@c(cv_vault_get_audit_journal)
public func cvVaultGetAuditJournal(_ vault: OpaquePointer?, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    let entries = box.vault.offlineAuditJournal().map { e -> JSONValue in
        var fields: [String: JSONValue] = ["at": .string(formatter.string(from: e.date)), "kind": .string(e.kind.rawValue)]
        if let v = e.outcome { fields["outcome"] = .string(v) }
        if let v = e.reason { fields["reason"] = .string(v) }
        if let v = e.pendingMessagesLost { fields["pendingMessagesLost"] = .int(Int64(v)) }
        if let v = e.listeners { fields["listeners"] = .array(v.map { .string($0) }) }
        if let v = e.released { fields["released"] = .array(v.map { .string($0) }) }
        if let v = e.executor { fields["executor"] = .string(v) }
        if let v = e.onMainThread { fields["onMainThread"] = .bool(v) }
        if let v = e.millisecondsAfterOpen { fields["millisecondsAfterOpen"] = .double(v) }
        if let v = e.readsServedBefore { fields["readsServedBefore"] = .int(Int64(v)) }
        if let v = e.cacheId { fields["cacheId"] = .string(v) }
        if let v = e.detail { fields["detail"] = .string(v) }
        return .object(fields)
    }
    return owned(CModels.text(.array(entries)))
}
