import ChatVaultTesting
import Foundation
import VaultKeys

/// Private D-Bus sessions for the scenarios that change the keyring itself (lock it, or take the
/// Secret Service away). They never touch the user's own keyring: each gets a throwaway
/// gnome-keyring (or none) on a bus of its own, and its files live in a temporary directory.
enum PrivateSession {
    /// Which kind of private bus.
    enum Kind {
        /// A bus with a freshly started, unlocked gnome-keyring (random password).
        case keyring
        /// A bus where nothing provides `org.freedesktop.secrets` and nothing can be activated.
        case noSecretService
    }

    static let passwordVariable = "CHATVAULT_SCENARIO_KEYRING_PASSWORD"
    static let homeVariable = "CHATVAULT_SCENARIO_KEYRING_HOME"

    /// Runs `chatvault <child verb> args…` inside a private session; returns its stdout.
    static func runChild(_ kind: Kind, _ arguments: [String]) throws -> Data {
        guard let runSession = Subprocess.which("dbus-run-session") else {
            throw CLIError.failure("dbus-run-session is not installed (Scripts/setup installs dbus)")
        }
        let scratch = try ScenariosCommand.makePrivateDirectory()
        let home = scratch.path
        let config = "\(home)/session.conf"
        try PrivateBus.configuration(listen: "unix:dir=\(home)").write(toFile: config, atomically: true, encoding: .utf8)

        // Everything in the session (the CLI child, the keyring daemon, anything D-Bus activates)
        // sees a throwaway home, so the user's own keyring files are never read or written.
        var environment = ProcessInfo.processInfo.environment
        for name in ["DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY", "GNOME_KEYRING_CONTROL", "SSH_AUTH_SOCK"] { environment[name] = nil }
        environment[homeVariable] = home
        environment["HOME"] = home
        environment["XDG_DATA_HOME"] = "\(home)/share"
        environment["XDG_CONFIG_HOME"] = "\(home)/config"
        environment["XDG_CACHE_HOME"] = "\(home)/cache"
        environment["XDG_RUNTIME_DIR"] = "\(home)/run"
        for dir in ["share", "config", "cache", "run"] { mkdir("\(home)/\(dir)", 0o700) }
        var session = [runSession]
        switch kind {
        case .keyring:
            guard Subprocess.which("gnome-keyring-daemon") != nil else {
                throw CLIError.failure("gnome-keyring-daemon is not installed (Scripts/setup installs gnome-keyring)")
            }
            environment[passwordVariable] = UUID().uuidString
            // The standard session configuration, so gnome-keyring's own activation files work.
            session += ["--"]
        case .noSecretService:
            session += ["--config-file=\(config)", "--"]
        }
        // Whatever the session started (the bus, the keyring daemon, a daemon that replaced it,
        // anything activated) carries `homeVariable=home` in its environment: end it all, by pid,
        // before the directory goes. dbus-run-session only stops its own dbus-daemon, and
        // gnome-keyring-daemon does not always leave with the bus.
        defer {
            ProcessReaper.stopAll(withEnvironment: homeVariable, value: home)
            withExtendedLifetime(scratch) {}
        }
        let result = try Subprocess.run(session + [Subprocess.selfPath] + arguments, environment: environment)
        guard result.status == 0, !result.stdout.isEmpty else {
            let detail = String(decoding: result.stderr.suffix(600), as: UTF8.self).split(separator: "\n").suffix(3).joined(separator: " | ")
            throw CLIError.failure("the private session child failed (status \(result.status)): \(detail)")
        }
        return result.stdout
    }

    /// Inside a `.keyring` child: starts (or, with `replace`, replaces and unlocks) the daemon with
    /// the session's password, and waits until the login collection answers unlocked.
    static func startKeyring(replace: Bool) throws {
        guard let password = ProcessInfo.processInfo.environment[passwordVariable] else {
            throw CLIError.failure("not inside a private keyring session")
        }
        do {
            try HeadlessKeyring.start(password: password, environment: ProcessInfo.processInfo.environment, replace: replace)
        } catch {
            throw CLIError.failure("the private keyring: \(error)")
        }
    }
}
