import CChatVault
import ChatVault
import ChatVaultMatrix
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A password read to the end of a descriptor the caller gave (never a C string), its bytes wiped
/// once it has been copied into the string the sign-in needs (`SecretIO.withBytes`, Keys.swift).
func password(from fd: Int32) -> String? {
    SecretIO.withBytes(from: fd) { bytes in bytes.isEmpty ? nil : String(validating: bytes, as: UTF8.self) } ?? nil
}

@c(cv_vault_new_matrix_sync)
public func cvVaultNewMatrixSync(_ settingsJSON: UnsafePointer<CChar>?, _ homeserver: UnsafePointer<CChar>?, _ userId: UnsafePointer<CChar>?,
                                 _ passwordFd: Int32, _ out: ErrorOut) -> OpaquePointer? {
    guard let json = text(settingsJSON) else { CError.invalid(out, "the settings must be a UTF-8 JSON string"); return nil }
    guard let server = text(homeserver).flatMap(URL.init(string:)), server.scheme == "https" || server.scheme == "http" else {
        CError.invalid(out, "homeserver must be an http(s) URL")
        return nil
    }
    guard let user = text(userId), user.hasPrefix("@"), user.contains(":") else { CError.invalid(out, "user_id must be a Matrix user id (@user:server)"); return nil }
    guard let (dispatcher, config, settings) = VaultSetup.prepare(json, out) else { return nil }
    // Read now, on the caller's thread; the descriptor stays the caller's.
    let secret = password(from: passwordFd)
    let sessions = MatrixSessionStore(applicationId: settings.applicationId)
    let signedIn = waitDispatching(dispatcher) { () async -> Result<MatrixSession, MatrixAccount.SignInError> in
        do throws(MatrixAccount.SignInError) {
            return .success(try await MatrixAccount.signIn(homeserver: server, user: user, sessions: sessions, password: { secret }))
        } catch {
            return .failure(error)
        }
    }
    let session: MatrixSession
    switch signedIn {
    case .success(let s): session = s
    case .failure(let error):
        dispatcher.close()
        switch error {
        case .passwordNeeded: CError.set(out, domain: CError.library, code: "ERR_MATRIX_PASSWORD_NEEDED", message: error.description)
        case .sessionStore: CError.set(out, domain: CError.library, code: "ERR_MATRIX_SESSION_STORE", message: error.description)
        case .server(let e):
            let code: String
            switch e {
            case .unreachable, .timedOut: code = CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE
            case .server(_, let c, _): code = c
            }
            CError.set(out, domain: CError.library, code: code, message: error.description)
        }
        return nil
    }
    // The store signIn used, so the tokens the backend renews are the ones the next start finds.
    return VaultSetup.finish(dispatcher, config, settings, backend: MatrixBackend(homeserver: server, session: session, sessions: sessions), out)
}
