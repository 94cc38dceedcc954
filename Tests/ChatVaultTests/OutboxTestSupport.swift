import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultKeys
import VaultStore

/// An engine sending to a simulated server over an encrypted cache in a temporary directory, with
/// short connection timings. `restart()` drops the engine (and its closures) and starts a new one
/// on the same cache and key, as an app relaunch does.
final class OutboxHarness: @unchecked Sendable {
    let root = TemporaryDirectory()
    let keyStore = MemoryKeyStore()
    let clock = SimulatedClock()
    let simulator: ChatVaultSimulator
    let callbacks = DispatchQueue(label: "tests.outbox.callbacks")
    let me: String
    let listener = OutboxRecorder()
    private let configure: (OfflineConfig.Builder) -> Void
    /// The backend the engine talks to, around the simulated device (default: the device itself).
    private let wrap: (SimulatedClient) -> any ChatBackend
    /// Settings changes for the engines this harness makes (change it before `restart()`).
    var adjust: (inout VaultSettings) -> Void
    private(set) var client: SimulatedClient
    private(set) var vault: OfflineVault

    init(me: String = "alice", users: [String] = ["alice", "bob", "carol", "dave"],
         configure: @escaping (OfflineConfig.Builder) -> Void = { _ in },
         settings adjust: @escaping (inout VaultSettings) -> Void = { _ in },
         backend wrap: @escaping (SimulatedClient) -> any ChatBackend = { $0 }) throws {
        self.me = me
        self.configure = configure
        self.adjust = adjust
        self.wrap = wrap
        simulator = ChatVaultSimulator(seed: 11, clock: clock)
        for user in users { try simulator.addUser(SimulatedUser(uid: user, name: user.capitalized)) }
        client = simulator.client(for: me)
        vault = try Self.makeVault(backend: wrap(client), root: root.path, keyStore: keyStore, callbacks: callbacks, clock: clock,
                                   listener: listener, configure: configure, adjust: adjust)
    }

    private static func makeVault(backend: any ChatBackend, root: String, keyStore: MemoryKeyStore, callbacks: DispatchQueue,
                                  clock: SimulatedClock, listener: OutboxRecorder, configure: (OfflineConfig.Builder) -> Void,
                                  adjust: (inout VaultSettings) -> Void) throws -> OfflineVault {
        let builder = OfflineConfig.Builder().setEnabled(true).setEncryption(true)
        configure(builder)
        var settings = VaultSettings(applicationId: "org.chatvault.outboxtests", rootDirectory: root,
                                     keyStorage: [.custom(keyStore)], callbackExecutor: .queue(callbacks), retry: .manualOnly)
        settings.clock = { clock.date }
        settings.evictionDelay = .seconds(3600)
        settings.stableConnectionDelay = .milliseconds(20)
        settings.reconnect = RetryPolicy(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(40))
        adjust(&settings)
        let vault = try OfflineVault(config: builder.build(), settings: settings, backend: backend)
        vault.addOutboxListener("recorder", listener)
        return vault
    }

    func login(file: StaticString = #filePath, line: UInt = #line) async {
        let attempt = await vault.login(userId: me)
        XCTAssertEqual(attempt.state, .ready, file: file, line: line)
    }

    /// A relaunch: the engine goes away with its closures; a new engine and device take over the
    /// same cache. The old device is taken offline first so nothing of the old engine still sends.
    func restart(network: NetworkCondition = .online) async throws {
        client.network = .offline
        await vault.logout()
        client = simulator.client(for: me)
        client.network = network
        vault = try Self.makeVault(backend: wrap(client), root: root.path, keyStore: keyStore, callbacks: callbacks, clock: clock,
                                   listener: listener, configure: configure, adjust: adjust)
        await login()
    }

    func conversationId(with uid: String) -> String { [me, uid].sorted().joined(separator: "_user_") }

    /// The texts the server holds in a conversation, in server order.
    func serverTexts(with uid: String) -> [String] {
        simulator.messageIds(in: conversationId(with: uid)).compactMap { simulator.messageJSON($0, as: me)?["data"]?["text"]?.stringValue }
    }

    /// The outbox rows straight from the cache: (local id, state, failure reason, attempts).
    func rows() throws -> [(String, Int, String?, Int)] {
        let cache = try XCTUnwrap(vault.openCache)
        return try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT local_id, state, failure_reason, attempts FROM outbox ORDER BY seq")
            var rows: [(String, Int, String?, Int)] = []
            while try stmt.step() { rows.append((stmt.text(0) ?? "", stmt.int(1), stmt.text(2), stmt.int(3))) }
            return rows
        }
    }

    /// The local ids of cached (sent) messages, by server id.
    func cachedLocalId(ofServerId id: Int) throws -> String? {
        let cache = try XCTUnwrap(vault.openCache)
        return try cache.reader.sync { db in try db.scalarText("SELECT local_id FROM messages WHERE server_id = ?", .int(Int64(id))) }
    }

    func pending() async throws -> [BaseMessage] {
        try await vault.pendingMessages()
    }

    /// Waits for the callback queue to run everything posted so far.
    func drain() {
        callbacks.sync {}
    }

    func text(_ body: String, to uid: String = "bob") -> TextMessage {
        TextMessage(receiverUid: uid, text: body, receiverType: .user)
    }

    /// Sends `message` with a recorder's closures.
    @discardableResult
    func send(_ message: TextMessage, _ recorder: SendRecorder = SendRecorder()) -> SendRecorder {
        vault.sendTextMessage(message: message, onMessagePending: recorder.onPending, onMessageSent: recorder.onSent, onError: recorder.onError)
        return recorder
    }
}

/// The closures of one send, recorded in order.
final class SendRecorder: Sendable {
    enum Event: Equatable {
        case pending(String?, MessageStatus)
        case sent(Int, String?)
        case error(String)
    }

    private let log = Mutex<[Event]>([])
    var events: [Event] { log.withLock { $0 } }

    var onPending: @Sendable (BaseMessage) -> Void {
        { [self] m in log.withLock { $0.append(.pending(m.localMessageId, m.messageStatus)) } }
    }

    var onSent: @Sendable (BaseMessage) -> Void {
        { [self] m in log.withLock { $0.append(.sent(m.id, m.localMessageId)) } }
    }

    var onError: @Sendable (CometChatException?) -> Void {
        { [self] e in log.withLock { $0.append(.error(e?.errorCode ?? "nil")) } }
    }

    var errors: [String] { events.compactMap { if case .error(let code) = $0 { return code } else { return nil } } }
    var sentIds: [Int] { events.compactMap { if case .sent(let id, _) = $0 { return id } else { return nil } } }
    var isSent: Bool { !sentIds.isEmpty }
    var pendingCount: Int { events.filter { if case .pending = $0 { return true } else { return false } }.count }
}

/// An `OutboxListener` that records every transition by local id.
final class OutboxRecorder: OutboxListener {
    enum Event: Equatable {
        case pending(String)
        case sent(String, Int)
        case failed(String, MessageFailureReason)
    }

    private let log = Mutex<[Event]>([])
    var events: [Event] { log.withLock { $0 } }

    func onOutboxMessagePending(_ message: BaseMessage) {
        log.withLock { $0.append(.pending(message.localMessageId ?? "")) }
    }

    func onOutboxMessageSent(_ message: BaseMessage) {
        log.withLock { $0.append(.sent(message.localMessageId ?? "", message.id)) }
    }

    func onOutboxMessageFailed(_ message: BaseMessage, _ reason: MessageFailureReason) {
        log.withLock { $0.append(.failed(message.localMessageId ?? "", reason)) }
    }

    func events(for localId: String?) -> [Event] {
        events.filter {
            switch $0 {
            case .pending(let id), .sent(let id, _), .failed(let id, _): return id == localId
            }
        }
    }

    var sentLocalIds: [String] { events.compactMap { if case .sent(let id, _) = $0 { return id } else { return nil } } }
}

/// Polls `condition` until it holds (or fails the test after `seconds`).
func waitUntil(_ seconds: Double = 10, _ what: String = "condition", file: StaticString = #filePath, line: UInt = #line,
               _ condition: () throws -> Bool) async rethrows {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return }
        try? await Task.sleep(for: .milliseconds(5))
    }
    if try !condition() { XCTFail("timed out waiting for \(what)", file: file, line: line) }
}

/// Test cases that poll with named waits (`waitUntil("what") { … }`).
protocol Polling {}

extension Polling where Self: XCTestCase {
    /// Polls `condition` every 5 ms until it holds; fails the test after `timeout`.
    func waitUntil(_ what: String, timeout: Duration = .seconds(5), _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else { return XCTFail("timed out waiting: \(what)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// Enough received messages (3,000 rows) that a page in the middle of the database file holds
/// only them: damaging that page (`Damage.middlePage`) leaves the outbox readable for salvage.
func fillWithReceivedMessages(_ cache: VaultCache) throws {
    try cache.writer.sync { db in
        try db.transaction {
            try CacheRows.insert((0..<3000).map { i in
                CacheRows.Message(serverId: Int64(100_000 + i), localId: nil, conversationId: "user_bob", senderId: "bob",
                                  receiverId: "alice", receiverType: "user", sentAt: Int64(1_700_000_000 + i), body: "received \(i)")
            }, into: db)
        }
    }
}

extension Polling where Self: XCTestCase {
    /// A vault logged in as alice over the simulator, connected, its first catch-up sweep over (it
    /// writes the server's conversation list) before the events under test arrive, logged out at
    /// the test's end (nothing of the engine keeps working past it); eviction runs `evictionDelay`
    /// after writes.
    func connectedHarness(configure: @escaping (OfflineConfig.Builder) -> Void = { _ in },
                          evictionDelay: Duration = .seconds(3600)) async throws -> OutboxHarness {
        let h = try OutboxHarness(configure: configure) { $0.evictionDelay = evictionDelay }
        addTeardownBlock { await h.vault.logout() }
        await h.login()
        try await waitUntil("connected") { h.client.isConnected }
        try await waitUntil("the first sweep") { h.vault.getLastSyncTimestamp() > 0 }
        await h.vault.waitForSyncIdle()
        return h
    }
}
