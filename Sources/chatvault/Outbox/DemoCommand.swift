import ChatVault
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import VaultKeys

/// `chatvault demo [--story outbox|reconnect] [--messages N] [--json]`: two stories against the
/// in-process simulated server. `--story reconnect` (`ReconnectDemo`) tells the catch-up sync after
/// a reconnect. The default, `--story outbox`, tells the durable outbox step by step against the
/// in-process simulated server, in a temporary directory with an in-memory key store (no desktop,
/// no keyring; everything is removed afterwards):
///
/// 1. the device is offline; N persistent sends each report pending (committed) and then the
///    queued notice (`ERROR_INTERNET_UNAVAILABLE`: queued, not failed);
/// 2. restart: the engine logs out and goes away with its closures; a new engine, on a new device
///    connection, opens the same cache and finds the N messages still pending;
/// 3. reconnect: the device comes back online; the outbox drains, heard on an `OutboxListener`
///    (the closures of step 1 are gone);
/// 4. summary: queued, sent, the server's copies and duplicates (must be 0), what is left.
///
/// Exit 0 when every message was sent exactly once and the outbox is empty, 1 otherwise. Message
/// texts are never printed (local ids and server ids only). `--json` prints only the summary:
///
///     messages             N
///     queued               sends that reported pending (onMessagePending)
///     queuedNotices        ERROR_INTERNET_UNAVAILABLE notices received before the restart
///     pendingAfterRestart  unsent messages the new engine found in the cache
///     sent                 onOutboxMessageSent events after the reconnect
///     failed               onOutboxMessageFailed events
///     serverMessages       messages the server holds in the conversation
///     duplicates           server messages beyond one per local id (0 expected)
///     sendCalls            send calls the new device made (retries included)
///     outboxAfter          unsent messages left at the end
///     milliseconds         from the first send to the last sent event
///     passed               every message sent once, no duplicate, nothing left
enum DemoCommand {
    static let me = "demo-alice"
    static let peer = "demo-bob"

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw, switches: ["json", "matrix"])
        let json = args.flag("json")
        if args.flag("matrix") { return try await MatrixDemo.run(&args, json: json) }
        let story = try args.choice("story", default: "outbox", among: ["outbox", "reconnect"])
        if story == "reconnect" {
            let count = try args.int("messages", default: 6, range: 1...200)
            try args.rejectUnknown()
            return try await ReconnectDemo.run(count: count, json: json)
        }
        let count = try args.int("messages", default: 5, range: 1...OutboxLimits.maxPending)
        try args.rejectUnknown()
        let say: @Sendable (String) -> Void = { line in if !json { emit(line) } }

        let scratch = try ScenariosCommand.makePrivateDirectory()
        let memory = MemoryKeyStore()
        var defaults = try Arguments([])
        var common = try CommonOptions(&defaults)
        common.keystore = "memory"
        let simulator = ChatVaultSimulator(seed: 7)
        do {
            try simulator.addUsers(me, peer)
        } catch {
            throw CLIError.failure("the simulator refused its users: \(error)")
        }
        let callbacks = DispatchQueue(label: "chatvault.demo.callbacks")
        // Short, stable delays: reconnect within a few ms, a connection counts as stable after 30 ms.
        let timings: (inout VaultSettings) -> Void = { settings in
            settings.stableConnectionDelay = .milliseconds(30)
            settings.reconnect = RetryPolicy(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(20))
        }
        let started = ContinuousClock.now

        // 1. Offline sends.
        let firstDevice = simulator.client(for: me)
        firstDevice.network = .offline
        let first = try makeOutboxVault(common, root: scratch.path, encryption: true, memory: memory, backend: firstDevice,
                                        callbacks: callbacks, adjust: timings)
        guard await first.login(userId: me).state == .ready else { throw CLIError.failure("the demo cache did not open") }
        say("device offline; sending \(count) message\(count == 1 ? "" : "s") through the outbox (cache encrypted, key in memory)")
        let pending = Tally()
        let notices = Tally()
        let queuedIds = Locked<[Int: String]>([:])
        for i in 1...count {
            let message = TextMessage(receiverUid: peer, text: "demo message \(i)", receiverType: .user)
            first.sendTextMessage(message: message, onMessagePending: { m in
                queuedIds.withLock { $0[i] = m.localMessageId ?? "?" }
                pending.hit()
                say("  [\(i)] pending: committed to the cache as \(m.localMessageId ?? "?")")
            }, onMessageSent: { m in
                say("  [\(i)] sent before the restart (server id \(m.id))")
            }, onError: { error in
                notices.hit()
                if error?.code == .internetUnavailable {
                    say("  [\(i)] queued, not failed: \(error?.errorCode ?? "") (goes on reconnect)")
                } else {
                    say("  [\(i)] FAILED: \(error?.errorCode ?? "no error code")")
                }
            })
        }
        guard await pending.wait(for: count, timeout: .seconds(20)), await notices.wait(for: count, timeout: .seconds(20)) else {
            await first.logout()
            throw CLIError.failure("only \(pending.count) of \(count) sends reported pending and \(notices.count) were told queued")
        }
        callbacks.sync {}

        // 2. Restart.
        say("restart: the engine logs out and is dropped with its closures; a new engine opens the same cache")
        await first.logout()
        let secondDevice = simulator.client(for: me)
        secondDevice.network = .offline
        let listener = DemoListener(say: say, number: { id in queuedIds.withLock { $0.first { $0.value == id }?.key } })
        let second = try makeOutboxVault(common, root: scratch.path, encryption: true, memory: memory, backend: secondDevice,
                                         callbacks: callbacks, adjust: timings)
        second.addOutboxListener("chatvault-demo", listener)
        guard await second.login(userId: me).state == .ready else { throw CLIError.failure("the demo cache did not reopen") }
        let found = (try? await second.pendingMessages()) ?? []
        say("  the new engine finds \(found.count) unsent message\(found.count == 1 ? "" : "s") in the cache, "
            + "\(found.filter { $0.messageStatus == .pending }.count) pending")

        // 3. Reconnect.
        say("reconnect: the device is back online; the outbox drains once the connection holds")
        secondDevice.network = .online
        let drained = await listener.sent.wait(for: count, timeout: .seconds(20))
        let finished = ContinuousClock.now
        // Anything still in flight (a duplicate send would show here) settles before the count.
        try? await Task.sleep(for: .milliseconds(50))
        callbacks.sync {}
        let left = (try? await second.pendingMessages())?.count ?? -1
        await second.logout()

        // 4. Summary.
        let conversation = ChatVaultSimulator.conversationId(between: me, and: peer)
        let serverMessages = simulator.messageIds(in: conversation).count
        let localIds = queuedIds.withLock { Array($0.values) }
        let duplicates = localIds.reduce(0) { $0 + max(0, simulator.storedCopies(ofLocalMessageId: $1, from: me) - 1) }
            + max(0, serverMessages - localIds.count)
        let summary = DemoSummary(messages: count, queued: pending.count, queuedNotices: notices.count, pendingAfterRestart: found.count,
                                  sent: listener.sent.count, failed: listener.failed.count, serverMessages: serverMessages,
                                  duplicates: duplicates, sendCalls: secondDevice.callCount(.send), outboxAfter: left,
                                  milliseconds: (finished - started).milliseconds)
        if !drained { say("  the outbox did not drain within 20 s") }
        if json {
            emit(summary.json.render())
        } else {
            emit("summary: \(summary.queued) queued, \(summary.pendingAfterRestart) pending after the restart, \(summary.sent) sent, "
                 + "\(summary.failed) failed; the server holds \(summary.serverMessages) (duplicates: \(summary.duplicates)); "
                 + "\(summary.sendCalls) send call\(summary.sendCalls == 1 ? "" : "s"); outbox left: \(summary.outboxAfter)")
            emit(summary.passed ? "ok" : "FAILED")
        }
        return summary.passed ? 0 : 1
    }
}

/// Narrates the outbox's transitions after the restart.
final class DemoListener: OutboxListener {
    let say: @Sendable (String) -> Void
    let number: @Sendable (String) -> Int?
    let sent = Tally()
    let failed = Tally()

    init(say: @escaping @Sendable (String) -> Void, number: @escaping @Sendable (String) -> Int?) {
        self.say = say
        self.number = number
    }

    private func label(_ message: BaseMessage) -> String {
        let id = message.localMessageId ?? "?"
        return number(id).map { "[\($0)] \(id)" } ?? id
    }

    func onOutboxMessagePending(_ message: BaseMessage) {
        say("  outbox: pending again \(label(message))")
    }

    func onOutboxMessageSent(_ message: BaseMessage) {
        sent.hit()
        say("  outbox: sent \(label(message)) -> server id \(message.id)")
    }

    func onOutboxMessageFailed(_ message: BaseMessage, _ reason: MessageFailureReason) {
        failed.hit()
        say("  outbox: FAILED \(label(message)) (\(reason.rawValue))")
    }
}

struct DemoSummary {
    let messages, queued, queuedNotices, pendingAfterRestart, sent, failed, serverMessages, duplicates, sendCalls, outboxAfter: Int
    let milliseconds: Double

    var passed: Bool {
        queued == messages && pendingAfterRestart == messages && sent == messages && failed == 0 && serverMessages == messages
            && duplicates == 0 && outboxAfter == 0
    }

    var json: JSON {
        .object([
            ("messages", .int(messages)), ("queued", .int(queued)), ("queuedNotices", .int(queuedNotices)),
            ("pendingAfterRestart", .int(pendingAfterRestart)), ("sent", .int(sent)), ("failed", .int(failed)),
            ("serverMessages", .int(serverMessages)), ("duplicates", .int(duplicates)), ("sendCalls", .int(sendCalls)),
            ("outboxAfter", .int(outboxAfter)), ("milliseconds", .double(milliseconds)), ("passed", .bool(passed)),
        ])
    }
}
