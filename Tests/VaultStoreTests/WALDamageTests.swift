import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys

/// A damaged WAL is detected before SQLite recovers it (and silently drops the commits after the
/// damage); a crash's torn final transaction is not damage (ThreatModel C19, `WALCheck`).
final class WALDamageTests: XCTestCase {
    func testADamagedFrameBeforeLaterCommitsIsReportedAndTheirUnsentMessagesSalvaged() throws {
        let h = Harness()
        let wal = try crashedWithWAL(h, pending: 23)
        let frames = currentFrames(wal)
        let commits = frames.indices.filter { frames[$0].commit }
        XCTAssertEqual(commits.count, 23, "one commit per acknowledged message")
        // A byte-level fault inside the first frame of the fourth transaction.
        let victim = commits[2] + 1
        Damage.overwrite(h.directory.wal, at: frames[victim].offset + 24 + 1000, count: 64)
        let damaged = try XCTUnwrap(FileManager.default.contents(atPath: h.directory.wal))

        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted], "never a silent ready: \(report.notes)")
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, 0, "every acknowledged message is back")
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).pending, 23)
        XCTAssertTrue(report.notes.contains { $0.contains("WAL is damaged") }, "\(report.notes)")
        let entry = try XCTUnwrap(report.resets.first?.quarantinedAs)
        XCTAssertEqual(FileManager.default.contents(atPath: "\(h.directory.path)/\(entry)/cache.db-wal"), damaged,
                       "the damaged WAL is kept as it was found")
    }

    func testADamagedWALIsReportedWhenTheManifestIsGoneOrTheEncryptionSettingChanges() throws {
        for situation in ["manifest deleted", "encryption turned off"] {
            let h = Harness()
            let wal = try crashedWithWAL(h, pending: 23)
            let frames = currentFrames(wal)
            let commits = frames.indices.filter { frames[$0].commit }
            Damage.overwrite(h.directory.wal, at: frames[commits[2] + 1].offset + 24 + 1000, count: 64)
            if situation == "manifest deleted" { unlink(h.directory.manifest) }
            // Neither the inference's probes nor the export may replay the damaged WAL first.
            let report = h.open(h.configuration(encryption: situation == "manifest deleted"), expect: "ready")
            XCTAssertEqual(report.resets.map(\.reason), [.corrupted], "\(situation): \(report.notes)")
            XCTAssertEqual(report.resets.first?.pendingMessagesLost, 0, situation)
            XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).pending, 23, situation)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.directory.quarantine).filter { $0.hasPrefix(".") }, [], situation)
        }
    }

    func testADamagedWALHeaderHidingCommittedFramesIsReportedAndRepaired() throws {
        let h = Harness()
        _ = try crashedWithWAL(h, pending: 23)
        // The header's checksum: SQLite then ignores every frame of the WAL.
        Damage.overwrite(h.directory.wal, at: 24, count: 8)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted], "\(report.notes)")
        XCTAssertTrue(report.notes.contains { $0.contains("WAL is damaged in its header") }, "\(report.notes)")
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, 0)
        XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).pending, 23, "salvage rebuilt the header of its copy")
    }

    func testATornFinalTransactionIsANormalCrashNotDamage() throws {
        for tear in ["cut the last frame", "garble a frame of the last transaction"] {
            let h = Harness()
            let wal = try crashedWithWAL(h, pending: 23)
            let frames = currentFrames(wal)
            let commits = frames.indices.filter { frames[$0].commit }
            let last = try XCTUnwrap(commits.last)
            XCTAssertGreaterThan(last - commits[commits.count - 2], 1, "the last transaction has several frames")
            if tear == "cut the last frame" {
                truncate(h.directory.wal, off_t(frames[last].offset + 24 + 2000))
            } else {
                Damage.overwrite(h.directory.wal, at: frames[last - 1].offset + 24 + 1000, count: 64)
            }
            let report = h.open(h.configuration(), expect: "ready")
            XCTAssertEqual(report.resets, [], "\(tear): the in-flight transaction was never acknowledged")
            XCTAssertEqual(try h.counts(try XCTUnwrap(report.cache)).pending, 22, tear)
        }
    }

    // MARK: - Helpers

    /// A cache whose process died with `pending` acknowledged sends in its WAL (one transaction
    /// each, never checkpointed). Returns the WAL's bytes.
    private func crashedWithWAL(_ h: Harness, pending: Int) throws -> [UInt8] {
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try h.seed(cache, messages: 50, pending: 0)
        try cache.writer.sync { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        for i in 0..<pending {
            try cache.writer.sync { db in
                try CacheRows.insert([CacheRows.OutboxEntry(localId: "local-\(i)", seq: Int64(i + 1), conversationId: "user_bob", kind: "text",
                                                            state: 0, createdAt: Int64(1_700_000_000 + i), payload: Array("pending \(i)".utf8))], into: db)
            }
        }
        // What a killed process leaves: the database and the WAL as they are now, no shm.
        let database = try XCTUnwrap(FileManager.default.contents(atPath: h.directory.database))
        let wal = try XCTUnwrap(FileManager.default.contents(atPath: h.directory.wal))
        cache.close()
        try put(database, at: h.directory.database)
        try put(wal, at: h.directory.wal)
        unlink(h.directory.shm)
        return Array(wal)
    }

    private func put(_ data: Data, at path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        XCTAssertEqual(written, data.count)
    }

    /// The frames of the WAL's current generation (its header's salts), in order.
    private func currentFrames(_ wal: [UInt8]) -> [(offset: Int, commit: Bool)] {
        let frameSize = 24 + 4096
        let salt = Array(wal[16..<24])
        var frames: [(offset: Int, commit: Bool)] = []
        var offset = 32
        while offset + frameSize <= wal.count, Array(wal[(offset + 8)..<(offset + 16)]) == salt {
            frames.append((offset, wal[(offset + 4)..<(offset + 8)].contains { $0 != 0 }))
            offset += frameSize
        }
        return frames
    }
}
