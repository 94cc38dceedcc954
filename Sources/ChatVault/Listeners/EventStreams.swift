import Synchronization

/// The `AsyncStream`s an engine hands out for its events (`messageEvents()`, `syncEvents()`): each
/// call makes a new stream that lives until its consumer stops iterating; `yield` gives an event to
/// every live stream, oldest stream first.
final class EventStreams<Event: Sendable>: Sendable {
    private struct State {
        var next = 0
        var streams: [Int: AsyncStream<Event>.Continuation] = [:]
    }

    private let state = Mutex(State())

    func make() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        let id = state.withLock { s -> Int in
            s.next += 1
            s.streams[s.next] = continuation
            return s.next
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    func yield(_ event: Event) {
        let continuations = state.withLock { s in s.streams.sorted { $0.key < $1.key }.map(\.value) }
        for continuation in continuations { continuation.yield(event) }
    }
}
