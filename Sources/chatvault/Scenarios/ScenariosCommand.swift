import ChatVault
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore

/// `chatvault scenarios [--keystore secret-service|file|memory] [--only a,b] [--json]`: runs the
/// whole catalogue end to end against real files and the real Secret Service (or the named store)
/// and exits non-zero when any scenario deviates from what it expects.
///
/// Key items use the scenario-only application id `org.chatvault.scenarios` and are removed
/// afterwards; scenarios that lock the keyring or take the Secret Service away run in private
/// D-Bus sessions with a throwaway keyring, so a desktop's own keyring is left as it was.
enum ScenariosCommand {
    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let json = args.flag("json")
        let keystore = try args.choice("keystore", default: "secret-service", among: ["secret-service", "file", "memory"])
        let only = args.string("only").map { Set($0.split(separator: ",").map(String.init)) }
        let report = args.string("report").map(absolutePath)
        try args.rejectUnknown()
        if let report { try ScenarioReport.checkDestination(report) }
        if let only {
            let unknown = only.subtracting(Catalogue.all.map(\.name))
            if let first = unknown.sorted().first { throw CLIError.usage("no scenario named '\(first)'") }
        }

        var ambientProblem: String?
        if keystore == "secret-service", case .unavailable(let reason) = SecretServiceKeyStore().availability() {
            ambientProblem = "the session's Secret Service is unavailable (\(reason.rawValue)); run through Scripts/chatvault, which starts a private keyring"
        }
        let keyRoot = try makePrivateDirectory()

        var results: [ScenarioResult] = []
        let chosen = Catalogue.all.filter { only?.contains($0.name) ?? true }
        let progress = Progress(json: json)
        for (index, scenario) in chosen.enumerated() {
            progress.show("  running   \(scenario.name) (\(index + 1) of \(chosen.count))")
            let result: ScenarioResult
            if !scenario.keystores.contains(keystore) {
                result = ScenarioResult(name: scenario.name, summary: scenario.summary, expected: nil, observed: nil, listenerCalls: [],
                                        deviations: [], skipped: "not applicable to the \(keystore) store (it has no lock or service state)",
                                        milliseconds: 0)
            } else if keystore == "secret-service" && scenario.placement != .here {
                result = runInPrivateSession(scenario)
            } else if let ambientProblem {
                result = ScenarioResult(name: scenario.name, summary: scenario.summary, expected: nil, observed: nil, listenerCalls: [],
                                        deviations: [ambientProblem], skipped: nil, milliseconds: 0)
            } else {
                result = await runHere(scenario, keystore: keystore, keyDirectory: "\(keyRoot.path)/keys")
            }
            results.append(result)
            // On a terminal each scenario's verdict replaces its "running" line; on a pipe the
            // table below says it all.
            progress.finish("  \(result.verdict.padding(toLength: 9, withPad: " ", startingAt: 0)) \(scenario.name)")
        }

        var removed = 0
        if keystore == "secret-service" && ambientProblem == nil {
            removed = (try? SecretServiceKeyStore().deleteAll(applicationId: ScenarioContext.applicationId)) ?? 0
        }
        let deviating = results.filter { !$0.passed }
        if let report { try ScenarioReport.write(results, keystore: keystore, to: report) }
        if json {
            emit(render(results, keystore: keystore, removedKeyItems: removed).render())
        } else {
            emit(table(results))
            emit("\n\(results.count - deviating.count - results.filter { $0.skipped != nil }.count) ok, \(deviating.count) deviating, "
                 + "\(results.filter { $0.skipped != nil }.count) skipped (key store: \(keystore); scenario key items removed: \(removed))")
            for result in deviating {
                emit("\(result.name): " + result.deviations.joined(separator: "; "))
            }
        }
        return deviating.isEmpty ? 0 : 1
    }

    /// Runs one scenario in this process.
    static func runHere(_ scenario: Scenario, keystore: String, keyDirectory: String) async -> ScenarioResult {
        let started = Date()
        do {
            let ctx = try ScenarioContext(name: scenario.name, keystore: keystore, memory: MemoryKeyStore(), keyDirectory: keyDirectory)
            let (expected, observed) = try await scenario.body(ctx)
            return ScenarioResult(name: scenario.name, summary: scenario.summary, expected: expected, observed: observed,
                                  listenerCalls: ctx.listenerCalls, deviations: ctx.deviations + expected.deviations(from: observed),
                                  skipped: nil, milliseconds: Date().timeIntervalSince(started) * 1000)
        } catch {
            return ScenarioResult(name: scenario.name, summary: scenario.summary, expected: nil, observed: nil, listenerCalls: [],
                                  deviations: ["error: \(error)"], skipped: nil, milliseconds: Date().timeIntervalSince(started) * 1000)
        }
    }

    /// Runs one scenario in a child process inside a private D-Bus session.
    static func runInPrivateSession(_ scenario: Scenario) -> ScenarioResult {
        let started = Date()
        do {
            let kind: PrivateSession.Kind = scenario.placement == .privateKeyring ? .keyring : .noSecretService
            let output = try PrivateSession.runChild(kind, [ScenarioChild.verb, scenario.name])
            // Daemons D-Bus activates in the session share its stdout: take only our line.
            let line = String(decoding: output, as: UTF8.self).split(separator: "\n")
                .first { $0.hasPrefix(ScenarioChild.resultPrefix) }?.dropFirst(ScenarioChild.resultPrefix.count)
            guard let line, let result = try? JSONDecoder().decode(ScenarioResult.self, from: Data(line.utf8)) else {
                throw CLIError.failure("the private session child printed no result: \(String(decoding: output.prefix(300), as: UTF8.self))")
            }
            return result
        } catch {
            return ScenarioResult(name: scenario.name, summary: scenario.summary, expected: nil, observed: nil, listenerCalls: [],
                                  deviations: ["error: \(error)"], skipped: nil, milliseconds: Date().timeIntervalSince(started) * 1000)
        }
    }

    /// A private temporary directory for key files, removed with the returned object.
    static func makePrivateDirectory() throws -> TemporaryDirectory {
        do {
            return try TemporaryDirectory.create(prefix: "chatvault-scenario-keys")
        } catch {
            throw CLIError.failure("\(error)")
        }
    }

    static let columns = ["scenario", "verdict", "expected", "observed", "resets (listener)", "lost", "rows kept", "offline", "ms"]

    /// One result's cells, for the text table and the HTML report alike.
    static func cells(_ r: ScenarioResult) -> [String] {
        let expected = r.expected.map { e in e.outcome + (e.unavailableReason.map { "(\($0))" } ?? "") + (e.resets.isEmpty ? "" : " " + e.resets.map(\.reason).joined(separator: ",")) } ?? "-"
        let observed = r.observed.map { o in o.outcome + (o.unavailableReason.map { "(\($0))" } ?? "") } ?? "-"
        let resets = r.listenerCalls.isEmpty ? "none" : r.listenerCalls.map(\.reason).joined(separator: ",")
        let lost = r.listenerCalls.map { String($0.pendingMessagesLost) }.joined(separator: ",")
        let rows = r.observed.map { o in "\(o.messages.map(String.init) ?? "-")/\(o.pending.map(String.init) ?? "-")" } ?? "-"
        let offline = r.observed.map { $0.offlineEnabled ? "yes" : "no" } ?? "-"
        return [r.name, r.verdict, expected, observed, resets, lost.isEmpty ? "-" : lost, rows, offline, String(format: "%.0f", r.milliseconds)]
    }

    static func table(_ results: [ScenarioResult]) -> String {
        var table = Table(header: columns)
        table.rows = results.map(cells)
        return table.render() + "\n(rows kept = messages/pending after the scenario's last open)"
    }

    static func render(_ results: [ScenarioResult], keystore: String, removedKeyItems: Int) -> JSON {
        func records(_ list: [ResetRecord]) -> JSON {
            .array(list.map { .object([("reason", .string($0.reason)), ("pendingMessagesLost", .int($0.pendingMessagesLost))]) })
        }
        func observation(_ o: Observation) -> JSON {
            .object([
                ("outcome", .string(o.outcome)), ("unavailableReason", .optional(o.unavailableReason)), ("resets", records(o.resets)),
                ("offlineEnabled", .bool(o.offlineEnabled)), ("messages", o.messages.map { .int($0) } ?? .null),
                ("pending", o.pending.map { .int($0) } ?? .null), ("atRest", .string(o.atRest)), ("keyStorage", .string(o.keyStorage)),
            ])
        }
        func expectation(_ e: Expectation) -> JSON {
            .object([
                ("outcome", .string(e.outcome)), ("unavailableReason", .optional(e.unavailableReason)), ("resets", records(e.resets)),
                ("offlineEnabled", .bool(e.offlineEnabled)), ("messages", e.messages.map { .int($0) } ?? .null),
                ("pending", e.pending.map { .int($0) } ?? .null),
            ])
        }
        return .object([
            ("keystore", .string(keystore)),
            ("passed", .bool(results.allSatisfy(\.passed))),
            ("scenarios", .array(results.map { r in
                .object([
                    ("name", .string(r.name)), ("summary", .string(r.summary)), ("verdict", .string(r.verdict)),
                    ("expected", r.expected.map(expectation) ?? .null), ("observed", r.observed.map(observation) ?? .null),
                    ("resetReason", .optional(r.listenerCalls.last?.reason)),
                    ("pendingMessagesLost", r.listenerCalls.last.map { .int($0.pendingMessagesLost) } ?? .null),
                    ("listenerCalls", records(r.listenerCalls)),
                    ("rowsKept", r.observed.map { o in .object([("messages", o.messages.map { .int($0) } ?? .null), ("pending", o.pending.map { .int($0) } ?? .null)]) } ?? .null),
                    ("offlineEnabled", r.observed.map { .bool($0.offlineEnabled) } ?? .null),
                    ("deviations", .array(r.deviations.map { .string($0) })), ("skipped", .optional(r.skipped)),
                    ("milliseconds", .double(r.milliseconds)),
                ])
            })),
            ("removedKeyItems", .int(removedKeyItems)),
        ])
    }
}

/// The hidden verb a private session runs: one scenario, its result as JSON on stdout.
enum ScenarioChild {
    static let verb = "__scenario-child"
    static let resultPrefix = "chatvault-scenario-result: "

    static func run(_ raw: [String]) async throws -> Int32 {
        guard let name = raw.first, let scenario = Catalogue.all.first(where: { $0.name == name }) else {
            throw CLIError.usage("\(verb) needs a scenario name")
        }
        if scenario.placement == .privateKeyring {
            try PrivateSession.startKeyring(replace: false)
        }
        let keys = try ScenariosCommand.makePrivateDirectory()
        let result = await ScenariosCommand.runHere(scenario, keystore: "secret-service", keyDirectory: "\(keys.path)/keys")
        let encoder = JSONEncoder()
        emit(resultPrefix + String(decoding: try encoder.encode(result), as: UTF8.self))
        return 0
    }
}
