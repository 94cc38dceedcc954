/// Timing primitives for `chatvault bench`: a monotonic lap timer and the summary statistics the
/// reports quote (medians and p90, never means: these machines are shared and noisy).

/// Laps on the monotonic clock (`ContinuousClock`, which never jumps with the wall clock).
///
///     var watch = Stopwatch()
///     lookUpKey();  watch.lap("keyLookup")
///     openQueue();  watch.lap("keyedOpen")
///     watch.totalMs     // the sum of the laps: work done after the last lap is not timed
struct Stopwatch {
    private let clock = ContinuousClock()
    private var last: ContinuousClock.Instant
    private(set) var laps: [(name: String, ms: Double)] = []

    init() {
        last = clock.now
    }

    /// Ends the current phase and names it.
    mutating func lap(_ name: String) {
        let now = clock.now
        laps.append((name, (now - last).milliseconds))
        last = now
    }

    /// Restarts the current phase without recording it (excludes set-up work from the timing).
    mutating func skip() {
        last = clock.now
    }

    var totalMs: Double { laps.reduce(0) { $0 + $1.ms } }
}

extension Duration {
    var milliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }
}

/// The median, p90 and extremes of one series of timings, in milliseconds.
struct TimingSummary: Sendable {
    let runs: Int
    let medianMs: Double
    /// Nearest-rank 90th percentile: the smallest timing at or above 90 % of the runs.
    let p90Ms: Double
    let minMs: Double
    let maxMs: Double

    /// - Precondition: `samples` is not empty.
    init(_ samples: [Double]) {
        precondition(!samples.isEmpty, "a summary needs at least one timing")
        let sorted = samples.sorted()
        runs = sorted.count
        medianMs = Self.median(sorted: sorted)
        p90Ms = Self.percentile(sorted: sorted, 0.9)
        minMs = sorted[0]
        maxMs = sorted[sorted.count - 1]
    }

    /// The middle value; the mean of the two middle values for an even count.
    static func median(sorted: [Double]) -> Double {
        let n = sorted.count
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
    }

    /// Nearest-rank percentile (`q` in 0...1).
    static func percentile(sorted: [Double], _ q: Double) -> Double {
        let rank = Int((q * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }
}

/// A verdict on budgets: whether they all hold, and the failed checks in words.
protocol BudgetVerdict {
    var withinBudget: Bool { get }
    /// The failed checks, human-readable.
    var failures: [String] { get }
}

extension BudgetVerdict {
    /// The benchmark's exit status for this verdict: 0 within budget, 1 when a budget is missed.
    var exitStatus: Int32 { withinBudget ? 0 : 1 }
}

/// A benchmark's report that checks budgets.
protocol BudgetedReport: BudgetVerdict {
    var json: JSON { get }
    var table: String { get }
}

/// Prints the report (`--json` or the table) and returns the exit status: 0 within budget, 1 when
/// not (the failed checks also go to standard error).
func finish(_ report: some BudgetedReport, json: Bool) -> Int32 {
    emit(json ? report.json.render() : report.table)
    if !report.withinBudget { complain("over budget: " + report.failures.joined(separator: "; ")) }
    return report.exitStatus
}

/// A ratio as the benches print it: `1.25×`, or `n/a` when it could not be measured.
func ratioText(_ value: Double) -> String {
    value.isFinite ? String(format: "%.2f×", value) : "n/a"
}
