import ChatVaultTesting
import Foundation
import XCTest
@testable import ChatVault
@testable import VaultStore

/// `SyncStateRows`: the sync point and the last sweep's outcome, kept in `sync_state` (schema v3).
final class SyncStateRowsTests: XCTestCase {
    let directory = TemporaryDirectory()

    /// A cache database at this build's schema (the migrations the open procedure runs).
    func database() throws -> DatabaseQueue {
        var options = ConnectionOptions()
        options.create = true
        let queue = try DatabaseQueue(path: "\(directory.path)/cache.db", keying: .plaintext, options: options, label: "sync-state")
        try queue.sync { db in try Schema.prepare(db, expectExisting: false) }
        return queue
    }

    func testANewCacheHasNoSyncPoint() throws {
        let queue = try database()
        defer { queue.close() }
        XCTAssertEqual(try queue.sync { db in try SyncStateRows.load(in: db) }, .empty)
        XCTAssertEqual(SyncStateRecord.empty.token, nil)
        XCTAssertEqual(SyncStateRecord.empty.lastSyncAt, 0, "getLastSyncTimestamp() is 0 if never")
    }

    func testTheTokenIsStoredAsItCameAndSurvivesAReopen() throws {
        // Opaque: whatever the backend answered comes back byte for byte (a Matrix-style token here).
        let token = "s72594_4483_1934_19_31_1_12_14_1|ü:🙂"
        var queue = try database()
        try queue.sync { db in
            try db.transaction {
                try SyncStateRows.recordAttempt(at: 1_700_000_100, in: db)
                try SyncStateRows.advance(token: token, serverTime: 1_700_000_000, in: db)
                try SyncStateRows.recordOutcome(.partial, errorCode: nil, in: db)
            }
        }
        queue.close()
        queue = try database()
        defer { queue.close() }
        let state = try queue.sync { db in try SyncStateRows.load(in: db) }
        XCTAssertEqual(state, SyncStateRecord(token: token, lastSyncAt: 1_700_000_000, lastAttemptAt: 1_700_000_100,
                                              lastOutcome: .partial, lastErrorCode: nil))
        XCTAssertEqual(try queue.sync { db in try db.scalarInt("SELECT count(*) FROM sync_state") }, 1, "a single row")
    }

    func testTheTokenAdvancesOnlyWithTheTransactionOfItsPage() throws {
        let queue = try database()
        defer { queue.close() }
        try queue.sync { db in try SyncStateRows.advance(token: "page-1", serverTime: 10, in: db) }
        struct Crash: Error {}
        XCTAssertThrowsError(try queue.sync { db in
            try db.transaction {
                try CacheRows.insert([CacheRows.Conversation(id: "user_bob", type: "user", peerId: "bob", lastMessageAt: 20)], into: db)
                try SyncStateRows.advance(token: "page-2", serverTime: 20, in: db)
                throw Crash()   // the page fails before its commit
            }
        })
        let state = try queue.sync { db in try SyncStateRows.load(in: db) }
        XCTAssertEqual(state.token, "page-1", "rolled back with the page: no gap")
        XCTAssertEqual(state.lastSyncAt, 10)
        XCTAssertEqual(try queue.sync { db in try CacheRows.counts(db).conversations }, 0)
    }

    func testForgettingTheTokenKeepsTheTimestampAndAFailureKeepsItsCodeOnly() throws {
        let queue = try database()
        defer { queue.close() }
        try queue.sync { db in
            try SyncStateRows.advance(token: "t", serverTime: 42, in: db)
            try SyncStateRows.forgetToken(in: db)
            try SyncStateRows.recordOutcome(.failed, errorCode: BackendError.syncTokenExpiredCode, in: db)
        }
        let state = try queue.sync { db in try SyncStateRows.load(in: db) }
        XCTAssertNil(state.token, "the next sweep starts over from nil")
        XCTAssertEqual(state.lastSyncAt, 42)
        XCTAssertEqual(state.lastOutcome, .failed)
        XCTAssertEqual(state.lastErrorCode, "ERR_SYNC_TOKEN_EXPIRED")
        try queue.sync { db in try SyncStateRows.recordOutcome(.caughtUp, errorCode: nil, in: db) }
        XCTAssertNil(try queue.sync { db in try SyncStateRows.load(in: db) }.lastErrorCode)
    }

    func testEmptyAndOverlongTokensAreRefusedBeforeTheyAreWritten() throws {
        let queue = try database()
        defer { queue.close() }
        try queue.sync { db in try SyncStateRows.advance(token: "good", serverTime: 1, in: db) }
        for (token, problem) in [("", SyncStateRows.Problem.emptyToken),
                                 (String(repeating: "x", count: SyncStateRows.maxTokenBytes + 1),
                                  .tokenTooLong(bytes: SyncStateRows.maxTokenBytes + 1))] {
            XCTAssertThrowsError(try queue.sync { db in try SyncStateRows.advance(token: token, serverTime: 2, in: db) }) { error in
                XCTAssertEqual(error as? SyncStateRows.Problem, problem)
            }
        }
        XCTAssertEqual(try queue.sync { db in try SyncStateRows.load(in: db) }.token, "good")
        try queue.sync { db in try SyncStateRows.advance(token: String(repeating: "x", count: SyncStateRows.maxTokenBytes), serverTime: 3, in: db) }
    }

    func testDamagedValuesOnDiskReadAsAbsentNeverACrash() throws {
        let queue = try database()
        defer { queue.close() }
        try queue.sync { db in
            try db.run("INSERT OR REPLACE INTO sync_state (id, token, last_sync_at, last_attempt_at, last_outcome, last_error_code) VALUES (1, ?, ?, ?, ?, ?)",
                       .text(""), .int(-5), .text("soon"), .text("exploded"), .null)
        }
        let state = try queue.sync { db in try SyncStateRows.load(in: db) }
        XCTAssertEqual(state, SyncStateRecord(token: nil, lastSyncAt: 0, lastAttemptAt: 0, lastOutcome: nil, lastErrorCode: nil))
        XCTAssertThrowsError(try queue.sync { db in try db.run("INSERT INTO sync_state (id) VALUES (2)") }, "one row only")
    }

    func testClearingTheCacheForgetsTheSyncPoint() throws {
        // Cleared messages must come back from the server: a kept token would skip them forever.
        let queue = try database()
        defer { queue.close() }
        try queue.sync { db in
            try SyncStateRows.advance(token: "t", serverTime: 42, in: db)
            try SyncStateRows.recordOutcome(.caughtUp, errorCode: nil, in: db)
            try CacheRows.clearAll(db)
        }
        XCTAssertEqual(try queue.sync { db in try SyncStateRows.load(in: db) }, .empty)
        try queue.sync { db in try SyncStateRows.advance(token: "u", serverTime: 50, in: db) }
        XCTAssertEqual(try queue.sync { db in try SyncStateRows.load(in: db) }.token, "u", "the row comes back on the next write")
    }
}
