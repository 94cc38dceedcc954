import ChatVault
import ChatVaultSimulator
import Foundation
import VaultKeys
import VaultStore

/// `chatvault bench outbox [--runs N] [--batch-runs R] [--flush-messages F] [--flush-runs S]
/// [--keystore memory|file|secret-service] [--json]`
///
/// Measures the durable outbox against the budgets of shared/reference/performance-budget.md, in
/// one process, on caches in a fresh 0700 temporary directory (removed afterwards):
///
/// - `enqueue`: one persistent text send, offline (no server), from the call to its
///   `onMessagePending` (validation, the admission queue, the writer queue, one `BEGIN IMMEDIATE …
///   COMMIT` with `synchronous=FULL`, the callback queue). Side by side on an encrypted and a
///   plaintext cache, alternating. Between runs (untimed) the send's queued notice is awaited and the
///   message discarded, so every run meets an empty outbox and an idle engine. For the profile, a
///   third engine runs the same sends on an encrypted cache whose writer was switched to
///   `synchronous=OFF` (no fsync; not durable, never an option of the library): its median is the
///   engine's own share (encoding, queues, SQL), the difference to the encrypted median is what the
///   durable commit costs. `commitOnly` times the same transaction (count the queue, next sequence
///   number, insert a row of the same size) run straight on each writer queue by the benchmark, and
///   `fsync` rewrites and syncs one 4 KiB page of a file: the floor of any durable commit here.
/// - `batch`: 50 persistent sends made back to back, from the first call to the 50th
///   `onMessagePending` (the engine's passes run meanwhile, as in an app); then discarded. Sends
///   waiting together for admission are committed together, so the batch pays a few durable
///   commits, not 50; the `synchronous=OFF` design shows what is left without them.
/// - `flush`: F persistent sends (default 1,000) queued offline on the encrypted cache, then the
///   simulated device (zero latency) goes online: time from going online to the last
///   `onMessageSent`. The outbox holds at most 100 messages (`maxPendingMessages` is clamped to
///   1…100), so the F sends go in batches of 100, each queued offline then flushed; times add up.
///   The engine reconnects within 2 ms and counts a connection stable after 1 ms (the defaults are
///   500 ms and 2.5 s): `reconnectToFirstSentMedianMs` shows that share, `drainMessagesPerSecond`
///   excludes it (first to last `onMessageSent`).
///
/// Defaults: 200 enqueue runs per design after 5 warm-ups, 20 batch runs, F = 1,000, 3 flush runs
/// after one warm-up batch, `--keystore memory`. Compare ratios from one run; quote medians; for
/// figures to quote use a release build (`CHATVAULT_BUILD_CONFIGURATION=release Scripts/chatvault
/// bench outbox`).
///
/// Exit status: 0 within budget (encrypted enqueue median ≤ 1 ms, encrypted 50-send batch median
/// ≤ 50 ms), 1 over budget (the failed checks are printed and listed in `budget.failures`) or when
/// the benchmark cannot run (a send not queued or not sent, a duplicate on the server), 2 on a
/// usage error.
///
/// `--json` prints one object with these stable fields (times in milliseconds):
///
///     benchmark     "outbox"
///     keystore      "memory" | "file" | "secret-service"
///     build         "debug" | "release"
///     engine        { cipher, sqlite }
///     enqueue       { runs, warmupRuns,
///                     designs: { encrypted, plaintext, encryptedSynchronousOff }, each { runs,
///                                medianMs, p90Ms, minMs, maxMs, commitOnlyMedianMs },
///                     encryptedOverPlaintext (ratio of medians),
///                     profile: { fsyncMedianMs, fsyncP90Ms, commitOnlyMedianMs (encrypted),
///                                durableCommitShareMs (encrypted − encryptedSynchronousOff medians),
///                                engineWithoutFsyncMedianMs (the encryptedSynchronousOff median) } }
///     batch         { sends: 50, runs, designs: { encrypted, plaintext, encryptedSynchronousOff },
///                     each { runs, medianMs, p90Ms, minMs, maxMs, perSendMedianMs },
///                     encryptedOverPlaintext }
///     flush         { messages, batchSize, runs, medianMs, p90Ms, minMs, maxMs (going online → last
///                     onMessageSent, summed over the batches), messagesPerSecond (median run),
///                     reconnectToFirstSentMedianMs, drainMessagesPerSecond (median run),
///                     serverMessages, duplicates }
///     budget        { enqueueMedianMs: 1, batchMedianMs: 50, enqueueWithinBudget, batchWithinBudget,
///                     withinBudget, failures: [human-readable strings] }
///
/// Prints no key material and no message text (the messages are synthetic anyway).
enum OutboxBenchCommand {
    static let defaultRuns = 200
    static let warmups = 5
    static let defaultBatchRuns = 20
    static let batchSize = 50
    static let defaultFlushMessages = 1_000
    static let defaultFlushRuns = 3
    static let budgetEnqueueMs = 1.0
    static let budgetBatchMs = 50.0

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let keystoreGiven = args.values["keystore"] != nil
        var common = try CommonOptions(&args)
        if !keystoreGiven { common.keystore = "memory" }
        let runs = try args.int("runs", default: defaultRuns, range: 1...100_000)
        let batchRuns = try args.int("batch-runs", default: defaultBatchRuns, range: 1...10_000)
        let flushMessages = try args.int("flush-messages", default: defaultFlushMessages, range: 1...1_000_000)
        let flushRuns = try args.int("flush-runs", default: defaultFlushRuns, range: 1...1_000)
        try args.rejectUnknown()

        let scratch = try ScenariosCommand.makePrivateDirectory()
        if common.keystore == "file" { common.keyDirectory = common.keyDirectory.map(absolutePath) ?? "\(scratch.path)/keys" }
        let memory = MemoryKeyStore()
        let root = "\(scratch.path)/caches"
        // Key items this run creates (the Secret Service keeps them unless deleted; the other stores
        // live in memory or in the temporary directory).
        let keys = Locked<[KeyItemID]>([])
        defer {
            let store = common.store(memory: memory)
            for id in keys.withLock({ $0 }) { try? store.delete(id) }
        }
        let encrypted = try await OutboxBenchEngine(common, root: root, user: "bench-encrypted", encryption: true, memory: memory, keys: keys)
        let plaintext = try await OutboxBenchEngine(common, root: root, user: "bench-plaintext", encryption: false, memory: memory, keys: keys)

        // A profile-only third engine: the same path with `synchronous=OFF` (no fsync, not durable).
        let unsynced = try await OutboxBenchEngine(common, root: root, user: "bench-synchronous-off", encryption: true, memory: memory,
                                                   keys: keys, synchronousOff: true)
        let fsync = try FsyncProbe(directory: scratch.path)

        // (a) One send at a time, the designs alternating.
        let designs = [encrypted, plaintext, unsynced]
        var enqueue = Array(repeating: [Double](), count: designs.count)
        var commitOnly = Array(repeating: [Double](), count: designs.count)
        var fsyncs: [Double] = []
        for iteration in 0..<(warmups + runs) {
            for offset in designs.indices {
                let index = (offset + iteration) % designs.count
                let ms = try await designs[index].enqueueOnce()
                let commit = try designs[index].commitOnce()
                if iteration >= warmups {
                    enqueue[index].append(ms)
                    commitOnly[index].append(commit)
                }
            }
            let synced = try fsync.once()
            if iteration >= warmups { fsyncs.append(synced) }
        }
        // (b) 50 back to back, the same three designs.
        var batch = Array(repeating: [Double](), count: designs.count)
        for iteration in 0..<(1 + batchRuns) {
            for offset in designs.indices {
                let index = (offset + iteration) % designs.count
                let ms = try await designs[index].batchOnce(batchSize)
                if iteration >= 1 { batch[index].append(ms) }
            }
        }
        for engine in designs { await engine.close() }

        // (c) Flush against the simulator.
        let flush = try await FlushBench.run(common, root: root, memory: memory, messages: flushMessages, runs: flushRuns, keys: keys)

        let report = OutboxBenchReport(keystore: common.keystore, runs: runs, batchRuns: batchRuns,
                                       enqueue: enqueue.map(TimingSummary.init), commitOnly: commitOnly.map(TimingSummary.init),
                                       fsync: TimingSummary(fsyncs), batch: batch.map(TimingSummary.init), flush: flush)
        emit(common.json ? report.json.render() : report.table)
        guard report.withinBudget else {
            complain("over budget: " + report.failures.joined(separator: "; "))
            return 1
        }
        return 0
    }
}

/// One engine with no server (always offline) on its own cache, for the enqueue and batch runs.
final class OutboxBenchEngine {
    let vault: OfflineVault
    let common: CommonOptions
    let memory: MemoryKeyStore
    let user: String
    let callbacks = DispatchQueue(label: "chatvault.bench.outbox.callbacks")
    private let cache: VaultCache
    private var sequence = 0

    init(_ common: CommonOptions, root: String, user: String, encryption: Bool, memory: MemoryKeyStore, keys: Locked<[KeyItemID]>,
         synchronousOff: Bool = false) async throws {
        self.common = common
        self.memory = memory
        self.user = user
        vault = try makeOutboxVault(common, root: root, encryption: encryption, memory: memory, callbacks: callbacks)
        cache = try await openBenchCache(vault, user: user, encryption: encryption, common: common, keys: keys)
        if synchronousOff {
            try cache.writer.sync { db in try db.execute("PRAGMA synchronous = OFF") }
        }
    }

    private func nextMessage() -> TextMessage {
        sequence += 1
        // About the size of a short chat line.
        return TextMessage(receiverUid: "bench-peer", text: "outbox bench message \(sequence): a short line of chat text", receiverType: .user)
    }

    /// One send: milliseconds from the call to `onMessagePending`. Untimed afterwards: the queued
    /// notice (the engine's pass has run), then the discard.
    func enqueueOnce() async throws -> Double {
        let pendingAt = Locked<(ContinuousClock.Instant, String)?>(nil)
        let notices = Tally()
        let message = nextMessage()
        let start = ContinuousClock.now
        vault.sendTextMessage(message: message, onMessagePending: { m in
            let now = ContinuousClock.now
            pendingAt.withLock { $0 = (now, m.localMessageId ?? "") }
        }, onMessageSent: { _ in }, onError: { _ in notices.hit() })
        guard await notices.wait(for: 1, timeout: .seconds(30)), let (end, localId) = pendingAt.withLock({ $0 }) else {
            throw CLIError.failure("a send was not queued")
        }
        try await discardWhenIdle(vault, localId)
        return (end - start).milliseconds
    }

    /// The enqueue transaction alone, straight on the writer queue (then deleted, untimed).
    func commitOnce() throws -> Double {
        let localId = UUID().uuidString.lowercased()
        let payload = [UInt8](repeating: 0x61, count: 160)
        let start = ContinuousClock.now
        try cache.writer.sync { db in
            try db.transaction {
                _ = try db.scalarInt("SELECT count(*) FROM outbox WHERE state = 0")
                let seq = try CacheRows.nextOutboxSeq(db)
                try CacheRows.insert([CacheRows.OutboxEntry(localId: localId, seq: seq, conversationId: "bench-peer_user_bench", kind: "text",
                                                            state: 0, createdAt: 0, payload: payload)], into: db)
            }
        }
        let end = ContinuousClock.now
        try cache.writer.sync { db in try db.run("DELETE FROM outbox WHERE local_id = ?", .text(localId)) }
        return (end - start).milliseconds
    }

    /// `count` sends back to back: milliseconds from the first call to the last `onMessagePending`.
    func batchOnce(_ count: Int) async throws -> Double {
        let pending = Tally()
        let notices = Tally()
        let ids = Locked<[String]>([])
        let messages = (0..<count).map { _ in nextMessage() }
        let start = ContinuousClock.now
        for message in messages {
            vault.sendTextMessage(message: message, onMessagePending: { m in
                pending.hit()
                ids.withLock { $0.append(m.localMessageId ?? "") }
            }, onMessageSent: { _ in }, onError: { _ in notices.hit() })
        }
        guard await pending.wait(for: count), await notices.wait(for: count), let end = pending.last else {
            throw CLIError.failure("only \(pending.count) of \(count) sends were queued")
        }
        for id in ids.withLock({ $0 }) { try await discardWhenIdle(vault, id) }
        return (end - start).milliseconds
    }

    func close() async {
        await vault.logout()
    }

}

/// The floor of a durable commit on this file system: rewrite one 4 KiB page of a file and `fsync` it.
final class FsyncProbe {
    private let fd: Int32
    private let page = [UInt8](repeating: 0x5a, count: 4096)

    init(directory: String) throws {
        fd = open("\(directory)/fsync-probe", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CLIError.failure("cannot create the fsync probe file (errno \(errno))") }
    }

    deinit { close(fd) }

    func once() throws -> Double {
        let start = ContinuousClock.now
        let written = page.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == page.count, fsync(fd) == 0 else { throw CLIError.failure("the fsync probe failed (errno \(errno))") }
        return (ContinuousClock.now - start).milliseconds
    }
}

/// Logs `vault` in as `user` and returns its cache, which must be ready (and encrypted when asked);
/// records the key item to delete afterwards.
func openBenchCache(_ vault: OfflineVault, user: String, encryption: Bool, common: CommonOptions,
                    keys: Locked<[KeyItemID]>) async throws -> VaultCache {
    let attempt = await vault.login(userId: user)
    guard attempt.state == .ready, let cache = vault.openCache else {
        await vault.logout()
        throw CLIError.failure("the benchmark cache did not open: \(attempt.state.outcome)" + (attempt.state.unavailableReason.map { " (\($0))" } ?? ""))
    }
    if encryption {
        keys.withLock { $0.append(KeyItemID(applicationId: common.applicationId, account: cache.directory.account, cacheId: cache.cacheId)) }
        guard cache.isEncrypted else {
            await vault.logout()
            throw CLIError.failure("the benchmark cache is not encrypted")
        }
    }
    return cache
}

/// (c): batches of queued sends flushed to the simulator.
enum FlushBench {
    struct Result {
        let messages: Int
        let batchSize: Int
        /// Per run: going online → last onMessageSent, summed over its batches.
        let totals: TimingSummary
        let messagesPerSecond: Double
        let reconnectToFirstSent: TimingSummary
        let drainMessagesPerSecond: Double
        let serverMessages: Int
        let duplicates: Int
    }

    static func run(_ common: CommonOptions, root: String, memory: MemoryKeyStore, messages: Int, runs: Int,
                    keys: Locked<[KeyItemID]>) async throws -> Result {
        let me = "bench-flush"
        let peer = "bench-flush-peer"
        let simulator = ChatVaultSimulator(seed: 3)
        do { try simulator.addUsers(me, peer) } catch { throw CLIError.failure("the simulator refused its users: \(error)") }
        let device = simulator.client(for: me)
        let callbacks = DispatchQueue(label: "chatvault.bench.flush.callbacks")
        let vault = try makeOutboxVault(common, root: root, encryption: true, memory: memory, backend: device, callbacks: callbacks) { settings in
            settings.stableConnectionDelay = .milliseconds(1)
            settings.reconnect = RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(2))
        }
        _ = try await openBenchCache(vault, user: me, encryption: true, common: common, keys: keys)
        do {
            let result = try await measure(vault, device: device, simulator: simulator, callbacks: callbacks, me: me, peer: peer,
                                           messages: messages, runs: runs)
            await vault.logout()
            return result
        } catch {
            await vault.logout()
            throw error
        }
    }

    private static func measure(_ vault: OfflineVault, device: SimulatedClient, simulator: ChatVaultSimulator, callbacks: DispatchQueue,
                                me: String, peer: String, messages: Int, runs: Int) async throws -> Result {
        // Let the session start (its refreshes) before anything is timed.
        let deadline = ContinuousClock.now + .seconds(10)
        while !device.isConnected && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(1)) }
        try? await Task.sleep(for: .milliseconds(100))

        var sequence = 0
        var expected = 0
        /// One batch: queued offline, then flushed; (online → first sent, online → last sent).
        func flushBatch(_ count: Int) async throws -> (first: Double, last: Double) {
            device.network = .offline
            let pending = Tally()
            let notices = Tally()
            let sent = Tally()
            for _ in 0..<count {
                sequence += 1
                let message = TextMessage(receiverUid: peer, text: "flush bench message \(sequence)", receiverType: .user)
                vault.sendTextMessage(message: message, onMessagePending: { _ in pending.hit() }, onMessageSent: { _ in sent.hit() },
                                      onError: { _ in notices.hit() })
            }
            guard await pending.wait(for: count), await notices.wait(for: count) else {
                throw CLIError.failure("only \(pending.count) of \(count) sends were queued offline")
            }
            let online = ContinuousClock.now
            device.network = .online
            guard await sent.wait(for: count, timeout: .seconds(60)), let first = sent.first, let last = sent.last else {
                throw CLIError.failure("only \(sent.count) of \(count) queued sends were sent after the reconnect")
            }
            expected += count
            return ((first - online).milliseconds, (last - online).milliseconds)
        }

        _ = try await flushBatch(min(OutboxLimits.maxPending, messages))
        var totals: [Double] = []
        var rates: [Double] = []
        var drainRates: [Double] = []
        var firsts: [Double] = []
        for _ in 0..<runs {
            var left = messages
            var total = 0.0
            var drain = 0.0
            var intervals = 0
            while left > 0 {
                let count = min(OutboxLimits.maxPending, left)
                let (first, last) = try await flushBatch(count)
                total += last
                drain += last - first
                intervals += count - 1
                firsts.append(first)
                left -= count
            }
            totals.append(total)
            rates.append(Double(messages) / (total / 1000))
            if drain > 0 { drainRates.append(Double(intervals) / (drain / 1000)) }
        }
        callbacks.sync {}
        let serverMessages = simulator.messageIds(in: ChatVaultSimulator.conversationId(between: me, and: peer)).count
        let duplicates = max(0, serverMessages - expected)
        guard serverMessages >= expected else {
            throw CLIError.failure("the server holds \(serverMessages) messages, \(expected) were sent")
        }
        return Result(messages: messages, batchSize: min(OutboxLimits.maxPending, messages), totals: TimingSummary(totals),
                      messagesPerSecond: TimingSummary(rates).medianMs, reconnectToFirstSent: TimingSummary(firsts),
                      drainMessagesPerSecond: drainRates.isEmpty ? .infinity : TimingSummary(drainRates).medianMs,
                      serverMessages: serverMessages, duplicates: duplicates)
    }
}

/// The figures, ratios and budget verdict of one `bench outbox` run.
struct OutboxBenchReport {
    let keystore: String
    let runs: Int
    let batchRuns: Int
    /// [encrypted, plaintext, encrypted with synchronous=OFF]
    let enqueue: [TimingSummary]
    let commitOnly: [TimingSummary]
    let fsync: TimingSummary
    /// [encrypted, plaintext, encrypted with synchronous=OFF]
    let batch: [TimingSummary]
    let flush: FlushBench.Result

    static let designNames = ["encrypted", "plaintext", "encryptedSynchronousOff"]
    static let designTitles = ["encrypted", "plaintext", "encrypted, synchronous=OFF (profile only)"]

    var enqueueRatio: Double { enqueue[0].medianMs / enqueue[1].medianMs }
    var batchRatio: Double { batch[0].medianMs / batch[1].medianMs }
    /// What the durable commit (its fsyncs) adds to a send: encrypted minus encrypted without sync.
    var durabilityShareMs: Double { enqueue[0].medianMs - enqueue[2].medianMs }
    var enqueueWithinBudget: Bool { enqueue[0].medianMs <= OutboxBenchCommand.budgetEnqueueMs }
    var batchWithinBudget: Bool { batch[0].medianMs <= OutboxBenchCommand.budgetBatchMs }
    var withinBudget: Bool { enqueueWithinBudget && batchWithinBudget && flush.duplicates == 0 }

    var failures: [String] {
        var out: [String] = []
        if !enqueueWithinBudget {
            out.append("encrypted enqueue median \(ms(enqueue[0].medianMs)) ms is above the \(Int(OutboxBenchCommand.budgetEnqueueMs)) ms budget")
        }
        if !batchWithinBudget {
            out.append("encrypted \(OutboxBenchCommand.batchSize)-send batch median \(ms(batch[0].medianMs)) ms is above the \(Int(OutboxBenchCommand.budgetBatchMs)) ms budget")
        }
        if flush.duplicates > 0 { out.append("the server holds \(flush.duplicates) duplicate message(s) after the flush") }
        return out
    }

    private func summary(_ t: TimingSummary, extra: [(String, JSON)] = []) -> JSON {
        .object([("runs", .int(t.runs)), ("medianMs", .double(t.medianMs)), ("p90Ms", .double(t.p90Ms)), ("minMs", .double(t.minMs)),
                 ("maxMs", .double(t.maxMs))] + extra)
    }

    var json: JSON {
        let engine = CipherEngine.current
        return .object([
            ("benchmark", .string("outbox")),
            ("keystore", .string(keystore)),
            ("build", .string(OpenBenchReport.build)),
            ("engine", .object([("cipher", .optional(engine.version)), ("sqlite", .string(engine.sqliteVersion))])),
            ("enqueue", .object([
                ("runs", .int(runs)), ("warmupRuns", .int(OutboxBenchCommand.warmups)),
                ("designs", .object(Self.designNames.indices.map { i in
                    (Self.designNames[i], summary(enqueue[i], extra: [("commitOnlyMedianMs", .double(commitOnly[i].medianMs))]))
                })),
                ("encryptedOverPlaintext", .double(enqueueRatio)),
                ("profile", .object([
                    ("fsyncMedianMs", .double(fsync.medianMs)),
                    ("fsyncP90Ms", .double(fsync.p90Ms)),
                    ("commitOnlyMedianMs", .double(commitOnly[0].medianMs)),
                    ("durableCommitShareMs", .double(durabilityShareMs)),
                    ("engineWithoutFsyncMedianMs", .double(enqueue[2].medianMs)),
                ])),
            ])),
            ("batch", .object([
                ("sends", .int(OutboxBenchCommand.batchSize)), ("runs", .int(batchRuns)),
                ("designs", .object(Self.designNames.indices.map { i in
                    (Self.designNames[i], summary(batch[i], extra: [("perSendMedianMs", .double(batch[i].medianMs / Double(OutboxBenchCommand.batchSize)))]))
                })),
                ("encryptedOverPlaintext", .double(batchRatio)),
            ])),
            ("flush", summary(flush.totals, extra: [
                ("messages", .int(flush.messages)), ("batchSize", .int(flush.batchSize)),
                ("messagesPerSecond", .double(flush.messagesPerSecond)),
                ("reconnectToFirstSentMedianMs", .double(flush.reconnectToFirstSent.medianMs)),
                ("drainMessagesPerSecond", .double(flush.drainMessagesPerSecond)),
                ("serverMessages", .int(flush.serverMessages)), ("duplicates", .int(flush.duplicates)),
            ])),
            ("budget", .object([
                ("enqueueMedianMs", .int(Int(OutboxBenchCommand.budgetEnqueueMs))),
                ("batchMedianMs", .int(Int(OutboxBenchCommand.budgetBatchMs))),
                ("enqueueWithinBudget", .bool(enqueueWithinBudget)),
                ("batchWithinBudget", .bool(batchWithinBudget)),
                ("withinBudget", .bool(withinBudget)),
                ("failures", .array(failures.map { .string($0) })),
            ])),
        ])
    }

    var table: String {
        let engine = CipherEngine.current
        var lines = [
            "chatvault bench outbox: key store \(keystore); SQLCipher \(engine.version ?? "none") on SQLite \(engine.sqliteVersion); \(OpenBenchReport.build) build",
            "enqueue = one send, call → onMessagePending, offline: \(runs) runs per design after \(OutboxBenchCommand.warmups) warm-ups; "
                + "\(OutboxBenchCommand.batchSize) sends back to back: \(batchRuns) runs; medians and p90 in ms",
            "",
        ]
        var table = Table(header: ["measure", "design", "runs", "median", "p90", "notes"])
        for i in enqueue.indices {
            table.rows.append(["enqueue", Self.designTitles[i], String(enqueue[i].runs), ms(enqueue[i].medianMs), ms(enqueue[i].p90Ms),
                               "the commit alone: \(ms(commitOnly[i].medianMs))"])
        }
        for i in batch.indices {
            table.rows.append(["\(OutboxBenchCommand.batchSize) sends", Self.designTitles[i], String(batch[i].runs), ms(batch[i].medianMs),
                               ms(batch[i].p90Ms), "\(ms(batch[i].medianMs / Double(OutboxBenchCommand.batchSize))) per send"])
        }
        table.rows.append(["flush \(flush.messages)", "encrypted", String(flush.totals.runs), ms(flush.totals.medianMs), ms(flush.totals.p90Ms),
                           "\(rate(flush.messagesPerSecond)) msg/s from reconnect, \(rate(flush.drainMessagesPerSecond)) msg/s draining"])
        table.rows.append(["fsync 4 KiB", "file system", String(fsync.runs), ms(fsync.medianMs), ms(fsync.p90Ms), "the floor of a durable commit"])
        lines.append(table.render())
        lines.append("")
        var ratios = Table(header: ["ratio of medians", "value"])
        ratios.rows = [["enqueue encrypted / plaintext", ratioText(enqueueRatio)], ["50 sends encrypted / plaintext", ratioText(batchRatio)]]
        lines.append(ratios.render())
        lines.append("")
        lines.append("profile of an encrypted enqueue: \(ms(enqueue[0].medianMs)) ms = \(ms(enqueue[2].medianMs)) ms without fsync (engine, SQL, queues) "
                     + "+ \(ms(durabilityShareMs)) ms for the durable commit (fsync median \(ms(fsync.medianMs)) ms)")
        lines.append("profile of \(OutboxBenchCommand.batchSize) encrypted sends: \(ms(batch[0].medianMs)) ms = \(ms(batch[2].medianMs)) ms without fsync "
                     + "+ \(ms(batch[0].medianMs - batch[2].medianMs)) ms for \(OutboxBenchCommand.batchSize) durable commits (sends waiting together share one)")
        lines.append("flush: batches of \(flush.batchSize) (the outbox's largest queue), each queued offline then sent; reconnect → first sent median "
                     + "\(ms(flush.reconnectToFirstSent.medianMs)) ms; the server holds \(flush.serverMessages), duplicates \(flush.duplicates)")
        lines.append("budget: encrypted enqueue median \(ms(enqueue[0].medianMs)) ms ≤ \(Int(OutboxBenchCommand.budgetEnqueueMs)) ms: \(enqueueWithinBudget ? "ok" : "FAILED")")
        lines.append("budget: encrypted \(OutboxBenchCommand.batchSize)-send median \(ms(batch[0].medianMs)) ms ≤ \(Int(OutboxBenchCommand.budgetBatchMs)) ms: \(batchWithinBudget ? "ok" : "FAILED")")
        lines.append(withinBudget ? "within budget" : "NOT within budget: " + failures.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }

    private func ms(_ value: Double) -> String { String(format: abs(value) < 10 ? "%.3f" : "%.1f", value) }
    private func rate(_ value: Double) -> String { value.isFinite ? String(format: "%.0f", value) : "-" }
}
