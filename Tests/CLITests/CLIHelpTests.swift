import ChatVaultTesting
import Foundation
import XCTest

/// Every verb answers `--help`, `-h` and `chatvault help VERB` with its own usage and exit 0; the
/// top usage lists every verb (the crash tests' tools apart); a usage error names its verb's usage.
final class CLIHelpTests: XCTestCase {
    /// The verbs the top usage lists (the first word of each indented line).
    private func listedVerbs() throws -> [String] {
        let top = try CLI.run(["help"])
        XCTAssertEqual(top.status, 0, top.stderr)
        let verbs = top.stdout.split(separator: "\n")
            .filter { $0.hasPrefix("  ") }
            .compactMap { $0.split(separator: " ").first.map(String.init) }
        var seen: [String] = []
        for verb in verbs where !seen.contains(verb) { seen.append(verb) }
        return seen
    }

    func testTheTopUsageListsEveryVerbAndEveryBenchmark() throws {
        let verbs = try listedVerbs()
        for verb in ["scenarios", "seed", "open", "status", "outbox", "key", "recover", "quarantine", "export", "import", "demo", "bench",
                     "version", "help", "outbox-stress", "sync-stress", "matrix-send-stress", "matrix-catchup-stress", "media-stress"] {
            XCTAssertTrue(verbs.contains(verb), "\(verb) is not in the top usage: \(verbs)")
        }
        let top = try CLI.run(["--help"]).stdout
        for benchmark in ["open", "reads", "outbox", "sync", "media", "matrix", "keys", "capi"] {
            XCTAssertTrue(top.contains("bench \(benchmark) "), "bench \(benchmark) is not in the top usage")
        }
        XCTAssertEqual(try CLI.run([]).stdout, top, "no arguments prints the same usage")
    }

    func testEveryVerbAnswersHelpWithItsOwnUsage() throws {
        for verb in try listedVerbs() {
            for asked in [[verb, "--help"], [verb, "-h"], ["help", verb]] {
                let run = try CLI.run(asked)
                XCTAssertEqual(run.status, 0, "\(asked): \(run.stderr)")
                XCTAssertTrue(run.stdout.hasPrefix("usage: chatvault \(verb)"), "\(asked): \(run.stdout.prefix(200))")
                XCTAssertTrue(run.stderr.isEmpty, "\(asked) wrote to stderr: \(run.stderr)")
            }
        }
    }

    func testHelpWinsOverTheVerbsOwnChecks() throws {
        // Once "--help needs a value" and "--dir is required".
        for asked in [["export", "--help"], ["key", "--help"], ["key", "rotate", "--help"], ["quarantine", "restore", "ID", "-h"],
                      ["bench", "sync", "--help"], ["import", "--from", "F", "--help"]] {
            let run = try CLI.run(asked)
            XCTAssertEqual(run.status, 0, "\(asked): \(run.stderr)")
            XCTAssertTrue(run.stdout.hasPrefix("usage: chatvault \(asked[0])"), "\(asked): \(run.stdout.prefix(200))")
        }
    }

    func testAUsageErrorNamesTheVerbsUsage() throws {
        // Still one line (the CLI's errors are), naming the form of the verb or sub-verb given.
        for (asked, usage) in [(["export", "--to"], "usage: chatvault export --dir D"),
                               (["export", "--dir", "/nonexistent", "--user", "u", "--to", "f", "--bogus", "x"], "usage: chatvault export --dir D"),
                               (["key", "rotate", "--user", "u"], "usage: chatvault key rotate --dir D"),
                               (["key", "spin", "--dir", "d", "--user", "u"], "usage: chatvault key --help"),
                               (["bench", "nothing"], "usage: chatvault bench --help")] {
            let run = try CLI.run(asked)
            XCTAssertEqual(run.status, 2, "\(asked): \(run.stdout) \(run.stderr)")
            XCTAssertTrue(run.stderr.contains(usage), "\(asked): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, "one line: \(run.stderr)")
        }
        let unknown = try CLI.run(["frobnicate"])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("chatvault help"), unknown.stderr)
        let unknownHelp = try CLI.run(["help", "frobnicate"])
        XCTAssertEqual(unknownHelp.status, 2)
    }
}

/// Long work shows progress on a terminal only: never on a pipe, never with --json.
final class CLIProgressTests: XCTestCase {
    /// Runs `chatvault args…` on a pseudo-terminal (util-linux `script`): what a person would see.
    private func onTerminal(_ args: [String]) throws -> CLI.Run {
        let script = try XCTUnwrap(Subprocess.which("script"), "util-linux script")
        let command = ([CLI.binary] + args).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let result = try Subprocess.run([script, "-qec", command, "/dev/null"], environment: ProcessInfo.processInfo.environment)
        return CLI.Run(status: result.status, stdout: String(decoding: result.stdout, as: UTF8.self),
                       stderr: String(decoding: result.stderr, as: UTF8.self))
    }

    func testScenariosShowEachAsItRunsOnATerminalOnly() throws {
        let args = ["scenarios", "--keystore", "memory", "--only", "fresh-create,key-lost"]
        let seen = try onTerminal(args)
        XCTAssertEqual(seen.status, 0, seen.stdout)
        XCTAssertTrue(seen.stdout.contains("running   fresh-create (1 of 2)"), seen.stdout)
        XCTAssertTrue(seen.stdout.contains("running   key-lost (2 of 2)"), seen.stdout)
        XCTAssertTrue(seen.stdout.contains("\r\u{1B}[K  ok        key-lost"), "each verdict replaces its running line")
        let piped = try CLI.run(args)
        XCTAssertEqual(piped.status, 0, piped.stderr)
        XCTAssertEqual(piped.stderr, "", "no progress on a pipe")
        XCTAssertFalse(piped.stdout.contains("running"), piped.stdout)
        let json = try onTerminal(args + ["--json"])
        XCTAssertFalse(json.stdout.contains("running"), "no progress with --json, even on a terminal")
    }

    func testARotationShowsItsProgressOnATerminalOnly() throws {
        let dir = try TemporaryDirectory.create(prefix: "chatvault-progress")
        let keys = dir.path + "/keys"
        let seed = try CLI.run(["seed", "--dir", dir.path + "/root", "--user", "u", "--messages", "200", "--keystore", "file", "--key-dir", keys])
        XCTAssertEqual(seed.status, 0, seed.stderr)
        let rotate = ["key", "rotate", "--dir", dir.path + "/root", "--user", "u", "--keystore", "file", "--key-dir", keys]
        let seen = try onTerminal(rotate)
        XCTAssertEqual(seen.status, 0, seen.stdout)
        XCTAssertTrue(seen.stdout.contains("rotating the key: done in"), seen.stdout)
        let piped = try CLI.run(rotate)
        XCTAssertEqual(piped.status, 0, piped.stderr)
        XCTAssertFalse((piped.stdout + piped.stderr).contains("rotating the key"), "no progress on a pipe")
    }
}
