import Foundation
import VaultStore

/// The messages the logged-in user's cache holds, read-only, for a backend that can answer a
/// change from them instead of asking its server: a Matrix catch-up applies an edit, a redaction
/// or a reaction whose target message is cached to that copy (the engine's writer still writes
/// every row; the backend only reads).
///
/// A copy is the message as the cache stores it (wire JSON, as the backend rendered it, receipt
/// times kept); it may be behind the server. A backend uses it only for what it can apply exactly
/// and asks its server otherwise; a message the cache does not hold is simply absent.
///
///     let copies = cachedMessages.messages(ids: [id])
///     if let copy = copies[id] { … } else { … ask the server … }
///
/// While no cache is open (before it opens, an online-only session) nothing is held.
public protocol CachedMessages: Sendable {
    /// The cached copy of each of `ids` the cache holds, by id; ids it does not hold (or whose copy
    /// no longer decodes) are absent.
    func messages(ids: [Int]) -> [Int: JSONValue]
    /// The most messages the cache keeps of one conversation (`OfflineConfig.maxMessagesPerConversation`):
    /// a backend whose catch-up reads conversations one by one reads no more of each.
    var messagesPerConversation: Int { get }
}

extension CachedMessages {
    /// 1,000, the largest `maxMessagesPerConversation`.
    public var messagesPerConversation: Int { 1000 }
}

/// No messages at all: the default for a backend no engine attached a cache to.
public struct NoCachedMessages: CachedMessages {
    /// Nothing cached.
    public init() {}

    /// Always empty.
    public func messages(ids: [Int]) -> [Int: JSONValue] { [:] }
}

/// The engine's view: the open cache's `messages` rows, read on the reader connection.
final class CacheMessageCopies: CachedMessages {
    private let cache: @Sendable () -> VaultCache?
    let messagesPerConversation: Int

    init(cache: @escaping @Sendable () -> VaultCache?, messagesPerConversation: Int) {
        self.cache = cache
        self.messagesPerConversation = messagesPerConversation
    }

    func messages(ids: [Int]) -> [Int: JSONValue] {
        let wanted = Set(ids.filter { $0 > 0 && Int64($0) <= WireLimits.maxWireNumber })
        guard !wanted.isEmpty, let open = cache() else { return [:] }
        let found = try? open.reader.sync { db -> [Int: JSONValue] in
            let stmt = try db.cached("SELECT payload FROM messages WHERE server_id = ?")
            defer { stmt.reset() }
            var out: [Int: JSONValue] = [:]
            for id in wanted.sorted() {
                stmt.reset()
                try stmt.bind([.int(Int64(id))])
                guard try stmt.step(), let bytes = stmt.blob(0), let payload = try? BinaryJSON.decode(bytes) else { continue }
                out[id] = payload
            }
            return out
        }
        return found ?? [:]
    }
}
