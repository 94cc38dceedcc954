import ChatVault
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The Matrix catch-up of many rooms under SIGKILL (the CI-sized form of `bench matrix`'s kills):
/// `chatvault matrix-catchup-stress` catches up sixty rooms a user was away from, a few of them
/// longer than a `/sync` timeline, and is killed again and again part-way; every relaunch resumes
/// from what the cache committed (the sync point and the plan of rooms still to read). In the end
/// every room holds exactly the messages the server has for it: none twice, none missing.
final class MatrixCatchUpCrashTests: XCTestCase {
    static let kills = 20
    static let seed: UInt64 = 0xca7_c40

    func testACatchUpOfSixtyRoomsKilledAgainAndAgainEndsWithEveryRoomExact() async throws {
        let account = try await Account.make()
        let env = ProcessInfo.processInfo.environment
        let secret = try XCTUnwrap(env["CHATVAULT_SYNAPSE_SECRET"])
        let bobPassword = UUID().uuidString
        let bobUser = try await LocalHomeserver.register(on: account.url, secret: secret, name: "bob" + String(UInt32.random(in: 0...UInt32.max)),
                                                         password: bobPassword)
        let bob = try await RawMatrix.login(account.url, user: bobUser, password: bobPassword)
        var rooms: [String] = []
        for i in 0..<60 {
            let created = try await RawMatrix.call(account.url, bob.token, "POST", "_matrix/client/v3/createRoom",
                                               ["preset": "private_chat", "name": .string("room \(i)"), "invite": .array([.string(account.user)])])
            let room = try XCTUnwrap(created["room_id"]?.stringValue)
            _ = try await RawMatrix.call(account.url, account.session.token, "POST", "_matrix/client/v3/join/\(room)", JSONValue.object([:]))
            rooms.append(room)
        }
        let root = TemporaryDirectory()
        let options = ["--dir", root.path, "--user", account.user, "--app", "org.chatvault.clitests.matrixcatchup", "--keystore", "file",
                       "--key-dir", account.keys.path + "/keys", "--homeserver", account.url.absoluteString,
                       "--session-file", account.sessionFile, "--page-size", "5"]
        // A first launch: the new cache's sync point, before anything was sent.
        let first = try CLI.run(["matrix-catchup-stress"] + options)
        XCTAssertEqual(first.status, 0, first.stdout + first.stderr)

        // Away: a few messages in most rooms, more than a /sync timeline in some.
        var sent: [String: Int] = [:]
        try await withThrowingTaskGroup(of: (String, Int).self) { group in
            // One lane per room (its messages in order), 16 lanes at a time.
            var lanes = Array(rooms.enumerated()).makeIterator()
            func add() {
                guard let (i, room) = lanes.next() else { return }
                let count = i % 15 == 0 ? 130 : 3 + i % 7
                group.addTask {
                    for n in 0..<count {
                        _ = try await RawMatrix.call(account.url, bob.token, "PUT", "_matrix/client/v3/rooms/\(room)/send/m.room.message/t\(n)",
                                                     JSONValue.object(["msgtype": "m.text", "body": .string("away \(i).\(n)")]))
                    }
                    return (room, count)
                }
            }
            for _ in 0..<16 { add() }
            while let (room, count) = try await group.next() {
                sent[room] = count
                add()
            }
        }
        XCTAssertEqual(sent.count, 60)

        // Killed part-way again and again, each launch resuming from what the last one committed.
        var random = SeededGenerator(seed: Self.seed)
        var kills = 0
        var synced = 0
        var rounds = 0
        while kills < Self.kills && rounds < 3 * Self.kills {
            rounds += 1
            // Killed a moment after its first committed page: part-way, with something done.
            let run = try KilledRun.start([CLI.binary, "matrix-catchup-stress"] + options,
                                          killAfter: .milliseconds(Int(random.next() % 40)), once: "synced ")
            synced += run.stdout.split(separator: "\n").filter { $0.hasPrefix("synced ") }.count
            if run.killed {
                kills += 1
            } else {
                XCTAssertEqual(run.status, 0, run.stderr)
                if run.stdout.contains("done") { break }
            }
        }
        XCTAssertEqual(kills, Self.kills, "every launch killed part-way, after a committed page (\(kills) kills in \(rounds) launches)")

        // The last launch, left alone, finishes; then each room as the cache holds it.
        let last = try CLI.run(["matrix-catchup-stress"] + options)
        XCTAssertEqual(last.status, 0, last.stdout + last.stderr)
        var held: [String: (count: Int, distinct: Int)] = [:]
        for line in last.stdout.split(separator: "\n") where line.hasPrefix("room ") {
            let fields = line.split(separator: " ")
            guard fields.count == 4, let count = Int(fields[2]), let distinct = Int(fields[3]) else { continue }
            held[String(fields[1])] = (count, distinct)
        }
        print("MatrixCatchUpCrashTests: \(kills) kills in \(rounds) launches, \(synced) pages committed between them")
        for room in rooms {
            let cached = held["group_\(room)"]
            XCTAssertEqual(cached?.count, sent[room], "room \(room): every message, none twice")
            XCTAssertEqual(cached?.distinct, sent[room], "room \(room): each message once")
        }
        XCTAssertEqual(held.count, rooms.count, "no other conversation")
    }
}
