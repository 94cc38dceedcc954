import ChatVault
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore

/// One scenario's isolated world: a fresh cache root, a private bus with (or without) a keyring of
/// its own, an in-process server with the user's conversation, and the app's factory.
final class AuditContext: @unchecked Sendable {
    static let applicationId = "org.chatvault.audit"
    static let user = "audit-user"
    static let peer = "audit-peer"
    static let seededMessages = 120
    static let seededTexts = 3
    /// What the first read asks for: the conversation's latest page.
    static let pageSize = 50

    /// How the app under audit is started.
    enum AppSource: Sendable {
        case factory(AuditAppFactory)
        case command(CommandApp)
    }

    let name: String
    let source: AppSource
    let keyring: PrivateKeyring
    private let scratch: TemporaryDirectory
    let server: ChatVaultSimulator
    let device: SimulatedClient
    var launches: [LaunchRecord] = []
    var findings: [AuditFinding] = []
    /// Unsent messages the seed left (texts and a media message).
    private(set) var seededPending = 0

    init(name: String, source: AppSource, secretService: Bool = true) throws {
        self.name = name
        self.source = source
        scratch = try TemporaryDirectory.create(prefix: "chatvault-audit-\(getpid())")
        keyring = try PrivateKeyring.start(secretService: secretService)
        server = ChatVaultSimulator(seed: 11)
        try server.addUsers(Self.user, Self.peer)
        device = server.client(for: Self.user)
        // A program brings its own server; the kit's own steps (`KitApp`) must not read this
        // one's (empty) truth over the program's cached messages.
        if case .command = source { device.network = .offline }
    }

    deinit { keyring.stop() }

    var root: String { scratch.path + "/caches" }
    var directory: CacheDirectory {
        CacheDirectory(root: root, account: CacheDirectory.account(applicationId: Self.applicationId, userId: Self.user))
    }
    var keyStore: SecretServiceKeyStore { keyring.keyStore() }

    func environment(encryption: Bool, behavior: EncryptionFailureBehavior) -> AuditEnvironment {
        AuditEnvironment(applicationId: Self.applicationId, userId: Self.user, rootDirectory: root,
                         keyStorage: [.custom(keyStore)], backend: device, encryption: encryption,
                         encryptionFailureBehavior: behavior)
    }

    /// A library deviation.
    func check(_ condition: Bool, _ expected: String, _ seen: @autoclosure () -> String) {
        if !condition { findings.append(AuditFinding(scenario: name, kind: .library, expected: expected, seen: seen())) }
    }

    // MARK: - Launches

    /// Builds the app through its factory, launches it, reads its first screen, runs `during`
    /// with the app still open, then logs out and lets it go.
    @discardableResult
    func launch(_ step: String, encryption: Bool = true, behavior: EncryptionFailureBehavior = .onlineOnly,
                during: ((any AuditableApp) async throws -> Void)? = nil) async throws -> LaunchRecord {
        if case .command(let command) = source, during == nil {
            let record = try runCommand(command, step: step, encryption: encryption, behavior: behavior)
            launches.append(record)
            return record
        }
        let record = try await open(step, encryption: encryption, behavior: behavior) { app, record in
            try await during?(app)
            record.notices = app.resetNotices()
        }
        launches.append(record)
        return record
    }

    /// A launch whose app stays open while `body` runs (logged out afterwards).
    func open(_ step: String, encryption: Bool, behavior: EncryptionFailureBehavior,
              _ body: (any AuditableApp, inout LaunchRecord) async throws -> Void) async throws -> LaunchRecord {
        let started = Date()
        let clock = ContinuousClock.now
        let env = environment(encryption: encryption, behavior: behavior)
        let app: any AuditableApp
        switch source {
        case .factory(let factory): app = try await factory(env)
        case .command: app = try KitApp(env)   // a step only the kit can do (see `CommandApp`)
        }
        await app.launch(userId: Self.user)
        let vault = app.vault
        // The app's first screen reads now: what does it show at that moment?
        let atFirstRead = app.resetNotices()
        let read = await MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: Self.peer).set(limit: Self.pageSize).build().fetchPrevious()
        let status = vault.offlineEncryptionStatus()
        var record = LaunchRecord(step: step, state: vault.state.code, unavailableReason: Self.unavailableReason(vault.state),
                                  offlineEnabled: vault.isOfflineEnabled(), atRest: status.atRest, keyStorage: status.keyStorage,
                                  journal: [], noticesAtFirstRead: atFirstRead, notices: [], cachedMessages: read.cached?.count,
                                  pendingMessages: nil, unsentMediaFiles: nil, milliseconds: 0)
        if let pending = try? await vault.pendingMessages() {
            record.pendingMessages = pending.count
            record.unsentMediaFiles = pending.compactMap { ($0 as? MediaMessage)?.attachment?.localPath }
                .filter { FileManager.default.isReadableFile(atPath: $0) }.count
        }
        // A notice that comes later than the first read: wait for it a little (up to 1 s).
        let deadline = Date().addingTimeInterval(1)
        let expected = Self.newResets(vault, since: started)
        while app.resetNotices().count < expected, Date() < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        try await body(app, &record)
        if record.notices.isEmpty { record.notices = app.resetNotices() }
        let since = Int64((started.timeIntervalSince1970 * 1_000_000).rounded(.down))
        record.journal = vault.offlineAuditJournal().filter { $0.at >= since }
        await vault.logout()
        let elapsed = ContinuousClock.now - clock
        record.milliseconds = ResetAudit.ms(elapsed)
        withExtendedLifetime(app) {}
        return record
    }

    private static func newResets(_ vault: OfflineVault, since: Date) -> Int {
        let start = Int64((since.timeIntervalSince1970 * 1_000_000).rounded(.down))
        return vault.offlineAuditJournal().filter { $0.at >= start && $0.kind == .reset && $0.reason != "encryptionChanged" }.count
    }

    static func unavailableReason(_ state: OfflineState) -> String? {
        if case .unavailable(let reason) = state { return reason.code }
        return nil
    }

    /// A program's launch: run, report read, journal read from outside.
    private func runCommand(_ command: CommandApp, step: String, encryption: Bool, behavior: EncryptionFailureBehavior) throws -> LaunchRecord {
        let started = Date()
        let clock = ContinuousClock.now
        let report = try command.run(step: step == "seed" ? "seed" : "launch", context: self, encryption: encryption, behavior: behavior)
        let since = Int64((started.timeIntervalSince1970 * 1_000_000).rounded(.down))
        let elapsed = ContinuousClock.now - clock
        return LaunchRecord(step: step, state: report.state, unavailableReason: report.unavailableReason, offlineEnabled: report.offlineEnabled,
                            atRest: report.status?.atRest ?? "NONE", keyStorage: report.status?.keyStorage ?? "NONE",
                            journal: JournalReader.read(directory, keyStore: keyStore).filter { $0.at >= since },
                            noticesAtFirstRead: report.noticesAtFirstRead, notices: report.notices, cachedMessages: report.cachedMessages,
                            pendingMessages: report.pendingMessages, unsentMediaFiles: nil,
                            milliseconds: ResetAudit.ms(elapsed))
    }

    /// The first launch: the server holds `seededMessages` from the peer; the app reads them
    /// (cached by the read), then, offline, sends texts and a photo that stay unsent.
    func seed(encryption: Bool = true) async throws {
        if case .command(let command) = source {
            let seeded = try runCommand(command, step: "seed", encryption: encryption, behavior: .onlineOnly)
            seededPending = seeded.pendingMessages ?? 0
            guard seeded.state == "ready", seededPending == Self.seededTexts + 1 else {
                throw AuditError.seedFailed("the program did not seed its cache (\(seeded.state), \(seededPending) unsent)")
            }
            return
        }
        for i in 0..<Self.seededMessages {
            _ = try server.postText("audit message \(i)", from: Self.peer, to: .user(Self.user))
        }
        device.network = .online
        let photo = scratch.path + "/photo.png"
        _ = FileManager.default.createFile(atPath: photo, contents: Data((0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }),
                                       attributes: [.posixPermissions: 0o600])
        var pending = 0
        let seeded = try await open("seed", encryption: encryption, behavior: .onlineOnly) { app, _ in
            let vault = app.vault
            for _ in 0..<2 {
                _ = await MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: Self.peer).set(limit: Self.pageSize).build().fetchPrevious()
            }
            self.device.network = .offline
            for i in 0..<Self.seededTexts {
                if await Self.queued(vault.send(TextMessage(receiverUid: Self.peer, text: "unsent \(i)", receiverType: .user))) { pending += 1 }
            }
            let media = MediaMessage(receiverUid: Self.peer, files: [URL(fileURLWithPath: photo)], messageType: .image, receiverType: .user)
            if await Self.queued(vault.send(media)) { pending += 1 }
        }
        seededPending = pending
        guard seeded.state == "ready" || seeded.state == "plaintextFallback", pending == Self.seededTexts + 1 else {
            throw AuditError.seedFailed("the app's vault did not open a cache to seed (\(seeded.state) \(seeded.unavailableReason ?? ""), \(pending) queued)")
        }
    }

    private static func queued<M: BaseMessage>(_ steps: AsyncStream<SendEvent<M>>) async -> Bool {
        for await step in steps {
            switch step {
            case .pending: return true
            case .failed, .sent: return false
            case .queued: continue
            }
        }
        return false
    }

    // MARK: - Breaking things

    var manifest: Manifest? {
        if case .valid(let m) = ManifestFile.read(directory: directory.path) { return m }
        return nil
    }

    func keyItem() throws -> KeyItemID {
        guard let manifest else { throw AuditError.seedFailed("no manifest after seeding") }
        return KeyItemID(applicationId: Self.applicationId, account: directory.account, cacheId: manifest.cacheId)
    }

    /// Opens the database with its key, bypassing the engine (to damage its schema).
    func rawConnection() throws -> DatabaseQueue {
        guard let manifest else { throw AuditError.seedFailed("no manifest") }
        guard case .found(let key, _) = keyStore.lookup(try keyItem()) else { throw AuditError.seedFailed("no key for the raw connection") }
        return try DatabaseQueue(path: directory.database, keying: .encrypted(key, manifest.cipherProfile ?? .standard()),
                                 options: ConnectionOptions(), label: "audit-raw")
    }
}

/// Why the kit could not run a scenario (not a finding: the scenario did not happen).
public enum AuditError: Error, Sendable, CustomStringConvertible {
    case seedFailed(String)
    case unknownScenario(String)
    case commandFailed(String)

    public var description: String {
        switch self {
        case .seedFailed(let why): return "the scenario could not be set up: \(why)"
        case .unknownScenario(let name): return "no scenario named \(name)"
        case .commandFailed(let why): return "the app's program failed: \(why)"
        }
    }
}
