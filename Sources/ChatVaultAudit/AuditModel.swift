public import Foundation
public import VaultStore

/// Something the audit found: in the app's handling of a reset (its listener, its notice), or in
/// the library (a deviation from what it guarantees for the scenario).
public struct AuditFinding: Codable, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// A reset reached no listener: none was registered when the cache opened.
        case noListener
        /// The app's listener had been released (listeners are held weakly) when the reset came.
        case listenerReleased
        /// The listener was called but the app showed the user nothing.
        case resetNotShown
        /// The app's first screen read the new (empty) cache before its notice was up.
        case bannerAfterReads
        /// The notice does not tell the user how many unsent messages were lost (or invents a
        /// number the library said is unknown).
        case countIgnored
        /// A notice of lost history where nothing was lost (a locked keyring, a second instance…).
        case resetShownWithoutReset
        /// The same reset shown again at a later launch.
        case announcedAgain
        /// The library did not do what it guarantees for this scenario.
        case library
    }

    public var scenario: String
    public var kind: Kind
    public var expected: String
    public var seen: String

    public init(scenario: String, kind: Kind, expected: String, seen: String) {
        self.scenario = scenario
        self.kind = kind
        self.expected = expected
        self.seen = seen
    }

    public var isAboutTheApp: Bool { kind != .library }
    public var description: String { "\(scenario): \(kind.rawValue): expected \(expected); seen \(seen)" }
}

/// One launch of the app inside a scenario, as the kit saw it.
public struct LaunchRecord: Codable, Sendable {
    /// What this launch was for (`seed`, `after-damage`, `relaunch`…).
    public var step: String
    /// The engine state's code after `launch` returned (`ready`, `unavailable`, …).
    public var state: String
    public var unavailableReason: String?
    public var offlineEnabled: Bool
    /// `getOfflineEncryptionStatus()`'s `atRest` and `keyStorage` after the launch.
    public var atRest: String
    public var keyStorage: String
    /// The audit journal's entries made during this launch (opens, resets, deliveries, refusals).
    public var journal: [AuditEntry]
    /// The app's notices when its first screen read (right after `launch` returned), and at the
    /// end of the launch.
    public var noticesAtFirstRead: [ResetNotice]
    public var notices: [ResetNotice]
    /// The conversation's cached page at the first read, and the unsent messages.
    public var cachedMessages: Int?
    public var pendingMessages: Int?
    /// Unsent media messages whose file is still there (`attachment.localPath` readable); nil
    /// when not known (a program's launch).
    public var unsentMediaFiles: Int?
    public var milliseconds: Double

    public var resets: [AuditEntry] { journal.filter { $0.kind == .reset } }
    public var deliveries: [AuditEntry] { journal.filter { $0.kind == .delivered } }
}

/// One scenario's run: its launches and what was found.
public struct ScenarioRun: Codable, Sendable {
    public var name: String
    public var summary: String
    public var launches: [LaunchRecord]
    public var findings: [AuditFinding]
    public var milliseconds: Double

    /// Every listener call the journal recorded over the scenario: (reason, unsent lost, ids).
    public var listenerCalls: [AuditEntry] { launches.flatMap(\.deliveries) }
}

/// A whole audit: every scenario run, and the findings.
public struct AuditReport: Codable, Sendable {
    public var scenarios: [ScenarioRun]
    public var milliseconds: Double

    public init(scenarios: [ScenarioRun], milliseconds: Double) {
        self.scenarios = scenarios
        self.milliseconds = milliseconds
    }

    public var findings: [AuditFinding] { scenarios.flatMap(\.findings) }
    /// The findings about the app's reset handling (the library's own are apart).
    public var appFindings: [AuditFinding] { findings.filter(\.isAboutTheApp) }
    public var libraryFindings: [AuditFinding] { findings.filter { !$0.isAboutTheApp } }

    /// Sorted-key JSON (the same model `chatvault audit --kit-report` reads).
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return try encoder.encode(self)
    }

    public static func decode(_ data: Data) throws -> AuditReport {
        try JSONDecoder().decode(AuditReport.self, from: data)
    }

    /// A table for people: one line per scenario, then every finding.
    public var text: String {
        var lines: [String] = []
        let width = scenarios.map(\.name.count).max() ?? 10
        for run in scenarios {
            let resets = run.launches.flatMap(\.resets).map { "\($0.reason ?? "?")(\($0.pendingMessagesLost ?? -1))" }
            let verdict = run.findings.isEmpty ? "ok" : "\(run.findings.count) finding\(run.findings.count == 1 ? "" : "s")"
            let name = run.name.padding(toLength: width, withPad: " ", startingAt: 0)
            lines.append("\(name)  \(verdict.padding(toLength: 12, withPad: " ", startingAt: 0))  resets: \(resets.isEmpty ? "none" : resets.joined(separator: ", "))  \(Int(run.milliseconds)) ms")
        }
        lines.append("")
        if findings.isEmpty {
            lines.append("No findings.")
        } else {
            lines.append("Findings:")
            lines += findings.map { "  \($0)" }
        }
        return lines.joined(separator: "\n")
    }
}
