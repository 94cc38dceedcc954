import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys
import CSQLCipher

/// What differs between the SQLCipher engines ChatVault links: 3.4.1 (Debian 12, the normal build)
/// and 4.x (Debian 13, Ubuntu 24.04, Fedora; built by `Scripts/build-sqlcipher4` and tested by
/// `Scripts/test-sqlcipher4`). Every test here probes the linked engine (`PRAGMA cipher_version`)
/// and asserts what that engine must do: none is skipped on either.
///
/// Environment (set by `Scripts/test-sqlcipher4`, optional elsewhere):
///   CHATVAULT_EXPECT_SQLCIPHER_MAJOR  the major version this run must be linked against
///   CHATVAULT_INTEROP_EXPORT_DIR      where to leave a cache written by this engine, with its raw
///                                     key, for another engine to open (see the last test)
final class EngineVersionTests: XCTestCase {
    let engine = CipherEngine.current
    var major: Int { engine.majorVersion ?? 0 }

    func testLinkedEngineIsACipherAndTheOneThisRunExpects() throws {
        let version = try XCTUnwrap(engine.version, "no SQLCipher linked")
        XCTAssertTrue([3, 4].contains(major), "an engine this code knows: \(version)")
        // The version the tests see is the version a fresh connection reports, not a cached guess.
        XCTAssertEqual(try rawScalar("PRAGMA cipher_version"), version)
        if let expected = ProcessInfo.processInfo.environment["CHATVAULT_EXPECT_SQLCIPHER_MAJOR"] {
            XCTAssertTrue(version.hasPrefix("\(expected)."), "this run must be linked against SQLCipher \(expected).x, it runs on \(version)")
        }
    }

    func testEngineLogIsSilencedWhereTheEngineHasOne() throws {
        if major >= 4 {
            // 4.x logs to stderr at WARN by default; the probe turned it off for the process.
            let wanted = ProcessInfo.processInfo.environment["CHATVAULT_SQLCIPHER_LOG"]?.uppercased() ?? "NONE"
            XCTAssertEqual(engine.engineLogLevel, wanted)
            XCTAssertEqual(try rawScalar("PRAGMA cipher_log_level"), wanted, "still in force on a later connection")
        } else {
            // 3.4.1 has no such log and ignores the pragma: nothing answers, nothing was assumed.
            XCTAssertNil(engine.engineLogLevel)
            XCTAssertNil(try rawScalar("PRAGMA cipher_log_level"))
        }
    }

    // MARK: a damaged middle page, as each engine reports it

    func testDamagedMiddlePageFailsTheIntegrityCheckOnThisEngine() throws {
        let fixture = try FixtureCopy(damaged: "middle-page-overwritten")
        let profile = try XCTUnwrap(try fixture.currentManifest().cipherProfile)
        var options = ConnectionOptions()
        options.readOnly = true
        let queue = try DatabaseQueue(path: fixture.directory.database, keying: .encrypted(try fixture.key(), profile),
                                      options: options, label: "engine-test")
        defer { queue.close() }
        // The raw answer differs by engine; both are pinned so a change in either is noticed.
        let raw: Result<[String], DatabaseError> = try queue.sync { db in Result { () throws(DatabaseError) in try db.texts("PRAGMA quick_check") } }
        switch (major, raw) {
        case (3, .success(let lines)):
            XCTAssertNotEqual(lines, ["ok"], "3.4.1 answers damage with rows")
        case (3, .failure(let error)):
            XCTFail("3.4.1 answered quick_check with an error: \(error)")
        case (_, .success(let lines)):
            XCTAssertNotEqual(lines, ["ok"], "a damaged page never passes")
        case (_, .failure(let error)):
            // 4.x fails the statement; the code alone (1 on 4.18) would not say "damaged".
            XCTAssertTrue([SQLITE_ERROR, SQLITE_NOMEM, SQLITE_CORRUPT, SQLITE_NOTADB].contains(error.primaryCode), "\(error)")
        }
        // The library's verdict is the same on both: damaged.
        XCTAssertFalse(try queue.sync { db in try IntegrityCheck.run(db) })
        let failures = try queue.sync { db in IntegrityCheck.authenticationFailures(db) }
        if major >= 4 {
            XCTAssertEqual(failures, ["HMAC verification failed for page 24"], "the page DAMAGE.json names")
        } else {
            XCTAssertEqual(failures, [], "3.4.1 has no cipher_integrity_check")
        }
    }

    func testIntactCacheHasNoAuthenticationFailures() throws {
        let fixture = try FixtureCopy("v1-encrypted-large")
        let profile = try XCTUnwrap(try fixture.currentManifest().cipherProfile)
        var options = ConnectionOptions()
        options.readOnly = true
        let queue = try DatabaseQueue(path: fixture.directory.database, keying: .encrypted(try fixture.key(), profile),
                                      options: options, label: "engine-test")
        defer { queue.close() }
        XCTAssertTrue(try queue.sync { db in try IntegrityCheck.run(db) })
        XCTAssertEqual(try queue.sync { db in IntegrityCheck.authenticationFailures(db) }, [])
    }

    func testDamagedMiddlePageResetsAsCorruptedWithoutWritingToStderr() throws {
        // The classification end to end (FixtureTests checks the salvage), here with stderr
        // captured: 4.x's default log would print "ERROR CORE … hmac check failed" lines.
        let fixture = try FixtureCopy(damaged: "middle-page-overwritten")
        try fixture.holdKey()
        let (report, stderr) = try capturingStderr { fixture.open(expect: "ready") }
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted], "\(report.notes)")
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, 0)
        if engine.engineLogLevel == nil || engine.engineLogLevel == "NONE" {
            XCTAssertFalse(stderr.contains("hmac check failed"), stderr)
            XCTAssertFalse(stderr.contains("ERROR CORE"), stderr)
        } else {
            // CHATVAULT_SQLCIPHER_LOG kept the log on: then the capture must see it (which shows
            // the assertion above can fail).
            XCTAssertTrue(stderr.contains("hmac check failed"), stderr)
        }
    }

    // MARK: fixtures written by 3.4.1; a cache written here for the other engine

    func testFixturesWereWrittenBySQLCipher341AndOpenHere() throws {
        // Every shipped schema version's encrypted fixture, and the large v1 one.
        for name in (1...Schema.currentVersion).map({ "v\($0)-encrypted" }) + ["v1-encrypted-large"] {
            let fixture = try FixtureCopy(name)
            XCTAssertEqual(try fixture.currentManifest().cipherProfile?.createdBy, "SQLCipher 3.4.1 on SQLite 3.15.2", name)
            try fixture.holdKey()
            let report = fixture.open(expect: "ready")
            XCTAssertEqual(report.resets, [], "\(name) on SQLCipher \(engine.version ?? "none")")
            let cache = try XCTUnwrap(report.cache)
            XCTAssertEqual(try fixture.counts(cache), fixture.expected.counts.rows, name)
            cache.close()
        }
    }

    func testCacheWrittenHereOpensWithTheRawKeyAndTheManifestProfile() throws {
        let harness = Harness()
        let report = harness.open(harness.configuration(), expect: "ready")
        let cache = try XCTUnwrap(report.cache)
        try harness.seed(cache, messages: 120, pending: 3, marker: "INTEROP-MARKER")
        let counts = try harness.counts(cache)
        cache.close()
        let manifest = try XCTUnwrap(harness.manifest())
        let profile = try XCTUnwrap(manifest.cipherProfile)
        XCTAssertEqual(profile.createdBy, "SQLCipher \(engine.version ?? "none") on SQLite \(engine.sqliteVersion)")
        XCTAssertEqual(profile, CipherProfile.standard(engine: engine), "the same profile whatever the engine")
        guard case .found(let key, _) = harness.keyStore.lookup(KeyItemID(applicationId: harness.applicationId, account: harness.account,
                                                                            cacheId: manifest.cacheId)) else {
            return XCTFail("the key is not in the store")
        }
        // Closed cleanly: one file, checkpointed; it opens with nothing but the key and the profile.
        XCTAssertFalse(FileManager.default.fileExists(atPath: harness.directory.wal))
        XCTAssertEqual(CipherProof.header(of: harness.directory.database), .opaque)
        XCTAssertEqual(filesContaining("INTEROP-MARKER", under: harness.directory.path), [])
        var options = ConnectionOptions()
        options.readOnly = true
        let queue = try DatabaseQueue(path: harness.directory.database, keying: .encrypted(key, profile), options: options, label: "interop")
        XCTAssertEqual(try queue.sync { db in try db.scalarInt("SELECT count(*) FROM messages") }, Int64(counts.messages))
        XCTAssertTrue(try queue.sync { db in try IntegrityCheck.run(db) })
        queue.close()

        // For Scripts/test-sqlcipher4: leave it where the other engine (the 3.4.1 shell) opens it.
        guard let export = ProcessInfo.processInfo.environment["CHATVAULT_INTEROP_EXPORT_DIR"] else { return }
        try FileManager.default.createDirectory(atPath: export, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for (file, target) in [(harness.directory.database, "cache.db"), (harness.directory.manifest, "manifest.json")] {
            let destination = "\(export)/\(target)"
            try? FileManager.default.removeItem(atPath: destination)
            try FileManager.default.copyItem(atPath: file, toPath: destination)
        }
        // A throwaway key of a throwaway cache, written for the test only (0600).
        let keyFile = "\(export)/TEST-ONLY-KEY.hex"
        try? FileManager.default.removeItem(atPath: keyFile)
        XCTAssertTrue(FileManager.default.createFile(atPath: keyFile, contents: key.withHexDigits { Data($0) + Data("\n".utf8) },
                                                     attributes: [.posixPermissions: 0o600]))
        let expected = "messages=\(counts.messages)\npending=\(counts.pending)\nengine=\(engine.version ?? "none")\n"
        try expected.write(toFile: "\(export)/EXPECTED", atomically: true, encoding: .utf8)
    }

    // MARK: helpers

    /// One column of one row on a fresh keyed in-memory connection, nil when there is no row.
    private func rawScalar(_ sql: String) throws -> String? {
        var options = ConnectionOptions()
        options.readOnly = true
        let queue = try DatabaseQueue(path: ":memory:", keying: .encrypted(try CacheKey.generate(), .standard()),
                                      options: options, label: "engine-probe")
        defer { queue.close() }
        return try queue.sync { db in try db.scalarText(sql) }
    }
}

/// Runs `body` with file descriptor 2 sent to a temporary file; returns its result and what was written.
func capturingStderr<R>(_ body: () throws -> R) throws -> (R, String) {
    let temporary = TemporaryDirectory()
    let path = "\(temporary.path)/stderr"
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw CocoaError(.fileWriteUnknown) }
    fflush(nil)
    let saved = dup(2)
    dup2(fd, 2)
    close(fd)
    let result: R
    do {
        result = try body()
    } catch {
        fflush(nil)
        dup2(saved, 2)
        close(saved)
        throw error
    }
    fflush(nil)
    dup2(saved, 2)
    close(saved)
    let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    return (result, text)
}
