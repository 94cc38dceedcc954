import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys

/// Files 0600, directories 0700, symlinks refused, no plaintext on disk for an encrypted cache.
final class FileSafetyTests: XCTestCase {
    func testEveryFileIsPrivate() throws {
        let h = Harness()
        try h.createSeeded(messages: 5, pending: 1)
        let id = try XCTUnwrap(h.manifest()?.cacheId)
        try h.keyStore.delete(KeyItemID(applicationId: h.applicationId, account: h.account, cacheId: id))
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try h.seed(cache, messages: 5, pending: 1)
        // While open: WAL and shm exist; after the reset: quarantine exists.
        var seen = 0
        let walker = try XCTUnwrap(FileManager.default.enumerator(atPath: h.directory.path))
        while let relative = walker.nextObject() as? String {
            var st = stat()
            XCTAssertEqual(lstat("\(h.directory.path)/\(relative)", &st), 0)
            let mode = UInt32(st.st_mode) & 0o777
            if st.st_mode & S_IFMT == S_IFDIR {
                XCTAssertEqual(mode, 0o700, relative)
            } else {
                XCTAssertEqual(mode, 0o600, relative)
            }
            seen += 1
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: h.directory.wal))
        XCTAssertGreaterThan(seen, 6)
        var st = stat()
        XCTAssertEqual(lstat(h.directory.path, &st), 0)
        XCTAssertEqual(UInt32(st.st_mode) & 0o777, 0o700)
        cache.close()
    }

    func testMarkerIsAbsentFromEveryFileOfAnEncryptedCacheIncludingTheWAL() throws {
        let h = Harness()
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try h.seed(cache, messages: 300, pending: 5, marker: "PLAINTEXT-CANARY-91")
        // The rows are still in the WAL (no checkpoint yet).
        XCTAssertGreaterThan(Damage.fileSize(h.directory.wal), 0)
        XCTAssertEqual(filesContaining("PLAINTEXT-CANARY-91", under: h.directory.path), [])
        cache.close()
        XCTAssertEqual(filesContaining("PLAINTEXT-CANARY-91", under: h.directory.path), [])
    }

    func testTheScanFindsThePlaintextOfAnUnencryptedCache() throws {
        // Control for the test above: the same scan does see an unencrypted cache's content.
        let h = Harness()
        let cache = try XCTUnwrap(h.open(h.configuration(encryption: false), expect: "ready").cache)
        try h.seed(cache, messages: 30, pending: 1, marker: "PLAINTEXT-CANARY-92")
        XCTAssertFalse(filesContaining("PLAINTEXT-CANARY-92", under: h.directory.path).isEmpty)
        cache.close()
    }

    func testOpenDirectoryIsRefused() throws {
        let h = Harness()
        try h.createSeeded()
        chmod(h.directory.path, 0o755)
        let report = h.open(h.configuration(), expect: "unavailable")
        guard case .unavailable(.unsafeFiles(let why)) = report.outcome else { return XCTFail("\(report.outcome)") }
        XCTAssertTrue(why.contains("755"), why)
        chmod(h.directory.path, 0o700)
        XCTAssertEqual(h.open(h.configuration(), expect: "ready").resets, [])
    }

    func testReadableDatabaseFileIsRefusedNotRepaired() throws {
        let h = Harness()
        try h.createSeeded()
        chmod(h.directory.database, 0o644)
        XCTAssertEqual(h.open(h.configuration(), expect: "unavailable").outcome.code, "unavailable")
        var st = stat()
        stat(h.directory.database, &st)
        XCTAssertEqual(UInt32(st.st_mode) & 0o777, 0o644, "refused, not silently changed")
    }

    func testSymlinkedDirectoryAndDatabaseAreRefused() throws {
        let h = Harness()
        let elsewhere = TemporaryDirectory()
        try FileManager.default.createSymbolicLink(atPath: h.directory.path, withDestinationPath: elsewhere.path)
        XCTAssertEqual(h.open(h.configuration(), expect: "unavailable").outcome.code, "unavailable")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path), [], "nothing written through the link")

        let h2 = Harness()
        try h2.createSeeded()
        let target = "\(elsewhere.path)/other.db"
        XCTAssertEqual(rename(h2.directory.database, target), 0)
        try FileManager.default.createSymbolicLink(atPath: h2.directory.database, withDestinationPath: target)
        guard case .unavailable(.unsafeFiles) = h2.open(h2.configuration(), expect: "unavailable").outcome else { return XCTFail() }
    }

    func testADirectoryInPlaceOfTheLockFileIsUnsafeFilesNeverAReset() throws {
        // Not a shortage of resources: the cache's files are not what they must be, and a person
        // has to look (as for a symlinked lock). Typed, transient, nothing touched.
        let h = Harness()
        try h.createSeeded(messages: 6, pending: 1)
        XCTAssertEqual(unlink(h.directory.lockFile), 0)
        XCTAssertEqual(mkdir(h.directory.lockFile, 0o700), 0)
        let report = h.open(h.configuration(), expect: "unavailable")
        guard case .unavailable(.unsafeFiles(let why)) = report.outcome else { return XCTFail("\(report.outcome)") }
        XCTAssertTrue(why.contains("/lock"), why)
        XCTAssertEqual(report.resets, [])
        XCTAssertFalse(FileManager.default.fileExists(atPath: h.directory.quarantine))
        XCTAssertEqual(rmdir(h.directory.lockFile), 0)
        let again = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(again.resets, [])
        XCTAssertEqual(try h.counts(try XCTUnwrap(again.cache)).pending, 1)
        again.cache?.close()
    }

    func testManifestCarriesNoKeyMaterial() throws {
        let h = Harness()
        try h.createSeeded()
        let key = try h.currentKey()
        let manifestText = try String(contentsOfFile: h.directory.manifest, encoding: .utf8)
        let hex = key.withHexDigits { String(decoding: $0, as: UTF8.self) }
        XCTAssertFalse(manifestText.contains(hex))
        XCTAssertFalse(manifestText.contains(h.userId))
        XCTAssertFalse(h.directory.path.contains(h.userId), "no user id in clear in paths")
    }
}
