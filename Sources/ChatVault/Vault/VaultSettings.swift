public import Foundation
public import VaultKeys
public import VaultStore

/// Which key stores the app accepts, in order of preference.
public enum KeyStorageOption: Sendable {
    /// The desktop's Secret Service (tier `KEYSTORE`). `unlockPrompt` lets a lookup ask the desktop
    /// to unlock a locked keyring (off the caller's thread, bounded by `timeout`).
    case secretService(unlockPrompt: Bool = false, timeout: Duration? = nil)
    /// A key file in a private directory outside the cache (tier `SOFTWARE`); nil means
    /// `$XDG_CONFIG_HOME/<application id>/cache-keys`. Only used when listed: never a silent fallback.
    case software(directory: String? = nil)
    /// Any other store (tests use `MemoryKeyStore`).
    case custom(any KeyStore)
}

/// Retry schedule while the cache is temporarily unavailable (a locked keyring, a busy database).
public struct RetryPolicy: Sendable, Equatable {
    /// The delay before the first retry (default 1 s).
    public var initialDelay: Duration
    /// The longest delay between two retries (default 60 s).
    public var maximumDelay: Duration
    /// How much each delay grows over the one before (default 2; at least 1).
    public var multiplier: Double

    /// A schedule starting at `initialDelay`, growing by `multiplier` up to `maximumDelay` (a
    /// multiplier below 1 counts as 1).
    public init(initialDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(60), multiplier: Double = 2) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.multiplier = max(1, multiplier)
    }

    /// The delay before retry number `attempt` (1-based).
    public func delay(forAttempt attempt: Int) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(1, attempt) {
            delay = delay * multiplier
            if delay >= maximumDelay { return maximumDelay }
        }
        return min(delay, maximumDelay)
    }

    /// Never retry on a timer (only `retryOpen()`).
    public static let manualOnly = RetryPolicy(initialDelay: .seconds(86_400 * 365), maximumDelay: .seconds(86_400 * 365))
}

/// Bounds on media downloads (`VaultSettings.media`): what a hostile or broken server can make
/// the engine do.
public struct MediaSettings: Sendable, Equatable {
    /// The largest attachment accepted, in bytes (default 2 GiB). A server announcing more is
    /// refused before any byte is written; one sending more is cut off at the limit. Clamped to
    /// at least 1 byte.
    public var maxFileBytes: Int64 = 2 << 30
    /// How long a download may go without receiving a byte before it is abandoned (default 30 s):
    /// a download that stalls forever ends with an error instead.
    public var idleTimeout: Duration = .seconds(30)
    /// Background (`.auto`) downloads running at once (default 2, clamped to 1...8).
    public var backgroundConcurrency: Int = 2
    /// Where decrypted views of encrypted media go: nil (the default) means `$XDG_RUNTIME_DIR`,
    /// the per-user tmpfs of a systemd desktop. Either must be an existing directory owned by the
    /// user, mode 0700, not a symbolic link; otherwise there are no views (`localPath` stays nil
    /// for encrypted media and `downloadMedia` fails with `ERROR_OFFLINE_MEDIA_VIEW_UNAVAILABLE`).
    public var runtimeDirectory: String?

    /// The defaults: 2 GiB per file, 30 s idle timeout, 2 background downloads, views under
    /// `$XDG_RUNTIME_DIR`.
    public init() {}
}

/// How the catch-up sync pages and paces itself (`VaultSettings.sync`).
public struct SyncSettings: Sendable, Equatable {
    /// Changes asked for per page of the change log; each page is written in one transaction
    /// with the sync point it reaches. Clamped to 1...5000. Default 2000: a page pays a commit
    /// (its scattered index pages, a sync) and one write per conversation it touches, so small
    /// pages are slow to ingest (`chatvault bench sync`, 100 conversations, encrypted: about 2.5×
    /// the messages per second of 500-change pages; most of the gain is reached by 1000).
    public var pageSize: Int {
        didSet { pageSize = min(max(pageSize, 1), 5000) }
    }
    /// Pages one sweep ingests at most (default 5: 10,000 changes at the default page size, what
    /// one `onMessageSyncCompleted` carries at most); when more remain the sweep reports `.partial`
    /// and a follow-up sweep goes on while the connection holds. Clamped to at least 1.
    public var maxPagesPerSweep: Int {
        didSet { maxPagesPerSweep = max(maxPagesPerSweep, 1) }
    }
    /// Follow-up sweeps that a `.partial` sweep queues in a row, at most (default 50: half a
    /// million changes at the default page size and bound); beyond it the rest follows on the
    /// next reconnect or `forceSyncNow`, so a server that always has more cannot keep the engine
    /// sweeping forever.
    public var maxFollowUpSweeps: Int {
        didSet { maxFollowUpSweeps = max(maxFollowUpSweeps, 0) }
    }
    /// A page with more changes than this is refused as a server fault (a page may exceed
    /// `pageSize` when the server will not split changes that share a sync point). Default
    /// 5 × `pageSize`.
    public var maxChangesPerPage: Int?
    /// `forceSyncNow` is refused (`ERROR_OFFLINE_SYNC_COOLDOWN`) within this long after the
    /// last sweep ended. Reconnects are not throttled (a flap starts nothing anyway). Default 10 s.
    public var forceCooldown: Duration
    /// After a reconnect the sweep waits for the outbox flush, at most this long. Default 20 s.
    public var flushWait: Duration
    /// Conversations fetched by the conversations phase (one page). Clamped to 1...50.
    public var conversationPageSize: Int {
        didSet { conversationPageSize = min(max(conversationPageSize, 1), 50) }
    }

    /// Settings with the defaults above; each value is clamped as its property says (nil
    /// `maxChangesPerPage`: 5 × `pageSize`).
    public init(pageSize: Int = 2000, maxPagesPerSweep: Int = 5, maxFollowUpSweeps: Int = 50, maxChangesPerPage: Int? = nil,
                forceCooldown: Duration = .seconds(10), flushWait: Duration = .seconds(20), conversationPageSize: Int = 50) {
        self.pageSize = min(max(pageSize, 1), 5000)
        self.maxPagesPerSweep = max(maxPagesPerSweep, 1)
        self.maxFollowUpSweeps = max(maxFollowUpSweeps, 0)
        self.maxChangesPerPage = maxChangesPerPage
        self.forceCooldown = forceCooldown
        self.flushWait = flushWait
        self.conversationPageSize = min(max(conversationPageSize, 1), 50)
    }

    /// The page ceiling in force.
    var changesPerPageCeiling: Int { max(maxChangesPerPage ?? pageSize * 5, pageSize) }
}

/// ChatVault's own settings, beyond the seeds' `OfflineConfig`.
public struct VaultSettings: Sendable {
    /// Reverse-DNS application id (`org.example.Chat`): names the cache root and the key items.
    public var applicationId: String
    /// Shown in the key item's label: "<name> offline cache key (<user>)".
    public var applicationName: String
    /// Where per-user caches live; nil means `$XDG_DATA_HOME/<application id>/offline-cache`.
    public var rootDirectory: String?
    /// Accepted key stores, most preferred first. Default: the Secret Service only.
    public var keyStorage: [KeyStorageOption]
    /// Where listeners and callbacks run. Default `.main`.
    public var callbackExecutor: CallbackExecutor
    /// When a temporarily unavailable cache (a locked keyring, a busy database) is tried again
    /// (default: 1 s doubling to 60 s); `retryOpen()` tries at once.
    public var retry: RetryPolicy
    /// Unclassified open failures in a row before an `.escalated` reset.
    public var escalationThreshold: Int
    /// How many caches set aside by resets are kept, and for how long (default 3 entries, 30 days).
    public var quarantine: QuarantinePolicy
    /// Caches up to this size are integrity-checked during open; larger ones right after, in the
    /// background (a failure then resets the cache as `.corrupted`, moments after `login` reported
    /// it ready; see `BackgroundIntegrityCheck` and `OfflineVault.waitForIntegrityCheck`).
    public var synchronousIntegrityCheckLimit: Int64
    /// The engine's clock (snapshot TTLs, conversation ages). Tests pass the simulator's.
    public var clock: @Sendable () -> Date = { Date() }
    /// How long after a write-through eviction runs (writes in a burst share one run).
    public var evictionDelay: Duration = .seconds(1)
    /// How long a new realtime connection must hold before it counts as re-established: the
    /// outbox flushes then (a connect-then-drop flap does not flush). Default 2.5 s.
    public var stableConnectionDelay: Duration = .milliseconds(2500)
    /// Backoff between attempts to reach the server (login, connect) while it cannot be reached.
    public var reconnect = RetryPolicy(initialDelay: .milliseconds(500), maximumDelay: .seconds(30))
    /// The catch-up sync's paging, bounds and throttle.
    public var sync = SyncSettings()
    /// The media cache's bounds on downloads.
    public var media = MediaSettings()

    /// The settings of an app. Only `applicationId` is required; `applicationName` defaults to it,
    /// `escalationThreshold` is at least 1, and the integrity-check limit defaults to 1 MiB. The
    /// engine refuses an id that is not reverse-DNS (`VaultSetupError.invalidApplicationId`).
    public init(applicationId: String, applicationName: String? = nil, rootDirectory: String? = nil,
                keyStorage: [KeyStorageOption] = [.secretService()], callbackExecutor: CallbackExecutor = .main,
                retry: RetryPolicy = RetryPolicy(), escalationThreshold: Int = 3, quarantine: QuarantinePolicy = QuarantinePolicy(),
                synchronousIntegrityCheckLimit: Int64 = StoreConfiguration.defaultSynchronousIntegrityCheckLimit) {
        self.applicationId = applicationId
        self.applicationName = applicationName ?? applicationId
        self.rootDirectory = rootDirectory
        self.keyStorage = keyStorage
        self.callbackExecutor = callbackExecutor
        self.retry = retry
        self.escalationThreshold = max(1, escalationThreshold)
        self.quarantine = quarantine
        self.synchronousIntegrityCheckLimit = synchronousIntegrityCheckLimit
    }

    /// Whether `applicationId` is a usable reverse-DNS id (letters, digits, `.`, `-`, `_`).
    public var hasValidApplicationId: Bool {
        let id = applicationId
        return !id.isEmpty && id.count <= 255 && !id.hasPrefix(".") && !id.contains("..")
            && id.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0)) }
    }

    /// The resolved cache root.
    public var resolvedRoot: String {
        if let rootDirectory { return rootDirectory }
        return "\(XDG.dataHome)/\(applicationId)/offline-cache"
    }

    /// Where `.software()` keeps key files by default: `$XDG_CONFIG_HOME/<application id>/cache-keys`.
    public static func defaultSoftwareKeyDirectory(applicationId: String) -> String {
        "\(XDG.configHome)/\(applicationId)/cache-keys"
    }

    func makeKeyStores() -> [any KeyStore] {
        keyStorage.map { option -> any KeyStore in
            switch option {
            case .secretService(let prompt, let timeout): return SecretServiceKeyStore(unlockPrompt: prompt, timeout: timeout)
            case .software(let directory): return SoftwareKeyStore(directory: directory ?? Self.defaultSoftwareKeyDirectory(applicationId: applicationId))
            case .custom(let store): return store
            }
        }
    }
}

/// The XDG base directories.
enum XDG {
    static var home: String { ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory() }

    static var dataHome: String {
        let value = ProcessInfo.processInfo.environment["XDG_DATA_HOME"] ?? ""
        return value.hasPrefix("/") ? value : "\(home)/.local/share"
    }

    static var configHome: String {
        let value = ProcessInfo.processInfo.environment["XDG_CONFIG_HOME"] ?? ""
        return value.hasPrefix("/") ? value : "\(home)/.config"
    }
}
