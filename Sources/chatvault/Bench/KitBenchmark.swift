import ChatVault
import ChatVaultAudit
import ChatVaultTesting
import Foundation

/// `chatvault bench kit [--runs N] [--json] [-- PROGRAM ARGS…]`: how long the scenario kit takes
/// over its whole catalogue (budget: ≤ 60 s on a 2-core machine), `N` runs (default 3), over
/// `ReferenceAuditedApp` (one listener, its notice set at once) or the given program (a C app).
/// Medians of each run's total and of each scenario. The floor beside it, measured in the same run:
/// the private D-Bus sessions alone (each scenario starts one, with or without a gnome-keyring,
/// and ends it), which no scenario can skip.
enum KitBenchCommand {
    static let budgetSeconds = 60.0

    static func run(_ raw: [String]) async throws -> Int32 {
        let split = raw.firstIndex(of: "--")
        var args = try Arguments(Array(raw[..<(split ?? raw.count)]))
        let program = split.map { Array(raw[($0 + 1)...]) } ?? []
        let json = args.flag("json")
        let runs = try args.int("runs", default: 3, range: 1...20)
        try args.rejectUnknown()
        let audit: ResetAudit
        if let first = program.first {
            let path = first.contains("/") ? absolutePath(first) : Subprocess.which(first)
            guard let path, access(path, X_OK) == 0 else { throw CLIError.usage("no program \(first)") }
            audit = ResetAudit(command: [path] + program.dropFirst())
        } else {
            audit = ResetAudit { env in try ReferenceAuditedApp(env) }
        }

        var totals: [Double] = []
        var perScenario: [String: [Double]] = [:]
        var findings = 0
        for _ in 0..<runs {
            let report: AuditReport
            do {
                report = try await audit.run()
            } catch {
                throw CLIError.failure("the kit could not run: \(error)")
            }
            totals.append(report.milliseconds)
            findings += report.findings.count
            for scenario in report.scenarios { perScenario[scenario.name, default: []].append(scenario.milliseconds) }
        }
        // The floor: the sessions alone, as many as a run starts (with a keyring unless the
        // scenario has none).
        var sessions: [Double] = []
        let withKeyring = ResetAudit.scenarios.count - 2
        for index in 0..<ResetAudit.scenarios.count {
            let clock = ContinuousClock.now
            do {
                let keyring = try PrivateKeyring.start(secretService: index < withKeyring)
                keyring.stop()
            } catch {
                throw CLIError.failure("a private session could not start: \(error)")
            }
            sessions.append((ContinuousClock.now - clock).milliseconds)
        }
        let total = median(totals)
        let floor = sessions.reduce(0, +)
        let within = total <= budgetSeconds * 1000 && findings == 0
        if json {
            emit(JSON.object([
                ("runs", .int(Int64(runs))), ("app", .string(program.isEmpty ? "ReferenceAuditedApp" : program.joined(separator: " "))),
                ("scenarios", .int(Int64(ResetAudit.scenarios.count))), ("totalMedianMs", .double(total)),
                ("floorMs", .double(floor)), ("budgetMs", .double(budgetSeconds * 1000)), ("findings", .int(Int64(findings))),
                ("scenarioMedianMs", .object(ResetAudit.scenarios.map { ($0, .double(median(perScenario[$0] ?? []))) })),
                ("withinBudget", .bool(within)),
            ]).render())
        } else {
            emit("""
                scenario kit, whole catalogue (\(ResetAudit.scenarios.count) scenarios) over \(program.isEmpty ? "ReferenceAuditedApp" : program.joined(separator: " ")), \(runs) run\(runs == 1 ? "" : "s"):
                  total median \(String(format: "%.2f", total / 1000)) s (budget \(Int(budgetSeconds)) s); floor: \(ResetAudit.scenarios.count) private sessions started and ended, \(String(format: "%.2f", floor / 1000)) s (\(String(format: "%.0f", floor / max(total, 1) * 100)) % of the total)
                  findings over all runs: \(findings)
                """)
            for name in ResetAudit.scenarios {
                emit("  \(name.padding(toLength: 38, withPad: " ", startingAt: 0)) \(String(format: "%8.1f", median(perScenario[name] ?? []))) ms")
            }
        }
        return within ? 0 : 1
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

}
