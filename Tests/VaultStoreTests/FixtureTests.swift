import ChatVaultTesting
import Foundation
import XCTest
@testable import VaultStore
import VaultKeys
import CSQLCipher

/// The committed fixtures in `Fixtures/` (written by `Scripts/make-fixtures`, described in
/// `Fixtures/README.md`), opened by this build through the open procedure.
///
/// The v1 fixtures are real caches written by ChatVault's first on-disk format. Opening them here is
/// the format-compatibility guarantee: a cache written by this version keeps opening, with every row,
/// in every later version. A change that breaks these tests orphans users' caches; fix the change, or
/// add a migration, never the fixtures.
///
/// Every test works on a copy in a fresh 0700 directory (files 0600): a git checkout gives 0644, which
/// the open procedure rightly refuses, and the committed files must never be changed by a test.
final class FixtureTests: XCTestCase {
    // MARK: v1 encrypted: ready, every row, the recorded cipher

    func testEncryptedV1FixtureStillOpensReadyWithEveryRow() throws {
        let fixture = try FixtureCopy("v1-encrypted")
        try fixture.holdKey()
        let report = fixture.open(expect: "ready")
        XCTAssertEqual(report.outcome, .ready)
        XCTAssertEqual(report.resets, [], "an intact cache of this format is never reset")
        let cache = try XCTUnwrap(report.cache)
        XCTAssertTrue(cache.isEncrypted)
        XCTAssertEqual(cache.keyStorage, .keystore)
        XCTAssertEqual(cache.cacheId, fixture.expected.cacheId)
        // Written at schema v1, migrated forward on open, every row kept.
        XCTAssertEqual(fixture.expected.schemaVersion, 1)
        XCTAssertEqual(try cache.reader.sync { db in try db.scalarInt("PRAGMA user_version") }, Int64(Schema.currentVersion))
        try assertRows(of: cache, equal: fixture.expected)
        cache.close()
        XCTAssertEqual(try fixture.currentManifest().cacheId, fixture.expected.cacheId, "still the same cache after closing")
    }

    func testFixtureIsFiledUnderTheAccountThisBuildDerives() throws {
        // The account names the cache directory and the key item: a build that derived it
        // differently would look for every existing cache in the wrong place.
        for name in ["v1-encrypted", "v1-plaintext", "v1-encrypted-large"] {
            let expected = try FixtureExpectation.load(name)
            XCTAssertEqual(CacheDirectory.account(applicationId: expected.applicationId, userId: expected.userId), expected.account, name)
        }
    }

    func testEncryptedFixtureUsesTheRecordedCipherProfile() throws {
        let fixture = try FixtureCopy("v1-encrypted")
        let manifest = try fixture.currentManifest()
        let profile = try XCTUnwrap(manifest.cipherProfile)
        XCTAssertEqual(profile.keying, "raw")
        XCTAssertEqual(profile.pageSize, 4096)
        XCTAssertTrue(profile.useHMAC)
        XCTAssertEqual(profile.hmacAlgorithm, "HMAC_SHA1")
        XCTAssertEqual(profile.kdfAlgorithm, "PBKDF2_HMAC_SHA1")
        XCTAssertEqual(profile.kdfIterations, 64000)
        XCTAssertEqual(profile.fastKdfIterations, 2)
        XCTAssertEqual(profile, fixture.expected.cipherProfile)
        XCTAssertEqual(Damage.fileSize(fixture.directory.database) % profile.pageSize, 0, "whole 4096-byte pages")

        // The recorded profile is the one the file needs: the fixture key opens it under that
        // profile, and neither another page size nor HMAC off nor another key does.
        let key = try fixture.key()
        XCTAssertEqual(try rawCount(fixture, .encrypted(key, profile)), Int64(fixture.expected.counts.messages))
        var otherPageSize = profile
        otherPageSize.pageSize = 1024
        var noHMAC = profile
        noHMAC.useHMAC = false
        for (what, keying) in [("page size 1024", ConnectionKeying.encrypted(key, otherPageSize)),
                               ("HMAC off", .encrypted(key, noHMAC)),
                               ("another key", .encrypted(try CacheKey.generate(), profile)),
                               ("no key", .plaintext)] {
            XCTAssertThrowsError(try rawCount(fixture, keying), what) { error in
                XCTAssertEqual((error as? DatabaseError)?.primaryCode, SQLITE_NOTADB, "\(what): \(error)")
            }
        }

        try fixture.holdKey()
        let cache = try XCTUnwrap(fixture.open(expect: "ready").cache)
        XCTAssertEqual(cache.manifest.cipherProfile, profile)
        XCTAssertEqual(cache.provenCipher, fixture.expected.cipher)
        XCTAssertEqual(cache.provenCipher, "AES-256-CBC/HMAC-SHA1")
        XCTAssertEqual(try cache.writer.sync { db in try db.scalarText("PRAGMA cipher_page_size") }, "4096")
        cache.close()
    }

    // MARK: no plaintext in the encrypted fixtures; the plaintext fixture as the control

    func testEncryptedFixturesHoldNoPlaintext() throws {
        let marker = try FixtureExpectation.load("v1-encrypted").marker
        // The files the library wrote (EXPECTED.json spells the rows out, on purpose).
        for relative in ["v1-encrypted/cache.db", "v1-encrypted/manifest.json", "v1-encrypted-large/cache.db",
                         "v1-encrypted-large/manifest.json", "damaged/header-overwritten/cache.db",
                         "damaged/middle-page-overwritten/cache.db", "damaged/truncated-half/cache.db"] {
            let data = try XCTUnwrap(FileManager.default.contents(atPath: "\(FixtureCopy.root)/\(relative)"), relative)
            XCTAssertNil(data.range(of: Data(marker.utf8)), "\(relative) shows message text in clear")
        }
        XCTAssertEqual(CipherProof.header(of: "\(FixtureCopy.root)/v1-encrypted/cache.db"), .opaque)

        // Opening, reading and closing leaves nothing in clear either (WAL, shm, lock, manifest).
        let fixture = try FixtureCopy("v1-encrypted")
        try fixture.holdKey()
        let cache = try XCTUnwrap(fixture.open(expect: "ready").cache)
        XCTAssertEqual(try fixture.counts(cache).messages, fixture.expected.counts.messages)
        XCTAssertEqual(filesContaining(marker, under: fixture.directory.path), [], "while open")
        cache.close()
        XCTAssertEqual(filesContaining(marker, under: fixture.directory.path), [], "after closing")
    }

    func testPlaintextFixtureShowsTheMarkerAndOpensWithTheSameRows() throws {
        // The control for the scan above: the same rows unencrypted are found by the same scan.
        let fixture = try FixtureCopy("v1-plaintext")
        XCTAssertEqual(filesContaining(fixture.expected.marker, under: fixture.directory.path), ["cache.db"])
        XCTAssertEqual(CipherProof.header(of: fixture.directory.database), .plaintext)
        XCTAssertFalse(fixture.expected.encrypted)

        let report = fixture.open(encryption: false, expect: "ready")
        XCTAssertEqual(report.resets, [])
        let cache = try XCTUnwrap(report.cache)
        XCTAssertFalse(cache.isEncrypted)
        XCTAssertEqual(cache.keyStorage, .none)
        XCTAssertEqual(cache.cacheId, fixture.expected.cacheId)
        XCTAssertEqual(fixture.keyStore.callCount, 0, "a plaintext cache never touches the key store")
        try assertRows(of: cache, equal: fixture.expected)
        // The same data set as the encrypted fixture, row for row.
        try assertRows(of: cache, equal: try FixtureExpectation.load("v1-encrypted"))
    }

    func testLargeEncryptedFixtureOpensReady() throws {
        // The intact original of the middle-page damage below.
        let fixture = try FixtureCopy("v1-encrypted-large")
        try fixture.holdKey()
        let report = fixture.open(expect: "ready")
        XCTAssertEqual(report.resets, [])
        let cache = try XCTUnwrap(report.cache)
        XCTAssertFalse(cache.needsBackgroundIntegrityCheck,
                       "under the synchronous integrity-check limit: the middle-page damage below is found during the open")
        try assertRows(of: cache, equal: fixture.expected)
    }

    // MARK: damaged → corrupted

    func testDamagedHeaderFixtureResetsAsCorrupted() throws {
        let fixture = try FixtureCopy(damaged: "header-overwritten")
        XCTAssertEqual(fixture.source, "v1-encrypted")
        try fixture.holdKey()
        let report = fixture.open(expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, offlinePendingCountUnknown, "page 1 is unreadable, so is the outbox")
        try assertSetAside(report, fixture)
        let cache = try XCTUnwrap(report.cache)
        XCTAssertNotEqual(cache.cacheId, fixture.expected.cacheId, "a new cache replaced it")
        XCTAssertEqual(try fixture.counts(cache), CacheRows.Counts(conversations: 0, messages: 0, pending: 0))
    }

    func testDamagedMiddlePageFixtureResetsAsCorruptedAndSalvagesTheOutbox() throws {
        let fixture = try FixtureCopy(damaged: "middle-page-overwritten")
        XCTAssertEqual(fixture.source, "v1-encrypted-large")
        try fixture.holdKey()
        let report = fixture.open(expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, 0, "the outbox pages were intact: every unsent message survives")
        try assertSetAside(report, fixture)
        let cache = try XCTUnwrap(report.cache)
        XCTAssertNotEqual(cache.cacheId, fixture.expected.cacheId)
        XCTAssertEqual(try fixture.counts(cache), CacheRows.Counts(conversations: 0, messages: 0, pending: fixture.expected.counts.pending))
        XCTAssertEqual(try outbox(of: cache), fixture.expected.outbox, "the salvaged rows, field for field")
    }

    func testTruncatedFixtureResetsAsCorrupted() throws {
        let fixture = try FixtureCopy(damaged: "truncated-half")
        XCTAssertEqual(fixture.source, "v1-encrypted")
        XCTAssertEqual(Damage.fileSize(fixture.directory.database), Damage.fileSize("\(FixtureCopy.root)/v1-encrypted/cache.db") / 2)
        try fixture.holdKey()
        let report = fixture.open(expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.corrupted])
        try assertSetAside(report, fixture)
        XCTAssertEqual(try fixture.counts(try XCTUnwrap(report.cache)).messages, 0)
    }

    // MARK: manifest variants

    func testValidManifestsOpenReady() throws {
        let encrypted = try FixtureCopy("v1-encrypted", manifest: "manifests/valid-encrypted.json")
        try encrypted.holdKey()
        let report = encrypted.open(expect: "ready")
        XCTAssertEqual(report.resets, [])
        XCTAssertEqual(report.cache?.cacheId, encrypted.expected.cacheId)
        XCTAssertEqual(try encrypted.counts(try XCTUnwrap(report.cache)), encrypted.expected.counts.rows)

        let plaintext = try FixtureCopy("v1-plaintext", manifest: "manifests/valid-plaintext.json")
        let plain = plaintext.open(encryption: false, expect: "ready")
        XCTAssertEqual(plain.resets, [])
        XCTAssertEqual(plain.cache?.cacheId, plaintext.expected.cacheId)
        XCTAssertEqual(try plaintext.counts(try XCTUnwrap(plain.cache)), plaintext.expected.counts.rows)
    }

    func testUnparseableHostileAndInconsistentManifestsAreRepairedFromTheKeyItem() throws {
        let original = try FixtureCopy("v1-encrypted").currentManifest()
        for variant in ["unparseable", "hostile-cache-id", "inconsistent-no-keycheck"] {
            let fixture = try FixtureCopy("v1-encrypted", manifest: "manifests/\(variant).json")
            guard case .damaged = ManifestFile.read(directory: fixture.directory.path) else {
                return XCTFail("\(variant): the library should find this manifest damaged")
            }
            try fixture.holdKey()
            let report = fixture.open(expect: "ready")
            XCTAssertEqual(report.resets, [], "\(variant): the key item still opens the database, so nothing is lost")
            XCTAssertTrue(report.notes.contains("the manifest was repaired"), "\(variant): \(report.notes)")
            let cache = try XCTUnwrap(report.cache, variant)
            XCTAssertEqual(cache.cacheId, fixture.expected.cacheId, variant)
            XCTAssertEqual(try fixture.counts(cache), fixture.expected.counts.rows, variant)
            cache.close()
            let repaired = try fixture.currentManifest()
            XCTAssertEqual(repaired.cacheId, original.cacheId, variant)
            XCTAssertEqual(repaired.keyCheck, original.keyCheck, variant)
            XCTAssertEqual(repaired.keyId, original.keyId, variant)
            // The profile that opens the file; `createdBy` names the engine that rewrote the
            // manifest, which is the fixture's own (3.4.1) only when this build runs on 3.4.1.
            var profile = original.cipherProfile
            profile?.createdBy = CipherProfile.standard().createdBy
            XCTAssertEqual(repaired.cipherProfile, profile, variant)
        }
    }

    func testNewerManifestIsLeftAlone() throws {
        let fixture = try FixtureCopy("v1-encrypted", manifest: "manifests/newer-format.json")
        try fixture.holdKey()
        let before = try snapshot(fixture.directory.path)
        let report = fixture.open(expect: "unavailable")
        XCTAssertEqual(report.outcome, .unavailable(.newerManifest(99)))
        XCTAssertEqual(report.resets, [])
        XCTAssertNil(report.cache)
        XCTAssertEqual(try snapshot(fixture.directory.path), before, "neither the manifest nor the database is touched")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: fixture.directory.manifest)),
                       try Data(contentsOf: URL(fileURLWithPath: "\(FixtureCopy.root)/manifests/newer-format.json")))
    }

    // MARK: wrong key

    func testWrongKeyForTheFixtureResetsAsWrongKey() throws {
        let fixture = try FixtureCopy("v1-encrypted")
        let original = try XCTUnwrap(FileManager.default.contents(atPath: fixture.directory.database))
        try fixture.keyStore.store(try CacheKey.generate(), keyId: fixture.expected.keyId ?? "other", for: fixture.keyItem, label: "wrong")
        let report = fixture.open(expect: "ready")
        XCTAssertEqual(report.resets.map(\.reason), [.wrongKey])
        XCTAssertEqual(report.resets.first?.pendingMessagesLost, offlinePendingCountUnknown)
        let entry = try XCTUnwrap(report.resets.first?.quarantinedAs)
        XCTAssertEqual(FileManager.default.contents(atPath: "\(fixture.directory.path)/\(entry)/cache.db"), original,
                       "set aside byte for byte: the right key can still recover it")
        XCTAssertEqual(try fixture.counts(try XCTUnwrap(report.cache)).messages, 0)
    }

    // MARK: every schema version: its fixtures exist, open ready and migrate with every row

    /// The schema versions that have shipped: every one up to the version this build writes. Each
    /// has an encrypted and a plaintext fixture written by the build of that version
    /// (`Scripts/make-fixtures`, run once per version before the next migration lands).
    var shippedVersions: ClosedRange<Int> { 1...Schema.currentVersion }

    func testEverySchemaVersionHasAnEncryptedAndAPlaintextFixture() throws {
        for version in shippedVersions {
            for name in ["v\(version)-encrypted", "v\(version)-plaintext"] {
                XCTAssertTrue(FileManager.default.fileExists(atPath: "\(FixtureCopy.root)/\(name)/cache.db"),
                              "\(name) is missing: run Scripts/make-fixtures with the build that writes schema \(version)")
                let expected = try FixtureExpectation.load(name)
                XCTAssertEqual(expected.schemaVersion, version, name)
                XCTAssertEqual(expected.encrypted, name.hasSuffix("-encrypted"), name)
            }
        }
    }

    func testEveryVersionsFixturesOpenReadyAndMigrateToThisVersionWithEveryRow() throws {
        for version in shippedVersions {
            for name in ["v\(version)-encrypted", "v\(version)-plaintext"] {
                let fixture = try FixtureCopy(name)
                // The file really is at its version before this build touches it.
                XCTAssertEqual(try rawUserVersion(fixture), Int64(version), name)
                if fixture.expected.encrypted { try fixture.holdKey() }
                let report = fixture.open(expect: "ready")
                XCTAssertEqual(report.resets, [], "\(name): an intact cache of a shipped version is never reset")
                let cache = try XCTUnwrap(report.cache, name)
                XCTAssertEqual(cache.isEncrypted, fixture.expected.encrypted, name)
                XCTAssertEqual(cache.cacheId, fixture.expected.cacheId, name)
                XCTAssertEqual(try cache.reader.sync { db in try db.scalarInt("PRAGMA user_version") }, Int64(Schema.currentVersion), name)
                // Row for row what the version wrote: counts, conversations, every message, the outbox.
                try assertRows(of: cache, equal: fixture.expected)
                XCTAssertEqual(try cache.reader.sync { db in try IntegrityCheck.problems(db) }, [], name)
                // Schema 4: every message row in its conversation's cluster, the older versions'
                // rows moved there by the migration.
                let misplaced = try cache.reader.sync { db in
                    let stmt = try db.prepare("SELECT row_id, conversation_id FROM messages")
                    var out = 0
                    while try stmt.step() {
                        if stmt.int64(0) & ~(MessageClusters.span - 1) != MessageClusters.base(of: stmt.text(1) ?? "") { out += 1 }
                    }
                    return out
                }
                XCTAssertEqual(misplaced, 0, "\(name): rows outside their conversation's cluster")
                // The sync point (schema 3 on): kept as written; a cache from before has none, so
                // its first sync after the upgrade starts from nil.
                let sync = try cache.reader.sync { db in
                    try db.scalarInt("SELECT count(*) FROM sync_state") == 0 ? nil
                        : FixtureExpectation.SyncState(token: db.scalarText("SELECT token FROM sync_state WHERE id = 1") ?? "",
                                                       lastSyncAt: db.scalarInt("SELECT last_sync_at FROM sync_state WHERE id = 1") ?? 0)
                }
                XCTAssertEqual(sync, fixture.expected.syncState, name)
                XCTAssertEqual(fixture.expected.syncState != nil, version >= 3, name)
                cache.close()
                // Migrated once: the next open finds the current version and the same rows.
                let again = try XCTUnwrap(fixture.open(expect: "ready").cache, name)
                try assertRows(of: again, equal: fixture.expected)
                again.close()
            }
        }
    }

    func testEveryVersionsEncryptedFixtureHoldsNoPlaintext() throws {
        for version in shippedVersions {
            let name = "v\(version)-encrypted"
            let expected = try FixtureExpectation.load(name)
            let data = try XCTUnwrap(FileManager.default.contents(atPath: "\(FixtureCopy.root)/\(name)/cache.db"), name)
            XCTAssertNil(data.range(of: Data(expected.marker.utf8)), "\(name) shows message text in clear")
            XCTAssertEqual(CipherProof.header(of: "\(FixtureCopy.root)/\(name)/cache.db"), .opaque, name)
        }
    }

    // MARK: - Helpers

    /// `PRAGMA user_version` of the fixture's database as committed, read without the open procedure.
    func rawUserVersion(_ fixture: FixtureCopy) throws -> Int64? {
        var options = ConnectionOptions()
        options.readOnly = true
        var keying = ConnectionKeying.plaintext
        if fixture.expected.encrypted {
            keying = .encrypted(try fixture.key(), try XCTUnwrap(fixture.expected.cipherProfile))
        }
        let queue = try DatabaseQueue(path: fixture.directory.database, keying: keying, options: options, label: "fixture-version")
        defer { queue.close() }
        return try queue.sync { db in try db.scalarInt("PRAGMA user_version") }
    }

    func assertRows(of cache: VaultCache, equal expected: FixtureExpectation, file: StaticString = #filePath, line: UInt = #line) throws {
        let counts = try cache.reader.sync { db in try CacheRows.counts(db) }
        XCTAssertEqual(counts, expected.counts.rows, file: file, line: line)
        let conversations = try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT id, type, peer_id, last_message_at FROM conversations ORDER BY rowid")
            var rows: [FixtureExpectation.Conversation] = []
            while try stmt.step() {
                rows.append(.init(id: stmt.text(0) ?? "", type: stmt.text(1) ?? "", peerId: stmt.text(2) ?? "", lastMessageAt: stmt.int64(3)))
            }
            return rows
        }
        XCTAssertEqual(conversations, expected.conversations, file: file, line: line)
        if let messages = expected.messages {
            let found = try cache.reader.sync { db in
                let stmt = try db.prepare("""
                    SELECT server_id, conversation_id, sender_id, receiver_id, receiver_type, sent_at, body
                    FROM messages ORDER BY server_id
                    """)
                var rows: [FixtureExpectation.Message] = []
                while try stmt.step() {
                    rows.append(.init(serverId: stmt.int64(0), conversationId: stmt.text(1) ?? "", senderId: stmt.text(2) ?? "",
                                      receiverId: stmt.text(3) ?? "", receiverType: stmt.text(4) ?? "", sentAt: stmt.int64(5),
                                      body: stmt.text(6) ?? ""))
                }
                return rows
            }
            XCTAssertEqual(found, messages, file: file, line: line)
        } else {
            let withMarker = try cache.reader.sync { db in
                try db.scalarInt("SELECT count(*) FROM messages WHERE instr(body, ?) > 0", .text(expected.marker))
            }
            XCTAssertEqual(withMarker, Int64(expected.counts.messages), file: file, line: line)
        }
        XCTAssertEqual(try outbox(of: cache), expected.outbox, file: file, line: line)
    }

    func outbox(of cache: VaultCache) throws -> [FixtureExpectation.OutboxEntry] {
        try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT local_id, seq, conversation_id, kind, state, created_at, payload FROM outbox ORDER BY seq")
            var rows: [FixtureExpectation.OutboxEntry] = []
            while try stmt.step() {
                rows.append(.init(localId: stmt.text(0) ?? "", seq: stmt.int64(1), conversationId: stmt.text(2) ?? "",
                                  kind: stmt.text(3) ?? "", state: stmt.int(4), createdAt: stmt.int64(5),
                                  payload: String(decoding: stmt.blob(6) ?? [], as: UTF8.self)))
            }
            return rows
        }
    }

    /// The damaged files were set aside in quarantine, byte for byte, not deleted.
    func assertSetAside(_ report: OpenReport, _ fixture: FixtureCopy, file: StaticString = #filePath, line: UInt = #line) throws {
        let entry = try XCTUnwrap(report.resets.first?.quarantinedAs, file: file, line: line)
        let kept = FileManager.default.contents(atPath: "\(fixture.directory.path)/\(entry)/cache.db")
        XCTAssertEqual(kept, FileManager.default.contents(atPath: "\(FixtureCopy.root)/\(fixture.name)/cache.db"), file: file, line: line)
    }

    /// `count(*)` of the messages through a connection keyed (or not) as given, bypassing the manifest.
    func rawCount(_ fixture: FixtureCopy, _ keying: ConnectionKeying) throws -> Int64? {
        var options = ConnectionOptions()
        options.readOnly = true
        let queue = try DatabaseQueue(path: fixture.directory.database, keying: keying, options: options, label: "fixture-raw")
        defer { queue.close() }
        return try queue.sync { db in try db.scalarInt("SELECT count(*) FROM messages") }
    }
}

/// A fixture's `EXPECTED.json` (written by Scripts/fixtures/generate-fixtures.swift).
struct FixtureExpectation: Decodable {
    struct Counts: Decodable, Equatable {
        var conversations: Int
        var messages: Int
        var pending: Int

        var rows: CacheRows.Counts { CacheRows.Counts(conversations: conversations, messages: messages, pending: pending) }
    }
    struct Conversation: Decodable, Equatable {
        var id: String
        var type: String
        var peerId: String
        var lastMessageAt: Int64
    }
    struct Message: Decodable, Equatable {
        var serverId: Int64
        var conversationId: String
        var senderId: String
        var receiverId: String
        var receiverType: String
        var sentAt: Int64
        var body: String
    }
    struct OutboxEntry: Decodable, Equatable {
        var localId: String
        var seq: Int64
        var conversationId: String
        var kind: String
        var state: Int
        var createdAt: Int64
        var payload: String
    }

    var applicationId: String
    var userId: String
    var account: String
    var cacheId: String
    var encrypted: Bool
    var keyFile: String?
    var keyId: String?
    var marker: String
    var schemaVersion: Int
    var manifestFormatVersion: Int
    var cipher: String?
    var cipherProfile: CipherProfile?
    struct SyncState: Decodable, Equatable, Sendable {
        var token: String
        var lastSyncAt: Int64
    }

    var counts: Counts
    /// Schema 3 and later.
    var syncState: SyncState?
    var conversations: [Conversation]
    var messages: [Message]?
    var outbox: [OutboxEntry]

    static func load(_ fixture: String) throws -> FixtureExpectation {
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(FixtureCopy.root)/\(fixture)/EXPECTED.json"))
        return try JSONDecoder().decode(FixtureExpectation.self, from: data)
    }
}

/// One fixture's database and manifest, copied into a fresh private cache directory, with the
/// configuration and the key store an app of that fixture would use.
final class FixtureCopy {
    /// `Fixtures/` at the repository root, found from this file's path.
    static let root: String = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures").path

    let temporary = TemporaryDirectory()
    /// The fixture directory the database came from (relative to `Fixtures/`).
    let name: String
    /// The intact fixture it derives from (itself, or a damaged copy's source).
    let source: String
    let expected: FixtureExpectation
    /// Stands in for the Secret Service the fixtures' manifests name.
    let keyStore = MemoryKeyStore(tier: .keystore, name: "secret-service")

    var directory: CacheDirectory { CacheDirectory(root: temporary.path, account: expected.account) }
    var keyItem: KeyItemID { KeyItemID(applicationId: expected.applicationId, account: expected.account, cacheId: expected.cacheId) }

    /// An intact fixture, optionally with one of `manifests/` in place of its own manifest.
    convenience init(_ fixture: String, manifest: String? = nil) throws {
        try self.init(name: fixture, source: fixture, manifest: manifest)
    }

    /// A copy from `damaged/`; its DAMAGE.json names the fixture it was made from.
    convenience init(damaged: String) throws {
        struct Description: Decodable { var source: String }
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(FixtureCopy.root)/damaged/\(damaged)/DAMAGE.json"))
        try self.init(name: "damaged/\(damaged)", source: try JSONDecoder().decode(Description.self, from: data).source, manifest: nil)
    }

    private init(name: String, source: String, manifest: String?) throws {
        self.name = name
        self.source = source
        expected = try FixtureExpectation.load(source)
        let dir = "\(temporary.path)/\(expected.account)"
        guard mkdir(dir, 0o700) == 0 else { throw CocoaError(.fileWriteUnknown) }
        try FixtureCopy.copy("\(FixtureCopy.root)/\(name)/cache.db", to: "\(dir)/cache.db")
        try FixtureCopy.copy("\(FixtureCopy.root)/\(manifest ?? "\(name)/\(ManifestFile.name)")", to: "\(dir)/\(ManifestFile.name)")
    }

    private static func copy(_ from: String, to: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: from))
        guard FileManager.default.createFile(atPath: to, contents: data), chmod(to, 0o600) == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: to])
        }
    }

    /// The fixture's TEST-ONLY key.
    func key() throws -> CacheKey {
        let file = try XCTUnwrap(expected.keyFile, "\(source) has no key")
        // 64 hex digits and a newline. A published test key, but handled as the library handles keys.
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: "\(FixtureCopy.root)/\(source)/\(file)")))
        defer { for i in bytes.indices { bytes[i] = 0 } }
        let digits = bytes.firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
        return try bytes.withUnsafeBytes { raw in try CacheKey.fromHex(UnsafeRawBufferPointer(rebasing: raw[..<digits])) }
    }

    /// Puts the fixture key in the memory store, under the key item the fixture's manifest names.
    /// The manifests name the `secret-service` store; the open procedure then takes the configured
    /// store of the same tier (`KEYSTORE`), as it does when an app swaps one Secret Service client for another.
    func holdKey() throws {
        try keyStore.store(try key(), keyId: try XCTUnwrap(expected.keyId), for: keyItem, label: "ChatVault fixture key (TEST ONLY)")
    }

    func configuration(encryption: Bool) -> StoreConfiguration {
        StoreConfiguration(directory: directory, applicationId: expected.applicationId, account: expected.account,
                           keyLabel: "ChatVault fixtures offline cache key (fixture user)", encryption: encryption,
                           failureBehavior: .onlineOnly, keyStores: [keyStore])
    }

    /// Opens with the fixture's own encryption setting unless told otherwise, asserting the outcome code.
    func open(encryption: Bool? = nil, expect: String, file: StaticString = #filePath, line: UInt = #line) -> OpenReport {
        let report = CacheOpener.open(configuration(encryption: encryption ?? expected.encrypted))
        XCTAssertEqual(report.outcome.code, expect, "\(name): \(report.notes)", file: file, line: line)
        return report
    }

    func currentManifest() throws -> Manifest {
        guard case .valid(let manifest) = ManifestFile.read(directory: directory.path) else {
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: directory.manifest])
        }
        return manifest
    }

    func counts(_ cache: VaultCache) throws -> CacheRows.Counts {
        try cache.reader.sync { db in try CacheRows.counts(db) }
    }
}
