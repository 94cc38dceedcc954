import Foundation
import Synchronization

/// How the background integrity check of the current cache went.
///
/// A cache up to `VaultSettings.synchronousIntegrityCheckLimit` (1 MiB by default) is checked
/// (`PRAGMA quick_check`) during the open: damage is found before `login` returns, and the cache
/// is reset then. A larger cache opens `.ready` at once and is checked right after, in the
/// background (about 1.6 ms per MiB): damage is detected only when that check ends, and then the
/// cache is closed, its unsent messages salvaged, and it is reset as `.corrupted` (the reset
/// listener is told) before it serves again. Until then reads may be served from the damaged
/// cache, and a damaged page fails its read.
///
/// The check's connection is opened after `ready`, not during the open. `logout` (or any close of
/// the cache) interrupts it and reports it `.interrupted`: "not checked", never damage, and the
/// next open checks again. A check not yet started never starts; one under way stops at once
/// where the engine honours `sqlite3_interrupt`, but SQLite 3.15's `quick_check` does not, so
/// there logout waits for a check already under way (about 1.6 ms per MiB).
public enum BackgroundIntegrityCheck: String, Sendable, Equatable {
    /// No background check ran for this login (the cache was checked during the open, or none
    /// is open).
    case notNeeded
    /// The check is still running (a `waitForIntegrityCheck` that timed out).
    case pending
    /// `quick_check` passed.
    case intact
    /// Damage was found: the cache has been reset as `.corrupted` (after salvage) and reopened.
    case damaged
    /// Damage was found in the search index alone: the index was dropped (nothing else was
    /// touched, nothing reset) and is built again in the background.
    case repaired
    /// The check could not run (an I/O error, memory): it says nothing.
    case unknown
    /// The cache was closed (`logout`, another login) while the check ran, and the check was
    /// stopped rather than waited for: the cache is not checked. Never damage and never a reset;
    /// the next open of the cache checks it again.
    case interrupted
}

/// The background checks of one engine: how many run, how the last one ended, who waits.
final class IntegrityChecks: Sendable {
    private struct State {
        var running = 0
        var last = BackgroundIntegrityCheck.notNeeded
        var reopen: OpenAttempt?
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    /// A login starts afresh.
    func reset() {
        state.withLock { s in
            if s.running == 0 {
                s.last = .notNeeded
                s.reopen = nil
            }
        }
    }

    func begin() {
        state.withLock { s in
            s.running += 1
            s.last = .pending
            s.reopen = nil
        }
    }

    func end(_ result: BackgroundIntegrityCheck, reopen: OpenAttempt? = nil) {
        let woken = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.running = max(0, s.running - 1)
            s.last = result
            s.reopen = reopen
            guard s.running == 0 else { return [] }
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }

    var current: (BackgroundIntegrityCheck, OpenAttempt?) {
        state.withLock { s in (s.running > 0 ? .pending : s.last, s.reopen) }
    }

    /// Waits until no check runs, or `timeout` passes.
    func wait(timeout: Duration) async {
        let id = state.withLock { s -> Int in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                guard s.running > 0 else { return true }
                s.waiters[id] = continuation
                return false
            }
            if now { return continuation.resume() }
            Task.detached { [self] in
                try? await Task.sleep(for: timeout)
                let expired = self.state.withLock { $0.waiters.removeValue(forKey: id) }
                expired?.resume()
            }
        }
    }
}

/// The outcome of `OfflineVault.waitForIntegrityCheck(timeout:)`.
public struct IntegrityCheckOutcome: Sendable {
    /// How the background check went, or that it is still running (`.pending`) when the wait timed
    /// out.
    public let result: BackgroundIntegrityCheck
    /// The re-open that reset a damaged cache (`result == .damaged`): its state, resets and notes.
    public let reopen: OpenAttempt?
}

extension OfflineVault {
    /// Waits for the background integrity check of a large cache (see `BackgroundIntegrityCheck`)
    /// to end, and for the reset it may cause to be delivered, at most `timeout`. Apps need not
    /// call it (a damaged cache is reset on its own); audit tools do, so that a damaged large
    /// cache is not reported as healthy.
    ///
    ///     let attempt = await vault.login(userId: "alice")
    ///     let check = await vault.waitForIntegrityCheck(timeout: .seconds(30))
    ///     if check.result == .damaged { /* the reset listener has been told; the cache is new */ }
    public func waitForIntegrityCheck(timeout: Duration) async -> IntegrityCheckOutcome {
        await integrityChecks.wait(timeout: timeout)
        let (result, reopen) = integrityChecks.current
        return IntegrityCheckOutcome(result: result, reopen: reopen)
    }
}
