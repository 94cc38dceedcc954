import ChatVault
import Foundation
import Synchronization
import VaultKeys

/// The engine for the outbox verbs (`outbox-stress`, `demo`, `bench outbox`): like `makeVault`, with
/// a backend of the verb's choosing (none: always offline), the outbox's largest queue (100), and
/// settings the verb adjusts (connection timings).
func makeOutboxVault(_ common: CommonOptions, root: String, encryption: Bool, memory: MemoryKeyStore? = nil,
                     backend: any ChatBackend = UnreachableBackend(), callbacks: DispatchQueue,
                     adjust: (inout VaultSettings) -> Void = { _ in }) throws -> OfflineVault {
    let config = OfflineConfig.Builder().setEnabled(true).setEncryption(encryption).setEncryptionFailureBehavior(.onlineOnly)
        .setMaxPendingMessages(OutboxLimits.maxPending).build()
    var settings = VaultSettings(applicationId: common.applicationId, applicationName: "chatvault", rootDirectory: root,
                                 keyStorage: common.keyStorage(memory: memory), callbackExecutor: .queue(callbacks), retry: .manualOnly)
    // Nothing in these verbs should be evicted while they run.
    settings.evictionDelay = .seconds(3600)
    adjust(&settings)
    do {
        return try OfflineVault(config: config, settings: settings, backend: backend)
    } catch {
        throw CLIError.usage(String(describing: error))
    }
}

enum OutboxLimits {
    /// `maxPendingMessages` is clamped to 1…100: a larger queue cannot exist.
    static let maxPending = 100
}

/// Counts callbacks and stamps the time of each on the monotonic clock, from whatever queue they
/// arrive on. `wait(for:)` suspends until the count is reached (no polling: a benchmark's waiting
/// must not take CPU time from the engine it measures).
final class Tally: Sendable {
    private struct Waiter {
        let target: Int
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var count = 0
        var last: ContinuousClock.Instant?
        var first: ContinuousClock.Instant?
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
        /// Waits whose timeout fired before they were registered.
        var expired: Set<Int> = []
    }

    private let state = Mutex(State())

    /// Records one callback now; returns its number (1-based).
    @discardableResult
    func hit() -> Int {
        let now = ContinuousClock.now
        let (count, ready) = state.withLock { s -> (Int, [Waiter]) in
            s.count += 1
            if s.first == nil { s.first = now }
            s.last = now
            let ready = s.waiters.filter { $0.value.target <= s.count }
            for key in ready.keys { s.waiters[key] = nil }
            return (s.count, Array(ready.values))
        }
        for waiter in ready { waiter.continuation.resume(returning: true) }
        return count
    }

    var count: Int { state.withLock { $0.count } }
    var first: ContinuousClock.Instant? { state.withLock { $0.first } }
    var last: ContinuousClock.Instant? { state.withLock { $0.last } }

    /// Waits until `count` reaches `target`; false after `timeout`.
    func wait(for target: Int, timeout: Duration = .seconds(30)) async -> Bool {
        let id = state.withLock { s -> Int in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            guard let self, !Task.isCancelled else { return }
            let waiter = self.state.withLock { s -> Waiter? in
                guard let waiter = s.waiters.removeValue(forKey: id) else {
                    s.expired.insert(id)
                    return nil
                }
                return waiter
            }
            waiter?.continuation.resume(returning: false)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let answer = state.withLock { s -> Bool? in
                if s.count >= target { return true }
                if s.expired.remove(id) != nil { return false }
                s.waiters[id] = Waiter(target: target, continuation: continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }
}

/// Discards one unsent message, waiting out the moment a pass has it on the wire.
func discardWhenIdle(_ vault: OfflineVault, _ localId: String, timeout: Duration = .seconds(10)) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        do {
            try await vault.discard(localId)
            return
        } catch {
            let retryable = error.code == .offlineMessageInFlight || error.code == .offlineMessagePersistFailed
            guard retryable, ContinuousClock.now < deadline else {
                throw CLIError.failure("could not discard a queued message: \(error.errorCode)")
            }
            try? await Task.sleep(for: .milliseconds(1))
        }
    }
}

/// A value shared between callbacks and the verb's own code.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) {
        mutex = Mutex(value)
    }

    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R {
        mutex.withLock { body(&$0) }
    }
}
