public import ChatVault
import Foundation
import Synchronization

/// An app that handles resets as the library asks, in a few lines: one reset listener, kept by
/// the app and registered before login, its notice (with the number of unsent messages lost) set
/// at once on its executor, nothing shown for a migration. The kit finds nothing in it: a baseline
/// (a finding over it is the library's), and the app `chatvault bench kit` times.
///
///     let report = try await ResetAudit { env in try ReferenceAuditedApp(env) }.run()
public final class ReferenceAuditedApp: AuditableApp, OfflineCacheResetListener {
    public let vault: OfflineVault
    private let shown = Mutex<[ResetNotice]>([])

    public init(_ env: AuditEnvironment) throws {
        let settings = VaultSettings(applicationId: env.applicationId, callbackExecutor: .queue(DispatchQueue(label: "chatvault.audit.reference")))
        vault = try OfflineVault(config: env.apply(to: OfflineConfig.Builder().build()), settings: env.apply(to: settings), backend: env.backend)
        vault.addOfflineCacheResetListener("REFERENCE", self)
    }

    public func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) {
        guard reason != .encryptionChanged else { return }
        shown.withLock { $0.append(ResetNotice(reason: reason, unsentMessagesLost: pendingMessagesLost)) }
    }

    public func resetNotices() -> [ResetNotice] { shown.withLock { $0 } }
}
