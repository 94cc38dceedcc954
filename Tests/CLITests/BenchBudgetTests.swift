import XCTest

@testable import chatvault

/// The verdicts of `bench open`, `reads`, `sync` and `media` against the floor-relative budgets
/// (shared/reference/performance-budget.md, revised 2026-12-04), on figures given to them: just
/// inside and just outside each budget, the verdict, the failure in words and the exit status.
/// No timing is measured here: this checks the arithmetic of the budgets, not the machine.
final class BenchBudgetTests: XCTestCase {
    // MARK: sync

    /// Floor: SQLite alone at 30,000 msg/s encrypted, 45,000 plaintext (its own ratio 1.50, so
    /// encrypted / plaintext may reach 1.60); the ingest must reach 85 % of 30,000 = 25,500.
    private func syncReport(encrypted: Double = 25_600, plaintext: Double = 25_600 * 1.59,
                            growth: [Double] = [100, 80.5, 90], peakAboveKiB: Int = 64 * 1024,
                            floor: ([Double], [Double]) = ([30_000], [45_000])) -> SyncBenchReport {
        let sizing = SyncBenchCommand.Sizing(runs: 1, messages: 20_000, checkpoints: [10_000, 100_000, 300_000], window: 20_000,
                                             memoryMessages: 100_000, quick: false)
        let size = SyncBenchmark.PageSizeResult(pageSize: SyncBenchmark.defaultPageSize,
                                                encrypted: .init(perSecond: [encrypted], pageMs: [1]),
                                                plaintext: .init(perSecond: [plaintext], pageMs: [1]))
        let checkpoints = zip(sizing.checkpoints, growth).map { SyncBenchmark.Checkpoint(cached: $0, encrypted: $1, plaintext: $1 * 1.2) }
        return SyncBenchReport(sizing: sizing, sizes: [size], growth: checkpoints,
                               memory: .init(messages: 100_000, baselineKiB: 40_000, peakKiB: 40_000 + peakAboveKiB, peakReset: true),
                               floor: .init(encrypted: floor.0, plaintext: floor.1))
    }

    func testSyncJustInsideEveryBudgetPasses() {
        let report = syncReport()
        XCTAssertTrue(report.withinBudget, report.failures.joined(separator: "; "))
        XCTAssertEqual(report.failures, [])
        XCTAssertEqual(report.exitStatus, 0)
        XCTAssertEqual(report.shareOfFloor, 25_600 / 30_000, accuracy: 1e-9)
        XCTAssertEqual(report.maxRatio, 1.6, accuracy: 1e-9)
        let budget = report.json["budget"]
        XCTAssertEqual(budget?["withinBudget"], .bool(true))
        XCTAssertEqual(budget?["minShareOfFloor"], .double(0.85))
        XCTAssertEqual(budget?["floorMessagesPerSecond"], .double(30_000))
        XCTAssertEqual(budget?["floorEncryptedOverPlaintext"], .double(1.5))
        XCTAssertEqual(budget?["failures"], .array([]))
    }

    func testSyncEachBudgetMissedAlone() {
        let cases: [(String, SyncBenchReport, String, String)] = [
            ("rate", syncReport(encrypted: 25_400, plaintext: 25_400 * 1.59), "rateWithinBudget", "of SQLite alone inserting the same rows"),
            ("ratio", syncReport(plaintext: 25_600 * 1.61), "ratioWithinBudget", "SQLite alone's own 1.50×"),
            ("growth", syncReport(growth: [100, 79.5, 90]), "growthWithinBudget", "not flat as the cache grows"),
            ("memory", syncReport(peakAboveKiB: 64 * 1024 + 1), "memoryWithinBudget", "exceeds 64 MiB"),
        ]
        for (name, report, field, words) in cases {
            XCTAssertFalse(report.withinBudget, name)
            XCTAssertEqual(report.exitStatus, 1, name)
            XCTAssertEqual(report.failures.count, 1, "\(name): \(report.failures)")
            XCTAssertTrue(report.failures.first?.contains(words) ?? false, "\(name): \(report.failures)")
            XCTAssertEqual(report.json["budget"]?[field], .bool(false), name)
            XCTAssertEqual(report.json["budget"]?["withinBudget"], .bool(false), name)
        }
    }

    func testSyncWithoutAFloorFails() {
        let report = syncReport(floor: ([], []))
        XCTAssertFalse(report.rateWithinBudget)
        XCTAssertFalse(report.ratioWithinBudget)
        XCTAssertEqual(report.exitStatus, 1)
        XCTAssertTrue(report.failures.contains { $0.contains("SQLite alone was not measured") }, "\(report.failures)")
        XCTAssertEqual(report.json["budget"]?["floorMessagesPerSecond"], .double(.nan), "rendered as null")
    }

    // MARK: reads

    /// Internal page 0.99 ms; public call 1.97 ms (1.99×); SQLCipher's cold ratio 2.0, so cold
    /// pages may reach 2.1.
    private func reads(page: Double = 0.99, publicCall: Double = 1.97, floor: Double = 2.0,
                       coldPage: Double = 2.09, coldPublic: Double = 2.09) -> ReadBudget {
        ReadBudget(pageMedianMs: page, publicMedianMs: publicCall, coldFloorRatio: floor, coldPageRatio: coldPage, coldPublicRatio: coldPublic)
    }

    func testReadsJustInsideEveryBudgetPasses() {
        let budget = reads()
        XCTAssertTrue(budget.withinBudget, budget.failures.joined(separator: "; "))
        XCTAssertEqual(budget.exitStatus, 0)
        XCTAssertEqual(budget.maxColdRatio, 2.1, accuracy: 1e-9)
    }

    func testReadsEachBudgetMissedAlone() {
        let cases: [(String, ReadBudget, String)] = [
            ("page", reads(page: 1.01, publicCall: 2.0), "above the 1.000 ms budget"),
            ("public", reads(publicCall: 2.0), "the internal cached page"),
            ("cold page", reads(coldPage: 2.11), "the cold cached page is 2.11× slower encrypted than plaintext, above SQLCipher's own cold-read ratio on the same pages, 2.00×"),
            ("cold public", reads(coldPublic: 2.11), "the cold public call is 2.11×"),
        ]
        for (name, budget, words) in cases {
            XCTAssertFalse(budget.withinBudget, name)
            XCTAssertEqual(budget.exitStatus, 1, name)
            XCTAssertEqual(budget.failures.count, 1, "\(name): \(budget.failures)")
            XCTAssertTrue(budget.failures.first?.contains(words) ?? false, "\(name): \(budget.failures)")
        }
        XCTAssertFalse(reads(floor: .nan).withinBudget, "no floor, no pass")
    }

    // MARK: first login (bench open)

    /// Bare open 3 ms, lone lookup 8 ms; file login 8.9 ms (2.97×); Secret Service login 18.8 ms
    /// (allowed 8.9 + 8 + 2 = 18.9).
    private func login(raw: Double = 3, lookup: Double = 8, file: Double = 8.9, secretService: Double = 18.8) -> FirstLoginBudget.Cache {
        FirstLoginBudget.Cache(messages: 1_000, rawKeyMs: raw, lookupMs: lookup, loginFileMs: file, loginSecretServiceMs: secretService)
    }

    func testFirstLoginJustInsideEveryBudgetPasses() {
        let budget = FirstLoginBudget(caches: [login(), login(raw: 8.4, lookup: 0.9, file: 24.9, secretService: 24.9)])
        XCTAssertTrue(budget.withinBudget, budget.failures.joined(separator: "; "))
        XCTAssertEqual(budget.exitStatus, 0)
        XCTAssertEqual(budget.caches[0].maxLoginSecretServiceMs, 18.9, accuracy: 1e-9)
    }

    func testFirstLoginEachBudgetMissedAlone() {
        let cases: [(String, FirstLoginBudget.Cache, String)] = [
            ("file over raw", login(file: 9.1, secretService: 18.8), "the bare raw-key open (3.00 ms), above 3.00×"),
            ("secret service", login(secretService: 19.0), "+ a lone libsecret lookup 8.00 ms + 2.00 ms = 18.9 ms"),
            ("absolute", login(raw: 9, lookup: 0, file: 25.1, secretService: 25), "takes 25.1 ms, above 25 ms"),
        ]
        for (name, cache, words) in cases {
            let budget = FirstLoginBudget(caches: [login(), cache])
            XCTAssertFalse(budget.withinBudget, name)
            XCTAssertEqual(budget.exitStatus, 1, name)
            XCTAssertEqual(budget.failures.count, 1, "\(name): \(budget.failures)")
            XCTAssertTrue(budget.failures.first?.contains(words) ?? false, "\(name): \(budget.failures)")
        }
        XCTAssertFalse(FirstLoginBudget(caches: [login(lookup: .nan)]).withinBudget, "no lookup floor, no pass")
        XCTAssertFalse(FirstLoginBudget(caches: []).withinBudget, "nothing measured, no pass")
    }

    // MARK: media

    /// Plaintext 500 MiB/s (2 ms per 1 MiB file), AES-256-GCM 0.3 ms, view write 0.1 ms: the
    /// ceiling is 1 + 0.4 / 2 + 0.1 = 1.3.
    private func media(ratio: Double = 1.29, hydrated: Double = 0.99, cipher: [Double] = [0.3]) -> MediaBenchReport {
        let sizing = MediaBenchCommand.Sizing(runs: 1, files: 1, messages: 100, reads: 1, quick: false)
        let hydration = MediaBenchmark.Hydration(page: [0.5], hydrated: [hydrated], hydrationOnly: [hydrated - 0.5])
        return MediaBenchReport(sizing: sizing, encryptedRates: [500 / ratio], plaintextRates: [500],
                                encryptedHydration: hydration, plaintextHydration: hydration, cipherMs: cipher, viewWriteMs: [0.1])
    }

    func testMediaJustInsideEveryBudgetPasses() {
        let report = media()
        XCTAssertTrue(report.withinBudget, report.failures.joined(separator: "; "))
        XCTAssertEqual(report.exitStatus, 0)
        XCTAssertEqual(report.plaintextMsPerFile, 2, accuracy: 1e-9)
        XCTAssertEqual(report.maxRatio, 1.3, accuracy: 1e-9)
        XCTAssertEqual(report.json["budget"]?["withinBudget"], .bool(true))
        XCTAssertEqual(report.json["budget"]?["cipherMs"], .double(0.3))
        XCTAssertEqual(report.json["budget"]?["viewWriteMs"], .double(0.1))
    }

    func testMediaEachBudgetMissedAlone() {
        let cases: [(String, MediaBenchReport, String, String)] = [
            ("ratio", media(ratio: 1.31), "ratioWithinBudget", "above 1 + (AES-256-GCM 0.300 ms + view write 0.100 ms) / 2.000 ms + 0.1 = 1.30×"),
            ("hydration", media(hydrated: 1.01), "hydrationWithinBudget", "hydrated page median 1.010 ms is above 1 ms"),
        ]
        for (name, report, field, words) in cases {
            XCTAssertFalse(report.withinBudget, name)
            XCTAssertEqual(report.exitStatus, 1, name)
            XCTAssertEqual(report.failures.count, 1, "\(name): \(report.failures)")
            XCTAssertTrue(report.failures.first?.contains(words) ?? false, "\(name): \(report.failures)")
            XCTAssertEqual(report.json["budget"]?[field], .bool(false), name)
        }
        XCTAssertFalse(media(cipher: []).withinBudget, "no cipher floor, no pass")
    }
}
