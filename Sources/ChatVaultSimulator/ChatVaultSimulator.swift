import ChatVault
import Synchronization

/// An in-process chat server for tests: it holds the truth for many users, conversations, groups
/// and threads, answers every `ChatBackend` call as the calling user would see it, and hands out
/// one `SimulatedClient` per simulated device, each with its own virtual network.
///
///     let simulator = ChatVaultSimulator(seed: 7)
///     try simulator.addUsers("alice", "bob")
///     try simulator.postText("hi Alice", from: "bob", to: .user("alice"))
///     let alice = simulator.client(for: "alice")            // a ChatBackend
///     var query = MessageQuery()
///     query.scope = .user("bob")
///     let page = try await alice.messages(query)            // one message, unread for alice
///     alice.network = .offline                              // the next call: .unreachable
///
/// Timestamps come from `clock`, which moves only when the test moves it; ids are sequential;
/// every random draw comes from generators seeded by `seed`. The same seed and the same calls give
/// the same answers. `Sendable`; every method may be called from any thread.
public final class ChatVaultSimulator: Sendable {
    /// The server's clock (share it with the engine under test).
    public let clock: SimulatedClock
    /// The seed every simulated device's random draws derive from.
    public let seed: UInt64
    let state: Mutex<ServerState>

    /// The `pinnedBy` of a conversation pinned by the system, not by the user.
    public static let systemPinner = "app_system"

    public init(seed: UInt64 = 1, clock: SimulatedClock = SimulatedClock()) {
        self.seed = seed
        self.clock = clock
        state = Mutex(ServerState())
    }

    /// A new device of `userId`, already logged in as that user (see `SimulatedClient`).
    ///
    ///     let phone = simulator.client(for: "alice")
    ///     let laptop = simulator.client(for: "alice")       // a second device, its own network
    public func client(for userId: String) -> SimulatedClient {
        let id = state.withLock { state in
            defer { state.nextClientId += 1 }
            return state.nextClientId
        }
        return SimulatedClient(server: self, clientId: id, userId: userId)
    }

    /// The id of the one-to-one conversation between two users, as the SDK spells it
    /// (`alice_user_bob`: the uids sorted, joined by `_user_`).
    public static func conversationId(between a: String, and b: String) -> String {
        ServerState.directConversationId(a, b)
    }

    /// The id of a group's conversation (`group_<guid>`).
    public static func conversationId(group guid: String) -> String {
        ServerState.groupConversationId(guid)
    }

    /// The server time, in whole seconds.
    var now: Int { clock.seconds }

    /// Runs a truth-setting change under the lock, turning a refusal into a `SimulatorError`.
    func mutate<T>(_ body: (inout ServerState, Int) throws(BackendError) -> T) throws(SimulatorError) -> T {
        let now = self.now
        do {
            return try state.withLock { (state: inout ServerState) throws(BackendError) -> T in try body(&state, now) }
        } catch {
            if case .server(_, let code, let message) = error { throw SimulatorError("\(code): \(message)") }
            throw SimulatorError(error.description)
        }
    }
}
