import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// The two caches `chatvault bench reads` reads, holding the same messages, each a real ChatVault
/// cache opened by an `OfflineVault` (with no server: `UnreachableBackend`, so every read is the
/// offline read of an app that lost its connection):
///
/// - `encrypted`: SQLCipher with a raw 256-bit key from a memory key store (the key store plays
///   no part in a read);
/// - `plaintext`: the same engine with `encryption: false`.
///
/// Both are seeded through the engine's own write-through (`MessageRows.writeThrough`: the wire
/// JSON validated, then written as a read's server phase writes it), then checkpointed. The
/// messages are synthetic: `messages` messages spread round-robin over `conversations` one-to-one
/// conversations with the benchmark user, one second apart, bodies of 40 to 220 characters of
/// filler text, a sender object on each, tags on every seventh and a mention on every eleventh;
/// every thirteenth an image with an attachment, every seventeenth deleted, every twenty-third a
/// thread reply (what a server sends, so the decoding and the filters are realistic).
///
/// `layout` is the order they are written in:
/// - `.sync` (the default): in time order across all conversations, 1,000 per transaction, as a
///   catch-up sync or a busy realtime stream writes them: a conversation's messages arrive
///   interleaved with everyone else's (schema 4 places each row in its conversation's cluster);
/// - `.conversation`: one conversation after the other, one transaction each (every
///   conversation's history fetched in turn): the easy case, where rows of a conversation are
///   written next to each other whatever the schema does.
final class ReadBenchFixture {
    /// Messages in a page.
    static let pageSize = 30
    /// The user the caches belong to.
    static let me = "bench-me"

    /// One cache and the engine serving it.
    struct Side {
        /// `encrypted` or `plaintext`.
        let id: String
        let vault: OfflineVault
        let cache: VaultCache
        /// `PRAGMA page_size` and `page_count` after seeding.
        let pageSizeBytes: Int
        let databasePages: Int
        /// Database, WAL and media bytes on disk after seeding.
        let bytesOnDisk: Int64
        /// How long seeding took, in seconds.
        let seedSeconds: Double
    }

    /// The order the caches were written in.
    enum Layout: String, CaseIterable {
        case sync
        case conversation
    }

    let messages: Int
    let conversations: Int
    let layout: Layout
    /// Rows a page holds (fewer than `pageSize` when conversations are smaller than a page).
    let expectedPageRows: Int
    let encrypted: Side
    let plaintext: Side

    private init(messages: Int, conversations: Int, layout: Layout, encrypted: Side, plaintext: Side) {
        self.messages = messages
        self.conversations = conversations
        self.layout = layout
        expectedPageRows = min(Self.pageSize, messages / conversations)
        self.encrypted = encrypted
        self.plaintext = plaintext
    }

    /// Builds both caches under `root` (an existing private directory).
    static func make(root: String, messages: Int, conversations: Int, layout: Layout) async throws -> ReadBenchFixture {
        let encrypted = try await side("encrypted", root: root, encryption: true, messages: messages, conversations: conversations, layout: layout)
        let plaintext = try await side("plaintext", root: root, encryption: false, messages: messages, conversations: conversations, layout: layout)
        return ReadBenchFixture(messages: messages, conversations: conversations, layout: layout, encrypted: encrypted, plaintext: plaintext)
    }

    /// Closes both caches (the files go with the temporary directory).
    func close() async {
        await encrypted.vault.logout()
        await plaintext.vault.logout()
    }

    static func peer(_ conversation: Int) -> String { String(format: "bench-peer-%04d", conversation) }

    /// The request of a first page: the 30 newest messages of one conversation.
    static func request(_ vault: OfflineVault, conversation: Int) -> MessagesRequest {
        MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: peer(conversation)).set(limit: pageSize).build()
    }

    /// The request of a filtered first page: no deleted messages, no thread replies, text and
    /// images only (what a chat screen that hides deleted messages and shows threads apart asks).
    static func filteredRequest(_ vault: OfflineVault, conversation: Int) -> MessagesRequest {
        MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: peer(conversation)).set(limit: pageSize)
            .hideDeletedMessages(hide: true).hideReplies(hide: true).set(types: ["text", "image"]).build()
    }

    private static func side(_ id: String, root: String, encryption: Bool, messages: Int, conversations: Int,
                             layout: Layout) async throws -> Side {
        let (vault, cache) = try await openBenchVault(id, root: root, encryption: encryption, user: me)
        let started = ContinuousClock.now
        let limits = vault.wireLimits
        try cache.writer.sync { db in
            switch layout {
            case .sync:
                for start in stride(from: 0, to: messages, by: 1000) {
                    let wire = (start..<min(start + 1000, messages)).map { i in richMessage(i, conversations: conversations) }
                    try db.transaction { try MessageRows.writeThrough(wire, me: me, limits: limits, in: db) }
                }
            case .conversation:
                for c in 0..<conversations {
                    let wire = stride(from: c, to: messages, by: conversations).map { i in richMessage(i, conversations: conversations) }
                    try db.transaction { try MessageRows.writeThrough(wire, me: me, limits: limits, in: db) }
                }
            }
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        let seedSeconds = (ContinuousClock.now - started).milliseconds / 1_000
        let (pageSize, pages, rows) = try cache.reader.sync { db in
            (Int(try db.scalarInt("PRAGMA page_size") ?? 0), Int(try db.scalarInt("PRAGMA page_count") ?? 0),
             Int(try db.scalarInt("SELECT count(*) FROM messages") ?? 0))
        }
        guard rows == messages else {
            throw CLIError.failure("the \(id) benchmark cache holds \(rows) messages after seeding, not \(messages)")
        }
        return Side(id: id, vault: vault, cache: cache, pageSizeBytes: pageSize, databasePages: pages,
                    bytesOnDisk: cache.bytesOnDisk(), seedSeconds: seedSeconds)
    }

    /// Message number `i` (0-based, in time order) as a server sends it; it belongs to conversation
    /// `conversation`. Every third one is the benchmark user's own.
    static func message(_ i: Int, conversation: Int) -> JSONValue {
        let peer = peer(conversation)
        let mine = i % 3 == 0
        let sender = mine ? me : peer
        let sentAt = 1_700_000_000 + i
        var fields: [String: JSONValue] = [
            "id": .int(Int64(i + 1)),
            "conversationId": .string(ConversationID.direct(me, peer).rawValue),
            "sender": user(sender),
            "receiver": .string(mine ? peer : me),
            "receiverType": "user",
            "category": "message",
            "type": "text",
            "sentAt": .int(Int64(sentAt)),
            "updatedAt": .int(Int64(sentAt)),
            "data": .object(["text": .string(body(i))]),
        ]
        if mine {
            fields["deliveredAt"] = .int(Int64(sentAt + 1))
            fields["readAt"] = .int(Int64(sentAt + 2))
        } else {
            fields["deliveredToMeAt"] = .int(Int64(sentAt + 1))
            if i % 5 != 0 { fields["readByMeAt"] = .int(Int64(sentAt + 2)) }
        }
        if i % 7 == 0 { fields["tags"] = ["bench", "synthetic"] }
        if i % 11 == 0 {
            fields["mentionedUsers"] = .array([user(mine ? peer : me)])
            fields["mentionedMe"] = .bool(!mine)
        }
        return .object(fields)
    }

    /// Message number `i` of a fixture with `conversations` conversations (it belongs to
    /// conversation `i % conversations`), as `message(_:conversation:)` makes it, and besides:
    /// every thirteenth an image with an attachment, every seventeenth deleted, every
    /// twenty-third a reply in the thread of its conversation's message before it.
    static func richMessage(_ i: Int, conversations: Int) -> JSONValue {
        guard case .object(var fields) = message(i, conversation: i % conversations) else { return .null }
        let sentAt = 1_700_000_000 + i
        if i % 13 == 0 {
            fields["type"] = "image"
            fields["data"] = .object(["caption": .string(body(i)), "attachments": .array([.object([
                "name": .string("photo-\(i).jpg"), "extension": "jpg", "mimeType": "image/jpeg",
                "url": .string("https://media.bench.test/\(i)/photo.jpg"), "size": .int(Int64(20_000 + i % 50_000)),
            ])])])
        }
        if i % 17 == 0 {
            fields["deletedAt"] = .int(Int64(sentAt + 60))
            fields["deletedBy"] = fields["sender"]?["uid"] ?? .null
        }
        if i % 23 == 0, i >= conversations {
            fields["parentId"] = .int(Int64(i - conversations + 1))
        }
        return .object(fields)
    }

    static func user(_ uid: String) -> JSONValue {
        .object([
            "uid": .string(uid), "name": .string(uid.replacingOccurrences(of: "-", with: " ").capitalized),
            "avatar": .string("https://avatars.bench.test/\(uid).png"), "status": "offline",
            "blockedByMe": false, "hasBlockedMe": false, "tags": [],
        ])
    }

    /// 40 to 220 characters of filler text (ASCII).
    static func body(_ i: Int) -> String {
        let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt "
        let length = 40 + (i &* 37) % 181
        var text = "bench message \(i): "
        while text.utf8.count < length { text += filler }
        return String(text.prefix(length))
    }
}

/// A benchmark's engine over a cache of its own (`<root>/<id>`), opened for `user`, encrypted or
/// not, key in memory: caps at their largest, no byte budget and no scheduled eviction, so the
/// cache holds exactly what the benchmark writes. Throws when it does not open as asked.
func openBenchVault(_ id: String, root: String, encryption: Bool, user: String, backend: any ChatBackend = UnreachableBackend(),
                    mediaCaching: MediaCachingMode = .auto,
                    adjust: (inout VaultSettings) -> Void = { _ in }) async throws -> (OfflineVault, VaultCache) {
    let config = OfflineConfig(enabled: true, encryption: encryption, maxStorageSize: 0, maxMessagesPerConversation: 1000,
                               maxConversations: 1000, maxMediaCacheSize: 0, mediaCaching: mediaCaching)
    var settings = VaultSettings(applicationId: "org.chatvault.bench", rootDirectory: "\(root)/\(id)",
                                 keyStorage: [.custom(MemoryKeyStore())], callbackExecutor: .queue(DispatchQueue(label: "chatvault.bench.\(id)")),
                                 retry: .manualOnly)
    settings.evictionDelay = .seconds(365 * 86_400)
    adjust(&settings)
    let vault: OfflineVault
    do {
        vault = try OfflineVault(config: config, settings: settings, backend: backend)
    } catch {
        throw CLIError.failure("cannot set up the \(id) benchmark engine: \(error)")
    }
    let attempt = await vault.login(userId: user)
    guard let cache = vault.openCache else {
        throw CLIError.failure("the \(id) benchmark cache did not open: \(attempt.state.code)" + (attempt.state.detail.map { " (\($0))" } ?? ""))
    }
    guard cache.isEncrypted == encryption else {
        await vault.logout()
        throw CLIError.failure("the \(id) benchmark cache is \(cache.isEncrypted ? "encrypted" : "not encrypted"), which is not what it must be")
    }
    return (vault, cache)
}
