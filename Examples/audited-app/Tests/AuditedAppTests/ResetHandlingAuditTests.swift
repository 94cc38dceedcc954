import AuditedApp   // the app's own module
import ChatVault
import ChatVaultAudit
import XCTest

/// The app as the kit sees it: its vault, built with its own listeners, and what its banner shows.
final class MyAppUnderAudit: AuditableApp {
    let app: ChatApp

    init(_ env: AuditEnvironment) throws {
        // The app's own configuration and settings, with the scenario's root, key store and server.
        app = try ChatApp(variant: .right, config: env.apply(to: ChatApp.config), settings: env.apply(to: ChatApp.settings),
                          backend: env.backend)
    }

    var vault: OfflineVault { app.vault }
    func launch(userId: String) async { await app.start(userId: userId) }   // login and the first screen
    func resetNotices() -> [ResetNotice] {
        app.shownBanners.map { ResetNotice(reason: $0.reason, unsentMessagesLost: $0.unsentLost) }
    }
}

final class ResetHandlingAuditTests: XCTestCase {
    func testTheAppHandlesEveryResetScenario() async throws {
        let report = try await ResetAudit { env in try MyAppUnderAudit(env) }.run()
        XCTAssertEqual(report.appFindings, [], report.text)       // the app's listener and banner
        XCTAssertEqual(report.libraryFindings, [], report.text)   // what ChatVault guarantees
    }
}
