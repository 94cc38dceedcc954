import Foundation
import Synchronization
import VaultStore

/// The engine's hold on the server: the session (`ChatBackend.login`) and the realtime
/// connection, re-established with backoff whenever it drops, and judged **stable** once it has
/// stayed up for `VaultSettings.stableConnectionDelay` (a connect-then-drop flap does not count).
/// A stable connection flushes the outbox.
final class RealtimeLink: Sendable {
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

    /// What the link hands on, as closures the vault binds once.
    struct Ports: Sendable {
        /// A server session started (once per login): refreshes what the server keeps.
        var sessionStarted: @Sendable () async -> Void
        /// A realtime event (not a connection change), awaited: one commits before the next.
        var event: @Sendable (RealtimeEvent) async -> Void
        /// The connection has held for `VaultSettings.stableConnectionDelay`.
        var becameStable: @Sendable () -> Void

        static let unbound = Ports(sessionStarted: {}, event: { _ in }, becameStable: {})
    }

    let state = Mutex(State())
    private let backend: any ChatBackend
    private let settings: VaultSettings
    /// `OfflineConfig.maxMessagesPerConversation`, told to the backend with the cache's view.
    private let messagesPerConversation: Int
    private let boundPorts = Mutex(Ports.unbound)

    /// The vault's session (the backend's id map and state live in its open cache).
    private let session: VaultSession

    init(backend: any ChatBackend, settings: VaultSettings, messagesPerConversation: Int, session: VaultSession) {
        self.messagesPerConversation = messagesPerConversation
        self.backend = backend
        self.settings = settings
        self.session = session
    }

    /// Connects the link to its vault (once, at the vault's creation).
    func bind(_ ports: Ports) {
        boundPorts.withLock { $0 = ports }
    }

    private var ports: Ports { boundPorts.withLock { $0 } }
}

extension RealtimeLink {
    /// Starts the session and the connection for `userId` (after login).
    func start(userId: String) {
        let generation = state.withLock { s -> Int in
            s.generation += 1
            s.running = true
            s.userId = userId
            s.serverSession = false
            s.connected = false
            s.stable = false
            s.connectionToken += 1
            return s.generation
        }
        let session = self.session
        backend.attach(identities: CacheMessageIdentities(cache: { session.openCache }))
        backend.attach(state: CacheBackendState(cache: { session.openCache }))
        backend.attach(cachedMessages: CacheMessageCopies(cache: { session.openCache }, messagesPerConversation: messagesPerConversation))
        consumeEventsOnce()
        startLinkLoop(generation: generation, delayFirst: false)
    }

    /// Stops reconnecting (logout).
    func stop() {
        state.withLock { s in
            s.generation += 1
            s.running = false
            s.userId = nil
            s.connected = false
            s.stable = false
            s.connectionToken += 1
        }
    }

    /// Whether the realtime connection is up and has held.
    var isStable: Bool { state.withLock { $0.running && $0.stable } }

    /// Something suggests the connection is gone (a send got no connection or no answer): drop it
    /// and reconnect, so the next stable connection flushes again.
    func suspect() {
        let (connected, generation) = state.withLock { s -> (Bool, Int?) in
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
        let start = state.withLock { s -> Bool in
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
                guard let (userId, hasSession) = self.state.withLock({ s -> (String, Bool)? in
                    guard s.generation == generation, s.running, !s.connected, let user = s.userId else {
                        if s.loopingFor == generation { s.loopingFor = nil }
                        return nil
                    }
                    return (user, s.serverSession)
                }) else { return }
                do {
                    if !hasSession {
                        _ = try await backend.login(userId: userId)
                        let current = self.state.withLock { s -> Bool in
                            guard s.generation == generation else { return false }
                            s.serverSession = true
                            return true
                        }
                        guard current else { continue }
                        let started = self.ports.sessionStarted
                        Task.detached { await started() }
                    }
                    try await backend.connect()
                    let stillOurs = self.state.withLock { s -> Bool in
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
        let first = state.withLock { s -> Bool in
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
                default: await self.ports.event(event)
                }
            }
        }
    }

    private func linkConnected() {
        let pending = state.withLock { s -> (Int, Int)? in
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
            let stable = self.state.withLock { s -> Bool in
                guard s.generation == generation, s.connectionToken == token, s.connected else { return false }
                s.stable = true
                return true
            }
            if stable { self.ports.becameStable() }
        }
    }

    private func linkDisconnected() {
        let generation = state.withLock { s -> Int? in
            guard s.running else { return nil }
            s.connected = false
            s.stable = false
            s.connectionToken += 1
            return s.generation
        }
        if let generation { startLinkLoop(generation: generation, delayFirst: true) }
    }
}
