import Foundation

/// Every verb's usage, in one place: `chatvault help`, `chatvault help VERB`, `chatvault VERB
/// --help` (or `-h`, anywhere after the verb) and the usage line a usage error names all come from
/// here, so they cannot disagree.
enum Help {
    struct Verb {
        let name: String
        /// One line per form of the verb (its sub-verbs), without the leading "chatvault ".
        let forms: [String]
        /// One sentence: what it is for.
        let summary: String
        /// Plumbing for the crash tests: listed apart.
        var hidden = false
    }

    static let verbs: [Verb] = [
        Verb(name: "scenarios", forms: ["scenarios [--only NAME[,NAME…]] [--keystore secret-service|file|memory] [--report FILE.html] [--json]"],
             summary: "Runs the key-loss and corruption scenarios against the real library, files and Secret Service."),
        Verb(name: "seed", forms: ["seed --dir D --user U [--messages N] [--pending P] [--encryption on|off] [--marker TEXT] [--keystore …] [--json]"],
             summary: "Creates a cache with synthetic messages and unsent ones."),
        Verb(name: "open", forms: ["open --dir D --user U [--encryption on|off] [--failure-behavior onlineOnly|plaintextFallback] [--integrity-wait S] [--keystore …] [--json]"],
             summary: "Opens a cache as an app would and reports what the open procedure decided."),
        Verb(name: "status", forms: ["status --dir D [--user U] [--marker TEXT] [--json]"],
             summary: "Reports a cache's files, modes, manifest and encryption, without opening it."),
        Verb(name: "audit", forms: ["audit --dir D [--user U] [--json] [--html FILE] [--runs FILE[,FILE…]] [--keystore …]"],
             summary: "What happened to a cache over time: opens, resets and their delivery, refusals, restores."),
        Verb(name: "audit-app", forms: ["audit-app [--only a,b] [--json] [--out REPORT.json] [--html FILE] -- PROGRAM [ARGS…]"],
             summary: "Runs the reset scenario kit over an app that is a program (a C app): findings about its reset handling."),
        Verb(name: "search", forms: ["search --dir D --user U QUERY [--conversation user:UID|group:GUID] [--sender UID] [--order newest|oldest|relevance] [--limit N] [--show-text] [--progress] [--keystore …] [--json]"],
             summary: "Searches the cached messages offline; snippets only with --show-text."),
        Verb(name: "outbox", forms: ["outbox --dir D --user U [--keystore …] [--json]"],
             summary: "Lists the unsent messages of a cache (ids and states, never text)."),
        Verb(name: "key", forms: [
            "key rotate --dir D --user U [--keystore …] [--json]",
            "key move --dir D --user U --to secret-service|file [--key-dir K] [--json]",
            "key recovery-secret --dir D --user U [--out FILE] [--keystore …] [--json]",
        ], summary: "Rotates a cache's key, moves it between stores, or makes a recovery secret."),
        Verb(name: "recover", forms: ["recover --dir D --user U [--keystore …] [--json]        (the recovery secret on stdin)"],
             summary: "Brings back a quarantined cache with its recovery secret."),
        Verb(name: "quarantine", forms: [
            "quarantine list --dir D --user U [--json]",
            "quarantine restore ID --dir D --user U [--json]",
        ], summary: "Lists the caches a reset set aside, or restores one whose key is back."),
        Verb(name: "export", forms: ["export --dir D --user U --to FILE [--secret-out FILE] [--json]"],
             summary: "Writes a cache to one file, its key wrapped by a one-time secret."),
        Verb(name: "import", forms: ["import --dir D --user U --from FILE [--json]             (the export's secret on stdin)"],
             summary: "Makes an export the user's cache."),
        Verb(name: "demo", forms: [
            "demo [--story outbox|reconnect] [--messages N] [--json]",
            "demo --matrix [--homeserver URL --user @U:SERVER [--password-file F]] [--messages N] [--json]",
        ], summary: "Tells the offline story (queued sends, a reconnect) against the simulator or Matrix."),
        Verb(name: "bench", forms: [
            "bench open [--runs N] [--messages M] [--keystore …] [--process-runs P] [--large-messages L] [--json]",
            "bench reads [--runs N] [--messages M] [--conversations C] [--json]",
            "bench outbox [--runs N] [--batch-runs R] [--flush-messages F] [--flush-runs S] [--keystore …] [--json]",
            "bench sync [--runs N] [--messages M] [--quick] [--json]",
            "bench media [--runs N] [--files F] [--messages M] [--quick] [--json]",
            "bench matrix [--messages N] [--relations R] [--rooms R] [--room-messages M] [--kills K] [--json]",
            "bench keys [--messages N] [--runs R] [--json]",
            "bench capi [--runs N] [--json]",
            "bench kit [--runs N] [--json] [-- PROGRAM [ARGS…]]",
            "bench search [--runs N] [--messages M] [--ingest-messages I] [--ingest-runs R] [--json]",
        ], summary: "Measures the library against its floors (medians and ratios in one run)."),
        Verb(name: "version", forms: ["version"], summary: "Prints the library's version."),
        Verb(name: "help", forms: ["help [VERB]"], summary: "Prints this usage, or one verb's."),
        Verb(name: OutboxStressCommand.verb, forms: ["\(OutboxStressCommand.verb) --dir D --user U [--count N] [--interval-ms M] [--max-pending P] [--overflow reject-newest|drop-oldest] [--keystore …] [--key-dir K]"],
             summary: "Persistent sends under SIGKILL (for the crash tests).", hidden: true),
        Verb(name: SyncStressCommand.verb, forms: ["\(SyncStressCommand.verb) --dir D --user U [--seed S] [--messages N] [--page-size P] [--establish] [--timeout S] [--keystore …] [--key-dir K]"],
             summary: "The catch-up sync under SIGKILL (for the crash tests).", hidden: true),
        Verb(name: MatrixSendStressCommand.verb, forms: ["\(MatrixSendStressCommand.verb) --dir D --user @U:S --homeserver URL --session-file F --room R [--count N] [--interval-ms M] [--max-pending P] [--overflow reject-newest|drop-oldest] [--leave-queued] [--keystore …] [--key-dir K]"],
             summary: "Sends over Matrix under SIGKILL (for the crash tests).", hidden: true),
        Verb(name: MatrixCatchUpStressCommand.verb, forms: ["\(MatrixCatchUpStressCommand.verb) --dir D --user @U:S --homeserver URL --session-file F [--page-size P] [--timeout S] [--keystore …] [--key-dir K]"],
             summary: "The Matrix catch-up under SIGKILL (for the crash tests).", hidden: true),
        Verb(name: MediaStressCommand.verb, forms: ["\(MediaStressCommand.verb) --dir D --user U --runtime-dir R [--bytes N] [--keystore …] [--key-dir K]"],
             summary: "A media download under SIGKILL (for the crash tests).", hidden: true),
    ]

    static func verb(_ name: String) -> Verb? { verbs.first { $0.name == name } }

    /// `usage: chatvault …` lines for one verb.
    static func usage(of verb: Verb) -> String {
        verb.forms.enumerated().map { i, form in (i == 0 ? "usage: chatvault " : "       chatvault ") + form }.joined(separator: "\n")
    }

    /// One verb's help: its usage, what it is for, and the common options.
    static func page(of verb: Verb) -> String {
        usage(of: verb) + "\n\n" + verb.summary + "\n\n" + common
    }

    static let common = "Common options: --app ID (default \(CommonOptions.defaultApplicationId)), --key-dir K (key files for --keystore file), --help."

    /// The top usage: every verb.
    static var top: String {
        func lines(_ hidden: Bool) -> String {
            verbs.filter { $0.hidden == hidden }.flatMap(\.forms).map { "  " + $0 }.joined(separator: "\n")
        }
        return """
            usage: chatvault <verb> [options]        (chatvault help VERB, or VERB --help, for one verb)

            \(lines(false))

            For the crash tests (each prints one line per event; see its --help):
            \(lines(true))

            \(common)
            """
    }

    /// A usage error as one line, naming the verb's usage: the form of the sub-verb given (or the
    /// verb's only form), else where to read them all.
    static func errorLine(_ message: String, verb name: String, rest: [String]) -> String {
        guard let verb = verb(name), name != "help" else { return message }
        let sub = rest.first ?? ""
        let form = verb.forms.count == 1 ? verb.forms[0] : verb.forms.first { $0.hasPrefix("\(name) \(sub) ") }
        if let form { return "\(message) (usage: chatvault \(form))" }
        return "\(message) (usage: chatvault \(name) --help)"
    }

    /// Whether the arguments after a verb ask for its help (`--help` or `-h` anywhere before a
    /// `--`; a value spelled so would be taken for it, and none of ours is).
    static func asked(_ rest: [String]) -> Bool {
        rest.prefix { $0 != "--" }.contains { $0 == "--help" || $0 == "-h" }
    }
}
