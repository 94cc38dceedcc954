public import Foundation

/// Finds and ends, by process id, the processes a run started, wherever they ended up in the
/// process tree. Daemons fork, detach and are re-parented (gnome-keyring-daemon, a dbus-daemon
/// that outlived its `dbus-run-session`, anything the bus activated), so they are recognised by
/// their environment instead: a variable the run set (a private session's home, a test's marker)
/// is inherited by everything below it, daemons and bus-activated services included.
///
///     let left = ProcessReaper.processes(withEnvironment: "CHATVAULT_SCENARIO_KEYRING_HOME", value: home)
///     ProcessReaper.stop(left)          // SIGTERM, then SIGKILL after the grace period
public enum ProcessReaper {
    /// A live process (not a zombie), other than this one, whose initial environment has
    /// `name=value`. Processes whose environment cannot be read (another user's) are not listed.
    public static func processes(withEnvironment name: String, value: String) -> [pid_t] {
        let wanted = Array("\(name)=\(value)".utf8)
        var found: [pid_t] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), pid != getpid(), isAlive(pid),
                  let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { continue }
            if environ.split(separator: 0, omittingEmptySubsequences: true).contains(where: { Array($0) == wanted }) {
                found.append(pid)
            }
        }
        return found
    }

    /// Live processes (not this one) whose initial environment sets `name`, with its value.
    public static func processes(withEnvironmentName name: String) -> [(pid: pid_t, value: String)] {
        let prefix = Array("\(name)=".utf8)
        var found: [(pid_t, String)] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), pid != getpid(), isAlive(pid),
                  let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { continue }
            for variable in environ.split(separator: 0, omittingEmptySubsequences: true) where variable.starts(with: prefix) {
                found.append((pid, String(decoding: variable.dropFirst(prefix.count), as: UTF8.self)))
            }
        }
        return found
    }

    /// Whether `pid` is running (a zombie has finished: only its parent's `wait` is missing).
    public static func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = FileManager.default.contents(atPath: "/proc/\(pid)/stat"),
              let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return false }
        let state = stat[stat.index(after: close)...].first { $0 != UInt8(ascii: " ") }
        return state != UInt8(ascii: "Z") && state != UInt8(ascii: "X")
    }

    /// The command name and blocked-signal mask of a process, for failure messages.
    public static func describe(_ pid: pid_t) -> String {
        let comm = (FileManager.default.contents(atPath: "/proc/\(pid)/comm")).map { String(decoding: $0, as: UTF8.self) } ?? "?"
        let status = (FileManager.default.contents(atPath: "/proc/\(pid)/status")).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let blocked = status.split(separator: "\n").first { $0.hasPrefix("SigBlk:") }?.dropFirst(7)
            .trimmingCharacters(in: .whitespaces) ?? "?"
        return "\(pid) \(comm.trimmingCharacters(in: .whitespacesAndNewlines)) (SigBlk \(blocked))"
    }

    /// Ends `pids`: SIGTERM, then SIGKILL for those still running after `grace` seconds; waits
    /// (up to `grace` more) until they are gone. Returns those that were still running after the
    /// SIGTERM grace period (they ignored or blocked it).
    @discardableResult
    public static func stop(_ pids: [pid_t], grace: TimeInterval = 3) -> [pid_t] {
        let live = pids.filter(isAlive)
        guard !live.isEmpty else { return [] }
        for pid in live { kill(pid, SIGTERM) }
        let stubborn = waitUntilGone(live, seconds: grace)
        for pid in stubborn { kill(pid, SIGKILL) }
        _ = waitUntilGone(stubborn, seconds: grace)
        return stubborn
    }

    /// Ends every process whose environment has `name=value` (see `stop`).
    @discardableResult
    public static func stopAll(withEnvironment name: String, value: String, grace: TimeInterval = 3) -> [pid_t] {
        stop(processes(withEnvironment: name, value: value), grace: grace)
    }

    private static func waitUntilGone(_ pids: [pid_t], seconds: TimeInterval) -> [pid_t] {
        let deadline = Date().addingTimeInterval(seconds)
        var left = pids.filter(isAlive)
        while !left.isEmpty && Date() < deadline {
            // Our own children become zombies until waited for: reap them without blocking.
            for pid in left { var status: Int32 = 0; _ = waitpid(pid, &status, WNOHANG) }
            usleep(20_000)
            left = left.filter(isAlive)
        }
        return left
    }
}
