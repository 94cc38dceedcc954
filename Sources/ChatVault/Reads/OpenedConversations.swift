import Foundation
import Synchronization
import VaultStore

/// When a conversation was last recorded as opened (`conversation_opened`, read by eviction for
/// `cacheDurationDays` and as activity for `maxConversations`), so that reopening a chat does not
/// write each time: a commit costs a durable write, and in WAL mode any commit empties the
/// reader's page cache, so the next page would have to read (and decrypt) every page again.
///
/// A conversation is written when it was not written in this session, or was written more than
/// `interval` ago (ten minutes: eviction counts in days). What was written to another cache (a
/// reset's fresh one) does not count; an eviction that removed conversations forgets everything.
final class OpenedConversations: Sendable {
    static let interval: TimeInterval = 600

    private struct State {
        var cacheId: String?
        var recorded: [String: Date] = [:]
    }

    private let state = Mutex(State())

    /// Whether opening `conversationId` at `now` must be written to `cache`.
    func needsRecord(_ conversationId: String, at now: Date, cache: VaultCache) -> Bool {
        state.withLock { s in
            guard s.cacheId == cache.cacheId, let last = s.recorded[conversationId] else { return true }
            // A clock set back also writes again.
            return now < last || now.timeIntervalSince(last) >= Self.interval
        }
    }

    /// `conversationId`'s opening at `now` was committed to `cache`.
    func recorded(_ conversationId: String, at now: Date, cache: VaultCache) {
        state.withLock { s in
            if s.cacheId != cache.cacheId {
                s = State(cacheId: cache.cacheId)
            }
            s.recorded[conversationId] = now
        }
    }

    /// Forgets every recorded opening (after an eviction removed conversations).
    func forget() {
        state.withLock { $0.recorded.removeAll() }
    }
}
