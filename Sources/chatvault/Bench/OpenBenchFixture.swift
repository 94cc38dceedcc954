import Foundation
import VaultKeys
import VaultStore

/// The three databases `chatvault bench open` reads, holding the same rows, in a private
/// temporary directory:
///
/// - `cache/`: a real ChatVault cache made by `CacheOpener` (manifest, lock file, raw 256-bit key
///   in the chosen key store), seeded, then `VACUUM`ed;
/// - `passphrase.db`: `sqlcipher_export` of it under a passphrase (the hex digits of the cache key,
///   fetched from the same store item) through PBKDF2 × 256,000, 4096-byte pages;
/// - `plaintext.db`: `sqlcipher_export` of it with no key.
///
/// VACUUM and sqlcipher_export rebuild a database the same way (schema and indexes first, then
/// the rows in rowid order), so the three files have the same page layout. All three are in WAL
/// mode, as ChatVault's caches are. (An encrypted file may need a page more than the plaintext
/// one: SQLCipher reserves 48 bytes of each page for the IV and the HMAC.) The message bodies are
/// synthetic filler text.
final class OpenBenchFixture {
    /// Messages in a first page.
    static let firstPageSize = 30
    /// At most this many conversations (fewer for small `--messages`, so a page stays full).
    static let maxConversations = 10

    let store: any KeyStore
    let configuration: StoreConfiguration
    let itemID: KeyItemID
    let profile: CipherProfile
    let cachePath: String
    let passphrasePath: String
    let plaintextPath: String
    let messages: Int
    let conversations: Int
    /// The conversation whose first page every design reads.
    let conversationId: String
    let expectedPageRows: Int
    /// `PRAGMA page_count` of the raw-key, passphrase and plaintext databases.
    let pages: (rawKey: Int, passphrase: Int, plaintext: Int)
    /// Whether the full open procedure runs `quick_check` (the cache is within its size limit).
    let quickCheckDuringOpen: Bool
    let cipherDefaults: PassphraseKeying.Defaults

    private init(store: any KeyStore, configuration: StoreConfiguration, itemID: KeyItemID, profile: CipherProfile,
                 root: String, messages: Int, conversations: Int, pages: (Int, Int, Int), quickCheckDuringOpen: Bool,
                 cipherDefaults: PassphraseKeying.Defaults) {
        self.store = store
        self.configuration = configuration
        self.itemID = itemID
        self.profile = profile
        cachePath = configuration.directory.database
        passphrasePath = "\(root)/passphrase.db"
        plaintextPath = "\(root)/plaintext.db"
        self.messages = messages
        self.conversations = conversations
        conversationId = Self.conversationId(0)
        expectedPageRows = min(Self.firstPageSize, (messages + conversations - 1) / conversations)
        self.pages = pages
        self.quickCheckDuringOpen = quickCheckDuringOpen
        self.cipherDefaults = cipherDefaults
    }

    /// Builds the three databases under `root` (an existing private directory). On failure the
    /// key item it stored is deleted again.
    static func make(root: String, store: any KeyStore, applicationId: String, messages: Int) throws -> OpenBenchFixture {
        let account = CacheDirectory.account(applicationId: applicationId, userId: "chatvault-bench")
        let configuration = StoreConfiguration(
            directory: CacheDirectory(path: "\(root)/cache"), applicationId: applicationId, account: account,
            keyLabel: "chatvault bench throwaway cache key", encryption: true, failureBehavior: .onlineOnly, keyStores: [store])
        let report = CacheOpener.open(configuration)
        guard report.outcome == .ready, report.resets.isEmpty, let cache = report.cache else {
            report.cache?.close()
            throw CLIError.failure("cannot create the encrypted benchmark cache with the \(store.name) key store: \(describe(report.outcome))")
        }
        let itemID = KeyItemID(applicationId: applicationId, account: account, cacheId: cache.cacheId)
        do {
            guard cache.isEncrypted else { throw CLIError.failure("the benchmark cache could not be proven encrypted") }
            let conversations = max(1, min(maxConversations, messages / firstPageSize))
            let passphrasePath = "\(root)/passphrase.db"
            let plaintextPath = "\(root)/plaintext.db"
            try createPrivateFile(passphrasePath)
            try createPrivateFile(plaintextPath)
            var passphrase = try passphraseBytes(store: store, itemID: itemID)
            defer { wipe(&passphrase) }

            let (pages, defaults) = try cache.writer.sync { db -> ((Int, Int, Int), PassphraseKeying.Defaults) in
                try seed(db, messages: messages, conversations: conversations)
                try db.execute("VACUUM")
                let version = try db.scalarInt("PRAGMA user_version") ?? 0
                let defaults = try PassphraseKeying.currentDefaults(db)

                try PassphraseKeying.attach(db, path: passphrasePath, as: "passphrase", passphrase: passphrase, restoring: defaults)
                try db.execute("SELECT sqlcipher_export('passphrase')")
                try db.execute("PRAGMA passphrase.user_version = \(version)")
                _ = try db.scalarText("PRAGMA passphrase.journal_mode = WAL")
                // Prove the passphrase database really has the settings we claim to measure.
                let iterations = try db.scalarText("PRAGMA passphrase.kdf_iter")
                let pageSize = try db.scalarText("PRAGMA passphrase.cipher_page_size")
                guard iterations == String(PassphraseKeying.iterations), pageSize == String(PassphraseKeying.pageSize) else {
                    throw CLIError.failure("the passphrase database got kdf_iter \(iterations ?? "nil") and page size \(pageSize ?? "nil"), expected \(PassphraseKeying.iterations) and \(PassphraseKeying.pageSize)")
                }

                try PassphraseKeying.attachPlaintext(db, path: plaintextPath, as: "plaintext")
                try db.execute("SELECT sqlcipher_export('plaintext')")
                try db.execute("PRAGMA plaintext.user_version = \(version)")
                _ = try db.scalarText("PRAGMA plaintext.journal_mode = WAL")

                let pages = (Int(try db.scalarInt("PRAGMA main.page_count") ?? 0),
                             Int(try db.scalarInt("PRAGMA passphrase.page_count") ?? 0),
                             Int(try db.scalarInt("PRAGMA plaintext.page_count") ?? 0))
                try db.execute("DETACH DATABASE passphrase")
                try db.execute("DETACH DATABASE plaintext")
                return (pages, defaults)
            }
            let profile = cache.manifest.cipherProfile ?? .standard()
            cache.close()

            guard CipherProof.header(of: passphrasePath) == .opaque, CipherProof.header(of: plaintextPath) == .plaintext,
                  CipherProof.header(of: configuration.directory.database) == .opaque else {
                throw CLIError.failure("the benchmark databases are not keyed as intended (file headers disagree)")
            }
            let size = fileSize(configuration.directory.database) + fileSize(configuration.directory.wal)
            let limit = configuration.synchronousIntegrityCheckLimit
            return OpenBenchFixture(store: store, configuration: configuration, itemID: itemID, profile: profile, root: root,
                                    messages: messages, conversations: conversations, pages: pages,
                                    quickCheckDuringOpen: limit >= 0 && size <= limit, cipherDefaults: defaults)
        } catch {
            cache.close()
            try? store.delete(itemID)
            throw error
        }
    }

    /// Deletes the benchmark's key item from its store (the files go with the temporary directory).
    func removeKey() {
        try? store.delete(itemID)
    }

    // MARK: - The designs (each returns what it read; work after the last lap is not timed)

    /// Ours: key from the store, raw-key open through `DatabaseQueue`, schema check, first page.
    func openRawKey(_ watch: inout Stopwatch) throws -> PageDigest {
        let key = try lookUpKey()
        watch.lap("keyLookup")
        let queue = try DatabaseQueue(path: cachePath, keying: .encrypted(key, profile), options: ConnectionOptions(), label: "bench.rawKey")
        watch.lap("keyedOpen")
        defer { queue.close() }
        return try readFirstPage(queue, schema: "main", watch: &watch)
    }

    /// Ours, the whole way an app opens a cache: `CacheOpener.open` (directory and file checks,
    /// lock, manifest, key lookup and key check, writer with schema check and `quick_check` on
    /// small caches, cipher proof, reader), then the first page on the reader.
    func openFullProcedure(_ watch: inout Stopwatch) throws -> PageDigest {
        let report = CacheOpener.open(configuration)
        guard report.outcome == .ready, report.resets.isEmpty, let cache = report.cache else {
            report.cache?.close()
            throw CLIError.failure("the open procedure answered \(Self.describe(report.outcome))" + (report.resets.isEmpty ? "" : " with a reset"))
        }
        watch.lap("openProcedure")
        defer { cache.close() }
        return try cache.reader.sync { db in
            let digest = try BenchQueries.firstPage(db, schema: "main", conversationId: conversationId, limit: Self.firstPageSize)
            watch.lap("firstPage")
            return digest
        }
    }

    /// The passphrase design: the same key lookup, then a passphrase keyed open through PBKDF2 ×
    /// 256,000, schema check, first page.
    func openPassphrase(_ watch: inout Stopwatch) throws -> PageDigest {
        var passphrase = try Self.passphraseBytes(store: store, itemID: itemID)
        defer { wipe(&passphrase) }
        watch.lap("keyLookup")
        var options = ConnectionOptions()
        options.readOnly = true  // the main database is an empty :memory: one, which has no WAL mode
        let queue = try DatabaseQueue(path: ":memory:", keying: .plaintext, options: options, label: "bench.passphrase")
        defer { queue.close() }
        return try queue.sync { db in
            try PassphraseKeying.attach(db, path: passphrasePath, as: "passphrase", passphrase: passphrase, restoring: cipherDefaults)
            try db.execute("PRAGMA passphrase.cache_size = -\(options.pageCacheKiB)")
            watch.lap("keyedOpen")
            try BenchQueries.checkSchema(db, schema: "passphrase")
            watch.lap("schemaCheck")
            let digest = try BenchQueries.firstPage(db, schema: "passphrase", conversationId: conversationId, limit: Self.firstPageSize)
            watch.lap("firstPage")
            return digest
        }
    }

    /// No encryption: plain open through `DatabaseQueue`, schema check, first page.
    func openPlaintext(_ watch: inout Stopwatch) throws -> PageDigest {
        let queue = try DatabaseQueue(path: plaintextPath, keying: .plaintext, options: ConnectionOptions(), label: "bench.plaintext")
        watch.lap("open")
        defer { queue.close() }
        return try readFirstPage(queue, schema: "main", watch: &watch)
    }

    private func readFirstPage(_ queue: DatabaseQueue, schema: String, watch: inout Stopwatch) throws -> PageDigest {
        try queue.sync { db in
            try BenchQueries.checkSchema(db, schema: schema)
            watch.lap("schemaCheck")
            let digest = try BenchQueries.firstPage(db, schema: schema, conversationId: conversationId, limit: Self.firstPageSize)
            watch.lap("firstPage")
            return digest
        }
    }

    private func lookUpKey() throws -> CacheKey {
        try Self.lookUpKey(store: store, itemID: itemID)
    }

    // MARK: - Helpers

    static func lookUpKey(store: any KeyStore, itemID: KeyItemID) throws -> CacheKey {
        switch store.lookup(itemID) {
        case .found(let key, _): return key
        case .absent: throw CLIError.failure("the benchmark key is no longer in the \(store.name) key store")
        case .unavailable(let reason): throw CLIError.failure("the \(store.name) key store became unavailable (\(reason.rawValue))")
        }
    }

    /// The passphrase of the comparison design: the cache key's 64 hex digits, used as text (without
    /// the `x'…'` wrapper SQLCipher reads them as a passphrase and runs the KDF). Wipe it after use.
    static func passphraseBytes(store: any KeyStore, itemID: KeyItemID) throws -> [UInt8] {
        let key = try lookUpKey(store: store, itemID: itemID)
        return key.withHexDigits { Array($0) }
    }

    static func conversationId(_ index: Int) -> String { "bench-conversation-\(index)" }

    /// Deterministic synthetic rows: `messages` round-robin over `conversations`, one second apart,
    /// bodies of 40 to 220 characters of filler text.
    static func seed(_ db: Database, messages: Int, conversations: Int) throws {
        let start: Int64 = 1_700_000_000
        try db.transaction {
            try CacheRows.insert((0..<conversations).map { c in
                CacheRows.Conversation(id: conversationId(c), type: "user", peerId: "bench-peer-\(c)", lastMessageAt: start + Int64(messages))
            }, into: db)
            var batch: [CacheRows.Message] = []
            batch.reserveCapacity(min(messages, 5_000))
            for i in 0..<messages {
                let c = i % conversations
                let incoming = i % 3 != 0
                batch.append(CacheRows.Message(
                    serverId: Int64(i + 1), localId: nil, conversationId: conversationId(c),
                    senderId: incoming ? "bench-peer-\(c)" : "bench-me", receiverId: incoming ? "bench-me" : "bench-peer-\(c)",
                    receiverType: "user", sentAt: start + Int64(i), body: body(i)))
                if batch.count == 5_000 {
                    try CacheRows.insert(batch, into: db)
                    batch.removeAll(keepingCapacity: true)
                }
            }
            try CacheRows.insert(batch, into: db)
        }
    }

    static func body(_ i: Int) -> String {
        let filler = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt "
        let length = 40 + (i &* 37) % 181
        var text = "bench message \(i): "
        while text.utf8.count < length { text += filler }
        return String(text.prefix(length))  // ASCII: characters are bytes
    }

    static func describe(_ outcome: OpenReport.Outcome) -> String {
        switch outcome {
        case .ready: return "ready"
        case .unavailable(let reason): return "unavailable: \(reason.description)"
        case .onlineOnly(let why): return "onlineOnly: \(why.description)"
        case .plaintextFallback(let why): return "plaintextFallback: \(why.description)"
        }
    }

    /// Creates `path` as an empty 0600 file, so SQLite (and the WAL and shm files it derives from
    /// it) never use a wider mode.
    static func createPrivateFile(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CLIError.failure("cannot create \(path) (errno \(errno))") }
        close(fd)
    }

    static func fileSize(_ path: String) -> Int64 {
        var st = stat()
        return lstat(path, &st) == 0 ? Int64(st.st_size) : 0
    }
}
