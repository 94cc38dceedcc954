public import Foundation
import Synchronization

/// The simulator's clock: every server timestamp (`sentAt`, `updatedAt`, read receipts, the change
/// log) comes from it, and it moves only when a test moves it, so runs are reproducible.
///
///     let clock = SimulatedClock()          // starts at 1_700_000_000 (14 Nov 2023)
///     clock.advance(by: 60)
///     clock.seconds                         // 1_700_000_060
///     let engineClock = { clock.date }      // for APIs that take a clock closure
///
/// `Sendable`: share one clock between a simulator and the engine under test.
public final class SimulatedClock: Sendable {
    /// Where a default clock starts: 2023-11-14T22:13:20Z.
    public static let defaultStart: Double = 1_700_000_000

    private let current: Mutex<Double>

    /// A clock at `start` epoch seconds.
    public init(start: Double = SimulatedClock.defaultStart) {
        current = Mutex(start)
    }

    /// Now, in epoch seconds.
    public var now: Double { current.withLock { $0 } }

    /// Now, in whole epoch seconds (rounded down): the unit of every wire timestamp.
    public var seconds: Int { Int(now.rounded(.down)) }

    /// Now, in whole epoch seconds, as the protocol's server times are typed (`ChangeLogPage.serverTime`).
    public var seconds64: Int64 { Int64(seconds) }

    /// Now as a `Date`.
    public var date: Date { Date(timeIntervalSince1970: now) }

    /// Moves the clock forward (a negative value moves it back).
    public func advance(by seconds: Double) {
        current.withLock { $0 += seconds }
    }

    /// Sets the clock to `seconds` since the epoch.
    ///
    /// - Warning: Setting it backwards makes later changes older than earlier ones; the change log
    ///   then answers by time, not by order of arrival.
    public func set(_ seconds: Double) {
        current.withLock { $0 = seconds }
    }

    /// Sets the clock to a date.
    public func set(_ date: Date) {
        set(date.timeIntervalSince1970)
    }
}
