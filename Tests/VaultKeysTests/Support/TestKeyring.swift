import Foundation
import XCTest
import VaultKeys

/// The throwaway gnome-keyring that `Scripts/test` starts for the test run, and how to lock and
/// unlock it headless. Other test targets may copy this file as it is: it needs only `VaultKeys`'
/// public API, Foundation and XCTest.
///
///     try TestKeyring.withLockedDefaultCollection {
///         XCTAssertEqual(store.lookup(id).unavailableReason, .locked)
///     }   // unlocked again here, even if the body failed
///
/// Tests are never skipped: without the environment below, the helpers fail the test loudly.
enum TestKeyring {
    /// What `Scripts/test` exports (see the comment at the top of that script).
    struct Environment {
        var password: String
        var home: String
        var dataHome: String
        var runtimeDir: String
        var log: String?
    }

    static var environment: Environment? {
        let env = ProcessInfo.processInfo.environment
        guard let password = env["CHATVAULT_TEST_KEYRING_PASSWORD"], !password.isEmpty,
              let home = env["CHATVAULT_TEST_KEYRING_HOME"],
              let dataHome = env["CHATVAULT_TEST_KEYRING_DATA_HOME"],
              let runtimeDir = env["CHATVAULT_TEST_KEYRING_RUNTIME_DIR"],
              env["DBUS_SESSION_BUS_ADDRESS"] != nil else { return nil }
        return Environment(password: password, home: home, dataHome: dataHome, runtimeDir: runtimeDir,
                           log: env["CHATVAULT_TEST_LOG"])
    }

    struct Missing: Error, CustomStringConvertible {
        var description: String {
            "no test keyring: run the tests with Scripts/test, which starts a private D-Bus session with an "
                + "unlocked gnome-keyring and exports CHATVAULT_TEST_KEYRING_* (tests are never skipped)"
        }
    }

    /// Fails the test (never skips it) when the run has no test keyring.
    @discardableResult
    static func require(file: StaticString = #filePath, line: UInt = #line) throws -> Environment {
        guard let environment else {
            XCTFail(Missing().description, file: file, line: line)
            throw Missing()
        }
        return environment
    }

    /// Locks the default ("login") collection through the Secret Service, as a screen lock would,
    /// and checks that it is locked.
    static func lockDefaultCollection(file: StaticString = #filePath, line: UInt = #line) throws {
        try require(file: file, line: line)
        let store = SecretServiceKeyStore()
        try store.lockDefaultCollection()
        XCTAssertEqual(try store.isDefaultCollectionLocked(), true, "the login collection did not lock", file: file, line: line)
    }

    /// Unlocks the default collection headless: gnome-keyring has no D-Bus call that takes a
    /// password, so a new daemon replaces the running one and unlocks the login keyring with the
    /// password on stdin (`gnome-keyring-daemon --replace --unlock`). Waits until the collection
    /// answers unlocked. Stores created earlier reconnect by themselves.
    static func unlockDefaultCollection(file: StaticString = #filePath, line: UInt = #line) throws {
        let env = try require(file: file, line: line)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = env.home
        environment["XDG_DATA_HOME"] = env.dataHome
        environment["XDG_RUNTIME_DIR"] = env.runtimeDir
        environment["XDG_CONFIG_HOME"] = env.home + "/.config"
        environment["XDG_CACHE_HOME"] = env.home + "/.cache"
        environment["DISPLAY"] = nil
        environment["WAYLAND_DISPLAY"] = nil
        let status = try runDaemonizing(["gnome-keyring-daemon", "--replace", "--unlock", "--components=secrets"],
                                        environment: environment, input: Array(env.password.utf8), log: env.log)
        XCTAssertEqual(status, 0, "gnome-keyring-daemon --replace --unlock failed", file: file, line: line)

        let store = SecretServiceKeyStore(timeout: .seconds(5))
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            if (try? store.isDefaultCollectionLocked()) == false { return }
            Thread.sleep(forTimeInterval: 0.1)
        }
        XCTFail("the login collection is still locked 15 s after gnome-keyring-daemon --replace --unlock", file: file, line: line)
    }

    /// Runs `body` with the default collection locked and unlocks it afterwards, whatever happens.
    static func withLockedDefaultCollection<R>(file: StaticString = #filePath, line: UInt = #line,
                                               _ body: () throws -> R) throws -> R {
        try lockDefaultCollection(file: file, line: line)
        defer {
            do {
                try unlockDefaultCollection(file: file, line: line)
            } catch {
                XCTFail("could not unlock the test keyring again: \(error)", file: file, line: line)
            }
        }
        return try body()
    }

    struct SpawnError: Error, CustomStringConvertible {
        var errno: Int32
        var description: String { "posix_spawn failed: \(String(cString: strerror(errno)))" }
    }

    /// Runs a program that forks a daemon and waits for the program (not the daemon) to exit.
    ///
    /// Not `Foundation.Process`: on Linux it learns that a child ended when every copy of a socket
    /// it gives the child is closed, and gnome-keyring's daemon keeps its inherited descriptors
    /// open, so `waitUntilExit()` never returns. Here the child gets only stdin (a pipe with
    /// `input`), stdout (/dev/null) and stderr (the log); every other descriptor is closed.
    static func runDaemonizing(_ arguments: [String], environment: [String: String], input: [UInt8],
                               log: String?) throws -> Int32 {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw SpawnError(errno: errno) }
        defer { close(pipeEnds[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, log ?? "/dev/null", O_WRONLY | O_APPEND | O_CREAT, 0o600)
        // (posix_spawn_file_actions_addclosefrom_np is not visible from Swift's Glibc module.)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap(Int32.init) where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }

        let argv = (["/usr/bin/env"] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/usr/bin/env", &actions, nil, argv, envp)
        guard spawned == 0 else {
            close(pipeEnds[1])
            throw SpawnError(errno: spawned)
        }
        _ = input.withUnsafeBytes { write(pipeEnds[1], $0.baseAddress, $0.count) }
        close(pipeEnds[1])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS
        return status & 0x7f == 0 ? (status >> 8) & 0xff : -1
    }
}

extension KeyLookup {
    /// The reason of an `.unavailable` answer (nil otherwise), for assertions.
    var unavailableReason: KeyUnavailableReason? {
        if case .unavailable(let reason) = self { return reason }
        return nil
    }

    var isAbsent: Bool {
        if case .absent = self { return true }
        return false
    }

    var foundKey: (key: CacheKey, keyId: String)? {
        if case .found(let key, let keyId) = self { return (key, keyId) }
        return nil
    }
}

extension KeyListing {
    var summaries: [KeyItemSummary]? {
        if case .items(let items) = self { return items }
        return nil
    }

    var unavailableReason: KeyUnavailableReason? {
        if case .unavailable(let reason) = self { return reason }
        return nil
    }
}

/// A fresh application id per test, so tests never see each other's items, and cleanup is one call.
func uniqueApplicationId(_ function: String = #function) -> String {
    "org.chatvault.test.\(UUID().uuidString.prefix(8).lowercased())"
}

/// A fresh opaque account identifier (hex, as the library derives them).
func uniqueAccount() -> String {
    String(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16))
}

/// Measures how long `body` takes.
func elapsed<R>(_ body: () throws -> R) rethrows -> (R, TimeInterval) {
    let start = Date()
    let result = try body()
    return (result, Date().timeIntervalSince(start))
}
