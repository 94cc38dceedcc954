import Synchronization

/// Listeners by id, held weakly, one per id (registering an id again replaces the listener).
final class ListenerRegistry<Listener: Sendable>: Sendable {
    private struct Entry: @unchecked Sendable {
        // `Listener` is an existential of an AnyObject & Sendable protocol; kept weakly.
        weak var object: AnyObject?
    }

    private let entries = Mutex<[String: Entry]>([:])

    func add(_ id: String, _ listener: Listener) {
        let object = listener as AnyObject
        entries.withLock { $0[id] = Entry(object: object) }
    }

    func remove(_ id: String) {
        entries.withLock { $0[id] = nil }
    }

    /// The live listeners (released ones are dropped), in id order for a stable delivery order.
    func live() -> [Listener] {
        entries.withLock { all in
            all = all.filter { $0.value.object != nil }
            return all.sorted { $0.key < $1.key }.compactMap { $0.value.object as? Listener }
        }
    }
}
