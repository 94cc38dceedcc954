import Foundation
import Synchronization
import VaultStore

/// Upload batches: admitting a composer's files (private copies, the batch record) and the pump
/// that uploads them one at a time, in order.
extension UploadEngine {
    // MARK: - Adding files

    func startUpload(_ request: UploadFileRequest, onItem: @escaping @Sendable (UploadFileItemStatus) -> Void,
                     onComplete: @escaping @Sendable ([UploadFileItemStatus]) -> Void,
                     onError: @escaping @Sendable (CometChatException) -> Void) {
        let executor = settings.callbackExecutor
        let composer = request.composer
        let files = request.files
        let id = composer.receiverId
        guard !id.isEmpty, id.utf8.count <= wireLimits.maxIdentifierBytes,
              !id.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            return executor.execute { onError(UploadErrors.invalid("the receiver id is empty, too long or holds control characters")) }
        }
        guard composer.parentMessageId >= 0 else { return executor.execute { onError(UploadErrors.invalid("the parent message id is negative")) } }
        guard !files.isEmpty else { return executor.execute { onError(UploadErrors.invalid("there are no files")) } }
        let watcher = Watcher(batchId: "", fileIds: [], onItem: onItem, onDone: onComplete, onError: onError)
        admission.async { self.admitUploads(request, files: files, watcher: watcher) }
    }

    /// Copies the files, then commits them to the composer's batch in one transaction (the byte
    /// budget per file), then reports them and starts the uploads. On the admission queue.
    func admitUploads(_ request: UploadFileRequest, files: [URL], watcher template: Watcher) {
        let executor = settings.callbackExecutor
        let composer = request.composer
        let cache: VaultCache
        do throws(CometChatException) { cache = try uploadCache() } catch { return executor.execute { template.onError(error) } }
        let existing: UploadBatchRecord?
        do {
            existing = try cache.writer.sync { db in
                try self.fixUpUploads(cache, db)
                return try UploadBatchRows.load(composer, in: db)
            }
        } catch {
            return executor.execute { template.onError(UploadErrors.unavailable) }
        }
        if let existing, existing.items.count + files.count > wireLimits.maxListCount {
            return executor.execute { template.onError(UploadErrors.invalid("the batch would hold too many files")) }
        }
        let batchId = existing?.batchId ?? UUID().uuidString.lowercased()
        let shell = UploadBatchRecord(batchId: batchId, composer: composer, createdAt: Self.milliseconds(settings.clock()),
                                      nextIndex: existing?.nextIndex ?? 0, items: [])
        let root = cache.directory.path
        let folder = root + "/" + shell.folder

        // Copy first, outside any transaction: each file that cannot be copied is rejected.
        let copyKey = media.outgoingCopyKey(cache)
        var next = shell.nextIndex
        var added: [UploadItemRecord] = []
        var folderError: CometChatException?
        do {
            try OutgoingCopies.makePrivateDirectory(cache.directory.outgoing)
            try OutgoingCopies.makePrivateDirectory(folder)
        } catch {
            folderError = error
        }
        for url in files {
            let index = next
            next += 1
            let name = url.lastPathComponent
            let relative = "\(shell.folder)/\(index)"
            let fileId = "\(batchId)-\(index)"
            do throws(CometChatException) {
                if let folderError { throw folderError }
                guard url.isFileURL else { throw OutgoingCopies.failure("it is not a file URL") }
                let size = try OutgoingCopies.copyFile(from: url.path, to: root + "/" + relative, key: copyKey)
                added.append(UploadItemRecord(fileId: fileId, name: name, original: url.path, size: size,
                                              mime: OutgoingCopies.mimeType(forName: name), state: .queued, copy: relative))
            } catch {
                if folderError == nil { unlink(root + "/" + relative) }
                added.append(UploadItemRecord(fileId: fileId, name: name, original: url.path, size: 0, mime: OutgoingCopies.mimeType(forName: name),
                                              state: .rejected, copy: nil, error: error))
            }
        }
        let copies = added.compactMap(\.copy)
        if !copies.isEmpty {
            do {
                try OutgoingCopies.syncDirectory(folder)
                try OutgoingCopies.syncDirectory(cache.directory.outgoing)
            } catch {
                // Not durable: none of this call's copies is kept.
                OutgoingCopies.removeFiles(copies, in: cache.directory)
                for i in added.indices where added[i].copy != nil {
                    added[i].state = .rejected
                    added[i].copy = nil
                    added[i].error = error
                }
            }
        }

        // Commit: each copied file must fit the media byte budget (received media is evicted,
        // least recently used first, to make room; other copies never are).
        let budget: Int64? = config.maxMediaCacheSize > 0 ? config.maxMediaCacheSize : nil
        let now = shell.createdAt
        let overflow = CometChatException(.offlineMediaByteOverflow, "The file would exceed the media cache size (maxMediaCacheSize); it was not kept.")
        let ids = added.map(\.fileId)
        let committed: (record: UploadBatchRecord, remove: [String])
        do {
            committed = try cache.writer.sync { db in
                let result = try db.transaction { () throws -> (record: UploadBatchRecord, remove: [String]) in
                    var record = try UploadBatchRows.load(composer, in: db) ?? shell
                    guard record.batchId == batchId else { throw BatchChanged() }
                    var remove: [String] = []
                    var items = added
                    for i in items.indices where items[i].state == .queued {
                        guard let copy = items[i].copy else { continue }
                        if try OutboxRows.makeRoom(for: items[i].size, budget: budget, removeFiles: &remove, in: db) {
                            try OutboxRows.insertOutgoingMedia(key: UploadBatchRows.mediaKey(record, items[i].fileId), owner: record.owner,
                                                               file: copy, bytes: items[i].size, mime: items[i].mime, at: now, in: db)
                        } else {
                            items[i].state = .rejected
                            items[i].error = overflow
                            items[i].copy = nil
                            remove.append(copy)
                        }
                    }
                    record.nextIndex = max(record.nextIndex, next)
                    record.items += items
                    try UploadBatchRows.save(record, in: db)
                    return (record, remove)
                }
                // Registered before any pump can claim these files (claims run on this queue).
                self.state.withLock { s in
                    s.addedHere.formUnion(ids)
                    s.watchers[s.nextWatcher] = Watcher(batchId: batchId, fileIds: ids, onItem: template.onItem,
                                                                   onDone: template.onDone, onError: template.onError)
                    s.nextWatcher += 1
                }
                return result
            }
        } catch {
            OutgoingCopies.removeFiles(copies, in: cache.directory)
            if existing == nil { try? FileManager.default.removeItem(atPath: folder) }
            return executor.execute { template.onError(UploadErrors.unavailable) }
        }
        OutgoingCopies.removeFiles(committed.remove, in: cache.directory)
        request.join(batchId)
        deliverUploads(committed.record, batchId: batchId, changed: ids, cache: cache)
        if committed.record.items.contains(where: { $0.state == .queued }) { requestUploadPump(batchId, composer, cache: cache) }
    }

    // MARK: - Uploading

    /// Starts uploading a batch's queued files unless that is already running (then it goes
    /// over the batch again when done).
    func requestUploadPump(_ batchId: String, _ composer: UploadComposer, cache: VaultCache) {
        guard let session = state.withLock({ s -> Int? in
            if s.pumping.contains(batchId) {
                s.again.insert(batchId)
                return nil
            }
            s.pumping.insert(batchId)
            return s.session
        }) else { return }
        Task.detached {
            while true {
                await self.uploadQueued(batchId, composer, cache: cache)
                let more = self.state.withLock { s -> Bool in
                    guard s.session == session else { return false }
                    if s.again.remove(batchId) != nil { return true }
                    s.pumping.remove(batchId)
                    return false
                }
                guard more else { return }
            }
        }
    }

    /// Uploads the batch's queued files one at a time, from the copies, recording each outcome.
    /// Stops at the first lost connection (the rest fail with it), or when the cache closes.
    func uploadQueued(_ batchId: String, _ composer: UploadComposer, cache: VaultCache) async {
        while openCache === cache {
            let claimed: (UploadBatchRecord, UploadItemRecord)?
            do {
                claimed = try await cache.writer.run { db -> (UploadBatchRecord, UploadItemRecord)? in
                    try self.fixUpUploads(cache, db)
                    guard var record = try UploadBatchRows.load(composer, in: db), record.batchId == batchId,
                          let i = record.items.firstIndex(where: { $0.state == .queued }) else { return nil }
                    record.items[i].state = .uploading
                    record.items[i].error = nil
                    try UploadBatchRows.save(record, in: db)
                    return (record, record.items[i])
                }
            } catch {
                return
            }
            guard let (claimedRecord, item) = claimed else { return }
            deliverUploads(claimedRecord, batchId: batchId, changed: [item.fileId], cache: cache)

            var state = UploadFileState.uploaded
            var attachment: JSONValue?
            var failure: CometChatException?
            var lostConnection = false
            // Never the ciphertext: an encrypted copy is uploaded from its decrypted view.
            if let plaintext = media.plaintextCopyPath(item.copy ?? "", root: cache.directory.path) {
                do {
                    let answer = try await backend.uploadMedia(path: plaintext, name: item.name, mimeType: item.mime)
                    do {
                        attachment = try Acknowledgements.attachment(answer, limits: wireLimits)
                    } catch {
                        state = .rejected
                        failure = error
                    }
                } catch {
                    switch error {
                    case .unreachable:
                        state = .failed
                        failure = UploadErrors.offline
                        lostConnection = true
                    case .timedOut:
                        state = .failed
                        failure = UploadErrors.noAnswer
                    case .server(let status, let code, _):
                        // A temporary refusal (5xx, 429) may pass on a retry; any other will not.
                        state = error.isTransient ? .failed : .rejected
                        failure = CometChatException(errorCode: OfflineVault.safeCode(code), errorDescription: "The server refused the upload (status \(status)).")
                    }
                }
            } else {
                state = .rejected
                failure = OutgoingCopies.failure("the cache's copy can no longer be read")
            }
            let outcome = (state, attachment, failure, lostConnection)
            let recorded: (record: UploadBatchRecord, changed: [String], remove: [String])?
            do {
                recorded = try await cache.writer.run { db in
                    try db.transaction { () throws -> (record: UploadBatchRecord, changed: [String], remove: [String])? in
                        // Removed or cleared meanwhile: the answer is forgotten.
                        guard var record = try UploadBatchRows.load(composer, in: db), record.batchId == batchId,
                              let i = record.index(of: item.fileId), record.items[i].state == .uploading else { return nil }
                        record.items[i].state = outcome.0
                        record.items[i].attachment = outcome.1
                        record.items[i].error = outcome.2
                        var changed = [item.fileId]
                        var remove: [String] = []
                        if outcome.0 == .rejected, let copy = record.items[i].copy {
                            // It cannot be retried: its copy has no use left.
                            try UploadBatchRows.deleteMedia(record, item.fileId, in: db)
                            remove.append(copy)
                            record.items[i].copy = nil
                        }
                        if outcome.3 {
                            for j in record.items.indices where record.items[j].state == .queued {
                                record.items[j].state = .failed
                                record.items[j].error = UploadErrors.offline
                                changed.append(record.items[j].fileId)
                            }
                        }
                        try UploadBatchRows.save(record, in: db)
                        return (record, changed, remove)
                    }
                }
            } catch {
                return
            }
            if let recorded {
                OutgoingCopies.removeFiles(recorded.remove, in: cache.directory)
                deliverUploads(recorded.record, batchId: batchId, changed: recorded.changed, cache: cache)
            }
            if lostConnection { return }
        }
    }
}
