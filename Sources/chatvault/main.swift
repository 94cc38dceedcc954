import ChatVault
import Foundation

/// `chatvault`: audits offline caches and runs key-loss and corruption scenarios against the real
/// library, real files and the real Secret Service.
let arguments = Array(CommandLine.arguments.dropFirst())
let verb = arguments.first ?? "help"
let rest = Array(arguments.dropFirst())
var status: Int32 = 0
do {
    // Help first: `VERB --help` / `-h` never reaches the verb's own argument checks.
    if let known = Help.verb(verb), Help.asked(rest) {
        emit(Help.page(of: known))
        exit(0)
    }
    switch verb {
    case "seed": status = try await SeedCommand.run(rest)
    case "open": status = try await OpenCommand.run(rest)
    case "status": status = try StatusCommand.run(rest)
    case "audit": status = try AuditCommand.run(rest)
    case "audit-app": status = try await AuditAppCommand.run(rest)
    case "outbox": status = try await OutboxCommand.run(rest)
    case "search": status = try await SearchCommand.run(rest)
    case "key": status = try await KeyCommand.run(rest)
    case "recover": status = try await RecoveryCommands.recover(rest)
    case "export": status = try await RecoveryCommands.export(rest)
    case "import": status = try await RecoveryCommands.importCache(rest)
    case "quarantine": status = try await RecoveryCommands.quarantine(rest)
    case "demo": status = try await DemoCommand.run(rest)
    case OutboxStressCommand.verb: status = try await OutboxStressCommand.run(rest)
    case MatrixSendStressCommand.verb: status = try await MatrixSendStressCommand.run(rest)
    case MatrixCatchUpStressCommand.verb: status = try await MatrixCatchUpStressCommand.run(rest)
    case SyncStressCommand.verb: status = try await SyncStressCommand.run(rest)
    case MediaStressCommand.verb: status = try await MediaStressCommand.run(rest)
    case "scenarios": status = try await ScenariosCommand.run(rest)
    case ScenarioChild.verb: status = try await ScenarioChild.run(rest)
    case "bench": status = try await BenchCommand.run(rest)
    case FirstLoginChild.verb: status = try await FirstLoginChild.run(rest)
    case CallgrindHook.verb: status = try await CallgrindHook.run(rest)
    case "version", "--version": emit("chatvault \(chatVaultVersion)")
    case "help", "--help", "-h":
        if let name = rest.first {
            guard let known = Help.verb(name) else { throw CLIError.usage("unknown verb '\(name)'; try 'chatvault help'") }
            emit(Help.page(of: known))
        } else {
            emit(Help.top)
        }
    default: throw CLIError.usage("unknown verb '\(verb)'; try 'chatvault help'")
    }
} catch let error as CLIError {
    // Still one line: a usage error names the verb's usage (its form, or where to find it).
    complain(error.status == 2 ? Help.errorLine(error.message, verb: verb, rest: rest) : error.message)
    status = error.status
} catch {
    complain(String(describing: error))
    status = 1
}
exit(status)
