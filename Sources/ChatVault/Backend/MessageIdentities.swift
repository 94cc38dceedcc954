import Foundation
import Synchronization
import VaultStore

/// A server message name (a Matrix event id) with the time the server gives the message.
public struct MessageRef: Sendable, Hashable {
    /// The server's own id, as it spells it.
    public var ref: String
    /// The message's server time in milliseconds since the epoch (any value: clamped).
    public var timeMs: Int64

    /// A server name and the message's server time in milliseconds since the epoch.
    public init(_ ref: String, timeMs: Int64) {
        self.ref = ref
        self.timeMs = timeMs
    }
}

/// Why an id could not be given.
public enum MessageIdentityError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Empty, longer than `WireLimits.maxIdentifierBytes`, or with control characters.
    case unusableRef
    /// The cache refused the write (busy, full): nothing was allocated; try again.
    case cacheRefused

    /// A sentence for logs naming the problem, never the server name.
    public var description: String {
        switch self {
        case .unusableRef: return "a server message id is empty, too long, or has control characters"
        case .cacheRefused: return "the cache could not record a message id (busy or full)"
        }
    }
}

/// The engine's whole-number message ids for a backend whose server names messages with strings.
///
/// The public models keep the seeds' `Int` ids; a server such as a Matrix homeserver names each
/// message with a string (`$event`). The engine gives every such name one id, records the pair in
/// the logged-in user's encrypted cache (`message_refs`), and keeps it: the same name gets the same
/// id after a restart, an id is never given to another name (the map is exact, not a hash), and
/// `ref(for:)` turns an id an app holds back into the server's name, for an edit, a delete, a
/// reaction or a page around the message.
///
/// Ids follow the server time: `id = (timeMs >> 4) << 16 | n`, n counting from 1 within each
/// 16 ms, so messages of one second order by time as the cache sorts them (sent time, then id).
/// Every id is at most 2^53 − 1 (`WireLimits.maxWireNumber`); times before 1970 count as 1970,
/// times after 2039 as 2039.
///
/// While no cache is open (before it opens, an online-only session) ids live in memory only: the
/// same within the session, perhaps not after it.
public protocol MessageIdentities: Sendable {
    /// The id of each ref, allocated for refs seen first; one transaction for the whole batch.
    func ids(for refs: [MessageRef]) throws(MessageIdentityError) -> [String: Int]
    /// The server's name of an id given out before; nil for an id this map never gave.
    func ref(for id: Int) -> String?
    /// The id given to `ref` before, without giving one; nil when it has none yet.
    func existingId(for ref: String) -> Int?
}

extension MessageIdentities {
    /// The id of one ref.
    public func id(for ref: MessageRef) throws(MessageIdentityError) -> Int {
        guard let id = try ids(for: [ref])[ref.ref] else { throw .unusableRef }
        return id
    }
}

/// An id map in memory only (a backend without an engine, tests).
public final class MemoryMessageIdentities: MessageIdentities {
    private let table = Mutex(IdentityTable())

    /// An empty map.
    public init() {}

    /// The id of each ref, allocated from its time for refs seen first, keyed by `ref`.
    /// - Throws: `.unusableRef` when any ref is unusable (nothing is allocated).
    public func ids(for refs: [MessageRef]) throws(MessageIdentityError) -> [String: Int] {
        try table.withLock { (t: inout IdentityTable) throws(MessageIdentityError) -> [String: Int] in
            var out: [String: Int] = [:]
            for r in refs {
                guard IdentityTable.isUsable(r.ref) else { throw .unusableRef }
                out[r.ref] = t.id(for: r)
            }
            return out
        }
    }

    /// The server's name of an id this map gave; nil for any other id.
    public func ref(for id: Int) -> String? {
        table.withLock { $0.refs[id] }
    }

    /// The id this map gave `ref`; nil when it has none yet.
    public func existingId(for ref: String) -> Int? {
        table.withLock { $0.ids[ref] }
    }
}

/// Ids and refs held in memory, allocated as the cache allocates them.
struct IdentityTable {
    var ids: [String: Int] = [:]
    var refs: [Int: String] = [:]
    /// The highest n given in each 16 ms (by its first id).
    var top: [Int: Int] = [:]

    static let bucketBits = 16
    static let maxBucket: Int64 = (1 << 37) - 1

    static func isUsable(_ ref: String) -> Bool {
        !ref.isEmpty && ref.utf8.count <= WireLimits().maxIdentifierBytes && !ref.utf8.contains { $0 < 0x20 || $0 == 0x7f }
    }

    /// The first id of the 16 ms `timeMs` falls in.
    static func bucketBase(_ timeMs: Int64) -> Int {
        let bucket = min(max(timeMs, 0) >> 4, maxBucket)
        return Int(bucket) << bucketBits
    }

    mutating func id(for r: MessageRef) -> Int {
        if let known = ids[r.ref] { return known }
        var base = Self.bucketBase(r.timeMs)
        let span = 1 << Self.bucketBits
        while true {
            // After the highest taken id of the 16 ms; when that is the last one, a gap below it.
            let top = top[base] ?? 0
            if top < span - 1 {
                remember(r.ref, base | (top + 1))
                return base | (top + 1)
            }
            if let n = (1..<span).first(where: { refs[base | $0] == nil }) {
                remember(r.ref, base | n)
                return base | n
            }
            // A full 16 ms (65,535 messages): the next one; the last bucket wraps to the first.
            base = base >= Int(Self.maxBucket) << Self.bucketBits ? 0 : base + span
        }
    }

    mutating func remember(_ ref: String, _ id: Int) {
        ids[ref] = id
        refs[id] = ref
        let base = (id >> Self.bucketBits) << Self.bucketBits
        top[base] = max(top[base] ?? 0, id - base)
    }
}

/// The engine's map: the open cache's `message_refs`, with what was looked up kept in memory.
final class CacheMessageIdentities: MessageIdentities {
    private struct State {
        var cacheId: String?
        var table = IdentityTable()
    }

    /// Entries kept in memory before they are dropped (the cache keeps them all).
    static let memoryLimit = 100_000

    private let state = Mutex(State())
    private let cache: @Sendable () -> VaultCache?

    init(cache: @escaping @Sendable () -> VaultCache?) {
        self.cache = cache
    }

    func ids(for refs: [MessageRef]) throws(MessageIdentityError) -> [String: Int] {
        for r in refs where !IdentityTable.isUsable(r.ref) { throw .unusableRef }
        let open = cache()
        var out: [String: Int] = [:]
        var missing: [MessageRef] = []
        state.withLock { s in
            if s.cacheId != open?.cacheId || s.table.ids.count > Self.memoryLimit { s = State(cacheId: open?.cacheId) }
            for r in refs {
                if let id = s.table.ids[r.ref] { out[r.ref] = id } else { missing.append(r) }
            }
        }
        guard !missing.isEmpty else { return out }
        guard let open else {
            return state.withLock { s in
                for r in missing { out[r.ref] = s.table.id(for: r) }
                return out
            }
        }
        let found: [(String, Int)]
        do {
            found = try open.writer.sync { db in try db.transaction { try Self.allocate(missing, in: db) } }
        } catch {
            throw .cacheRefused
        }
        state.withLock { s in
            guard s.cacheId == open.cacheId else { return }
            for (ref, id) in found { s.table.remember(ref, id) }
        }
        for (ref, id) in found { out[ref] = id }
        return out
    }

    func ref(for id: Int) -> String? {
        let open = cache()
        if let known = state.withLock({ s -> String? in s.cacheId == open?.cacheId ? s.table.refs[id] : nil }) { return known }
        guard let open else { return nil }
        let ref = try? open.reader.sync { db in try db.scalarText("SELECT ref FROM message_refs WHERE id = ?", .int(Int64(id))) }
        guard let ref else { return nil }
        state.withLock { s in if s.cacheId == open.cacheId { s.table.remember(ref, id) } }
        return ref
    }

    func existingId(for ref: String) -> Int? {
        let open = cache()
        if let known = state.withLock({ s -> Int? in s.cacheId == open?.cacheId ? s.table.ids[ref] : nil }) { return known }
        guard let open else { return nil }
        let id = try? open.reader.sync { db in try db.scalarInt("SELECT id FROM message_refs WHERE ref = ?", .text(ref)) }
        guard let id else { return nil }
        let found = Int(id)
        state.withLock { s in if s.cacheId == open.cacheId { s.table.remember(ref, found) } }
        return found
    }

    /// Looks each ref up, and gives the ones not there the first free id of their 16 ms.
    private static func allocate(_ refs: [MessageRef], in db: Database) throws -> [(String, Int)] {
        var out: [(String, Int)] = []
        let lookup = try db.cached("SELECT id FROM message_refs WHERE ref = ?")
        let last = try db.cached("SELECT max(id) FROM message_refs WHERE id BETWEEN ? AND ?")
        let taken = try db.cached("SELECT 1 FROM message_refs WHERE id = ?")
        let insert = try db.cached("INSERT INTO message_refs (ref, id) VALUES (?, ?)")
        for r in refs {
            lookup.reset()
            try lookup.bind([.text(r.ref)])
            if try lookup.step() {
                out.append((r.ref, lookup.int(0)))
                continue
            }
            let id = try freeId(near: IdentityTable.bucketBase(r.timeMs), last: last, taken: taken)
            insert.reset()
            try insert.bind([.text(r.ref), .int(Int64(id))])
            _ = try insert.step()
            out.append((r.ref, id))
        }
        return out
    }

    private static func freeId(near start: Int, last: Statement, taken: Statement) throws -> Int {
        let span = 1 << IdentityTable.bucketBits
        var base = start
        while true {
            last.reset()
            try last.bind([.int(Int64(base)), .int(Int64(base | (span - 1)))])
            let top = try last.step() && !last.isNull(0) ? last.int(0) : base
            if top < base | (span - 1) { return top + 1 }
            // The highest id of this 16 ms is taken: a gap below it, else the next 16 ms.
            for n in 1..<span {
                taken.reset()
                try taken.bind([.int(Int64(base | n))])
                if try !taken.step() { return base | n }
            }
            base = base >= Int(IdentityTable.maxBucket) << IdentityTable.bucketBits ? 0 : base + span
        }
    }
}
