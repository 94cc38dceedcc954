import ChatVaultTesting
import Foundation
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// The audit journal as the library keeps it: inside the encrypted cache when one opens, beside it
/// while none can, and never anything of the messages or the user.
final class AuditJournalTests: XCTestCase {
    func testAResetIsJournalledWithItsDeliveryInsideTheEncryptedCache() async throws {
        let h = EngineHarness()
        let first = try h.vault()
        await first.login(userId: "alice")
        try h.seed(first, messages: 20, pending: 2)
        let cacheId = try XCTUnwrap(first.openCache?.cacheId)
        await first.logout()
        let item = KeyItemID(applicationId: "org.chatvault.tests", account: CacheDirectory.account(applicationId: "org.chatvault.tests", userId: "alice"), cacheId: cacheId)
        try h.keyStore.delete(item)

        let vault = try h.vault()
        let listener = RecordingResetListener()
        vault.addOfflineCacheResetListener("BANNER", listener)
        await vault.login(userId: "alice")
        XCTAssertEqual(listener.recorded.map(\.reason), [.keyLost])
        let journal = vault.offlineAuditJournal()
        let reset = try XCTUnwrap(journal.first { $0.kind == .reset })
        XCTAssertEqual(reset.reason, "keyLost")
        XCTAssertEqual(reset.pendingMessagesLost, -1)
        let delivered = try XCTUnwrap(journal.first { $0.kind == .delivered })
        XCTAssertEqual(delivered.listeners, ["BANNER"])
        XCTAssertEqual(delivered.released, [])
        XCTAssertEqual(delivered.executor, "queue tests.callbacks")
        XCTAssertEqual(delivered.onMainThread, false)
        XCTAssertEqual(delivered.readsServedBefore, 0)
        XCTAssertEqual(delivered.cacheId, reset.cacheId, "the delivery names the quarantine entry of its reset")
        XCTAssertNotNil(delivered.millisecondsAfterOpen)
        // Inside the database: nothing beside it once a cache serves, and the words are not in
        // any file in the clear.
        let directory = try XCTUnwrap(vault.cacheDirectory)
        h.eventually { vault.offlineAuditJournal().contains { $0.kind == .opened && $0.outcome == "ready" } }
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(directory.path)/\(AuditJournal.fileName)"))
        for file in directory.databaseFiles {
            let bytes = FileManager.default.contents(atPath: file) ?? Data()
            XCTAssertNil(bytes.range(of: Data("keyLost".utf8)), "\(file) holds the journal in the clear")
            XCTAssertNil(bytes.range(of: Data("BANNER".utf8)), "\(file) holds the journal in the clear")
        }
        // A read after the delivery is counted for the next reset, not this one.
        _ = await MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: "bob").set(limit: 5).build().fetchPrevious()
        await vault.logout()
        // It survives a relaunch and a clear.
        let again = try h.vault()
        await again.login(userId: "alice")
        try await again.clearOfflineCacheAndWait()
        let kept = again.offlineAuditJournal()
        XCTAssertEqual(kept.filter { $0.kind == .delivered }.count, 1, "announced once, kept once")
        XCTAssertTrue(kept.contains { $0.kind == .cleared })
        await again.logout()
    }

    func testAReleasedListenerIsNamedAndNoneIsCalled() async throws {
        let h = EngineHarness()
        let first = try h.vault()
        await first.login(userId: "alice")
        let cacheId = try XCTUnwrap(first.openCache?.cacheId)
        let account = CacheDirectory.account(applicationId: "org.chatvault.tests", userId: "alice")
        await first.logout()
        try h.keyStore.delete(KeyItemID(applicationId: "org.chatvault.tests", account: account, cacheId: cacheId))

        let vault = try h.vault()
        do {
            let dropped = RecordingResetListener()
            vault.addOfflineCacheResetListener("GONE", dropped)
        }
        await vault.login(userId: "alice")
        let delivered = try XCTUnwrap(vault.offlineAuditJournal().first { $0.kind == .delivered })
        XCTAssertEqual(delivered.listeners, [])
        XCTAssertEqual(delivered.released, ["GONE"])
        await vault.logout()
    }

    func testARefusalIsKeptBesideTheCacheAndMovesInWhenItOpens() async throws {
        let h = EngineHarness()
        let first = try h.vault()
        await first.login(userId: "alice@example.org")
        let directory = try XCTUnwrap(first.cacheDirectory)
        await first.logout()
        h.keyStore.simulate(.locked)
        let locked = try h.vault()
        await locked.login(userId: "alice@example.org")
        XCTAssertEqual(locked.state, .unavailable(.keyStore(.locked)))
        let beside = "\(directory.path)/\(AuditJournal.fileName)"
        var st = stat()
        XCTAssertEqual(stat(beside, &st), 0, "the refusal is written beside the cache")
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        let text = String(decoding: FileManager.default.contents(atPath: beside) ?? Data(), as: UTF8.self)
        XCTAssertTrue(text.contains("\"refused\"") && text.contains("\"locked\""), text)
        XCTAssertFalse(text.contains("alice"), "no user id beside the cache")
        XCTAssertEqual(locked.offlineAuditJournal().last?.kind, .refused)
        await locked.logout()

        h.keyStore.simulate(nil)
        let unlocked = try h.vault()
        await unlocked.login(userId: "alice@example.org")
        XCTAssertEqual(unlocked.state, .ready)
        XCTAssertEqual(unlocked.offlineAuditJournal().filter { $0.kind == .refused }.map(\.reason), ["locked"])
        await unlocked.logout()
        XCTAssertFalse(FileManager.default.fileExists(atPath: beside), "moved into the database when the cache closed")
        let later = try h.vault()
        await later.login(userId: "alice@example.org")
        let journal = later.offlineAuditJournal()
        XCTAssertEqual(journal.filter { $0.kind == .refused }.map(\.reason), ["locked"], "inside the database, once")
        XCTAssertEqual(journal.filter { $0.kind == .opened }.count, 3, "the first open, the unlocked one and this one")
        XCTAssertFalse(journal.contains { $0.kind == .reset }, "a locked keyring is not a reset")
        await later.logout()
    }

    func testOnlineOnlyWithoutACacheWritesNothing() async throws {
        let h = EngineHarness()
        h.keyStore.simulate(.noProvider)
        let vault = try h.vault(behavior: .onlineOnly)
        await vault.login(userId: "alice")
        XCTAssertEqual(vault.state.code, "onlineOnly")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.root.path), [])
        XCTAssertEqual(vault.offlineAuditJournal(), [])
        await vault.logout()
    }

    func testTheDatabaseJournalIsBounded() throws {
        let dir = TemporaryDirectory()
        var options = ConnectionOptions()
        options.create = true
        let queue = try DatabaseQueue(path: dir.path + "/j.db", keying: .plaintext, options: options, label: "j")
        defer { queue.close() }
        try queue.sync { db in
            try db.execute("CREATE TABLE kv (key TEXT PRIMARY KEY NOT NULL, value BLOB)")
            for i in 0..<(AuditJournal.databaseLimit + 30) {
                try AuditJournal.append([AuditEntry(kind: .refused, reason: "r\(i)")], in: db)
            }
            let all = try AuditJournal.entries(in: db)
            XCTAssertEqual(all.count, AuditJournal.databaseLimit)
            XCTAssertEqual(all.first?.reason, "r30", "the oldest went first")
            XCTAssertEqual(all.last?.reason, "r\(AuditJournal.databaseLimit + 29)")
        }
    }
}
