import ChatVaultTesting
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A Synapse of a test's own (the shared one cannot be stopped), configured by
/// Scripts/lib/synapse.sh in a fresh directory, started, stopped and restarted on the same port and
/// database, and ended by its PID at the latest when released.
final class PrivateHomeserver: @unchecked Sendable {
    let directory = TemporaryDirectory()
    let port: Int
    let url: URL
    let secret = UUID().uuidString.replacingOccurrences(of: "-", with: "")
    private let python: String
    private var process: Process?

    static var repositoryRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    init() throws {
        guard let python = ProcessInfo.processInfo.environment["CHATVAULT_SYNAPSE_PYTHON"], !python.isEmpty else {
            throw TestHomeserver.Missing()
        }
        self.python = python
        port = try Self.freePort(python: python)
        url = try XCTUnwrap(URL(string: "http://127.0.0.1:\(port)"))
        try Self.run("/bin/bash", ["-c", #". "$1/Scripts/lib/common.sh"; . "$1/Scripts/lib/synapse.sh"; chatvault_synapse_configure "$2" "$3" "$4""#,
                                   "configure", Self.repositoryRoot, directory.path, String(port), secret])
    }

    deinit { stop() }

    /// Starts the server and waits until it answers (at most 60 s).
    func start() async throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = ["-m", "synapse.app.homeserver", "--config-path", directory.path + "/homeserver.yaml"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let versions = url.appendingPathComponent("_matrix/client/versions")
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            guard p.isRunning else { throw TestHomeserver.Missing() }
            if let (_, response) = try? await URLSession.shared.data(from: versions), (response as? HTTPURLResponse)?.statusCode == 200 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        XCTFail("the private homeserver did not answer within 60 s")
        throw TestHomeserver.Missing()
    }

    /// Stops the server (SIGTERM, SIGKILL after 10 s) and waits for it to end.
    func stop() {
        guard let p = process else { return }
        process = nil
        guard p.isRunning else { return }
        p.terminate()
        let deadline = Date().addingTimeInterval(10)
        while p.isRunning && Date() < deadline { usleep(50_000) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        // Not `waitUntilExit`: on this Foundation it can spin forever off the main thread.
        let reaped = Date().addingTimeInterval(10)
        while p.isRunning && Date() < reaped { usleep(10_000) }
    }

    private static func freePort(python: String) throws -> Int {
        let out = try run(python, ["-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"])
        return try XCTUnwrap(Int(out.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    @discardableResult
    private static func run(_ tool: String, _ arguments: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = arguments
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw TestHomeserver.Missing() }
        return String(decoding: data, as: UTF8.self)
    }
}
