import Foundation
import Synchronization

/// The engine's hold on the server: the session (`ChatBackend.login`) and the realtime
/// connection, re-established with backoff whenever it drops, and judged **stable** once it has
/// stayed up for `VaultSettings.stableConnectionDelay` (a connect-then-drop flap does not count).
/// A stable connection flushes the outbox.
final class LinkCore: Sendable {
    struct State {
        /// Bumped by every start and stop: older loops and timers stand down.
        var generation = 0
        var running = false
        var userId: String?
        var serverSession = false
        var connected = false
        var stable = false
        /// Bumped at every connect and disconnect: only the newest stability timer counts.
        var connectionToken = 0
        /// The generation whose connect loop is running, if any.
        var loopingFor: Int?
        var consuming = false
    }

    let state = Mutex(State())
}

extension OfflineVault {
    /// Starts the session and the connection for `userId` (after login).
    func startLink(userId: String) {
        let generation = link.state.withLock { s -> Int in
            s.generation += 1
            s.running = true
            s.userId = userId
            s.serverSession = false
            s.connected = false
            s.stable = false
            s.connectionToken += 1
            return s.generation
        }
        backend.attach(identities: CacheMessageIdentities(cache: { [weak self] in self?.openCache }))
        backend.attach(state: CacheBackendState(cache: { [weak self] in self?.openCache }))
        backend.attach(cachedMessages: CacheMessageCopies(cache: { [weak self] in self?.openCache }))
        consumeEventsOnce()
        startLinkLoop(generation: generation, delayFirst: false)
    }

    /// Stops reconnecting (logout).
    func stopLink() {
        link.state.withLock { s in
            s.generation += 1
            s.running = false
            s.userId = nil
            s.connected = false
            s.stable = false
            s.connectionToken += 1
        }
    }

    /// Whether the realtime connection is up and has held.
    var isConnectionStable: Bool { link.state.withLock { $0.running && $0.stable } }

    /// Something suggests the connection is gone (a send got no connection or no answer): drop it
    /// and reconnect, so the next stable connection flushes again.
    func linkSuspect() {
        let (connected, generation) = link.state.withLock { s -> (Bool, Int?) in
            guard s.running else { return (false, nil) }
            let was = s.connected
            s.connected = false
            s.stable = false
            s.connectionToken += 1
            return (was, s.generation)
        }
        guard let generation else { return }
        let backend = self.backend
        Task.detached { [weak self] in
            if connected { await backend.disconnect() }
            self?.startLinkLoop(generation: generation, delayFirst: true)
        }
    }

    private func startLinkLoop(generation: Int, delayFirst: Bool) {
        let start = link.state.withLock { s -> Bool in
            guard s.generation == generation, s.running, s.loopingFor != generation else { return false }
            s.loopingFor = generation
            return true
        }
        guard start else { return }
        let backend = self.backend
        let policy = settings.reconnect
        Task.detached { [weak self] in
            var attempt = delayFirst ? 1 : 0
            while true {
                if attempt > 0 { try? await Task.sleep(for: policy.delay(forAttempt: attempt)) }
                attempt += 1
                guard let self else { return }
                guard let (userId, hasSession) = self.link.state.withLock({ s -> (String, Bool)? in
                    guard s.generation == generation, s.running, !s.connected, let user = s.userId else {
                        if s.loopingFor == generation { s.loopingFor = nil }
                        return nil
                    }
                    return (user, s.serverSession)
                }) else { return }
                do {
                    if !hasSession {
                        _ = try await backend.login(userId: userId)
                        let current = self.link.state.withLock { s -> Bool in
                            guard s.generation == generation else { return false }
                            s.serverSession = true
                            return true
                        }
                        guard current else { continue }
                        Task.detached { await self.sessionStarted() }
                    }
                    try await backend.connect()
                    let stillOurs = self.link.state.withLock { s -> Bool in
                        if s.loopingFor == generation { s.loopingFor = nil }
                        return s.generation == generation
                    }
                    // `connect()` returning means connected (a backend already connected sends no
                    // second `.connected`).
                    if stillOurs { self.linkConnected() }
                    return
                } catch {
                    continue
                }
            }
        }
    }

    /// Iterates the backend's event stream for the vault's life (an `AsyncStream` cannot be
    /// iterated again once an iteration is cancelled, so this one never is).
    private func consumeEventsOnce() {
        let first = link.state.withLock { s -> Bool in
            defer { s.consuming = true }
            return !s.consuming
        }
        guard first else { return }
        let events = backend.events
        Task.detached { [weak self] in
            for await event in events {
                guard let self else { return }
                switch event {
                case .connected: self.linkConnected()
                case .disconnected: self.linkDisconnected()
                // Awaited: one event's write commits before the next is taken (arrival order).
                default: await self.realtimeEvent(event)
                }
            }
        }
    }

    private func linkConnected() {
        let pending = link.state.withLock { s -> (Int, Int)? in
            guard s.running, !s.connected else { return nil }
            s.connected = true
            s.stable = false
            s.connectionToken += 1
            return (s.generation, s.connectionToken)
        }
        guard let (generation, token) = pending else { return }
        let delay = settings.stableConnectionDelay
        Task.detached { [weak self] in
            try? await Task.sleep(for: delay)
            guard let self else { return }
            let stable = self.link.state.withLock { s -> Bool in
                guard s.generation == generation, s.connectionToken == token, s.connected else { return false }
                s.stable = true
                return true
            }
            if stable { self.connectionBecameStable() }
        }
    }

    private func linkDisconnected() {
        let generation = link.state.withLock { s -> Int? in
            guard s.running else { return nil }
            s.connected = false
            s.stable = false
            s.connectionToken += 1
            return s.generation
        }
        if let generation { startLinkLoop(generation: generation, delayFirst: true) }
    }

    /// The connection has held: flush the outbox (when auto-send is on), then catch up (the
    /// sweep waits for the flush, at most `SyncSettings.flushWait`). The sweep runs whether or
    /// not auto-send is on.
    func connectionBecameStable() {
        if config.autoSendPendingOnReconnect { requestPass(all: true) }
        if openCache != nil { requestSweep() }
    }

    /// Realtime messages, edits, deletions, reactions and receipts: validated, written to the
    /// cache and delivered to the message listeners by the ingest engine (`RealtimeIngest`).
    func realtimeEvent(_ event: RealtimeEvent) async {
        await ingestRealtime(event)
    }
}
