import Foundation
import Synchronization
import VaultStore

/// Why a backend's state could not be recorded.
public enum BackendStateError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A key that is empty, longer than 1,024 bytes or holds control characters; or a value over 1 MiB.
    case unusable
    /// The cache refused the write (busy, full): nothing was changed; try again later.
    case cacheRefused

    /// A sentence for logs naming the problem, never a key or a value.
    public var description: String {
        switch self {
        case .unusable: return "a backend state key or value is empty, too long, or has control characters"
        case .cacheRefused: return "the cache could not record the backend's state (busy or full)"
        }
    }
}

/// Small state a backend keeps in the logged-in user's encrypted cache: what it must still know
/// after a restart without a network (a Matrix backend's direct-chat map, which reactions name
/// which messages). Values are text; the engine keeps them in the cache's `kv` table under the
/// prefix `backend.`, inside its encryption, until `clearOfflineCache` or a reset.
///
/// While no cache is open the values live in memory only (the same within the session).
public protocol BackendStateStore: Sendable {
    /// The values stored under `keys` (keys without one are absent from the answer).
    func values(for keys: [String]) -> [String: String]
    /// Sets (or, for nil, removes) each value, in one transaction.
    func set(_ values: [String: String?]) throws(BackendStateError)
}

extension BackendStateStore {
    /// The value stored under `key`; nil when there is none.
    public func value(for key: String) -> String? { values(for: [key])[key] }
    /// Sets the value under `key`, or removes it for nil.
    /// - Throws: `.unusable` for an unusable key or value, `.cacheRefused` when the cache refused
    ///   the write (nothing changed).
    public func set(_ value: String?, for key: String) throws(BackendStateError) { try set([key: value]) }
}

/// A backend state in memory only (a backend without an engine, tests).
public final class MemoryBackendState: BackendStateStore {
    private let table = Mutex<[String: String]>([:])

    /// An empty store.
    public init() {}

    /// The values stored under `keys` (keys without one are absent from the answer).
    public func values(for keys: [String]) -> [String: String] {
        table.withLock { t in
            var out: [String: String] = [:]
            for key in keys { if let v = t[key] { out[key] = v } }
            return out
        }
    }

    /// Sets (or, for nil, removes) each value, all or none.
    /// - Throws: `.unusable` when any key or value is unusable (nothing is changed).
    public func set(_ values: [String: String?]) throws(BackendStateError) {
        for (key, value) in values where !CacheBackendState.isUsable(key, value) { throw .unusable }
        table.withLock { t in for (key, value) in values { t[key] = value } }
    }
}

/// The engine's backend state: the open cache's `kv` rows `backend.<key>`, or memory while no
/// cache is open.
final class CacheBackendState: BackendStateStore {
    static let prefix = "backend."
    private let cache: @Sendable () -> VaultCache?
    private let memory = MemoryBackendState()

    init(cache: @escaping @Sendable () -> VaultCache?) {
        self.cache = cache
    }

    static func isUsable(_ key: String, _ value: String?) -> Bool {
        !key.isEmpty && key.utf8.count <= 1024 && !key.utf8.contains { $0 < 0x20 || $0 == 0x7f }
            && (value?.utf8.count ?? 0) <= 1 << 20
    }

    func values(for keys: [String]) -> [String: String] {
        guard let open = cache() else { return memory.values(for: keys) }
        let found = try? open.reader.sync { db -> [String: String] in
            let stmt = try db.cached("SELECT value FROM kv WHERE key = ?")
            var out: [String: String] = [:]
            for key in keys {
                stmt.reset()
                try stmt.bind([.text(Self.prefix + key)])
                if try stmt.step(), let bytes = stmt.blob(0) { out[key] = String(decoding: bytes, as: UTF8.self) }
            }
            stmt.reset()
            return out
        }
        return found ?? [:]
    }

    func set(_ values: [String: String?]) throws(BackendStateError) {
        for (key, value) in values where !Self.isUsable(key, value) { throw .unusable }
        guard let open = cache() else { return try memory.set(values) }
        do {
            try open.writer.sync { db in
                try db.transaction {
                    for (key, value) in values.sorted(by: { $0.key < $1.key }) {
                        if let value {
                            try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(Self.prefix + key), .blob(Array(value.utf8)))
                        } else {
                            try db.run("DELETE FROM kv WHERE key = ?", .text(Self.prefix + key))
                        }
                    }
                }
            }
        } catch {
            throw .cacheRefused
        }
    }
}
