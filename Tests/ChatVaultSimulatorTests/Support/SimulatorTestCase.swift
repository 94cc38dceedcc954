@testable import ChatVault
import ChatVaultSimulator
import Foundation
import XCTest

/// A small cast every test can start from:
/// - users alice, bob, carol, dave (and the agent "helper");
/// - group "team" (public, owner alice; bob participant, carol moderator), group "secret"
///   (private, owner bob; dave participant).
class SimulatorTestCase: XCTestCase {
    var simulator: ChatVaultSimulator!
    let decoder = WireDecoder(limits: WireLimits())

    override func setUpWithError() throws {
        simulator = ChatVaultSimulator(seed: 42)
        try simulator.addUser(SimulatedUser(uid: "alice", name: "Alice", role: "admin", status: .online, tags: ["staff"]))
        try simulator.addUser(SimulatedUser(uid: "bob", name: "Bob", status: .offline, tags: ["customer"]))
        try simulator.addUser(SimulatedUser(uid: "carol", name: "Carol", status: .online, tags: ["customer", "vip"]))
        try simulator.addUser(SimulatedUser(uid: "dave", name: "dave", role: "moderator"))
        try simulator.addUser(SimulatedUser(uid: "helper", name: "Helper Bot", isAgentic: true))
        try simulator.addGroup(SimulatedGroup(guid: "team", name: "Team", owner: "alice", tags: ["work"]),
                               members: ["bob": .participant, "carol": .moderator])
        try simulator.addGroup(SimulatedGroup(guid: "secret", name: "Secret Club", type: .private, owner: "bob"),
                               members: ["dave": .participant])
    }

    override func tearDown() {
        simulator = nil
    }

    var clock: SimulatedClock { simulator.clock }

    func messages(_ client: SimulatedClient, _ configure: (inout MessageQuery) -> Void) async throws -> [JSONValue] {
        var query = MessageQuery()
        configure(&query)
        return try await client.messages(query).items
    }

    func ids(_ items: [JSONValue]) -> [Int] {
        items.compactMap { $0["id"]?.intValue.map(Int.init) }
    }

    func strings(_ items: [JSONValue], _ key: String) -> [String] {
        items.compactMap { $0[key]?.stringValue }
    }

    /// Posts `count` texts from alternating senders, one second apart (the clock moves).
    @discardableResult
    func postTexts(_ count: Int, between a: String, and b: String) throws -> [Int] {
        try (0..<count).map { i in
            clock.advance(by: 1)
            return try simulator.postText("text \(i)", from: i % 2 == 0 ? a : b, to: .user(i % 2 == 0 ? b : a))
        }
    }
}

/// Asserts that an async call fails with `expected`.
func XCTAssertThrowsBackendError<T>(_ expected: BackendError, _ body: @autoclosure () async throws -> T,
                                    file: StaticString = #filePath, line: UInt = #line) async {
    do {
        _ = try await body()
        XCTFail("expected \(expected), got an answer", file: file, line: line)
    } catch let error as BackendError {
        XCTAssertEqual(error, expected, file: file, line: line)
    } catch {
        XCTFail("expected \(expected), got \(error)", file: file, line: line)
    }
}

/// The error an async call throws, if any.
func backendError<T>(_ body: @autoclosure () async throws -> T) async -> BackendError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error as? BackendError
    }
}

/// The status and code of a server error (the message is free text).
func statusAndCode(_ error: BackendError?) -> String? {
    guard case .server(let status, let code, _)? = error else { return nil }
    return "\(status) \(code)"
}

// XCTest's assertions take synchronous autoclosures; these take `await`.

func assertEqual<T: Equatable>(_ actual: @autoclosure () async throws -> T, _ expected: @autoclosure () async throws -> T,
                               _ message: @autoclosure () -> String = "", file: StaticString = #filePath, line: UInt = #line) async {
    do {
        let (a, e) = (try await actual(), try await expected())
        XCTAssertEqual(a, e, message(), file: file, line: line)
    } catch {
        XCTFail("threw \(error) \(message())", file: file, line: line)
    }
}

func assertNil<T>(_ value: @autoclosure () async throws -> T?, _ message: @autoclosure () -> String = "",
                  file: StaticString = #filePath, line: UInt = #line) async {
    do {
        let v = try await value()
        XCTAssertNil(v, message(), file: file, line: line)
    } catch {
        XCTFail("threw \(error) \(message())", file: file, line: line)
    }
}

func assertNotNil<T>(_ value: @autoclosure () async throws -> T?, _ message: @autoclosure () -> String = "",
                     file: StaticString = #filePath, line: UInt = #line) async {
    do {
        let v = try await value()
        XCTAssertNotNil(v, message(), file: file, line: line)
    } catch {
        XCTFail("threw \(error) \(message())", file: file, line: line)
    }
}

func assertTrue(_ value: @autoclosure () async throws -> Bool, _ message: @autoclosure () -> String = "",
                file: StaticString = #filePath, line: UInt = #line) async {
    do {
        let v = try await value()
        XCTAssertTrue(v, message(), file: file, line: line)
    } catch {
        XCTFail("threw \(error) \(message())", file: file, line: line)
    }
}

func assertFalse(_ value: @autoclosure () async throws -> Bool, _ message: @autoclosure () -> String = "",
                 file: StaticString = #filePath, line: UInt = #line) async {
    do {
        let v = try await value()
        XCTAssertFalse(v, message(), file: file, line: line)
    } catch {
        XCTFail("threw \(error) \(message())", file: file, line: line)
    }
}
