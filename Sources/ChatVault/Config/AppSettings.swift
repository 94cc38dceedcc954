/// The SDK's init-time settings, for apps ported from it: the offline configuration is attached with
/// `AppSettings.AppSettingsBuilder().setOfflineConfig(_:)` and read back, read-only, as
/// `AppSettings.offlineConfig`. An engine is made from them with `OfflineVault(appSettings:settings:)`.
///
///     let offline = OfflineConfig.Builder().setEnabled(true).setEncryption(true).build()
///     let appSettings = AppSettings.AppSettingsBuilder().setOfflineConfig(offline).build()
///     appSettings.offlineConfig.maxConversations   // 100
///     CometChat.offlineVault = try OfflineVault(appSettings: appSettings,
///                                               settings: VaultSettings(applicationId: "org.example.Chat"))
///
/// Only the offline part of the SDK's settings exists here: ChatVault's own settings (application
/// id, key storage, callback executor) are `VaultSettings`.
public final class AppSettings: Sendable {
    /// The offline configuration attached at init (the default configuration, offline off, when none was).
    public let offlineConfig: OfflineConfig

    init(offlineConfig: OfflineConfig) {
        self.offlineConfig = offlineConfig
    }

    /// Builds `AppSettings` (`AppSettings.AppSettingsBuilder()` in the SDK).
    public final class AppSettingsBuilder {
        private var offlineConfig = OfflineConfig()

        /// A builder with the default offline configuration (offline off).
        public init() {}

        /// Attaches the offline configuration; the last one set wins.
        @discardableResult public func setOfflineConfig(_ config: OfflineConfig) -> Self {
            offlineConfig = config
            return self
        }

        /// The settings, with the offline configuration attached last (or the default one).
        public func build() -> AppSettings {
            AppSettings(offlineConfig: offlineConfig)
        }
    }
}

extension OfflineVault {
    /// Creates the engine from the SDK's `AppSettings`: the same as
    /// `OfflineVault(config: appSettings.offlineConfig, settings: settings, backend: backend, wireLimits: wireLimits)`.
    /// - Throws: `VaultSetupError` as the designated initialiser does.
    public convenience init(appSettings: AppSettings, settings: VaultSettings, backend: any ChatBackend = UnreachableBackend(),
                            wireLimits: WireLimits = WireLimits()) throws(VaultSetupError) {
        try self.init(config: appSettings.offlineConfig, settings: settings, backend: backend, wireLimits: wireLimits)
    }
}
