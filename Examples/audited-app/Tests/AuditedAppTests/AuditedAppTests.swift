import AuditedApp
import ChatVault
import ChatVaultAudit
import VaultKeys
import XCTest

/// The app under audit, for the kit: its vault and what its banner shows.
final class AppUnderAudit: AuditableApp {
    let app: ChatApp

    init(_ variant: ChatApp.Variant, _ env: AuditEnvironment) throws {
        app = try ChatApp(variant: variant, config: env.apply(to: ChatApp.config), settings: env.apply(to: ChatApp.settings),
                          backend: env.backend)
    }

    var vault: OfflineVault { app.vault }
    func launch(userId: String) async { await app.start(userId: userId) }
    func resetNotices() -> [ResetNotice] {
        app.shownBanners.map { ResetNotice(reason: $0.reason, unsentMessagesLost: $0.unsentLost) }
    }
}

final class AuditedAppTests: XCTestCase {
    func testTheRightListenerHasNoFindingsOverTheWholeCatalogue() async throws {
        let audit = ResetAudit { env in try AppUnderAudit(.right, env) }
        let report = try await audit.run()
        print(report.text)
        XCTAssertEqual(report.scenarios.map(\.name), ResetAudit.scenarios)
        XCTAssertEqual(report.findings, [], report.text)
        // The kit really broke things: the key-loss scenario reached the app's listener once,
        // and the banner carries the count the library reported.
        let keyLost = try XCTUnwrap(report.scenarios.first { $0.name == "key-lost" })
        XCTAssertEqual(keyLost.listenerCalls.map(\.reason), ["keyLost"])
        XCTAssertEqual(keyLost.listenerCalls.first?.listeners, ["BANNER"])
        XCTAssertEqual(keyLost.listenerCalls.first?.executor, "queue audited-app.ui")
        XCTAssertEqual(keyLost.listenerCalls.first?.readsServedBefore, 0)
        // The old outbox cannot be read without its key: the number is unknown, and said so.
        XCTAssertEqual(keyLost.launches.first { $0.step == "after" }?.notices.first?.unsentMessagesLost, -1)
        // A damaged page: the outbox salvaged, nothing unsent lost, and the banner says 0.
        let middle = try XCTUnwrap(report.scenarios.first { $0.name == "damaged-middle-page" })
        XCTAssertEqual(middle.launches.first { $0.step == "after" }?.notices, [ResetNotice(reason: .corrupted, unsentMessagesLost: 0)])
        XCTAssertEqual(middle.launches.last?.pendingMessages, 4)
        // Every key item lived in the scenarios' private keyrings: the test run's own keyring has
        // none of the kit's application id.
        XCTAssertEqual(try SecretServiceKeyStore().deleteAll(applicationId: "org.chatvault.audit"), 0)
        let locked = try XCTUnwrap(report.scenarios.first { $0.name == "locked-keyring" })
        XCTAssertEqual(locked.launches.first { $0.step == "after" }?.unavailableReason, "locked")
        XCTAssertEqual(locked.launches.last?.pendingMessages, 4)
    }

    /// Each planted fault is found, as the finding its variant names, and nothing else.
    func testEachPlantedFaultIsAFinding() async throws {
        let planted: [(ChatApp.Variant, AuditFinding.Kind, [String])] = [
            (.noListener, .noListener, ["key-lost"]),
            (.releasedListener, .listenerReleased, ["key-lost"]),
            (.countIgnored, .countIgnored, ["key-lost"]),
            (.deferredBanner, .bannerAfterReads, ["wrong-key"]),
            (.bannerWhenUnavailable, .resetShownWithoutReset, ["locked-keyring"]),
            (.bannerEveryLaunch, .announcedAgain, ["key-lost"]),
        ]
        for (variant, kind, scenarios) in planted {
            let report = try await ResetAudit { env in try AppUnderAudit(variant, env) }.run(scenarios)
            XCTAssertEqual(Set(report.findings.map(\.kind)), [kind], "\(variant): \(report.text)")
            XCTAssertEqual(report.libraryFindings, [], "\(variant)")
        }
    }

    /// The README's "Auditing your app's reset handling" shows ResetHandlingAuditTests.swift as it is
    /// (this test target compiles and runs it).
    func testTheReadmeShowsTheCompiledExample() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let example = try String(contentsOf: here.appendingPathComponent("ResetHandlingAuditTests.swift"), encoding: .utf8)
        let readme = try String(contentsOf: here.appendingPathComponent("../../../../README.md").standardized, encoding: .utf8)
        XCTAssertTrue(readme.contains("```swift\n" + example + "```\n"), "README.md does not show ResetHandlingAuditTests.swift verbatim")
    }
}
