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
