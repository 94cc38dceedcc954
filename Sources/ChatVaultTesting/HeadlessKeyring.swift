public import Foundation
import VaultKeys

/// A gnome-keyring without a desktop: started unlocked with a password on stdin, locked through the
/// Secret Service, unlocked again by a daemon that replaces the running one (gnome-keyring has no
/// D-Bus call that takes a password). For tests and the CLI's scenarios; never for a user's keyring.
///
///     try HeadlessKeyring.start(password: pw, environment: env)            // unlocked
///     try HeadlessKeyring.lockDefaultCollection()
///     try HeadlessKeyring.start(password: pw, environment: env, replace: true)   // unlocked again
public enum HeadlessKeyring {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// Runs `gnome-keyring-daemon [--replace] --unlock --components=secrets` with `password` on
    /// stdin and `environment` (its HOME / XDG_DATA_HOME decide where the keyring files live), then
    /// waits until the default collection answers unlocked. The daemon forks; it is waited for
    /// through files, not pipes (see `Subprocess`), so its inherited descriptors cannot hang us.
    public static func start(password: String, environment: [String: String], replace: Bool = false,
                             log: String? = nil, timeout: TimeInterval = 15, busAddress: String? = nil) throws {
        guard let daemon = Subprocess.which("gnome-keyring-daemon") else {
            throw Failure("gnome-keyring-daemon is not installed (Scripts/setup installs gnome-keyring)")
        }
        var arguments = [daemon]
        if replace { arguments.append("--replace") }
        arguments += ["--unlock", "--components=secrets"]
        var env = environment
        env["DISPLAY"] = nil
        env["WAYLAND_DISPLAY"] = nil
        let result = try Subprocess.run(arguments, environment: env, input: Array(password.utf8), captureOutput: false, log: log)
        guard result.status == 0 else { throw Failure("gnome-keyring-daemon exited with status \(result.status)") }
        try waitUntilUnlocked(timeout: timeout, busAddress: busAddress)
    }

    /// Waits until the default collection reports `Locked = false`. (`--unlock` returns before the
    /// daemon owns its bus name.)
    public static func waitUntilUnlocked(timeout: TimeInterval = 15, busAddress: String? = nil) throws {
        let store = SecretServiceKeyStore(timeout: .seconds(5), busAddress: busAddress)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? store.isDefaultCollectionLocked()) == false { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw Failure("the default collection is still locked \(Int(timeout)) s after gnome-keyring-daemon --unlock")
    }

    /// Locks the default collection as a screen lock would, and checks that it is locked.
    public static func lockDefaultCollection(busAddress: String? = nil) throws {
        let store = SecretServiceKeyStore(busAddress: busAddress)
        try store.lockDefaultCollection()
        guard try store.isDefaultCollectionLocked() == true else { throw Failure("the default collection did not lock") }
    }
}

/// The throwaway keyring `Scripts/test` starts for a test run (it exports
/// `CHATVAULT_TEST_KEYRING_{PASSWORD,HOME,DATA_HOME,RUNTIME_DIR}` and `CHATVAULT_TEST_LOG`), and
/// how a test locks and unlocks it. Without that environment every helper throws, so a test that
/// needs the keyring fails loudly instead of being skipped.
///
///     try TestKeyring.withLockedDefaultCollection {
///         XCTAssertEqual(store.lookup(id).unavailableReason, .locked)
///     }   // unlocked again here, even if the body failed
public enum TestKeyring {
    public struct Environment: Sendable {
        public var password: String
        public var home: String
        public var dataHome: String
        public var runtimeDir: String
        public var log: String?
    }

    public static var environment: Environment? {
        let env = ProcessInfo.processInfo.environment
        guard let password = env["CHATVAULT_TEST_KEYRING_PASSWORD"], !password.isEmpty,
              let home = env["CHATVAULT_TEST_KEYRING_HOME"],
              let dataHome = env["CHATVAULT_TEST_KEYRING_DATA_HOME"],
              let runtimeDir = env["CHATVAULT_TEST_KEYRING_RUNTIME_DIR"],
              env["DBUS_SESSION_BUS_ADDRESS"] != nil else { return nil }
        return Environment(password: password, home: home, dataHome: dataHome, runtimeDir: runtimeDir, log: env["CHATVAULT_TEST_LOG"])
    }

    public struct Missing: Error, CustomStringConvertible {
        public var description: String {
            "no test keyring: run the tests with Scripts/test, which starts a private D-Bus session with an "
                + "unlocked gnome-keyring and exports CHATVAULT_TEST_KEYRING_* (tests are never skipped)"
        }
    }

    /// The environment, or a thrown `Missing` (which fails the calling test).
    @discardableResult
    public static func require() throws -> Environment {
        guard let environment else { throw Missing() }
        return environment
    }

    public static func lockDefaultCollection() throws {
        try require()
        try HeadlessKeyring.lockDefaultCollection()
    }

    /// Unlocks the default collection headless and waits until it answers unlocked. Stores
    /// created earlier reconnect by themselves.
    public static func unlockDefaultCollection() throws {
        let env = try require()
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = env.home
        environment["XDG_DATA_HOME"] = env.dataHome
        environment["XDG_RUNTIME_DIR"] = env.runtimeDir
        environment["XDG_CONFIG_HOME"] = env.home + "/.config"
        environment["XDG_CACHE_HOME"] = env.home + "/.cache"
        try HeadlessKeyring.start(password: env.password, environment: environment, replace: true, log: env.log)
    }

    /// Runs `body` with the default collection locked and unlocks it afterwards, whatever happens.
    public static func withLockedDefaultCollection<R>(_ body: () throws -> R) throws -> R {
        try lockDefaultCollection()
        let result = Result { try body() }
        try unlockDefaultCollection()
        return try result.get()
    }
}
