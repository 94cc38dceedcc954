public import ChatVault
public import Foundation
import Synchronization

/// A small chat app's offline set-up, as an app would write it: its vault, its reset banner, its
/// first screen. `Variant.right` handles resets as the library asks; every other variant plants
/// one fault that `ResetAudit` (ChatVaultAudit) must find (see `AuditedAppTests`).
public final class ChatApp: Sendable {
    public enum Variant: String, Sendable, CaseIterable {
        /// Listener registered before login and kept; banner set at once, with the count.
        case right
        /// Never registers a reset listener.
        case noListener
        /// Registers a listener it does not keep (the vault holds listeners weakly).
        case releasedListener
        /// The banner says history was reset but not how many unsent messages were lost.
        case countIgnored
        /// The banner goes up a moment later, after the first screen has read the new cache.
        case deferredBanner
        /// Shows "history reset" whenever the cache is not available (a locked keyring too).
        case bannerWhenUnavailable
        /// Remembers the banner on disk and shows it at every launch.
        case bannerEveryLaunch
    }

    /// What the banner says.
    public struct Banner: Sendable, Equatable {
        public var reason: OfflineCacheResetReason?
        public var unsentLost: Int?
    }

    public let vault: OfflineVault
    public let variant: Variant
    /// The app's UI thread (a GLib main context in a real app).
    public let ui = DispatchQueue(label: "audited-app.ui")
    private let banners = Mutex<[Banner]>([])
    private let listener: BannerListener?
    private let stateFile: String

    public init(variant: Variant, config: OfflineConfig, settings: VaultSettings, backend: any ChatBackend) throws {
        self.variant = variant
        var settings = settings
        settings.callbackExecutor = .queue(ui)
        vault = try OfflineVault(config: config, settings: settings, backend: backend)
        stateFile = settings.resolvedRoot + "/../audited-app-banner"
        let listener = BannerListener()
        switch variant {
        case .noListener:
            self.listener = nil
        case .releasedListener:
            self.listener = nil
            vault.addOfflineCacheResetListener("BANNER", BannerListener())   // released at once: a fault
        default:
            self.listener = listener
            vault.addOfflineCacheResetListener("BANNER", listener)
        }
        listener.app = WeakApp(self)
    }

    /// The standard configuration of this app.
    public static var config: OfflineConfig {
        OfflineConfig.Builder().setEnabled(true).setEncryption(true).setMaxPendingMessages(500).build()
    }

    public static var settings: VaultSettings {
        VaultSettings(applicationId: "org.example.AuditedApp", applicationName: "Audited App")
    }

    /// Login, then the first screen's reads.
    public func start(userId: String) async {
        await vault.login(userId: userId)
        if variant == .bannerWhenUnavailable, !vault.isOfflineEnabled() {
            show(Banner(reason: nil, unsentLost: nil))   // a fault: a locked keyring is not a reset
        }
        if variant == .bannerEveryLaunch, FileManager.default.fileExists(atPath: stateFile) {
            show(Banner(reason: nil, unsentLost: nil))   // a fault: shown again at every launch
        }
    }

    /// What the banner shows now.
    public var shownBanners: [Banner] { banners.withLock { $0 } }

    func show(_ banner: Banner) {
        banners.withLock { $0.append(banner) }
    }

    func heard(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) {
        // Called on `ui` (the executor): the banner is up before login returns.
        let banner = Banner(reason: reason, unsentLost: variant == .countIgnored ? nil : pendingMessagesLost)
        guard reason != .encryptionChanged else { return }   // migrated: nothing to tell
        switch variant {
        case .deferredBanner:
            ui.asyncAfter(deadline: .now() + 0.3) { self.show(banner) }
        case .bannerEveryLaunch:
            show(banner)
            _ = FileManager.default.createFile(atPath: stateFile, contents: Data("1".utf8), attributes: [.posixPermissions: 0o600])
        default:
            show(banner)
        }
    }
}

final class WeakApp: @unchecked Sendable {
    weak var app: ChatApp?
    init(_ app: ChatApp) { self.app = app }
}

final class BannerListener: OfflineCacheResetListener, @unchecked Sendable {
    var app: WeakApp?
    func onOfflineCacheReset(_ reason: OfflineCacheResetReason, _ pendingMessagesLost: Int) {
        app?.app?.heard(reason, pendingMessagesLost)
    }
}
