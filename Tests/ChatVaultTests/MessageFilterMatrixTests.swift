import ChatVaultSimulator
import Foundation
import XCTest
@testable import ChatVault
import VaultStore

/// The reference's filter matrix for `MessagesRequest`, over the encrypted cache: every locally
/// computable filter is answered from the cache exactly as the server answers it; every
/// server-only predicate empties the cached page while the server answers in full; enrichment
/// flags never block the cached phase.
///
/// Each test builds one history on the simulator where every filter matches some messages and not
/// others, fetches it online once with no filter (the only write-through the cached answers come
/// from), then compares the cached page with what the server answers for the same settings. The
/// server's answer comes straight from the simulator through a second device of the same user, so
/// no filtered online read ever writes through (and reconciles) the cache under test.
final class MessageFilterMatrixTests: XCTestCase {
    // MARK: - Locally computable filters

    func testEveryLocalFilterIsAnsweredFromTheCacheExactlyAsTheServerAnswersIt() async throws {
        let f = try await MatrixFixture()
        f.h.client.network = .offline
        let groupIds = try await f.serverIds(f.request(.group) { _ in }, .previous)
        XCTAssertEqual(groupIds.count, f.groupMessageCount, "the server's unfiltered group page")

        for filter in f.localFilters {
            let expected = try await f.serverIds(f.request(.group, filter.configure), .previous)
            XCTAssertFalse(expected.isEmpty, "\(filter.name): the fixture must give the server something to return")
            XCTAssertNotEqual(expected, groupIds, "\(filter.name): the fixture must make the filter leave some messages out")
            for scope in MatrixFixture.Scope.allCases {
                for limit in [100, 2] {
                    for direction in PageDirection.allCases {
                        try await f.assertCachedPageMatchesServer(scope, filter, limit: limit, direction: direction)
                    }
                }
            }
        }
    }

    func testCombinedLocalFiltersAreAnsweredFromTheCache() async throws {
        let f = try await MatrixFixture()
        f.h.client.network = .offline
        let parent = f.ids["parent"]!
        let combinations: [MatrixFixture.Filter] = [
            .init("text, unread, no replies") { $0.set(types: ["text"]).set(unread: true).hideReplies(hide: true) },
            .init("message category, not deleted, not from blocked") {
                $0.set(categories: ["message"]).hideDeletedMessages(hide: true).hideMessagesFromBlockedUsers(true)
            },
            .init("tags and attachments") { $0.setTags(["work"]).has(attachments: true) },
            .init("mentions of bob or alice, unread") { $0.set(mentionedUIDs: ["alice", "bob"]).set(unread: true) },
            .init("thread replies with reactions") { $0.setParentMessageId(parentMessageId: parent).has(reactions: true) },
        ]
        for filter in combinations {
            for scope in MatrixFixture.Scope.allCases {
                for direction in PageDirection.allCases {
                    try await f.assertCachedPageMatchesServer(scope, filter, limit: 100, direction: direction)
                    try await f.assertCachedPageMatchesServer(scope, filter, limit: 1, direction: direction)
                }
            }
        }
        let nonEmpty = try await f.serverIds(f.request(.group, combinations[3].configure), .previous)
        XCTAssertFalse(nonEmpty.isEmpty, "at least one combination must select something")
    }

    func testTheSingularCategoryAndTypeSettersSelectOneValueAsThePluralOnesDo() {
        let singular = MessagesRequest.MessageRequestBuilder().set(uid: "bob").set(category: "custom").set(type: "location").build()
        let plural = MessagesRequest.MessageRequestBuilder().set(uid: "bob").set(categories: ["custom"]).set(types: ["location"]).build()
        XCTAssertEqual(singular.query.categories, ["custom"])
        XCTAssertEqual(singular.query.types, ["location"])
        XCTAssertEqual(singular.query, plural.query)
        let replaced = MessagesRequest.MessageRequestBuilder().set(categories: ["message", "action"]).set(category: "custom").build()
        XCTAssertEqual(replaced.query.categories, ["custom"], "the last setter wins, as with the plural form")
    }

    // MARK: - Server-only predicates

    func testEachServerOnlyPredicateEmptiesTheCachedPageWhileTheServerAnswersInFull() async throws {
        let f = try await MatrixFixture()
        for filter in f.serverOnlyFilters {
            // Online: an empty cached page, then the server's full answer.
            let request = f.request(.group, filter.configure)
            let expected = try await f.serverIds(request, .previous)
            XCTAssertFalse(expected.isEmpty, "\(filter.name): the server must have something to return")
            let online = await request.fetchPrevious()
            XCTAssertEqual(online.cached?.map(\.id), [], "\(filter.name): a server-only predicate empties the cached page")
            XCTAssertEqual(try online.server.get().map(\.id), expected, "\(filter.name): the server answers in full")

            // The cache does hold those messages: without the predicate it serves them.
            f.h.client.network = .offline
            let withoutPredicate = await f.request(.group) { _ in }.fetchPrevious()
            XCTAssertTrue(Set(expected).isSubset(of: Set(withoutPredicate.cached?.map(\.id) ?? [])),
                          "\(filter.name): the messages the server returned are cached")
            // Offline: still an empty cached page, then the offline error.
            let offline = await f.request(.group, filter.configure).fetchPrevious()
            XCTAssertEqual(offline.cached?.map(\.id), [], "\(filter.name) offline")
            XCTAssertEqual(offline.server.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE, filter.name)
            f.h.client.network = .online
        }
    }

    func testAServerOnlyPredicateBlanksTheCachedPageEvenBesideLocalFilters() async throws {
        let f = try await MatrixFixture()
        f.h.client.network = .offline
        for filter in f.serverOnlyFilters {
            for local in f.localFilters.prefix(4) {
                let result = await f.request(.group) { builder in
                    local.configure(builder)
                    filter.configure(builder)
                }.fetchPrevious()
                XCTAssertEqual(result.cached?.map(\.id), [], "\(filter.name) with \(local.name)")
            }
        }
    }

    // MARK: - Enrichment

    func testEnrichmentFlagsNeverBlockTheCachedPhase() async throws {
        let f = try await MatrixFixture()
        f.h.client.network = .offline
        let everything = try await f.serverIds(f.request(.group) { _ in }, .previous)
        for flag in f.enrichmentFlags {
            let cached = await f.request(.group, flag.configure).fetchPrevious().cached?.map(\.id)
            XCTAssertEqual(cached, everything, "\(flag.name) alone")
            // Beside a local filter, the cached page is still that filter's answer.
            for local in f.localFilters {
                let combined = MatrixFixture.Filter("\(flag.name) + \(local.name)") { builder in
                    flag.configure(builder)
                    local.configure(builder)
                }
                try await f.assertCachedPageMatchesServer(.group, combined, limit: 100, direction: .previous)
            }
        }
        // All of them at once.
        let all = MatrixFixture.Filter("every enrichment flag") { builder in
            for flag in f.enrichmentFlags { flag.configure(builder) }
        }
        try await f.assertCachedPageMatchesServer(.group, all, limit: 100, direction: .previous)
        try await f.assertCachedPageMatchesServer(.none, all, limit: 100, direction: .next)
    }

    // MARK: - Directions and starting points

    func testOfflinePagingInBothDirectionsWalksTheSameSlicesAsTheServer() async throws {
        let f = try await MatrixFixture()
        f.h.client.network = .offline
        let cases: [MatrixFixture.Filter] = [
            .init("no filter") { _ in },
            .init("tags (checked on the decoded message)") { $0.setTags(["news", "work"]) },
            .init("not from blocked users") { $0.hideMessagesFromBlockedUsers(true) },
            .init("unread") { $0.set(unread: true) },
        ]
        for filter in cases {
            for scope in MatrixFixture.Scope.allCases {
                for direction in PageDirection.allCases {
                    let all = try await f.serverIds(f.request(scope, filter.configure), direction, limit: 100)
                    let request = f.request(scope) { filter.configure($0.set(limit: 3)) }
                    var pages: [[Int]] = []
                    for _ in 0..<((all.count + 2) / 3 + 1) {
                        let result = direction == .previous ? await request.fetchPrevious() : await request.fetchNext()
                        XCTAssertEqual(result.server.errorCode, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE)
                        pages.append(result.cached?.map(\.id) ?? [])
                    }
                    let label = "\(filter.name), \(scope), \(direction)"
                    for page in pages { XCTAssertEqual(page, page.sorted { f.precedes($0, $1) }, "\(label): each page ascending") }
                    XCTAssertEqual(pages.last, [], "\(label): the cached window ends with an empty page")
                    let walked = direction == .previous ? pages.reversed().flatMap { $0 } : pages.flatMap { $0 }
                    XCTAssertEqual(walked, all, "\(label): the pages cover the server's answer, in order, once")
                }
            }
        }
    }

    func testStartingAtAMessageIdReadsStrictlyBeforeOrAfterItFromTheCache() async throws {
        let f = try await MatrixFixture()
        f.h.client.network = .offline
        for anchor in [f.ids["pin me"]!, f.ids["same second 2"]!, f.ids["first"]!] {
            for filter in [MatrixFixture.Filter("no filter") { _ in }, MatrixFixture.Filter("not deleted") { $0.hideDeletedMessages(hide: true) }] {
                let start = MatrixFixture.Filter("\(filter.name), from message \(anchor)") { filter.configure($0.set(messageID: anchor)) }
                for scope in [MatrixFixture.Scope.group, .none] {
                    for direction in PageDirection.allCases {
                        try await f.assertCachedPageMatchesServer(scope, start, limit: 100, direction: direction)
                        try await f.assertCachedPageMatchesServer(scope, start, limit: 2, direction: direction)
                    }
                }
            }
        }
        // The anchor is not in either page.
        let anchor = f.ids["pin me"]!
        let before = await f.request(.group) { $0.set(messageID: anchor) }.fetchPrevious().cached?.map(\.id) ?? []
        let after = await f.request(.group) { $0.set(messageID: anchor) }.fetchNext().cached?.map(\.id) ?? []
        XCTAssertFalse(before.isEmpty || after.isEmpty)
        XCTAssertFalse(before.contains(anchor) || after.contains(anchor))
    }

    func testStartingAtATimestampReadsTheServersSliceFromTheCache() async throws {
        let f = try await MatrixFixture()
        f.h.client.network = .offline
        // Several messages share `shared`: `.previous` is strictly before it, `.next` from it on.
        let shared = f.sentAt["same second 1"]!
        XCTAssertEqual(f.sentAt["same second 3"], shared)
        for time in [shared, shared + 1, shared - 1, f.sentAt["first"]!, f.sentAt["last"]! + 10] {
            let start = MatrixFixture.Filter("from time \(time)") { $0.set(timeStamp: time) }
            for scope in MatrixFixture.Scope.allCases {
                for direction in PageDirection.allCases {
                    try await f.assertCachedPageMatchesServer(scope, start, limit: 100, direction: direction)
                    try await f.assertCachedPageMatchesServer(scope, start, limit: 2, direction: direction)
                }
            }
        }
        let previous = await f.request(.group) { $0.set(timeStamp: shared) }.fetchPrevious().cached?.map(\.id) ?? []
        let next = await f.request(.group) { $0.set(timeStamp: shared) }.fetchNext().cached?.map(\.id) ?? []
        XCTAssertFalse(previous.contains(f.ids["same second 1"]!), "fetchPrevious from a time excludes that second")
        XCTAssertEqual(Array(next.prefix(3)), ["same second 1", "same second 2", "same second 3"].map { f.ids[$0]! },
                       "fetchNext from a time starts with that second")
    }
}

// MARK: - The fixture

/// A history where each filter of the matrix matches some messages and not others, cached by one
/// unfiltered online read.
final class MatrixFixture {
    enum Scope: CaseIterable, CustomStringConvertible {
        case group, user, none

        var description: String {
            switch self {
            case .group: return "group team"
            case .user: return "user bob"
            case .none: return "every conversation"
            }
        }
    }

    struct Filter {
        let name: String
        let configure: (MessagesRequest.MessageRequestBuilder) -> Void

        init(_ name: String, _ configure: @escaping (MessagesRequest.MessageRequestBuilder) -> Void) {
            self.name = name
            self.configure = configure
        }
    }

    let h: ReadHarness
    /// A second device of the same user: the server's answers, without touching the cache.
    let oracle: SimulatedClient
    /// Message ids by label, and their sent times.
    private(set) var ids: [String: Int] = [:]
    private(set) var sentAt: [String: Int] = [:]
    private(set) var groupMessageCount = 0

    init() async throws {
        h = try ReadHarness(users: ["alice", "bob", "carol", "dave"])
        let s = h.simulator
        oracle = s.client(for: "alice")
        try s.addGroup("team", name: "Team", owner: "alice", members: ["bob", "carol", "dave"])
        let team = MessageScope.group("team")
        let clock = s.clock

        func post(_ label: String, advance: Double = 10, _ make: () throws -> Int) rethrows {
            clock.advance(by: advance)
            ids[label] = try make()
            sentAt[label] = clock.seconds
        }
        let image = SimulatedAttachment(name: "cat.jpg", mimeType: "image/jpeg", url: "https://media.test/cat.jpg", size: 2048)
        let pdf = SimulatedAttachment(name: "plan.pdf", mimeType: "application/pdf", url: "https://media.test/plan.pdf", size: 4096)

        try post("first") { try s.postText("hello team", from: "bob", to: team, tags: ["news"]) }
        try post("mentions alice") { try s.postText("hi <@uid:alice>", from: "carol", to: team) }
        try post("mentions bob") { try s.postText("ping <@uid:bob>", from: "dave", to: team) }
        try post("image") { try s.postMedia(.image, [image], caption: "my cat", from: "bob", to: team) }
        try post("file") { try s.postMedia(.file, [pdf], from: "alice", to: team, tags: ["work"]) }
        try post("location") { try s.post(.custom(type: "location", data: ["lat": 48.85, "lng": 2.35]), from: "carol", to: team) }
        try post("form") {
            try s.post(.interactive(type: "form", data: ["fields": ["name"]], goal: SimulatedInteractionGoal(kind: .anyAction)),
                       from: "bob", to: team)
        }
        try post("joined") { try s.post(.action(action: "joined", message: "dave joined"), from: "dave", to: team) }
        try post("link") { try s.postText("see https://example.com/plan", from: "bob", to: team, tags: ["work"]) }
        try post("parent") { try s.postText("a thread", from: "alice", to: team) }
        try post("reply 1") { try s.postText("first reply", from: "bob", to: team, parentId: self.ids["parent"]) }
        try post("reply 2") { try s.postText("second reply <@uid:alice>", from: "carol", to: team, parentId: self.ids["parent"]) }
        try post("deleted") { try s.postText("to be deleted", from: "carol", to: team) }
        try post("reacted") { try s.postText("react to me", from: "bob", to: team) }
        try post("pin me") { try s.postText("pin me", from: "dave", to: team) }
        try post("saved") { try s.postText("save me", from: "bob", to: team, tags: ["news"]) }
        try post("edited") { try s.postText("before the edit", from: "carol", to: team) }
        try post("same second 1") { try s.postText("same second one", from: "bob", to: team) }
        try post("same second 2", advance: 0) { try s.postText("same second two <@uid:bob>", from: "carol", to: team) }
        try post("same second 3", advance: 0) { try s.postText("same second three", from: "dave", to: team, tags: ["news"]) }
        try post("from blocked") { try s.postText("carol again", from: "carol", to: team) }
        try post("last") { try s.postText("the newest", from: "dave", to: team) }
        groupMessageCount = ids.count

        // A one-to-one conversation beside the group.
        try post("direct 1") { try s.postText("hi alice", from: "bob", to: .user("alice"), tags: ["news"]) }
        try post("direct 2") { try s.postText("hi bob <@uid:bob>", from: "alice", to: .user("bob")) }
        try post("direct 3") { try s.postMedia(.image, [image], from: "bob", to: .user("alice")) }
        try post("direct 4") { try s.postText("unread for alice", from: "bob", to: .user("alice")) }

        // What happens to the messages afterwards.
        clock.advance(by: 30)
        try s.interact(with: ids["form"]!, elementId: "submit", by: "alice")
        try s.delete(ids["deleted"]!)
        try s.react("👍", to: ids["reacted"]!, by: "carol")
        try s.react("🎉", to: ids["reply 1"]!, by: "alice")
        try s.pin(ids["pin me"]!, by: "bob")
        try s.save(ids["saved"]!, for: "alice")
        try s.save(ids["first"]!, for: "bob")  // saved by someone else: not saved for alice
        try s.edit(ids["edited"]!, to: .text("after the edit"))
        try s.markRead(upTo: ids["reply 1"]!, by: "alice")
        try s.markRead(upTo: ids["direct 3"]!, by: "alice")
        try s.block("carol", by: "alice")

        // One unfiltered online read caches everything alice can see.
        await h.login()
        let all = await h.messages { $0.set(limit: 100) }.fetchPrevious()
        XCTAssertEqual(try all.server.get().count, ids.count, "the online read returns every message")
        XCTAssertEqual(try cachedCount(), ids.count, "and writes every one through")

        // The blocked-users list the cache answers "hide messages from blocked users" with: the
        // login refresh fetches it from the server; should it not, the same row goes in directly,
        // so this matrix tests the filter whatever the refresh does.
        let cache = try XCTUnwrap(h.vault.openCache)
        let deadline = ContinuousClock.now + .seconds(5)
        while try cache.reader.sync({ db in try db.texts("SELECT uid FROM blocked_users") }) != ["carol"], ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try await cache.writer.run { db in
            try db.run("INSERT OR IGNORE INTO blocked_users (uid, position, payload) VALUES (?, ?, ?)",
                       .text("carol"), .int(0), .blob(BinaryJSON.encode(["uid": "carol", "blockedByMe": true])))
        }
        XCTAssertEqual(try cache.reader.sync { db in try db.texts("SELECT uid FROM blocked_users") }, ["carol"])
    }

    var localFilters: [Filter] {
        let parent = ids["parent"]!
        return [
            Filter("category custom") { $0.set(categories: ["custom"]) },
            Filter("categories message + action") { $0.set(categories: ["message", "action"]) },
            Filter("category interactive") { $0.set(categories: ["interactive"]) },
            Filter("type text") { $0.set(types: ["text"]) },
            Filter("types image + file") { $0.set(types: ["image", "file"]) },
            Filter("type location") { $0.set(types: ["location"]) },
            Filter("category custom, the singular setter") { $0.set(category: "custom") },
            Filter("type image, the singular setter") { $0.set(type: "image") },
            Filter("parent message (thread)") { $0.setParentMessageId(parentMessageId: parent) },
            Filter("hide replies") { $0.hideReplies(hide: true) },
            Filter("hide deleted") { $0.hideDeletedMessages(hide: true) },
            Filter("tags news") { $0.setTags(["news"]) },
            Filter("tags work + news") { $0.setTags(["work", "news"]) },
            Filter("has mentions (anyone)") { $0.has(mentions: true) },
            Filter("my mentions only") { $0.myMentionsOnly(true) },
            Filter("mentioned uid bob") { $0.set(mentionedUIDs: ["bob"]) },
            Filter("mentioned uids alice + dave") { $0.set(mentionedUIDs: ["alice", "dave"]) },
            Filter("has attachments") { $0.has(attachments: true) },
            Filter("attachment type image") { $0.set(attachmentTypes: [.image]) },
            Filter("attachment types file + audio") { $0.set(attachmentTypes: [.file, .audio]) },
            Filter("hide messages from blocked users") { $0.hideMessagesFromBlockedUsers(true) },
            Filter("has reactions") { $0.has(reactions: true) },
            Filter("unread") { $0.set(unread: true) },
            Filter("pinned") { $0.set(pinned: true) },
            Filter("saved") { $0.set(saved: true) },
        ]
    }

    var serverOnlyFilters: [Filter] {
        [
            Filter("searchKeyword") { $0.set(searchKeyword: "reply") },
            Filter("has(links:)") { $0.has(links: true) },
            Filter("updatesOnly(onlyUpdates:)") { $0.updatesOnly(onlyUpdates: true) },
            Filter("setUpdatedAfter") { $0.setUpdatedAfter(timeStamp: self.sentAt["same second 1"]!) },
            Filter("setInteractionGoalCompletedOnly") { $0.setInteractionGoalCompletedOnly(true) },
            Filter("one sender in a group") { $0.set(uid: "bob") },
        ]
    }

    var enrichmentFlags: [Filter] {
        [
            Filter("withTags") { $0.withTags(true) },
            Filter("withParent") { $0.set(withParent: true) },
            Filter("mentionsWithTagInfo") { $0.mentionsWithTagInfo(true) },
            Filter("mentionsWithBlockedInfo") { $0.mentionsWithBlockedInfo(true) },
            Filter("hideQuotedMessages") { $0.hideQuotedMessages(true) },
        ]
    }

    func request(_ scope: Scope, _ configure: (MessagesRequest.MessageRequestBuilder) -> Void) -> MessagesRequest {
        h.messages { builder in
            builder.set(limit: 100)
            configure(builder)
            // Scope last, so a filter's `set(uid:)` narrows the group read to one sender.
            switch scope {
            case .group: builder.set(guid: "team")
            case .user: builder.set(uid: "bob")
            case .none: break
            }
        }
    }

    func request(_ scope: Scope, _ configure: @escaping (MessagesRequest.MessageRequestBuilder) -> Void, limit: Int) -> MessagesRequest {
        request(scope) { configure($0.set(limit: limit)) }
    }

    /// The server's answer for the request's settings, as alice on another device gets it.
    func serverIds(_ request: MessagesRequest, _ direction: PageDirection, limit: Int? = nil) async throws -> [Int] {
        var query = request.query
        query.direction = direction
        if let limit { query.limit = limit }
        return try await oracle.messages(query).items.map { item in try XCTUnwrap(item["id"]?.intValue).asInt }
    }

    /// Fetches the request offline in `direction` and compares its cached page with the server's page.
    func assertCachedPageMatchesServer(_ scope: Scope, _ filter: Filter, limit: Int, direction: PageDirection,
                                       file: StaticString = #filePath, line: UInt = #line) async throws {
        let request = self.request(scope, filter.configure, limit: limit)
        let expected = try await serverIds(request, direction)
        let result = direction == .previous ? await request.fetchPrevious() : await request.fetchNext()
        let label = "\(filter.name) in \(scope), limit \(limit), \(direction)"
        XCTAssertEqual(result.cached?.map(\.id), expected, label, file: file, line: line)
        if let cached = result.cached {
            XCTAssertEqual(cached.map(\.id), cached.sorted { precedes($0.id, $1.id) }.map(\.id), "\(label): ascending", file: file, line: line)
        }
    }

    /// Time order of two fixture messages (sentAt, then id).
    func precedes(_ a: Int, _ b: Int) -> Bool {
        let times = Dictionary(uniqueKeysWithValues: ids.map { ($0.value, sentAt[$0.key] ?? 0) })
        return (times[a] ?? 0, a) < (times[b] ?? 0, b)
    }

    func cachedCount() throws -> Int {
        let cache = try XCTUnwrap(h.vault.openCache)
        return try cache.reader.sync { db in Int(try db.scalarInt("SELECT count(*) FROM messages") ?? 0) }
    }
}

extension Int64 {
    fileprivate var asInt: Int { Int(self) }
}

extension Result where Failure == CometChatException {
    /// The error code of a failed server phase, nil for a server page.
    fileprivate var errorCode: String? {
        if case .failure(let error) = self { return error.errorCode }
        return nil
    }
}
