import Foundation

/// A fresh private (0700) directory under `$TMPDIR` (or /tmp), removed with everything in it when
/// the object goes away. Tests get one per test; the CLI's scenarios and benchmark use them too.
///
///     let scratch = TemporaryDirectory()                 // traps if /tmp is unusable (tests)
///     let work = try TemporaryDirectory.create(prefix: "chatvault-bench")   // throws (tools)
public final class TemporaryDirectory: Sendable {
    public let path: String

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// For tests: a missing or unusable temporary directory is a broken machine, not a test result.
    public convenience init(prefix: String = "chatvault-test") {
        do {
            try self.init(creating: prefix)
        } catch {
            preconditionFailure("\(error)")
        }
    }

    /// Creates the directory or throws.
    public static func create(prefix: String) throws -> TemporaryDirectory {
        try TemporaryDirectory(creating: prefix)
    }

    private init(creating prefix: String) throws {
        var base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/tmp"
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(description: "cannot create a temporary directory under \(base) (errno \(errno))")
        }
        path = String(cString: made)
        chmod(path, 0o700)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
