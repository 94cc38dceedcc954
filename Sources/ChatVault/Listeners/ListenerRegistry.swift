import Synchronization

/// Listeners by id, held weakly, one per id (registering an id again replaces the listener).
final class ListenerRegistry<Listener: Sendable>: Sendable {
    private struct Entry: @unchecked Sendable {
        // `Listener` is an existential of an AnyObject & Sendable protocol; kept weakly.
        weak var object: AnyObject?
    }

    private let entries = Mutex<[String: Entry]>([:])
    /// Ids whose listener was released while registered (never removed), since the last `take`.
    private let releasedIds = Mutex<Set<String>>([])

    func add(_ id: String, _ listener: Listener) {
        let object = listener as AnyObject
        entries.withLock { $0[id] = Entry(object: object) }
        releasedIds.withLock { _ = $0.remove(id) }
    }

    func remove(_ id: String) {
        entries.withLock { $0[id] = nil }
        releasedIds.withLock { _ = $0.remove(id) }
    }

    /// The live listeners (released ones are dropped), in id order for a stable delivery order.
    func live() -> [Listener] {
        withIds().map(\.1)
    }

    /// The live listeners with their ids, in id order.
    func withIds() -> [(String, Listener)] {
        entries.withLock { all in
            let gone = all.filter { $0.value.object == nil }.map(\.key)
            if !gone.isEmpty {
                releasedIds.withLock { $0.formUnion(gone) }
                for id in gone { all[id] = nil }
            }
            return all.sorted { $0.key < $1.key }.compactMap { entry in (entry.value.object as? Listener).map { (entry.key, $0) } }
        }
    }

    /// Ids whose listener the app released without removing it (for the audit journal: a
    /// listener held by nothing but the registry never hears anything).
    func released() -> [String] {
        releasedIds.withLock { $0.sorted() }
    }
}
