import Foundation
import Synchronization
import XCTest
@testable import VaultStore
import VaultKeys

/// A fresh 0700 temporary directory per test, removed afterwards.
final class TemporaryDirectory {
    let path: String

    init() {
        var template = Array("\(NSTemporaryDirectory())/chatvault-test-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        chmod(path, 0o700)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Builds store configurations over a temporary root.
struct Harness {
    let root = TemporaryDirectory()
    let applicationId = "org.chatvault.tests"
    let userId = "alice@example.org"
    var keyStore = MemoryKeyStore()

    var account: String { CacheDirectory.account(applicationId: applicationId, userId: userId) }
    var directory: CacheDirectory { CacheDirectory(root: root.path, account: account) }

    func configuration(encryption: Bool = true, behavior: EncryptionFailureBehavior = .onlineOnly,
                       stores: [any KeyStore]? = nil) -> StoreConfiguration {
        var config = StoreConfiguration(directory: directory, applicationId: applicationId, account: account,
                                        keyLabel: "ChatVault tests offline cache key (alice)", encryption: encryption,
                                        failureBehavior: behavior, keyStores: stores ?? [keyStore])
        config.quarantine = QuarantinePolicy(maxEntries: 3, maxAgeDays: 30)
        return config
    }

    /// Opens, asserting the outcome code.
    @discardableResult
    func open(_ config: StoreConfiguration, expect: String, file: StaticString = #filePath, line: UInt = #line) -> OpenReport {
        let report = CacheOpener.open(config)
        XCTAssertEqual(report.outcome.code, expect, "notes: \(report.notes)", file: file, line: line)
        return report
    }

    /// Seeds messages (bodies containing `marker`) and pending outbox rows, then closes.
    func seed(_ cache: VaultCache, messages: Int, pending: Int, marker: String = "MARKER-7f3a") throws {
        try cache.writer.sync { db in
            try db.transaction {
                try CacheRows.insert([CacheRows.Conversation(id: "user_bob", type: "user", peerId: "bob", lastMessageAt: 1)], into: db)
                try CacheRows.insert((0..<messages).map { i in
                    CacheRows.Message(serverId: Int64(i + 1), localId: nil, conversationId: "user_bob", senderId: "bob",
                                      receiverId: "alice", receiverType: "user", sentAt: Int64(1_700_000_000 + i),
                                      body: "message \(i) \(marker)")
                }, into: db)
                let base = try CacheRows.nextOutboxSeq(db)
                try CacheRows.insert((0..<pending).map { i in
                    CacheRows.OutboxEntry(localId: "local-\(i)", seq: base + Int64(i), conversationId: "user_bob", kind: "text",
                                          state: 0, createdAt: Int64(1_700_000_000 + i), payload: Array("pending \(i) \(marker)".utf8))
                }, into: db)
            }
        }
    }

    func counts(_ cache: VaultCache) throws -> CacheRows.Counts {
        try cache.reader.sync { db in try CacheRows.counts(db) }
    }

    func manifest() -> Manifest? {
        if case .valid(let m) = ManifestFile.read(directory: directory.path) { return m }
        return nil
    }
}

/// Every file under `path` whose bytes contain `marker`.
func filesContaining(_ marker: String, under path: String) -> [String] {
    let needle = Array(marker.utf8)
    var hits: [String] = []
    guard let walker = FileManager.default.enumerator(atPath: path) else { return [] }
    while let relative = walker.nextObject() as? String {
        let full = "\(path)/\(relative)"
        var st = stat()
        guard lstat(full, &st) == 0, st.st_mode & S_IFMT == S_IFREG,
              let data = FileManager.default.contents(atPath: full) else { continue }
        if data.range(of: Data(needle)) != nil { hits.append(relative) }
    }
    return hits
}

/// Ways to damage a cache's files on disk, as a disk or a careless tool would.
enum Damage {
    static func overwrite(_ path: String, at offset: Int, count: Int) {
        let fd = open(path, O_WRONLY)
        precondition(fd >= 0, "cannot open \(path)")
        var garbage = [UInt8](repeating: 0, count: count)
        for i in garbage.indices { garbage[i] = UInt8.random(in: 0...255) }
        _ = pwrite(fd, &garbage, count, off_t(offset))
        fsync(fd)
        close(fd)
    }

    /// Overwrites the first 64 bytes (for SQLCipher: the salt and the start of page 1).
    static func header(_ path: String) { overwrite(path, at: 0, count: 64) }

    /// Overwrites bytes inside the page in the middle of the file.
    static func middlePage(_ path: String, pageSize: Int = 4096) {
        let pages = fileSize(path) / pageSize
        precondition(pages >= 3, "too small to have a middle page")
        overwrite(path, at: (pages / 2) * pageSize + 512, count: 256)
    }

    static func truncateHalf(_ path: String) { truncate(path, off_t(fileSize(path) / 2)) }

    static func garbageWAL(_ path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var garbage = [UInt8](repeating: 0, count: 8192)
        for i in garbage.indices { garbage[i] = UInt8.random(in: 0...255) }
        _ = write(fd, &garbage, garbage.count)
        close(fd)
    }

    static func fileSize(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : 0
    }
}

extension Harness {
    /// The key the memory store holds for the current manifest's cache.
    func currentKey() throws -> CacheKey {
        let manifest = try XCTUnwrap(self.manifest())
        guard case .found(let key, _) = keyStore.lookup(KeyItemID(applicationId: applicationId, account: account, cacheId: manifest.cacheId)) else {
            throw HarnessError.noKey
        }
        return key
    }

    /// Opens the cache's database directly, bypassing the open procedure (to tamper with it).
    func rawConnection() throws -> DatabaseQueue {
        let manifest = try XCTUnwrap(self.manifest())
        let keying: ConnectionKeying = manifest.encrypted ? .encrypted(try currentKey(), manifest.cipherProfile ?? .standard()) : .plaintext
        return try DatabaseQueue(path: directory.database, keying: keying, options: ConnectionOptions(), label: "raw")
    }

    /// Creates a cache with `messages` and `pending` rows and closes it; returns its cache id.
    @discardableResult
    func createSeeded(encryption: Bool = true, messages: Int = 10, pending: Int = 2, marker: String = "MARKER-7f3a") throws -> String {
        let report = open(configuration(encryption: encryption), expect: "ready")
        let cache = try XCTUnwrap(report.cache)
        try seed(cache, messages: messages, pending: pending, marker: marker)
        let id = cache.cacheId
        cache.close()
        return id
    }
}

enum HarnessError: Error {
    case noKey
}

/// A fault injector that fails the first `count` probes with `code`, then lets everything through.
final class FailFirst: Sendable {
    private let remaining: Mutex<Int>
    private let code: Int32

    init(_ count: Int, with code: Int32) {
        remaining = Mutex(count)
        self.code = code
    }

    var injector: FaultInjector {
        { [self] point, _ in
            guard point == .probe else { return nil }
            return remaining.withLock { n in
                guard n > 0 else { return nil }
                n -= 1
                return code
            }
        }
    }
}
