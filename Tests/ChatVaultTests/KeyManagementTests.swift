import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore
import XCTest
@testable import ChatVault

/// Key management through the engine's public API, with the real Secret Service (the test script's
/// private keyring) and a real key-file store: the cache is closed, changed and reopened, and the
/// status follows.
final class KeyManagementTests: XCTestCase {
    func testRotationAndMovesThroughTheEngineWithTheRealSecretService() async throws {
        let h = EngineHarness()
        let keys = TemporaryDirectory()
        let stores: [KeyStorageOption] = [.secretService(), .software(directory: keys.path + "/keys")]
        let vault = try h.vault(stores: stores)
        let user = "keys-\(UUID().uuidString.prefix(8))"
        guard case .ready = await vault.login(userId: user).state else { return XCTFail("\(vault.state)") }
        try h.seed(vault, messages: 30, pending: 2)
        let cache = try XCTUnwrap(vault.openCache)
        let (cacheId, directory) = (cache.cacheId, cache.directory)
        let item = KeyItemID(applicationId: "org.chatvault.tests", account: directory.account, cacheId: cacheId)
        let secretService = SecretServiceKeyStore()
        let file = SoftwareKeyStore(directory: keys.path + "/keys")
        defer { try? secretService.delete(item) }
        XCTAssertEqual(vault.getOfflineEncryptionStatus()["keyStorage"] as? String, "KEYSTORE")
        guard case .found(let first, _) = secretService.lookup(item) else { return XCTFail("no key in the Secret Service") }

        let rotated = try await vault.rotateOfflineCacheKey()
        XCTAssertEqual(vault.state, .ready)
        XCTAssertEqual(try h.counts(vault).messages, 30)
        XCTAssertEqual(try h.counts(vault).pending, 2)
        XCTAssertEqual(vault.openCache?.manifest.keyId, rotated.newKeyId)
        guard case .found(let second, let keyId) = secretService.lookup(item) else { return XCTFail("no key after the rotation") }
        XCTAssertEqual(keyId, rotated.newKeyId)
        XCTAssertFalse(first.isEqual(to: second), "a new key")
        guard case .absent = secretService.lookup(KeyItemID(applicationId: item.applicationId, account: item.account, cacheId: cacheId + "-next")) else {
            return XCTFail("the staging item stayed")
        }

        let moved = try await vault.moveOfflineCacheKey(toStore: "file")
        XCTAssertEqual([moved.fromStore, moved.toStore], ["secret-service", "file"])
        XCTAssertEqual(vault.getOfflineEncryptionStatus()["keyStorage"] as? String, "SOFTWARE", "the status follows the key")
        guard case .absent = secretService.lookup(item) else { return XCTFail("the Secret Service copy stayed") }
        guard case .found = file.lookup(item) else { return XCTFail("no key file") }
        XCTAssertEqual(try h.counts(vault).messages, 30)

        // A later login finds it there; and back again.
        await vault.logout()
        guard case .ready = await vault.login(userId: user).state else { return XCTFail("\(vault.state)") }
        XCTAssertEqual(vault.getOfflineEncryptionStatus()["keyStorage"] as? String, "SOFTWARE")
        _ = try await vault.moveOfflineCacheKey(toStore: "secret-service")
        XCTAssertEqual(vault.getOfflineEncryptionStatus()["keyStorage"] as? String, "KEYSTORE")
        guard case .absent = file.lookup(item) else { return XCTFail("the key file stayed") }
        do {
            _ = try await vault.moveOfflineCacheKey(toStore: "nowhere")
            XCTFail("an unknown store")
        } catch {
            XCTAssertEqual(error, .unknownStore("nowhere"))
        }
        XCTAssertEqual(vault.state, .ready, "a refused change leaves the cache serving")
        await vault.logout()
        do {
            _ = try await vault.rotateOfflineCacheKey()
            XCTFail("nobody is logged in")
        } catch {
            XCTAssertEqual(error, .noCache)
        }
    }

    func testALockedKeyringDuringARotationChangesNothing() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        guard case .ready = await vault.login(userId: "locked").state else { return XCTFail("\(vault.state)") }
        try h.seed(vault, messages: 5, pending: 1)
        let before = vault.openCache?.manifest
        h.keyStore.simulate(.locked)
        do {
            _ = try await vault.rotateOfflineCacheKey()
            XCTFail("rotated with a locked keyring")
        } catch {
            XCTAssertEqual(error, .unavailable(.keyStore(.locked)))
        }
        // The reopen waits for the keyring like any open; nothing was changed meanwhile.
        XCTAssertEqual(vault.state, .unavailable(.keyStore(.locked)))
        h.keyStore.simulate(nil)
        let again = await vault.retryOpen()
        XCTAssertEqual(again.state, .ready)
        XCTAssertEqual(vault.openCache?.manifest.keyId, before?.keyId)
        XCTAssertEqual(try h.counts(vault).pending, 1)
        await vault.logout()
    }

    func testRecoveryAndRestoreThroughTheEngine() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        guard case .ready = await vault.login(userId: "rory").state else { return XCTFail("\(vault.state)") }
        try h.seed(vault, messages: 12, pending: 2)
        let cache = try XCTUnwrap(vault.openCache)
        let item = KeyItemID(applicationId: "org.chatvault.tests", account: cache.directory.account, cacheId: cache.cacheId)
        let cacheId = cache.cacheId
        let made = try await vault.createOfflineRecoverySecret()
        XCTAssertEqual(made.cacheId, cacheId)
        XCTAssertEqual(vault.state, .ready, "the cache serves again after the secret is made")
        guard case .found(let key, let keyId) = h.keyStore.lookup(item) else { return XCTFail("no key") }

        // The key is lost: the next login resets, and the old cache waits in quarantine.
        await vault.logout()
        try h.keyStore.delete(item)
        let reset = await vault.login(userId: "rory")
        XCTAssertEqual(reset.resets.map(\.reason), [.keyLost])
        XCTAssertEqual(reset.restorableCaches, [])
        let listed = vault.quarantinedOfflineCaches()
        XCTAssertEqual(listed.count, 1)
        XCTAssertEqual(listed.first?.recoverableWithSecret, true)

        do {
            _ = try await vault.recoverOfflineCache(secret: try RecoverySecret.generate())
            XCTFail("a wrong secret was accepted")
        } catch let error as KeyManagementError {
            XCTAssertEqual(error, .wrongSecret)
        }
        let recovered = try await vault.recover(secret: made.secret)
        XCTAssertEqual(recovered.cacheId, cacheId)
        XCTAssertEqual(vault.state, .ready)
        XCTAssertEqual(vault.openCache?.cacheId, cacheId)
        XCTAssertEqual(try h.counts(vault).messages, 12)
        XCTAssertEqual(try h.counts(vault).pending, 2)

        // Lost again, then the keyring comes back from a backup: the login says so.
        await vault.logout()
        try h.keyStore.delete(item)
        _ = await vault.login(userId: "rory")
        await vault.logout()
        try h.keyStore.store(key, keyId: keyId, for: item, label: "from a backup")
        let back = await vault.login(userId: "rory")
        let entry = try XCTUnwrap(back.restorableCaches.first, "\(back.notes)")
        let restored = try await vault.restoreQuarantinedOfflineCache(id: entry)
        XCTAssertEqual(restored.cacheId, cacheId)
        XCTAssertEqual(vault.openCache?.cacheId, cacheId)
        XCTAssertEqual(try h.counts(vault).messages, 12)
        await vault.logout()
    }
}
