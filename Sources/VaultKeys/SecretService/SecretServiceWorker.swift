import Foundation
import Synchronization
internal import CLibSecret

/// Runs Secret Service calls on a worker thread of their own, with a deadline for the caller.
///
/// The caller waits at most until its deadline; then it cancels the operation's `GCancellable`
/// (libsecret aborts its D-Bus calls and dismisses a pending prompt) and returns. A worker that
/// missed a deadline is retired and the next operation gets a fresh one, so a call that never
/// returns cannot hold up the store: the stuck thread finishes (or not) on its own and releases
/// its GLib objects there.
final class SecretServiceWorkers: Sendable {
    enum Outcome<T: Sendable>: Sendable {
        case finished(T)
        /// The deadline passed; `promptInvolved` tells whether an unlock prompt had been requested.
        case timedOut(promptInvolved: Bool)
    }

    private let makeCalls: @Sendable () -> any SecretServiceCalls
    private let current: Mutex<SecretServiceWorker?> = Mutex(nil)

    /// - Parameter makeCalls: creates the calls object; invoked on each new worker thread.
    init(makeCalls: @escaping @Sendable () -> any SecretServiceCalls) {
        self.makeCalls = makeCalls
    }

    deinit {
        current.withLock { $0?.retire() }
    }

    /// Runs `body` on the worker and waits for it until `timeout` has passed.
    func run<T: Sendable>(timeout: Duration,
                          _ body: @escaping @Sendable (any SecretServiceCalls, SecretCallContext) -> T) -> Outcome<T> {
        let deadline = DispatchTime.now() + Self.interval(timeout)
        let context = SecretCallContext()
        let box = ResultBox<T>()
        let job: SecretServiceWorker.Job = { calls in
            // A job whose caller already gave up is not started.
            if !context.isCancelled {
                box.set(body(calls, context))
            }
            box.done.signal()
        }
        var worker: SecretServiceWorker
        repeat {
            worker = current.withLock { active in
                if let active { return active }
                let fresh = SecretServiceWorker(makeCalls: makeCalls)
                active = fresh
                return fresh
            }
        } while !worker.submit(job)
        if box.done.wait(timeout: deadline) == .success, let value = box.take() {
            return .finished(value)
        }
        context.cancel()
        if let value = box.take() { return .finished(value) }
        current.withLock { active in
            if active === worker { active = nil }
        }
        worker.retire()
        return .timedOut(promptInvolved: context.promptInvolved)
    }

    static func interval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return .nanoseconds(0) }
        let (nanosFromSeconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow || nanosFromSeconds > Int64(Int.max) - 1_000_000_000 { return .never }
        return .nanoseconds(Int(nanosFromSeconds + attoseconds / 1_000_000_000))
    }
}

/// One result slot and a semaphore, shared by a caller and the worker running its job.
private final class ResultBox<T: Sendable>: Sendable {
    let done = DispatchSemaphore(value: 0)
    private let value = Mutex<T?>(nil)

    func set(_ newValue: T) {
        value.withLock { $0 = newValue }
    }

    func take() -> T? {
        value.withLock { slot in
            let taken = slot
            slot = nil
            return taken
        }
    }
}

/// A dedicated thread with a FIFO of jobs. The thread owns the `SecretServiceCalls` object (and so
/// every GLib object) and a GMainContext of its own, pushed as the thread default, so that nothing
/// GDBus or libsecret schedules lands in the application's main context.
final class SecretServiceWorker: Sendable {
    typealias Job = @Sendable (any SecretServiceCalls) -> Void

    private struct Queue {
        var jobs: [Job] = []
        var retired = false
    }

    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)

    init(makeCalls: @escaping @Sendable () -> any SecretServiceCalls) {
        let thread = Thread { [self] in
            self.main(makeCalls)
        }
        thread.name = "ChatVault.SecretService"
        thread.start()
    }

    /// Queues a job; false when the worker was retired meanwhile (the caller takes the next one).
    func submit(_ job: @escaping Job) -> Bool {
        let accepted = queue.withLock { q in
            if q.retired { return false }
            q.jobs.append(job)
            return true
        }
        if accepted { wake.signal() }
        return accepted
    }

    /// The thread finishes the jobs already queued (their callers have cancelled them) and exits.
    func retire() {
        queue.withLock { $0.retired = true }
        wake.signal()
    }

    private func main(_ makeCalls: @Sendable () -> any SecretServiceCalls) {
        let mainContext = g_main_context_new()
        g_main_context_push_thread_default(mainContext)
        defer {
            g_main_context_pop_thread_default(mainContext)
            g_main_context_unref(mainContext)
        }
        // Scoped so the calls object (and its GLib objects) is released before the context goes.
        do {
            let calls = makeCalls()
            defer { calls.disconnect() }
            while true {
                wake.wait()
                let (job, retired): (Job?, Bool) = queue.withLock { q in
                    q.jobs.isEmpty ? (nil, q.retired) : (q.jobs.removeFirst(), q.retired)
                }
                if let job {
                    // Dispatch whatever GDBus queued for this thread since the last job (name-owner
                    // changes, stale replies) so it never accumulates.
                    while g_main_context_iteration(mainContext, 0) != 0 {}
                    job(calls)
                } else if retired {
                    break
                }
            }
        }
        while g_main_context_iteration(mainContext, 0) != 0 {}
    }
}
