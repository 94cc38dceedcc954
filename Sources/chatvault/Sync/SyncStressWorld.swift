import ChatVault
import ChatVaultSimulator

/// The server `chatvault sync-stress` runs against. The simulator lives in the process, so every
/// run (and the crash test, for its truth) rebuilds it from the same seed and gets the same server:
/// the clock starts at `start`; six senders and the user share 50 conversations (six one-to-one,
/// 44 groups); the history is `messages` texts from the senders and the user's other devices, four
/// to a second (far below any page size: a change-log page never splits one second), with an edit
/// about every tenth message and a deletion about every twentieth, drawn from the seed. Message
/// texts are synthetic and never printed.
struct SyncStressWorld {
    /// The clock's start: the establishing run syncs here, before any message exists.
    static let start: Double = 1_700_000_000
    static let senders = (1...6).map { "stress-sender-\($0)" }
    static let groupCount = 44
    /// Posts per second of history.
    static let perSecond = 4

    let me: String
    let seed: UInt64
    let messages: Int

    static func group(_ n: Int) -> String { "stress-group-\(n)" }

    /// The 50 conversations, as the server names them.
    var conversationIds: [String] {
        Self.senders.map { ChatVaultSimulator.conversationId(between: me, and: $0) }
            + (1...Self.groupCount).map { ChatVaultSimulator.conversationId(group: Self.group($0)) }
    }

    /// Users and groups, no message; the clock at `start`.
    func empty() throws(SimulatorError) -> ChatVaultSimulator {
        let simulator = ChatVaultSimulator(seed: seed, clock: SimulatedClock(start: Self.start))
        try simulator.addUser(SimulatedUser(uid: me))
        for sender in Self.senders { try simulator.addUser(SimulatedUser(uid: sender)) }
        for n in 1...Self.groupCount {
            try simulator.addGroup(Self.group(n), owner: me, members: Self.senders)
        }
        return simulator
    }

    /// `empty()` and then the seeded history; the clock ends a few seconds past the last change,
    /// so every second of the log is complete.
    func full() throws(SimulatorError) -> ChatVaultSimulator {
        let simulator = try empty()
        var random = SeededGenerator(seed: seed)
        func draw(_ bound: Int) -> Int { Int(random.next() % UInt64(bound)) }
        simulator.clock.advance(by: 10)
        var live: [Int] = []
        var edits = 0
        for i in 0..<messages {
            let conversation = draw(Self.senders.count + Self.groupCount)
            let fromMe = draw(5) == 0
            let sender: String
            let scope: MessageScope
            if conversation < Self.senders.count {
                let peer = Self.senders[conversation]
                sender = fromMe ? me : peer
                scope = fromMe ? .user(peer) : .user(me)
            } else {
                sender = fromMe ? me : Self.senders[draw(Self.senders.count)]
                scope = .group(Self.group(conversation - Self.senders.count + 1))
            }
            live.append(try simulator.postText("sync-stress \(seed).\(i)", from: sender, to: scope))
            if live.count > 1, draw(10) == 0 {
                edits += 1
                try simulator.edit(live[draw(live.count)], to: .text("sync-stress \(seed).\(i) edit \(edits)"))
            }
            if live.count > 1, draw(20) == 0 {
                try simulator.delete(live.remove(at: draw(live.count)))
            }
            if (i + 1) % Self.perSecond == 0 { simulator.clock.advance(by: 1) }
        }
        simulator.clock.advance(by: 5)
        return simulator
    }
}
