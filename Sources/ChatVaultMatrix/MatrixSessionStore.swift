public import ChatVault
import CCrypto
public import Foundation
public import VaultKeys

/// Keeps a user's Matrix session (access token and device id) in the key store tier that keeps
/// cache keys: a Secret Service item with its own attributes (`xdg:schema`
/// `org.chatvault.Credential`, `application`, `account` = a hash of homeserver and user, `kind`
/// `matrix-session`), never a plaintext file.
///
///     let sessions = MatrixSessionStore(applicationId: "org.example.Chat")   // the Secret Service
///     let session = try await MatrixAccount.signIn(homeserver: url, user: "@alice:example.org",
///                                                  sessions: sessions) { readPassword() }
public struct MatrixSessionStore: Sendable {
    /// The `kind` attribute of a session's item.
    public static let kind = "matrix-session"
    /// Where the sessions are kept (the Secret Service by default).
    public let store: any CredentialStore
    /// The application id the items are filed under (their `application` attribute).
    public let applicationId: String

    /// A store of the app's Matrix sessions in `store` (the Secret Service unless given).
    public init(store: any CredentialStore = SecretServiceKeyStore(), applicationId: String) {
        self.store = store
        self.applicationId = applicationId
    }

    /// The item of one user on one homeserver; its `account` is the first 32 hex digits of
    /// SHA-256 over `chatvault-matrix|<homeserver>|<user id>`: no user id in the keyring's attributes.
    public func itemID(homeserver: URL, userId: String) -> CredentialItemID {
        let text = Array("chatvault-matrix|\(homeserver.absoluteString)|\(userId)".utf8)
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        _ = SHA256(text, text.count, &digest)
        let account = digest.prefix(16).map { String(format: "%02x", $0) }.joined()
        return CredentialItemID(applicationId: applicationId, account: account, kind: Self.kind)
    }

    /// Stores the session (user id, device id, access token, refresh token) as one item, replacing
    /// the user's previous one on that homeserver.
    /// - Throws: the key store's `KeyStoreError` when it cannot store now (locked, no bus).
    public func save(_ session: MatrixSession, homeserver: URL) throws(KeyStoreError) {
        var secret: JSONValue = ["userId": .string(session.userId), "deviceId": .string(session.deviceId),
                                 "accessToken": .string(session.accessToken)]
        if let refresh = session.refreshToken, case .object(var fields) = secret {
            fields["refreshToken"] = .string(refresh)
            secret = .object(fields)
        }
        try store.storeCredential(String(decoding: secret.jsonData(), as: UTF8.self), for: itemID(homeserver: homeserver, userId: session.userId),
                                  label: "ChatVault Matrix session (\(homeserver.host ?? "homeserver"))")
    }

    /// The stored session; nil when there is none (or it is not one of ours); the store's reason
    /// when it cannot answer now (a locked keyring: try later, nothing is lost).
    public func load(homeserver: URL, userId: String) throws(KeyStoreError) -> MatrixSession? {
        switch store.lookupCredential(itemID(homeserver: homeserver, userId: userId)) {
        case .absent: return nil
        case .unavailable(let reason): throw KeyStoreError(reason, "the Matrix session cannot be read now")
        case .found(let text):
            guard let json = try? JSONValue(jsonData: Data(text.utf8)),
                  json["userId"]?.stringValue == userId,
                  let device = json["deviceId"]?.stringValue, !device.isEmpty,
                  let token = json["accessToken"]?.stringValue, !token.isEmpty else { return nil }
            let refresh = json["refreshToken"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
            return MatrixSession(userId: userId, deviceId: device, accessToken: token, refreshToken: refresh)
        }
    }

    /// Deletes the stored session of the user on that homeserver.
    /// - Throws: the key store's `KeyStoreError` when it cannot delete now.
    public func remove(homeserver: URL, userId: String) throws(KeyStoreError) {
        try store.deleteCredential(itemID(homeserver: homeserver, userId: userId))
    }
}

extension MatrixAccount {
    /// Why `signIn` could not give a session.
    public enum SignInError: Error, Sendable, CustomStringConvertible {
        /// The key store cannot answer now (locked, no bus): nothing was changed; try later.
        case sessionStore(KeyStoreError)
        /// The homeserver refused or could not be reached.
        case server(BackendError)
        /// No stored session works and no password was given.
        case passwordNeeded

        /// The reason in one sentence: the store's or the homeserver's error, or that a password is
        /// needed (never the password or a token).
        public var description: String {
            switch self {
            case .sessionStore(let e): return "the Matrix session store: \(e)"
            case .server(let e): return "the homeserver: \(e)"
            case .passwordNeeded: return "no stored Matrix session works; a password is needed"
            }
        }
    }

    /// The stored session when its token still works (checked with `whoami`), or renewed with its
    /// refresh token when it expired (and stored again); otherwise a password login that keeps the
    /// stored device id (so sends repeated after a restart stay one event) and stores the new
    /// session, with a refresh token unless `refreshToken` is false (hand `sessions` to the
    /// `MatrixBackend` too, so the tokens it renews are kept). `user` is the full id
    /// (`@alice:example.org`). `password` is asked for only when needed.
    public static func signIn(homeserver: URL, user: String, sessions: MatrixSessionStore, refreshToken: Bool = true,
                              password: @Sendable () -> String?) async throws(SignInError) -> MatrixSession {
        let stored: MatrixSession?
        do { stored = try sessions.load(homeserver: homeserver, userId: user) } catch { throw .sessionStore(error) }
        if let stored {
            let http = MatrixHTTP(homeserver: homeserver, requestTimeout: 30, maxResponseBytes: 1 << 20)
            do {
                let whoami = try await http.call("GET", "/_matrix/client/v3/account/whoami", token: stored.accessToken)
                if whoami.json["user_id"]?.stringValue == user { return stored }
            } catch .server(401, MatrixBackend.softLogoutCode, _) where stored.refreshToken != nil {
                // Expired: renewed with the refresh token (a refused one: log in again below).
                if let renewed = try await renew(stored, homeserver: homeserver, sessions: sessions) { return renewed }
            } catch .server(401, _, _) {
                // The token was revoked or expired: log in again below, on the same device.
            } catch {
                throw .server(error)
            }
        }
        guard let secret = password() else { throw .passwordNeeded }
        let session: MatrixSession
        do {
            session = try await login(homeserver: homeserver, user: user, password: secret, deviceId: stored?.deviceId,
                                      refreshToken: refreshToken)
        } catch {
            throw .server(error)
        }
        do { try sessions.save(session, homeserver: homeserver) } catch { throw .sessionStore(error) }
        return session
    }

    /// An expired stored session renewed with its refresh token and stored again; nil when the
    /// homeserver refused the refresh token. A store that cannot save now fails the sign-in and
    /// changes nothing: the old refresh token keeps working until the new access token is used.
    private static func renew(_ stored: MatrixSession, homeserver: URL, sessions: MatrixSessionStore) async throws(SignInError) -> MatrixSession? {
        let renewed: MatrixSession
        do {
            renewed = try await refresh(homeserver: homeserver, session: stored)
        } catch .server(401, _, _) {
            return nil
        } catch {
            throw .server(error)
        }
        do { try sessions.save(renewed, homeserver: homeserver) } catch { throw .sessionStore(error) }
        return renewed
    }
}
