public import CChatVault
import ChatVault
import ChatVaultSimulator
import Foundation
import Synchronization
import VaultStore

/// A simulated server and the devices (clients) of its users.
final class SimulatorBox: Sendable {
    let simulator: ChatVaultSimulator
    private let clients = Mutex<[String: SimulatedClient]>([:])

    init(seed: UInt64) { simulator = ChatVaultSimulator(seed: seed) }

    /// The one device of `uid` (the same one for every vault of that user).
    func client(for uid: String) -> SimulatedClient {
        clients.withLock { c in
            if let known = c[uid] { return known }
            let made = simulator.client(for: uid)
            c[uid] = made
            return made
        }
    }
}

let simulators = HandleTable<SimulatorBox>(tag: 0x5b)

/// Runs a change of the simulated server: true, or false with ERR_SIMULATOR and the reason.
func simulated(_ out: ErrorOut, _ change: () throws -> Void) -> Bool {
    do {
        try change()
        return true
    } catch {
        CError.set(out, domain: CError.library, code: "ERR_SIMULATOR", message: String(describing: error))
        return false
    }
}

@c(cv_simulator_new)
public func cvSimulatorNew(_ seed: UInt64) -> OpaquePointer? {
    simulators.insert(SimulatorBox(seed: seed))
}

@c(cv_simulator_free)
public func cvSimulatorFree(_ simulator: OpaquePointer?) {
    _ = simulators.remove(simulator)
}

@c(cv_simulator_add_user)
public func cvSimulatorAddUser(_ simulator: OpaquePointer?, _ uid: UnsafePointer<CChar>?, _ name: UnsafePointer<CChar>?,
                               _ out: ErrorOut) -> Bool {
    guard let box = simulators.get(simulator) else { CError.invalid(out, "not a simulator handle"); return false }
    guard let uid = text(uid), !uid.isEmpty, let name = text(name) else { CError.invalid(out, "uid and name must be UTF-8 strings"); return false }
    return simulated(out) {
        try box.simulator.addUser(SimulatedUser(uid: uid, name: name))
    }
}

@c(cv_simulator_post_text)
public func cvSimulatorPostText(_ simulator: OpaquePointer?, _ from: UnsafePointer<CChar>?, _ receiverType: cv_receiver_type,
                                _ receiver: UnsafePointer<CChar>?, _ body: UnsafePointer<CChar>?,
                                _ idOut: UnsafeMutablePointer<Int64>?, _ out: ErrorOut) -> Bool {
    postText(simulator, from, receiverType, receiver, body, parentId: nil, idOut, out)
}

/// A text (a reply in `parentId`'s thread when given) posted as the server's truth.
func postText(_ simulator: OpaquePointer?, _ from: UnsafePointer<CChar>?, _ receiverType: cv_receiver_type, _ receiver: UnsafePointer<CChar>?,
              _ body: UnsafePointer<CChar>?, parentId: Int?, _ idOut: UnsafeMutablePointer<Int64>?, _ out: ErrorOut) -> Bool {
    guard let box = simulators.get(simulator) else { CError.invalid(out, "not a simulator handle"); return false }
    guard let from = text(from), let receiver = text(receiver), let body = text(body) else {
        CError.invalid(out, "sender, receiver and text must be UTF-8 strings")
        return false
    }
    guard let scope = CEnums.scope(receiverType, receiver) else { CError.invalid(out, "receiver_type is not a cv_receiver_type"); return false }
    return simulated(out) {
        let id = try box.simulator.postText(body, from: from, to: scope, parentId: parentId)
        idOut?.pointee = Int64(id)
    }
}

@c(cv_simulator_set_online)
public func cvSimulatorSetOnline(_ simulator: OpaquePointer?, _ uid: UnsafePointer<CChar>?, _ online: Bool, _ out: ErrorOut) -> Bool {
    guard let box = simulators.get(simulator) else { CError.invalid(out, "not a simulator handle"); return false }
    guard let uid = text(uid), !uid.isEmpty else { CError.invalid(out, "uid must be a UTF-8 string"); return false }
    box.client(for: uid).network = online ? .online : .offline
    return true
}

@c(cv_simulator_post_media)
public func cvSimulatorPostMedia(_ simulator: OpaquePointer?, _ from: UnsafePointer<CChar>?, _ receiverType: cv_receiver_type,
                                 _ receiver: UnsafePointer<CChar>?, _ mediaType: cv_media_type, _ filePath: UnsafePointer<CChar>?,
                                 _ mimeType: UnsafePointer<CChar>?, _ caption: UnsafePointer<CChar>?, _ idOut: UnsafeMutablePointer<Int64>?,
                                 _ urlOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ out: ErrorOut) -> Bool {
    urlOut?.pointee = nil
    guard let box = simulators.get(simulator) else { CError.invalid(out, "not a simulator handle"); return false }
    guard let from = text(from), let receiver = text(receiver), let path = text(filePath), !path.isEmpty else {
        CError.invalid(out, "sender, receiver and file_path must be UTF-8 strings")
        return false
    }
    let mime = text(mimeType)
    let captionText = text(caption)
    guard (mimeType == nil || mime != nil) && (caption == nil || captionText != nil) else {
        CError.invalid(out, "mime_type and caption must be NULL or UTF-8 strings")
        return false
    }
    guard let scope = CEnums.scope(receiverType, receiver) else { CError.invalid(out, "receiver_type is not a cv_receiver_type"); return false }
    guard let type = CMediaEnums.attachmentType(mediaType) else { CError.invalid(out, "media_type is not a cv_media_type"); return false }
    let limit = 64 << 20
    let handle = FileHandle(forReadingAtPath: path)
    defer { try? handle?.close() }
    guard let bytes = try? handle?.read(upToCount: limit + 1), bytes.count <= limit else {
        CError.set(out, domain: CError.library, code: "ERR_SIMULATOR", message: "the file cannot be read, or is larger than 64 MiB")
        return false
    }
    let name = (path as NSString).lastPathComponent
    let escaped = name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "file"
    let url = "https://media.simulator.test/\(UUID().uuidString.lowercased())/\(escaped)"
    let contentType = mime ?? "application/octet-stream"
    box.simulator.registerMedia(url: url, bytes: bytes, mimeType: contentType)
    return simulated(out) {
        let id = try box.simulator.postMedia(type, [SimulatedAttachment(name: name, mimeType: contentType, url: url, size: bytes.count)],
                                             caption: captionText, from: from, to: scope)
        idOut?.pointee = Int64(id)
        urlOut?.pointee = owned(url)
    }
}

/// The C enums, checked (a C enum may hold any integer).
enum CEnums {
    static func scope(_ type: cv_receiver_type, _ receiver: String) -> MessageScope? {
        switch type.rawValue {
        case CV_RECEIVER_USER.rawValue: return .user(receiver)
        case CV_RECEIVER_GROUP.rawValue: return .group(receiver)
        default: return nil
        }
    }

    static func receiverType(_ type: cv_receiver_type) -> ReceiverType? {
        switch type.rawValue {
        case CV_RECEIVER_USER.rawValue: return .user
        case CV_RECEIVER_GROUP.rawValue: return .group
        default: return nil
        }
    }

    static func state(_ state: OfflineState) -> (cv_open_state, String?) {
        switch state {
        case .loggedOut: return (CV_OPEN_LOGGED_OUT, nil)
        case .disabled: return (CV_OPEN_DISABLED, nil)
        case .opening: return (CV_OPEN_OPENING, nil)
        case .ready: return (CV_OPEN_READY, nil)
        case .plaintextFallback(let why): return (CV_OPEN_PLAINTEXT_FALLBACK, code(why))
        case .unavailable(let why): return (CV_OPEN_UNAVAILABLE, why.code)
        case .onlineOnly(let why): return (CV_OPEN_ONLINE_ONLY, code(why))
        }
    }

    static func code(_ why: EncryptionUnavailable) -> String {
        switch why {
        case .cipherNotProven: return "cipherNotProven"
        case .noKeyStore: return "noKeyStore"
        }
    }

    static func failure(_ reason: MessageFailureReason) -> cv_failure_reason {
        switch reason {
        case .transient: return CV_FAILURE_TRANSIENT
        case .permanent: return CV_FAILURE_PERMANENT
        case .queueOverflow: return CV_FAILURE_QUEUE_OVERFLOW
        case .queueFull: return CV_FAILURE_QUEUE_FULL
        case .byteOverflow: return CV_FAILURE_BYTE_OVERFLOW
        case .discarded: return CV_FAILURE_DISCARDED
        }
    }

    static func reason(_ reason: OfflineCacheResetReason) -> cv_reset_reason {
        switch reason {
        case .keyLost: return CV_RESET_KEY_LOST
        case .wrongKey: return CV_RESET_WRONG_KEY
        case .corrupted: return CV_RESET_CORRUPTED
        case .escalated: return CV_RESET_ESCALATED
        case .encryptionChanged: return CV_RESET_ENCRYPTION_CHANGED
        }
    }
}
