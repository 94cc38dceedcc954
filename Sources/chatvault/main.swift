import ChatVault
import Foundation

/// `chatvault`: audits offline caches and runs key-loss and corruption scenarios against the real
/// library, real files and the real Secret Service.
let usage = """
    usage: chatvault <verb> [options]

      scenarios [--keystore secret-service|file|memory] [--json]
      seed      --dir D --user U [--messages N] [--pending P] [--encryption on|off] [--marker TEXT] [--keystore …] [--json]
      open      --dir D --user U [--encryption on|off] [--failure-behavior onlineOnly|plaintextFallback] [--integrity-wait S] [--keystore …] [--json]
      status    --dir D [--user U] [--marker TEXT] [--json]
      outbox    --dir D --user U [--keystore …] [--json]
      key       rotate --dir D --user U [--keystore …] [--json]
      key       move --dir D --user U --to secret-service|file [--key-dir K] [--json]
      key       recovery-secret --dir D --user U [--out FILE] [--keystore …] [--json]
      recover   --dir D --user U [--keystore …] [--json]          (the recovery secret on stdin)
      quarantine list --dir D --user U [--json] | quarantine restore ID --dir D --user U [--json]
      export    --dir D --user U --to FILE [--secret-out FILE] [--json]
      import    --dir D --user U --from FILE [--json]                 (the export's secret on stdin)
      demo      [--story outbox|reconnect] [--messages N] [--json]
      demo      --matrix [--homeserver URL --user @U:SERVER [--password-file F]] [--messages N] [--json]
      bench     open [--runs N] [--messages M] [--keystore …] [--process-runs P] [--large-messages L] [--json]
      bench     reads [--runs N] [--messages M] [--conversations C] [--json]
      bench     outbox [--runs N] [--batch-runs R] [--flush-messages F] [--flush-runs S] [--keystore …] [--json]
      bench     matrix [--messages N] [--json]
      bench     keys [--messages N] [--runs R] [--json]
      version

    Common options: --app ID (default \(CommonOptions.defaultApplicationId)), --key-dir K (key files for --keystore file).
    """

let arguments = Array(CommandLine.arguments.dropFirst())
let verb = arguments.first ?? "help"
let rest = Array(arguments.dropFirst())
var status: Int32 = 0
do {
    switch verb {
    case "seed": status = try await SeedCommand.run(rest)
    case "open": status = try await OpenCommand.run(rest)
    case "status": status = try StatusCommand.run(rest)
    case "outbox": status = try await OutboxCommand.run(rest)
    case "key": status = try await KeyCommand.run(rest)
    case "recover": status = try await RecoveryCommands.recover(rest)
    case "export": status = try await RecoveryCommands.export(rest)
    case "import": status = try await RecoveryCommands.importCache(rest)
    case "quarantine": status = try await RecoveryCommands.quarantine(rest)
    case "demo": status = try await DemoCommand.run(rest)
    case OutboxStressCommand.verb: status = try await OutboxStressCommand.run(rest)
    case MatrixSendStressCommand.verb: status = try await MatrixSendStressCommand.run(rest)
    case SyncStressCommand.verb: status = try await SyncStressCommand.run(rest)
    case MediaStressCommand.verb: status = try await MediaStressCommand.run(rest)
    case "scenarios": status = try await ScenariosCommand.run(rest)
    case ScenarioChild.verb: status = try await ScenarioChild.run(rest)
    case "bench": status = try await BenchCommand.run(rest)
    case FirstLoginChild.verb: status = try await FirstLoginChild.run(rest)
    case CallgrindHook.verb: status = try await CallgrindHook.run(rest)
    case "version", "--version": emit("chatvault \(chatVaultVersion)")
    case "help", "--help", "-h": emit(usage)
    default: throw CLIError.usage("unknown verb '\(verb)'; try 'chatvault help'")
    }
} catch let error as CLIError {
    complain(error.message)
    status = error.status
} catch {
    complain(String(describing: error))
    status = 1
}
exit(status)
