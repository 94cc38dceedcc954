import ChatVault
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore
import XCTest

/// `chatvault search` and the search index under real crashes (issue 24): results without
/// content unless asked, `status` reporting the index, and a SIGKILL at any instant of the
/// background build leaving a cache that opens ready and finishes the build.
final class SearchCommandTests: XCTestCase {
    let app = "org.chatvault.clitests.search"
    let user = "search-user"

    func options(_ root: String, _ keys: String) -> [String] {
        ["--dir", root, "--user", user, "--app", app, "--keystore", "file", "--key-dir", keys]
    }

    func testSearchPrintsHitsWithoutContentUnlessAskedAndStatusReportsTheIndex() throws {
        let root = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let common = options(root.path, keys.path)
        XCTAssertEqual(try CLI.run(["seed"] + common + ["--messages", "60", "--marker", "QXSEARCHMARK"]).status, 0)

        let found = try CLI.run(["search"] + common + ["qxsearchmark", "--limit", "25", "--json"])
        XCTAssertEqual(found.status, 0, found.stderr)
        let json = try found.json()
        XCTAssertEqual((json["hits"] as? [Any])?.count, 25)
        XCTAssertEqual(json["more"] as? Bool, true)
        XCTAssertEqual(json["indexComplete"] as? Bool, true)
        XCTAssertEqual(number(json["totalMessages"]), 60)
        XCTAssertFalse(found.stdout.lowercased().contains("qxsearchmark"), "no content and no query without --show-text")
        XCTAssertFalse(found.stdout.contains("Seeded message"))

        let shown = try CLI.run(["search"] + common + ["qxsearch*", "--show-text", "--limit", "3"])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        XCTAssertEqual(shown.stdout.components(separatedBy: "Seeded message").count - 1, 3, shown.stdout)
        XCTAssertTrue(shown.stdout.contains("index complete (60 messages)"), shown.stdout)

        let narrowed = try CLI.run(["search"] + common + ["qxsearchmark", "--sender", "seed3", "--json"])
        XCTAssertEqual(narrowed.status, 0, narrowed.stderr)
        XCTAssertEqual((try narrowed.json()["hits"] as? [Any])?.count, 6, "one sender of ten")
        XCTAssertEqual(try CLI.run(["search"] + common + ["qxsearchmark", "--conversation", "seed3"]).status, 2, "user:UID or group:GUID")

        let refused = try CLI.run(["search"] + common + ["\"\" * -"])
        XCTAssertEqual(refused.status, 2)
        XCTAssertTrue(refused.stderr.contains("ERROR_INVALID_SEARCH_QUERY"), refused.stderr)
        XCTAssertEqual(try CLI.run(["search"] + common).status, 2, "a query is required")

        let status = try CLI.run(["status", "--dir", root.path, "--user", user, "--app", app, "--keystore", "file", "--key-dir", keys.path, "--json"])
        XCTAssertEqual(status.status, 0, status.stderr)
        let index = try XCTUnwrap(try status.json()["searchIndex"] as? [String: Any])
        XCTAssertEqual(index["complete"] as? Bool, true)
        XCTAssertEqual(number(index["indexedMessages"]), 60)
    }

    /// A raw connection to the cache with its key (from the file key store).
    func raw(_ root: String, _ keys: String) throws -> DatabaseQueue {
        let directory = CacheDirectory(root: root, account: CacheDirectory.account(applicationId: app, userId: user))
        guard case .valid(let manifest) = ManifestFile.read(directory: directory.path) else { throw CLIError("no manifest") }
        let store = SoftwareKeyStore(directory: keys)
        guard case .found(let key, _) = store.lookup(KeyItemID(applicationId: app, account: directory.account, cacheId: manifest.cacheId)) else {
            throw CLIError("no key")
        }
        return try DatabaseQueue(path: directory.database, keying: .encrypted(key, manifest.cipherProfile ?? .standard()),
                                 options: ConnectionOptions(), label: "test.search.raw")
    }

    struct CLIError: Error { let message: String; init(_ m: String) { message = m } }

    /// At least 50 SIGKILLs landing inside a build of the index (each 0–120 ms after the process
    /// reported its first progress): after every one the file passes `quick_check`, every row up to the build's
    /// recorded cursor is in the index, nothing is in it twice or without its row; the index is
    /// emptied again whenever a run got to complete it, so every kill lands in a build. A last run
    /// finishes: the cache opens ready with no reset, the index holds every row once, and a search
    /// finds what it must.
    func testSigkillsDuringTheIndexBuildLoseNothingAndTheBuildFinishes() throws {
        let root = TemporaryDirectory()
        let keys = TemporaryDirectory()
        let common = options(root.path, keys.path)
        let messages = 24_000
        let seeded = try CLI.run(["seed"] + common + ["--messages", String(messages), "--conversations", "40", "--marker", "KILLMARK"])
        XCTAssertEqual(seeded.status, 0, seeded.stderr)
        func emptyIndex() throws {
            let db = try raw(root.path, keys.path)
            try db.sync { db in try db.transaction { try SearchIndexSchema.recreate(db) } }
            db.close()
        }
        try emptyIndex()

        var random = SeededGenerator(seed: 0x5ea_4c4)
        var killedMidBuild = 0
        var rebuilt = 0
        // Until 50 kills have landed inside a build (at most 240 runs).
        var round = 0
        while killedMidBuild < 50, round < 240 {
            round += 1
            let delay = Int(random.next() % 121)
            let run = try KilledRun.start([CLI.binary, "search"] + common + ["killmark", "--progress", "--json"],
                                          killAfter: .milliseconds(delay), once: "index ")
            XCTAssertTrue(run.killed || run.status == 0, "round \(round): exit \(run.status): \(run.stderr)")
            let db = try raw(root.path, keys.path)
            let (check, cursor, missing, orphans, indexed, rows) = try db.sync { db -> (String?, String?, Int64?, Int64?, Int64?, Int64?) in
                let cursor = try db.scalarText("SELECT CAST(value AS TEXT) FROM kv WHERE key = ?", .text(SearchIndexSchema.buildStateKey))
                let bound = cursor == "complete" ? Int64.max : cursor.flatMap { Int64($0) } ?? Int64.min
                return (try IntegrityCheck.problems(db).isEmpty ? "ok" : "damaged", cursor,
                        try db.scalarInt("""
                            SELECT count(*) FROM messages m WHERE m.row_id <= ?
                              AND NOT EXISTS (SELECT 1 FROM search_index_docsize d WHERE d.docid = m.row_id)
                            """, .int(bound)),
                        try db.scalarInt("SELECT count(*) FROM search_index_docsize WHERE docid NOT IN (SELECT row_id FROM messages)"),
                        try db.scalarInt("SELECT count(*) FROM search_index_docsize"),
                        try db.scalarInt("SELECT count(*) FROM messages"))
            }
            db.close()
            XCTAssertEqual(check, "ok", "round \(round)")
            XCTAssertEqual(rows, Int64(messages), "round \(round): a message was lost")
            XCTAssertEqual(missing, 0, "round \(round): a row up to the cursor is not indexed")
            XCTAssertEqual(orphans, 0, "round \(round)")
            XCTAssertLessThanOrEqual(indexed ?? 0, Int64(messages), "round \(round): a row indexed twice")
            if cursor == "complete" || !run.killed {
                rebuilt += 1
                try emptyIndex()
            } else if cursor != nil {
                killedMidBuild += 1
            }
        }
        XCTAssertGreaterThanOrEqual(killedMidBuild, 50, "kills must land while the build is under way (\(rebuilt) runs completed it)")

        let last = try CLI.run(["search"] + common + ["killmark", "--json", "--limit", "100"])
        XCTAssertEqual(last.status, 0, last.stderr)
        let json = try last.json()
        XCTAssertEqual(json["indexComplete"] as? Bool, true)
        XCTAssertEqual(number(json["indexedMessages"]), Double(messages))
        XCTAssertEqual((json["hits"] as? [Any])?.count, 100)
        let opened = try CLI.run(["open"] + common + ["--json"])
        XCTAssertEqual(opened.status, 0, opened.stderr)
        XCTAssertEqual(try opened.json()["outcome"] as? String, "ready")
        XCTAssertEqual((try opened.json()["resets"] as? [Any])?.count, 0, "never a reset")
        let db = try raw(root.path, keys.path)
        let (indexed, unique) = try db.sync { db in
            (try db.scalarInt("SELECT count(*) FROM search_index_docsize"),
             try db.scalarInt("SELECT count(*) FROM search_index WHERE search_index MATCH 'killmark'"))
        }
        db.close()
        XCTAssertEqual(indexed, Int64(messages))
        XCTAssertEqual(unique, Int64(messages), "every message found once by its word")
    }
}
