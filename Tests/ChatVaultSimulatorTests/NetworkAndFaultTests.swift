import ChatVault
import ChatVaultSimulator
import XCTest

/// The virtual network (online, offline, flaky), latency, injected faults and call counting.
final class NetworkAndFaultTests: SimulatorTestCase {
    func testOfflineFailsEveryCallAtOnceWithUnreachable() async throws {
        let alice = simulator.client(for: "alice")
        alice.network = .offline
        alice.latency = .seconds(5)
        let start = ContinuousClock.now
        await XCTAssertThrowsBackendError(.unreachable, try await alice.messages(MessageQuery()))
        await XCTAssertThrowsBackendError(.unreachable, try await alice.conversations(ConversationQuery()))
        await XCTAssertThrowsBackendError(.unreachable, try await alice.send(["receiver": "bob", "type": "text", "data": ["text": "x"]], localMessageId: "l"))
        await XCTAssertThrowsBackendError(.unreachable, try await alice.changes(since: nil, limit: 10))
        await XCTAssertThrowsBackendError(.unreachable, try await alice.connect())
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(1), "no latency when offline")
        XCTAssertEqual(simulator.messageCount, 0)
        XCTAssertEqual(alice.callCount(.messages), 1)
        XCTAssertEqual(alice.serverCallCount(.messages), 0)
        alice.network = .online
        alice.latency = .zero
        _ = try await alice.messages(MessageQuery())
        XCTAssertEqual(alice.serverCallCount(.messages), 1)
    }

    func testFlakyNetworkFailsTheSameCallsUnderTheSameSeed() async throws {
        func pattern(seed: UInt64) async throws -> [Bool] {
            let simulator = ChatVaultSimulator(seed: seed)
            try simulator.addUsers("alice")
            let client = simulator.client(for: "alice")
            client.network = .flaky(failureRate: 0.5)
            var outcomes: [Bool] = []
            for _ in 0..<64 {
                let error = await backendError(try await client.users(UserQuery()))
                if let error { XCTAssertEqual(error, .unreachable) }
                outcomes.append(error == nil)
            }
            return outcomes
        }
        let first = try await pattern(seed: 9)
        let second = try await pattern(seed: 9)
        let other = try await pattern(seed: 10)
        XCTAssertEqual(first, second)
        XCTAssertNotEqual(first, other)
        let successes = first.filter { $0 }.count
        XCTAssertTrue((16...48).contains(successes), "about half: \(successes)")
    }

    func testFlakyExtremes() async throws {
        let alice = simulator.client(for: "alice")
        alice.network = .flaky(failureRate: 0)
        for _ in 0..<10 { _ = try await alice.users(UserQuery()) }
        alice.network = .flaky(failureRate: 1)
        for _ in 0..<10 { await XCTAssertThrowsBackendError(.unreachable, try await alice.users(UserQuery())) }
    }

    func testTwoDevicesDrawFromTheirOwnStreams() async throws {
        // The second device's draws do not depend on how many calls the first one made.
        func secondDevicePattern(firstDeviceCalls: Int) async throws -> [Bool] {
            let simulator = ChatVaultSimulator(seed: 3)
            try simulator.addUsers("alice", "bob")
            let first = simulator.client(for: "alice"), second = simulator.client(for: "bob")
            first.network = .flaky(failureRate: 0.5)
            second.network = .flaky(failureRate: 0.5)
            for _ in 0..<firstDeviceCalls { _ = await backendError(try await first.users(UserQuery())) }
            var outcomes: [Bool] = []
            for _ in 0..<32 { outcomes.append(await backendError(try await second.users(UserQuery())) == nil) }
            return outcomes
        }
        let quiet = try await secondDevicePattern(firstDeviceCalls: 0)
        let busy = try await secondDevicePattern(firstDeviceCalls: 17)
        XCTAssertEqual(quiet, busy)
    }

    func testLatencyDelaysEachCall() async throws {
        let alice = simulator.client(for: "alice")
        alice.latency = .milliseconds(150)
        let start = ContinuousClock.now
        _ = try await alice.users(UserQuery())
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(150))
    }

    func testServerStatusFaultsAreTransientFor5xxAnd429Only() async throws {
        let alice = simulator.client(for: "alice")
        alice.failNext(.messages, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
        alice.failNext(.messages, with: .status(429, code: "ERR_TOO_MANY_REQUESTS"))
        alice.failNext(.messages, with: .status(403, code: "ERR_FORBIDDEN"))
        let unavailable = await backendError(try await alice.messages(MessageQuery()))
        XCTAssertEqual(statusAndCode(unavailable), "503 ERR_SERVICE_UNAVAILABLE")
        XCTAssertEqual(unavailable?.isTransient, true)
        let throttled = await backendError(try await alice.messages(MessageQuery()))
        XCTAssertEqual(statusAndCode(throttled), "429 ERR_TOO_MANY_REQUESTS")
        XCTAssertEqual(throttled?.isTransient, true)
        let forbidden = await backendError(try await alice.messages(MessageQuery()))
        XCTAssertEqual(forbidden?.isTransient, false)
        _ = try await alice.messages(MessageQuery())
        XCTAssertEqual(alice.callCount(.messages), 4)
    }

    func testFaultsAreQueuedPerMethodAndTimesRepeats() async throws {
        let alice = simulator.client(for: "alice")
        alice.failNext(.users, with: .status(500, code: "ERR_INTERNAL"), times: 2)
        _ = try await alice.groups(GroupQuery())
        await assertNotNil(await backendError(try await alice.users(UserQuery())))
        await assertNotNil(await backendError(try await alice.users(UserQuery())))
        _ = try await alice.users(UserQuery())
        alice.failNext(.users, with: .timeout)
        alice.clearFaults()
        _ = try await alice.users(UserQuery())
    }

    func testAFaultWaitsForACallThatReachesTheServer() async throws {
        let alice = simulator.client(for: "alice")
        alice.failNext(.users, with: .timeout)
        alice.network = .offline
        await XCTAssertThrowsBackendError(.unreachable, try await alice.users(UserQuery()))
        alice.network = .online
        await XCTAssertThrowsBackendError(.timedOut, try await alice.users(UserQuery()))
    }

    func testTimeoutDoesNotCommitASend() async throws {
        let alice = simulator.client(for: "alice")
        alice.failNext(.send, with: .timeout)
        await XCTAssertThrowsBackendError(.timedOut, try await alice.send(["receiver": "bob", "type": "text", "data": ["text": "x"]], localMessageId: "l-1"))
        XCTAssertEqual(simulator.messageCount, 0)
    }

    func testAckLostCommitsOnceAndTheRetryReturnsTheStoredMessage() async throws {
        let alice = simulator.client(for: "alice")
        let outgoing: JSONValue = ["receiver": "bob", "receiverType": "user", "type": "text", "data": ["text": "once"]]
        alice.failNext(.send, with: .ackLost)
        await XCTAssertThrowsBackendError(.timedOut, try await alice.send(outgoing, localMessageId: "l-7"))
        XCTAssertEqual(simulator.messageCount, 1, "the server committed before the answer was lost")
        clock.advance(by: 30)
        let retried = try await alice.send(outgoing, localMessageId: "l-7")
        let again = try await alice.send(outgoing, localMessageId: "l-7")
        XCTAssertEqual(simulator.messageCount, 1)
        XCTAssertEqual(simulator.storedCopies(ofLocalMessageId: "l-7", from: "alice"), 1)
        XCTAssertEqual(retried, again)
        XCTAssertEqual(retried["localMessageId"], "l-7")
        XCTAssertEqual(retried["sentAt"]?.intValue, Int64(clock.seconds - 30), "the original, not a new copy")
    }

    func testAckLostOnABlockStillBlocks() async throws {
        let alice = simulator.client(for: "alice")
        alice.failNext(.blockUsers, with: .ackLost)
        await XCTAssertThrowsBackendError(.timedOut, try await alice.blockUsers(["bob"]))
        await assertEqual(strings(try await alice.blockedUsers(BlockedUserQuery()).items, "uid"), ["bob"])
    }

    func testPayloadFaultCorruptsEachObjectOfTheNextAnswer() async throws {
        let id = try simulator.postText("hi", from: "bob", to: .user("alice"))
        let alice = simulator.client(for: "alice")
        alice.failNext(.messages, with: .payload { json in
            guard case .object(var fields) = json else { return json }
            fields["id"] = "not a number"
            return .object(fields)
        })
        let hostile = try await alice.messages(MessageQuery()).items
        XCTAssertEqual(hostile.first?["id"], "not a number")
        await assertEqual(try await alice.messages(MessageQuery()).items.first?["id"]?.intValue, Int64(id), "only the next answer")

        alice.failNext(.message, with: .payload { _ in .string(String(repeating: "x", count: 1_000_000)) })
        await assertEqual(try await alice.message(id: id).stringValue?.count, 1_000_000)
    }

    func testPageFaultReshapesAWholePage() async throws {
        let alice = simulator.client(for: "alice")
        alice.failNext(.users, with: .page { page in WirePage(items: Array(repeating: page.items[0], count: 5000), nextCursor: "∞") })
        let page = try await alice.users(UserQuery())
        XCTAssertEqual(page.items.count, 5000)
        XCTAssertEqual(page.nextCursor, "∞")
    }

    func testDelayKeepsOneCallInFlight() async throws {
        let alice = simulator.client(for: "alice")
        alice.failNext(.messages, with: .delay(.milliseconds(800)))
        let start = ContinuousClock.now
        async let slow = alice.messages(MessageQuery())
        try await Task.sleep(for: .milliseconds(20))
        _ = try await alice.users(UserQuery())
        XCTAssertLessThan(ContinuousClock.now - start, .milliseconds(800), "other calls go on")
        _ = try await slow
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(800))
    }

    func testCallLogAndCounters() async throws {
        let alice = simulator.client(for: "alice")
        XCTAssertEqual(alice.totalCallCount, 0, "creating a client makes no call")
        _ = try await alice.users(UserQuery())
        _ = try await alice.groups(GroupQuery())
        await alice.disconnect()
        XCTAssertEqual(alice.calls, [.users, .groups, .disconnect])
        alice.resetCallCounts()
        XCTAssertEqual(alice.totalCallCount, 0)
        XCTAssertEqual(alice.callCount(.users), 0)
    }

    func testLoginLogoutAndSwitchingUsers() async throws {
        let device = simulator.client(for: "alice")
        let session = try await device.login(userId: "alice")
        XCTAssertEqual(session.user["uid"], "alice")
        XCTAssertEqual(session.serverTime, Int64(clock.seconds))
        await device.logout()
        let refused = await backendError(try await device.users(UserQuery()))
        XCTAssertEqual(statusAndCode(refused), "401 ERR_NOT_LOGGED_IN")
        let unknown = await backendError(try await device.login(userId: "ghost"))
        XCTAssertEqual(statusAndCode(unknown), "404 ERR_UID_NOT_FOUND")
        _ = try await device.login(userId: "bob")
        XCTAssertEqual(device.userId, "bob")
        await assertFalse(strings(try await device.users(UserQuery()).items, "uid").contains("bob"))
    }
}
