import ChatVault
import ChatVaultTesting
import Foundation
import VaultKeys
import VaultStore

/// `chatvault bench keys [--messages N] [--runs R] [--json]`: what key management costs.
///
/// - rotation of an `N`-message cache (default 100,000; 10 conversations, 20 unsent messages),
///   `R` times (default 3) in a row: wall time (the open before it included) and the peak disk use
///   of the database files (old and new side by side before the swap) against the database's size;
/// - the recovery key derivation (PBKDF2-HMAC-SHA512 × 1,000,000 then AES-256-GCM): wrapping and
///   unwrapping, 5 runs each, what every recovery attempt and every new secret costs;
/// - export and import of the same cache (one run each; the import includes its key derivation).
///
/// The key lives in a file store inside a fresh temporary directory (removed afterwards): the
/// figures are the cache's work, not a keyring's. Medians, never means.
enum KeyBenchCommand {
    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw)
        let json = args.flag("json")
        let messages = try args.int("messages", default: 100_000, range: 1...5_000_000)
        let runs = try args.int("runs", default: 3, range: 1...50)
        try args.rejectUnknown()
        let scratch: TemporaryDirectory
        do {
            scratch = try TemporaryDirectory.create(prefix: "chatvault-bench-keys")
        } catch {
            throw CLIError.failure("\(error)")
        }
        let directory = CacheDirectory(root: scratch.path + "/caches", account: CacheDirectory.account(applicationId: "org.chatvault.bench", userId: "bench"))
        var config = StoreConfiguration(directory: directory, applicationId: "org.chatvault.bench", account: directory.account,
                                        keyLabel: "chatvault bench key", encryption: true, failureBehavior: .onlineOnly,
                                        keyStores: [SoftwareKeyStore(directory: scratch.path + "/keys")])
        config.synchronousIntegrityCheckLimit = -1
        let created = CacheOpener.open(config)
        guard let cache = created.cache else { throw CLIError.failure("cannot create the bench cache: \(created.outcome.code)") }
        try cache.writer.sync { db in try Seeder.fill(db, messages: messages, pending: 20, conversations: 10, marker: "bench-keys") }
        cache.close()
        var st = stat()
        let databaseBytes: Int64 = lstat(directory.database, &st) == 0 ? Int64(st.st_size) : 0

        var rotations: [Double] = []
        var peaks: [Int64] = []
        for _ in 0..<runs {
            let report: KeyChangeReport
            do {
                report = try KeyManager.rotate(config)
            } catch {
                throw CLIError.failure("the rotation failed: \(error)")
            }
            rotations.append(report.seconds * 1000)
            peaks.append(report.peakBytes)
        }

        var wraps: [Double] = [], unwraps: [Double] = []
        let key = try CacheKey.generate()
        let secret = try RecoverySecret.generate()
        for _ in 0..<5 {
            var watch = Stopwatch()
            let wrapped = try WrappedCacheKey.wrap(key, keyId: "bench", secret: secret)
            watch.lap("wrap")
            _ = try wrapped.unwrap(with: secret)
            watch.lap("unwrap")
            wraps.append(watch.laps[0].ms)
            unwraps.append(watch.laps[1].ms)
        }

        var watch = Stopwatch()
        let exportPath = scratch.path + "/bench.cvx"
        let exported: CacheExportReport
        do {
            exported = try CacheTransfer.export(config, to: exportPath)
            watch.lap("export")
        } catch {
            throw CLIError.failure("the export failed: \(error)")
        }
        var elsewhere = config
        elsewhere.directory = CacheDirectory(root: scratch.path + "/elsewhere", account: directory.account)
        elsewhere.keyStores = [SoftwareKeyStore(directory: scratch.path + "/keys-elsewhere")]
        watch.skip()
        do {
            _ = try CacheTransfer.importCache(elsewhere, from: exportPath, secret: exported.secret)
            watch.lap("import")
        } catch {
            throw CLIError.failure("the import failed: \(error)")
        }

        func summary(_ t: TimingSummary) -> JSON {
            .object([("runs", .int(t.runs)), ("medianMs", .double(t.medianMs)), ("p90Ms", .double(t.p90Ms)), ("minMs", .double(t.minMs)),
                     ("maxMs", .double(t.maxMs))])
        }
        let rotation = TimingSummary(rotations)
        let peak = peaks.sorted()[peaks.count / 2]
        let wrap = TimingSummary(wraps), unwrap = TimingSummary(unwraps)
        if json {
            emit(JSON.object([
                ("build", .string(OpenBenchReport.build)),
                ("messages", .int(messages)),
                ("databaseBytes", .int(databaseBytes)),
                ("rotation", summary(rotation)),
                ("rotationPeakBytes", .int(peak)),
                ("rotationPeakOverDatabase", .double(Double(peak) / Double(max(1, databaseBytes)))),
                ("recoveryWrap", summary(wrap)),
                ("recoveryUnwrap", summary(unwrap)),
                ("kdfIterations", .int(WrappedCacheKey.defaultIterations)),
                ("exportMs", .double(watch.laps[0].ms)),
                ("exportBytes", .int(exported.bytes)),
                ("importMs", .double(watch.laps[1].ms)),
            ]).render())
        } else {
            emit("""
                key management (\(OpenBenchReport.build) build), a cache of \(messages) messages, database \(databaseBytes >> 20) MiB:
                  rotation: median \(String(format: "%.0f", rotation.medianMs)) ms over \(runs) (p90 \(String(format: "%.0f", rotation.p90Ms)) ms); peak disk \(peak >> 20) MiB (\(String(format: "%.2f", Double(peak) / Double(max(1, databaseBytes)))) x the database)
                  recovery key derivation (PBKDF2-HMAC-SHA512 x \(WrappedCacheKey.defaultIterations)): wrap median \(String(format: "%.0f", wrap.medianMs)) ms, unwrap median \(String(format: "%.0f", unwrap.medianMs)) ms
                  export \(String(format: "%.0f", watch.laps[0].ms)) ms (\(exported.bytes >> 20) MiB), import \(String(format: "%.0f", watch.laps[1].ms)) ms
                """)
        }
        return 0
    }
}
