// A libFuzzer target over the engine's whole ingest path (C23): a fuzzed server page goes through
// the public read API of a real OfflineVault over a real SQLite cache (plaintext, for speed; the
// rows are the same), is decoded, written through and read back from the cache.
//
// Built by Scripts/fuzz-wire against the ChatVault, VaultStore and VaultKeys modules, which it
// first builds with SwiftPM (`-sanitize=fuzzer`, scratch path .build/fuzz-wire/spm). Nothing here
// may trap on any input except the checks below, each a broken C23 promise:
//
// - a page is accepted or refused as a whole, with `ERROR_INVALID_SERVER_RESPONSE`; never a trap
//   while decoding, writing through, or reading back;
// - every message of an accepted page reads back from the cache (`getMessageDetails`, offline).
//
// - a catch-up sweep over a fuzzed change log never traps; its page is applied or refused as a
//   whole, and every message the sweep reports reads back from the cache.
//
// Input: the first byte, modulo 5, picks the read (a message page, a conversation page, a thread
// page, one message) or a catch-up sweep (4: each item an upserted message of one change-log
// page); the rest is JSON text: an item, or a list of items (a page). It shares the seeds of
// wire-fuzz, whose first byte picks the entity in the same order.
import ChatVault
import Dispatch
import Foundation
import Synchronization
import VaultKeys

private func check(_ condition: Bool, _ promise: StaticString) {
    if !condition { fatalError("C23 broken: \(promise)") }
}

/// Serves whatever the current input says, once; everything else is unreachable.
final class FuzzBackend: ChatBackend {
    let page = Mutex<[JSONValue]>([])
    let online = Mutex(true)
    private let rest = UnreachableBackend()

    private func serve() throws(BackendError) -> WirePage {
        guard online.withLock({ $0 }) else { throw .unreachable }
        return WirePage(items: page.withLock { $0 }, nextCursor: nil)
    }

    func login(userId: String) async throws(BackendError) -> BackendSession {
        BackendSession(user: ["uid": .string(userId), "name": "Me"], serverTime: 1_700_000_000)
    }
    func logout() async {}
    func messages(_ query: MessageQuery) async throws(BackendError) -> WirePage { try serve() }
    func threads(_ query: ThreadQuery) async throws(BackendError) -> WirePage { try serve() }
    func conversations(_ query: ConversationQuery) async throws(BackendError) -> WirePage { try serve() }
    func users(_ query: UserQuery) async throws(BackendError) -> WirePage { try serve() }
    func blockedUsers(_ query: BlockedUserQuery) async throws(BackendError) -> WirePage { WirePage(items: [], nextCursor: nil) }
    func groups(_ query: GroupQuery) async throws(BackendError) -> WirePage { try serve() }
    func groupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage { try serve() }
    func bannedGroupMembers(_ query: GroupMemberQuery) async throws(BackendError) -> WirePage { try serve() }
    func reactions(_ query: ReactionQuery) async throws(BackendError) -> WirePage { try serve() }
    func notificationFeed(_ query: FeedQuery) async throws(BackendError) -> WirePage { try serve() }
    func message(id: Int) async throws(BackendError) -> JSONValue {
        guard let first = try serve().items.first else { throw .server(status: 404, code: "ERR_NOT_FOUND", message: "") }
        return first
    }
    func conversation(with id: String, type: ConversationType) async throws(BackendError) -> JSONValue {
        guard let first = try serve().items.first else { throw .server(status: 404, code: "ERR_NOT_FOUND", message: "") }
        return first
    }
    func send(_ message: JSONValue, localMessageId: String) async throws(BackendError) -> JSONValue { try await rest.send(message, localMessageId: localMessageId) }
    func editMessage(id: Int, changes: JSONValue) async throws(BackendError) -> JSONValue { try await rest.editMessage(id: id, changes: changes) }
    func deleteMessage(id: Int) async throws(BackendError) -> JSONValue { try await rest.deleteMessage(id: id) }
    func addReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue { try await rest.addReaction(messageId: messageId, reaction: reaction) }
    func removeReaction(messageId: Int, reaction: String) async throws(BackendError) -> JSONValue { try await rest.removeReaction(messageId: messageId, reaction: reaction) }
    func uploadMedia(path: String, name: String, mimeType: String) async throws(BackendError) -> JSONValue { try await rest.uploadMedia(path: path, name: name, mimeType: mimeType) }
    func blockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] { try await rest.blockUsers(uids) }
    func unblockUsers(_ uids: [String]) async throws(BackendError) -> [String: Bool] { try await rest.unblockUsers(uids) }
    /// The input's items as a change log page (each an upserted message), after any sync point.
    func changes(since token: String?, limit: Int) async throws(BackendError) -> ChangeLogPage {
        guard online.withLock({ $0 }) else { throw .unreachable }
        return ChangeLogPage(changes: page.withLock { $0 }.map { .messageUpserted($0) }, nextToken: "fuzz-1", serverTime: 1_700_000_001,
                             hasMore: false)
    }
    func latestSyncPoint() async throws(BackendError) -> ChangeLogPage {
        ChangeLogPage(changes: [], nextToken: "fuzz-0", serverTime: 1_700_000_000, hasMore: false)
    }
    func downloadMedia(url: String) async throws(BackendError) -> MediaStream { try await rest.downloadMedia(url: url) }
    func resignMediaURL(_ url: String, messageId: Int) async throws(BackendError) -> String { try await rest.resignMediaURL(url, messageId: messageId) }
    func connect() async throws(BackendError) { throw .unreachable }
    func disconnect() async {}
    var events: AsyncStream<RealtimeEvent> { AsyncStream { $0.finish() } }
}

/// Runs `body` on the cooperative pool and waits for it (libFuzzer calls in synchronously).
private func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let result = Mutex<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        let value = await body()
        result.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLock { $0 }!
}

/// Pages accepted and refused, printed when the run ends (a run that accepts nothing tests little).
private let tally = Mutex((accepted: 0, refused: 0, readBack: 0))

private func count(_ accepted: Bool) {
    tally.withLock { if accepted { $0.accepted += 1 } else { $0.refused += 1 } }
}

private let backend = FuzzBackend()
private let vault: OfflineVault = {
    // Under the directory Scripts/fuzz-wire runs in (.build/fuzz-wire/), removed by the script.
    let root = FileManager.default.currentDirectoryPath + "/ingest-cache-\(getpid())"
    try? FileManager.default.removeItem(atPath: root)
    atexit {
        let t = tally.withLock { $0 }
        FileHandle.standardError.write(Data("ingest-fuzz: \(t.accepted) pages accepted (\(t.readBack) messages read back from the cache), \(t.refused) refused\n".utf8))
    }
    var settings = VaultSettings(applicationId: "org.chatvault.fuzz", rootDirectory: root, keyStorage: [.custom(MemoryKeyStore())],
                                 callbackExecutor: .queue(DispatchQueue(label: "fuzz.callbacks")), retry: .manualOnly)
    settings.sync.forceCooldown = .zero
    let config = OfflineConfig.Builder().setEnabled(true).setEncryption(false).build()
    do {
        let vault = try OfflineVault(config: config, settings: settings, backend: backend)
        _ = blocking { await vault.login(userId: "alice") }
        return vault
    } catch {
        fatalError("the fuzz vault did not open")
    }
}()

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func ingestFuzzTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1, let value = try? JSONValue(jsonData: Data(UnsafeBufferPointer(start: data + 1, count: size - 1))) else { return 0 }
    let items = value.arrayValue ?? [value]
    let vault = vault
    backend.page.withLock { $0 = items }
    backend.online.withLock { $0 = true }
    let invalid = "ERROR_INVALID_SERVER_RESPONSE"
    switch data[0] % 5 {
    case 0:
        // A message page, then each accepted message read back from the cache alone.
        let peer = items.first?["receiver"]?.stringValue ?? "bob"
        let result = blocking {
            await MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: peer.isEmpty ? "bob" : peer).build().fetchPrevious()
        }
        switch result.server {
        case .success(let messages):
            count(true)
            backend.online.withLock { $0 = false }
            for message in messages {
                let id = message.id
                let readBack = blocking { await vault.getMessageDetails(id) }
                check(readBack.cached?.id == id, "an accepted message does not read back from the cache")
                tally.withLock { $0.readBack += 1 }
            }
        case .failure(let error):
            count(false)
            check(error.errorCode == invalid || items.count > 1000 || items.isEmpty, "a page refused with an unexpected error")
        }
    case 1:
        let result = blocking { await ConversationRequest.ConversationRequestBuilder(limit: 30, vault: vault).build().fetchNext() }
        backend.online.withLock { $0 = false }
        count(result.server.isSuccess)
        if case .success = result.server {
            _ = blocking { await ConversationRequest.ConversationRequestBuilder(limit: 30, vault: vault).build().fetchNext() }
        }
    case 2:
        let result = blocking { await ThreadsRequest.ThreadsRequestBuilder(vault: vault).build().fetchNext() }
        backend.online.withLock { $0 = false }
        count(result.server.isSuccess)
        if case .success = result.server {
            _ = blocking { await ThreadsRequest.ThreadsRequestBuilder(vault: vault).build().fetchNext() }
        }
    case 4:
        // The first sweep only sets the sync point; later ones replay the fuzzed page.
        let report = blocking { () -> SyncReport? in try? await vault.syncNow() }
        check(report != nil, "a forced sweep was refused")
        if let report, report.messageError == nil {
            count(true)
            backend.online.withLock { $0 = false }
            for message in report.messages {
                let id = message.id
                let readBack = blocking { await vault.getMessageDetails(id) }
                check(readBack.cached?.id == id, "a synced message does not read back from the cache")
                tally.withLock { $0.readBack += 1 }
            }
        } else {
            count(false)
            check(report?.messageError?.errorCode == invalid, "a change log refused with an unexpected error")
        }
    default:
        let id = items.first?["id"]?.intValue.map { Int(clamping: $0) } ?? 1
        let result = blocking { await vault.getMessageDetails(id) }
        count(result.server.isSuccess)
        if case .success(let message?) = result.server {
            backend.online.withLock { $0 = false }
            let readBack = blocking { await vault.getMessageDetails(message.id) }
            check(readBack.cached?.id == message.id, "an accepted message does not read back from the cache")
            tally.withLock { $0.readBack += 1 }
        }
    }
    return 0
}
