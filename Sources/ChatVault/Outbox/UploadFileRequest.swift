public import Foundation
import Synchronization

/// One file of an `UploadFileRequest`, as `getItems()` reports it (`UploadFileItemStatus`).
public struct UploadFileItemStatus: Sendable, CustomStringConvertible {
    /// The file's id within the batch, stable across restarts: pass it to `retryAttachment(fileId:)`.
    public let fileId: String
    /// The app's original file, `nil` once the file is uploaded. The SDK reads its bytes only
    /// once, when it copies them into the cache; every upload and retry reads the copy. For a
    /// restored item (`isRestored`, read back after a restart) it only *names* the file the app
    /// gave (`file.lastPathComponent == name`): the item holds no bytes of it, and the original
    /// may be gone. Show a preview from `localCopyPath` instead.
    public let file: URL?
    /// The file's name (the original's last path component).
    public let name: String
    /// Bytes copied (0 when the file could not be copied).
    public let size: Int64
    /// The MIME type the upload declares (from the name's extension).
    public let mime: String
    /// Where the file stands: `.queued`, `.uploading`, `.uploaded`, `.failed` (retry it with
    /// `retryAttachment(fileId:)`) or `.rejected` (a retry will not help).
    public let state: UploadFileState
    /// Why the item is `.failed` or `.rejected`; nil otherwise.
    public let error: CometChatException?
    /// The uploaded attachment (`.uploaded` only), ready for `MediaMessage.attachments`; its
    /// `localPath` is the cache's copy.
    public let attachment: Attachment?
    /// Absolute path of the cache's own copy (0600), nil when there is none (`.rejected`).
    public let localCopyPath: String?
    /// Read back from the cache after a restart (or a new login), not added in this session:
    /// `file` names the original but no bytes of it are held.
    public let isRestored: Bool

    /// `UploadFileItemStatus(<file id>, <state>, <size> bytes)`: never the name or a path (safe for
    /// logs).
    public var description: String { "UploadFileItemStatus(\(fileId), \(state.rawValue), \(size) bytes)" }
}

/// A batch of files uploaded for one composer before they are sent as a media message's
/// `attachments` (`UploadFileRequest`). Each file is first copied into the cache (0600, under
/// `outgoing/upload-<batch id>/`), then uploaded from that copy, one at a time, so the batch
/// survives the app being killed and the original files being deleted.
///
/// There is at most one batch per composer: a receiver and a `parentMessageId` (0 for the main
/// composer, the thread parent's id for a thread's). Uploading files for a composer that already
/// has a batch adds them to it. The batch is kept in the cache until it ends:
/// - `clear()` ends it (its copies are deleted);
/// - `remove(fileId:)` takes one file out (the batch ends with its last file);
/// - once a media message carrying some of its attachments is sent (the server acknowledged it,
///   through the outbox or a classic send), those files leave the batch;
/// - `clearOfflineCache` ends every batch.
///
/// A batch never resumes on its own: after a restart, files that were queued or uploading come
/// back `.failed`; re-attach with `OfflineVault.getExistingUploadFileRequest` and retry them.
/// Its copies count toward `maxMediaCacheSize` like an unsent message's (received media is
/// evicted least recently used first to make room; a file that still does not fit is
/// `.rejected`), and they are never evicted while the batch exists.
///
///     let request = UploadFileRequest.UploadFileRequestBuilder(vault: vault)
///         .set(receiverId: "bob").set(receiverType: .user).set(parentMessageId: 0)
///         .set(files: [photoURL, pdfURL])
///         .build()
///     request.upload(onItemStatusChanged: { item in composer.show(item) },
///                    onComplete: { items in composer.enableSend(items.allSatisfy { $0.state == .uploaded }) },
///                    onError: { error in composer.showError(error) })
///
///     // Later, maybe after a restart:
///     if let request = vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0) {
///         for item in request.getItems() where item.state == .failed { request.retryAttachment(fileId: item.fileId) }
///     }
///
///     // Send what was uploaded; the sent files leave the batch.
///     let message = MediaMessage(receiverUid: "bob", fileurl: nil, messageType: .file, receiverType: .user)
///     message.attachments = request.getAttachments()
///     vault.sendMediaMessage(message: message, onMessagePending: { _ in }, onMessageSent: { _ in }, onError: { _ in })
///
/// It needs offline support running (`isOfflineEnabled()`): otherwise `upload` fails with
/// `ERROR_OFFLINE_DISABLED` and `getItems()` is empty. Callbacks run on the vault's callback
/// executor (the main queue by default).
public final class UploadFileRequest: Sendable {
    /// Builds an `UploadFileRequest` (`UploadFileRequest.UploadFileRequestBuilder()`).
    public final class UploadFileRequestBuilder {
        private var receiverId = ""
        private var receiverType = ReceiverType.user
        private var parentMessageId = 0
        private var files: [URL] = []
        private let vault: OfflineVault?

        /// - Parameter vault: the engine to upload through; nil means `CometChat.offlineVault`.
        public init(vault: OfflineVault? = nil) {
            self.vault = vault
        }

        /// The uid or guid the files are for (the composer's receiver).
        @discardableResult public func set(receiverId: String) -> Self { self.receiverId = receiverId; return self }
        /// Whether `receiverId` is a user or a group (default `.user`).
        @discardableResult public func set(receiverType: ReceiverType) -> Self { self.receiverType = receiverType; return self }
        /// 0 (the default) for the main composer, the thread parent's id for a thread's composer.
        @discardableResult public func set(parentMessageId: Int) -> Self { self.parentMessageId = parentMessageId; return self }
        /// The local files to upload (`file://` URLs), replacing any set before.
        @discardableResult public func set(files: [URL]) -> Self { self.files = files; return self }
        /// Adds one local file (a `file://` URL) to the files to upload.
        @discardableResult public func add(file: URL) -> Self { files.append(file); return self }

        /// The request for this composer, through the builder's vault (or
        /// `CometChat.offlineVault`). Nothing is copied or uploaded until `upload`.
        public func build() -> UploadFileRequest {
            UploadFileRequest(vault: vault ?? CometChat.offlineVault, receiverId: receiverId, receiverType: receiverType,
                              parentMessageId: parentMessageId, files: files, batchId: nil)
        }
    }

    /// The uid or guid of the composer's receiver.
    public let receiverId: String
    /// Whether `receiverId` is a user or a group.
    public let receiverType: ReceiverType
    /// 0 for the main composer, the thread parent's id for a thread's.
    public let parentMessageId: Int
    /// The files `upload` adds to the batch (empty for a request from `getExistingUploadFileRequest`).
    public let files: [URL]
    let vault: OfflineVault?
    private let joined: Mutex<String?>

    init(vault: OfflineVault?, receiverId: String, receiverType: ReceiverType, parentMessageId: Int, files: [URL], batchId: String?) {
        self.vault = vault
        self.receiverId = receiverId
        self.receiverType = receiverType
        self.parentMessageId = parentMessageId
        self.files = files
        joined = Mutex(batchId)
    }

    /// The batch this request belongs to, once `upload` has started it or joined the
    /// composer's kept one (always set on a request from `getExistingUploadFileRequest`).
    public var batchId: String? { joined.withLock { $0 } }

    func join(_ batchId: String) {
        joined.withLock { $0 = batchId }
    }

    var composer: UploadComposer {
        UploadComposer(receiverId: receiverId, receiverType: receiverType, parentMessageId: parentMessageId)
    }

    // MARK: Uploading

    /// Copies `files` into the cache, adds them to the composer's batch (creating it), then
    /// uploads them one at a time from the copies. Each call adds `files` again. A file that
    /// cannot be copied, or does not fit `maxMediaCacheSize`, is added `.rejected`.
    /// - Parameters:
    ///   - onItemStatusChanged: each of this call's files as its state changes (`.queued` or
    ///     `.rejected` once copied, `.uploading`, then `.uploaded`, `.failed` or `.rejected`).
    ///   - onComplete: once none of this call's files is queued or uploading any more: those
    ///     files in order, in their states then (files removed meanwhile are left out).
    ///   - onError: nothing was added: `ERROR_OFFLINE_DISABLED` (offline support not running),
    ///     `ERROR_OFFLINE_MESSAGE_PERSIST_FAILED` (the cache refused the write; try again),
    ///     `ERROR_INVALID_MESSAGE` (no files, no receiver, a negative parent id, too many files).
    ///     Also when the batch is cleared before this call's files settled
    ///     (`ERROR_OFFLINE_MESSAGE_DISCARDED`), or offline support stops meanwhile (a logout).
    public func upload(onItemStatusChanged: @escaping @Sendable (UploadFileItemStatus) -> Void = { _ in },
                       onComplete: @escaping @Sendable ([UploadFileItemStatus]) -> Void,
                       onError: @escaping @Sendable (CometChatException) -> Void) {
        guard let vault else { return CallbackExecutor.main.execute { onError(UploadErrors.disabled) } }
        vault.uploads.startUpload(self, onItem: onItemStatusChanged, onComplete: onComplete, onError: onError)
    }

    /// `upload(onItemStatusChanged:onComplete:onError:)` as one call: this call's files once
    /// they have settled.
    public func upload() async throws(CometChatException) -> [UploadFileItemStatus] {
        let result: Result<[UploadFileItemStatus], CometChatException> = await withCheckedContinuation { continuation in
            upload(onComplete: { continuation.resume(returning: .success($0)) }, onError: { continuation.resume(returning: .failure($0)) })
        }
        return try result.get()
    }

    // MARK: Reading

    /// Every file of the composer's batch, in the order they were added (for a request whose
    /// `upload` has not run yet: the composer's kept batch, which `upload` will join). Empty when
    /// the request's batch has ended, when there is none, or when offline support is not
    /// running. Reads the cache.
    public func getItems() -> [UploadFileItemStatus] {
        vault?.uploads.uploadItems(of: self) ?? []
    }

    /// The uploaded files' attachments, in order: what `MediaMessage.attachments` takes.
    public func getAttachments() -> [Attachment] {
        getItems().compactMap { $0.state == .uploaded ? $0.attachment : nil }
    }

    // MARK: Retrying

    /// Retries one `.failed` file from the cache's own copy (the file is not passed again).
    /// Fire and forget: watch the outcome with `getItems()`, or use the callback form.
    public func retryAttachment(fileId: String) {
        retryAttachment(fileId: fileId, onSuccess: { _ in }, onError: { _ in })
    }

    /// Retries one `.failed` file from the cache's own copy. `onSuccess` gets the file once
    /// uploaded (at once if it already is). `onError` gets a refusal, changing nothing:
    /// `ERROR_OFFLINE_MESSAGE_NOT_FOUND` (no such file in the batch, or the batch ended),
    /// `ERROR_OFFLINE_MESSAGE_IN_FLIGHT` (queued or uploading now), the item's own error for a
    /// `.rejected` file (it cannot be retried), `ERROR_OFFLINE_DISABLED`, `ERROR_OFFLINE_MESSAGE_PERSIST_FAILED`;
    /// or the new attempt's error when it failed again.
    public func retryAttachment(fileId: String, onSuccess: @escaping @Sendable (UploadFileItemStatus) -> Void,
                                onError: @escaping @Sendable (CometChatException) -> Void) {
        guard let vault else { return CallbackExecutor.main.execute { onError(UploadErrors.disabled) } }
        vault.uploads.retryUpload(self, fileId: fileId, onSuccess: onSuccess, onError: onError)
    }

    /// `retryAttachment(fileId:onSuccess:onError:)` as one call: the file once uploaded.
    public func retryAttachmentAndWait(fileId: String) async throws(CometChatException) -> UploadFileItemStatus {
        let result: Result<UploadFileItemStatus, CometChatException> = await withCheckedContinuation { continuation in
            retryAttachment(fileId: fileId, onSuccess: { continuation.resume(returning: .success($0)) },
                            onError: { continuation.resume(returning: .failure($0)) })
        }
        return try result.get()
    }

    // MARK: Ending

    /// Takes one file out of the batch and deletes its copy (an upload in flight is forgotten).
    /// The batch ends with its last file. `ERROR_OFFLINE_MESSAGE_NOT_FOUND` when there is no such file.
    public func remove(fileId: String) async throws(CometChatException) {
        guard let vault else { throw UploadErrors.disabled }
        try await vault.uploads.removeUpload(self, fileId: fileId)
    }

    /// `remove(fileId:)` with closures: `onSuccess` once the file left the batch, `onError` with
    /// `ERROR_OFFLINE_MESSAGE_NOT_FOUND` (no such file), `ERROR_OFFLINE_MESSAGE_PERSIST_FAILED`
    /// (the cache is busy: nothing changed, try again) or `ERROR_OFFLINE_DISABLED`; on the vault's
    /// callback executor.
    public func remove(fileId: String, onSuccess: @escaping @Sendable () -> Void, onError: @escaping @Sendable (CometChatException) -> Void) {
        Task.detached {
            do throws(CometChatException) {
                try await self.remove(fileId: fileId)
                self.execute { onSuccess() }
            } catch {
                self.execute { onError(error) }
            }
        }
    }

    /// Ends the batch: every file leaves it and the copies are deleted. Uploads in flight are
    /// forgotten; an `upload` still waiting hears `ERROR_OFFLINE_MESSAGE_DISCARDED`.
    /// `ERROR_OFFLINE_MESSAGE_NOT_FOUND` when the batch already ended.
    public func clear() async throws(CometChatException) {
        guard let vault else { throw UploadErrors.disabled }
        try await vault.uploads.clearUploads(self)
    }

    /// `clear()` with closures: `onSuccess` once the batch ended, `onError` with
    /// `ERROR_OFFLINE_MESSAGE_NOT_FOUND` (it already ended), `ERROR_OFFLINE_MESSAGE_PERSIST_FAILED`
    /// (the cache is busy: nothing changed, try again) or `ERROR_OFFLINE_DISABLED`; on the vault's
    /// callback executor.
    public func clear(onSuccess: @escaping @Sendable () -> Void, onError: @escaping @Sendable (CometChatException) -> Void) {
        Task.detached {
            do throws(CometChatException) {
                try await self.clear()
                self.execute { onSuccess() }
            } catch {
                self.execute { onError(error) }
            }
        }
    }

    private func execute(_ work: @escaping @Sendable () -> Void) {
        (vault?.settings.callbackExecutor ?? .main).execute(work)
    }
}

/// The composer a batch belongs to: the kv key it is kept under.
struct UploadComposer: Sendable, Hashable {
    let receiverId: String
    let receiverType: ReceiverType
    let parentMessageId: Int

    /// `upload-batch|<type>|<parent id>|<receiver id>`: the receiver id last, so any character in
    /// it keeps keys distinct.
    var key: String { "\(UploadBatchRows.keyPrefix)\(receiverType.rawValue)|\(parentMessageId)|\(receiverId)" }
}

/// The fixed refusals of the upload batch API.
enum UploadErrors {
    static let disabled = CometChatException(.offlineDisabled, "Offline support is not running: upload batches need the offline cache.")
    static let unavailable = CometChatException(.offlineMessagePersistFailed, "The offline cache is not available just now. Try again.")
    static let notFound = CometChatException(.offlineMessageNotFound, "No such file in the batch, or the batch has ended.")
    static let inFlight = CometChatException(.offlineMessageInFlight, "The file is queued or uploading now.")
    static let cleared = CometChatException(.offlineMessageDiscarded, "The upload batch was cleared before its files were uploaded.")
    static let stopped = CometChatException(.offlineDisabled, "Offline support stopped (a logout) before the files were uploaded.")
    static let interrupted = CometChatException(.requestTimedOut, "The upload was interrupted (the app stopped) before the server answered; retry it.")
    static let offline = CometChatException(.internetUnavailable, "No connection: the file was not uploaded; retry it once online.")
    static let noAnswer = CometChatException(.requestTimedOut, "The server did not answer the upload; retry it.")

    static func invalid(_ sentence: String) -> CometChatException {
        CometChatException(.invalidMessage, "The upload was refused: \(sentence).")
    }
}
