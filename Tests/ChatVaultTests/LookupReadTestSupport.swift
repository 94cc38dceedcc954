import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

/// Builders and cache probes for the conversation, thread and single-item read tests.
extension ReadHarness {
    func conversations(limit: Int = 30, _ configure: (ConversationRequest.ConversationRequestBuilder) -> Void = { _ in }) -> ConversationRequest {
        let builder = ConversationRequest.ConversationRequestBuilder(limit: limit, vault: vault)
        configure(builder)
        return builder.build()
    }

    func threads(_ configure: (ThreadsRequest.ThreadsRequestBuilder) -> Void = { _ in }) -> ThreadsRequest {
        let builder = ThreadsRequest.ThreadsRequestBuilder(vault: vault)
        configure(builder)
        return builder.build()
    }

    /// The cached conversation ids, most recent activity first (straight from the cache).
    func cachedConversationIds() throws -> [String] {
        let cache = try XCTUnwrap(vault.openCache)
        return try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT id FROM conversations ORDER BY updated_at DESC, id")
            var ids: [String] = []
            while try stmt.step() { ids.append(stmt.text(0) ?? "") }
            return ids
        }
    }

    /// One cached conversation row's indexed columns.
    func cachedConversationRow(_ id: String) throws -> (type: String, peer: String, lastMessageAt: Int, updatedAt: Int, unread: Int)? {
        let cache = try XCTUnwrap(vault.openCache)
        return try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT type, peer_id, last_message_at, updated_at, unread_count FROM conversations WHERE id = ?")
            try stmt.bind([.text(id)])
            guard try stmt.step() else { return nil }
            return (stmt.text(0) ?? "", stmt.text(1) ?? "", stmt.int(2), stmt.int(3), stmt.int(4))
        }
    }

    /// Every cached message id (any conversation), ascending.
    func allCachedMessageIds() throws -> [Int] {
        let cache = try XCTUnwrap(vault.openCache)
        return try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT server_id FROM messages WHERE server_id IS NOT NULL ORDER BY server_id")
            var ids: [Int] = []
            while try stmt.step() { ids.append(stmt.int(0)) }
            return ids
        }
    }

    /// Runs SQL on the writer (to arrange the cache the way a test needs it).
    func onCache(_ body: @escaping @Sendable (Database) throws -> Void) async throws {
        let cache = try XCTUnwrap(vault.openCache)
        try await cache.writer.run { db in try body(db) }
    }
}

/// Collects the callbacks of a closure-form list fetch, in order, keyed by each item's id.
final class LookupListRecorder<Item: Sendable>: Sendable {
    enum Event: Equatable {
        case cached([String])
        case server([String])
        case error(String)
    }

    private let key: @Sendable (Item) -> String
    private let events = Mutex<[Event]>([])
    private let done = DispatchSemaphore(value: 0)

    init(key: @escaping @Sendable (Item) -> String) {
        self.key = key
    }

    var recorded: [Event] { events.withLock { $0 } }

    var onCached: @Sendable ([Item]) -> Void {
        { [self] items in events.withLock { $0.append(.cached(items.map(key))) } }
    }

    var onServer: @Sendable ([Item]) -> Void {
        { [self] items in
            events.withLock { $0.append(.server(items.map(key))) }
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

extension TwoPhaseResult {
    /// The server page's items, or nil when the read failed.
    var serverPage: [Item]? { try? server.get() }

    /// The error code the read ended with, or nil when the server answered.
    var failureCode: String? {
        if case .failure(let error) = server { return error.errorCode }
        return nil
    }
}
