public import ChatVault
import Foundation

/// Why a backend's Matrix session stopped working. The cache, the outbox and what the app shows
/// are kept either way: calls fail with the session's 401 until `MatrixBackend.resume(with:)`
/// hands over a new session, and the engine keeps unsent messages queued meanwhile.
public enum MatrixSessionEnd: Sendable, Equatable {
    /// The access token expired and could not be renewed (the session has no refresh token). The
    /// device lives on: sign in again on it (`MatrixAccount.login(…, deviceId: session.deviceId)`)
    /// and `resume(with:)`; sends repeated after that stay one event.
    case softLogout
    /// The device was logged out on the homeserver (its token revoked, or its refresh token
    /// refused): sign in again (a new device) and `resume(with:)`.
    case loggedOut
}

extension MatrixBackend {
    /// The code of the 401 answered once the access token expired and cannot be renewed.
    public static let softLogoutCode = "ERR_MATRIX_SOFT_LOGOUT"
    /// The code of the 401 answered once the device was logged out on the homeserver.
    public static let loggedOutCode = "ERR_MATRIX_LOGGED_OUT"

    /// Why the session stopped working; nil while it works.
    public var sessionEnd: MatrixSessionEnd? { state.withLock { $0.ended } }

    /// Takes a new session of the same user after `sessionEnd` (a sign-in again), keeps it in the
    /// session store, and lets calls through again: the engine's next reconnection logs in with it
    /// and sends what waited.
    /// - Throws: 401 `ERR_MATRIX_WRONG_USER` for another user's session (nothing changes).
    public func resume(with session: MatrixSession) throws(BackendError) {
        guard session.userId == me else {
            throw .server(status: 401, code: "ERR_MATRIX_WRONG_USER", message: "the session belongs to another user")
        }
        state.withLock { s in
            s.session = session
            s.ended = nil
            s.unsaved = false
        }
        if let sessions { try? sessions.save(session, homeserver: homeserver) }
    }

    /// The error of an ended session.
    static func error(_ end: MatrixSessionEnd) -> BackendError {
        switch end {
        case .softLogout:
            return .server(status: 401, code: softLogoutCode, message: "the access token expired and cannot be renewed: sign in again on this device")
        case .loggedOut:
            return .server(status: 401, code: loggedOutCode, message: "the device was logged out on the homeserver: sign in again")
        }
    }

    /// Runs `request` with the current access token. An expired one (a soft logout) is renewed
    /// once with the refresh token and the request made again; a session that cannot go on ends
    /// (`sessionEnd`) and every call after it fails at once with its 401, without a request.
    func authorized<T>(_ request: (String) async throws(BackendError) -> T) async throws(BackendError) -> T {
        var renewed = false
        while true {
            let used = try state.withLock { s throws(BackendError) -> String in
                if let end = s.ended { throw Self.error(end) }
                return s.session.accessToken
            }
            do {
                let answer = try await request(used)
                saveIfUnsaved()
                return answer
            } catch .server(401, let code, _) where code == Self.softLogoutCode || code == Self.loggedOutCode {
                if code == Self.softLogoutCode, !renewed, try await renew(replacing: used) {
                    renewed = true
                    continue
                }
                throw end(code == Self.softLogoutCode ? .softLogout : .loggedOut, token: used)
            }
        }
    }

    /// Marks the session ended (unless it was renewed or replaced meanwhile) and answers its error.
    private func end(_ end: MatrixSessionEnd, token: String) -> BackendError {
        state.withLock { s in
            guard s.session.accessToken == token else { return }
            s.ended = s.ended ?? end
        }
        return Self.error(state.withLock { $0.ended } ?? end)
    }

    /// Renews the session whose access token `used` expired: true once a newer token is there (this
    /// renewal's or another's); false when there is no refresh token. One renewal at a time.
    /// - Throws: 401 `loggedOutCode` when the refresh token is refused (the session ends); a
    ///   transient error as it came (nothing changed; the next call tries again).
    private func renew(replacing used: String) async throws(BackendError) -> Bool {
        let homeserver = self.homeserver
        let task = state.withLock { s -> Task<Result<Bool, BackendError>, Never>? in
            if s.session.accessToken != used { return nil }
            if let running = s.renewal { return running }
            guard s.session.refreshToken != nil else { return nil }
            let session = s.session
            let task = Task { [weak self] () -> Result<Bool, BackendError> in
                do throws(BackendError) {
                    let renewed = try await MatrixAccount.refresh(homeserver: homeserver, session: session)
                    self?.adopt(renewed, replacing: session.accessToken)
                    return .success(true)
                } catch {
                    self?.state.withLock { $0.renewal = nil }
                    return .failure(error)
                }
            }
            s.renewal = task
            return task
        }
        guard let task else {
            // Renewed by another call meanwhile, or nothing to renew with.
            return state.withLock { $0.session.accessToken != used }
        }
        switch await task.value {
        case .success(let done): return done
        case .failure(let error):
            if case .server(401, _, _) = error { throw end(.loggedOut, token: used) }
            throw error
        }
    }

    /// Takes a renewed session and keeps it in the store (tried again later if the store cannot now).
    private func adopt(_ renewed: MatrixSession, replacing old: String) {
        state.withLock { s in
            s.renewal = nil
            guard s.session.accessToken == old else { return }
            s.session = renewed
            s.unsaved = true
        }
        saveIfUnsaved()
    }

    private func saveIfUnsaved() {
        guard let sessions, state.withLock({ $0.unsaved }) else { return }
        let session = self.session
        do {
            try sessions.save(session, homeserver: homeserver)
            state.withLock { s in if s.session == session { s.unsaved = false } }
        } catch {
            // A locked keyring: kept in memory; saved after a later request.
        }
    }
}
