import XCTest
import Synchronization
@testable import ChatVault
import VaultStore

/// The one scheme for stored codes and the one mapping from `messages` columns to a row's fields.
final class StoredRowTests: XCTestCase {
    /// Every value has exactly one code and no two share one; and the codes are the ones caches
    /// already hold on disk (renumbering one would misread every cache written before).
    func testEveryStoredCodeIsUniqueCompleteAndStable() {
        func check<T: StoredCode & CaseIterable & Hashable>(_ type: T.Type, _ expected: [T: Int64]) {
            let table = T.storedCodes
            XCTAssertEqual(Set(table.map(\.value)), Set(T.allCases), "\(T.self): every value listed")
            XCTAssertEqual(table.count, T.allCases.count, "\(T.self): each value once")
            XCTAssertEqual(Set(table.map(\.code)).count, table.count, "\(T.self): no code twice")
            for value in T.allCases {
                XCTAssertEqual(value.storedCode, expected[value], "\(T.self).\(value)")
                XCTAssertEqual(T(storedCode: value.storedCode), value)
            }
            XCTAssertNil(T(storedCode: 99), "an unknown code reads as nil, never a trap")
            XCTAssertNil(T(storedCode: -1))
        }
        check(MessageStatus.self, [.pending: 0, .sending: 1, .sent: 2, .delivered: 3, .read: 4, .failed: 5])
        check(MessageSource.self, [.realtime: 0, .sync: 1])
        XCTAssertEqual(OutboxRow.State.pending.storedCode, 0)
        XCTAssertEqual(OutboxRow.State.failed.storedCode, 2)
        XCTAssertNil(OutboxRow.State(storedCode: 1))
    }

    /// A message written through the generated statements lands in the columns the mapping names:
    /// each column, read back by its name, holds `MessageRow.value(column)`; an update rewrites
    /// them and keeps the local id; a cached read decodes status and source by the resolved indices.
    func testAMessageRowLandsInTheColumnsTheMappingNames() async throws {
        let h = try ReadHarness()
        let ids = Array(try h.simulator.seedConversation(between: "alice", and: "bob", count: 2))
        await h.login()
        let cache = try XCTUnwrap(h.vault.openCache)
        let wire = try XCTUnwrap(h.simulator.messageJSON(ids[1], as: "alice"))
        let message = try WireDecoder(limits: WireLimits()).message(wire)
        message.localMessageId = "local-7"
        let expected = MessageRow(wire, message, me: "alice", source: .sync)
        func stored(_ column: MessageRow.Column) throws -> DatabaseValue {
            try cache.reader.sync { db in
                let stmt = try db.prepare("SELECT \(column.rawValue) FROM messages WHERE server_id = ?")
                try stmt.bind([.int(Int64(ids[1]))])
                XCTAssertTrue(try stmt.step())
                return stmt.value(0)
            }
        }
        try cache.writer.sync { db in
            try db.run("DELETE FROM messages WHERE server_id = ?", .int(Int64(ids[1])))
            try MessageRows.upsert(wire, message, me: "alice", source: .sync, in: db)
        }
        for column in MessageRow.Column.allCases {
            XCTAssertEqual(try stored(column), expected.value(column), "\(column.rawValue)")
        }
        XCTAssertEqual(try stored(.source), .int(1))
        XCTAssertEqual(try stored(.localId), .text("local-7"))

        // An update (the same message edited, arriving in realtime) rewrites the row, keeps its local id.
        message.localMessageId = nil
        (message as? TextMessage)?.text = "edited text"
        var edited = wire
        if case .object(var fields) = wire, case .object(var data)? = fields["data"] {
            data["text"] = .string("edited text")
            fields["data"] = .object(data)
            edited = .object(fields)
        }
        try cache.writer.sync { db in try MessageRows.upsert(edited, message, me: "alice", source: .realtime, in: db) }
        let updated = MessageRow(edited, message, me: "alice", source: .realtime)
        for column in MessageRow.Column.allCases where column != .localId {
            XCTAssertEqual(try stored(column), updated.value(column), "\(column.rawValue) after the update")
        }
        XCTAssertEqual(try stored(.localId), .text("local-7"), "an update keeps the cached local id")

        let read = try cache.reader.sync { db in try MessageRows.message(id: ids[1], decoder: WireDecoder(limits: WireLimits(), trusted: true), in: db) }
        XCTAssertEqual(read?.source, .realtime)
        XCTAssertEqual(read?.messageStatus, MessageRows.status(of: message, me: "alice"))
        XCTAssertEqual(read?.localMessageId, "local-7")
        XCTAssertEqual((read as? TextMessage)?.text, "edited text")
    }
}
