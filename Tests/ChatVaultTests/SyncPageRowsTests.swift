import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import XCTest
@testable import ChatVault
import VaultStore

/// `SyncPageRows.apply` writes a page of the change log as a batch (`SyncPageBatch`: one
/// conversation read and write per conversation per page). These tests hold it to the rows the
/// per-message path leaves (`RealtimeRows.apply(.received…, source: .sync)` for each change, as
/// the catch-up sync first wrote pages), on two real encrypted caches fed the same randomized log.
final class SyncPageRowsTests: XCTestCase {
    static let me = "alice"
    static let peers = ["bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
    static let groups = ["g-one", "g-two", "g-three"]
    static let base: Int64 = 1_700_000_000

    // MARK: - Support

    /// The same sequence on every run (the simulator's SplitMix64).
    struct Random {
        private var generator: SeededGenerator
        init(state: UInt64) { generator = SeededGenerator(seed: state) }
        mutating func next() -> UInt64 { generator.next() }
        mutating func int(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        mutating func chance(_ percent: Int) -> Bool { int(100) < percent }
    }

    /// The harnesses of the caches a test opened (their temporary directories live as long).
    var harnesses: [EngineHarness] = []

    /// A logged-in vault on a fresh encrypted cache in its own temporary directory.
    func openCache() async throws -> VaultCache {
        let harness = EngineHarness()
        harnesses.append(harness)
        let vault = try harness.vault(encryption: true)
        _ = await vault.login(userId: Self.me)
        addTeardownBlock { await vault.logout() }
        let cache = try XCTUnwrap(vault.openCache)
        XCTAssertTrue(cache.isEncrypted)
        return cache
    }

    static func conversationId(_ c: Int) -> String {
        c < peers.count ? [me, peers[c]].sorted().joined(separator: "_user_") : "group_\(groups[c - peers.count])"
    }

    static func user(_ uid: String) -> JSONValue {
        ["uid": .string(uid), "name": .string(uid.capitalized), "status": "offline"]
    }

    /// A message as the simulator's change log renders it for alice.
    static func message(id: Int, conversation c: Int, sender: String, sentAt: Int64, text: String, parentId: Int = 0,
                        read: Bool = false, mentionsMe: Bool = false, localId: String? = nil) -> [String: JSONValue] {
        let group = c >= peers.count
        let receiver = group ? groups[c - peers.count] : (sender == me ? peers[c] : me)
        var fields: [String: JSONValue] = [
            "id": .int(Int64(id)), "conversationId": .string(conversationId(c)), "sender": user(sender),
            "receiver": .string(receiver), "receiverType": .string(group ? "group" : "user"), "category": "message",
            "type": "text", "sentAt": .int(sentAt), "updatedAt": .int(sentAt), "data": ["text": .string(text)],
        ]
        if sender == me {
            fields["deliveredAt"] = .int(sentAt + 1)
        } else {
            fields["deliveredToMeAt"] = .int(sentAt + 1)
            if read { fields["readByMeAt"] = .int(sentAt + 2) }
        }
        if parentId != 0 { fields["parentId"] = .int(Int64(parentId)) }
        if mentionsMe {
            fields["mentionedUsers"] = .array([user(me)])
            fields["mentionedMe"] = true
        }
        if let localId { fields["localMessageId"] = .string(localId) }
        return fields
    }

    /// The same starting rows in a cache: conversation summaries the server wrote (one of them
    /// newer than part of the log), messages a read cached, two outbox rows, and a cached message
    /// holding a local id.
    func seed(_ cache: VaultCache) throws {
        let limits = WireLimits()
        let decoder = WireDecoder(limits: limits)
        try cache.writer.sync { db in
            try db.transaction {
                for c in [0, 1, 7] {
                    let last = Self.message(id: 50_000 + c, conversation: c, sender: Self.peers[c % Self.peers.count],
                                            sentAt: Self.base + 150, text: "summary \(c)")
                    let with: JSONValue = c < Self.peers.count ? Self.user(Self.peers[c]) : ["guid": .string(Self.groups[c - Self.peers.count])]
                    try RealtimeRows.write([
                        "conversationId": .string(Self.conversationId(c)),
                        "conversationType": .string(c < Self.peers.count ? "user" : "group"),
                        "conversationWith": with, "lastMessage": .object(last), "unreadMessageCount": 4, "unreadMentionsCount": 1,
                        "updatedAt": .int(Self.base + 150),
                    ], limits: limits, in: db)
                }
                for id in 1...30 {
                    let c = id % 5
                    var wire = Self.message(id: id, conversation: c, sender: id % 3 == 0 ? Self.me : Self.peers[c], sentAt: Self.base + Int64(id),
                                            text: "cached \(id)", read: id % 2 == 0)
                    if id == 30 { wire["localMessageId"] = "taken-1" }
                    let value = JSONValue.object(wire)
                    let m = try decoder.message(value)
                    try MessageRows.upsert(value, m, me: Self.me, source: .realtime, in: db)
                    try RealtimeRows.touchConversation(value, m, newlyCached: true, previousFlags: nil, me: Self.me, limits: limits, in: db)
                }
                for (n, c) in [(1, 1), (2, 2)] {
                    let outgoing: JSONValue = ["receiver": .string(Self.peers[c]), "receiverType": "user", "type": "text",
                                               "category": "message", "data": ["text": "unsent"]]
                    let payload = BinaryJSON.encode(["message": outgoing, "sender": .string(Self.me), "files": []])
                    try CacheRows.insert([CacheRows.OutboxEntry(localId: "outbox-\(n)", seq: Int64(n), conversationId: Self.conversationId(c),
                                                                kind: "text", state: 0, createdAt: Int64(n), payload: payload)], into: db)
                }
            }
        }
    }

    /// A randomized change log, in pages: new messages from several senders across ten
    /// conversations (alice's own among them, thread replies, mentions, some older than a cached
    /// summary), edits, reads, server deletions as upserts and by id (of cached messages and of
    /// unknown ones), receipts (alice's own and peers'), re-deliveries, echoes of an outbox row, a
    /// local id a cached message holds, and removed conversations.
    static func log(seed: UInt64, changes count: Int, thenRemoving removed: [Int] = []) -> [[ChangeLogEntry]] {
        var random = Random(state: seed)
        var known: [Int: [String: JSONValue]] = [:]
        var topLevel: [Int: [Int]] = [:]
        var nextId = 100
        var clock = base
        var entries: [ChangeLogEntry] = []
        let conversations = peers.count + groups.count
        for _ in 0..<count {
            clock += Int64(random.int(3))
            let roll = random.int(100)
            if roll < 55 || known.isEmpty {
                let c = random.int(conversations)
                let group = c >= peers.count
                let sender = random.chance(25) ? me : (group ? peers[(c + random.int(3)) % peers.count] : peers[c])
                let parent = random.chance(15) ? topLevel[c]?.last ?? 0 : 0
                let sentAt = random.chance(10) ? clock - Int64(random.int(200)) : clock
                var fields = message(id: nextId, conversation: c, sender: sender, sentAt: sentAt, text: "m\(nextId)", parentId: parent,
                                     read: random.chance(40), mentionsMe: sender != me && random.chance(10))
                if random.chance(4) {
                    fields["category"] = "custom"
                    fields["type"] = "poll"
                    fields["data"] = ["customData": ["q": "?"], "updateConversation": .bool(random.chance(50))]
                }
                if parent == 0 { topLevel[c, default: []].append(nextId) }
                known[nextId] = fields
                entries.append(.messageUpserted(.object(fields)))
                nextId += 1
            } else if roll < 70 {
                // An edit, a read from another device, a reaction-less change, or a deletion as an upsert.
                let id = known.keys.sorted()[random.int(known.count)]
                guard var fields = known[id] else { continue }
                switch random.int(3) {
                case 0:
                    fields["data"] = ["text": .string("edited \(id) at \(clock)")]
                    fields["editedAt"] = .int(clock)
                case 1:
                    if fields["readByMeAt"] == nil, fields["sender"]?["uid"]?.stringValue != me { fields["readByMeAt"] = .int(clock) }
                default:
                    fields["deletedAt"] = .int(clock)
                }
                fields["updatedAt"] = .int(clock)
                known[id] = fields
                entries.append(.messageUpserted(.object(fields)))
            } else if roll < 80 {
                // A re-delivery of a message as it is (cached: by this log, or the seeded ones).
                if random.chance(30) {
                    let id = 1 + random.int(30)
                    let c = id % 5
                    entries.append(.messageUpserted(.object(message(id: id, conversation: c, sender: id % 3 == 0 ? me : peers[c],
                                                                    sentAt: base + Int64(id), text: "cached \(id) again", read: true))))
                } else {
                    let id = known.keys.sorted()[random.int(known.count)]
                    if let fields = known[id] { entries.append(.messageUpserted(.object(fields))) }
                }
            } else if roll < 89 {
                let id = random.chance(70) ? known.keys.sorted()[random.int(known.count)] : (random.chance(50) ? 1 + random.int(40) : 90_000 + random.int(99))
                let c = (known[id]?["conversationId"]?.stringValue) ?? conversationId(id % 5)
                entries.append(.messageDeleted(id: id, conversationId: c))
            } else if roll < 93 {
                // alice's own send echoed before its acknowledgement: the outbox owns it.
                let fields = message(id: nextId, conversation: 1, sender: me, sentAt: clock, text: "echo", localId: "outbox-1")
                nextId += 1
                entries.append(.messageUpserted(.object(fields)))
            } else if roll < 95 {
                // A receipt up to a message: alice's own read (from another device), or a peer's
                // read or delivery of a one-to-one conversation (a group's peer receipt changes nothing).
                let id = known.keys.sorted()[random.int(known.count)]
                guard let fields = known[id], let c = fields["conversationId"]?.stringValue,
                      let index = (0..<conversations).first(where: { conversationId($0) == c }) else { continue }
                let group = index >= peers.count
                let own = random.chance(50)
                let who = own ? me : (group ? peers[random.int(peers.count)] : peers[index])
                let type = own || random.chance(50) ? "read" : "delivered"
                entries.append(.receipt(["messageId": .int(Int64(id)), "sender": ["uid": .string(who)],
                                         "receiverId": .string(group ? groups[index - peers.count] : (own ? peers[index] : me)),
                                         "receiverType": .string(group ? "group" : "user"), "conversationId": .string(c),
                                         "receiptType": .string(type), "timestamp": .int(clock)]))
            } else if roll < 97 {
                // A local id a cached message already holds is not taken over.
                let fields = message(id: nextId, conversation: 2, sender: peers[2], sentAt: clock, text: "local id clash", localId: "taken-1")
                known[nextId] = fields
                nextId += 1
                entries.append(.messageUpserted(.object(fields)))
            } else if roll < 99 {
                entries.append(.conversationRemoved(conversationId: conversationId(random.int(conversations))))
            } else {
                entries.append(.messageDeleted(id: 0, conversationId: ""))  // dropped by parse
            }
        }
        // Conversations with unsent messages (one of them on the wire) go last, among other changes.
        for c in removed {
            entries.append(.conversationRemoved(conversationId: conversationId(c)))
            entries.append(.messageUpserted(.object(message(id: nextId, conversation: c, sender: peers[c], sentAt: clock, text: "after"))))
            nextId += 1
        }
        var pages: [[ChangeLogEntry]] = []
        var rest = entries[...]
        while !rest.isEmpty {
            let size = 1 + random.int(60)
            pages.append(Array(rest.prefix(size)))
            rest = rest.dropFirst(size)
        }
        return pages
    }

    /// What a page reported, comparable.
    struct Report: Equatable {
        var inserted: [String]
        var updated: [String]
        var removed: [String]
        var discarded: [String]

        init(_ a: SyncPageRows.Applied) {
            func line(_ m: BaseMessage) -> String {
                "\(m.id) \(m.source) \(m.messageStatus) \(m.localMessageId ?? "-") \(m.deletedAt) \(m.readByMeAt) \(m.parentMessageId)"
            }
            inserted = a.inserted.map(line)
            updated = a.updated.map(line)
            removed = a.removedConversations
            discarded = a.discarded.map(\.localId)
        }
    }

    /// The per-message path: each change through `RealtimeRows.apply` as the first catch-up sync
    /// did (the reference the batch must match).
    static func applyOneByOne(_ changes: [SyncChange], serverTime: Int64, inFlight: Set<String>, in db: Database) throws -> SyncPageRows.Applied {
        let limits = WireLimits()
        var applied = SyncPageRows.Applied()
        // Receipts after the page's messages, as a realtime receipt heard after them would be.
        var receipts: [MessageReceipt] = []
        for change in changes {
            switch change {
            case .upsert(let wire, let m, _):
                m.messageStatus = MessageRows.status(of: m, me: me)
                switch try RealtimeRows.apply(.received(wire, m), me: me, limits: limits, source: .sync, in: db) {
                case .inserted:
                    m.source = .sync
                    applied.inserted.append(m)
                case .updated:
                    if let row = try RealtimeRows.cachedRow(m.id, in: db) { m.source = row.source }
                    applied.updated.append(m)
                case .nothing:
                    break
                }
            case .deleted(let id, _):
                let stmt = try db.prepare("SELECT payload FROM messages WHERE server_id = ?")
                try stmt.bind([.int(Int64(id))])
                guard try stmt.step(), let bytes = stmt.blob(0), case .object(var fields) = try BinaryJSON.decode(bytes) else { continue }
                stmt.reset()
                if fields["deletedAt"]?.doubleValue ?? 0 == 0 { fields["deletedAt"] = .int(max(serverTime, 1)) }
                let wire = JSONValue.object(fields)
                let m = try WireDecoder(limits: limits, trusted: true).message(wire)
                m.messageStatus = MessageRows.status(of: m, me: me)
                guard try RealtimeRows.apply(.deleted(wire, m), me: me, limits: limits, source: .sync, in: db) == .updated else { continue }
                if let row = try RealtimeRows.cachedRow(m.id, in: db) { m.source = row.source }
                applied.updated.append(m)
            case .conversationRemoved(let id):
                let unsent = try OutboxRows.rows(pendingOnly: false, in: db).filter { $0.conversationId == id && !inFlight.contains($0.localId) }
                for row in unsent { try OutboxRows.delete(row.localId, in: db) }
                _ = try Evictor.removeConversation(id, in: db)
                applied.discarded += unsent
                applied.removedConversations.append(id)
            case .receipt(let receipt):
                receipts.append(receipt)
            }
        }
        for receipt in receipts { _ = try RealtimeRows.apply(.receipt(receipt), me: me, limits: limits, in: db) }
        return applied
    }

    /// A column's value; a payload decoded (one that does not decode stays bytes).
    enum Cell: Equatable {
        case value(DatabaseValue)
        case payload(JSONValue)
    }

    /// Every row of `table` in order, each column named.
    static func dump(_ table: String, orderBy: String, in cache: VaultCache) throws -> [[String: Cell]] {
        try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT * FROM \(table) ORDER BY \(orderBy)")
            var rows: [[String: Cell]] = []
            while try stmt.step() {
                var row: [String: Cell] = [:]
                for i in 0..<stmt.columnCount {
                    let value = stmt.value(i)
                    if stmt.columnName(i) == "payload", case .blob(let bytes) = value, let decoded = try? BinaryJSON.decode(bytes) {
                        row[stmt.columnName(i)] = .payload(decoded)
                    } else {
                        row[stmt.columnName(i)] = .value(value)
                    }
                }
                rows.append(row)
            }
            return rows
        }
    }

    // MARK: - Tests

    func testABatchedPageLeavesTheRowsAndReportOfOneMessageAtATime() async throws {
        let batched = try await openCache()
        let reference = try await openCache()
        try seed(batched)
        try seed(reference)
        let limits = WireLimits()
        let inFlight: Set<String> = ["outbox-2"]
        var totals = (inserted: 0, updated: 0, removed: 0, discarded: 0, nothing: 0)
        for seed: UInt64 in [1, 2, 3] {
            for (n, page) in Self.log(seed: seed, changes: 400, thenRemoving: seed == 3 ? [1, 2] : []).enumerated() {
                let serverTime = Self.base + 10_000 + Int64(n)
                // Each path gets its own parsed messages (applying them fills in status, source, local id).
                let (mine, droppedA) = SyncPageRows.parse(page, limits: limits)
                let (theirs, droppedB) = SyncPageRows.parse(page, limits: limits)
                XCTAssertEqual(droppedA, droppedB)
                let a = try batched.writer.sync { db in
                    try db.transaction { try SyncPageRows.apply(mine, me: Self.me, limits: limits, serverTime: serverTime, inFlight: inFlight, in: db) }
                }
                let b = try reference.writer.sync { db in
                    try db.transaction { try Self.applyOneByOne(theirs, serverTime: serverTime, inFlight: inFlight, in: db) }
                }
                XCTAssertEqual(Report(a), Report(b), "seed \(seed), page \(n)")
                totals.inserted += a.inserted.count
                totals.updated += a.updated.count
                totals.removed += a.removedConversations.count
                totals.discarded += a.discarded.count
                totals.nothing += page.count - droppedA - a.inserted.count - a.updated.count - a.removedConversations.count
            }
            for (table, order) in [("messages", "row_id"), ("conversations", "id"), ("outbox", "seq"), ("conversation_opened", "conversation_id")] {
                let rowsA = try Self.dump(table, orderBy: order, in: batched)
                let rowsB = try Self.dump(table, orderBy: order, in: reference)
                XCTAssertEqual(rowsA.count, rowsB.count, "\(table) after seed \(seed)")
                for (x, y) in zip(rowsA, rowsB) where x != y {
                    XCTFail("\(table) after seed \(seed): \(x) != \(y)")
                    break
                }
            }
        }
        // The log exercised every kind of change.
        XCTAssertGreaterThan(totals.inserted, 300)
        XCTAssertGreaterThan(totals.updated, 100)
        XCTAssertGreaterThan(totals.removed, 5)
        XCTAssertGreaterThan(totals.discarded, 0, "an unsent message went with its conversation")
        XCTAssertGreaterThan(totals.nothing, 10, "echoes of an outbox row and deletions of uncached messages changed nothing")
    }

    func testAPageWritesEachConversationOnce() async throws {
        let cache = try await openCache()
        let limits = WireLimits()
        // 200 new messages in 5 conversations, one page.
        let page = (0..<200).map { i in
            ChangeLogEntry.messageUpserted(.object(Self.message(id: 1_000 + i, conversation: i % 5, sender: Self.peers[i % 5],
                                                                sentAt: Self.base + Int64(i), text: "n\(i)")))
        }
        let (changes, dropped) = SyncPageRows.parse(page, limits: limits)
        XCTAssertEqual(dropped, 0)
        let writes = try cache.writer.sync { db in
            try db.execute("CREATE TEMP TABLE conversation_writes (n INTEGER NOT NULL)")
            try db.execute("INSERT INTO conversation_writes VALUES (0)")
            try db.execute("CREATE TEMP TRIGGER count_updates AFTER UPDATE ON main.conversations BEGIN UPDATE conversation_writes SET n = n + 1; END")
            try db.execute("CREATE TEMP TRIGGER count_inserts AFTER INSERT ON main.conversations BEGIN UPDATE conversation_writes SET n = n + 1; END")
            let applied = try db.transaction { try SyncPageRows.apply(changes, me: Self.me, limits: limits, serverTime: Self.base + 300, inFlight: [], in: db) }
            XCTAssertEqual(applied.inserted.count, 200)
            return try db.scalarInt("SELECT n FROM conversation_writes")
        }
        XCTAssertEqual(writes, 5, "one write per conversation per page, not one per message")
        let unread = try cache.reader.sync { db in try db.scalarInt("SELECT sum(unread_count) FROM conversations") }
        XCTAssertEqual(unread, 200)
    }

    /// A receipt in a catch-up page (a server that logs receipts as their own events, as Matrix
    /// does): alice's own read marks what she received up to it read and clears the unread count
    /// when it reaches the last message, whichever order the page holds them in; bob's read marks
    /// alice's messages up to it read; a malformed receipt is dropped and counted.
    func testAReceiptInAPageReadsUpToItsMessageAfterThePagesMessages() async throws {
        let cache = try await openCache()
        let limits = WireLimits()
        let bob = Self.conversationId(0)
        func receipt(_ id: Int, by who: String, _ type: String = "read") -> ChangeLogEntry {
            .receipt(["messageId": .int(Int64(id)), "sender": ["uid": .string(who)], "receiverId": .string(who == Self.me ? "bob" : Self.me),
                      "receiverType": "user", "conversationId": .string(bob), "receiptType": .string(type), "timestamp": .int(Self.base + 99)])
        }
        var page: [ChangeLogEntry] = []
        // alice reads up to 1004 (her receipt comes before the messages it covers), bob reads
        // alice's 2001, and 1005 arrives after both: it stays unread.
        page.append(receipt(1004, by: Self.me))
        for i in 0..<5 {
            page.append(.messageUpserted(.object(Self.message(id: 1_000 + i, conversation: 0, sender: "bob", sentAt: Self.base + Int64(i), text: "b\(i)"))))
        }
        for i in 0..<2 {
            page.append(.messageUpserted(.object(Self.message(id: 2_000 + i, conversation: 0, sender: Self.me, sentAt: Self.base + 10 + Int64(i), text: "a\(i)"))))
        }
        page.append(receipt(2001, by: "bob"))
        page.append(.messageUpserted(.object(Self.message(id: 1_005, conversation: 0, sender: "bob", sentAt: Self.base + 20, text: "later"))))
        page.append(.receipt(["messageId": "not a number", "sender": ["uid": "bob"]]))
        page.append(.receipt(["messageId": 0, "sender": ["uid": "bob"], "receiverId": "alice", "conversationId": .string(bob)]))
        let (changes, dropped) = SyncPageRows.parse(page, limits: limits)
        XCTAssertEqual(dropped, 2, "the malformed receipts")
        _ = try cache.writer.sync { db in
            try db.transaction { try SyncPageRows.apply(changes, me: Self.me, limits: limits, serverTime: Self.base + 300, inFlight: [], in: db) }
        }
        let rows = try cache.reader.sync { db -> [Int: [String: JSONValue]] in
            let stmt = try db.prepare("SELECT server_id, payload FROM messages")
            var out: [Int: [String: JSONValue]] = [:]
            while try stmt.step() {
                guard let bytes = stmt.blob(1), case .object(let fields) = try BinaryJSON.decode(bytes) else { continue }
                out[stmt.int(0)] = fields
            }
            return out
        }
        for id in 1_000...1_004 { XCTAssertNotNil(rows[id]?["readByMeAt"], "\(id) read by alice's receipt") }
        XCTAssertNil(rows[1_005]?["readByMeAt"], "sent after what alice read")
        XCTAssertNotNil(rows[2_000]?["readAt"], "bob read alice's messages up to 2001")
        XCTAssertNotNil(rows[2_001]?["readAt"])
        let unread = try cache.reader.sync { db in try db.scalarInt("SELECT unread_count FROM conversations WHERE id = ?", .text(bob)) }
        XCTAssertEqual(unread, 1, "only the message after alice's receipt")
    }

    func testTheRecursiveEncodingIsTheIterativeOneByteForByte() {
        var random = Random(state: 7)
        func value(_ depth: Int) -> JSONValue {
            switch depth > 5 ? random.int(5) : random.int(8) {
            case 0: return .null
            case 1: return .bool(random.chance(50))
            case 2: return .int(Int64(bitPattern: random.next()))
            case 3: return .double(Double(random.int(1_000_000)) / 7)
            case 4: return .string(["", "a", "é", "ü🙂", "key", "Zed", "zed"][random.int(7)])
            case 5, 6:
                var fields: [String: JSONValue] = [:]
                for _ in 0..<random.int(9) { fields[["id", "a", "B", "é", "e\u{301}", "z", "sender", "ü"][random.int(8)] + String(random.int(3))] = value(depth + 1) }
                return .object(fields)
            default:
                return .array((0..<random.int(6)).map { _ in value(depth + 1) })
            }
        }
        for _ in 0..<300 {
            let v = value(0)
            var iterative: [UInt8] = []
            BinaryJSON.encodeIteratively(v, into: &iterative)
            XCTAssertEqual(BinaryJSON.encode(v), iterative)
        }
        // Deeper than the recursion goes.
        var deep: JSONValue = ["leaf": [1, 2]]
        for i in 0..<200 { deep = i % 2 == 0 ? .array([deep, "x"]) : ["k": deep, "a": 1] }
        var iterative: [UInt8] = []
        BinaryJSON.encodeIteratively(deep, into: &iterative)
        XCTAssertEqual(BinaryJSON.encode(deep), iterative)
    }
}
