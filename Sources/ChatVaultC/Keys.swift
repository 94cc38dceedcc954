import CChatVault
import ChatVault
import Foundation
import VaultKeys
import VaultStore
#if canImport(Glibc)
import Glibc
#endif

// Key management through the C ABI: OfflineVault's key API (OfflineVault+Keys.swift), each report
// as a JSON object of its public fields. A recovery or export secret never becomes a returned
// string: it is written to a descriptor the caller gives and wiped here; one the caller gives back
// is read from a descriptor into a buffer wiped after use.

/// Secrets through descriptors, every buffer of this layer wiped after use.
enum SecretIO {
    /// The most a secret (or a password) read from a descriptor may be.
    static let limit = 64 << 10

    /// Zeroes `count` bytes in a way the optimiser keeps.
    static func wipe(_ pointer: UnsafeMutableRawPointer?, _ count: Int) {
        guard let pointer, count > 0 else { return }
        explicit_bzero(pointer, count)
    }

    /// Zeroes a string's own storage in place, then drops it. Best effort: the copies the Swift
    /// runtime or `RecoverySecret` made on the way are theirs; this clears the one handed here.
    static func wipe(_ text: inout String) {
        text.withUTF8 { bytes in wipe(UnsafeMutableRawPointer(mutating: bytes.baseAddress), bytes.count) }
        text = ""
    }

    /// Why a descriptor cannot be used for a secret, or nil when it can (`writing`: it must be
    /// open for writing, else for reading). Checked before anything changes.
    static func refusal(_ fd: Int32, writing: Bool) -> String? {
        guard fd >= 0 else { return "secret_fd must be an open descriptor (not -1)" }
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0 else { return "secret_fd is not an open descriptor" }
        let mode = flags & O_ACCMODE
        if writing && mode == O_RDONLY { return "secret_fd is not open for writing" }
        if !writing && mode == O_WRONLY { return "secret_fd is not open for reading" }
        return nil
    }

    /// Reads `fd` to its end (at most `limit` bytes, the descriptor left open) into one buffer,
    /// trailing CR/LF dropped, and hands those bytes to `body`; the buffer is wiped afterwards.
    /// nil for a negative descriptor.
    static func withBytes<T>(from fd: Int32, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T? {
        guard fd >= 0 else { return nil }
        // One buffer, never grown: no copy is left behind by a reallocation.
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: limit)
        defer {
            wipe(buffer.baseAddress, buffer.count)
            buffer.deallocate()
        }
        guard let base = buffer.baseAddress else { return nil }
        var count = 0
        while count < limit {
            let n = read(fd, base + count, limit - count)
            if n > 0 { count += n } else if n < 0 && errno == EINTR { continue } else { break }
        }
        while count > 0 && (base[count - 1] == 0x0a || base[count - 1] == 0x0d) { count -= 1 }
        return body(UnsafeBufferPointer(start: base, count: count))
    }

    enum ParseFailure: Error { case malformed, typo }

    /// A recovery or export secret read from `fd` (see `withBytes`), every copy this layer made wiped.
    static func secret(from fd: Int32) -> Result<RecoverySecret, ParseFailure> {
        let parsed = withBytes(from: fd) { bytes -> Result<RecoverySecret, ParseFailure> in
            guard !bytes.isEmpty, bytes.count <= 256, var text = String(validating: bytes, as: UTF8.self) else { return .failure(.malformed) }
            defer { wipe(&text) }
            do throws(RecoverySecretError) {
                return .success(try RecoverySecret(parsing: text))
            } catch .checksumMismatch {
                return .failure(.typo)
            } catch {
                return .failure(.malformed)
            }
        }
        return parsed ?? .failure(.malformed)
    }

    /// Writes the secret as the user writes it down ("ABCD-EFGH-…", nine groups of four) and a
    /// newline to `fd`, then syncs it when `fd` is a regular file. SIGPIPE is held back on this
    /// thread meanwhile (a closed pipe is an error, not the end of the app). The copy is wiped.
    static func write(_ secret: RecoverySecret, to fd: Int32) -> Int32? {
        var text = secret.formatted
        defer { wipe(&text) }
        let count = text.utf8.count + 1
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: count)
        defer {
            wipe(buffer.baseAddress, buffer.count)
            buffer.deallocate()
        }
        _ = buffer.initialize(from: text.utf8)
        buffer[count - 1] = 0x0a
        guard let base = buffer.baseAddress else { return EINVAL }

        var pipeSignal = sigset_t(), previous = sigset_t(), pending = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        sigpending(&pending)
        let alreadyPending = sigismember(&pending, SIGPIPE) == 1
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }

        var written = 0
        var failure: Int32?
        while written < count {
            let n = Glibc.write(fd, base + written, count - written)
            if n > 0 { written += n } else if n < 0 && errno == EINTR { continue } else { failure = n < 0 ? errno : EIO; break }
        }
        if failure == EPIPE && !alreadyPending {
            // Take the SIGPIPE this write raised before the mask is restored.
            var now = timespec(tv_sec: 0, tv_nsec: 0)
            _ = sigtimedwait(&pipeSignal, nil, &now)
        }
        if failure == nil {
            var st = stat()
            if fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && fsync(fd) != 0 { failure = errno }
        }
        return failure
    }
}

/// KeyManagementError for C: a stable code per case (`ERR_KEY_` and the name the CLI's `--json`
/// prints, in capitals), the description as the message (ids and store names, never a key or a secret).
enum CKeyErrors {
    static func code(_ error: KeyManagementError) -> String {
        switch error {
        case .noCache: return "ERR_KEY_NO_CACHE"
        case .notEncrypted: return "ERR_KEY_NOT_ENCRYPTED"
        case .unavailable: return "ERR_KEY_UNAVAILABLE"
        case .unknownStore: return "ERR_KEY_UNKNOWN_STORE"
        case .alreadyInStore: return "ERR_KEY_ALREADY_IN_STORE"
        case .verificationFailed: return "ERR_KEY_VERIFICATION_FAILED"
        case .unfinished: return "ERR_KEY_UNFINISHED"
        case .noSuchEntry: return "ERR_KEY_NO_SUCH_ENTRY"
        case .keyNotPresent: return "ERR_KEY_KEY_NOT_PRESENT"
        case .noRecoverableCache: return "ERR_KEY_NO_RECOVERABLE_CACHE"
        case .wrongSecret: return "ERR_KEY_WRONG_SECRET"
        case .fileUnusable: return "ERR_KEY_FILE_UNUSABLE"
        case .simulatedCrash: return "ERR_KEY_SIMULATED_CRASH"
        }
    }

    static func set(_ out: ErrorOut, _ error: KeyManagementError) {
        CError.set(out, domain: CError.library, code: code(error), message: error.description)
    }

    static func set(_ out: ErrorOut, _ failure: SecretIO.ParseFailure) {
        switch failure {
        case .malformed:
            CError.set(out, domain: CError.library, code: "ERR_KEY_SECRET_MALFORMED",
                       message: "the secret read from secret_fd is not a recovery secret (36 letters and digits, A-Z and 2-7, in groups of four)")
        case .typo:
            CError.set(out, domain: CError.library, code: "ERR_KEY_SECRET_TYPO",
                       message: "the secret read from secret_fd has a typo (its checksum does not match)")
        }
    }

    static func notWritten(_ out: ErrorOut, _ errorNumber: Int32, _ what: String) {
        CError.set(out, domain: CError.library, code: "ERR_KEY_SECRET_NOT_WRITTEN",
                   message: "\(what), but its secret could not be written to secret_fd (\(String(cString: strerror(errorNumber))))")
    }
}

/// The reports as JSON (their public fields; no key, no secret).
enum CKeyModels {
    static func change(_ r: KeyChangeReport) -> JSONValue {
        [
            "cacheId": .string(r.cacheId), "oldKeyId": .string(r.oldKeyId), "newKeyId": .string(r.newKeyId),
            "fromStore": .string(r.fromStore), "toStore": .string(r.toStore), "seconds": .double(r.seconds),
            "databaseBytes": .int(r.databaseBytes), "peakBytes": .int(r.peakBytes), "notes": .array(r.notes.map { .string($0) }),
        ]
    }

    static func recoverySecret(_ r: RecoverySecretReport) -> JSONValue {
        ["cacheId": .string(r.cacheId), "keyId": .string(r.keyId), "kdfSeconds": .double(r.kdfSeconds)]
    }

    static func restore(_ r: CacheRestoreReport) -> JSONValue {
        [
            "restoredEntry": .string(r.restoredEntry), "cacheId": .string(r.cacheId), "messages": .int(Int64(r.messages)),
            "pending": .int(Int64(r.pending)), "mergedPending": .int(Int64(r.mergedPending)),
            "replacedAs": r.replacedAs.map { .string($0) } ?? .null,
        ]
    }

    static func quarantined(_ q: QuarantinedCache) -> JSONValue {
        [
            "id": .string(q.id), "reason": .string(q.reason), "at": .double(q.at.timeIntervalSince1970), "bytes": .int(q.bytes),
            "cacheId": q.cacheId.map { .string($0) } ?? .null, "encrypted": .bool(q.encrypted),
            "keyPresent": q.keyPresent.map { .bool($0) } ?? .null, "restorable": .bool(q.restorable),
            "recoverableWithSecret": .bool(q.recoverableWithSecret), "pendingMessagesLost": .int(Int64(q.pendingMessagesLost)),
            "reported": .bool(q.reported),
        ]
    }

    static func export(_ r: CacheExportReport) -> JSONValue {
        ["cacheId": .string(r.cacheId), "bytes": .int(r.bytes), "files": .int(Int64(r.files))]
    }
}

/// Runs a key change and waits for it on the calling thread (dispatching meanwhile); its result,
/// or nil with `*out` set.
func keyChange<T: Sendable>(_ box: VaultBox, _ out: ErrorOut,
                            _ body: @escaping @Sendable (OfflineVault) async throws(KeyManagementError) -> T) -> T? {
    let engine = box.vault
    let result = waitDispatching(box.dispatcher) { () async -> Result<T, KeyManagementError> in
        do throws(KeyManagementError) { return .success(try await body(engine)) } catch { return .failure(error) }
    }
    switch result {
    case .success(let value): return value
    case .failure(let error): CKeyErrors.set(out, error); return nil
    }
}

@c(cv_vault_rotate_key_sync)
public func cvVaultRotateKeySync(_ vault: OpaquePointer?, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard let report = keyChange(box, out, { vault throws(KeyManagementError) in try await vault.rotateOfflineCacheKey() }) else { return nil }
    return owned(CModels.text(CKeyModels.change(report)))
}

@c(cv_vault_move_key_sync)
public func cvVaultMoveKeySync(_ vault: OpaquePointer?, _ storeName: UnsafePointer<CChar>?, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard let name = text(storeName), !name.isEmpty else { CError.invalid(out, "store_name must be a UTF-8 string"); return nil }
    guard let report = keyChange(box, out, { vault throws(KeyManagementError) in try await vault.moveOfflineCacheKey(toStore: name) }) else {
        return nil
    }
    return owned(CModels.text(CKeyModels.change(report)))
}

@c(cv_vault_create_recovery_secret_sync)
public func cvVaultCreateRecoverySecretSync(_ vault: OpaquePointer?, _ secretFd: Int32, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    // Before the secret exists: a descriptor that cannot take it changes nothing.
    if let refusal = SecretIO.refusal(secretFd, writing: true) { CError.invalid(out, refusal); return nil }
    guard let report = keyChange(box, out, { vault throws(KeyManagementError) in try await vault.createOfflineRecoverySecret() }) else {
        return nil
    }
    if let failure = SecretIO.write(report.secret, to: secretFd) {
        CKeyErrors.notWritten(out, failure, "a recovery secret was made (it replaced any earlier one)")
        return nil
    }
    return owned(CModels.text(CKeyModels.recoverySecret(report)))
}

@c(cv_vault_recover_sync)
public func cvVaultRecoverSync(_ vault: OpaquePointer?, _ secretFd: Int32, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    if let refusal = SecretIO.refusal(secretFd, writing: false) { CError.invalid(out, refusal); return nil }
    // Read now, on the caller's thread; the descriptor stays the caller's.
    let secret: RecoverySecret
    switch SecretIO.secret(from: secretFd) {
    case .success(let s): secret = s
    case .failure(let failure): CKeyErrors.set(out, failure); return nil
    }
    guard let report = keyChange(box, out, { vault throws(KeyManagementError) in try await vault.recoverOfflineCache(secret: secret) }) else {
        return nil
    }
    return owned(CModels.text(CKeyModels.restore(report)))
}

@c(cv_vault_list_quarantined_caches_sync)
public func cvVaultListQuarantinedCachesSync(_ vault: OpaquePointer?, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    let engine = box.vault
    // It asks the key store about each entry (blocking): on another thread, so that this one
    // dispatches meanwhile as every _sync call does (waitDispatching's task starts here).
    let entries = waitDispatching(box.dispatcher) { () async -> [QuarantinedCache] in
        await Task.detached { engine.quarantinedOfflineCaches() }.value
    }
    return owned(CModels.text(.array(entries.map(CKeyModels.quarantined))))
}

@c(cv_vault_restore_quarantined_cache_sync)
public func cvVaultRestoreQuarantinedCacheSync(_ vault: OpaquePointer?, _ entryId: UnsafePointer<CChar>?, _ out: ErrorOut)
    -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard let id = text(entryId), !id.isEmpty else { CError.invalid(out, "entry_id must be a UTF-8 string"); return nil }
    guard let report = keyChange(box, out, { vault throws(KeyManagementError) in try await vault.restoreQuarantinedOfflineCache(id: id) }) else {
        return nil
    }
    return owned(CModels.text(CKeyModels.restore(report)))
}

@c(cv_vault_export_cache_sync)
public func cvVaultExportCacheSync(_ vault: OpaquePointer?, _ path: UnsafePointer<CChar>?, _ secretFd: Int32, _ out: ErrorOut)
    -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard let path = text(path), !path.isEmpty else { CError.invalid(out, "path must be a UTF-8 string"); return nil }
    if let refusal = SecretIO.refusal(secretFd, writing: true) { CError.invalid(out, refusal); return nil }
    guard let report = keyChange(box, out, { vault throws(KeyManagementError) in try await vault.exportOfflineCache(to: path) }) else {
        return nil
    }
    if let failure = SecretIO.write(report.secret, to: secretFd) {
        CKeyErrors.notWritten(out, failure, "the cache was exported (the file cannot be opened without its secret: export again)")
        return nil
    }
    return owned(CModels.text(CKeyModels.export(report)))
}

@c(cv_vault_import_cache_sync)
public func cvVaultImportCacheSync(_ vault: OpaquePointer?, _ path: UnsafePointer<CChar>?, _ secretFd: Int32, _ out: ErrorOut)
    -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard let path = text(path), !path.isEmpty else { CError.invalid(out, "path must be a UTF-8 string"); return nil }
    if let refusal = SecretIO.refusal(secretFd, writing: false) { CError.invalid(out, refusal); return nil }
    let secret: RecoverySecret
    switch SecretIO.secret(from: secretFd) {
    case .success(let s): secret = s
    case .failure(let failure): CKeyErrors.set(out, failure); return nil
    }
    guard let report = keyChange(box, out, { vault throws(KeyManagementError) in
        try await vault.importOfflineCache(from: path, secret: secret)
    }) else { return nil }
    return owned(CModels.text(CKeyModels.restore(report)))
}
