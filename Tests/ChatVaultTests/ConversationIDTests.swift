import ChatVaultSimulator
import XCTest
@testable import ChatVault

/// The conversation-id rule, defined once (`ConversationID`) and used by the engine, the simulator
/// and the tools alike.
final class ConversationIDTests: XCTestCase {
    func testTheRule() {
        XCTAssertEqual(ConversationID.direct("bob", "alice").rawValue, "alice_user_bob")
        XCTAssertEqual(ConversationID.direct("alice", "bob"), ConversationID.direct("bob", "alice"), "both sides name it alike")
        XCTAssertEqual(ConversationID.direct("alice", "alice").rawValue, "alice_user_alice")
        XCTAssertEqual(ConversationID.group("team").rawValue, "group_team")
        XCTAssertEqual(ConversationID(.user("bob"), me: "alice"), .direct("alice", "bob"))
        XCTAssertEqual(ConversationID(.group("team"), me: "alice"), .group("team"))
        XCTAssertEqual(ConversationID.direct("@b:x.org", "@a:x.org").rawValue, "@a:x.org_user_@b:x.org", "Matrix ids sort as strings")
        XCTAssertEqual("\(ConversationID.group("g"))", "group_g")
    }

    /// The engine's ids and the simulator's are the same ids.
    func testTheEngineAndTheSimulatorAgree() throws {
        let server = ChatVaultSimulator()
        try server.addUsers("zed", "amy")
        let id = try server.postText("hi", from: "zed", to: .user("amy"))
        XCTAssertEqual(server.messageJSON(id, as: "amy")?["conversationId"]?.stringValue, ConversationID.direct("amy", "zed").rawValue)
        XCTAssertEqual(MessageRows.conversationId(for: .user("zed"), me: "amy"), ConversationID.direct("zed", "amy").rawValue)
    }
}
