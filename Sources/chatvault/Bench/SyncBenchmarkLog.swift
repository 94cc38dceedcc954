import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// The change log `chatvault bench sync` replays: synthetic messages in sync order, rendered in the
/// shape the simulator's change log renders them (`ServerState.renderMessage`: the sender as a user
/// object, the receiver as a uid or guid, receipts from the viewer's side, `parentId` on thread
/// replies, tags, mentions), built one page at a time so the whole log is never held.
///
/// Message `i` (1-based, its server id) belongs to conversation `i % conversations` … mixed by a
/// fixed permutation so consecutive messages land in different conversations; the first fifth of
/// the conversations are groups of five members (the benchmark user among them), the rest
/// one-to-one. Senders: in a one-to-one conversation every third message is the benchmark user's
/// own, the others the peer's; in a group the members take turns. Every 13th message is a thread
/// reply to its conversation's latest top-level message; four messages share a second.
struct SyncBenchLog {
    /// The user the caches belong to.
    static let me = "bench-me"
    let conversations: Int

    init(conversations: Int = 100) {
        self.conversations = conversations
    }

    /// The page holding messages `first ..< first + count` (1-based ids), as the server sends it.
    func page(from first: Int, count: Int, hasMore: Bool) -> ChangeLogPage {
        let changes = (first..<(first + count)).map { ChangeLogEntry.messageUpserted(message($0)) }
        let last = first + count - 1
        return ChangeLogPage(changes: changes, nextToken: "bench-\(last)", serverTime: Int64(Self.sentAt(last)), hasMore: hasMore)
    }

    static func sentAt(_ i: Int) -> Int { 1_700_000_000 + i / 4 }

    /// The conversation of message `i`.
    func conversation(of i: Int) -> Int { (i &* 37 &+ i / conversations) % conversations }

    func isGroup(_ c: Int) -> Bool { c < conversations / 5 }

    static func peer(_ c: Int) -> String { String(format: "bench-peer-%04d", c) }
    static func group(_ c: Int) -> String { String(format: "bench-group-%04d", c) }
    static func member(_ c: Int, _ k: Int) -> String { k == 0 ? me : String(format: "bench-member-%04d-%d", c, k) }

    func conversationId(_ c: Int) -> String {
        (isGroup(c) ? ConversationID.group(Self.group(c)) : ConversationID.direct(Self.me, Self.peer(c))).rawValue
    }

    /// Message `i` rendered for the benchmark user.
    func message(_ i: Int) -> JSONValue {
        let c = conversation(of: i)
        let group = isGroup(c)
        let sender: String
        let receiver: String
        if group {
            sender = Self.member(c, i % 5)
            receiver = Self.group(c)
        } else {
            sender = i % 3 == 0 ? Self.me : Self.peer(c)
            receiver = sender == Self.me ? Self.peer(c) : Self.me
        }
        let mine = sender == Self.me
        let sentAt = Self.sentAt(i)
        var fields: [String: JSONValue] = [
            "id": .int(Int64(i)),
            "conversationId": .string(conversationId(c)),
            "sender": Self.user(sender),
            "receiver": .string(receiver),
            "receiverType": .string(group ? "group" : "user"),
            "category": "message",
            "type": "text",
            "sentAt": .int(Int64(sentAt)),
            "updatedAt": .int(Int64(sentAt)),
            "data": .object(["text": .string(Self.body(i))]),
            "muid": .string("bench-muid-\(i)"),
        ]
        if mine {
            fields["deliveredAt"] = .int(Int64(sentAt + 1))
            if i % 2 == 0 { fields["readAt"] = .int(Int64(sentAt + 2)) }
        } else {
            fields["deliveredToMeAt"] = .int(Int64(sentAt + 1))
            if i % 5 != 0 { fields["readByMeAt"] = .int(Int64(sentAt + 2)) }
        }
        // A thread reply to the conversation's previous top-level message (one `conversations`
        // messages earlier in the permutation is always in the same conversation's past).
        if i % 13 == 0, i > 2 * conversations {
            var parent = i - 1
            while parent > 0, conversation(of: parent) != c || parent % 13 == 0 { parent -= 1 }
            if parent > 0 { fields["parentId"] = .int(Int64(parent)) }
        }
        if i % 7 == 0 { fields["tags"] = ["bench", "synthetic"] }
        if i % 11 == 0 {
            let mentioned = mine ? (group ? Self.member(c, 1) : Self.peer(c)) : Self.me
            fields["mentionedUsers"] = .array([Self.user(mentioned)])
            fields["mentionedMe"] = .bool(mentioned == Self.me)
        }
        return .object(fields)
    }

    /// A user as the read benchmark's fixture renders one.
    static func user(_ uid: String) -> JSONValue {
        ReadBenchFixture.user(uid)
    }

    /// 40 to 220 characters of filler text (ASCII), as `bench reads` writes.
    static func body(_ i: Int) -> String { ReadBenchFixture.body(i) }
}

/// One cache `chatvault bench sync` writes into: a real ChatVault cache opened by an `OfflineVault`
/// with no server (`UnreachableBackend`), encrypted (SQLCipher, raw 256-bit key from a memory key
/// store) or not (`encryption: false`), as `bench reads` opens its caches.
struct SyncBenchCache {
    let vault: OfflineVault
    let cache: VaultCache

    static func open(_ id: String, root: String, encryption: Bool) async throws -> SyncBenchCache {
        let (vault, cache) = try await openBenchVault(id, root: root, encryption: encryption, user: SyncBenchLog.me)
        return SyncBenchCache(vault: vault, cache: cache)
    }

    func close() async {
        await vault.logout()
    }

    /// Writes one page as the sync engine does (parse, apply, advance, one transaction); returns
    /// the milliseconds it took, from the parse to the commit.
    func ingest(_ page: ChangeLogPage) throws -> Double {
        let limits = vault.wireLimits
        let clock = ContinuousClock()
        let start = clock.now
        let counts = try cache.writer.sync { db in
            try db.transaction { try SyncPageRows.ingest(page, me: SyncBenchLog.me, limits: limits, in: db) }
        }
        let elapsed = (clock.now - start).milliseconds
        guard counts.inserted == page.changes.count, counts.dropped == 0 else {
            throw CLIError.failure("a page of \(page.changes.count) changes inserted \(counts.inserted) messages (\(counts.dropped) dropped)")
        }
        return elapsed
    }

    /// Writes one page parsed beforehand (`SyncPageRows.prepare`, done off the writer as the
    /// engine does while the page before is written): apply and advance in one transaction.
    func write(_ prepared: SyncPageRows.PreparedPage, changes: Int) throws {
        let limits = vault.wireLimits
        let counts = try cache.writer.sync { db in
            try db.transaction { try SyncPageRows.write(prepared, me: SyncBenchLog.me, limits: limits, in: db) }
        }
        guard counts.inserted == changes, counts.dropped == 0 else {
            throw CLIError.failure("a page of \(changes) changes inserted \(counts.inserted) messages (\(counts.dropped) dropped)")
        }
    }

    var limits: WireLimits { vault.wireLimits }

    /// SQLite's own rate for these rows: the cache's `messages` rows (same columns and payloads)
    /// copied into an in-memory temporary table (not timed), then inserted back under new server
    /// ids (all indexes), in the order they arrived, each into its conversation's cluster as the
    /// ingest places it (schema 4: its old key plus 2^31, the same cluster), one `INSERT … SELECT`
    /// and commit per `pageSize` rows. No Swift code runs per row and nothing is read from the
    /// file, so no ingest path can beat it.
    func copyRate(messages: Int, pageSize: Int) throws -> Double {
        let columns = "conversation_id, parent_id, sender_id, receiver_id, receiver_type, category, type, sent_at, updated_at, deleted_at, status, source, flags, payload"
        let sql = "INSERT INTO messages (row_id, \(columns), server_id) SELECT old_key + 2147483648, \(columns), server_id + ? FROM temp.bench_rows WHERE rowid BETWEEN ? AND ?"
        let clock = ContinuousClock()
        let seconds = try cache.writer.sync { db in
            try db.execute("CREATE TEMP TABLE bench_rows AS SELECT row_id AS old_key, \(columns), server_id FROM messages ORDER BY server_id")
            defer { try? db.execute("DROP TABLE temp.bench_rows") }
            let offset = try db.scalarInt("SELECT max(server_id) FROM messages") ?? 0
            let start = clock.now
            var low = 1
            while low <= messages {
                let high = min(low + pageSize, messages + 1) - 1
                try db.transaction { try db.run(sql, .int(offset), .int(Int64(low)), .int(Int64(high))) }
                low = high + 1
            }
            return (clock.now - start).milliseconds / 1_000
        }
        let held = try messageCount()
        guard held == 2 * messages else { throw CLIError.failure("the copy left \(held) messages, not \(2 * messages)") }
        return Double(messages) / seconds
    }

    func messageCount() throws -> Int {
        try cache.reader.sync { db in Int(try db.scalarInt("SELECT count(*) FROM messages") ?? 0) }
    }
}

/// The process's resident memory, from /proc/self/status (Linux), in KiB.
enum ResidentMemory {
    /// `VmRSS` and `VmHWM` (the peak since the process started or since `resetPeak`).
    static func read() -> (rssKiB: Int, peakKiB: Int)? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        var rss: Int?
        var peak: Int?
        for line in status.split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard parts.count >= 2 else { continue }
            if parts[0] == "VmRSS:" { rss = Int(parts[1]) }
            if parts[0] == "VmHWM:" { peak = Int(parts[1]) }
        }
        guard let rss, let peak else { return nil }
        return (rss, peak)
    }

    /// Resets `VmHWM` to the current RSS (`echo 5 > /proc/self/clear_refs`); false when refused.
    static func resetPeak() -> Bool {
        guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
        defer { try? handle.close() }
        return (try? handle.write(contentsOf: Data("5".utf8))) != nil
    }
}
