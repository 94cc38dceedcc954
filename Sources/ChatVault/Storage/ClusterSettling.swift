import Foundation
import Synchronization
import VaultStore

/// Moves the rows a bulk write staged (`MessageClusters.settle`) into their conversations'
/// clusters, in the background: a moment after the last bulk write, and after a login that finds
/// staged rows. One small transaction at a time on the writer, so a send or a read's write-through
/// waits at most one batch; stops when the cache closes or changes.
final class ClusterSettler: Sendable {
    /// Rows moved per transaction.
    static let batch = 500

    private let pending = Mutex(false)
    /// How long after a bulk write settling starts (writes often come in bursts: a sweep's pages).
    let delay = Mutex<Duration>(.seconds(1))

    /// Claims the next run; false when one is already scheduled or running.
    func claim() -> Bool {
        pending.withLock { p in
            defer { p = true }
            return !p
        }
    }

    func release() {
        pending.withLock { $0 = false }
    }
}

extension OfflineVault {
    /// Settles staged rows soon (coalesced: one run at a time, rescheduled while rows remain).
    func scheduleSettling() {
        guard clusterSettler.claim() else { return }
        let delay = clusterSettler.delay.withLock { $0 }
        Task.detached {
            try? await Task.sleep(for: delay)
            self.clusterSettler.release()
            await self.settleStagedMessages()
        }
    }

    /// Moves every staged row into its cluster now, batch by batch, while this cache stays open.
    /// Returns how many moved.
    @discardableResult
    package func settleStagedMessages() async -> Int {
        guard let cache = openCache else { return 0 }
        var moved = 0
        while openCache === cache {
            let batch = try? await cache.writer.run { db in
                try db.transaction { try MessageClusters.settle(db, limit: ClusterSettler.batch) }
            }
            guard let batch, batch > 0 else { break }
            moved += batch
            if batch < ClusterSettler.batch { break }
        }
        return moved
    }
}
