public import Foundation

/// Runs a program and waits for it, with stdout and stderr captured through files.
///
/// Not `Foundation.Process` with pipes: a daemon started somewhere below (gnome-keyring-daemon,
/// dbus-daemon) inherits the pipe and keeps it open, so "read to end of file" never returns. Files
/// have no such problem, and only stdin, stdout and stderr are passed on.
public enum Subprocess {
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: Data
        public var stderr: Data
    }

    public struct SpawnError: Error, CustomStringConvertible {
        public var program: String
        public var errno: Int32
        public var description: String { "cannot run \(program): \(String(cString: strerror(errno)))" }
    }

    /// The absolute path of this executable.
    public static var selfPath: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// The first `name` on PATH (or the usual system directories).
    public static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for dir in path.split(separator: ":").map(String.init) + ["/usr/bin", "/bin", "/usr/sbin"] where !dir.isEmpty {
            let candidate = "\(dir)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Runs `arguments[0]` (an absolute path) with `arguments`, `environment` and `input` on stdin.
    /// With `captureOutput` false, stdout and stderr go to /dev/null (or `log` for stderr).
    public static func run(_ arguments: [String], environment: [String: String], input: [UInt8] = [], captureOutput: Bool = true,
                           log: String? = nil) throws -> Result {
        let scratch = NSTemporaryDirectory() + "/chatvault-sub-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let outPath = scratch + ".out"
        let errPath = scratch + ".err"
        defer {
            unlink(outPath)
            unlink(errPath)
        }
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw SpawnError(program: arguments[0], errno: errno) }
        defer { close(pipeEnds[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, captureOutput ? outPath : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, captureOutput ? errPath : (log ?? "/dev/null"),
                                         O_WRONLY | O_CREAT | (captureOutput ? O_TRUNC : O_APPEND), 0o600)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for fd in open.compactMap(Int32.init) where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        let pid: pid_t
        do {
            pid = try spawn(arguments[0], argv: argv, envp: envp, actions: &actions)
        } catch {
            close(pipeEnds[1])
            throw error
        }
        _ = input.withUnsafeBytes { write(pipeEnds[1], $0.baseAddress, $0.count) }
        close(pipeEnds[1])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let code = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return Result(status: code, stdout: FileManager.default.contents(atPath: outPath) ?? Data(),
                      stderr: FileManager.default.contents(atPath: errPath) ?? Data())
    }

    /// `posix_spawn` with the child's signals as a fresh program expects them: nothing blocked and
    /// every signal at its default action.
    ///
    /// Without this a child inherits the mask of the spawning thread, and Dispatch and Swift
    /// concurrency worker threads (where async code, XCTest's async tests and the CLI's async main
    /// run) block almost every signal, SIGTERM included. Ignored signals (SIGPIPE, which the Swift
    /// runtime ignores) survive `exec` too. A dbus-daemon or gnome-keyring-daemon started that
    /// way cannot be ended by `dbus-run-session`, `kill` or a script's cleanup, and outlives the
    /// run. Use this for every process started from Swift.
    public static func spawn(_ path: String, argv: [UnsafeMutablePointer<CChar>?], envp: [UnsafeMutablePointer<CChar>?],
                             actions: inout posix_spawn_file_actions_t) throws -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard spawned == 0 else { throw SpawnError(program: path, errno: spawned) }
        return pid
    }
}
