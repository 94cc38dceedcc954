import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process killed with SIGKILL after a delay (unless it exited first). Its stdout and
/// stderr go to files, so what it wrote before the kill can be read whole afterwards.
public struct KilledRun: Sendable {
    public var stdout: String
    public var stderr: String
    /// Whether SIGKILL ended it (false: it exited on its own first).
    public var killed: Bool
    public var status: Int32

    /// Starts `arguments` and SIGKILLs it `delay` later (by its pid). With `marker`, the delay
    /// counts from the moment the child's stdout first holds a line starting with it (polled every
    /// millisecond), so a slow start on a busy machine does not move the kill out of the window
    /// under test; the child is killed anyway when the marker has not come within `wait`.
    public static func start(_ arguments: [String], killAfter delay: Duration, once marker: String? = nil,
                             wait: Duration = .seconds(30)) throws -> KilledRun {
        let scratch = TemporaryDirectory()
        let outPath = "\(scratch.path)/out"
        let errPath = "\(scratch.path)/err"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        let pid = try Subprocess.spawn(arguments[0], argv: argv, envp: envp, actions: &actions)
        var status: Int32 = 0
        var exited = false
        if let marker {
            let deadline = ContinuousClock.now + wait
            while ContinuousClock.now < deadline {
                let output = String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self)
                if output.split(separator: "\n").contains(where: { $0.hasPrefix(marker) }) { break }
                if waitpid(pid, &status, WNOHANG) == pid {
                    exited = true
                    break
                }
                usleep(1000)
            }
        }
        if !exited {
            let (seconds, attoseconds) = delay.components
            usleep(useconds_t(seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
            kill(pid, SIGKILL)
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        let signaled = status & 0x7f != 0
        return KilledRun(stdout: String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self),
                         stderr: String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self),
                         killed: signaled && status & 0x7f == SIGKILL, status: signaled ? 128 + (status & 0x7f) : (status >> 8) & 0xff)
    }
}
