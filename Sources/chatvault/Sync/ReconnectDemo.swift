import ChatVault
import ChatVaultSimulator
import Foundation
import VaultKeys

/// `chatvault demo --story reconnect [--messages N] [--json]`: the catch-up sync, told step by step
/// against the in-process simulated server and its clock, in a temporary directory with an
/// in-memory key store (removed afterwards):
///
/// 1. online: the device logs in; once the connection has held, the first sweep of the new cache
///    stores the server's sync point (nothing to replay);
/// 2. offline: the device loses the network; the clock moves on while two other users send N
///    messages in three conversations, and the user queues one send (pending, then the queued
///    notice);
/// 3. reconnect: the network returns; after the connection has held (the stable delay, 200 ms
///    here) the outbox flushes first, then the sweep catches up: conversations phase, messages
///    phase (`onMessagesSynced`, then `onMessageSyncCompleted(…, .caughtUp)`).
///
/// Every callback of interest (outbox, sync and message listeners, all on one serial callback
/// queue) is a numbered step. Exit 0 when the flush came before the sweep, the sweep caught up,
/// `onMessagesSynced` brought exactly the N messages, and the sync listener heard its callbacks in
/// order; 1 otherwise. Message texts are never printed (server ids, conversation ids and counts
/// only). `--json` prints one document:
///
///     story                 "reconnect"
///     messages              N (sent by the others while the device was offline)
///     steps                 [{ "step": n, "event": name, … }] in order; events: online,
///                           firstSyncEstablished, offline, receivedOnServer, queued, queuedNotice,
///                           networkBack, sent (the send's own onMessageSent), outboxSent,
///                           conversationSyncStarted,
///                           conversationSyncCompleted, messageSyncStarted, messagesSynced,
///                           messageSyncCompleted, sweepFinished
///     syncListenerOrder     the sync listener's callbacks of the catch-up sweep, in order
///     flushedBeforeSweep    the outbox's sent event came before the catch-up sweep's
///                           onConversationSyncStarted
///     syncedMessages        messages onMessagesSynced delivered
///     syncOutcome           the messages phase's outcome ("caughtUp", "partial", or null)
///     lastSyncBefore/After  getLastSyncTimestamp() before going offline and after the sweep
///     passed                as the exit status says
enum ReconnectDemo {
    static let me = "demo-alice"
    static let others = ["demo-bob", "demo-carol"]
    static let group = "demo-team"
    static let stableMilliseconds = 200
    static let stableDelay = Duration.milliseconds(stableMilliseconds)
    static let expectedSyncOrder = ["conversationSyncStarted", "conversationSyncCompleted", "messageSyncStarted", "messageSyncCompleted"]

    static func run(count: Int, json: Bool) async throws -> Int32 {
        let say: @Sendable (String) -> Void = { line in if !json { emit(line) } }
        let scratch = try ScenariosCommand.makePrivateDirectory()
        // Removed when the story ends, not after its last mention below.
        defer { withExtendedLifetime(scratch) {} }
        let memory = MemoryKeyStore()
        var defaults = try Arguments([])
        var common = try CommonOptions(&defaults)
        common.keystore = "memory"

        let clock = SimulatedClock()
        let simulator = ChatVaultSimulator(seed: 11, clock: clock)
        do {
            try simulator.addUsers(me, others[0], others[1])
            try simulator.addGroup(group, owner: me, members: others)
        } catch {
            throw CLIError.failure("the simulator refused its users: \(error)")
        }
        let callbacks = DispatchQueue(label: "chatvault.demo.reconnect.callbacks")
        let device = simulator.client(for: me)
        let vault = try makeOutboxVault(common, root: scratch.path, encryption: true, memory: memory, backend: device,
                                        callbacks: callbacks) { settings in
            settings.clock = { clock.date }
            settings.stableConnectionDelay = stableDelay
            settings.reconnect = RetryPolicy(initialDelay: .milliseconds(5), maximumDelay: .milliseconds(20))
        }
        let story = Story(say: say)
        let listener = ReconnectListener(story: story)
        vault.addSyncListener("chatvault-demo", listener)
        vault.addMessageListener("chatvault-demo", listener)
        vault.addOutboxListener("chatvault-demo", listener)
        let sweeps = Tally()
        let outcome = Locked<String?>(nil)
        let events = vault.syncEvents()
        let watcher = Task {
            for await event in events {
                guard case .sweepFinished(let report) = event else { continue }
                if report.establishedSyncPoint {
                    story.add("firstSyncEstablished", "  first sync of the new cache: the sync point is stored, nothing to replay",
                              [("lastSyncTimestamp", .int(report.lastSyncTimestamp))])
                } else {
                    outcome.withLock { $0 = report.outcome?.rawValue }
                    story.add("sweepFinished", "  sweep finished: \(report.newMessageCount) new, outcome \(report.outcome?.rawValue ?? "failed")"
                              + (report.messageError.map { " (\($0.errorCode))" } ?? ""),
                              [("newMessageCount", .int(report.newMessageCount)), ("outcome", .optional(report.outcome?.rawValue)),
                               ("lastSyncTimestamp", .int(report.lastSyncTimestamp))])
                }
                sweeps.hit()
            }
        }
        defer { watcher.cancel() }

        // 1. Online.
        guard await vault.login(userId: me).state == .ready else { throw CLIError.failure("the demo cache did not open") }
        story.add("online", "online: logged in; the sweep waits until the connection has held for \(stableMilliseconds) ms", [])
        guard await sweeps.wait(for: 1, timeout: .seconds(20)) else {
            await vault.logout()
            throw CLIError.failure("the first sync did not run")
        }
        let before = vault.getLastSyncTimestamp()

        // 2. Offline: the others write, the user queues a send.
        device.network = .offline
        clock.advance(by: 60)
        story.add("offline", "offline: the device loses the network (the connection drops); the clock moves on", [])
        let conversations = [
            ChatVaultSimulator.conversationId(between: me, and: others[0]),
            ChatVaultSimulator.conversationId(between: me, and: others[1]),
            ChatVaultSimulator.conversationId(group: group),
        ]
        for i in 0..<count {
            let sender = others[i % 2]
            let scope: MessageScope = i % 3 == 2 ? .group(group) : .user(me)
            let id: Int
            do {
                id = try simulator.postText("while you were away \(i + 1)", from: sender, to: scope)
            } catch {
                throw CLIError.failure("the simulator refused a message: \(error)")
            }
            let conversation = i % 3 == 2 ? conversations[2] : ChatVaultSimulator.conversationId(between: me, and: sender)
            story.add("receivedOnServer", "  \(sender) sent message \(id) in \(conversation) (the device does not hear it)",
                      [("sender", .string(sender)), ("conversationId", .string(conversation)), ("serverId", .int(id))])
            clock.advance(by: 7)
        }
        let queued = Tally()
        let message = TextMessage(receiverUid: others[0], text: "sent from the train", receiverType: .user)
        vault.sendTextMessage(message: message, onMessagePending: { m in
            story.add("queued", "  the user sends a message: pending, committed to the cache as \(m.localMessageId ?? "?")",
                      [("localId", .optional(m.localMessageId))])
        }, onMessageSent: { m in
            story.add("sent", "  the send's own callback: sent (server id \(m.id))", [("serverId", .int(m.id))])
        }, onError: { error in
            story.add("queuedNotice", "  queued, not failed: \(error?.errorCode ?? "no error code") (goes when the connection holds)",
                      [("code", .optional(error?.errorCode))])
            queued.hit()
        })
        guard await queued.wait(for: 1, timeout: .seconds(20)) else {
            await vault.logout()
            throw CLIError.failure("the offline send was not queued")
        }
        clock.advance(by: 5)

        // 3. Reconnect.
        story.add("networkBack", "reconnect: the network returns; the connection must hold \(stableMilliseconds) ms before "
                  + "the outbox flushes and the sweep catches up", [])
        device.network = .online
        let caughtUp = await sweeps.wait(for: 2, timeout: .seconds(30))
        callbacks.sync {}
        let after = vault.getLastSyncTimestamp()
        await vault.logout()

        // 4. Summary.
        let steps = story.steps
        // The catch-up sweep's steps: those after the network came back (the first sweep's are
        // before).
        let names = steps.map(\.event).drop { $0 != "networkBack" }.map { $0 }
        let syncOrder = names.filter { expectedSyncOrder.contains($0) }
        let sent = names.firstIndex(of: "outboxSent")
        let sweepStart = names.firstIndex(of: "conversationSyncStarted")
        let flushedFirst = sent != nil && sweepStart != nil && (sent ?? 0) < (sweepStart ?? 0)
        let synced = listener.synced.withLock { $0 }
        let syncOutcome = outcome.withLock { $0 }
        let passed = caughtUp && flushedFirst && synced == count && syncOutcome == "caughtUp" && syncOrder == expectedSyncOrder
            && names.filter { $0 == "outboxSent" }.count == 1
        if json {
            let document: JSON = .object([
                ("story", .string("reconnect")), ("messages", .int(count)),
                ("steps", .array(steps.enumerated().map { i, step in
                    .object([("step", .int(i + 1)), ("event", .string(step.event))] + step.fields)
                })),
                ("syncListenerOrder", .array(syncOrder.map { .string($0) })),
                ("flushedBeforeSweep", .bool(flushedFirst)), ("syncedMessages", .int(synced)),
                ("syncOutcome", .optional(syncOutcome)), ("lastSyncBefore", .int(before)), ("lastSyncAfter", .int(after)),
                ("passed", .bool(passed)),
            ])
            emit(document.render())
        } else {
            if !caughtUp { say("  the sweep did not finish within 30 s") }
            say("summary: \(count) message\(count == 1 ? "" : "s") arrived while offline, \(synced) reached onMessagesSynced; "
                + "flush before sweep: \(flushedFirst ? "yes" : "NO"); outcome: \(syncOutcome ?? "none"); "
                + "sync point \(SyncAudit.iso(Int64(before))) -> \(SyncAudit.iso(Int64(after)))")
            say(passed ? "ok" : "FAILED")
        }
        return passed ? 0 : 1
    }

    /// The numbered steps, in the order they happened (callbacks arrive on one serial queue; the
    /// story's own steps are added between them).
    final class Story: Sendable {
        struct Step: Sendable {
            let event: String
            let fields: [(String, JSON)]
        }

        let say: @Sendable (String) -> Void
        private let list = Locked<[Step]>([])

        init(say: @escaping @Sendable (String) -> Void) {
            self.say = say
        }

        func add(_ event: String, _ line: String, _ fields: [(String, JSON)]) {
            let n = list.withLock { steps -> Int in
                steps.append(Step(event: event, fields: fields))
                return steps.count
            }
            say(String(format: "%2d ", n) + line)
        }

        var steps: [Step] { list.withLock { $0 } }
    }
}

/// Hears the reconnect story's outbox, sync and message callbacks (all on the demo's one serial
/// callback queue) and tells each as a step.
final class ReconnectListener: SyncListener, CometChatMessageDelegate, OutboxListener {
    let story: ReconnectDemo.Story
    let synced = Locked(0)

    init(story: ReconnectDemo.Story) {
        self.story = story
    }

    func onOutboxMessageSent(_ message: BaseMessage) {
        story.add("outboxSent", "  outbox: sent \(message.localMessageId ?? "?") -> server id \(message.id)", [("serverId", .int(message.id))])
    }

    func onOutboxMessageFailed(_ message: BaseMessage, _ reason: MessageFailureReason) {
        story.add("outboxFailed", "  outbox: FAILED (\(reason.rawValue))", [("reason", .string(reason.rawValue))])
    }

    func onConversationSyncStarted() {
        story.add("conversationSyncStarted", "  sync: conversations phase started", [])
    }

    func onConversationSyncCompleted(_ conversations: [Conversation]) {
        story.add("conversationSyncCompleted", "  sync: conversations phase completed (\(conversations.count) conversations)",
                  [("conversations", .int(conversations.count))])
    }

    func onConversationSyncError(_ error: CometChatException) {
        story.add("conversationSyncError", "  sync: conversations phase failed (\(error.errorCode))", [("code", .string(error.errorCode))])
    }

    func onMessageSyncStarted() {
        story.add("messageSyncStarted", "  sync: messages phase started (the change log from the sync point)", [])
    }

    func onMessagesSynced(_ messages: [BaseMessage]) {
        synced.withLock { $0 += messages.count }
        story.add("messagesSynced", "  messages: onMessagesSynced with \(messages.count) (ids \(messages.map { String($0.id) }.joined(separator: ", ")))",
                  [("count", .int(messages.count)), ("serverIds", .array(messages.map { .int($0.id) }))])
    }

    func onMessageSyncCompleted(_ messages: [BaseMessage], _ outcome: SyncOutcome) {
        story.add("messageSyncCompleted", "  sync: messages phase completed, \(messages.count) written, \(outcome.rawValue)",
                  [("count", .int(messages.count)), ("outcome", .string(outcome.rawValue))])
    }

    func onMessageSyncError(_ error: CometChatException) {
        story.add("messageSyncError", "  sync: messages phase failed (\(error.errorCode))", [("code", .string(error.errorCode))])
    }
}
