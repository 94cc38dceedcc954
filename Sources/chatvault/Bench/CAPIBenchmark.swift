import CChatVault
import ChatVault
import ChatVaultC
import ChatVaultSimulator
import Foundation
import VaultKeys

/// `chatvault bench capi [--runs N] [--json]`: the C ABI's cost beside the Swift API, in one run:
/// a cached 30-message page (offline: the cached phase, then the offline answer) through
/// `cv_vault_fetch_messages_sync` (models encoded as JSON text) and through `MessagesRequest`;
/// and a durable enqueue (until the pending callback) through `cv_vault_send_text` (dispatched on
/// this thread) and `sendTextMessage`. Alternating A B A B; medians; the budget is C / Swift ≤ 1.25.
/// The C layer's share (JSON encoding, the handle table, the dispatch) is the difference.
enum CAPIBenchCommand {
    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let runs = try args.int("runs", default: 200, range: 5...100_000)
        let json = args.flag("json")
        try args.rejectUnknown()

        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chatvault-bench-capi-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: root) }

        // The Swift side: its own simulator (same seed, same messages) and vault.
        let simulator = ChatVaultSimulator(seed: 21)
        try simulator.addUsers("alice", "bob")
        for i in 0..<30 { try simulator.postText("message \(i)", from: "bob", to: .user("alice")) }
        let client = simulator.client(for: "alice")
        let config = OfflineConfig.Builder().setEnabled(true).setEncryption(true).setMaxPendingMessages(100).build()
        let callbacks = DispatchQueue(label: "chatvault.bench.capi")
        let settings = VaultSettings(applicationId: "org.chatvault.benchcapi", rootDirectory: root + "/swift",
                                     keyStorage: [.custom(MemoryKeyStore())], callbackExecutor: .queue(callbacks))
        let vault = try OfflineVault(config: config, settings: settings, backend: client)
        _ = await vault.login(userId: "alice")
        _ = await MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: "bob").set(limit: 30).build().fetchPrevious()

        // The C side.
        let sim = cvSimulatorNew(21)
        defer { cvSimulatorFree(sim) }
        _ = cvSimulatorAddUser(sim, "alice", "Alice", nil)
        _ = cvSimulatorAddUser(sim, "bob", "Bob", nil)
        for i in 0..<30 { _ = cvSimulatorPostText(sim, "bob", CV_RECEIVER_USER, "alice", "message \(i)", nil, nil) }
        let cSettings = #"{"enabled": true, "encryption": true, "maxPendingMessages": 100, "applicationId": "org.chatvault.benchcapi", "rootDirectory": "\#(root)/c", "keyStore": "memory"}"#
        guard let cVault = cvVaultNewSimulated(cSettings, sim, "alice", nil) else { throw CLIError.failure("the C vault could not be made") }
        defer { cvVaultFree(cVault) }
        guard cvVaultLoginSync(cVault, "alice", nil, nil) == CV_OPEN_READY else { throw CLIError.failure("the C vault is not ready") }
        cv_free(cvVaultFetchMessagesSync(cVault, CV_RECEIVER_USER, "bob", 30, nil))

        // Offline: the cached phase and the offline answer, no server work.
        client.network = .offline
        _ = cvSimulatorSetOnline(sim, "alice", false, nil)
        var swiftPage: [Double] = [], cPage: [Double] = [], bytes = 0
        let clock = ContinuousClock()
        for _ in 0..<runs {
            var start = clock.now
            let page = await MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: "bob").set(limit: 30).build().fetchPrevious()
            swiftPage.append((clock.now - start).milliseconds)
            guard page.cached?.count == 30 else { throw CLIError.failure("the Swift cached page has \(page.cached?.count ?? 0) messages") }
            start = clock.now
            let text = cvVaultFetchMessagesSync(cVault, CV_RECEIVER_USER, "bob", 30, nil)
            cPage.append((clock.now - start).milliseconds)
            bytes = text.map { strlen($0) } ?? 0
            cv_free(text)
        }

        // The JSON encoding alone: the same page's models written as the C call writes them.
        let sample = await MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: "bob").set(limit: 30).build().fetchPrevious()
        var encode: [Double] = []
        for _ in 0..<runs {
            let start = clock.now
            let encoded = CModelsProbe.messagesPageJSON(sample)
            encode.append((clock.now - start).milliseconds)
            guard encoded > 1000 else { throw CLIError.failure("the page encoded to \(encoded) bytes") }
        }
        let encoding = TimingSummary(encode)

        // The C layer's fixed cost: a _sync call with nothing to encode (an empty outbox).
        var cEmpty: [Double] = []
        for _ in 0..<runs {
            let start = clock.now
            cv_free(cvVaultGetPendingMessagesSync(cVault, nil))
            cEmpty.append((clock.now - start).milliseconds)
        }
        let hop = TimingSummary(cEmpty)

        // Online: a durable enqueue, until the pending callback (the outbox drains meanwhile).
        client.network = .online
        _ = cvSimulatorSetOnline(sim, "alice", true, nil)
        var swiftSend: [Double] = [], cSend: [Double] = []
        for i in 0..<runs {
            let pending = DispatchSemaphore(value: 0)
            var start = clock.now
            vault.sendTextMessage(message: TextMessage(receiverUid: "bob", text: "bench \(i)", receiverType: .user),
                                  onMessagePending: { _ in pending.signal() }, onMessageSent: { _ in }, onError: { _ in })
            pending.wait()
            swiftSend.append((clock.now - start).milliseconds)
            start = clock.now
            CPending.seen = false
            _ = cvVaultSendText(cVault, CV_RECEIVER_USER, "bob", "bench \(i)", { stage, _, _, _ in
                if let stage, strcmp(stage, "pending") == 0 { CPending.seen = true }
            }, nil, nil, nil)
            while !CPending.seen {
                var entry = pollfd(fd: cvVaultGetFd(cVault), events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 5)
                _ = cvVaultDispatch(cVault)
            }
            cSend.append((clock.now - start).milliseconds)
            if i % 20 == 19 { try await Task.sleep(for: .milliseconds(50)) } // let both outboxes drain
        }
        await vault.logout()

        let page = (swift: TimingSummary(swiftPage), c: TimingSummary(cPage))
        let send = (swift: TimingSummary(swiftSend), c: TimingSummary(cSend))
        let pageRatio = page.c.medianMs / page.swift.medianMs
        let sendRatio = send.c.medianMs / send.swift.medianMs
        if json {
            let out: JSONValue = [
                "runs": .int(Int64(runs)),
                "cachedPage": ["swiftMedianMs": .double(page.swift.medianMs), "cMedianMs": .double(page.c.medianMs),
                               "ratio": .double(pageRatio), "jsonBytes": .int(Int64(bytes)),
                               "cLayerShare": .double(max(page.c.medianMs - page.swift.medianMs, 0) / page.c.medianMs)],
                "durableEnqueue": ["swiftMedianMs": .double(send.swift.medianMs), "cMedianMs": .double(send.c.medianMs),
                                   "ratio": .double(sendRatio)],
                "syncHopMedianMs": .double(hop.medianMs),
                "pageEncodingMedianMs": .double(encoding.medianMs),
                "floorRatio": .double(page.c.medianMs / (page.swift.medianMs + encoding.medianMs)),
                "budget": 1.25,
            ]
            print(String(decoding: out.jsonData(), as: UTF8.self))
        } else {
            print("bench capi: \(runs) runs each, alternating; medians (p90)")
            print(String(format: "  cached 30-message page  Swift %.3f ms (%.3f)  C %.3f ms (%.3f)  C/Swift %.2f  (JSON %d bytes; the C layer's share %.0f %%)",
                         page.swift.medianMs, page.swift.p90Ms, page.c.medianMs, page.c.p90Ms, pageRatio, bytes,
                         100 * max(page.c.medianMs - page.swift.medianMs, 0) / page.c.medianMs))
            print(String(format: "  durable enqueue         Swift %.3f ms (%.3f)  C %.3f ms (%.3f)  C/Swift %.2f",
                         send.swift.medianMs, send.swift.p90Ms, send.c.medianMs, send.c.p90Ms, sendRatio))
            print(String(format: "  a _sync call with nothing to encode (the wait and dispatch hop): %.3f ms", hop.medianMs))
            print(String(format: "  the page's JSON encoding alone: %.3f ms (%.0f %% of the C call); C / (Swift + encoding) %.2f: the rest is the thread hand-off back to the caller",
                         encoding.medianMs, 100 * encoding.medianMs / page.c.medianMs, page.c.medianMs / (page.swift.medianMs + encoding.medianMs)))
            print("  budget: C / Swift <= 1.25 for both: \(pageRatio <= 1.25 && sendRatio <= 1.25 ? "met" : "not met")")
        }
        return 0
    }
}

/// The C send callback's flag (the callback is a plain C function: no context captured).
enum CPending {
    nonisolated(unsafe) static var seen = false
}
