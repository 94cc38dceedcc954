public import ChatVault
public import ChatVaultSimulator

/// What the kit needs from the app under audit: its vault, built with its own listeners, and what
/// it is showing the user about lost history. Implement it in the app's test target over the app's
/// own objects (the kit keeps the object alive while the launch runs, as a running app would).
///
///     final class MyAppUnderAudit: AuditableApp {
///         let app: MyApp
///         init(_ env: AuditEnvironment) throws { app = try MyApp(config: env.apply(to: MyApp.config),
///                                                              settings: env.apply(to: MyApp.settings),
///                                                              backend: env.backend) }
///         var vault: OfflineVault { app.vault }
///         func resetNotices() -> [ResetNotice] { app.banner.shown }   // what the user sees
///     }
public protocol AuditableApp: AnyObject, Sendable {
    /// The app's vault (its reset listeners attached as the app attaches them).
    var vault: OfflineVault { get }
    /// Starts the app as a user's launch does, up to its first screen. Default: `vault.login`.
    func launch(userId: String) async
    /// The reset notices the app is showing now (a banner, a dialog), as the user sees them.
    func resetNotices() -> [ResetNotice]
}

extension AuditableApp {
    public func launch(userId: String) async {
        await vault.login(userId: userId)
    }
}

/// One notice an app showed about a reset: the reason it gave, if any, and the number of unsent
/// messages it told the user were lost (nil: it did not say; -1: it said the number is unknown).
public struct ResetNotice: Sendable, Equatable, Codable {
    public var reason: String?
    public var unsentMessagesLost: Int?

    public init(reason: OfflineCacheResetReason? = nil, unsentMessagesLost: Int? = nil) {
        self.reason = reason?.rawValue
        self.unsentMessagesLost = unsentMessagesLost
    }
}

/// What the kit hands the app's factory for one launch: the isolated place and keyring it must use.
/// The app keeps its own settings and listeners and takes these few from here.
public struct AuditEnvironment: Sendable {
    /// The application id the scenario's caches and key items use.
    public let applicationId: String
    /// The user every launch logs in (`launch(userId:)` receives it too).
    public let userId: String
    /// A fresh directory for this scenario's caches.
    public let rootDirectory: String
    /// The scenario's key stores (a Secret Service on a private keyring, never the user's).
    public let keyStorage: [KeyStorageOption]
    /// The scenario's server: an in-process simulator seeded with the user's conversation.
    public let backend: SimulatedClient
    /// What the scenario sets in the `OfflineConfig` (the rest is the app's).
    public let encryption: Bool
    public let encryptionFailureBehavior: EncryptionFailureBehavior

    /// The app's configuration with offline support on and the scenario's encryption choices.
    public func apply(to config: OfflineConfig) -> OfflineConfig {
        OfflineConfig.Builder(config).setEnabled(true).setEncryption(encryption).setEncryptionFailureBehavior(encryptionFailureBehavior).build()
    }

    /// The app's settings with the scenario's application id, root and key stores.
    public func apply(to settings: VaultSettings) -> VaultSettings {
        var settings = settings
        settings.applicationId = applicationId
        settings.rootDirectory = rootDirectory
        settings.keyStorage = keyStorage
        return settings
    }
}

/// Builds the app for one launch of a scenario (called once per launch: a relaunch is a new app).
public typealias AuditAppFactory = @Sendable (AuditEnvironment) async throws -> any AuditableApp
