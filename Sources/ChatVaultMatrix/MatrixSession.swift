public import ChatVault
public import Foundation

/// A signed-in Matrix device: who, which device, and its access token.
///
/// The access token is a secret: keep it where the cache key is kept (the Secret Service), never
/// in a plaintext file or a log. `description` leaves it out. The device id is not secret: reuse
/// it for every login of the user on this machine, because the homeserver scopes transaction ids
/// to the device: a send repeated after a restart returns the same event only on the same device.
public struct MatrixSession: Sendable, Equatable, CustomStringConvertible {
    /// `@user:server`.
    public var userId: String
    /// The device the homeserver gave at the first login; not secret: reuse it for every login of
    /// the user on this machine.
    public var deviceId: String
    /// The access token: a secret (keep it in `MatrixSessionStore`, never in a file or a log).
    public var accessToken: String
    /// The refresh token, when the homeserver gave one (a login that asked for it): a secret too.
    /// The access token then expires and the backend renews both with it (`MatrixBackend`), so a
    /// session lasts until the device is logged out.
    public var refreshToken: String?

    /// A session from its parts (as `MatrixSessionStore.load` rebuilds one).
    public init(userId: String, deviceId: String, accessToken: String, refreshToken: String? = nil) {
        self.userId = userId
        self.deviceId = deviceId
        self.accessToken = accessToken
        self.refreshToken = refreshToken
    }

    /// `MatrixSession(<user id>, device <device id>)`: never a token.
    public var description: String { "MatrixSession(\(userId), device \(deviceId))" }
}

/// Signing in to a homeserver.
public enum MatrixAccount {
    /// Logs in with a password (`m.login.password`). Pass the device id of an earlier login of
    /// this user on this machine to keep it (its transaction ids, its sends' idempotency). With
    /// `refreshToken`, asks for a refresh token too: the access token then expires (Synapse: after
    /// `refreshable_access_token_lifetime`) and `MatrixBackend` renews it; keep the session where
    /// the renewed one is kept (`MatrixSessionStore`, handed to the backend).
    /// - Throws: `BackendError`: `.server(403, "M_FORBIDDEN", …)` for a wrong password.
    public static func login(homeserver: URL, user: String, password: String, deviceId: String? = nil,
                             deviceName: String = "ChatVault", refreshToken: Bool = false) async throws(BackendError) -> MatrixSession {
        let http = MatrixHTTP(homeserver: homeserver, requestTimeout: 30, maxResponseBytes: 1 << 20)
        var body: [String: JSONValue] = [
            "type": "m.login.password",
            "identifier": ["type": "m.id.user", "user": .string(user)],
            "password": .string(password),
            "initial_device_display_name": .string(deviceName),
        ]
        if let deviceId { body["device_id"] = .string(deviceId) }
        if refreshToken { body["refresh_token"] = true }
        let answer = try await http.call("POST", "/_matrix/client/v3/login", json: .object(body), token: nil)
        guard let userId = answer.json["user_id"]?.stringValue, !userId.isEmpty,
              let device = answer.json["device_id"]?.stringValue, !device.isEmpty,
              let token = answer.json["access_token"]?.stringValue, !token.isEmpty else {
            throw MatrixHTTP.bad("the login answer lacks user_id, device_id or access_token")
        }
        return MatrixSession(userId: userId, deviceId: device, accessToken: token,
                             refreshToken: answer.json["refresh_token"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 })
    }

    /// Renews a session's tokens with its refresh token (`POST /refresh`): the homeserver answers a
    /// new access token and, as Synapse does, a new refresh token (the old one stops working once
    /// the new access token is used). Same user, same device.
    /// - Throws: 401 `MatrixBackend.loggedOutCode` when the session has no refresh token or the
    ///   homeserver refuses it (the device was logged out: sign in again); `.unreachable`, a
    ///   transient 5xx or 429 otherwise (try again later: nothing changed).
    public static func refresh(homeserver: URL, session: MatrixSession) async throws(BackendError) -> MatrixSession {
        guard let refreshToken = session.refreshToken else {
            throw .server(status: 401, code: MatrixBackend.loggedOutCode, message: "the session has no refresh token")
        }
        let http = MatrixHTTP(homeserver: homeserver, requestTimeout: 30, maxResponseBytes: 1 << 20)
        let answer: MatrixHTTP.Answer
        do {
            answer = try await http.call("POST", "/_matrix/client/v3/refresh", json: ["refresh_token": .string(refreshToken)], token: nil)
        } catch .server(let status, let code, _) where status == 401 || status == 403 {
            throw .server(status: 401, code: MatrixBackend.loggedOutCode, message: "the homeserver refused the refresh token (\(code))")
        }
        guard let token = answer.json["access_token"]?.stringValue, !token.isEmpty else {
            throw MatrixHTTP.bad("the refresh answer lacks access_token")
        }
        var renewed = session
        renewed.accessToken = token
        if let next = answer.json["refresh_token"]?.stringValue, !next.isEmpty { renewed.refreshToken = next }
        return renewed
    }

    /// Ends the device's session on the server (the token stops working).
    public static func logout(homeserver: URL, session: MatrixSession) async throws(BackendError) {
        let http = MatrixHTTP(homeserver: homeserver, requestTimeout: 30, maxResponseBytes: 1 << 20)
        _ = try await http.call("POST", "/_matrix/client/v3/logout", json: .object([:]), token: session.accessToken)
    }
}
