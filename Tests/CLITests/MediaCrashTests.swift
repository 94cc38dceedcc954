import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import XCTest

/// A media download under a real crash: `chatvault media-stress` downloads a 2 MiB attachment
/// (8 KiB chunks, 2 ms apart) into an encrypted cache and is SIGKILLed at a seeded random instant
/// after its progress began. After every kill, no file under `media/` carries a final name (only a
/// writer's temporary file may be left); the next run must not find the URL cached, and its start
/// removes the leftovers. A last run completes, verifies the bytes, and leaves exactly one file; a
/// run after it finds the bytes cached and downloads nothing. The key lives in a software key
/// store in a temporary directory.
final class MediaCrashTests: XCTestCase {
    let app = "org.chatvault.clitests.mediacrash"
    let user = "media-crash-user"
    static let rounds = 8

    func testAKilledDownloadNeverLeavesAFileThatIsServedAsCached() throws {
        let root = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let runtime = TemporaryDirectory(prefix: "chatvault-runtime")
        let options = ["--dir", root.path, "--user", user, "--app", app, "--keystore", "file", "--key-dir", "\(keys.path)/keys",
                       "--runtime-dir", runtime.path]
        var generator = SeededGenerator(seed: 0x3ed1a)
        var killedMidDownload = 0
        for round in 0..<Self.rounds {
            let delay = 20 + Int(generator.next() % 400)
            let run = try KilledRun.start([CLI.binary, "media-stress"] + options, killAfter: .milliseconds(delay), once: "progress")
            let lines = run.stdout.split(separator: "\n").map(String.init)
            XCTAssertTrue(lines.contains("cached no"), "round \(round): a killed download must not count as cached: \(lines.prefix(3))")
            if run.killed && !lines.contains("verified") { killedMidDownload += 1 }
            let names = mediaNames(root.path)
            XCTAssertEqual(names.filter { !$0.hasPrefix(".cvm-") }, [], "round \(round): a file under its final name after a kill")
        }
        XCTAssertGreaterThan(killedMidDownload, Self.rounds / 2, "too few kills landed during the download")

        let finished = try CLI.run(["media-stress"] + options)
        XCTAssertEqual(finished.status, 0, finished.stderr)
        let lines = finished.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("cached no"))
        XCTAssertTrue(lines.contains("verified"))
        let progress = lines.compactMap { $0.hasPrefix("progress ") ? Int($0.dropFirst(9)) : nil }
        XCTAssertEqual(progress.last, 100)
        XCTAssertEqual(progress, progress.sorted())
        let names = mediaNames(root.path)
        XCTAssertEqual(names.count, 1, "one file, no leftovers: \(names)")
        XCTAssertTrue(names.allSatisfy { $0.range(of: "^[0-9a-f]{32}$", options: .regularExpression) != nil }, "\(names)")

        let again = try CLI.run(["media-stress"] + options)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stdout.contains("cached yes"))
        XCTAssertTrue(again.stdout.contains("verified"))
        XCTAssertFalse(again.stdout.contains("progress"), "served from the cache")
    }

    /// The names under every cache directory's `media/` in `root`.
    private func mediaNames(_ root: String) -> [String] {
        let accounts = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return accounts.flatMap { account in (try? FileManager.default.contentsOfDirectory(atPath: "\(root)/\(account)/media")) ?? [] }.sorted()
    }
}
