import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import VaultStore
import VaultKeys

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

    /// Opens, asserting the outcome code, and acknowledges the reported resets as the engine
    /// does once its listeners have run (`acknowledge: false` leaves them unannounced).
    @discardableResult
    func open(_ config: StoreConfiguration, expect: String, acknowledge: Bool = true,
              file: StaticString = #filePath, line: UInt = #line) -> OpenReport {
        let report = CacheOpener.open(config)
        XCTAssertEqual(report.outcome.code, expect, "notes: \(report.notes)", file: file, line: line)
        if acknowledge { CacheOpener.acknowledge(report.resets, in: config.directory) }
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
