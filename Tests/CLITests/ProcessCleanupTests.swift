import ChatVaultTesting
import Dispatch
import Foundation
import XCTest

/// Every process the CLI, the scripts and the tests start is ended when they finish, and starts
/// with its signals unblocked, so a plain `kill` (or `dbus-run-session` ending its bus) works.
final class ProcessCleanupTests: XCTestCase {
    /// A child started from a Dispatch worker thread (where async code runs, and which blocks
    /// almost every signal) gets an empty signal mask and no ignored signals.
    func testAChildStartsWithNoSignalBlockedOrIgnoredWhateverTheSpawningThreadBlocks() throws {
        let sh = try XCTUnwrap(Subprocess.which("sh"))
        let done = DispatchSemaphore(value: 0)
        let box = SpawnProbe()
        DispatchQueue.global().async {
            var current = sigset_t()
            pthread_sigmask(SIG_BLOCK, nil, &current)
            box.blocksTerm = sigismember(&current, SIGTERM) == 1
            box.result = Result { try Subprocess.run([sh, "-c", "exec grep -E '^Sig(Blk|Ign):' /proc/self/status"],
                                                     environment: ProcessInfo.processInfo.environment) }
            done.signal()
        }
        done.wait()
        let outcome = (box.blocksTerm, try XCTUnwrap(box.result))
        XCTAssertTrue(outcome.0, "precondition: the spawning thread blocks SIGTERM (a Dispatch worker)")
        let output = String(decoding: try outcome.1.get().stdout, as: UTF8.self)
        var masks: [String: UInt64] = [:]
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: ":").map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2 { masks[parts[0]] = UInt64(parts[1], radix: 16) }
        }
        XCTAssertEqual(masks["SigBlk"], 0, output)
        // glibc's posix_spawn itself sets its two internal signals (32 and 33, SIGCANCEL and
        // SIGSETXID, which no program handles) to ignored; every other signal is at its default.
        let glibcInternal: UInt64 = 1 << 31 | 1 << 32
        XCTAssertEqual(masks["SigIgn"].map { $0 & ~glibcInternal }, 0, output)
    }

    /// `chatvault scenarios` starts private D-Bus sessions with gnome-keyring (and, inside them,
    /// replaces the keyring daemon): none of those processes is left when it returns.
    func testTheScenarioCatalogueLeavesNoProcessRunning() throws {
        let marker = "run-\(UUID().uuidString)"
        let run = try CLI.run(["scenarios", "--json"], environment: ["CHATVAULT_PROCESS_CHECK": marker])
        let left = ProcessReaper.processes(withEnvironment: "CHATVAULT_PROCESS_CHECK", value: marker)
        let described = left.map(ProcessReaper.describe)
        ProcessReaper.stop(left)
        XCTAssertEqual(run.status, 0, run.stdout)
        XCTAssertEqual(try run.json()["passed"] as? Bool, true)
        XCTAssertEqual(described, [], "processes the scenario run started and left running")
    }

    /// The reaper the CLI runs after each private session finds a detached process by its
    /// environment and ends it with SIGKILL when it ignores SIGTERM.
    func testTheReaperEndsAProcessThatIgnoresSIGTERM() throws {
        let sh = try XCTUnwrap(Subprocess.which("sh"))
        let marker = "reaper-\(UUID().uuidString)"
        var environment = ProcessInfo.processInfo.environment
        environment["CHATVAULT_PROCESS_CHECK"] = marker
        // The shell starts a detached grandchild that ignores SIGTERM, and exits at once.
        let started = try Subprocess.run([sh, "-c", "trap '' TERM; sleep 60 </dev/null >/dev/null 2>&1 & echo $!"], environment: environment)
        let pid = try XCTUnwrap(pid_t(String(decoding: started.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        XCTAssertEqual(ProcessReaper.processes(withEnvironment: "CHATVAULT_PROCESS_CHECK", value: marker), [pid])
        // (Not timed: on a loaded machine the grace period and the kill can take any while.)
        XCTAssertEqual(ProcessReaper.stop([pid], grace: 0.5), [pid], "SIGTERM was ignored: it needed SIGKILL")
        // The SIGKILL was sent; a starved CPU may take a moment to let the process die.
        for _ in 0..<500 where ProcessReaper.isAlive(pid) { usleep(20_000) }
        XCTAssertFalse(ProcessReaper.isAlive(pid))
        XCTAssertEqual(ProcessReaper.processes(withEnvironment: "CHATVAULT_PROCESS_CHECK", value: marker), [])
    }

    /// Scripts/test and Scripts/chatvault end their sessions with `chatvault_stop_processes_using`:
    /// it finds processes by any variable naming the session's directory (not only
    /// XDG_RUNTIME_DIR), and escalates to SIGKILL when SIGTERM is ignored.
    func testTheScriptsCleanupEndsEverythingStartedForItsDirectory() throws {
        let bash = try XCTUnwrap(Subprocess.which("bash"))
        let scratch = TemporaryDirectory()
        let lib = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Scripts/lib").path
        let script = """
            set -eu
            DIR=$1
            . "\(lib)/common.sh"
            . "\(lib)/keyring.sh"
            env XDG_RUNTIME_DIR="$DIR/run" sh -c 'trap "" TERM; exec sleep 60' </dev/null >/dev/null 2>&1 &
            env CHATVAULT_SCENARIO_KEYRING_HOME="$DIR/session" sleep 60 </dev/null >/dev/null 2>&1 &
            env UNRELATED="$DIR-other" sleep 60 </dev/null >/dev/null 2>&1 &
            other=$!
            # Until both have exec'd with their environment (a loaded machine can take a while).
            for _ in $(seq 100); do
                [ "$(chatvault_processes_using "$DIR" | wc -l)" -ge 2 ] && break
                sleep 0.1
            done
            echo "found $(chatvault_processes_using "$DIR" | wc -l)"
            chatvault_stop_processes_using "$DIR" 1
            echo "left $(chatvault_processes_using "$DIR" | wc -l)"
            chatvault_process_alive "$other" && echo "other alive"
            kill -KILL "$other"
            """
        // The directory is an argument, not in the environment: the script's own processes must
        // not match it.
        let run = try Subprocess.run([bash, "-c", script, "bash", scratch.path], environment: ProcessInfo.processInfo.environment)
        XCTAssertEqual(run.status, 0, String(decoding: run.stderr, as: UTF8.self))
        XCTAssertEqual(String(decoding: run.stdout, as: UTF8.self).split(separator: "\n"), ["found 2", "left 0", "other alive"])
    }
}

/// Carries a worker thread's findings back (written before the semaphore is signalled).
private final class SpawnProbe: @unchecked Sendable {
    var blocksTerm = false
    var result: Result<Subprocess.Result, any Error>?
}
