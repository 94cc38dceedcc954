import Foundation

/// A command-line failure: printed as one line on stderr, exit status 2 (usage) or 1 (failure).
/// Never carries message content or key material.
struct CLIError: Error, CustomStringConvertible {
    let message: String
    let status: Int32

    static func usage(_ message: String) -> CLIError { CLIError(message: message, status: 2) }
    static func failure(_ message: String) -> CLIError { CLIError(message: message, status: 1) }

    var description: String { message }
}

/// `--name value` options and `--flag` switches after the verb.
struct Arguments {
    private(set) var values: [String: String] = [:]
    private(set) var flags: Set<String> = []
    private var consumed: Set<String> = []

    /// Parses `args`; `switches` are the options that take no value.
    init(_ args: [String], switches: Set<String> = ["json"]) throws {
        var i = 0
        while i < args.count {
            let arg = args[i]
            guard arg.hasPrefix("--"), arg.count > 2 else { throw CLIError.usage("unexpected argument '\(arg)'") }
            var name = String(arg.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if switches.contains(name) {
                guard inline == nil else { throw CLIError.usage("--\(name) takes no value") }
                flags.insert(name)
            } else if let inline {
                values[name] = inline
            } else {
                guard i + 1 < args.count else { throw CLIError.usage("--\(name) needs a value") }
                values[name] = args[i + 1]
                i += 1
            }
            i += 1
        }
    }

    mutating func string(_ name: String) -> String? {
        consumed.insert(name)
        return values[name]
    }

    mutating func required(_ name: String) throws -> String {
        guard let value = string(name), !value.isEmpty else { throw CLIError.usage("--\(name) is required") }
        return value
    }

    mutating func int(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws -> Int {
        guard let text = string(name) else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw CLIError.usage("--\(name) must be a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    mutating func choice(_ name: String, default fallback: String, among choices: [String]) throws -> String {
        let value = string(name) ?? fallback
        guard choices.contains(value) else {
            throw CLIError.usage("--\(name) must be one of: \(choices.joined(separator: ", "))")
        }
        return value
    }

    mutating func flag(_ name: String) -> Bool {
        consumed.insert(name)
        return flags.contains(name)
    }

    /// Fails on options nobody asked for (a typo must not be silently ignored).
    func rejectUnknown() throws {
        let unknown = Set(values.keys).union(flags).subtracting(consumed)
        if let first = unknown.sorted().first { throw CLIError.usage("unknown option --\(first)") }
    }
}
