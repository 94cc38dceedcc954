import ChatVault
import ChatVaultMatrix
import Foundation
import Synchronization
import VaultKeys
import XCTest

/// The Matrix session (access token, device id) kept in the key store tier of the cache keys:
/// the real Secret Service (the private gnome-keyring of Scripts/test), reused while its token
/// works, a new login on the same device when it does not, and nothing changed when the store
/// cannot answer.
final class MatrixSessionStoreTests: XCTestCase {
    func testASessionIsKeptInTheSecretServiceAndReusedOnItsDevice() async throws {
        let (user, password) = try await TestHomeserver.register("alice")
        let url = try TestHomeserver.url()
        let keyring = SecretServiceKeyStore()
        let sessions = MatrixSessionStore(store: keyring, applicationId: "org.chatvault.matrixtests.\(UUID().uuidString.prefix(8))")
        addTeardownBlock { try? sessions.remove(homeserver: url, userId: user) }

        let asked = Mutex(0)
        let first = try await MatrixAccount.signIn(homeserver: url, user: user, sessions: sessions) {
            asked.withLock { $0 += 1 }
            return password
        }
        XCTAssertEqual(asked.withLock { $0 }, 1)
        XCTAssertEqual(first.userId, user)

        // The item: found by its documented attributes, no user id among them, the token inside.
        let id = sessions.itemID(homeserver: url, userId: user)
        XCTAssertFalse(id.account.contains("alice"))
        guard case .found(let secret) = keyring.lookupCredential(id) else { return XCTFail("the session is in the Secret Service") }
        XCTAssertTrue(secret.contains(first.accessToken))
        XCTAssertFalse("\(keyring.lookupCredential(id))".contains(first.accessToken), "a lookup's description hides the secret")

        // A relaunch: the stored session works, no password asked.
        let second = try await MatrixAccount.signIn(homeserver: url, user: user, sessions: sessions) {
            XCTFail("no password while the stored token works")
            return nil
        }
        XCTAssertEqual(second, first)

        // The token revoked: a new login, on the same device, stored in place of the old one.
        try await MatrixAccount.logout(homeserver: url, session: first)
        let third = try await MatrixAccount.signIn(homeserver: url, user: user, sessions: sessions) { password }
        XCTAssertNotEqual(third.accessToken, first.accessToken)
        XCTAssertEqual(third.deviceId, first.deviceId, "the device id is kept: transaction ids stay scoped to it")
        XCTAssertEqual(try sessions.load(homeserver: url, userId: user), third)
    }

    func testALockedStoreChangesNothingAndSaysSo() async throws {
        let (user, password) = try await TestHomeserver.register("bob")
        let url = try TestHomeserver.url()
        let memory = MemoryKeyStore()
        let sessions = MatrixSessionStore(store: memory, applicationId: "org.chatvault.matrixtests")
        let session = try await MatrixAccount.signIn(homeserver: url, user: user, sessions: sessions) { password }
        memory.simulate(.locked)
        do {
            _ = try await MatrixAccount.signIn(homeserver: url, user: user, sessions: sessions) { password }
            XCTFail("a locked store must be reported")
        } catch {
            guard case .sessionStore(let e) = error, e.reason == .locked else { return XCTFail("\(error)") }
        }
        memory.simulate(nil)
        XCTAssertEqual(try sessions.load(homeserver: url, userId: user), session, "nothing was changed")
        do {
            _ = try await MatrixAccount.signIn(homeserver: url, user: "@nobody:localhost", sessions: sessions) { nil }
            XCTFail("without a stored session and a password there is nothing to sign in with")
        } catch {
            guard case .passwordNeeded = error else { return XCTFail("\(error)") }
        }
    }
}
