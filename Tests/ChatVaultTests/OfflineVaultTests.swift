import ChatVaultTesting
import Foundation
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

final class OfflineVaultTests: XCTestCase {
    func testLoginOpensAnEncryptedCacheAndTheStatusSaysSo() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        XCTAssertFalse(vault.isOfflineEnabled(), "false before login")
        XCTAssertEqual(vault.offlineEncryptionStatus().atRest, "NONE")
        let attempt = await vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .ready)
        XCTAssertTrue(vault.isOfflineEnabled())
        let status = vault.getOfflineEncryptionStatus()
        XCTAssertEqual(Set(status.keys), ["enabled", "atRest", "keyStorage", "cipherAvailable", "cipher", "leakage"])
        XCTAssertEqual(status["enabled"] as? Bool, true)
        XCTAssertEqual(status["atRest"] as? String, OfflineEncryptionTier.SQLCIPHER)
        XCTAssertEqual(status["keyStorage"] as? String, OfflineEncryptionTier.KEYSTORE)
        XCTAssertEqual(status["cipherAvailable"] as? Bool, true)
        XCTAssertEqual(status["cipher"] as? String, "AES-256-CBC/HMAC-SHA1")
        XCTAssertNotNil(status["leakage"] as? String)
        XCTAssertTrue(JSONSerialization.isValidJSONObject(status))
        await vault.logout()
    }

    func testStatusNeverShowsTheKey() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        let attempt = await vault.login(userId: "alice")
        let cacheId = try XCTUnwrap(attempt.cacheId)
        let account = try XCTUnwrap(vault.cacheDirectory?.path.split(separator: "/").last.map(String.init))
        guard case .found(let key, _) = h.keyStore.lookup(KeyItemID(applicationId: "org.chatvault.tests", account: account, cacheId: cacheId)) else {
            return XCTFail("no key")
        }
        let hex = key.withHexDigits { String(decoding: $0, as: UTF8.self) }
        let rendered = String(describing: vault.getOfflineEncryptionStatus()) + vault.offlineEncryptionStatus().description + "\(attempt)"
        XCTAssertFalse(rendered.contains(hex))
        XCTAssertFalse(rendered.contains(String(hex.prefix(16))))
        await vault.logout()
    }

    func testOfflineOffBehavesAsWithoutOfflineSupport() async throws {
        let h = EngineHarness()
        let vault = try h.vault(enabled: false)
        let attempt = await vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .disabled)
        XCTAssertFalse(vault.isOfflineEnabled())
        XCTAssertEqual(vault.offlineEncryptionStatus().enabled, false)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.root.path), [], "no cache is created")
        XCTAssertEqual(h.keyStore.callCount, 0)
    }

    func testLogoutClosesAndKeepsTheCache() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        let first = await vault.login(userId: "alice")
        try h.seed(vault, messages: 12, pending: 2)
        await vault.logout()
        XCTAssertFalse(vault.isOfflineEnabled())
        XCTAssertEqual(vault.state, .loggedOut)
        XCTAssertEqual(vault.offlineEncryptionStatus().atRest, "NONE")
        let again = await vault.login(userId: "alice")
        XCTAssertEqual(again.cacheId, first.cacheId)
        XCTAssertEqual(again.resets, [])
        XCTAssertEqual(try h.counts(vault).messages, 12)
        await vault.logout()
    }

    func testEachUserHasTheirOwnCacheAndNoUserIdInPaths() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        let alice = await vault.login(userId: "alice@example.org")
        try h.seed(vault, messages: 3, pending: 0)
        let aliceDir = try XCTUnwrap(vault.cacheDirectory?.path)
        let bob = await vault.login(userId: "bob@example.org")
        XCTAssertNotEqual(alice.cacheId, bob.cacheId)
        XCTAssertEqual(try h.counts(vault).messages, 0)
        XCTAssertNotEqual(vault.cacheDirectory?.path, aliceDir)
        for name in try FileManager.default.contentsOfDirectory(atPath: h.root.path) {
            XCTAssertFalse(name.contains("alice") || name.contains("bob"), name)
        }
        await vault.logout()
    }

    func testOddUserIdsWork() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        for user in ["../../etc/passwd", "用户", String(repeating: "x", count: 2000), "a\u{0}b", " "] {
            let attempt = await vault.login(userId: user)
            XCTAssertEqual(attempt.state, .ready, user.prefix(20).description)
            XCTAssertTrue(vault.cacheDirectory?.path.hasPrefix(h.root.path) ?? false)
        }
        let empty = await vault.login(userId: "")
        XCTAssertEqual(empty.state, .loggedOut)
        XCTAssertFalse(vault.isOfflineEnabled())
        await vault.logout()
    }

    func testInvalidApplicationIdIsRejected() {
        let config = OfflineConfig.Builder().setEnabled(true).build()
        for id in ["", "../x", "a/b", "white space", "..hidden"] {
            XCTAssertThrowsError(try OfflineVault(config: config, settings: VaultSettings(applicationId: id)), id)
        }
    }

    func testResetListenerFiresOnceBeforeTheCacheServes() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        let listener = RecordingResetListener()
        listener.vault.withLock { $0 = vault }
        vault.addOfflineCacheResetListener("R", listener)   // before login
        let first = await vault.login(userId: "alice")
        try h.seed(vault, messages: 4, pending: 2)
        await vault.logout()
        let account = try XCTUnwrap(vault.cacheDirectory?.path.split(separator: "/").last.map(String.init) ?? h.accountOf("alice"))
        try h.keyStore.delete(KeyItemID(applicationId: "org.chatvault.tests", account: account, cacheId: try XCTUnwrap(first.cacheId)))
        let second = await vault.login(userId: "alice")
        XCTAssertEqual(second.resets.map(\.reason), [.keyLost])
        XCTAssertEqual(listener.recorded, [.init(reason: .keyLost, pendingMessagesLost: -1, offlineEnabledDuringCallback: false)])
        XCTAssertTrue(vault.isOfflineEnabled(), "serving after the listener ran")
        await vault.logout()
        _ = await vault.login(userId: "alice")
        XCTAssertEqual(listener.recorded.count, 1, "once per reset")
        await vault.logout()
    }

    func testListenersAreWeakAndOnePerId() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        let kept = RecordingResetListener()
        let replaced = RecordingResetListener()
        var released: RecordingResetListener? = RecordingResetListener()
        weak let weakReleased = released
        vault.addOfflineCacheResetListener("same", replaced)
        vault.addOfflineCacheResetListener("same", kept)
        vault.addOfflineCacheResetListener("gone", released!)
        let removed = RecordingResetListener()
        vault.addOfflineCacheResetListener("removed", removed)
        vault.removeOfflineCacheResetListener("removed")
        released = nil
        XCTAssertNil(weakReleased, "the vault does not keep a listener alive")
        let first = await vault.login(userId: "alice")
        await vault.logout()
        try h.keyStore.delete(KeyItemID(applicationId: "org.chatvault.tests", account: h.accountOf("alice"), cacheId: try XCTUnwrap(first.cacheId)))
        _ = await vault.login(userId: "alice")
        XCTAssertEqual(kept.recorded.map(\.reason), [.keyLost])
        XCTAssertEqual(replaced.recorded, [])
        XCTAssertEqual(removed.recorded, [])
        await vault.logout()
    }

    func testLockedKeyringIsRetriedAndRecoversWithoutAReset() async throws {
        let h = EngineHarness()
        let vault = try h.vault(retry: RetryPolicy(initialDelay: .milliseconds(50), maximumDelay: .milliseconds(200)))
        let listener = RecordingResetListener()
        vault.addOfflineCacheResetListener("R", listener)
        _ = await vault.login(userId: "alice")
        try h.seed(vault, messages: 7, pending: 3)
        await vault.logout()
        h.keyStore.simulate(.locked)
        let attempt = await vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .unavailable(.keyStore(.locked)))
        XCTAssertFalse(vault.isOfflineEnabled())
        let calls = h.keyStore.callCount
        h.eventually { h.keyStore.callCount > calls + 1 }   // retried in the background
        XCTAssertFalse(vault.isOfflineEnabled())
        h.keyStore.simulate(nil)
        h.eventually { vault.isOfflineEnabled() }
        XCTAssertEqual(try h.counts(vault).pending, 3)
        XCTAssertEqual(listener.recorded, [], "a locked keyring never resets")
        await vault.logout()
    }

    func testRetryOpenOnDemand() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        _ = await vault.login(userId: "alice")
        await vault.logout()
        h.keyStore.simulate(.promptTimedOut)
        let locked = await vault.login(userId: "alice").state
        XCTAssertEqual(locked, .unavailable(.keyStore(.promptTimedOut)))
        let stillLocked = await vault.retryOpen().state
        XCTAssertEqual(stillLocked, .unavailable(.keyStore(.promptTimedOut)))
        h.keyStore.simulate(nil)
        let unlocked = await vault.retryOpen().state
        XCTAssertEqual(unlocked, .ready)
        await vault.logout()
    }

    func testOnlineOnlyWhenEncryptionCannotRun() async throws {
        let h = EngineHarness()
        h.keyStore.simulate(.noProvider)
        let vault = try h.vault(behavior: .onlineOnly)
        let attempt = await vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .onlineOnly(.noKeyStore(["memory": .noProvider])))
        XCTAssertFalse(vault.isOfflineEnabled())
        let status = vault.offlineEncryptionStatus()
        XCTAssertTrue(status.enabled)
        XCTAssertEqual(status.atRest, "NONE")
        XCTAssertTrue(status.cipherAvailable)
        XCTAssertNil(status.cipher)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: h.root.path), [], "nothing written")
    }

    func testPlaintextFallbackIsOfflineButHonest() async throws {
        let h = EngineHarness()
        h.keyStore.simulate(.noBus)
        let vault = try h.vault(behavior: .plaintextFallback)
        let attempt = await vault.login(userId: "alice")
        guard case .plaintextFallback = attempt.state else { return XCTFail("\(attempt.state)") }
        XCTAssertTrue(vault.isOfflineEnabled())
        let status = vault.offlineEncryptionStatus()
        XCTAssertTrue(status.enabled, "configured")
        XCTAssertEqual(status.atRest, "NONE", "achieved")
        XCTAssertEqual(status.keyStorage, "NONE")
        XCTAssertNil(status.cipher)
        XCTAssertEqual(status.leakage, OfflineEncryptionStatus.plaintextLeakage)
        await vault.logout()
    }

    func testCacheSizeAndClear() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        _ = await vault.login(userId: "alice")
        try h.seed(vault, messages: 2000, pending: 3)
        let before = vault.getCacheSize()
        XCTAssertGreaterThan(before, 100_000)
        try await vault.clearOfflineCacheAndWait()
        XCTAssertEqual(try h.counts(vault), CacheRows.Counts(conversations: 0, messages: 0, pending: 0))
        XCTAssertLessThan(vault.getCacheSize(), before)
        XCTAssertTrue(vault.isOfflineEnabled(), "the emptied cache stays open")
        await vault.logout()
        do {
            try await vault.clearOfflineCacheAndWait()
            XCTFail("nothing to clear while logged out")
        } catch {
            XCTAssertEqual(error.errorCode, CometChatConstants.Errors.ERROR_OFFLINE_DISABLED)
        }
    }

    func testASecondInstanceCannotOpenTheSameCache() async throws {
        let h = EngineHarness()
        let first = try h.vault()
        let second = try h.vault()
        _ = await first.login(userId: "alice")
        let attempt = await second.login(userId: "alice")
        guard case .unavailable(.cacheInUse) = attempt.state else { return XCTFail("\(attempt.state)") }
        XCTAssertTrue(first.isOfflineEnabled())
        await first.logout()
        let afterRelease = await second.retryOpen().state
        XCTAssertEqual(afterRelease, .ready)
        await second.logout()
    }

    func testBackgroundIntegrityFailureResetsAsCorrupted() async throws {
        let h = EngineHarness()
        let vault = try h.vault(integrityLimit: 0)
        let listener = RecordingResetListener()
        vault.addOfflineCacheResetListener("R", listener)
        _ = await vault.login(userId: "alice")
        try h.seed(vault, messages: 3000, pending: 2)
        let database = try XCTUnwrap(vault.cacheDirectory?.database)
        await vault.logout()
        // Damage a page in the middle of the file.
        var st = stat()
        stat(database, &st)
        let fd = open(database, O_WRONLY)
        var garbage = [UInt8](repeating: 0xA5, count: 256)
        _ = pwrite(fd, &garbage, 256, off_t((Int(st.st_size) / 4096 / 2) * 4096 + 512))
        close(fd)
        let attempt = await vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .ready, "the large-cache open skips the full check")
        h.eventually { listener.recorded.map(\.reason) == [.corrupted] }
        h.eventually { vault.isOfflineEnabled() }
        XCTAssertEqual(listener.recorded.first?.pendingMessagesLost, 0, "the outbox was salvaged")
        XCTAssertEqual(try h.counts(vault).pending, 2)
        await vault.logout()
    }
}

extension EngineHarness {
    func accountOf(_ userId: String) -> String {
        CacheDirectory.account(applicationId: "org.chatvault.tests", userId: userId)
    }
}

final class KeyStorageSettingsTests: XCTestCase {
    func testTheSoftwareTierIsReportedAsSuch() async throws {
        let h = EngineHarness()
        let keys = TemporaryDirectory()
        let vault = try h.vault(stores: [.software(directory: "\(keys.path)/keys")])
        let attempt = await vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .ready)
        let status = vault.getOfflineEncryptionStatus()
        XCTAssertEqual(status["keyStorage"] as? String, OfflineEncryptionTier.SOFTWARE)
        XCTAssertEqual(status["atRest"] as? String, OfflineEncryptionTier.SQLCIPHER)
        // Which of the two texts depends on this machine's runtime directory (MediaCacheTests pins both).
        XCTAssertTrue([OfflineEncryptionStatus.encryptedLeakage, OfflineEncryptionStatus.encryptedLeakageWithoutViews]
            .contains(status["leakage"] as? String ?? ""))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: "\(keys.path)/keys").filter { $0.hasSuffix(".key") }.count, 1)
        await vault.logout()
    }

    func testAKeyDirectoryInsideTheCacheIsRefused() {
        let root = TemporaryDirectory()
        let config = OfflineConfig.Builder().setEnabled(true).setEncryption(true).build()
        for keys in ["\(root.path)/cache", "\(root.path)/cache/user/keys", "\(root.path)/cache/./keys", root.path] {
            let settings = VaultSettings(applicationId: "org.chatvault.tests", rootDirectory: "\(root.path)/cache",
                                         keyStorage: [.software(directory: keys)])
            XCTAssertThrowsError(try OfflineVault(config: config, settings: settings), keys) { error in
                XCTAssertEqual(error as? VaultSetupError, .keyDirectoryInsideCache)
            }
        }
        let outside = VaultSettings(applicationId: "org.chatvault.tests", rootDirectory: "\(root.path)/cache",
                                    keyStorage: [.software(directory: "\(root.path)/cache-keys")])
        XCTAssertNoThrow(try OfflineVault(config: config, settings: outside))
    }
}
