import Foundation
import VaultStore

/// JSON values for `--json` output, built explicitly so field names are stable.
indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    static func == (a: JSON, b: JSON) -> Bool { a.render() == b.render() }

    static func int(_ value: Int) -> JSON { .int(Int64(value)) }
    static func optional(_ value: String?) -> JSON { value.map { .string($0) } ?? .null }

    /// Pretty JSON with keys in the order given.
    func render(indent: String = "") -> String {
        let inner = indent + "  "
        switch self {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let n): return String(n)
        case .double(let d): return d.isFinite ? String(format: "%.4f", d) : "null"
        case .string(let s): return JSON.quote(s)
        case .array(let items):
            if items.isEmpty { return "[]" }
            return "[\n" + items.map { inner + $0.render(indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .object(let fields):
            if fields.isEmpty { return "{}" }
            return "{\n" + fields.map { "\(inner)\(JSON.quote($0.0)): \($0.1.render(indent: inner))" }.joined(separator: ",\n") + "\n\(indent)}"
        }
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    subscript(key: String) -> JSON? {
        if case .object(let fields) = self { return fields.first { $0.0 == key }?.1 }
        return nil
    }
}

/// A readable table: left-aligned columns sized to their widest cell.
struct Table {
    var header: [String]
    var rows: [[String]] = []

    func render() -> String {
        let widths = header.indices.map { i in ([header[i]] + rows.map { i < $0.count ? $0[i] : "" }).map(\.count).max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, cell in i == cells.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
        }
        return ([line(header), line(widths.map { String(repeating: "-", count: $0) })] + rows.map(line)).joined(separator: "\n")
    }
}

/// Writes to standard output.
func emit(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// Writes one line to standard error.
func complain(_ text: String) {
    FileHandle.standardError.write(Data(("chatvault: " + text + "\n").utf8))
}

/// Progress for long work, shown only where a person watches: standard error is a terminal and the
/// output is not `--json`. Never on a pipe or in a file (tests and scripts read clean output).
struct Progress: Sendable {
    let enabled: Bool

    init(json: Bool) { enabled = !json && isatty(STDERR_FILENO) == 1 }

    /// Replaces the current progress line (no newline).
    func show(_ text: String) {
        guard enabled else { return }
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + text).utf8))
    }

    /// Replaces the progress line with a final one.
    func finish(_ text: String) {
        guard enabled else { return }
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + text + "\n").utf8))
    }

    /// Runs `work` while a line ticks its elapsed time ("rotating the key… 3.5 s"), then says how
    /// long it took. Key changes and exports of a large cache take seconds, with no finer steps to
    /// report.
    func during<T>(_ label: String, _ work: () async throws(KeyManagementError) -> T) async throws(KeyManagementError) -> T {
        guard enabled else { return try await work() }
        let started = ContinuousClock.now
        let ticker = Task {
            while !Task.isCancelled {
                let elapsed = ContinuousClock.now - started
                show(String(format: "%@… %.1f s", label, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        defer { ticker.cancel() }
        do {
            let result = try await work()
            ticker.cancel()
            let elapsed = ContinuousClock.now - started
            finish(String(format: "%@: done in %.1f s", label, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
            return result
        } catch {
            ticker.cancel()
            finish("\(label): stopped")
            throw error
        }
    }
}
