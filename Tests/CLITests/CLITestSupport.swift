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

/// Debian's chromium, headless (Scripts/setup installs it): renders a local page, takes a
/// screenshot (checked to be a PNG of a page, not a blank) and returns the text of the DOM the
/// browser built.
struct HeadlessBrowser {
    let profile: String

    func render(_ page: String, screenshot: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let chromium = try XCTUnwrap(Subprocess.which("chromium"), "chromium (Scripts/setup installs it)")
        let browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile)", "--window-size=1200,800"]
        let shot = try Subprocess.run(browser + ["--screenshot=\(screenshot)", "file://\(page)"], environment: ProcessInfo.processInfo.environment)
        XCTAssertEqual(shot.status, 0, String(decoding: shot.stderr, as: UTF8.self), file: file, line: line)
        let png = try Data(contentsOf: URL(fileURLWithPath: screenshot))
        XCTAssertEqual(Array(png.prefix(8)), [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "a PNG screenshot", file: file, line: line)
        XCTAssertGreaterThan(png.count, 10_000, "the screenshot shows a page, not a blank", file: file, line: line)
        let dom = try Subprocess.run(browser + ["--dump-dom", "file://\(page)"], environment: ProcessInfo.processInfo.environment)
        return String(decoding: dom.stdout, as: UTF8.self)
    }
}
