public import CChatVault
import ChatVault
import Foundation

/// The C enums of media, checked (a C enum may hold any integer).
enum CMediaEnums {
    static func messageType(_ type: cv_media_type) -> MessageType? {
        switch type.rawValue {
        case CV_MEDIA_IMAGE.rawValue: return .image
        case CV_MEDIA_VIDEO.rawValue: return .video
        case CV_MEDIA_AUDIO.rawValue: return .audio
        case CV_MEDIA_FILE.rawValue: return .file
        default: return nil
        }
    }

    static func attachmentType(_ type: cv_media_type) -> AttachmentType? {
        messageType(type).flatMap { AttachmentType(rawValue: $0.rawValue) }
    }

    static func mode(_ mode: MediaCachingMode) -> cv_media_caching_mode {
        switch mode {
        case .auto: return CV_MEDIA_CACHING_AUTO
        case .off: return CV_MEDIA_CACHING_OFF
        }
    }
}

/// Borrowed C views of Swift values, valid during `body` only.
enum CBorrow {
    static func string<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        guard let s else { return body(nil) }
        return s.withCString { body($0) }
    }

    /// An exception as a `const cv_error *` (domain CV_ERROR_DOMAIN_CHATVAULT), or NULL.
    static func error<R>(_ error: CometChatException?, _ body: (UnsafePointer<cv_error>?) -> R) -> R {
        guard let error else { return body(nil) }
        return CError.library.withCString { domain in
            error.errorCode.withCString { code in
                error.errorDescription.withCString { message in
                    string(error.details) { details in
                        let e = cv_error(domain: UnsafeMutablePointer(mutating: domain), code: UnsafeMutablePointer(mutating: code),
                                         message: UnsafeMutablePointer(mutating: message), details: details.map { UnsafeMutablePointer(mutating: $0) })
                        return withUnsafePointer(to: e) { body($0) }
                    }
                }
            }
        }
    }
}

@c(cv_vault_send_media)
public func cvVaultSendMedia(_ vault: OpaquePointer?, _ receiverType: cv_receiver_type, _ receiver: UnsafePointer<CChar>?,
                             _ filePath: UnsafePointer<CChar>?, _ mediaType: cv_media_type, _ caption: UnsafePointer<CChar>?,
                             _ callback: cv_send_callback?, _ userData: UnsafeMutableRawPointer?, _ destroy: cv_destroy_notify?,
                             _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    guard let receiver = text(receiver), !receiver.isEmpty else { CError.invalid(out, "receiver must be a UTF-8 string"); return false }
    guard let path = text(filePath), !path.isEmpty else { CError.invalid(out, "file_path must be a UTF-8 path"); return false }
    let captionText = text(caption)
    guard caption == nil || captionText != nil else { CError.invalid(out, "caption must be NULL or a UTF-8 string"); return false }
    guard let type = CEnums.receiverType(receiverType) else { CError.invalid(out, "receiver_type is not a cv_receiver_type"); return false }
    guard let kind = CMediaEnums.messageType(mediaType) else { CError.invalid(out, "media_type is not a cv_media_type"); return false }
    guard let callback else { CError.invalid(out, "a send needs a callback"); return false }
    let message = MediaMessage(receiverUid: receiver, files: [URL(fileURLWithPath: path)], messageType: kind, receiverType: type)
    message.caption = captionText
    let engine = box.vault
    CSend.start(box, message, callback, userData, destroy) { m, pending, sent, failed in
        engine.sendMediaMessage(message: m, onMessagePending: pending, onMessageSent: sent, onError: failed)
    }
    return true
}

@c(cv_vault_send_custom)
public func cvVaultSendCustom(_ vault: OpaquePointer?, _ receiverType: cv_receiver_type, _ receiver: UnsafePointer<CChar>?,
                              _ customType: UnsafePointer<CChar>?, _ customDataJSON: UnsafePointer<CChar>?,
                              _ callback: cv_send_callback?, _ userData: UnsafeMutableRawPointer?, _ destroy: cv_destroy_notify?,
                              _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    guard let receiver = text(receiver), !receiver.isEmpty else { CError.invalid(out, "receiver must be a UTF-8 string"); return false }
    guard let customType = text(customType), !customType.isEmpty else { CError.invalid(out, "custom_type must be a UTF-8 string"); return false }
    guard let json = text(customDataJSON), let data = try? JSONValue(jsonData: Data(json.utf8)), data.objectValue != nil else {
        CError.invalid(out, "custom_data_json must be a JSON object")
        return false
    }
    guard let type = CEnums.receiverType(receiverType) else { CError.invalid(out, "receiver_type is not a cv_receiver_type"); return false }
    guard let callback else { CError.invalid(out, "a send needs a callback"); return false }
    let message = CustomMessage(receiverUid: receiver, receiverType: type, customData: data, type: customType)
    let engine = box.vault
    CSend.start(box, message, callback, userData, destroy) { m, pending, sent, failed in
        engine.sendCustomMessage(message: m, onMessagePending: pending, onMessageSent: sent, onError: failed)
    }
    return true
}

@c(cv_vault_get_media_caching_mode)
public func cvVaultGetMediaCachingMode(_ vault: OpaquePointer?, _ out: ErrorOut) -> cv_media_caching_mode {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return CV_MEDIA_CACHING_OFF }
    return CMediaEnums.mode(box.vault.getMediaCachingMode())
}

@c(cv_vault_get_cached_media_path)
public func cvVaultGetCachedMediaPath(_ vault: OpaquePointer?, _ url: UnsafePointer<CChar>?, _ out: ErrorOut) -> UnsafeMutablePointer<CChar>? {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return nil }
    guard let url = text(url), !url.isEmpty else { CError.invalid(out, "url must be a UTF-8 string"); return nil }
    return box.vault.getCachedMediaPath(url).flatMap(owned)
}

/// One `cv_vault_download_media`: its progress and end callbacks, live until the end (or the
/// vault's free). Held in the vault's registration table, beside the listeners, so that
/// `cv_vault_free` ends it (its destroy notifier) as it ends them; there is nothing to register
/// with the engine, and its id is never handed to C.
final class DownloadCallback: CListener, @unchecked Sendable {
    private let progress: cv_media_progress_callback?
    private let done: cv_media_download_callback
    private let state: CCallbackState

    init(progress: cv_media_progress_callback?, done: cv_media_download_callback, userData: UnsafeMutableRawPointer?,
         destroy: cv_destroy_notify?) {
        self.progress = progress
        self.done = done
        state = CCallbackState(userData: userData, destroy: destroy)
    }

    func register(with vault: OfflineVault, id: String) {}
    func unregister(from vault: OfflineVault, id: String) {}
    func end() { state.end() }

    func report(_ percent: Int) {
        guard state.isLive, let progress else { return }
        progress(Int32(clamping: percent), state.userData.pointer)
    }

    func finish(_ result: Result<String, CometChatException>) {
        guard state.isLive else { return }
        let userData = state.userData.pointer
        switch result {
        case .success(let path): path.withCString { done($0, nil, userData) }
        case .failure(let error): CBorrow.error(error) { done(nil, $0, userData) }
        }
    }
}

@c(cv_vault_download_media)
public func cvVaultDownloadMedia(_ vault: OpaquePointer?, _ url: UnsafePointer<CChar>?, _ messageId: Int64,
                                 _ progress: cv_media_progress_callback?, _ done: cv_media_download_callback?,
                                 _ userData: UnsafeMutableRawPointer?, _ destroy: cv_destroy_notify?, _ out: ErrorOut) -> Bool {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return false }
    guard let url = text(url), !url.isEmpty else { CError.invalid(out, "url must be a UTF-8 string"); return false }
    guard messageId >= 0, let serverId = Int(exactly: messageId) else { CError.invalid(out, "message_id must be 0 or a message id"); return false }
    guard let done else { CError.invalid(out, "a download needs a done callback"); return false }
    let download = DownloadCallback(progress: progress, done: done, userData: userData, destroy: destroy)
    // Registered before the download starts: its end (on the dispatching thread) always finds it.
    let id = box.add(download)
    // The box weakly: the engine holds these closures until the download ends, and the box holds the engine.
    box.vault.downloadMedia(url: url, messageServerId: serverId, onProgress: { percent in
        download.report(percent)
    }, onSuccess: { [weak box] path in
        download.finish(.success(path))
        _ = box?.remove(id)
    }, onError: { [weak box] error in
        download.finish(.failure(error))
        _ = box?.remove(id)
    })
    return true
}

/// A C media listener: the background downloads' outcomes.
final class MediaCallback: MediaDownloadListener, CListener, @unchecked Sendable {
    private let callback: cv_media_callback
    private let state: CCallbackState

    init(callback: cv_media_callback, userData: UnsafeMutableRawPointer?, destroy: cv_destroy_notify?) {
        self.callback = callback
        state = CCallbackState(userData: userData, destroy: destroy)
    }

    func register(with vault: OfflineVault, id: String) { vault.addMediaDownloadListener(id, self) }
    func unregister(from vault: OfflineVault, id: String) { vault.removeMediaDownloadListener(id) }
    func end() { state.end() }

    func onMediaDownloaded(_ messageId: String, _ url: String, _ localPath: String) {
        guard state.isLive else { return }
        let userData = state.userData.pointer
        messageId.withCString { m in
            url.withCString { u in
                localPath.withCString { p in callback(CV_MEDIA_DOWNLOADED, m, u, p, nil, userData) }
            }
        }
    }

    func onMediaDownloadFailed(_ attachment: Attachment?, _ error: CometChatException) {
        guard state.isLive else { return }
        let userData = state.userData.pointer
        CBorrow.string(attachment?.fileUrl) { u in
            CBorrow.error(error) { e in callback(CV_MEDIA_DOWNLOAD_FAILED, nil, u, nil, e, userData) }
        }
    }
}

@c(cv_vault_add_media_listener)
public func cvVaultAddMediaListener(_ vault: OpaquePointer?, _ callback: cv_media_callback?, _ userData: UnsafeMutableRawPointer?,
                                    _ destroy: cv_destroy_notify?, _ out: ErrorOut) -> UInt32 {
    guard let box = vaults.get(vault) else { CError.invalid(out, "not a vault handle"); return 0 }
    guard let callback else { CError.invalid(out, "a listener needs a callback"); return 0 }
    return box.add(MediaCallback(callback: callback, userData: userData, destroy: destroy))
}
