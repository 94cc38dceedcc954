/// Runs the designs of `chatvault bench open` side by side on one fixture.
///
/// Every iteration runs each design once, starting with a different design each time, so that
/// noise (another process, a CPU frequency change) spreads over all designs alike. The first
/// `warmups` iterations are discarded. A design with fewer runs (the passphrase design) takes part
/// in evenly spaced iterations. Each run opens from scratch (new connections, nothing shared) and
/// closes after its timing ends.
struct OpenBenchmark {
    struct Design {
        /// The JSON key (`rawKey`, `rawKeyFullProcedure`, `passphrase256k`, `plaintext`).
        let id: String
        let title: String
        let runs: Int
        let open: (inout Stopwatch) throws -> PageDigest
    }

    /// One design's timings.
    struct Result {
        let design: Design
        let total: TimingSummary
        /// Median of each phase, in the order the design runs them. Phase medians need not add up
        /// to the median of the totals.
        let phaseMedians: [(name: String, ms: Double)]
    }

    let designs: [Design]
    let runs: Int
    let warmups: Int
    let expectedPageRows: Int

    func run() throws -> [Result] {
        var laps = Array(repeating: [[(name: String, ms: Double)]](), count: designs.count)
        var reference: PageDigest?
        for iteration in 0..<(warmups + runs) {
            let measured = iteration - warmups
            for offset in designs.indices {
                let index = (offset + iteration) % designs.count
                let design = designs[index]
                guard measured < 0 || Self.takesPart(measured, runs: design.runs, of: runs) else { continue }
                var watch = Stopwatch()
                let digest = try design.open(&watch)
                guard digest.rows == expectedPageRows, digest == (reference ?? digest) else {
                    throw CLIError.failure("the \(design.id) design read a different first page (\(digest.rows) rows, expected \(expectedPageRows) like the others): the benchmark databases disagree")
                }
                reference = digest
                if measured >= 0 { laps[index].append(watch.laps) }
            }
        }
        return designs.indices.map { index in
            let runs = laps[index]
            let names = runs.first?.map(\.name) ?? []
            let phases = names.map { name in
                (name, TimingSummary(runs.map { run in run.filter { $0.name == name }.reduce(0) { $0 + $1.ms } }).medianMs)
            }
            return Result(design: designs[index], total: TimingSummary(runs.map { $0.reduce(0) { $0 + $1.ms } }), phaseMedians: phases)
        }
    }

    /// Whether a design with `design` runs takes part in measured iteration `iteration` of `total`:
    /// exactly `design` of the `total` iterations, evenly spaced.
    static func takesPart(_ iteration: Int, runs design: Int, of total: Int) -> Bool {
        design >= total || (iteration * design) / total != ((iteration + 1) * design) / total
    }
}
