import Foundation
import Synchronization
import VaultStore

// Upload batches (`UploadFileRequest`): one per composer, kept in the cache's `kv` table as one
// row per batch (`upload-batch|<type>|<parent>|<receiver>` → the batch, BinaryJSON). A batch is
// small (a composer's handful of files), always read and written whole, and found only by its
// composer, so it needs no table of its own: no migration, and `clearOfflineCache` (which empties
// `kv`) ends every batch with the rest of the cache. Its copies live under
// `outgoing/upload-<batch id>/<n>` and each has a `media` row (`outgoing = 1`, owner
// `upload-<batch id>`), so they count toward `maxMediaCacheSize` and are never evicted.

/// One file of a batch as the cache keeps it.
struct UploadItemRecord: Sendable {
    let fileId: String
    let name: String
    /// The app's original path (never read again after the copy).
    let original: String
    let size: Int64
    let mime: String
    var state: UploadFileState
    /// The copy, relative to the cache directory; nil once there is none (rejected).
    var copy: String?
    /// The server's answer (`.uploaded`).
    var attachment: JSONValue?
    var error: CometChatException?

    var json: JSONValue {
        var fields: [String: JSONValue] = ["id": .string(fileId), "name": .string(name), "original": .string(original),
                                           "size": .int(size), "mime": .string(mime), "state": .string(state.rawValue)]
        if let copy { fields["copy"] = .string(copy) }
        if let attachment { fields["attachment"] = attachment }
        if let error { fields["error"] = .object(["code": .string(error.errorCode), "message": .string(error.errorDescription)]) }
        return .object(fields)
    }

    init(fileId: String, name: String, original: String, size: Int64, mime: String, state: UploadFileState, copy: String?,
         attachment: JSONValue? = nil, error: CometChatException? = nil) {
        self.fileId = fileId
        self.name = name
        self.original = original
        self.size = size
        self.mime = mime
        self.state = state
        self.copy = copy
        self.attachment = attachment
        self.error = error
    }

    init?(_ json: JSONValue) {
        guard let id = json["id"]?.stringValue, let state = json["state"]?.stringValue.flatMap(UploadFileState.init(rawValue:)) else { return nil }
        var error: CometChatException?
        if let code = json["error"]?["code"]?.stringValue {
            error = CometChatException(errorCode: code, errorDescription: json["error"]?["message"]?.stringValue ?? "")
        }
        self.init(fileId: id, name: json["name"]?.stringValue ?? "", original: json["original"]?.stringValue ?? "",
                  size: json["size"]?.intValue ?? 0, mime: json["mime"]?.stringValue ?? "application/octet-stream", state: state,
                  copy: json["copy"]?.stringValue, attachment: json["attachment"].flatMap { $0.isNull ? nil : $0 }, error: error)
    }

    /// Waiting for, or in, an upload.
    var isActive: Bool { state == .queued || state == .uploading }
}

/// A batch as the cache keeps it.
struct UploadBatchRecord: Sendable {
    let batchId: String
    let composer: UploadComposer
    let createdAt: Int64
    /// The next copy's number (copies are never renumbered).
    var nextIndex: Int
    var items: [UploadItemRecord]

    /// The `media` rows' owner and the copies' folder name.
    var owner: String { "upload-\(batchId)" }
    var folder: String { "outgoing/\(owner)" }

    var json: JSONValue {
        .object(["id": .string(batchId), "receiverId": .string(composer.receiverId), "receiverType": .string(composer.receiverType.rawValue),
                 "parentId": .int(Int64(composer.parentMessageId)), "createdAt": .int(createdAt), "next": .int(Int64(nextIndex)),
                 "items": .array(items.map(\.json))])
    }

    init(batchId: String, composer: UploadComposer, createdAt: Int64, nextIndex: Int, items: [UploadItemRecord]) {
        self.batchId = batchId
        self.composer = composer
        self.createdAt = createdAt
        self.nextIndex = nextIndex
        self.items = items
    }

    init?(_ json: JSONValue) {
        guard let id = json["id"]?.stringValue, OutgoingCopies.isSafeComponent("upload-" + id), let receiver = json["receiverId"]?.stringValue,
              let type = json["receiverType"]?.stringValue.flatMap(ReceiverType.init(rawValue:)) else { return nil }
        self.init(batchId: id, composer: UploadComposer(receiverId: receiver, receiverType: type, parentMessageId: Int(json["parentId"]?.intValue ?? 0)),
                  createdAt: json["createdAt"]?.intValue ?? 0, nextIndex: Int(json["next"]?.intValue ?? 0),
                  items: (json["items"]?.arrayValue ?? []).compactMap(UploadItemRecord.init))
    }

    func index(of fileId: String) -> Int? { items.firstIndex { $0.fileId == fileId } }
}

/// The batches' SQL (kv rows and their copies' media rows). Every function runs on the writer.
enum UploadBatchRows {
    static let keyPrefix = "upload-batch|"

    static func load(_ composer: UploadComposer, in db: Database) throws -> UploadBatchRecord? {
        let stmt = try db.cached("SELECT value FROM kv WHERE key = ?")
        try stmt.bind([.text(composer.key)])
        defer { stmt.reset() }
        guard try stmt.step(), let bytes = stmt.blob(0) else { return nil }
        return UploadBatchRecord(try BinaryJSON.decode(bytes))
    }

    static func all(in db: Database) throws -> [UploadBatchRecord] {
        let stmt = try db.prepare("SELECT value FROM kv WHERE substr(key, 1, \(keyPrefix.utf8.count)) = ? ORDER BY key")
        try stmt.bind([.text(keyPrefix)])
        var records: [UploadBatchRecord] = []
        while try stmt.step() {
            if let bytes = stmt.blob(0), let value = try? BinaryJSON.decode(bytes), let record = UploadBatchRecord(value) { records.append(record) }
        }
        return records
    }

    static func save(_ record: UploadBatchRecord, in db: Database) throws {
        try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(record.composer.key), .blob(BinaryJSON.encode(record.json)))
    }

    /// Deletes the batch and its copies' media rows (the files are the caller's to remove).
    static func delete(_ record: UploadBatchRecord, in db: Database) throws {
        try db.run("DELETE FROM kv WHERE key = ?", .text(record.composer.key))
        try db.run("DELETE FROM media WHERE outgoing = 1 AND message_id = ?", .text(record.owner))
    }

    static func mediaKey(_ record: UploadBatchRecord, _ fileId: String) -> String { "upload:\(record.batchId):\(fileId)" }

    static func deleteMedia(_ record: UploadBatchRecord, _ fileId: String, in db: Database) throws {
        try db.run("DELETE FROM media WHERE url_key = ?", .text(mediaKey(record, fileId)))
    }
}

/// The upload batches' in-memory state; the batches themselves are kv rows in the cache.
final class UploadCore: Sendable {
    /// Someone waiting for files to settle: an `upload` call or a `retryAttachment`.
    struct Watcher: Sendable {
        let batchId: String
        let fileIds: [String]
        let onItem: @Sendable (UploadFileItemStatus) -> Void
        let onDone: @Sendable ([UploadFileItemStatus]) -> Void
        let onError: @Sendable (CometChatException) -> Void
    }

    struct State {
        /// Batches being uploaded now (one pump each), and those to go over again when done.
        var pumping: Set<String> = []
        var again: Set<String> = []
        var watchers: [Int: Watcher] = [:]
        var nextWatcher = 0
        /// Bumped by every logout and login: an older session's pumps stop touching this state.
        var session = 0
        /// The open cache whose batches were looked over for uploads a stop interrupted.
        var fixedUp: ObjectIdentifier?
        /// Files added in this session (the others are restored).
        var addedHere: Set<String> = []
    }

    let state = Mutex(State())
    /// A batch's structure (adding files, removing them, ending it) changes one call at a time,
    /// in call order, so copies are never written into a folder being deleted.
    let admission = DispatchQueue(label: "chatvault.uploads.admission")
}

extension OfflineVault {
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
        let watcher = UploadCore.Watcher(batchId: "", fileIds: [], onItem: onItem, onDone: onComplete, onError: onError)
        uploads.admission.async { self.admitUploads(request, files: files, watcher: watcher) }
    }

    /// Copies the files, then commits them to the composer's batch in one transaction (the byte
    /// budget per file), then reports them and starts the uploads. On the admission queue.
    private func admitUploads(_ request: UploadFileRequest, files: [URL], watcher template: UploadCore.Watcher) {
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
        let copyKey = outgoingCopyKey(cache)
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
                self.uploads.state.withLock { s in
                    s.addedHere.formUnion(ids)
                    s.watchers[s.nextWatcher] = UploadCore.Watcher(batchId: batchId, fileIds: ids, onItem: template.onItem,
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
        guard let session = uploads.state.withLock({ s -> Int? in
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
                let more = self.uploads.state.withLock { s -> Bool in
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
    private func uploadQueued(_ batchId: String, _ composer: UploadComposer, cache: VaultCache) async {
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
            if let plaintext = plaintextCopyPath(item.copy ?? "", root: cache.directory.path) {
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
                        failure = CometChatException(errorCode: Self.safeCode(code), errorDescription: "The server refused the upload (status \(status)).")
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
                UploadCore.Watcher(batchId: batchId, fileIds: [fileId], onItem: { _ in }, onDone: { items in
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
                        self.uploads.state.withLock { s in
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
                self.uploads.state.withLock { _ = $0.addedHere.remove(fileId) }
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
    func uploadsSent(_ wire: JSONValue, messageId: Int) {
        guard let receiver = wire["receiver"]?.stringValue, let type = wire["receiverType"]?.stringValue.flatMap(ReceiverType.init(rawValue:)),
              let cache = openCache else { return }
        let urls = Set((wire["data"]?["attachments"]?.arrayValue ?? []).compactMap { $0["url"]?.stringValue })
        guard !urls.isEmpty else { return }
        let composer = UploadComposer(receiverId: receiver, receiverType: type, parentMessageId: Int(wire["parentId"]?.intValue ?? 0))
        uploads.admission.async {
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
            self.adoptCopies(changed.sent.compactMap { item -> KeptCopy? in
                guard let copy = item.copy, let url = item.attachment?["url"]?.stringValue else { return nil }
                return KeptCopy(relativePath: copy, url: url, size: item.size, mime: item.mime)
            }, messageId: messageId, cache: cache)
            for item in changed.sent { if let copy = item.copy { self.removeCopyView(copy) } }
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

    /// Re-attaches to the upload batch kept for a composer (`getExistingUploadFileRequest`).
    /// Returns nil when offline support is not running, nobody is logged in, or no batch was
    /// kept for that composer. Reads the cache.
    ///
    ///     if let request = vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0) {
    ///         for item in request.getItems() where item.state == .failed { request.retryAttachment(fileId: item.fileId) }
    ///     }
    /// - Parameter parentMessageId: 0 for the main composer, the thread parent's id for a thread's.
    public func getExistingUploadFileRequest(receiverId: String, receiverType: ReceiverType, parentMessageId: Int) -> UploadFileRequest? {
        guard userId != nil, let cache = openCache else { return nil }
        let composer = UploadComposer(receiverId: receiverId, receiverType: receiverType, parentMessageId: parentMessageId)
        guard let record = try? loadUploadBatch(composer, cache: cache), !record.items.isEmpty else { return nil }
        return UploadFileRequest(vault: self, receiverId: receiverId, receiverType: receiverType, parentMessageId: parentMessageId,
                                 files: [], batchId: record.batchId)
    }

    /// A composer's batch, read through the reader once this cache's interrupted uploads were
    /// turned `.failed`.
    private func loadUploadBatch(_ composer: UploadComposer, cache: VaultCache) throws -> UploadBatchRecord? {
        if uploads.state.withLock({ $0.fixedUp != ObjectIdentifier(cache) }) {
            try cache.writer.sync { db in try self.fixUpUploads(cache, db) }
        }
        return try cache.reader.sync { db in try UploadBatchRows.load(composer, in: db) }
    }

    func uploadStatus(_ item: UploadItemRecord, directory: String) -> UploadFileItemStatus {
        let copy = item.copy.map { plaintextCopyPath($0, root: directory) ?? directory + "/" + $0 }
        var attachment: Attachment?
        if item.state == .uploaded, let json = item.attachment {
            attachment = try? WireDecoder(limits: wireLimits, trusted: true).attachment(json, path: "attachment")
            attachment?.localPath = copy
        }
        let restored = uploads.state.withLock { !$0.addedHere.contains(item.fileId) }
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
        let (notices, done) = uploads.state.withLock { s -> ([(UploadCore.Watcher, UploadFileItemStatus)], [(UploadCore.Watcher, [UploadFileItemStatus])]) in
            var notices: [(UploadCore.Watcher, UploadFileItemStatus)] = []
            var done: [(UploadCore.Watcher, [UploadFileItemStatus])] = []
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
        let dropped = uploads.state.withLock { s -> [UploadCore.Watcher] in
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
        guard uploads.state.withLock({ $0.fixedUp != id }) else { return }
        try db.transaction {
            for var record in try UploadBatchRows.all(in: db) where record.items.contains(where: \.isActive) {
                for i in record.items.indices where record.items[i].isActive {
                    record.items[i].state = .failed
                    record.items[i].error = UploadErrors.interrupted
                }
                try UploadBatchRows.save(record, in: db)
            }
        }
        uploads.state.withLock { $0.fixedUp = id }
    }

    /// A cache became active: interrupted uploads become `.failed`, and copies and media rows of
    /// batches that no longer exist (a crash between a commit and a cleanup) are removed.
    func uploadsAttached(_ cache: VaultCache) {
        uploads.admission.async {
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
    func uploadsDetached() {
        uploads.state.withLock { s in
            s.session += 1
            s.pumping = []
            s.again = []
            s.fixedUp = nil
            s.addedHere = []
        }
        dropUploadWatchers(batchId: nil, UploadErrors.stopped)
    }

    /// `clearOfflineCache` ended every batch (its kv rows and the outgoing folder are gone).
    func uploadsCleared() {
        dropUploadWatchers(batchId: nil, UploadErrors.cleared)
    }

    // MARK: - Helpers

    /// The open cache for an upload operation, or the refusal.
    func uploadCache() throws(CometChatException) -> VaultCache {
        switch state {
        case .ready, .plaintextFallback:
            if let cache = openCache { return cache }
            throw UploadErrors.unavailable
        case .opening, .unavailable:
            throw UploadErrors.unavailable
        case .loggedOut, .disabled, .onlineOnly:
            throw UploadErrors.disabled
        }
    }

    private func onUploadQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            uploads.admission.async { continuation.resume(returning: body()) }
        }
    }

    /// The composer's batch is not the one copied for (cannot happen while structure changes
    /// run on the admission queue; refused rather than mixing two batches).
    private struct BatchChanged: Error {}

    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }
}
