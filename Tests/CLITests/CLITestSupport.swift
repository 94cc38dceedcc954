import Foundation
import XCTest
import ChatVaultTesting

/// Runs the built `chatvault` binary (it sits beside the test bundle).
enum CLI {
    /// The test runner executable lives in the build products directory, beside `chatvault`.
    static var binary: String {
        (Subprocess.selfPath as NSString).deletingLastPathComponent + "/chatvault"
    }

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String

        /// The stdout parsed as a JSON object.
        func json(file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
            let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any]
            return try XCTUnwrap(object, "not a JSON object: \(stdout.prefix(300)) / \(stderr.prefix(300))", file: file, line: line)
        }
    }

    /// Runs `chatvault args…`, optionally under a wrapper (`dbus-run-session …`) and with changes to
    /// the environment (nil removes a variable).
    static func run(_ args: [String], wrapper: [String] = [], environment changes: [String: String?] = [:]) throws -> Run {
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in changes { environment[key] = value }
        let result = try Subprocess.run(wrapper + [binary] + args, environment: environment)
        return Run(status: result.status, stdout: String(decoding: result.stdout, as: UTF8.self),
                   stderr: String(decoding: result.stderr, as: UTF8.self))
    }

    /// A private bus without any Secret Service (nothing owns or can activate org.freedesktop.secrets).
    static func withoutSecretService(_ dir: String) throws -> [String] {
        let config = "\(dir)/no-secret-service.conf"
        try PrivateBus.configuration(listen: "unix:dir=\(dir)").write(toFile: config, atomically: true, encoding: .utf8)
        return [try XCTUnwrap(Subprocess.which("dbus-run-session")), "--config-file=\(config)", "--"]
    }
}

/// A JSON number as `JSONSerialization` hands it back (Int, Double or NSNumber), as a Double.
func number(_ value: Any?) -> Double? {
    switch value {
    case let v as Int: return Double(v)
    case let v as Double: return v
    case let v as NSNumber: return v.doubleValue
    default: return nil
    }
}
