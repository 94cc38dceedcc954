import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys

/// A damaged cache gives back every unsent message that can still be read (ThreatModel C19):
/// real SQLCipher files, damaged where a failing disk or a crash would damage them.
final class SalvageTests: XCTestCase {
    func testADamagedOutboxIndexLosesNoPendingMessage() throws {
        let h = Harness()
        try h.createSeeded(messages: 3000, pending: 30)
        let roots = try outboxIndexRootPages(h)
        XCTAssertEqual(roots.count, 3, "local_id, seq and (conversation_id, seq)")
        for page in roots { Damage.overwrite(h.directory.database, at: (page - 1) * 4096 + 512, count: 256) }
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, 0, "every row reads without the indexes: nothing lost")
        let cache = try XCTUnwrap(report.cache)
        XCTAssertEqual(try localIds(cache), (0..<30).map { "local-\($0)" }, "all of them, in compose order")
        XCTAssertEqual(try h.counts(cache).messages, 0)
    }

    func testADamagedOutboxPageIsSteppedOverAndTheLossIsExact() throws {
        let h = Harness()
        try h.createSeeded(messages: 200, pending: 400)
        let key = try h.currentKey()
        // The outbox leaf holding `pending 200`, and how many rows it holds.
        let (page, rowsOnPage) = try XCTUnwrap(leafPage(h.directory.database, key: key, containing: "pending 200 "))
        XCTAssertGreaterThan(rowsOnPage, 0)
        XCTAssertLessThan(rowsOnPage, 200, "the outbox spans several leaves")
        Damage.overwrite(h.directory.database, at: (page - 1) * 4096 + 100, count: 64)
        let report = h.open(h.configuration(), expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, rowsOnPage, "exact: counted through an intact index")
        let ids = try localIds(try XCTUnwrap(report.cache))
        XCTAssertEqual(ids.count, 400 - rowsOnPage)
        XCTAssertFalse(ids.contains("local-200"))
        XCTAssertTrue(ids.contains("local-0") && ids.contains("local-399"), "rows on both sides of the damaged page are read")
    }

    func testATruncatedCacheGivesBackItsOutbox() throws {
        for cut in [0, 1000] {
            let h = Harness()
            try createOutboxFirst(h, pending: 6, messages: 2500)
            let size = Damage.fileSize(h.directory.database)
            truncate(h.directory.database, off_t(size / 2 + cut))
            let report = h.open(h.configuration(), expect: "ready")
            XCTAssertEqual(report.resets.map(\.reason), [.corrupted], "cut \(cut)")
            XCTAssertEqual(report.resets.first?.pendingMessagesLost, 0, "cut \(cut): the outbox pages are before the cut")
            XCTAssertEqual(try localIds(try XCTUnwrap(report.cache)), (0..<6).map { "local-\($0)" }, "cut \(cut)")
            // The quarantined original is left exactly as it was found (salvage read a copy).
            let entry = try XCTUnwrap(report.resets.first?.quarantinedAs)
            XCTAssertEqual(Damage.fileSize("\(h.directory.path)/\(entry)/cache.db"), size / 2 + cut, "cut \(cut)")
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.directory.quarantine).filter { $0.hasPrefix(".") }, [],
                           "no scratch copy is left behind")
        }
    }

    func testAScratchCopyLeftByACrashIsRemovedAndNeverCountsAsAnEntry() throws {
        let h = Harness()
        try h.createSeeded(encryption: false, messages: 30, pending: 2, marker: "PLAIN-SCRATCH-MARK")
        // A crash in the middle of a salvage leaves its plaintext working copy behind.
        let scratch = "\(h.directory.quarantine)/\(Salvage.scratchPrefix)dead"
        try SecureFiles.ensureDirectory(h.directory.quarantine)
        try SecureFiles.ensureDirectory(scratch)
        try Salvage.copyFile(h.directory.database, to: "\(scratch)/cache.db")
        XCTAssertEqual(filesContaining("PLAIN-SCRATCH-MARK", under: h.directory.quarantine), ["\(Salvage.scratchPrefix)dead/cache.db"])
        let report = h.open(h.configuration(encryption: false), expect: "ready")
        XCTAssertEqual(report.resets, [])
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch), "removed by the next open")
        XCTAssertEqual(Quarantine(directory: h.directory, policy: QuarantinePolicy(), now: { Date() }).entries().count, 0)
    }

    // MARK: - Helpers

    private func outboxIndexRootPages(_ h: Harness) throws -> [Int] {
        let raw = try h.rawConnection()
        defer { raw.close() }
        return try raw.sync { db in
            let stmt = try db.prepare("SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'outbox' ORDER BY name")
            var pages: [Int] = []
            while try stmt.step() { pages.append(stmt.int(0)) }
            return pages
        }
    }

    private func localIds(_ cache: VaultCache) throws -> [String] {
        try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT local_id FROM outbox ORDER BY seq")
            var ids: [String] = []
            while try stmt.step() { ids.append(stmt.text(0) ?? "") }
            return ids
        }
    }

    /// Decrypts each page by hand and finds the table leaf (type 13) whose content holds `needle`;
    /// returns its number and how many outbox payloads (`pending `) it holds.
    private func leafPage(_ path: String, key: CacheKey, containing needle: String) -> (Int, Int)? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let pages = Damage.fileSize(path) / 4096
        for number in 2...pages {
            let found = PageCipher.withDecryptedPage(fd, number: number, pageSize: 4096, reserve: 48, key: key) { content -> Int? in
                guard content[0] == 13, occurrences(of: needle, in: content) > 0 else { return nil }
                return occurrences(of: "pending ", in: content)
            }
            if let found, let rows = found { return (number, rows) }
        }
        return nil
    }

    private func occurrences(of text: String, in bytes: [UInt8]) -> Int {
        let needle = Array(text.utf8)
        guard bytes.count >= needle.count else { return 0 }
        var n = 0
        for i in 0...(bytes.count - needle.count) where bytes[i] == needle[0] && Array(bytes[i..<(i + needle.count)]) == needle { n += 1 }
        return n
    }

    /// A cache whose outbox pages come first in the file and many message pages after them.
    private func createOutboxFirst(_ h: Harness, pending: Int, messages: Int) throws {
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try h.seed(cache, messages: 0, pending: pending)
        try cache.writer.sync { db in
            try db.transaction {
                try CacheRows.insert((0..<messages).map { i in
                    CacheRows.Message(serverId: Int64(i + 1), localId: nil, conversationId: "user_bob", senderId: "bob",
                                      receiverId: "alice", receiverType: "user", sentAt: Int64(1_700_000_000 + i), body: "message \(i)")
                }, into: db)
            }
        }
        cache.close()
    }
}
