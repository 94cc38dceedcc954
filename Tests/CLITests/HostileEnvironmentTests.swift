import ChatVaultTesting
import Foundation
import XCTest

/// A real full disk, a real read-only file system and a real shortage of file descriptors,
/// produced for the CLI in a child process: a small tmpfs mounted (and remounted read-only) in a
/// private mount namespace (`unshare -rm`), and `prlimit`.
/// Whatever happens, a transient condition must never cost the cache.
final class HostileEnvironmentTests: XCTestCase {
    let app = "org.chatvault.hostiletests"

    /// Runs `script` with `sh` in a private user and mount namespace; `$CV` is the CLI.
    private func inPrivateNamespace(_ script: String, _ scratch: TemporaryDirectory) throws -> Subprocess.Result {
        let unshare = try XCTUnwrap(Subprocess.which("unshare"), "unshare (util-linux) is needed")
        var environment = ProcessInfo.processInfo.environment
        environment["CV"] = CLI.binary
        environment["APP"] = app
        environment["WORK"] = scratch.path
        return try Subprocess.run([unshare, "-rm", "/bin/sh", "-c", "set -e\n" + script], environment: environment)
    }

    private func lines(_ path: String) throws -> [String: [String: Any]] {
        var out: [String: [String: Any]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: path) where name.hasSuffix(".json") {
            let data = try Data(contentsOf: URL(fileURLWithPath: "\(path)/\(name)"))
            out[String(name.dropLast(5))] = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        }
        return out
    }

    func testTurningEncryptionOnWithAFullDiskWaitsAndKeepsTheCache() throws {
        let scratch = TemporaryDirectory()
        let result = try inPrivateNamespace("""
            mkdir -p "$WORK/mnt" "$WORK/out" "$WORK/keys"
            mount -t tmpfs -o size=4m tmpfs "$WORK/mnt"
            "$CV" seed --dir "$WORK/mnt/root" --user u --encryption off --messages 300 --pending 3 --app "$APP" --json > "$WORK/out/seed.json"
            dd if=/dev/zero of="$WORK/mnt/filler" bs=4k 2>/dev/null || true
            truncate -s -96K "$WORK/mnt/filler"
            "$CV" open --dir "$WORK/mnt/root" --user u --encryption on --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/full.json"
            rm "$WORK/mnt/filler"
            "$CV" open --dir "$WORK/mnt/root" --user u --encryption on --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/after.json"
            umount "$WORK/mnt"
            """, scratch)
        XCTAssertEqual(result.status, 0, String(decoding: result.stderr, as: UTF8.self))
        let out = try lines("\(scratch.path)/out")
        XCTAssertEqual(out["seed"]?["messages"] as? Int, 300)
        let full = try XCTUnwrap(out["full"])
        XCTAssertEqual(full["outcome"] as? String, "unavailable", "\(full)")
        XCTAssertEqual(full["unavailableReason"] as? String, "diskFull")
        XCTAssertEqual((full["resets"] as? [Any])?.count, 0)
        let after = try XCTUnwrap(out["after"])
        XCTAssertEqual(after["outcome"] as? String, "ready", "\(after)")
        XCTAssertEqual((after["resets"] as? [[String: Any]])?.first?["reason"] as? String, "encryptionChanged")
        XCTAssertEqual((after["resets"] as? [[String: Any]])?.first?["pendingMessagesLost"] as? Int, 0)
        XCTAssertEqual(after["messages"] as? Int, 300)
        XCTAssertEqual(after["pending"] as? Int, 3)
    }

    func testOpeningOnAFullDiskIsUnavailableAndTouchesNothing() throws {
        let scratch = TemporaryDirectory()
        let result = try inPrivateNamespace("""
            mkdir -p "$WORK/mnt" "$WORK/out" "$WORK/keys"
            mount -t tmpfs -o size=4m tmpfs "$WORK/mnt"
            "$CV" seed --dir "$WORK/mnt/root" --user u --messages 200 --pending 2 --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/seed.json"
            before=$(cat "$WORK"/mnt/root/*/cache.db "$WORK"/mnt/root/*/manifest.json | sha256sum)
            dd if=/dev/zero of="$WORK/mnt/filler" bs=1k 2>/dev/null || true
            "$CV" open --dir "$WORK/mnt/root" --user u --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/full.json"
            after=$(cat "$WORK"/mnt/root/*/cache.db "$WORK"/mnt/root/*/manifest.json | sha256sum)
            [ "$before" = "$after" ] && echo '{"unchanged": true}' > "$WORK/out/compare.json" || echo '{"unchanged": false}' > "$WORK/out/compare.json"
            [ -e "$WORK"/mnt/root/*/quarantine ] && echo '{"quarantine": true}' > "$WORK/out/quarantine.json" || echo '{"quarantine": false}' > "$WORK/out/quarantine.json"
            rm "$WORK/mnt/filler"
            "$CV" open --dir "$WORK/mnt/root" --user u --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/after.json"
            umount "$WORK/mnt"
            """, scratch)
        XCTAssertEqual(result.status, 0, String(decoding: result.stderr, as: UTF8.self))
        let out = try lines("\(scratch.path)/out")
        let full = try XCTUnwrap(out["full"])
        XCTAssertEqual(full["outcome"] as? String, "unavailable", "\(full)")
        XCTAssertEqual(full["unavailableReason"] as? String, "diskFull")
        XCTAssertEqual((full["resets"] as? [Any])?.count, 0)
        XCTAssertEqual(out["compare"]?["unchanged"] as? Bool, true, "the database and manifest are byte for byte the same")
        XCTAssertEqual(out["quarantine"]?["quarantine"] as? Bool, false)
        XCTAssertEqual(out["after"]?["outcome"] as? String, "ready")
        XCTAssertEqual(out["after"]?["messages"] as? Int, 200)
        XCTAssertEqual((out["after"]?["resets"] as? [Any])?.count, 0)
    }

    func testAFullDiskOpenLeavesNoEmptyWalOrShmBehind() throws {
        let scratch = TemporaryDirectory()
        let result = try inPrivateNamespace("""
            mkdir -p "$WORK/mnt" "$WORK/out" "$WORK/keys"
            mount -t tmpfs -o size=4m tmpfs "$WORK/mnt"
            "$CV" seed --dir "$WORK/mnt/root" --user u --messages 50 --pending 2 --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/seed.json"
            dir=$(echo "$WORK"/mnt/root/*)
            files() { printf '{"names": ['; ls -A "$dir" | sed 's/.*/"&"/' | paste -sd, - | tr -d '\\n'; printf ']}'; }
            files > "$WORK/out/seeded.json"
            dd if=/dev/zero of="$WORK/mnt/filler" bs=1k 2>/dev/null || true
            "$CV" open --dir "$WORK/mnt/root" --user u --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/full.json"
            files > "$WORK/out/afterfull.json"
            rm "$WORK/mnt/filler"
            "$CV" open --dir "$WORK/mnt/root" --user u --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/after.json"
            umount "$WORK/mnt"
            """, scratch)
        XCTAssertEqual(result.status, 0, String(decoding: result.stderr, as: UTF8.self))
        let out = try lines("\(scratch.path)/out")
        let full = try XCTUnwrap(out["full"])
        XCTAssertEqual(full["outcome"] as? String, "unavailable", "\(full)")
        XCTAssertEqual(full["unavailableReason"] as? String, "diskFull")
        let seeded = try XCTUnwrap(out["seeded"]?["names"] as? [String])
        XCTAssertFalse(seeded.contains("cache.db-wal") || seeded.contains("cache.db-shm"), "\(seeded)")
        XCTAssertEqual(out["afterfull"]?["names"] as? [String], seeded, "the failed open left the directory as it found it")
        XCTAssertEqual(out["after"]?["outcome"] as? String, "ready")
        XCTAssertEqual(out["after"]?["messages"] as? Int, 50)
        XCTAssertEqual(out["after"]?["pending"] as? Int, 2)
    }

    func testAReadOnlyFileSystemIsUnavailableReadOnlyAndTouchesNothing() throws {
        let scratch = TemporaryDirectory()
        let result = try inPrivateNamespace("""
            mkdir -p "$WORK/mnt" "$WORK/out" "$WORK/keys"
            mount -t tmpfs -o size=4m tmpfs "$WORK/mnt"
            "$CV" seed --dir "$WORK/mnt/root" --user u --messages 80 --pending 3 --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/seed.json"
            before=$(cat "$WORK"/mnt/root/*/cache.db "$WORK"/mnt/root/*/manifest.json | sha256sum)
            names_before=$(ls -A "$WORK"/mnt/root/*)
            mount -o remount,ro "$WORK/mnt"
            "$CV" open --dir "$WORK/mnt/root" --user u --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/ro.json"
            mount -o remount,rw "$WORK/mnt"
            after=$(cat "$WORK"/mnt/root/*/cache.db "$WORK"/mnt/root/*/manifest.json | sha256sum)
            names_after=$(ls -A "$WORK"/mnt/root/*)
            [ "$before" = "$after" ] && [ "$names_before" = "$names_after" ] && echo '{"unchanged": true}' > "$WORK/out/compare.json" \
                || echo '{"unchanged": false}' > "$WORK/out/compare.json"
            "$CV" open --dir "$WORK/mnt/root" --user u --keystore file --key-dir "$WORK/keys/k" --app "$APP" --json > "$WORK/out/after.json"
            umount "$WORK/mnt"
            """, scratch)
        XCTAssertEqual(result.status, 0, String(decoding: result.stderr, as: UTF8.self))
        let out = try lines("\(scratch.path)/out")
        let readOnly = try XCTUnwrap(out["ro"])
        XCTAssertEqual(readOnly["outcome"] as? String, "unavailable", "\(readOnly)")
        XCTAssertEqual(readOnly["unavailableReason"] as? String, "readOnly")
        XCTAssertEqual((readOnly["resets"] as? [Any])?.count, 0)
        XCTAssertEqual(out["compare"]?["unchanged"] as? Bool, true, "nothing was written, created or set aside")
        let after = try XCTUnwrap(out["after"])
        XCTAssertEqual(after["outcome"] as? String, "ready", "\(after)")
        XCTAssertEqual(after["messages"] as? Int, 80)
        XCTAssertEqual(after["pending"] as? Int, 3)
        XCTAssertEqual((after["resets"] as? [Any])?.count, 0)
    }

    func testRunningOutOfFileDescriptorsNeverCostsTheCache() throws {
        let scratch = TemporaryDirectory()
        let prlimit = try XCTUnwrap(Subprocess.which("prlimit"), "prlimit (util-linux) is needed")
        let keys = "\(scratch.path)/keys"
        let root = "\(scratch.path)/root"
        let common = ["--dir", root, "--user", "u", "--keystore", "file", "--key-dir", keys, "--app", app, "--json"]
        XCTAssertEqual(try CLI.run(["seed", "--messages", "80", "--pending", "2"] + common).status, 0)
        var outcomes: Set<String> = []
        for limit in 6...40 {
            let run = try Subprocess.run([prlimit, "--nofile=\(limit):\(limit)", CLI.binary, "open"] + common,
                                         environment: ProcessInfo.processInfo.environment)
            guard let report = try? JSONSerialization.jsonObject(with: run.stdout) as? [String: Any] else {
                outcomes.insert("crashed-or-no-report")
                continue
            }
            outcomes.insert(report["outcome"] as? String ?? "?")
            XCTAssertEqual((report["resets"] as? [Any])?.count ?? 0, 0, "fd limit \(limit): \(report)")
        }
        XCTAssertTrue(outcomes.contains("ready"), "\(outcomes)")
        XCTAssertTrue(outcomes.contains("unavailable"), "the low limits really failed some opens: \(outcomes)")
        XCTAssertEqual(try CLI.run(["status", "--dir", root, "--app", app, "--key-dir", keys, "--json"]).json()["manifest"]
            .flatMap { ($0 as? [String: Any])?["consecutiveUnclassifiedFailures"] as? Int }, 0,
            "a shortage of descriptors is transient: it never counts toward escalation")
        let after = try CLI.run(["open"] + common).json()
        XCTAssertEqual(after["messages"] as? Int, 80, "every fd shortage left the cache whole")
        XCTAssertEqual(after["pending"] as? Int, 2)
        XCTAssertEqual((after["resets"] as? [Any])?.count, 0)
        let account = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: root).first)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(root)/\(account)/quarantine"))
    }
}
