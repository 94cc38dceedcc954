import Foundation
import Synchronization

/// Names one stored credential (a server session's token): whose, for which app, of which kind.
/// `account` is an opaque per-user identifier (a hash), never a user id, as for cache keys.
public struct CredentialItemID: Sendable, Hashable, CustomStringConvertible {
    public var applicationId: String
    public var account: String
    /// What the secret is, e.g. `matrix-session`.
    public var kind: String

    public init(applicationId: String, account: String, kind: String) {
        self.applicationId = applicationId
        self.account = account
        self.kind = kind
    }

    public var description: String { "credential item (application \(applicationId), kind \(kind))" }
}

/// The answer of a credential lookup. Its description never contains the secret.
public enum CredentialLookup: Sendable, CustomStringConvertible {
    case found(String)
    /// Definitely not there (the store answered; nothing that would hold it is locked).
    case absent
    /// The store could not answer now (locked, no bus…): transient.
    case unavailable(KeyUnavailableReason)

    public var description: String {
        switch self {
        case .found: return "found"
        case .absent: return "absent"
        case .unavailable(let reason): return "unavailable (\(reason.rawValue))"
        }
    }
}

/// A place that keeps small secrets beside the cache keys (a server session's access token), in
/// the same tier. `SecretServiceKeyStore` and `MemoryKeyStore` are credential stores; the
/// software key store is not: a credential is never written to a plaintext file.
public protocol CredentialStore: Sendable {
    /// Stores (or replaces) the secret (UTF-8 text, at most 64 KiB).
    func storeCredential(_ secret: String, for id: CredentialItemID, label: String) throws(KeyStoreError)
    func lookupCredential(_ id: CredentialItemID) -> CredentialLookup
    /// Deleting a missing item succeeds.
    func deleteCredential(_ id: CredentialItemID) throws(KeyStoreError)
}

extension SecretServiceKeyStore: CredentialStore {
    /// The `xdg:schema` of credential items. Attributes: `application`, `account` (opaque hash),
    /// `kind`; the secret is the caller's text (content type `text/plain`). Find them with
    /// `secret-tool search --all xdg:schema org.chatvault.Credential application <app id>`.
    package static let credentialSchemaName = "org.chatvault.Credential"

    static func credentialQuery(_ id: CredentialItemID) -> [String: String] {
        [Attribute.schema: credentialSchemaName, Attribute.application: id.applicationId,
         Attribute.account: id.account, "kind": id.kind]
    }

    static func isValid(_ id: CredentialItemID) -> Bool {
        isValidText(id.applicationId) && KeyItemNames.isSafeComponent(id.account) && KeyItemNames.isSafeComponent(id.kind)
    }

    public func storeCredential(_ secret: String, for id: CredentialItemID, label: String) throws(KeyStoreError) {
        guard Self.isValid(id) else { throw KeyStoreError(.other, "unsafe characters in a credential item name") }
        guard !secret.isEmpty, secret.utf8.count <= 64 << 10, Self.isValidText(label, limit: 1024) else {
            throw KeyStoreError(.other, "the credential is empty or too long, or the label is unusable")
        }
        let query = Self.credentialQuery(id)
        let prompt = unlockPrompt
        let outcome = run("storing a credential") { calls, context throws(SecretCallError) -> KeyStoreError? in
            var bytes = Array(secret.utf8)
            defer { for i in bytes.indices { bytes[i] = 0 } }
            return try Self.replaceItem(query, prompt: prompt, calls, context) { (collection) throws(SecretCallError) -> String in
                try bytes.withUnsafeBytes { raw in
                    Result { () throws(SecretCallError) -> String in
                        try calls.createItem(inCollection: collection, label: label, attributes: query, secret: raw,
                                             contentType: Self.contentType, context)
                    }
                }.get()
            }
        }
        try Self.settle(outcome)
    }

    public func lookupCredential(_ id: CredentialItemID) -> CredentialLookup {
        guard Self.isValid(id) else { return .unavailable(.other) }
        let query = Self.credentialQuery(id)
        let prompt = unlockPrompt
        let outcome = run("looking up a credential") { calls, context throws(SecretCallError) -> CredentialLookup in
            switch try Self.lookupItem(query, calls, context, prompt: prompt, parse: { bytes in
                String(validating: bytes.bindMemory(to: UInt8.self), as: UTF8.self)
            }) {
            case .found(let secret, _): return .found(secret)
            case .absent: return .absent
            case .unreadable: return .unavailable(.other)
            case .unavailable(let reason): return .unavailable(reason)
            }
        }
        switch outcome {
        case .success(let lookup): return lookup
        case .failure(let error): return .unavailable(error.reason)
        }
    }

    public func deleteCredential(_ id: CredentialItemID) throws(KeyStoreError) {
        guard Self.isValid(id) else { return }
        try deleteAllMatching(Self.credentialQuery(id), "deleting a credential")
    }
}

extension MemoryKeyStore: CredentialStore {
    public func storeCredential(_ secret: String, for id: CredentialItemID, label: String) throws(KeyStoreError) {
        if let failure = failure() { throw KeyStoreError(failure, "memory store simulates \(failure.rawValue)") }
        credentials.withLock { $0[id] = secret }
    }

    public func lookupCredential(_ id: CredentialItemID) -> CredentialLookup {
        if let failure = failure() { return .unavailable(failure) }
        return credentials.withLock { $0[id] }.map { .found($0) } ?? .absent
    }

    public func deleteCredential(_ id: CredentialItemID) throws(KeyStoreError) {
        if let failure = failure() { throw KeyStoreError(failure, "memory store simulates \(failure.rawValue)") }
        credentials.withLock { $0[id] = nil }
    }
}
