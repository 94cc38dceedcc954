import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// An engine reading from a simulated server, over an encrypted cache in a temporary directory.
final class ReadHarness {
    let root = TemporaryDirectory()
    let keyStore = MemoryKeyStore()
    let clock = SimulatedClock()
    let simulator: ChatVaultSimulator
    let client: SimulatedClient
    let vault: OfflineVault
    let callbacks = DispatchQueue(label: "tests.read.callbacks")
    let me: String

    init(me: String = "alice", users: [String] = ["alice", "bob", "carol"], enabled: Bool = true,
         configure: (OfflineConfig.Builder) -> Void = { _ in },
         backend wrap: (SimulatedClient) -> any ChatBackend = { $0 }, settings adjust: (inout VaultSettings) -> Void = { _ in }) throws {
        self.me = me
        simulator = ChatVaultSimulator(seed: 7, clock: clock)
        for user in users { try simulator.addUser(SimulatedUser(uid: user, name: user.capitalized)) }
        client = simulator.client(for: me)
        let builder = OfflineConfig.Builder().setEnabled(enabled).setEncryption(true)
        configure(builder)
        var settings = VaultSettings(applicationId: "org.chatvault.readtests", rootDirectory: root.path,
                                     keyStorage: [.custom(keyStore)], callbackExecutor: .queue(callbacks), retry: .manualOnly)
        let clock = self.clock
        settings.clock = { clock.date }
        settings.evictionDelay = .seconds(3600)
        adjust(&settings)
        vault = try OfflineVault(config: builder.build(), settings: settings, backend: wrap(client))
    }

    func login() async {
        _ = await vault.login(userId: me)
    }

    /// Changes the server's truth while this device is away, so the realtime connection does not
    /// bring the change into the cache (for tests that the cache learns it only through a read).
    @discardableResult
    func whileAway<T>(_ change: () throws -> T) rethrows -> T {
        let network = client.network
        client.network = .offline
        defer { client.network = network }
        return try change()
    }

    func messages(_ configure: (MessagesRequest.MessageRequestBuilder) -> Void) -> MessagesRequest {
        let builder = MessagesRequest.MessageRequestBuilder(vault: vault)
        configure(builder)
        return builder.build()
    }

    /// The cached message ids of a conversation, oldest first (straight from the cache).
    func cachedIds(_ conversationId: String) throws -> [Int] {
        let cache = try XCTUnwrap(vault.openCache)
        return try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT server_id FROM messages WHERE conversation_id = ? ORDER BY sent_at, server_id")
            try stmt.bind([.text(conversationId)])
            var ids: [Int] = []
            while try stmt.step() { ids.append(stmt.int(0)) }
            return ids
        }
    }
}

/// Collects the callbacks of a closure-form fetch, in order, with the thread they ran on.
final class PhaseRecorder: Sendable {
    enum Event: Equatable {
        case cached([Int])
        case server([Int])
        case error(String)
    }

    private let events = Mutex<[Event]>([])
    private let done = DispatchSemaphore(value: 0)

    var recorded: [Event] { events.withLock { $0 } }

    var onCached: @Sendable ([BaseMessage]) -> Void {
        { [self] messages in events.withLock { $0.append(.cached(messages.map(\.id))) } }
    }

    var onServer: @Sendable ([BaseMessage]) -> Void {
        { [self] messages in
            events.withLock { $0.append(.server(messages.map(\.id))) }
            done.signal()
        }
    }

    var onError: @Sendable (CometChatException?) -> Void {
        { [self] error in
            events.withLock { $0.append(.error(error?.errorCode ?? "nil")) }
            done.signal()
        }
    }

    /// Waits until the read settled (a server page or an error).
    func wait(file: StaticString = #filePath, line: UInt = #line) {
        if done.wait(timeout: .now() + 10) == .timedOut { XCTFail("the read never settled", file: file, line: line) }
    }
}
