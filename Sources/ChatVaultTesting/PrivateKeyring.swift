import Foundation
public import VaultKeys

/// A Secret Service of its own for one test or audit scenario: a private `dbus-daemon` (nothing
/// can be activated on it) with an unlocked gnome-keyring whose files live in a temporary home.
/// Nothing in this process's environment changes, and the user's own keyring is never touched:
/// key stores reach it through `busAddress`.
///
///     let keyring = try PrivateKeyring.start()
///     let store = SecretServiceKeyStore(busAddress: keyring.busAddress)
///     try keyring.lock(); try keyring.unlock()
///     keyring.stopSecretService()      // the bus stays, nothing provides org.freedesktop.secrets
///     keyring.stop()                   // every process it started, by pid; the files go
public final class PrivateKeyring: @unchecked Sendable {
    /// Set in every process the session starts (the bus, the keyring daemon): how they are found.
    public static let markerVariable = "CHATVAULT_KIT_KEYRING_HOME"
    /// The pid of the process that started the session, also set in every process of it: a
    /// session whose owner died (a test run killed with SIGKILL) is ended by the next `start`.
    public static let ownerVariable = "CHATVAULT_KIT_KEYRING_OWNER"
    /// Temporary files and directories named `<prefix>-<owner pid>-…` (scenario roots, keyring homes,
    /// `Subprocess`'s captured output) are removed by `start` once their owner
    /// is gone.
    public static let scratchPrefixes = ["chatvault-keyring", "chatvault-audit", "chatvault-sub"]

    public let busAddress: String
    public let home: String
    private let password: String
    private let scratch: TemporaryDirectory
    private let environment: [String: String]
    private let guardLock = NSLock()
    private var stopped = false

    /// Starts the bus and, with `secretService`, an unlocked gnome-keyring on it.
    public static func start(secretService: Bool = true) throws -> PrivateKeyring {
        reapOrphans()
        let keyring = try PrivateKeyring()
        do {
            try keyring.startBus()
            if secretService { try keyring.startSecretService() }
        } catch {
            keyring.stop()
            throw error
        }
        return keyring
    }

    private init() throws {
        scratch = try TemporaryDirectory.create(prefix: "chatvault-keyring-\(getpid())")
        home = scratch.path
        busAddress = "unix:path=\(home)/bus"
        password = UUID().uuidString
        var env = ProcessInfo.processInfo.environment
        for name in ["DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY", "GNOME_KEYRING_CONTROL", "SSH_AUTH_SOCK"] { env[name] = nil }
        env[Self.markerVariable] = home
        env[Self.ownerVariable] = String(getpid())
        env["HOME"] = home
        env["XDG_DATA_HOME"] = "\(home)/share"
        env["XDG_CONFIG_HOME"] = "\(home)/config"
        env["XDG_CACHE_HOME"] = "\(home)/cache"
        env["XDG_RUNTIME_DIR"] = "\(home)/run"
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(home)/bus"
        for dir in ["share", "config", "cache", "run"] { mkdir("\(home)/\(dir)", 0o700) }
        environment = env
    }

    deinit { stop() }

    private func startBus() throws {
        guard let daemon = Subprocess.which("dbus-daemon") else {
            throw HeadlessKeyring.Failure("dbus-daemon is not installed (Scripts/setup installs dbus)")
        }
        let config = "\(home)/session.conf"
        try PrivateBus.configuration(listen: busAddress).write(toFile: config, atomically: true, encoding: .utf8)
        let result = try Subprocess.run([daemon, "--config-file=\(config)", "--fork", "--nopidfile"], environment: environment,
                                        captureOutput: false)
        guard result.status == 0 else { throw HeadlessKeyring.Failure("dbus-daemon exited with status \(result.status)") }
        let deadline = Date().addingTimeInterval(10)
        while access("\(home)/bus", F_OK) != 0 {
            guard Date() < deadline else { throw HeadlessKeyring.Failure("the private bus did not appear within 10 s") }
            usleep(10_000)
        }
    }

    /// Starts (again) an unlocked gnome-keyring on the bus.
    public func startSecretService() throws {
        try HeadlessKeyring.start(password: password, environment: environment, replace: true, busAddress: busAddress)
    }

    /// Locks the default collection, as a screen lock would.
    public func lock() throws {
        try HeadlessKeyring.lockDefaultCollection(busAddress: busAddress)
    }

    /// Unlocks it again (a daemon that replaces the running one, with the password).
    public func unlock() throws {
        try startSecretService()
    }

    /// Ends the keyring daemon: the bus stays, and nothing on it provides the Secret Service.
    public func stopSecretService() {
        let daemons = ProcessReaper.processes(withEnvironment: Self.markerVariable, value: home).filter { pid in
            let comm = FileManager.default.contents(atPath: "/proc/\(pid)/comm").map { String(decoding: $0, as: UTF8.self) } ?? ""
            return comm.hasPrefix("gnome-keyring")
        }
        ProcessReaper.stop(daemons)
    }

    /// A key store on this keyring.
    public func keyStore(timeout: Duration = .seconds(10)) -> SecretServiceKeyStore {
        SecretServiceKeyStore(timeout: timeout, busAddress: busAddress)
    }

    /// Ends the sessions (and removes the scratch directories) of owners that died without
    /// ending them: a killed run leaves nothing that makes the next one differ.
    public static func reapOrphans() {
        let orphans = ProcessReaper.processes(withEnvironmentName: ownerVariable).filter { entry in
            guard let owner = pid_t(entry.value) else { return true }
            return !ProcessReaper.isAlive(owner)
        }.map(\.pid)
        ProcessReaper.stop(orphans)
        var base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: base)) ?? [] {
            for prefix in scratchPrefixes where name.hasPrefix(prefix + "-") {
                let owner = name.dropFirst(prefix.count + 1).prefix { $0 != "-" }
                if let pid = pid_t(owner), pid != getpid(), !ProcessReaper.isAlive(pid) {
                    try? FileManager.default.removeItem(atPath: "\(base)/\(name)")
                }
            }
        }
    }

    /// Ends every process the session started (by pid, found by their environment) and removes
    /// its files. Idempotent.
    public func stop() {
        guardLock.lock()
        defer { guardLock.unlock() }
        guard !stopped else { return }
        stopped = true
        ProcessReaper.stopAll(withEnvironment: Self.markerVariable, value: home)
    }
}
