import Foundation
import Synchronization
import VaultStore

/// The vault's session: who is logged in, their cache directory, the engine's state and the open
/// cache, read and changed together under one lock. The vault's components hold it to find the
/// user and their cache, never the vault itself.
final class VaultSession: Sendable {
    struct State {
        var userId: String?
        var directory: CacheDirectory?
        var state: OfflineState = .loggedOut
        var cache: VaultCache?
        /// Bumped by every login and logout: stale timers and deliveries check it.
        var generation = 0
        var attempts = 0
        /// Bumped whenever a retry is scheduled or made on demand: only the newest timer fires.
        var retryToken = 0
    }

    private let state = Mutex(State())

    /// Runs `body` with the session locked.
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try state.withLock { try body(&$0) }
    }

    /// Whether offline support is running (a cache is open and serving).
    var isActive: Bool { withLock { $0.state.isOfflineActive } }

    /// The engine's state.
    var offlineState: OfflineState { withLock { $0.state } }

    /// The logged-in user and their open cache, while offline support is active.
    var current: (me: String, cache: VaultCache)? {
        withLock { s in
            guard s.state.isOfflineActive, let me = s.userId, let cache = s.cache else { return nil }
            return (me, cache)
        }
    }

    /// The logged-in user's cache directory.
    var directory: CacheDirectory? { withLock { $0.directory } }

    /// The logged-in user, if any.
    var userId: String? { withLock { $0.userId } }

    /// The open cache (offline support running), if any.
    var openCache: VaultCache? { withLock { $0.state.isOfflineActive ? $0.cache : nil } }

    /// The open cache when it is `me`'s: the user and the cache opened for them, read together.
    func openCache(of me: String) -> VaultCache? {
        withLock { $0.state.isOfflineActive && $0.userId == me ? $0.cache : nil }
    }
}
