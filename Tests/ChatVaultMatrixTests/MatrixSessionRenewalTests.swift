import ChatVault
import ChatVaultMatrix
import ChatVaultTesting
import Foundation
import Synchronization
import VaultKeys
import XCTest

/// Sessions that last, against a Synapse of the test's own whose access tokens expire after two
/// seconds (`refreshable_access_token_lifetime`): an expired token is renewed with the refresh
/// token and the renewed session kept in the Secret Service; a session that cannot be renewed
/// (soft logout) or whose device was logged out (hard) stops sending, says so with a typed 401,
/// keeps the cache and the queued message, and sends it once a new session is handed over.
final class MatrixSessionRenewalTests: XCTestCase {
    static let shortLived = "refreshable_access_token_lifetime: 2s"

    func server() async throws -> LocalHomeserver {
        let server = try PrivateHomeserver.make(extraConfiguration: Self.shortLived)
        try await server.start()
        addTeardownBlock { server.stop() }
        return server
    }

    func expectStatus(_ status: Int, _ code: String? = nil, file: StaticString = #filePath, line: UInt = #line,
                      _ body: () async throws -> Void) async {
        do {
            try await body()
            XCTFail("expected a \(status)", file: file, line: line)
        } catch BackendError.server(let s, let c, _) {
            XCTAssertEqual(s, status, file: file, line: line)
            if let code { XCTAssertEqual(c, code, file: file, line: line) }
        } catch {
            XCTFail("\(error)", file: file, line: line)
        }
    }

    func testAnExpiredAccessTokenIsRenewedKeptAndUsedByTheNextSignIn() async throws {
        let server = try await server()
        let (user, password) = try await TestHomeserver.register("rita", on: server)
        let sessions = MatrixSessionStore(store: SecretServiceKeyStore(), applicationId: "org.chatvault.renewal.\(UUID().uuidString.prefix(8))")
        addTeardownBlock { try? sessions.remove(homeserver: server.url, userId: user) }
        let session = try await MatrixAccount.signIn(homeserver: server.url, user: user, sessions: sessions) { password }
        XCTAssertNotNil(session.refreshToken, "signIn asks for a refresh token")
        XCTAssertFalse(session.description.contains(session.refreshToken ?? "-"), "no token in a description")
        let backend = MatrixBackend(homeserver: server.url, session: session, sessions: sessions)
        _ = try await backend.login(userId: user)

        try await Task.sleep(for: .seconds(3))
        await expectStatus(401) {
            _ = try await RawMatrixClient(session: session, server: server.url).call("GET", "_matrix/client/v3/account/whoami")
        }
        // Expired: calls at once (one renewal between them) all go through.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<5 { group.addTask { _ = try await backend.latestSyncPoint() } }
            try await group.waitForAll()
        }
        let renewed = backend.session
        XCTAssertNil(backend.sessionEnd)
        XCTAssertNotEqual(renewed.accessToken, session.accessToken)
        XCTAssertNotEqual(renewed.refreshToken, session.refreshToken, "Synapse hands a new refresh token")
        XCTAssertEqual(renewed.deviceId, session.deviceId, "the same device")
        XCTAssertEqual(try sessions.load(homeserver: server.url, userId: user), renewed, "kept in the Secret Service")

        // A relaunch after the next expiry: signIn renews the stored session, no password asked.
        try await Task.sleep(for: .seconds(3))
        let again = try await MatrixAccount.signIn(homeserver: server.url, user: user, sessions: sessions) {
            XCTFail("no password while the refresh token works")
            return nil
        }
        XCTAssertNotEqual(again.accessToken, renewed.accessToken)
        XCTAssertEqual(again.deviceId, session.deviceId)
        XCTAssertEqual(try sessions.load(homeserver: server.url, userId: user), again)
    }

    /// One conversation through the engine, its session ended one way or the other.
    func check(_ end: MatrixSessionEnd) async throws {
        let server = try await server()
        let (user, password) = try await TestHomeserver.register("sam", on: server)
        let (bobSession, _) = try await TestHomeserver.session("bob", on: server)
        let bob = RawMatrixClient(session: bobSession, server: server.url)
        var session = try await MatrixAccount.login(homeserver: server.url, user: user, password: password, refreshToken: true)
        // An app that kept only the access token cannot renew it: its expiry is a soft logout.
        if end == .softLogout { session.refreshToken = nil }
        let room = try await bob.createRoom(name: "Team", invite: [user])
        try await RawMatrixClient(session: session, server: server.url).join(room)

        let d = try MatrixRelationTests.Device(session: session, homeserver: server.url)
        addTeardownBlock { await d.vault.logout() }
        _ = await d.vault.login(userId: user)
        try await d.wait("the first sweep") { d.vault.getLastSyncTimestamp() > 0 }
        try await bob.sendText("before", room: room)
        try await d.wait("bob's message in the cache") { try d.rows("group_\(room)") == 1 }

        switch end {
        case .softLogout: try await Task.sleep(for: .seconds(3))
        case .loggedOut: try await MatrixAccount.logout(homeserver: server.url, session: d.backend.matrix.session)
        }
        let pending = Mutex<TextMessage?>(nil)
        let sent = Mutex<TextMessage?>(nil)
        d.vault.sendTextMessage(message: TextMessage(receiverUid: room, text: "while signed out", receiverType: .group),
                                onMessagePending: { m in pending.withLock { $0 = m } }, onMessageSent: { m in sent.withLock { $0 = m } },
                                onError: { _ in })
        try await d.wait("the session's end") { d.backend.matrix.sessionEnd != nil }
        XCTAssertEqual(d.backend.matrix.sessionEnd, end)
        let code = end == .softLogout ? MatrixBackend.softLogoutCode : MatrixBackend.loggedOutCode
        await expectStatus(401, code) { _ = try await d.backend.matrix.latestSyncPoint() }
        try await Task.sleep(for: .milliseconds(500))
        let outbox = try await d.vault.pendingMessages()
        XCTAssertEqual(outbox.count, 1, "queued, not dropped")
        XCTAssertEqual(outbox.first?.messageStatus, .pending, "waiting, not failed")
        XCTAssertNil(sent.withLock { $0 })
        XCTAssertEqual(try d.rows("group_\(room)"), 1, "the cache is kept")

        // Signed in again (the same device after a soft logout, a new one after a hard one): what
        // waited goes out, once.
        let fresh = try await MatrixAccount.login(homeserver: server.url, user: user, password: password,
                                                  deviceId: end == .softLogout ? session.deviceId : nil, refreshToken: true)
        await expectStatus(401, "ERR_MATRIX_WRONG_USER") { try d.backend.matrix.resume(with: bobSession) }
        try d.backend.matrix.resume(with: fresh)
        try await d.wait("the queued message sent", seconds: 30) { sent.withLock { $0 != nil } }
        XCTAssertNil(d.backend.matrix.sessionEnd)
        let history = try await bob.call("GET", "_matrix/client/v3/rooms/\(room)/messages", query: [("dir", "b"), ("limit", "20")])
        let bodies = (history["chunk"]?.arrayValue ?? []).compactMap { $0["content"]?["body"]?.stringValue }
        XCTAssertEqual(bodies.filter { $0 == "while signed out" }.count, 1)
        let left = try await d.vault.pendingMessages()
        XCTAssertTrue(left.isEmpty)
    }

    func testASoftLogoutKeepsTheCacheAndTheQueuedMessageUntilASignInOnTheSameDevice() async throws {
        try await check(.softLogout)
    }

    func testAHardLogoutStopsSendingWithATypedErrorAndLosesNothing() async throws {
        try await check(.loggedOut)
    }
}
