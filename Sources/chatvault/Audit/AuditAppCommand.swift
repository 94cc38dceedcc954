import ChatVaultAudit
import ChatVaultTesting
import Foundation

/// `chatvault audit-app [--only a,b] [--json] [--out REPORT.json] [--html FILE] -- PROGRAM [ARGS…]`:
/// the scenario kit (`ResetAudit`) over an app that is a program (a C app through the C ABI): each
/// launch runs PROGRAM in the scenario's private D-Bus session with the protocol `ResetAudit(command:)`
/// documents. Prints the runs and the findings; exits 1 when there are findings. `--out` keeps the
/// report as JSON (what `chatvault audit --runs` reads); `--html` writes the page.
enum AuditAppCommand {
    static func run(_ raw: [String]) async throws -> Int32 {
        guard let split = raw.firstIndex(of: "--"), split + 1 < raw.count else {
            throw CLIError.usage("the app's program comes after --")
        }
        var args = try Arguments(Array(raw[..<split]))
        let program = Array(raw[(split + 1)...])
        let json = args.flag("json")
        let only = args.string("only").map { $0.split(separator: ",").map(String.init) }
        let out = args.string("out").map(absolutePath)
        let html = args.string("html").map(absolutePath)
        try args.rejectUnknown()
        for name in only ?? [] where !ResetAudit.scenarios.contains(name) {
            throw CLIError.usage("--only: no scenario named \(name) (they are: \(ResetAudit.scenarios.joined(separator: ", ")))")
        }
        if let out { try ScenarioReport.checkDestination(out, option: "--out") }
        if let html { try ScenarioReport.checkDestination(html, option: "--html") }
        let path = program[0].contains("/") ? absolutePath(program[0]) : Subprocess.which(program[0])
        guard let path, access(path, X_OK) == 0 else { throw CLIError.usage("no program \(program[0])") }

        let progress = Progress(json: json)
        var runs: [ScenarioRun] = []
        let audit = ResetAudit(command: [path] + program.dropFirst())
        let clock = ContinuousClock.now
        for name in only ?? ResetAudit.scenarios {
            progress.show("  running  \(name)")
            do {
                let run = try await audit.run(scenario: name)
                runs.append(run)
                progress.finish("  \(run.findings.isEmpty ? "ok" : "FINDINGS") \(name)")
            } catch {
                progress.finish("  failed   \(name)")
                throw CLIError.failure("\(name): \(error)")
            }
        }
        let elapsed = ContinuousClock.now - clock
        let report = AuditReport(scenarios: runs, milliseconds: elapsed.milliseconds)
        let data = try report.json()
        if let out {
            try ScenarioReport.writePage(String(decoding: data, as: UTF8.self), to: out, option: "--out")
        }
        if let html {
            try AuditPage.writeRuns(report, to: html)
        }
        emit(json ? String(decoding: data, as: UTF8.self) : report.text)
        return report.findings.isEmpty ? 0 : 1
    }
}
