import ChatVault
import ChatVaultSimulator
import Foundation
import XCTest

/// The controllable clock and the server timestamps it drives.
final class ClockTests: XCTestCase {
    func testStartsAtAFixedEpochAndMovesOnlyWhenTold() async throws {
        let clock = SimulatedClock()
        XCTAssertEqual(clock.now, 1_700_000_000)
        try await Task.sleep(for: .milliseconds(10))
        XCTAssertEqual(clock.seconds, 1_700_000_000)
        clock.advance(by: 1.75)
        XCTAssertEqual(clock.now, 1_700_000_001.75)
        XCTAssertEqual(clock.seconds, 1_700_000_001)
        XCTAssertEqual(clock.seconds64, 1_700_000_001)
        XCTAssertEqual(clock.date, Date(timeIntervalSince1970: 1_700_000_001.75))
        clock.set(42)
        XCTAssertEqual(clock.seconds, 42)
        clock.set(Date(timeIntervalSince1970: 100))
        XCTAssertEqual(clock.now, 100)
        XCTAssertEqual(SimulatedClock(start: 5).now, 5)
    }

    func testServerTimestampsComeFromTheClock() async throws {
        let clock = SimulatedClock(start: 2_000_000_000)
        let simulator = ChatVaultSimulator(clock: clock)
        try simulator.addUsers("alice", "bob")
        let id = try simulator.postText("hi", from: "alice", to: .user("bob"))
        clock.advance(by: 90)
        try simulator.edit(id, to: .text("hi!"))
        let json = try await simulator.client(for: "bob").message(id: id)
        XCTAssertEqual(json["sentAt"], 2_000_000_000)
        XCTAssertEqual(json["editedAt"], 2_000_000_090)
        XCTAssertEqual(json["updatedAt"], 2_000_000_090)
        XCTAssertTrue(simulator.clock === clock)
    }

    func testASharedClockIsSafeAcrossThreads() async {
        let clock = SimulatedClock(start: 0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<100 { group.addTask { clock.advance(by: 1) } }
        }
        XCTAssertEqual(clock.now, 100)
    }
}
