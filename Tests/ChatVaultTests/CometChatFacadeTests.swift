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
