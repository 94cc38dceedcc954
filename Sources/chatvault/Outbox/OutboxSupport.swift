import ChatVault
import Foundation
import Synchronization
import VaultKeys

/// The engine for the outbox verbs (`outbox-stress`, `demo`, `bench outbox`): like `makeVault`, with
/// a backend of the verb's choosing (none: always offline), the outbox's largest queue (100) unless
/// the verb asks for another, and settings the verb adjusts (connection timings).
func makeOutboxVault(_ common: CommonOptions, root: String, encryption: Bool, memory: MemoryKeyStore? = nil,
                     backend: any ChatBackend = UnreachableBackend(), callbacks: DispatchQueue, queue: QueueOptions = .largest,
                     adjust: (inout VaultSettings) -> Void = { _ in }) throws -> OfflineVault {
    let config = OfflineConfig.Builder().setEnabled(true).setEncryption(encryption).setEncryptionFailureBehavior(.onlineOnly)
        .setMaxPendingMessages(queue.maxPending).setPendingQueueOverflowPolicy(queue.overflow).build()
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

/// The stress verbs' outbox limits: `--max-pending N` (1…100, default 100) and
/// `--overflow reject-newest|drop-oldest` (default `reject-newest`).
struct QueueOptions {
    var maxPending = OutboxLimits.maxPending
    var overflow = PendingMessageOverflowPolicy.rejectNewest

    static let largest = QueueOptions()

    init() {}

    init(_ args: inout Arguments) throws {
        maxPending = try args.int("max-pending", default: OutboxLimits.maxPending, range: 1...OutboxLimits.maxPending)
        overflow = try args.choice("overflow", default: "reject-newest", among: ["reject-newest", "drop-oldest"]) == "drop-oldest"
            ? .dropOldest : .rejectNewest
    }
}

/// What the stress verbs print about their sends and the outbox, each line one `write(2)`, never
/// a message's content:
///
///     refused <local id> <code>     the send's onError: refused, never committed (ERROR_QUEUE_FULL,
///                                   ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW)
///     failed <local id> <code>      the send's onError with any other code but "queued, not
///                                   failed" (ERROR_INTERNET_UNAVAILABLE), e.g. an eviction's
///                                   ERROR_QUEUE_OVERFLOW
///     sent <local id>               the OutboxListener: the server has it
///     outbox-failed <local id> <reason>   the OutboxListener: failed, refused or evicted
///                                   (including notices an earlier, killed process owed)
final class StressReport: OutboxListener {
    let sent = Tally()
    /// Failures of the sends' closures that are neither a refusal nor an eviction.
    let unexpected = Tally()

    /// Prints a send's `onError` line (`message` is the object sent: it carries its local id).
    func sendError(_ message: BaseMessage, _ error: CometChatException?) {
        let id = message.localMessageId ?? "?"
        switch error?.code {
        case .internetUnavailable?:
            return
        case .queueFull?, .offlineMediaByteOverflow?:
            emit("refused \(id) \(error?.errorCode ?? "")")
        default:
            emit("failed \(id) \(error?.errorCode ?? "nil")")
            if error?.code != .queueOverflow { unexpected.hit() }
        }
    }

    func onOutboxMessageSent(_ message: BaseMessage) {
        emit("sent \(message.localMessageId ?? "?")")
        sent.hit()
    }

    func onOutboxMessageFailed(_ message: BaseMessage, _ reason: MessageFailureReason) {
        emit("outbox-failed \(message.localMessageId ?? "?") \(reason.rawValue)")
    }
}

/// `CHATVAULT_OUTBOX_CRASH_AT=refusal|eviction` (the crash tests' seam, see `OutboxNotice`): the
/// process ends with `_exit(crashStatus)` at that moment, its decision committed and not yet told.
enum OutboxCrashPoint {
    static let variable = "CHATVAULT_OUTBOX_CRASH_AT"
    static let crashStatus: Int32 = 99

    static func install(on vault: OfflineVault) throws {
        guard let asked = ProcessInfo.processInfo.environment[variable] else { return }
        guard let point = OutboxNotice(rawValue: asked) else {
            throw CLIError.usage("\(variable) must be one of: \(OutboxNotice.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        vault.setOutboxNoticeHook { reached in
            if reached == point { _exit(crashStatus) }
        }
    }
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
