import ChatVault
import Foundation
import Synchronization

/// What a started download streams: the bytes registered for `key` and how to serve them.
struct MediaServing: Sendable {
    let key: String
    let bytes: Data
    let mimeType: String?
    let behaviour: SimulatedMediaBehaviour

    var contentLength: Int64? {
        switch behaviour.contentLength {
        case .actual: Int64(bytes.count)
        case .absent: nil
        case .claimed(let claimed): claimed
        }
    }
}

/// What the server served of one registered URL.
struct MediaServedCounts {
    var started = 0
    var inProgress = 0
    var chunks = 0
    var bytes: Int64 = 0
}

/// Produces one download's chunks on demand: each `next()` (the stream's `unfolding` closure, run
/// by the consumer's own task) makes one chunk, so nothing is produced ahead of the consumer, no
/// task runs on its own, and a consumer that stops iterating (or is cancelled, or drops the
/// stream) stops the download. Ends once: complete, with an error, or released unfinished.
final class MediaProducer: Sendable {
    private let serving: MediaServing
    private let simulator: ChatVaultSimulator
    private let isOffline: @Sendable () -> Bool
    private let progress = Mutex<(position: Int, ended: Bool)>((0, false))

    init(serving: MediaServing, simulator: ChatVaultSimulator, isOffline: @escaping @Sendable () -> Bool) {
        self.serving = serving
        self.simulator = simulator
        self.isOffline = isOffline
    }

    deinit {
        // Dropped before the end (the consumer stopped iterating): no longer in progress.
        if !progress.withLock({ $0.ended }) { end() }
    }

    var stream: AsyncThrowingStream<Data, any Error> {
        AsyncThrowingStream(unfolding: { [self] in try await next() })
    }

    private func next() async throws -> Data? {
        let position = progress.withLock { $0.ended ? nil : $0.position }
        guard let position else { return nil }
        let behaviour = serving.behaviour
        let total = serving.bytes.count
        // Where the real bytes stop: the file's end, or where a failing or stalling answer breaks off.
        let stop: Int
        switch behaviour.ending {
        case .complete, .endless: stop = total
        case .failing(let after, _), .stalling(let after): stop = min(max(after, 0), total)
        }
        let chunkSize = max(behaviour.chunkSize, 1)
        if position >= stop {
            switch behaviour.ending {
            case .complete:
                end()
                return nil
            case .failing(_, let error):
                end()
                throw error
            case .stalling:
                // Never answers again; only cancelling the consumer's task gets it out.
                do {
                    while true { try await Task.sleep(for: .seconds(3600)) }
                } catch {
                    end()
                    throw BackendError.timedOut
                }
            case .endless:
                break
            }
        }
        if behaviour.delayPerChunk > .zero {
            do { try await Task.sleep(for: behaviour.delayPerChunk) } catch {
                end()
                throw BackendError.timedOut
            }
        }
        if Task.isCancelled {
            end()
            throw BackendError.timedOut
        }
        if isOffline() {
            end()
            throw BackendError.unreachable
        }
        let chunk: Data
        if position < stop {
            let start = serving.bytes.startIndex
            chunk = Data(serving.bytes[(start + position)..<(start + min(position + chunkSize, stop))])
        } else {
            chunk = Data(count: chunkSize)   // `.endless` past the file: filler, forever
        }
        progress.withLock { $0.position = position + chunk.count }
        let key = serving.key
        simulator.state.withLock { state in
            state.mediaServed[key, default: MediaServedCounts()].chunks += 1
            state.mediaServed[key, default: MediaServedCounts()].bytes += Int64(chunk.count)
        }
        return chunk
    }

    private func end() {
        let first = progress.withLock { p -> Bool in
            defer { p.ended = true }
            return !p.ended
        }
        guard first else { return }
        let key = serving.key
        simulator.state.withLock { $0.mediaServed[key, default: MediaServedCounts()].inProgress -= 1 }
    }
}
