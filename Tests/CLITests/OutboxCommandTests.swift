import ChatVault
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import VaultKeys
import VaultStore
import XCTest

/// `chatvault outbox`: the unsent outbox of a cache an engine filled in this process (then logged
/// out of, releasing the lock), listed by the built binary with the Secret Service of the test
/// session, as `open` and `seed` use it.
final class OutboxCommandTests: XCTestCase {
    let app = "org.chatvault.clitests.outbox"
    /// In every text, caption, custom data, metadata, file name and file body: never printed.
    let marker = "CANARY-OUTBOX-5d1c9e"

    override func tearDown() {
        _ = try? SecretServiceKeyStore().deleteAll(applicationId: app)
        super.tearDown()
    }

    /// What the in-process engine queued, in compose order.
    struct Queued {
        var localId: String
        var conversationId: String
        var kind: String
        var state: String
        var failureReason: String?
        var attempts: Int
        var files: Int
        var fileBytes: Int
    }

    /// Queues six messages for "olive": one refused by the server (failed, permanent), one that got
    /// no answer (pending, one attempt), then offline two texts, a media message with two files and a
    /// custom message (pending). Nothing else ever sends: no connection is ever judged stable.
    func fillOutbox(root: String) async throws -> (queued: [Queued], composed: ClosedRange<Int64>) {
        let simulator = ChatVaultSimulator(seed: 5)
        try simulator.addUsers("olive", "pete", "quinn")
        let device = simulator.client(for: "olive")
        var settings = VaultSettings(applicationId: app, rootDirectory: root, callbackExecutor: .queue(DispatchQueue(label: "outbox-tests")))
        settings.stableConnectionDelay = .seconds(3600)
        settings.reconnect = RetryPolicy(initialDelay: .seconds(3600), maximumDelay: .seconds(3600))
        let vault = try OfflineVault(config: OfflineConfig.Builder().setEnabled(true).setEncryption(true).build(), settings: settings,
                                     backend: device)
        let attempt = await vault.login(userId: "olive")
        XCTAssertEqual(attempt.state, .ready)
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        let withPete = ChatVaultSimulator.conversationId(between: "olive", and: "pete")
        let withQuinn = ChatVaultSimulator.conversationId(between: "olive", and: "quinn")

        /// Sends `message`; returns its local id once `settled` holds for what its closures saw.
        func send(_ message: BaseMessage, until settled: @escaping @Sendable ([String]) -> Bool) async throws -> String {
            let seen = Box<[String]>([])
            let localId = Box<String?>(nil)
            let record: @Sendable (String) -> Void = { event in seen.withLock { $0.append(event) } }
            let onPending: @Sendable (BaseMessage) -> Void = { m in
                localId.withLock { $0 = m.localMessageId }
                record("pending")
            }
            switch message {
            case let text as TextMessage:
                vault.sendTextMessage(message: text, onMessagePending: onPending, onMessageSent: { _ in record("sent") },
                                      onError: { e in record(e?.errorCode ?? "nil") })
            case let media as MediaMessage:
                vault.sendMediaMessage(message: media, onMessagePending: onPending, onMessageSent: { _ in record("sent") },
                                       onError: { e in record(e?.errorCode ?? "nil") })
            case let custom as CustomMessage:
                vault.sendCustomMessage(message: custom, onMessagePending: onPending, onMessageSent: { _ in record("sent") },
                                        onError: { e in record(e?.errorCode ?? "nil") })
            default:
                XCTFail("unexpected message type")
            }
            let deadline = Date().addingTimeInterval(10)
            while !settled(seen.withLock { $0 }) {
                guard Date() < deadline else {
                    XCTFail("the send did not settle: \(seen.withLock { $0 })")
                    break
                }
                try await Task.sleep(for: .milliseconds(2))
            }
            return try XCTUnwrap(localId.withLock { $0 })
        }

        var queued: [Queued] = []
        // Refused by the server: failed, permanent.
        device.failNext(.send, with: .status(400, code: "ERR_INVALID_MESSAGE"))
        let refused = try await send(TextMessage(receiverUid: "quinn", text: "refused \(marker)", receiverType: .user)) { $0.contains("ERR_INVALID_MESSAGE") }
        queued.append(Queued(localId: refused, conversationId: withQuinn, kind: "text", state: "failed", failureReason: "permanent", attempts: 0,
                             files: 0, fileBytes: 0))
        // No answer once: still pending, one attempt counted. Then the device goes offline.
        device.failNext(.send, with: .timeout)
        let unanswered = try await send(TextMessage(receiverUid: "pete", text: "unanswered \(marker)", receiverType: .user)) {
            $0.contains(CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
        }
        device.network = .offline
        queued.append(Queued(localId: unanswered, conversationId: withPete, kind: "text", state: "pending", failureReason: nil, attempts: 1,
                             files: 0, fileBytes: 0))
        let isQueued: @Sendable ([String]) -> Bool = { $0.contains(CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE) }
        for i in 1...2 {
            let text = TextMessage(receiverUid: "pete", text: "offline \(i) \(marker)", receiverType: .user)
            text.metaData = .object(["note": .string(marker)])
            queued.append(Queued(localId: try await send(text, until: isQueued), conversationId: withPete, kind: "text", state: "pending",
                                 failureReason: nil, attempts: 0, files: 0, fileBytes: 0))
        }
        let files = TemporaryDirectory()
        var urls: [URL] = []
        for (name, size) in [("photo-\(marker).jpg", 1000), ("notes-\(marker).txt", 234)] {
            let path = "\(files.path)/\(name)"
            var body = Data(marker.utf8)
            body.append(Data(repeating: 0x41, count: size - body.count))
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: body))
            urls.append(URL(fileURLWithPath: path))
        }
        let media = MediaMessage(receiverUid: "pete", files: urls, messageType: .file, receiverType: .user)
        media.caption = "caption \(marker)"
        queued.append(Queued(localId: try await send(media, until: isQueued), conversationId: withPete, kind: "media", state: "pending",
                             failureReason: nil, attempts: 0, files: 2, fileBytes: 1234))
        let custom = CustomMessage(receiverUid: "pete", receiverType: .user, customData: .object(["secret": .string(marker)]), type: "location")
        queued.append(Queued(localId: try await send(custom, until: isQueued), conversationId: withPete, kind: "custom", state: "pending",
                             failureReason: nil, attempts: 0, files: 0, fileBytes: 0))
        let after = Int64(Date().timeIntervalSince1970 * 1000)
        await vault.logout()
        return (queued, before...after)
    }

    func testListsEveryUnsentMessageWithItsBookkeepingAndNoContent() async throws {
        let dir = TemporaryDirectory()
        let (queued, composed) = try await fillOutbox(root: dir.path)

        let run = try CLI.run(["outbox", "--dir", dir.path, "--user", "olive", "--app", app, "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let report = try run.json()
        XCTAssertNotNil(report["cacheId"] as? String)
        XCTAssertEqual(report["encrypted"] as? Bool, true)
        XCTAssertEqual((report["resets"] as? [Any])?.count, 0)
        XCTAssertEqual(report["count"] as? Int, 6)
        XCTAssertEqual(report["pending"] as? Int, 5)
        XCTAssertEqual(report["failed"] as? Int, 1)
        let messages = try XCTUnwrap(report["messages"] as? [[String: Any]])
        XCTAssertEqual(messages.count, queued.count)
        for (listed, expected) in zip(messages, queued) {
            XCTAssertEqual(Set(listed.keys), ["localId", "conversationId", "kind", "state", "failureReason", "attempts", "composedAt",
                                              "composedAtMs", "files", "fileBytes"])
            XCTAssertEqual(listed["localId"] as? String, expected.localId)
            XCTAssertEqual(listed["conversationId"] as? String, expected.conversationId)
            XCTAssertEqual(listed["kind"] as? String, expected.kind)
            XCTAssertEqual(listed["state"] as? String, expected.state, expected.localId)
            XCTAssertEqual(listed["failureReason"] as? String, expected.failureReason, expected.localId)
            if expected.failureReason == nil { XCTAssertTrue(listed["failureReason"] is NSNull) }
            XCTAssertEqual(listed["attempts"] as? Int, expected.attempts, expected.localId)
            XCTAssertEqual(listed["files"] as? Int, expected.files)
            XCTAssertEqual(listed["fileBytes"] as? Int, expected.fileBytes)
            let ms = try XCTUnwrap(listed["composedAtMs"] as? Int)
            XCTAssertTrue(composed.contains(Int64(ms)), "composed at \(ms), outside \(composed)")
            let iso = ISO8601DateFormatter()
            iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let date = try XCTUnwrap(iso.date(from: listed["composedAt"] as? String ?? ""), "composedAt is not ISO 8601")
            XCTAssertEqual(Int64((date.timeIntervalSince1970 * 1000).rounded()), Int64(ms))
        }

        // The table: a header, one line per message, the summary; the same content rules.
        let table = try CLI.run(["outbox", "--dir", dir.path, "--user", "olive", "--app", app])
        XCTAssertEqual(table.status, 0, table.stderr)
        XCTAssertTrue(table.stdout.contains("6 unsent (5 pending, 1 failed)"), table.stdout)
        for header in ["local id", "conversation", "kind", "state", "reason", "attempts", "composed at", "files", "bytes"] {
            XCTAssertTrue(table.stdout.contains(header), "no '\(header)' column:\n\(table.stdout)")
        }
        for expected in queued { XCTAssertTrue(table.stdout.contains(expected.localId), "\(expected.localId) missing:\n\(table.stdout)") }
        XCTAssertTrue(table.stdout.contains("permanent"))
        XCTAssertTrue(table.stdout.contains("1234"))

        // Never any content: texts, caption, metadata, custom data, file names (and file bodies).
        for output in [run, table] {
            XCTAssertFalse((output.stdout + output.stderr).contains(marker), "message content printed:\n\(output.stdout)\(output.stderr)")
            XCTAssertFalse((output.stdout + output.stderr).contains(".jpg"), "a file name printed")
        }
        // Nor the key.
        let cacheId = try XCTUnwrap(report["cacheId"] as? String)
        let itemId = KeyItemID(applicationId: app, account: CacheDirectory.account(applicationId: app, userId: "olive"), cacheId: cacheId)
        guard case .found(let key, _) = SecretServiceKeyStore().lookup(itemId) else { return XCTFail("no key item") }
        let hex = key.withHexDigits { String(decoding: $0, as: UTF8.self) }
        for output in [run, table] { XCTAssertFalse((output.stdout + output.stderr).lowercased().contains(hex.prefix(16).lowercased())) }

        // Listing changes nothing: a second listing is identical, and the engine still has them all.
        let again = try CLI.run(["outbox", "--dir", dir.path, "--user", "olive", "--app", app, "--json"])
        XCTAssertEqual(again.stdout, run.stdout)
    }

    func testAnEmptyOutboxAndSeededRows() async throws {
        let dir = TemporaryDirectory()
        XCTAssertEqual(try CLI.run(["seed", "--dir", dir.path, "--user", "rita", "--messages", "5", "--app", app]).status, 0)
        let empty = try CLI.run(["outbox", "--dir", dir.path, "--user", "rita", "--app", app, "--json"])
        XCTAssertEqual(empty.status, 0, empty.stderr)
        XCTAssertEqual(try empty.json()["count"] as? Int, 0)
        XCTAssertEqual((try empty.json()["messages"] as? [Any])?.count, 0)
        let table = try CLI.run(["outbox", "--dir", dir.path, "--user", "rita", "--app", app])
        XCTAssertTrue(table.stdout.contains(": empty"), table.stdout)

        XCTAssertEqual(try CLI.run(["seed", "--dir", dir.path, "--user", "rita", "--messages", "0", "--pending", "3", "--marker", marker,
                                    "--app", app]).status, 0)
        let seeded = try CLI.run(["outbox", "--dir", dir.path, "--user", "rita", "--app", app, "--json"])
        XCTAssertEqual(seeded.status, 0, seeded.stderr)
        let messages = try XCTUnwrap(try seeded.json()["messages"] as? [[String: Any]])
        XCTAssertEqual(messages.map { $0["state"] as? String }, ["pending", "pending", "pending"])
        XCTAssertEqual(messages.map { $0["kind"] as? String }, ["text", "text", "text"])
        XCTAssertFalse((seeded.stdout + seeded.stderr).contains(marker))

        // Seeded as an app would: the engine lists the rows as its own unsent messages.
        let vault = try OfflineVault(config: OfflineConfig.Builder().setEnabled(true).setEncryption(true).build(),
                                     settings: VaultSettings(applicationId: app, rootDirectory: dir.path, callbackExecutor: .queue(DispatchQueue(label: "t"))))
        _ = await vault.login(userId: "rita")
        let unsent = try await vault.pendingMessages()
        await vault.logout()
        XCTAssertEqual(unsent.compactMap { ($0 as? TextMessage)?.text }, (0..<3).map { "Unsent \($0): \(marker)" })
        XCTAssertEqual(unsent.map(\.messageStatus), [.pending, .pending, .pending])
    }

    func testACacheThatCannotOpenIsExitOneAndNothingIsCreated() async throws {
        let dir = TemporaryDirectory()
        // No cache at all: an error, and no cache is created for the asking.
        let none = try CLI.run(["outbox", "--dir", dir.path, "--user", "sam", "--app", app])
        XCTAssertEqual(none.status, 1)
        XCTAssertTrue(none.stderr.contains("no cache found"), none.stderr)
        XCTAssertEqual(none.stdout, "")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir.path), [])

        // Held by another process (this one): unavailable (cacheInUse), exit 1, one line.
        XCTAssertEqual(try CLI.run(["seed", "--dir", dir.path, "--user", "sam", "--messages", "3", "--app", app]).status, 0)
        let vault = try OfflineVault(config: OfflineConfig.Builder().setEnabled(true).setEncryption(true).build(),
                                     settings: VaultSettings(applicationId: app, rootDirectory: dir.path, callbackExecutor: .queue(DispatchQueue(label: "t"))))
        let held = await vault.login(userId: "sam")
        XCTAssertEqual(held.state, .ready)
        let busy = try CLI.run(["outbox", "--dir", dir.path, "--user", "sam", "--app", app, "--json"])
        await vault.logout()
        XCTAssertEqual(busy.status, 1)
        XCTAssertTrue(busy.stderr.contains("cannot list the outbox") && busy.stderr.contains("cacheInUse"), busy.stderr)
        XCTAssertEqual(busy.stderr.split(separator: "\n").count, 1, busy.stderr)
        XCTAssertEqual(busy.stdout, "")

        // Without its Secret Service: unavailable, not reset.
        let noBus = try CLI.run(["outbox", "--dir", dir.path, "--user", "sam", "--app", app],
                                environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(dir.path)/none"])
        XCTAssertEqual(noBus.status, 1)
        XCTAssertTrue(noBus.stderr.contains("keyStoreMissing"), noBus.stderr)
        XCTAssertEqual(try CLI.run(["open", "--dir", dir.path, "--user", "sam", "--app", app, "--json"]).json()["messages"] as? Int, 3)

        // Usage errors: exit 2.
        for args in [["outbox", "--dir", dir.path], ["outbox", "--user", "sam"], ["outbox", "--dir", dir.path, "--user", "sam", "--colour", "red"],
                     ["outbox", "--dir", dir.path, "--user", "sam", "--keystore", "nowhere"]] {
            let run = try CLI.run(args + ["--app", app])
            XCTAssertEqual(run.status, 2, args.joined(separator: " "))
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
        }
    }
}

/// A value shared with callbacks.
final class Box<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) {
        mutex = Mutex(value)
    }

    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R {
        mutex.withLock { body(&$0) }
    }
}
