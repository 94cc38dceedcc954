import ChatVault
import ChatVaultSimulator
import Foundation
import VaultKeys
import VaultStore

/// `chatvault bench media [--runs N] [--files F] [--messages M] [--quick] [--json]`
///
/// Two measurements, each on an encrypted and a plaintext cache (real ChatVault caches, key in
/// memory, decrypted views in a private directory in `/dev/shm`, a tmpfs as `$XDG_RUNTIME_DIR`
/// is on a desktop, or under the scratch directory when there is no `/dev/shm`):
///
/// - `download`: F files of 1 MiB (default 32) served by the simulator in 64 KiB chunks, each
///   fetched with `downloadMedia` one after the other (streamed to a temporary file, encrypted or
///   not, committed, recorded, and handed out: for the encrypted cache that includes making its
///   decrypted view); MiB per second of each run (fresh URLs every run, so nothing is a cache hit),
///   N runs (default 5) per cache, the caches alternating; medians, and the encrypted / plaintext
///   time ratio.
/// - `floors`: beside the downloads, after each pair of runs, F times each (`MediaFloors`):
///   AES-256-GCM of 1 MiB alone, and a write of 1 MiB to a new file in the views' tmpfs
///   directory; medians.
/// - `hydration`: a cache holding M messages (default 100,000, in 100 conversations, as
///   `bench reads` seeds them) plus one conversation of 30 media messages whose bytes are cached
///   (views made): the cached page of those 30 read on the reader connection
///   (`MessageRows.cachedPage`) and then hydrated (`localPath` set on every attachment), 200
///   times; the median of the whole and of the page read alone, so the hydration's own cost shows.
///
/// `--quick` (CI-sized, figures meaningless): 1 run of 4 files, 2,000 messages, 20 page reads.
///
/// Budgets (shared/reference/performance-budget.md, revised 2026-12-04: against floors measured
/// in the same run): the download's encrypted / plaintext time ≤ 1 + (cipher + view write) /
/// plaintext time + 0.1, where cipher and view write are the floors' medians for 1 MiB and the
/// plaintext time is the plaintext median per 1 MiB file (encryption may cost what encrypting the
/// bytes and writing the view cost by themselves, plus a tenth of the plaintext download); and
/// the encrypted hydrated page median ≤ 1 ms (the reads budget for a warm page).
///
/// Exit status: 0 within budget, 1 when not (each failure said in words, beside its floor) or
/// when the benchmark cannot run, 2 on a usage error.
///
/// `--json` fields: `benchmark` "media", `quick`, `build`, `engine` { cipher, sqlite },
/// `download` { fileBytes, files, runs, encrypted, plaintext: { medianMiBPerSecond,
/// minMiBPerSecond, maxMiBPerSecond, medianMsPerFile }, encryptedOverPlaintext }, `floors`
/// { samples, cipher: "AES-256-GCM", cipherMedianMs, viewWriteMedianMs, viewDirectory: "tmpfs" |
/// "scratch" }, `hydration` { cachedMessages, pageMessages, reads, encrypted, plaintext:
/// { pageMedianMs, hydratedPageMedianMs, hydrationMedianMs } }, `budget` { encryptedOverPlaintext,
/// plaintextMsPerFile, cipherMs, viewWriteMs, marginOverFloor: 0.1, maxEncryptedOverPlaintext
/// (1 + (cipherMs + viewWriteMs) / plaintextMsPerFile + 0.1), ratioWithinBudget,
/// hydratedPageMs, maxHydratedPageMs: 1, hydrationWithinBudget, withinBudget, failures }.
///
/// Prints no file content and no key material.
enum MediaBenchCommand {
    /// The margin over the floor-derived ceiling of encrypted / plaintext download time.
    static let budgetMarginOverFloor = 0.1
    static let budgetPageMs = 1.0
    static let fileBytes = 1 << 20

    struct Sizing {
        var runs: Int
        var files: Int
        var messages: Int
        var reads: Int
        var quick: Bool
    }

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw, switches: ["json", "quick"])
        let json = args.flag("json")
        let quick = args.flag("quick")
        var sizing = quick ? Sizing(runs: 1, files: 4, messages: 2_000, reads: 20, quick: true)
                           : Sizing(runs: 5, files: 32, messages: 100_000, reads: 200, quick: false)
        sizing.runs = try args.int("runs", default: sizing.runs, range: 1...1_000)
        sizing.files = try args.int("files", default: sizing.files, range: 1...1_000)
        sizing.messages = try args.int("messages", default: sizing.messages, range: 100...10_000_000)
        try args.rejectUnknown()

        let scratch = try ScenariosCommand.makePrivateDirectory()
        // Views go where a desktop puts them, a tmpfs: a private directory in /dev/shm when there
        // is one (removed at the end), else under the scratch directory.
        var runtime = "\(scratch.path)/runtime"
        var template = Array("/dev/shm/chatvault-bench-XXXXXX".utf8CString)
        let shm = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, let made = mkdtemp(base) else { return nil }
            return String(cString: made)
        }
        defer { if let shm { try? FileManager.default.removeItem(atPath: shm) } }
        if let shm, chmod(shm, 0o700) == 0 {
            runtime = shm
        } else {
            guard mkdir(runtime, 0o700) == 0, chmod(runtime, 0o700) == 0 else { throw CLIError.failure("cannot make the runtime directory") }
        }
        var benchmark = MediaBenchmark(sizing: sizing, root: scratch.path, runtime: runtime, runtimeIsTmpfs: runtime == shm)
        let report = try await benchmark.run()
        withExtendedLifetime(scratch) {}
        return finish(report, json: json)
    }
}

struct MediaBenchmark {
    let sizing: MediaBenchCommand.Sizing
    let root: String
    let runtime: String
    let runtimeIsTmpfs: Bool
    static let me = "bench-me"
    static let mediaPeer = "bench-media-peer"
    private var serial = 0

    struct Hydration {
        var page: [Double] = []
        var hydrated: [Double] = []
        var hydrationOnly: [Double] = []
    }

    init(sizing: MediaBenchCommand.Sizing, root: String, runtime: String, runtimeIsTmpfs: Bool = true) {
        self.sizing = sizing
        self.root = root
        self.runtime = runtime
        self.runtimeIsTmpfs = runtimeIsTmpfs
    }

    mutating func run() async throws -> MediaBenchReport {
        var rates: [Bool: [Double]] = [:]
        var floors = try MediaFloors(bytes: MediaBenchCommand.fileBytes, directory: runtime)
        var cipher: [Double] = [], viewWrite: [Double] = []
        for run in 0..<sizing.runs {
            for k in 0..<2 {
                let encryption = (run + k) % 2 == 0
                rates[encryption, default: []].append(try await downloadRun(encryption: encryption, run: run))
            }
            // The floors beside the downloads, as many as a run has files.
            for _ in 0..<sizing.files {
                cipher.append(try floors.cipherMs())
                viewWrite.append(try floors.viewWriteMs())
            }
        }
        var hydration: [Bool: Hydration] = [:]
        for encryption in [true, false] { hydration[encryption] = try await hydrationRun(encryption: encryption) }
        return MediaBenchReport(sizing: sizing, encryptedRates: rates[true] ?? [], plaintextRates: rates[false] ?? [],
                                encryptedHydration: hydration[true] ?? Hydration(), plaintextHydration: hydration[false] ?? Hydration(),
                                cipherMs: cipher, viewWriteMs: viewWrite, viewsOnTmpfs: runtimeIsTmpfs)
    }

    static func pattern(_ seed: Int) -> Data {
        Data((0..<MediaBenchCommand.fileBytes).map { i in UInt8(truncatingIfNeeded: i &* 131 &+ seed &+ (i >> 10)) })
    }

    /// A simulator with the benchmark user, and a vault over it (`.off`: only explicit downloads).
    private mutating func open(encryption: Bool) async throws -> (ChatVaultSimulator, OfflineVault, VaultCache, String) {
        serial += 1
        let simulator = ChatVaultSimulator(seed: UInt64(serial), clock: SimulatedClock())
        for uid in [Self.me, Self.mediaPeer] { try simulator.addUser(SimulatedUser(uid: uid, name: uid)) }
        let id = "\(encryption ? "encrypted" : "plaintext")-\(serial)"
        let runtime = self.runtime
        let (vault, cache) = try await openBenchVault(id, root: root, encryption: encryption, user: Self.me,
                                                      backend: simulator.client(for: Self.me), mediaCaching: .off) { settings in
            settings.media.runtimeDirectory = runtime
        }
        return (simulator, vault, cache, "\(root)/\(id)")
    }

    /// MiB per second of `sizing.files` downloads into a fresh cache.
    private mutating func downloadRun(encryption: Bool, run: Int) async throws -> Double {
        let (simulator, vault, _, path) = try await open(encryption: encryption)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            var targets: [(String, Int)] = []
            for k in 0..<sizing.files {
                let url = "https://media.bench.test/run-\(run)/file-\(k).bin"
                simulator.registerMedia(url: url, bytes: Self.pattern(k), mimeType: "application/octet-stream")
                let id = try simulator.postMedia(.file, [SimulatedAttachment(name: "file-\(k).bin", mimeType: "application/octet-stream", url: url,
                                                                             size: MediaBenchCommand.fileBytes)],
                                                 from: Self.mediaPeer, to: .user(Self.me))
                targets.append((url, id))
            }
            let clock = ContinuousClock()
            let start = clock.now
            for (url, id) in targets { _ = try await vault.downloadMedia(url: url, messageServerId: id) }
            let seconds = (clock.now - start).milliseconds / 1_000
            for (url, _) in targets where vault.getCachedMediaPath(url) == nil {
                throw CLIError.failure("a downloaded file is not cached")
            }
            await vault.logout()
            return Double(sizing.files) * Double(MediaBenchCommand.fileBytes) / 1_048_576 / seconds
        } catch {
            await vault.logout()
            throw CLIError.failure("the \(encryption ? "encrypted" : "plaintext") download run failed: \(error)")
        }
    }

    /// The cost of a hydrated 30-message media page in a cache of `sizing.messages` messages.
    private mutating func hydrationRun(encryption: Bool) async throws -> Hydration {
        let (simulator, vault, cache, path) = try await open(encryption: encryption)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let limits = vault.wireLimits
            let conversations = 100
            let me = Self.me
            let messages = sizing.messages
            try cache.writer.sync { db in
                for c in 0..<conversations {
                    let wire = stride(from: c, to: messages, by: conversations).map { i in ReadBenchFixture.message(i, conversation: c) }
                    try db.transaction { try MessageRows.writeThrough(wire, me: me, limits: limits, in: db) }
                }
            }
            var ids: [(String, Int)] = []
            for k in 0..<ReadBenchFixture.pageSize {
                let url = "https://media.bench.test/page/\(k).png"
                simulator.registerMedia(url: url, bytes: Data(Self.pattern(k).prefix(64 * 1024)), mimeType: "image/png")
                ids.append((url, try simulator.postMedia(.image, [SimulatedAttachment(name: "\(k).png", mimeType: "image/png", url: url)],
                                                         from: Self.mediaPeer, to: .user(Self.me))))
            }
            // The chat opened online: the 30 media messages written through, then their bytes fetched.
            let request = MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: Self.mediaPeer).set(limit: ReadBenchFixture.pageSize).build()
            _ = try await request.fetchPrevious().server.get()
            for (url, id) in ids { _ = try await vault.downloadMedia(url: url, messageServerId: id) }
            let query = MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: Self.mediaPeer).set(limit: ReadBenchFixture.pageSize).build().query
            var result = Hydration()
            let clock = ContinuousClock()
            for _ in 0..<sizing.reads {
                let start = clock.now
                let page = try cache.reader.sync { db in try MessageRows.cachedPage(query, direction: .previous, me: me, limits: limits, in: db) }
                let read = clock.now
                vault.hydrateMedia(page)
                let end = clock.now
                let hydrated = page.compactMap { ($0 as? MediaMessage)?.attachment?.localPath }.count
                guard page.count == ReadBenchFixture.pageSize, hydrated == page.count else {
                    throw CLIError.failure("the page holds \(page.count) messages, \(hydrated) hydrated")
                }
                result.page.append((read - start).milliseconds)
                result.hydrated.append((end - start).milliseconds)
                result.hydrationOnly.append((end - read).milliseconds)
            }
            await vault.logout()
            return result
        } catch {
            await vault.logout()
            throw CLIError.failure("the \(encryption ? "encrypted" : "plaintext") hydration run failed: \(error)")
        }
    }
}

struct MediaBenchReport: BudgetedReport {
    let sizing: MediaBenchCommand.Sizing
    let encryptedRates: [Double]
    let plaintextRates: [Double]
    let encryptedHydration: MediaBenchmark.Hydration
    let plaintextHydration: MediaBenchmark.Hydration
    /// The floors, one sample per file of each run: AES-256-GCM of 1 MiB, a tmpfs write of 1 MiB.
    let cipherMs: [Double]
    let viewWriteMs: [Double]
    /// Whether the views (and the write floor) were on a tmpfs (`/dev/shm`).
    var viewsOnTmpfs = true

    /// NaN for no samples (a check on it then fails).
    static func median(_ values: [Double]) -> Double { values.isEmpty ? .nan : TimingSummary(values).medianMs }

    var encryptedRate: Double { Self.median(encryptedRates) }
    var plaintextRate: Double { Self.median(plaintextRates) }
    /// Time per MiB, encrypted over plaintext.
    var ratio: Double { encryptedRate > 0 ? plaintextRate / encryptedRate : .infinity }
    /// The plaintext download of one 1 MiB file, median, in ms.
    var plaintextMsPerFile: Double { Self.msPerFile(plaintextRate) }
    var cipherMedianMs: Double { Self.median(cipherMs) }
    var viewWriteMedianMs: Double { Self.median(viewWriteMs) }
    /// The ceiling: 1 + (cipher + view write) / plaintext time + 0.1.
    var maxRatio: Double { 1 + (cipherMedianMs + viewWriteMedianMs) / plaintextMsPerFile + MediaBenchCommand.budgetMarginOverFloor }
    var hydratedPageMs: Double { Self.median(encryptedHydration.hydrated) }

    static func msPerFile(_ mibPerSecond: Double) -> Double {
        1_000 * Double(MediaBenchCommand.fileBytes) / 1_048_576 / mibPerSecond
    }

    // Written so that a NaN (a figure not measured) fails its check.
    var ratioWithinBudget: Bool { ratio <= maxRatio }
    var hydrationWithinBudget: Bool { hydratedPageMs <= MediaBenchCommand.budgetPageMs }
    var withinBudget: Bool { ratioWithinBudget && hydrationWithinBudget }

    var failures: [String] {
        var out: [String] = []
        if !ratioWithinBudget {
            out.append("an encrypted 1 MiB download and cache takes \(format(ratio))× the plaintext one (\(format(Self.msPerFile(encryptedRate), 3)) ms over \(format(plaintextMsPerFile, 3)) ms), above 1 + (AES-256-GCM \(format(cipherMedianMs, 3)) ms + view write \(format(viewWriteMedianMs, 3)) ms) / \(format(plaintextMsPerFile, 3)) ms + \(format(MediaBenchCommand.budgetMarginOverFloor, 1)) = \(format(maxRatio))×")
        }
        if !hydrationWithinBudget {
            out.append("the encrypted hydrated page median \(format(hydratedPageMs, 3)) ms is above \(format(MediaBenchCommand.budgetPageMs, 0)) ms")
        }
        return out
    }

    private func format(_ value: Double, _ digits: Int = 2) -> String {
        value.isFinite ? String(format: "%.\(digits)f", value) : "n/a"
    }

    var json: JSON {
        func rates(_ values: [Double]) -> JSON {
            .object([("medianMiBPerSecond", .double(Self.median(values))), ("minMiBPerSecond", .double(values.min() ?? 0)),
                     ("maxMiBPerSecond", .double(values.max() ?? 0)), ("medianMsPerFile", .double(Self.msPerFile(Self.median(values))))])
        }
        func hydration(_ h: MediaBenchmark.Hydration) -> JSON {
            .object([("pageMedianMs", .double(Self.median(h.page))), ("hydratedPageMedianMs", .double(Self.median(h.hydrated))),
                     ("hydrationMedianMs", .double(Self.median(h.hydrationOnly)))])
        }
        let engine = CipherEngine.current
        return .object([
            ("benchmark", .string("media")),
            ("quick", .bool(sizing.quick)),
            ("build", .string(OpenBenchReport.build)),
            ("engine", .object([("cipher", .optional(engine.version)), ("sqlite", .string(engine.sqliteVersion))])),
            ("download", .object([("fileBytes", .int(MediaBenchCommand.fileBytes)), ("files", .int(sizing.files)), ("runs", .int(sizing.runs)),
                                  ("encrypted", rates(encryptedRates)), ("plaintext", rates(plaintextRates)),
                                  ("encryptedOverPlaintext", .double(ratio))])),
            ("floors", .object([("samples", .int(cipherMs.count)), ("cipher", .string("AES-256-GCM")),
                                ("cipherMedianMs", .double(cipherMedianMs)), ("viewWriteMedianMs", .double(viewWriteMedianMs)),
                                ("viewDirectory", .string(viewsOnTmpfs ? "tmpfs" : "scratch"))])),
            ("hydration", .object([("cachedMessages", .int(sizing.messages)), ("pageMessages", .int(ReadBenchFixture.pageSize)),
                                   ("reads", .int(sizing.reads)), ("encrypted", hydration(encryptedHydration)),
                                   ("plaintext", hydration(plaintextHydration))])),
            ("budget", .object([
                ("encryptedOverPlaintext", .double(ratio)),
                ("plaintextMsPerFile", .double(plaintextMsPerFile)),
                ("cipherMs", .double(cipherMedianMs)),
                ("viewWriteMs", .double(viewWriteMedianMs)),
                ("marginOverFloor", .double(MediaBenchCommand.budgetMarginOverFloor)),
                ("maxEncryptedOverPlaintext", .double(maxRatio)),
                ("ratioWithinBudget", .bool(ratioWithinBudget)),
                ("hydratedPageMs", .double(hydratedPageMs)),
                ("maxHydratedPageMs", .double(MediaBenchCommand.budgetPageMs)),
                ("hydrationWithinBudget", .bool(hydrationWithinBudget)),
                ("withinBudget", .bool(withinBudget)),
                ("failures", .array(failures.map { .string($0) })),
            ])),
        ])
    }

    var table: String {
        let engine = CipherEngine.current
        var lines = [
            "chatvault bench media: SQLCipher \(engine.version ?? "none") on SQLite \(engine.sqliteVersion); \(OpenBenchReport.build) build"
                + (sizing.quick ? "; --quick (figures not meaningful)" : ""),
            "download and cache: \(sizing.files) files of 1 MiB per run from the simulator, \(sizing.runs) run\(sizing.runs == 1 ? "" : "s") per cache",
            "",
        ]
        var table = Table(header: ["cache", "median MiB/s", "min", "max", "ms per 1 MiB file"])
        table.rows.append(["encrypted", format(encryptedRate, 1), format(encryptedRates.min() ?? 0, 1), format(encryptedRates.max() ?? 0, 1),
                           format(Self.msPerFile(encryptedRate), 3)])
        table.rows.append(["plaintext", format(plaintextRate, 1), format(plaintextRates.min() ?? 0, 1), format(plaintextRates.max() ?? 0, 1),
                           format(plaintextMsPerFile, 3)])
        lines.append(table.render())
        lines.append("encrypted / plaintext (time): \(format(ratio))×")
        lines.append("floors, beside the runs (\(cipherMs.count) samples each, medians): AES-256-GCM of 1 MiB \(format(cipherMedianMs, 3)) ms; a write of 1 MiB to a new file on \(viewsOnTmpfs ? "the tmpfs (/dev/shm)" : "the scratch directory (no /dev/shm)") \(format(viewWriteMedianMs, 3)) ms")
        lines.append("")
        lines.append("hydration: a 30-message page of cached media from a cache of \(sizing.messages) messages, \(sizing.reads) reads; medians in ms")
        var page = Table(header: ["cache", "page read", "page read + hydration", "hydration"])
        for (name, h) in [("encrypted", encryptedHydration), ("plaintext", plaintextHydration)] {
            page.rows.append([name, format(Self.median(h.page), 3), format(Self.median(h.hydrated), 3), format(Self.median(h.hydrationOnly), 3)])
        }
        lines.append(page.render())
        lines.append("")
        lines.append("budget: encrypted / plaintext download time \(format(ratio))× ≤ 1 + (cipher \(format(cipherMedianMs, 3)) + view write \(format(viewWriteMedianMs, 3))) / plaintext \(format(plaintextMsPerFile, 3)) ms + \(format(MediaBenchCommand.budgetMarginOverFloor, 1)) = \(format(maxRatio))×: \(ratioWithinBudget ? "ok" : "FAILED")")
        lines.append("budget: encrypted hydrated page \(format(hydratedPageMs, 3)) ms ≤ \(format(MediaBenchCommand.budgetPageMs, 0)) ms: \(hydrationWithinBudget ? "ok" : "FAILED")")
        lines.append(withinBudget ? "within budget" : "NOT within budget: " + failures.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }
}
