public import ChatVault

/// The virtual network between one simulated device and the server.
///
///     let client = simulator.client(for: "alice")
///     client.network = .offline                      // every call: BackendError.unreachable
///     client.network = .flaky(failureRate: 0.3)      // 30 % of calls fail, reproducibly per seed
///     client.network = .online
public enum NetworkCondition: Sendable, Equatable {
    /// Every call reaches the server.
    case online
    /// No call reaches the server: each throws `BackendError.unreachable` at once, without latency.
    /// Going offline also drops the realtime connection.
    case offline
    /// Each call fails with `BackendError.unreachable` with this probability (0…1). The draws come
    /// from a generator seeded by the simulator's seed and the device's number, so two simulators
    /// with the same seed fail the same calls, and one device's calls never shift another's draws.
    case flaky(failureRate: Double)
}

/// A failure injected into the next call(s) of one method, with `SimulatedClient.failNext(_:with:times:)`.
///
///     client.failNext(.messages, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
///     client.failNext(.send, with: .ackLost)         // stored on the server, then `.timedOut`
///     client.failNext(.messages, with: .payload { _ in ["id": "not a number"] })
public enum SimulatedFault: Sendable {
    /// The server answers with this HTTP-like status and error code (`BackendError.server`); nothing
    /// is committed. 5xx and 429 are transient (`BackendError.isTransient`).
    case status(Int, code: String)
    /// No answer: `BackendError.timedOut` at once (no waiting); nothing is committed.
    case timeout
    /// The server commits the call (a `send` stores its message, an edit, deletion or reaction is
    /// applied, an upload is stored, a block is recorded), then the answer is lost: the client gets
    /// `BackendError.timedOut`.
    case ackLost
    /// The call succeeds, but each JSON object of the answer passes through this transform first:
    /// every item of a page, the single object of `message(id:)`, `conversation(with:type:)`,
    /// `send`, `editMessage`, `deleteMessage`, `addReaction`, `removeReaction`, `uploadMedia` and
    /// `login` (the session's user), every upserted message of a change log page.
    /// Tests use it for hostile payloads (missing fields, huge strings, wrong types).
    case payload(@Sendable (JSONValue) -> JSONValue)
    /// The call succeeds, and its page passes through this transform (for page-level hostility,
    /// such as too many items or a broken cursor). Applies to list reads only.
    case page(@Sendable (WirePage) -> WirePage)
    /// The call waits this long (real time) before it runs normally: keeps one call in flight
    /// while a test does something else.
    case delay(Duration)
}

/// The `ChatBackend` methods, for fault injection and call counting.
public enum SimulatedMethod: String, Sendable, Hashable, CaseIterable {
    case login, logout
    case messages, threads, conversations, users, blockedUsers, groups, groupMembers, bannedGroupMembers
    case reactions, notificationFeed, message, conversation
    case send, editMessage, deleteMessage, addReaction, removeReaction, uploadMedia, blockUsers, unblockUsers
    case changes
    case downloadMedia, resignMediaURL
    case connect, disconnect
}

/// A mistake in the truth a test sets up (an unknown user, a message that does not exist…).
///
///     XCTAssertThrowsError(try simulator.postText("hi", from: "nobody", to: .user("bob")))
public struct SimulatorError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
