import ChatVaultTesting
import Foundation
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// The engine with its default key storage, the real Secret Service (the gnome-keyring `Scripts/test`
/// starts): the path an app takes.
final class SecretServiceVaultTests: XCTestCase {
    let app = "org.chatvault.enginetests"

    override func setUpWithError() throws {
        try TestKeyring.require()
    }

    override func tearDownWithError() throws {
        if try SecretServiceKeyStore().isDefaultCollectionLocked() == true { try TestKeyring.unlockDefaultCollection() }
        try SecretServiceKeyStore().deleteAll(applicationId: app)
    }

    private func vault(_ root: TemporaryDirectory, retry: RetryPolicy = .manualOnly) throws -> OfflineVault {
        let config = OfflineConfig.Builder().setEnabled(true).setEncryption(true).build()
        return try OfflineVault(config: config, settings: VaultSettings(applicationId: app, applicationName: "Engine Tests",
                                                                        rootDirectory: root.path,
                                                                        callbackExecutor: .queue(DispatchQueue(label: "t")), retry: retry))
    }

    func testTheDefaultStoreIsTheSecretServiceAndTheItemIsFindable() async throws {
        let root = TemporaryDirectory()
        let vault = try vault(root)
        let attempt = await vault.login(userId: "alice")
        XCTAssertEqual(attempt.state, .ready)
        XCTAssertEqual(vault.offlineEncryptionStatus().keyStorage, "KEYSTORE")
        XCTAssertEqual(vault.offlineEncryptionStatus().atRest, "SQLCIPHER")
        let account = CacheDirectory.account(applicationId: app, userId: "alice")
        guard case .found = SecretServiceKeyStore().lookup(KeyItemID(applicationId: app, account: account, cacheId: try XCTUnwrap(attempt.cacheId))) else {
            return XCTFail("the key item is not in the Secret Service")
        }
        // What a person sees with the desktop's own tool: the documented label and attributes, no key.
        let search = try Subprocess.run([try XCTUnwrap(Subprocess.which("secret-tool")), "search", "--all",
                                         "xdg:schema", "org.chatvault.CacheKey", "application", app],
                                        environment: ProcessInfo.processInfo.environment)
        let listing = String(decoding: search.stdout + search.stderr, as: UTF8.self)
        XCTAssertTrue(listing.contains("label = Engine Tests offline cache key (alice)"), listing)
        XCTAssertTrue(listing.contains("attribute.account = \(account)"), listing)
        XCTAssertEqual(vault.cacheDirectory?.path.split(separator: "/").last.map(String.init), account)
        await vault.logout()
    }

    func testALockedKeyringMakesTheCacheWaitAndNeverResets() async throws {
        let root = TemporaryDirectory()
        // The first background retry comes after the headless unlock has finished: a lookup while
        // gnome-keyring-daemon --replace swaps daemons would D-Bus-activate a third, locked one
        // (a quirk of the test's unlock method, not of a desktop keyring).
        let vault = try vault(root, retry: RetryPolicy(initialDelay: .seconds(3), maximumDelay: .seconds(3)))
        let listener = RecordingResetListener()
        vault.addOfflineCacheResetListener("R", listener)
        let first = await vault.login(userId: "bob")
        let cache = try XCTUnwrap(vault.openCache)
        try cache.writer.sync { db in
            try CacheRows.insert([CacheRows.OutboxEntry(localId: "l1", seq: 1, conversationId: "c", kind: "text", state: 0,
                                                        createdAt: 1, payload: [1])], into: db)
        }
        await vault.logout()

        try TestKeyring.lockDefaultCollection()
        let locked = await vault.login(userId: "bob")
        XCTAssertEqual(locked.state, .unavailable(.keyStore(.locked)))
        XCTAssertFalse(vault.isOfflineEnabled())
        try TestKeyring.unlockDefaultCollection()
        // The background retry picks the unlock up by itself.
        let deadline = Date().addingTimeInterval(20)
        while !vault.isOfflineEnabled() && Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        XCTAssertTrue(vault.isOfflineEnabled())
        XCTAssertEqual(vault.openCache?.cacheId, first.cacheId)
        XCTAssertEqual(try vault.openCache?.reader.sync { db in try CacheRows.counts(db) }.pending, 1)
        XCTAssertEqual(listener.recorded, [])
        await vault.logout()
    }
}
