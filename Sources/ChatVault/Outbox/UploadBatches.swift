import Foundation
import Synchronization
import VaultStore

/// Upload batches' surface: retry, remove and end, reads, reports, the lifecycle hooks.
extension UploadEngine {
    // MARK: - Retrying, removing, ending

    func retryUpload(_ request: UploadFileRequest, fileId: String, onSuccess: @escaping @Sendable (UploadFileItemStatus) -> Void,
                     onError: @escaping @Sendable (CometChatException) -> Void) {
        let executor = settings.callbackExecutor
        let composer = request.composer
        let expected = request.batchId
        Task.detached {
            let cache: VaultCache
            do throws(CometChatException) { cache = try self.uploadCache() } catch { return executor.execute { onError(error) } }
            let watcher = { @Sendable (batchId: String) in
                Watcher(batchId: batchId, fileIds: [fileId], onItem: { _ in }, onDone: { items in
                    guard let item = items.first else { return onError(UploadErrors.notFound) }
                    if item.state == .uploaded { onSuccess(item) } else { onError(item.error ?? UploadErrors.notFound) }
                }, onError: onError)
            }
            let outcome: Result<(UploadBatchRecord, Bool), CometChatException>
            do {
                outcome = try await cache.writer.run { db -> Result<(UploadBatchRecord, Bool), CometChatException> in
                    try self.fixUpUploads(cache, db)
                    guard var record = try UploadBatchRows.load(composer, in: db), expected == nil || expected == record.batchId,
                          let i = record.index(of: fileId) else { return .failure(UploadErrors.notFound) }
                    switch record.items[i].state {
                    case .uploaded:
                        return .success((record, false))
                    case .queued, .uploading:
                        return .failure(UploadErrors.inFlight)
                    case .rejected:
                        return .failure(record.items[i].error ?? UploadErrors.invalid("the file was rejected and cannot be retried"))
                    case .failed:
                        record.items[i].state = .queued
                        record.items[i].error = nil
                        try UploadBatchRows.save(record, in: db)
                        // Registered before any pump can claim the file (claims run on this queue).
                        self.state.withLock { s in
                            s.watchers[s.nextWatcher] = watcher(record.batchId)
                            s.nextWatcher += 1
                        }
                        return .success((record, true))
                    }
                }
            } catch {
                return executor.execute { onError(UploadErrors.unavailable) }
            }
            switch outcome {
            case .failure(let error):
                executor.execute { onError(error) }
            case .success(let (record, queued)):
                request.join(record.batchId)
                if queued {
                    self.deliverUploads(record, batchId: record.batchId, changed: [fileId], cache: cache)
                    self.requestUploadPump(record.batchId, composer, cache: cache)
                } else if let item = record.items.first(where: { $0.fileId == fileId }) {
                    let status = self.uploadStatus(item, directory: cache.directory.path)
                    executor.execute { onSuccess(status) }
                }
            }
        }
    }

    func removeUpload(_ request: UploadFileRequest, fileId: String) async throws(CometChatException) {
        let cache = try uploadCache()
        let composer = request.composer
        let expected = request.batchId
        let outcome: Result<Void, CometChatException> = await onUploadQueue {
            let removed: Result<(record: UploadBatchRecord, remaining: UploadBatchRecord?, copy: String?), CometChatException>
            do {
                removed = try cache.writer.sync { db in
                    try self.fixUpUploads(cache, db)
                    return try db.transaction { () throws -> Result<(record: UploadBatchRecord, remaining: UploadBatchRecord?, copy: String?), CometChatException> in
                        guard var record = try UploadBatchRows.load(composer, in: db), expected == nil || expected == record.batchId,
                              let i = record.index(of: fileId) else { return .failure(UploadErrors.notFound) }
                        let item = record.items.remove(at: i)
                        try UploadBatchRows.deleteMedia(record, fileId, in: db)
                        if record.items.isEmpty {
                            try UploadBatchRows.delete(record, in: db)
                            return .success((record, nil, item.copy))
                        }
                        try UploadBatchRows.save(record, in: db)
                        return .success((record, record, item.copy))
                    }
                }
            } catch {
                return .failure(UploadErrors.unavailable)
            }
            switch removed {
            case .failure(let error):
                return .failure(error)
            case .success(let (record, remaining, copy)):
                if remaining == nil {
                    try? FileManager.default.removeItem(atPath: cache.directory.path + "/" + record.folder)
                } else if let copy {
                    OutgoingCopies.removeFiles([copy], in: cache.directory)
                }
                self.state.withLock { _ = $0.addedHere.remove(fileId) }
                self.deliverUploads(remaining, batchId: record.batchId, changed: [], cache: cache)
                return .success(())
            }
        }
        try outcome.get()
    }

    func clearUploads(_ request: UploadFileRequest) async throws(CometChatException) {
        let cache = try uploadCache()
        let composer = request.composer
        let expected = request.batchId
        let outcome: Result<Void, CometChatException> = await onUploadQueue {
            let cleared: UploadBatchRecord?
            do {
                cleared = try cache.writer.sync { db in
                    try self.fixUpUploads(cache, db)
                    return try db.transaction { () throws -> UploadBatchRecord? in
                        guard let record = try UploadBatchRows.load(composer, in: db), expected == nil || expected == record.batchId else { return nil }
                        try UploadBatchRows.delete(record, in: db)
                        return record
                    }
                }
            } catch {
                return .failure(UploadErrors.unavailable)
            }
            guard let cleared else { return .failure(UploadErrors.notFound) }
            try? FileManager.default.removeItem(atPath: cache.directory.path + "/" + cleared.folder)
            self.dropUploadWatchers(batchId: cleared.batchId, UploadErrors.cleared)
            return .success(())
        }
        try outcome.get()
    }

    /// A media message was acknowledged: the files of its composer's batch whose attachments it
    /// carried leave the batch (which ends with its last file). `wire` is the message as sent.
    /// - Parameter messageId: the acknowledged message's server id (`.auto` keeps the sent
    ///   files' copies as its attachments' cached bytes).
    func sent(_ wire: JSONValue, messageId: Int) {
        guard let receiver = wire["receiver"]?.stringValue, let type = wire["receiverType"]?.stringValue.flatMap(ReceiverType.init(rawValue:)),
              let cache = openCache else { return }
        let urls = Set((wire["data"]?["attachments"]?.arrayValue ?? []).compactMap { $0["url"]?.stringValue })
        guard !urls.isEmpty else { return }
        let composer = UploadComposer(receiverId: receiver, receiverType: type, parentMessageId: Int(wire["parentId"]?.intValue ?? 0))
        admission.async {
            guard let changed = try? cache.writer.sync({ db in
                try self.fixUpUploads(cache, db)
                return try db.transaction { () throws -> (record: UploadBatchRecord, remaining: UploadBatchRecord?, copies: [String], sent: [UploadItemRecord])? in
                    guard var record = try UploadBatchRows.load(composer, in: db) else { return nil }
                    let sent = record.items.filter { $0.state == .uploaded && ($0.attachment?["url"]?.stringValue).map(urls.contains) == true }
                    guard !sent.isEmpty else { return nil }
                    for item in sent { try UploadBatchRows.deleteMedia(record, item.fileId, in: db) }
                    let ids = Set(sent.map(\.fileId))
                    record.items.removeAll { ids.contains($0.fileId) }
                    if record.items.isEmpty {
                        try UploadBatchRows.delete(record, in: db)
                        return (record, nil, [], sent)
                    }
                    try UploadBatchRows.save(record, in: db)
                    return (record, record, sent.compactMap(\.copy), sent)
                }
            }) else { return }
            self.media.adoptCopies(changed.sent.compactMap { item -> MediaCache.KeptCopy? in
                guard let copy = item.copy, let url = item.attachment?["url"]?.stringValue else { return nil }
                return MediaCache.KeptCopy(relativePath: copy, url: url, size: item.size, mime: item.mime)
            }, messageId: messageId, cache: cache)
            for item in changed.sent { if let copy = item.copy { self.media.removeCopyView(copy) } }
            if changed.remaining == nil {
                try? FileManager.default.removeItem(atPath: cache.directory.path + "/" + changed.record.folder)
            } else {
                OutgoingCopies.removeFiles(changed.copies, in: cache.directory)
            }
            self.deliverUploads(changed.remaining, batchId: changed.record.batchId, changed: [], cache: cache)
        }
    }

    // MARK: - Reading

    /// The batch a request belongs to, as statuses (empty when it ended or offline is not running).
    func uploadItems(of request: UploadFileRequest) -> [UploadFileItemStatus] {
        guard let cache = openCache else { return [] }
        guard let record = try? loadUploadBatch(request.composer, cache: cache),
              request.batchId == nil || request.batchId == record.batchId else { return [] }
        let directory = cache.directory.path
        return record.items.map { uploadStatus($0, directory: directory) }
    }

    /// A composer's batch, read through the reader once this cache's interrupted uploads were
    /// turned `.failed`.
    func loadUploadBatch(_ composer: UploadComposer, cache: VaultCache) throws -> UploadBatchRecord? {
        if state.withLock({ $0.fixedUp != ObjectIdentifier(cache) }) {
            try cache.writer.sync { db in try self.fixUpUploads(cache, db) }
        }
        return try cache.reader.sync { db in try UploadBatchRows.load(composer, in: db) }
    }

    func uploadStatus(_ item: UploadItemRecord, directory: String) -> UploadFileItemStatus {
        let copy = item.copy.map { media.plaintextCopyPath($0, root: directory) ?? directory + "/" + $0 }
        var attachment: Attachment?
        if item.state == .uploaded, let json = item.attachment {
            attachment = try? WireDecoder(limits: wireLimits, trusted: true).attachment(json, path: "attachment")
            attachment?.localPath = copy
        }
        let restored = state.withLock { !$0.addedHere.contains(item.fileId) }
        return UploadFileItemStatus(fileId: item.fileId, file: item.state == .uploaded ? nil : URL(fileURLWithPath: item.original),
                                    name: item.name, size: item.size, mime: item.mime, state: item.state, error: item.error,
                                    attachment: attachment, localCopyPath: copy, isRestored: restored)
    }

    // MARK: - Reports

    /// Tells the watchers of a batch about changed files, and settles those whose files are no
    /// longer queued or uploading. `record` nil: the batch ended.
    func deliverUploads(_ record: UploadBatchRecord?, batchId: String, changed: [String], cache: VaultCache) {
        let directory = cache.directory.path
        let statuses = Dictionary((record?.items ?? []).map { ($0.fileId, uploadStatus($0, directory: directory)) }, uniquingKeysWith: { a, _ in a })
        let active = Set((record?.items ?? []).filter(\.isActive).map(\.fileId))
        let (notices, done) = state.withLock { s -> ([(Watcher, UploadFileItemStatus)], [(Watcher, [UploadFileItemStatus])]) in
            var notices: [(Watcher, UploadFileItemStatus)] = []
            var done: [(Watcher, [UploadFileItemStatus])] = []
            for key in s.watchers.keys.sorted() {
                guard let watcher = s.watchers[key], watcher.batchId == batchId else { continue }
                for fileId in changed where watcher.fileIds.contains(fileId) {
                    if let status = statuses[fileId] { notices.append((watcher, status)) }
                }
                if !watcher.fileIds.contains(where: active.contains) {
                    s.watchers[key] = nil
                    done.append((watcher, watcher.fileIds.compactMap { statuses[$0] }))
                }
            }
            return (notices, done)
        }
        guard !notices.isEmpty || !done.isEmpty else { return }
        settings.callbackExecutor.execute {
            for (watcher, status) in notices { watcher.onItem(status) }
            for (watcher, items) in done { watcher.onDone(items) }
        }
    }

    /// Ends the waits on a batch (nil: on every batch) with an error.
    func dropUploadWatchers(batchId: String?, _ error: CometChatException) {
        let dropped = state.withLock { s -> [Watcher] in
            let keys = s.watchers.keys.sorted().filter { batchId == nil || s.watchers[$0]?.batchId == batchId }
            return keys.compactMap { s.watchers.removeValue(forKey: $0) }
        }
        guard !dropped.isEmpty else { return }
        settings.callbackExecutor.execute {
            for watcher in dropped { watcher.onError(error) }
        }
    }

    // MARK: - Lifecycle hooks

    /// Once per opened cache, before anything else touches its batches: files that were queued
    /// or uploading when the app stopped come back `.failed` (a batch never resumes on its own).
    /// Run at the start of a writer block, outside any transaction.
    func fixUpUploads(_ cache: VaultCache, _ db: Database) throws {
        let id = ObjectIdentifier(cache)
        guard state.withLock({ $0.fixedUp != id }) else { return }
        try db.transaction {
            for var record in try UploadBatchRows.all(in: db) where record.items.contains(where: \.isActive) {
                for i in record.items.indices where record.items[i].isActive {
                    record.items[i].state = .failed
                    record.items[i].error = UploadErrors.interrupted
                }
                try UploadBatchRows.save(record, in: db)
            }
        }
        state.withLock { $0.fixedUp = id }
    }

    /// A cache became active: interrupted uploads become `.failed`, and copies and media rows of
    /// batches that no longer exist (a crash between a commit and a cleanup) are removed.
    func attached(_ cache: VaultCache) {
        admission.async {
            guard let kept = try? cache.writer.sync({ db -> Set<String> in
                try self.fixUpUploads(cache, db)
                let owners = Set(try UploadBatchRows.all(in: db).map(\.owner))
                let stmt = try db.prepare("SELECT DISTINCT message_id FROM media WHERE outgoing = 1 AND substr(message_id, 1, 7) = 'upload-'")
                var stale: [String] = []
                while try stmt.step() { if let owner = stmt.text(0), !owners.contains(owner) { stale.append(owner) } }
                stmt.reset()
                for owner in stale { try db.run("DELETE FROM media WHERE outgoing = 1 AND message_id = ?", .text(owner)) }
                return owners
            }) else { return }
            let names = (try? FileManager.default.contentsOfDirectory(atPath: cache.directory.outgoing)) ?? []
            for name in names where name.hasPrefix("upload-") && !kept.contains(name) && OutgoingCopies.isSafeComponent(name) {
                try? FileManager.default.removeItem(atPath: cache.directory.outgoing + "/" + name)
            }
        }
    }

    /// Login or logout: this session's pumps and waits end (the batches stay in the cache).
    func detached() {
        state.withLock { s in
            s.session += 1
            s.pumping = []
            s.again = []
            s.fixedUp = nil
            s.addedHere = []
        }
        dropUploadWatchers(batchId: nil, UploadErrors.stopped)
    }

    /// `clearOfflineCache` ended every batch (its kv rows and the outgoing folder are gone).
    func cleared() {
        dropUploadWatchers(batchId: nil, UploadErrors.cleared)
    }

    // MARK: - Helpers

    /// The open cache for an upload operation, or the refusal.
    func uploadCache() throws(CometChatException) -> VaultCache {
        switch vaultState {
        case .ready, .plaintextFallback:
            if let cache = openCache { return cache }
            throw UploadErrors.unavailable
        case .opening, .unavailable:
            throw UploadErrors.unavailable
        case .loggedOut, .disabled, .onlineOnly:
            throw UploadErrors.disabled
        }
    }

    func onUploadQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            admission.async { continuation.resume(returning: body()) }
        }
    }

    /// The composer's batch is not the one copied for (cannot happen while structure changes
    /// run on the admission queue; refused rather than mixing two batches).
    struct BatchChanged: Error {}

    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }
}

extension OfflineVault {
    /// Re-attaches to the upload batch kept for a composer (`getExistingUploadFileRequest`).
    /// Returns nil when offline support is not running, nobody is logged in, or no batch was
    /// kept for that composer. Reads the cache.
    ///
    ///     if let request = vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0) {
    ///         for item in request.getItems() where item.state == .failed { request.retryAttachment(fileId: item.fileId) }
    ///     }
    /// - Parameter parentMessageId: 0 for the main composer, the thread parent's id for a thread's.
    public func getExistingUploadFileRequest(receiverId: String, receiverType: ReceiverType, parentMessageId: Int) -> UploadFileRequest? {
        guard userId != nil, let cache = uploads.openCache else { return nil }
        let composer = UploadComposer(receiverId: receiverId, receiverType: receiverType, parentMessageId: parentMessageId)
        guard let record = try? uploads.loadUploadBatch(composer, cache: cache), !record.items.isEmpty else { return nil }
        return UploadFileRequest(vault: self, receiverId: receiverId, receiverType: receiverType, parentMessageId: parentMessageId,
                                 files: [], batchId: record.batchId)
    }
}
