import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import XCTest
@testable import ChatVault
import VaultStore

/// What a reset of a damaged cache carries into the new one, through the engine (ThreatModel C19).
final class ResetSalvageTests: XCTestCase {
    func testUploadBatchesAndTheirCopiesSurviveACorruptedReset() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let files = SourceFiles()
        let originals = [files.make("a.png", bytes: 1500, seed: 51), files.make("b.pdf", bytes: 2500, seed: 52)]
        let request = h.uploadRequest(originals)
        let failed = try await request.upload()
        XCTAssertEqual(failed.map(\.state), [.failed, .failed])
        let batchId = try XCTUnwrap(request.batchId)
        let pending = h.send(h.text("still unsent"))
        await waitUntil { pending.pendingCount > 0 }
        try fillWithReceivedMessages(try XCTUnwrap(h.vault.openCache))
        let directory = try h.cacheDirectoryPath()
        let copies = failed.compactMap(\.localCopyPath)
        XCTAssertEqual(copies.count, 2)

        h.client.network = .offline
        await h.vault.logout()
        Damage.middlePage(directory + "/cache.db")
        try await h.restart(network: .offline)
        let quarantined = try FileManager.default.contentsOfDirectory(atPath: directory + "/quarantine").filter { !$0.hasPrefix(".") }
        XCTAssertEqual(quarantined.count, 1, "the damaged cache was reset")

        let restored = try XCTUnwrap(h.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0),
                                     "the batch (a kv row) was salvaged with the outbox")
        XCTAssertEqual(restored.batchId, batchId)
        XCTAssertEqual(restored.getItems().map(\.fileId), failed.map(\.fileId))
        XCTAssertEqual(restored.getItems().map(\.localCopyPath), copies)
        try await Task.sleep(for: .milliseconds(300))
        for (copy, original) in zip(copies, originals) {
            XCTAssertEqual(FileManager.default.contents(atPath: copy), FileManager.default.contents(atPath: original.path),
                           "the copy under outgoing/upload-<id>/ survives with its batch")
        }
        XCTAssertEqual(try h.outgoingMediaRows().map(\.owner), ["upload-\(batchId)", "upload-\(batchId)"], "still counted in the budget")
        XCTAssertEqual(try h.rows().count, 1, "the unsent text too")
    }

    func testWaitForIntegrityCheckReportsADamagedLargeCacheOnceItIsReset() async throws {
        let h = EngineHarness()
        let vault = try h.vault(integrityLimit: 0)
        let listener = RecordingResetListener()
        vault.addOfflineCacheResetListener("R", listener)
        _ = await vault.login(userId: "alice")
        try h.seed(vault, messages: 3000, pending: 2)
        let created = await vault.waitForIntegrityCheck(timeout: .seconds(60))
        XCTAssertEqual(created.result, .notNeeded, "a new cache has nothing to check")
        await vault.logout()
        _ = await vault.login(userId: "alice")
        let intact = await vault.waitForIntegrityCheck(timeout: .seconds(60))
        XCTAssertEqual(intact.result, .intact)
        let database = try XCTUnwrap(vault.cacheDirectory?.database)
        await vault.logout()
        Damage.middlePage(database)
        let attempt = await vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .ready, "the large-cache open skips the full check")
        let check = await vault.waitForIntegrityCheck(timeout: .seconds(60))
        XCTAssertEqual(check.result, .damaged, "waited for the background check, not a plain ready")
        XCTAssertEqual(check.reopen?.resets.map(\.reason), [.corrupted])
        XCTAssertEqual(listener.recorded.map(\.reason), [.corrupted], "the listener was told before the wait ended")
        XCTAssertTrue(vault.isOfflineEnabled())
        XCTAssertEqual(try h.counts(vault).pending, 2)
        await vault.logout()
    }
}
