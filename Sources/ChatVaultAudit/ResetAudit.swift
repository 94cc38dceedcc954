import ChatVault
import ChatVaultTesting
import Foundation
import VaultStore

/// Runs reset scenarios against the app's own vault and reports how the app's reset handling
/// behaved: the scenario kit for an app's test suite.
///
///     let audit = ResetAudit { env in try MyAppUnderAudit(env) }
///     let report = try await audit.run()              // every scenario in `ResetAudit.scenarios`
///     XCTAssertEqual(report.appFindings, [], report.text)
///
/// Each scenario gets a fresh cache root, a private D-Bus with a gnome-keyring of its own (the
/// user's keyring is never touched) and an in-process server; it seeds the cache through the app's
/// vault (cached messages, unsent texts, an unsent photo), breaks it, and relaunches the app
/// through the factory. The library's audit journal says which listeners each reset reached, on
/// which executor, and whether any cached read came first; the app's `resetNotices()` says what
/// the user saw. Every deviation is an `AuditFinding`.
public struct ResetAudit: Sendable {
    private let source: AuditContext.AppSource

    /// Audits a Swift app: `factory` builds it for each launch.
    public init(factory: @escaping AuditAppFactory) {
        source = .factory(factory)
    }

    /// Audits a program (a C app through the C ABI): run once per launch with the protocol
    /// `CommandApp` describes (`arguments[0]` is its path), `environment` added to this
    /// process's. Steps a program cannot be asked to do (hold the cache while a second instance
    /// starts, make a recovery secret, restore from the quarantine) are done by the kit's own vault.
    public init(command arguments: [String], environment: [String: String] = [:]) {
        source = .command(CommandApp(arguments: arguments, environment: environment))
    }

    /// The scenario names, in the order `run()` runs them.
    public static var scenarios: [String] { AuditCatalogue.all.map(\.name) }

    /// What each scenario does, by name.
    public static var summaries: [(name: String, summary: String)] { AuditCatalogue.all.map { ($0.name, $0.summary) } }

    /// Runs `names` (all by default), one after another.
    public func run(_ names: [String]? = nil) async throws -> AuditReport {
        let clock = ContinuousClock.now
        var runs: [ScenarioRun] = []
        for name in names ?? Self.scenarios {
            runs.append(try await run(scenario: name))
        }
        return AuditReport(scenarios: runs, milliseconds: Self.ms(ContinuousClock.now - clock))
    }

    /// Runs one scenario.
    public func run(scenario name: String) async throws -> ScenarioRun {
        guard let scenario = AuditCatalogue.all.first(where: { $0.name == name }) else { throw AuditError.unknownScenario(name) }
        let clock = ContinuousClock.now
        let context = try AuditContext(name: name, source: source, secretService: scenario.secretService)
        defer { context.keyring.stop() }
        try await scenario.body(context)
        var run = ScenarioRun(name: name, summary: scenario.summary, launches: context.launches, findings: context.findings,
                              milliseconds: 0)
        run.findings += AuditRules.library(run, scenario.expect, seededPending: context.seededPending)
        run.findings += AuditRules.app(run)
        run.milliseconds = Self.ms(ContinuousClock.now - clock)
        return run
    }

    static func ms(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
    }
}

/// What the library guarantees for a scenario (from the seeds and ThreatModel.md).
struct AuditExpectation: Sendable {
    /// The reset the launch after the damage reports (nil: none, the condition is transient).
    var reset: String?
    /// The engine state after that launch.
    var state: String
    var unavailableReason: String?
    /// A reset a later launch may report (an escalation after repeated failures).
    var laterReset: String?
    /// Whether, at the last launch, the conversation's cached page and the unsent messages are all
    /// there (true), gone with the reset (false), or not checked (nil).
    var messagesSurvive: Bool?
    var unsentSurvive: Bool?
}

/// The rules that turn launches into findings.
enum AuditRules {
    static let transientStates: Set<String> = ["unavailable", "onlineOnly"]

    /// Deviations from the library's guarantees.
    static func library(_ run: ScenarioRun, _ expect: AuditExpectation, seededPending: Int) -> [AuditFinding] {
        var out: [AuditFinding] = []
        func finding(_ expected: String, _ seen: String) {
            out.append(AuditFinding(scenario: run.name, kind: .library, expected: expected, seen: seen))
        }
        if let after = run.launches.first(where: { $0.step == "after" }) {
            if after.state != expect.state { finding("state \(expect.state) after the damage", "state \(after.state)") }
            if let reason = expect.unavailableReason, after.unavailableReason != reason {
                finding("unavailable (\(reason))", "unavailable reason \(after.unavailableReason ?? "none")")
            }
            let reasons = after.resets.map { $0.reason ?? "?" }
            if reasons != (expect.reset.map { [$0] } ?? []) {
                finding(expect.reset.map { "one \($0) reset" } ?? "no reset", reasons.isEmpty ? "no reset" : "resets \(reasons.joined(separator: ", "))")
            }
        }
        for launch in run.launches {
            let active = launch.state == "ready" || launch.state == "plaintextFallback"
            if launch.offlineEnabled != active {
                finding("isOfflineEnabled() \(active) while \(launch.state)", "\(launch.offlineEnabled) at \(launch.step)")
            }
            if !active || launch.state == "plaintextFallback", launch.atRest != "NONE" {
                finding("atRest NONE while \(launch.state)", "atRest \(launch.atRest) at \(launch.step)")
            }
            if expect.reset == nil, !launch.resets.isEmpty, launch.resets.map(\.reason) != [expect.laterReset] {
                finding("no reset (nothing was lost)", "\(launch.resets.map { $0.reason ?? "?" }) at \(launch.step)")
            }
            for reset in launch.resets where !launch.deliveries.contains(where: { $0.reason == reset.reason && $0.cacheId == reset.cacheId }) {
                finding("the \(reset.reason ?? "?") reset handed to the listeners before the cache serves", "no delivery at \(launch.step)")
            }
            for delivery in launch.deliveries where (delivery.readsServedBefore ?? 0) > 0 {
                finding("no cached read before the reset listeners ran", "\(delivery.readsServedBefore ?? 0) at \(launch.step)")
            }
        }
        // Announced exactly once across relaunches (the repeat-until-delivered rule).
        let delivered = run.launches.flatMap(\.deliveries).filter { $0.reason != "encryptionChanged" && !($0.listeners ?? []).isEmpty }
        for id in Set(delivered.compactMap(\.cacheId)) where delivered.filter({ $0.cacheId == id }).count > 1 {
            finding("each reset delivered once", "delivered \(delivered.filter { $0.cacheId == id }.count) times")
        }
        if let last = run.launches.last, last.step != "seed" {
            let page = min(AuditContext.seededMessages, AuditContext.pageSize)
            if let survive = expect.messagesSurvive, (last.cachedMessages == page) != survive {
                finding(survive ? "the \(page) cached messages kept" : "the cached messages gone with the reset",
                        "\(last.cachedMessages.map(String.init) ?? "no cached page") at \(last.step)")
            }
            if let survive = expect.unsentSurvive, ((last.pendingMessages ?? 0) >= seededPending) != survive {
                finding(survive ? "the \(seededPending) unsent messages kept" : "the unsent messages gone with the reset",
                        "\(last.pendingMessages.map(String.init) ?? "none") at \(last.step)")
            }
            // The unsent photo's file goes with its message, never without it.
            if expect.unsentSurvive == true, let files = last.unsentMediaFiles, files != 1 {
                finding("the unsent photo's file kept with its message", "\(files) readable at \(last.step)")
            }
        }
        return out
    }

    /// What the app did with each reset (and where there was none).
    static func app(_ run: ScenarioRun) -> [AuditFinding] {
        var out: [AuditFinding] = []
        func finding(_ kind: AuditFinding.Kind, _ expected: String, _ seen: String) {
            out.append(AuditFinding(scenario: run.name, kind: kind, expected: expected, seen: seen))
        }
        var hadLossReset = false
        for launch in run.launches {
            for delivery in launch.deliveries where (delivery.listeners ?? []).isEmpty {
                if let released = delivery.released, !released.isEmpty {
                    finding(.listenerReleased, "a live reset listener when the \(delivery.reason ?? "?") reset came",
                            "listener \(released.joined(separator: ", ")) released (the vault holds listeners weakly)")
                } else {
                    finding(.noListener, "a reset listener registered before login", "the \(delivery.reason ?? "?") reset reached no listener")
                }
            }
            let losses = launch.resets.filter { $0.reason != "encryptionChanged" }
            let heard = launch.deliveries.contains { !($0.listeners ?? []).isEmpty }
            if !losses.isEmpty, heard {
                if launch.notices.isEmpty {
                    finding(.resetNotShown, "a notice of the \(losses.map { $0.reason ?? "?" }.joined(separator: ", ")) reset", "nothing shown")
                } else if launch.noticesAtFirstRead.count < losses.count {
                    finding(.bannerAfterReads, "the notice up before the first screen reads the new cache",
                            "no notice when the first screen read (it came later)")
                }
                // The notice carries the library's number: exact (0 included), or -1 said as unknown.
                for (reset, notice) in zip(losses, launch.notices) where notice.unsentMessagesLost != reset.pendingMessagesLost {
                    let lost = reset.pendingMessagesLost ?? -1
                    finding(.countIgnored, lost < 0 ? "the user told the number of unsent messages lost is unknown (-1)"
                                : "the user told \(lost) unsent message\(lost == 1 ? "" : "s") were lost",
                            notice.unsentMessagesLost.map { "told \($0)" } ?? "no count")
                }
            }
            if launch.resets.isEmpty, !launch.notices.isEmpty {
                if hadLossReset {
                    finding(.announcedAgain, "the reset shown once", "shown again at \(launch.step)")
                } else {
                    finding(.resetShownWithoutReset, "no notice: nothing was lost (\(launch.state)\(launch.unavailableReason.map { ", \($0)" } ?? ""))",
                            "\(launch.notices.count) notice\(launch.notices.count == 1 ? "" : "s") at \(launch.step)")
                }
            }
            if !losses.isEmpty { hadLossReset = true }
        }
        return out
    }
}
