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

    /// A session from its parts (as `MatrixSessionStore.load` rebuilds one).
    public init(userId: String, deviceId: String, accessToken: String) {
        self.userId = userId
        self.deviceId = deviceId
        self.accessToken = accessToken
    }

    /// `MatrixSession(<user id>, device <device id>)`: never the access token.
    public var description: String { "MatrixSession(\(userId), device \(deviceId))" }
}

/// Signing in to a homeserver.
public enum MatrixAccount {
    /// Logs in with a password (`m.login.password`). Pass the device id of an earlier login of
    /// this user on this machine to keep it (its transaction ids, its sends' idempotency).
    /// - Throws: `BackendError`: `.server(403, "M_FORBIDDEN", …)` for a wrong password.
    public static func login(homeserver: URL, user: String, password: String, deviceId: String? = nil,
                             deviceName: String = "ChatVault") async throws(BackendError) -> MatrixSession {
        let http = MatrixHTTP(homeserver: homeserver, requestTimeout: 30, maxResponseBytes: 1 << 20)
        var body: [String: JSONValue] = [
            "type": "m.login.password",
            "identifier": ["type": "m.id.user", "user": .string(user)],
            "password": .string(password),
            "initial_device_display_name": .string(deviceName),
        ]
        if let deviceId { body["device_id"] = .string(deviceId) }
        let answer = try await http.call("POST", "/_matrix/client/v3/login", json: .object(body), token: nil)
        guard let userId = answer.json["user_id"]?.stringValue, !userId.isEmpty,
              let device = answer.json["device_id"]?.stringValue, !device.isEmpty,
              let token = answer.json["access_token"]?.stringValue, !token.isEmpty else {
            throw MatrixHTTP.bad("the login answer lacks user_id, device_id or access_token")
        }
        return MatrixSession(userId: userId, deviceId: device, accessToken: token)
    }

    /// Ends the device's session on the server (the token stops working).
    public static func logout(homeserver: URL, session: MatrixSession) async throws(BackendError) {
        let http = MatrixHTTP(homeserver: homeserver, requestTimeout: 30, maxResponseBytes: 1 << 20)
        _ = try await http.call("POST", "/_matrix/client/v3/logout", json: .object([:]), token: session.accessToken)
    }
}
