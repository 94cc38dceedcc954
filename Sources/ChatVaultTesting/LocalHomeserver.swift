import CCrypto
public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A throwaway Synapse homeserver on 127.0.0.1 (for the Matrix backend's tests and the CLI's Matrix
/// demo): configured by `Scripts/lib/synapse.sh` in a fresh private directory, started, stopped and
/// restarted on the same port and database, ended by its PID at the latest when released.
///
///     let server = try LocalHomeserver(repository: root, python: venvPython)
///     try await server.start()
///     try await server.register("alice", password: secret)      // by the registration shared secret
///     server.stop()
public final class LocalHomeserver: @unchecked Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public let directory: TemporaryDirectory
    public let port: Int
    public let url: URL
    /// The registration shared secret.
    public let secret: String
    private let python: String
    private let lock = NSLock()
    private var process: Process?

    /// - Parameters:
    ///   - repository: the ChatVault checkout (its `Scripts/lib/synapse.sh` writes the config).
    ///   - python: the Synapse environment's interpreter (`chatvault_synapse_install` sets
    ///     `CHATVAULT_SYNAPSE_PYTHON`).
    ///   - extraConfiguration: YAML appended to the server's configuration (a test's own settings).
    public init(repository: String, python: String, extraConfiguration: String = "") throws {
        self.python = python
        directory = try TemporaryDirectory.create(prefix: "chatvault-synapse")
        secret = UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let out = try Self.run(python, ["-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"])
        guard let port = Int(out.trimmingCharacters(in: .whitespacesAndNewlines)), let url = URL(string: "http://127.0.0.1:\(port)") else {
            throw Failure(description: "no free port for the homeserver")
        }
        self.port = port
        self.url = url
        try Self.run("/bin/bash", ["-c", #". "$1/Scripts/lib/common.sh"; . "$1/Scripts/lib/synapse.sh"; chatvault_synapse_configure "$2" "$3" "$4" "$5""#,
                                   "configure", repository, directory.path, String(port), secret, extraConfiguration])
    }

    deinit { stop() }

    /// Starts the server and waits until it answers (at most 60 s).
    public func start() async throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = ["-m", "synapse.app.homeserver", "--config-path", directory.path + "/homeserver.yaml"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        lock.withLock { process = p }
        let versions = url.appendingPathComponent("_matrix/client/versions")
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            guard p.isRunning else { throw Failure(description: "the homeserver exited at start (log: \(directory.path)/homeserver.log)") }
            if let (_, response) = try? await URLSession.shared.data(from: versions), (response as? HTTPURLResponse)?.statusCode == 200 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        stop()
        throw Failure(description: "the homeserver did not answer within 60 s")
    }

    /// Stops the server (SIGTERM, SIGKILL after 10 s) and waits for it to end.
    public func stop() {
        guard let p = lock.withLock({ () -> Process? in defer { process = nil }; return process }), p.isRunning else { return }
        p.terminate()
        var deadline = Date().addingTimeInterval(10)
        while p.isRunning && Date() < deadline { usleep(50_000) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        // Not `waitUntilExit`: on this Foundation it can spin forever off the main thread.
        deadline = Date().addingTimeInterval(10)
        while p.isRunning && Date() < deadline { usleep(10_000) }
    }

    /// Registers `name` (the local part) with `password`; answers the full user id.
    @discardableResult
    public func register(_ name: String, password: String) async throws -> String {
        try await Self.register(on: url, secret: secret, name: name, password: password)
    }

    /// Registers a user on any Synapse whose registration shared secret is known
    /// (`/_synapse/admin/v1/register`, HMAC-SHA1 over nonce, name, password and "notadmin").
    @discardableResult
    public static func register(on url: URL, secret: String, name: String, password: String) async throws -> String {
        let endpoint = url.appendingPathComponent("_synapse/admin/v1/register")
        let (nonceData, _) = try await URLSession.shared.data(from: endpoint)
        guard let object = try JSONSerialization.jsonObject(with: nonceData) as? [String: Any], let nonce = object["nonce"] as? String else {
            throw Failure(description: "the homeserver gave no registration nonce")
        }
        let message = Array("\(nonce)\u{0}\(name)\u{0}\(password)\u{0}notadmin".utf8)
        let key = Array(secret.utf8)
        var mac = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = HMAC(EVP_sha1(), key, Int32(key.count), message, message.count, &mac, &length)
        let hex = mac.prefix(Int(length)).map { String(format: "%02x", $0) }.joined()
        var request = URLRequest(url: endpoint)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: [
            "nonce": nonce, "username": name, "password": password, "admin": false, "mac": hex,
        ])
        let (data, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200,
              let answer = try JSONSerialization.jsonObject(with: data) as? [String: Any], let user = answer["user_id"] as? String else {
            throw Failure(description: "registering \(name) failed: \(String(decoding: data.prefix(300), as: UTF8.self))")
        }
        return user
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
        let deadline = Date().addingTimeInterval(60)
        while p.isRunning && Date() < deadline { usleep(10_000) }
        guard !p.isRunning, p.terminationStatus == 0 else { throw Failure(description: "\(tool) failed") }
        return String(decoding: data, as: UTF8.self)
    }
}
