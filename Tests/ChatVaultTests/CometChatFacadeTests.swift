import Foundation
import XCTest
@testable import ChatVault

final class CometChatFacadeTests: XCTestCase {
    override func tearDown() {
        CometChat.offlineVault = nil
        super.tearDown()
    }

    func testWithoutAVaultOfflineIsNotActive() {
        CometChat.offlineVault = nil
        XCTAssertFalse(CometChat.isOfflineEnabled())
        XCTAssertEqual(CometChat.getCacheSize(), 0)
        XCTAssertEqual(CometChat.getOfflineEncryptionStatus()["atRest"] as? String, "NONE")
        XCTAssertEqual(CometChat.getOfflineEncryptionStatus().count, 6)
        XCTAssertEqual(CometChat.getOfflineEncryptionStatus()["cipherAvailable"] as? Bool, true, "a property of the build")
    }

    func testTheReferencesAppSettingsEntryPointCarriesTheOfflineConfigToTheVault() async throws {
        // The reference's spelling: the config is attached at init and read back read-only.
        let offline = OfflineConfig.Builder().setEnabled(true).setEncryption(true).setMaxConversations(7).build()
        let appSettings = AppSettings.AppSettingsBuilder().setOfflineConfig(offline).build()
        XCTAssertEqual(appSettings.offlineConfig, offline)
        XCTAssertEqual(appSettings.offlineConfig.maxConversations, 7)
        XCTAssertEqual(AppSettings.AppSettingsBuilder().build().offlineConfig, OfflineConfig(), "nothing attached: the defaults, offline off")
        XCTAssertFalse(AppSettings.AppSettingsBuilder().build().offlineConfig.enabled)

        let h = EngineHarness()
        let vault = try OfflineVault(appSettings: appSettings, settings: h.settings())
        XCTAssertEqual(vault.config, offline, "the vault runs the attached config")
        CometChat.offlineVault = vault
        _ = await vault.login(userId: "alice")
        XCTAssertTrue(CometChat.isOfflineEnabled())
        XCTAssertEqual(CometChat.getOfflineEncryptionStatus()["atRest"] as? String, "SQLCIPHER")
        await vault.logout()

        let off = try OfflineVault(appSettings: AppSettings.AppSettingsBuilder().build(), settings: h.settings())
        _ = await off.login(userId: "bob")
        XCTAssertFalse(off.isOfflineEnabled(), "the default config leaves offline off")
        await off.logout()
    }

    func testTheStaticSpellingForwardsToTheInstalledVault() async throws {
        let h = EngineHarness()
        let vault = try h.vault()
        CometChat.offlineVault = vault
        let listener = RecordingResetListener()
        CometChat.addOfflineCacheResetListener("R", listener)
        let first = await vault.login(userId: "alice")
        XCTAssertTrue(CometChat.isOfflineEnabled())
        XCTAssertEqual(CometChat.getOfflineEncryptionStatus()["atRest"] as? String, "SQLCIPHER")
        XCTAssertGreaterThan(CometChat.getCacheSize(), 0)
        await vault.logout()
        try h.keyStore.delete(.init(applicationId: "org.chatvault.tests", account: h.accountOf("alice"), cacheId: try XCTUnwrap(first.cacheId)))
        _ = await vault.login(userId: "alice")
        XCTAssertEqual(listener.recorded.map(\.reason), [.keyLost], "registered through the facade")
        CometChat.removeOfflineCacheResetListener("R")
        await vault.logout()
        XCTAssertFalse(CometChat.isOfflineEnabled())
    }
}
