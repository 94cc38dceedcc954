import ChatVault
import ChatVaultMatrix
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The throwaway Synapse that Scripts/test starts on 127.0.0.1 (Scripts/lib/synapse.sh), and
/// users registered on it with the registration shared secret. Never skipped: without the
/// server the tests fail and say how to run them.
enum TestHomeserver {
    struct Missing: Error, CustomStringConvertible {
        var description: String {
            "CHATVAULT_SYNAPSE_URL / CHATVAULT_SYNAPSE_SECRET are not set: run the Matrix tests with Scripts/test, which starts a local Synapse"
        }
    }

    static func url() throws -> URL {
        guard let text = ProcessInfo.processInfo.environment["CHATVAULT_SYNAPSE_URL"], let url = URL(string: text) else { throw Missing() }
        return url
    }

    static func secret() throws -> String {
        guard let secret = ProcessInfo.processInfo.environment["CHATVAULT_SYNAPSE_SECRET"], !secret.isEmpty else { throw Missing() }
        return secret
    }

    /// A new user with a fresh name (`<prefix><random>`) and a random password, on the shared
    /// server or on `server`.
    static func register(_ prefix: String, on server: LocalHomeserver? = nil) async throws -> (user: String, password: String) {
        let name = prefix.lowercased() + String(UInt64.random(in: 0..<UInt64.max), radix: 36)
        let password = UUID().uuidString
        let user = try await LocalHomeserver.register(on: try server?.url ?? url(), secret: try server?.secret ?? secret(),
                                                      name: name, password: password)
        return (user, password)
    }

    /// A user registered and logged in.
    static func session(_ prefix: String, deviceId: String? = nil, on server: LocalHomeserver? = nil) async throws -> (session: MatrixSession, password: String) {
        let (user, password) = try await register(prefix, on: server)
        let session = try await MatrixAccount.login(homeserver: try server?.url ?? url(), user: user, password: password, deviceId: deviceId)
        return (session, password)
    }
}

/// Plain client-server calls for the other side of a conversation (what another Matrix client
/// does), independent of the backend under test.
struct RawMatrixClient {
    let session: MatrixSession
    var server: URL?

    init(session: MatrixSession, server: URL? = nil) {
        self.session = session
        self.server = server
    }

    func call(_ method: String, _ path: String, _ body: JSONValue? = nil, query: [(String, String)] = []) async throws -> JSONValue {
        var components = try XCTUnwrap(URLComponents(url: try (server ?? TestHomeserver.url()).appendingPathComponent(path), resolvingAgainstBaseURL: false))
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        var request = URLRequest(url: try XCTUnwrap(components.url))
        request.httpMethod = method
        request.setValue("Bearer \(session.accessToken)", forHTTPHeaderField: "Authorization")
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = body.jsonData()
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            throw BackendError.server(status: status, code: "RAW", message: String(decoding: data.prefix(300), as: UTF8.self))
        }
        return try JSONValue(jsonData: data)
    }

    func createRoom(name: String, invite: [String] = [], direct: Bool = false) async throws -> String {
        var body: [String: JSONValue] = ["name": .string(name), "preset": direct ? "trusted_private_chat" : "private_chat",
                                         "invite": .array(invite.map { .string($0) })]
        if direct { body["is_direct"] = true }
        let answer = try await call("POST", "_matrix/client/v3/createRoom", .object(body))
        return try XCTUnwrap(answer["room_id"]?.stringValue)
    }

    func join(_ room: String) async throws {
        _ = try await call("POST", "_matrix/client/v3/join/\(room)", .object([:]))
    }

    @discardableResult
    func sendText(_ text: String, room: String) async throws -> String {
        let answer = try await call("PUT", "_matrix/client/v3/rooms/\(room)/send/m.room.message/\(UUID().uuidString)",
                                    ["msgtype": "m.text", "body": .string(text)])
        return try XCTUnwrap(answer["event_id"]?.stringValue)
    }
}

/// Every event of a backend's realtime stream, as it comes.
final class EventRecorder: Sendable {
    private final class Heard: Sendable {
        let list = Mutex<[RealtimeEvent]>([])
    }

    private let heard = Heard()
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<RealtimeEvent>) {
        let heard = self.heard
        task = Task { for await event in stream { heard.list.withLock { $0.append(event) } } }
    }

    deinit { task.cancel() }

    var events: [RealtimeEvent] { heard.list.withLock { $0 } }

    /// Waits (up to `seconds`) until `condition` holds for what was heard; fails the test if not.
    @discardableResult
    func wait(for what: String, seconds: Double = 20, file: StaticString = #filePath, line: UInt = #line,
              _ condition: ([RealtimeEvent]) -> Bool) async throws -> [RealtimeEvent] {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let now = events
            if condition(now) { return now }
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTFail("timed out waiting for \(what); heard \(events.count) events", file: file, line: line)
        throw CancellationError()
    }
}
