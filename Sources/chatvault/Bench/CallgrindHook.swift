import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// The hidden verb `Scripts/callgrind` runs under valgrind, so that the cost of the open and of a
/// cached page read shows as an instruction count (repeatable on a noisy machine, unlike a time):
///
///     chatvault __callgrind-hook seed  --dir D --user U --kind open|reads [--messages N] [--conversations C]
///     chatvault __callgrind-hook raw   --dir D --user U       # bare raw-key open + first page
///     chatvault __callgrind-hook login --dir D --user U       # OfflineVault.login → ready
///     chatvault __callgrind-hook pages --dir D --user U [--reads R]   # MessageRows.cachedPage × R
///
/// Keys live in the file store under `D/keys`, caches under `D/caches`. Each measured part runs
/// between two calls of one empty marker function, `callgrindMark()`, and the script dumps the
/// counters on every call (`--dump-before='*callgrindMark*'`): part 1 is start-up and set-up,
/// part 2 is the measured work, the last part the rest (logout, exit). (One marker, not a start
/// and an end: the linker folds two identical empty functions into one.) The counters cover
/// every thread, as the open runs on several queues.
///
/// Prints no key material and no message text.
enum CallgrindHook {
    static let verb = "__callgrind-hook"

    static func run(_ raw: [String]) async throws -> Int32 {
        guard let action = raw.first else { throw CLIError.usage("\(verb) needs seed, raw, login or pages") }
        var args = try Arguments(Array(raw.dropFirst()))
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let options = CommonOptions(json: false, applicationId: "org.chatvault.callgrind", keystore: "file", keyDirectory: "\(root)/keys")
        switch action {
        case "seed":
            let kind = try args.choice("kind", default: "open", among: ["open", "reads"])
            let messages = try args.int("messages", default: kind == "open" ? 1_000 : 100_000, range: 1...1_000_000)
            let conversations = try args.int("conversations", default: kind == "open" ? 10 : 100, range: 1...10_000)
            try args.rejectUnknown()
            for dir in [root, "\(root)/keys", "\(root)/caches"] where mkdir(dir, 0o700) != 0 && errno != EEXIST {
                throw CLIError.failure("cannot create \(dir) (errno \(errno))")
            }
            try await seed(options, root: root, user: user, kind: kind, messages: messages, conversations: conversations)
        case "raw":
            try args.rejectUnknown()
            let directory = CacheDirectory(root: "\(root)/caches", account: CacheDirectory.account(applicationId: options.applicationId, userId: user))
            guard case .valid(let manifest) = ManifestFile.read(directory: directory.path) else { throw CLIError.failure("no valid manifest") }
            let key = try OpenBenchFixture.lookUpKey(store: options.store(), itemID: KeyItemID(applicationId: options.applicationId,
                                                                                               account: directory.account, cacheId: manifest.cacheId))
            callgrindMark()
            let rows = try CallgrindParts.rawOpen(path: directory.database, keying: .encrypted(key, manifest.cipherProfile ?? .standard()))
            callgrindMark()
            guard rows > 0 else { throw CLIError.failure("the first page is empty") }
        case "login":
            try args.rejectUnknown()
            let vault = try makeVault(options, root: "\(root)/caches")
            callgrindMark()
            let state = CallgrindParts.blockingLogin(vault, user: user)
            callgrindMark()
            await vault.logout()
            guard state == "ready" else { throw CLIError.failure("login answered \(state)") }
        case "pages":
            let reads = try args.int("reads", default: 20, range: 1...100_000)
            try args.rejectUnknown()
            let vault = try makeVault(options, root: "\(root)/caches")
            let attempt = await vault.login(userId: user)
            guard attempt.state.outcome == "ready", let cache = vault.openCache else {
                await vault.logout()
                throw CLIError.failure("login answered \(attempt.state.outcome)")
            }
            // The background quick_check of this large cache runs after login: let it end first,
            // or its instructions land among the reads'.
            _ = await vault.waitForIntegrityCheck(timeout: .seconds(600))
            let query = MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: peer(0)).set(limit: pageSize).build().query
            let limits = vault.wireLimits
            var rows = 0
            callgrindMark()
            for _ in 0..<reads { rows += CallgrindParts.page(cache.reader, query: query, limits: limits) }
            callgrindMark()
            await vault.logout()
            guard rows == pageSize * reads else { throw CLIError.failure("read \(rows) messages, expected \(pageSize * reads)") }
        default:
            throw CLIError.usage("\(verb) needs seed, raw, login or pages")
        }
        return 0
    }

    // The workload of `bench reads`: its users, its wire messages, its page size.
    static let me = ReadBenchFixture.me
    static let pageSize = ReadBenchFixture.pageSize
    static func peer(_ conversation: Int) -> String { ReadBenchFixture.peer(conversation) }

    /// An engine on the file key store whose eviction never runs during a measurement.
    static func makeVault(_ options: CommonOptions, root: String) throws -> OfflineVault {
        let config = OfflineConfig(enabled: true, encryption: true, maxStorageSize: 0, maxMessagesPerConversation: 1000,
                                   maxConversations: 1000, maxMediaCacheSize: 0, mediaCaching: .auto)
        var settings = VaultSettings(applicationId: options.applicationId, rootDirectory: root, keyStorage: options.keyStorage(),
                                     callbackExecutor: .queue(DispatchQueue(label: "chatvault.callgrind.callbacks")), retry: .manualOnly)
        settings.evictionDelay = .seconds(365 * 86_400)
        do {
            return try OfflineVault(config: config, settings: settings)
        } catch {
            throw CLIError.failure("cannot set up the engine: \(error)")
        }
    }

    /// `open`: the rows of `chatvault bench open` (10 conversations, direct inserts, VACUUMed).
    /// `reads`: messages as a server sends them, written through like a sync, as `bench reads` does.
    static func seed(_ options: CommonOptions, root: String, user: String, kind: String, messages: Int, conversations: Int) async throws {
        let vault = try makeVault(options, root: "\(root)/caches")
        let attempt = await vault.login(userId: user)
        guard attempt.state.outcome == "ready", let cache = vault.openCache, cache.isEncrypted else {
            await vault.logout()
            throw CLIError.failure("cannot create the cache: \(attempt.state.outcome)")
        }
        let limits = vault.wireLimits
        do {
            try cache.writer.sync { db in
                if kind == "open" {
                    try OpenBenchFixture.seed(db, messages: messages, conversations: conversations)
                    try db.execute("VACUUM")
                    return
                }
                for c in 0..<conversations {
                    let count = messages / conversations + (c < messages % conversations ? 1 : 0)
                    let wire = (0..<count).map { k in ReadBenchFixture.message(k * conversations + c, conversation: c) }
                    try db.transaction { try MessageRows.writeThrough(wire, me: me, limits: limits, in: db) }
                }
            }
        } catch {
            await vault.logout()
            throw error
        }
        await vault.logout()
    }
}

/// Marks where a measured part starts and where it ends (`Scripts/callgrind` dumps the counters
/// on each call).
@inline(never) @_optimize(none)
func callgrindMark() {}

enum CallgrindParts {
    static func rawOpen(path: String, keying: ConnectionKeying) throws -> Int {
        let queue = try DatabaseQueue(path: path, keying: keying, options: ConnectionOptions(), label: "callgrind.raw")
        defer { queue.close() }
        return try queue.sync { db in
            try BenchQueries.checkSchema(db, schema: "main")
            return try BenchQueries.firstPage(db, schema: "main", conversationId: OpenBenchFixture.conversationId(0),
                                              limit: OpenBenchFixture.firstPageSize).rows
        }
    }

    /// `login` to its return, waited for on this thread (the engine's queues do the work).
    static func blockingLogin(_ vault: OfflineVault, user: String) -> String {
        let done = DispatchSemaphore(value: 0)
        let outcome = OutcomeBox()
        Task.detached {
            outcome.set(await vault.login(userId: user).state.outcome)
            done.signal()
        }
        done.wait()
        return outcome.value
    }

    static func page(_ reader: DatabaseQueue, query: MessageQuery, limits: WireLimits) -> Int {
        (try? reader.sync { db in try MessageRows.cachedPage(query, direction: .previous, me: CallgrindHook.me, limits: limits, in: db).count }) ?? 0
    }

    final class OutcomeBox: @unchecked Sendable {
        private let lock = NSLock()
        private var stored = ""
        func set(_ value: String) { lock.withLock { stored = value } }
        var value: String { lock.withLock { stored } }
    }
}
