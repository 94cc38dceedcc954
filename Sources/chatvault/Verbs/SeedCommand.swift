import ChatVault
import Dispatch
import Foundation
import VaultKeys
import VaultStore

/// `chatvault seed --dir D --user U [--messages N] [--pending P] [--encryption on|off]
///  [--keystore …] [--marker TEXT]`: creates or fills a cache as an app would.
enum SeedCommand {
    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let messages = try args.int("messages", default: 100, range: 0...10_000_000)
        let pending = try args.int("pending", default: 0, range: 0...100_000)
        let conversations = try args.int("conversations", default: 10, range: 1...100_000)
        let encryption = try args.choice("encryption", default: "on", among: ["on", "off"]) == "on"
        let marker = args.string("marker") ?? CommonOptions.defaultMarker
        try args.rejectUnknown()

        let vault = try makeVault(common, root: root, encryption: encryption, behavior: .onlineOnly)
        let recorder = ResetRecorder()
        vault.addOfflineCacheResetListener("chatvault-seed", recorder)
        let attempt = await vault.login(userId: user)
        guard vault.isOfflineEnabled(), let cache = vault.openCache else {
            await vault.logout()
            throw CLIError.failure("cannot seed: the cache is \(attempt.state.outcome)" + (attempt.state.detail.map { " (\($0))" } ?? ""))
        }
        let started = Date()
        try cache.writer.sync { db in
            try Seeder.fill(db, messages: messages, pending: pending, conversations: conversations, marker: marker)
        }
        let counts = rowCounts(vault)
        let status = vault.offlineEncryptionStatus()
        await vault.logout()

        if common.json {
            emit(JSON.object([
                ("cacheId", .optional(attempt.cacheId)),
                ("encrypted", .bool(status.atRest == OfflineEncryptionTier.SQLCIPHER)),
                ("keyStorage", .string(status.keyStorage)),
                ("added", .object([("messages", .int(messages)), ("pending", .int(pending))])),
                ("messages", .int(counts?.messages ?? 0)),
                ("pending", .int(counts?.pending ?? 0)),
                ("resets", recorder.calls.json),
                ("milliseconds", .int(Int(Date().timeIntervalSince(started) * 1000))),
            ]).render())
        } else {
            emit("seeded cache \(attempt.cacheId ?? "?") (\(status.atRest), key \(status.keyStorage)): +\(messages) messages, +\(pending) pending; now \(counts?.messages ?? 0) messages, \(counts?.pending ?? 0) pending")
        }
        return 0
    }
}

/// Builds the engine for a CLI verb; callbacks go to a private queue (the CLI runs no main loop).
func makeVault(_ common: CommonOptions, root: String, encryption: Bool, behavior: EncryptionFailureBehavior,
               memory: MemoryKeyStore? = nil, retry: RetryPolicy = .manualOnly) throws -> OfflineVault {
    let config = OfflineConfig.Builder().setEnabled(true).setEncryption(encryption).setEncryptionFailureBehavior(behavior).build()
    let settings = VaultSettings(applicationId: common.applicationId, applicationName: "chatvault", rootDirectory: root,
                                 keyStorage: common.keyStorage(memory: memory),
                                 callbackExecutor: .queue(DispatchQueue(label: "chatvault.cli.callbacks")), retry: retry)
    do {
        return try OfflineVault(config: config, settings: settings)
    } catch {
        throw CLIError.usage(String(describing: error))
    }
}

/// Writes seed rows: conversations, messages whose bodies contain the marker, and unsent messages.
enum Seeder {
    static func fill(_ db: Database, messages: Int, pending: Int, conversations: Int, marker: String) throws {
        try db.transaction {
            let start = Int64(Date().timeIntervalSince1970)
            let firstServerId = (try db.scalarInt("SELECT max(server_id) FROM messages") ?? 0) + 1
            let ids = (0..<conversations).map { "user_seed\($0)" }
            try CacheRows.insert(ids.enumerated().map { i, id in
                CacheRows.Conversation(id: id, type: "user", peerId: "seed\(i)", lastMessageAt: start)
            }, into: db)
            var batch: [CacheRows.Message] = []
            batch.reserveCapacity(min(messages, 10_000))
            for i in 0..<messages {
                let conversation = i % conversations
                let id = firstServerId + Int64(i)
                let sentAt = start - Int64(messages - i)
                let body = "Seeded message \(i): \(marker)"
                batch.append(CacheRows.Message(serverId: id, localId: nil, conversationId: ids[conversation],
                                               senderId: "seed\(conversation)", receiverId: "me", receiverType: "user",
                                               sentAt: sentAt, body: body,
                                               payload: SeedPayloads.message(id: id, conversationId: ids[conversation], from: "seed\(conversation)",
                                                                             to: "me", sentAt: sentAt, text: body)))
                if batch.count == 10_000 {
                    try CacheRows.insert(batch, into: db)
                    batch.removeAll(keepingCapacity: true)
                }
            }
            try CacheRows.insert(batch, into: db)
            let seq = try CacheRows.nextOutboxSeq(db)
            try CacheRows.insert((0..<pending).map { i in
                CacheRows.OutboxEntry(localId: UUID().uuidString.lowercased(), seq: seq + Int64(i), conversationId: ids[i % conversations],
                                      kind: "text", state: 0, createdAt: (start + Int64(i)) * 1000,
                                      payload: SeedPayloads.outbox(text: "Unsent \(i): \(marker)", to: "seed\(i % conversations)", from: "me"))
            }, into: db)
        }
    }
}
