import ChatVaultTesting
import Foundation
import VaultKeys
@testable import VaultStore
import XCTest

/// Export and import on real files: a cache moves to "another machine" (another root, another key
/// store) with its messages, unsent messages, media files and recovery file; a wrong secret, a
/// damaged or hostile file, or an existing target changes nothing.
final class TransferTests: XCTestCase {
    private func seeded(_ h: Harness, messages: Int, pending: Int) throws -> String {
        let cache = try XCTUnwrap(h.open(h.configuration(), expect: "ready").cache)
        try h.seed(cache, messages: messages, pending: pending)
        defer { cache.close() }
        return cache.cacheId
    }

    func testACacheMovesToAnotherMachineWithItsHistoryUnsentMessagesAndMedia() throws {
        let old = Harness()
        let cacheId = try seeded(old, messages: 60, pending: 4)
        try SecureFiles.ensureDirectory(old.directory.media)
        let media = Array(repeating: UInt8(0xab), count: 70_000)
        try SecureFiles.writeAtomically(old.directory.media + "/ab12cd", data: media)
        _ = try KeyManager.createRecoverySecret(old.configuration())
        let out = TemporaryDirectory()
        let file = out.path + "/cache.cvx"
        let exported = try CacheTransfer.export(old.configuration(), to: file)
        XCTAssertEqual(exported.cacheId, cacheId)
        XCTAssertEqual(exported.files, 3, "database, recovery file, one media file")
        var st = stat()
        XCTAssertEqual(lstat(file, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertEqual(filesContaining("MARKER-7f3a", under: out.path), [], "the export holds no plaintext")
        XCTAssertThrowsError(try CacheTransfer.export(old.configuration(), to: file)) { error in
            guard case .fileUnusable = error as? KeyManagementError else { return XCTFail("\(error)") }
        }

        // The new machine: another root, another store, a first login already made a cache there.
        let new = Harness()
        let freshId = try seeded(new, messages: 2, pending: 0)
        let report = try CacheTransfer.importCache(new.configuration(), from: file, secret: exported.secret)
        XCTAssertEqual(report.cacheId, cacheId)
        XCTAssertEqual(report.messages, 60)
        XCTAssertEqual(report.pending, 4)
        let opened = new.open(new.configuration(), expect: "ready")
        let cache = try XCTUnwrap(opened.cache)
        XCTAssertEqual(cache.cacheId, cacheId)
        XCTAssertEqual(try new.counts(cache).pending, 4)
        XCTAssertEqual(opened.resets, [])
        cache.close()
        XCTAssertEqual(FileManager.default.contents(atPath: new.directory.media + "/ab12cd").map(Array.init), media)
        XCTAssertTrue(FileManager.default.fileExists(atPath: new.directory.recovery))
        XCTAssertEqual(KeyManager.quarantined(new.configuration()).compactMap(\.cacheId), [freshId], "the first cache was set aside")
        guard case .found = new.keyStore.lookup(KeyItemID(applicationId: new.applicationId, account: new.account, cacheId: cacheId)) else {
            return XCTFail("the key is not in the new machine's store")
        }
    }

    func testAWrongSecretOrADamagedFileChangesNothing() throws {
        let old = Harness()
        _ = try seeded(old, messages: 10, pending: 1)
        let out = TemporaryDirectory()
        let file = out.path + "/cache.cvx"
        let exported = try CacheTransfer.export(old.configuration(), to: file)
        let new = Harness()
        let freshId = try seeded(new, messages: 1, pending: 1)
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: file))

        XCTAssertThrowsError(try CacheTransfer.importCache(new.configuration(), from: file, secret: try RecoverySecret.generate())) {
            XCTAssertEqual($0 as? KeyManagementError, .wrongSecret)
        }
        func attempt(_ data: Data, _ label: String) {
            let path = out.path + "/damaged.cvx"
            unlink(path)
            _ = FileManager.default.createFile(atPath: path, contents: data)
            XCTAssertThrowsError(try CacheTransfer.importCache(new.configuration(), from: path, secret: exported.secret), label) { error in
                guard let error = error as? KeyManagementError else { return XCTFail("\(label): \(error)") }
                switch error {
                case .fileUnusable, .wrongSecret, .verificationFailed: break
                default: XCTFail("\(label): \(error)")
                }
            }
        }
        attempt(Data("not an export".utf8), "garbage")
        attempt(bytes.prefix(bytes.count / 2), "truncated")
        // A header naming a path outside the cache.
        let text = String(decoding: bytes, as: UTF8.self)
        if let range = text.range(of: #""name":"cache.db""#) {
            var hostile = text
            hostile.replaceSubrange(range, with: #""name":"../../x.db""#)
            attempt(Data(hostile.utf8), "path traversal")
        }
        // Names that could leave the entry directory are refused before anything is written.
        for name in ["../x.db", "media/../../x", "/etc/passwd", "media/", "media//a", "media/a\\b", "manifest.json", "cache.db-wal", "media/\u{0}"] {
            XCTAssertFalse(CacheTransfer.isSafeName(name), name)
        }
        for name in ["cache.db", "recovery.json", "media/ab12cd", "media/v/ab12.part"] {
            XCTAssertTrue(CacheTransfer.isSafeName(name), name)
        }
        // Random damage anywhere must never crash, and never be taken.
        var random = XorShift(state: 0x7a45)
        for round in 0..<24 {
            var mutated = Array(bytes)
            for _ in 0..<(1 + Int(random.next() % 8)) {
                let at = Int(random.next() % UInt64(min(mutated.count, 4096)))
                mutated[at] ^= UInt8(truncatingIfNeeded: random.next() | 1)
            }
            let path = out.path + "/fuzz.cvx"
            unlink(path)
            _ = FileManager.default.createFile(atPath: path, contents: Data(mutated))
            if let report = try? CacheTransfer.importCache(new.configuration(), from: path, secret: exported.secret) {
                // Damage in a part nothing checks (the header's spacing) may still import correctly.
                XCTAssertEqual(report.messages, 10, "round \(round)")
                return
            }
        }
        let cache = try XCTUnwrap(new.open(new.configuration(), expect: "ready").cache)
        XCTAssertEqual(cache.cacheId, freshId, "nothing replaced the current cache")
        XCTAssertEqual(try new.counts(cache).pending, 1)
        cache.close()
        XCTAssertTrue(KeyManager.quarantined(new.configuration()).isEmpty, "no half-imported entry stays: \(KeyManager.quarantined(new.configuration()))")
    }
}

/// A seeded xorshift64 generator (the damage is the same on every run).
struct XorShift {
    var state: UInt64

    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
