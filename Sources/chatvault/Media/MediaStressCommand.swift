import ChatVault
import ChatVaultSimulator
import Foundation

/// `chatvault media-stress --dir D --user U --runtime-dir R [--bytes N] [--keystore …] [--key-dir K]`
/// (hidden; for the crash test): a media download under SIGKILL.
///
/// Builds the same server on every run (one media message to U whose attachment is N bytes,
/// default 2 MiB, of a fixed pattern, served in 8 KiB chunks 2 ms apart), opens the encrypted
/// cache in D (decrypted views under R), and downloads the attachment with `downloadMedia`.
/// Prints `ready` once the cache is open, `cached yes|no` (whether the cache already answers for
/// the URL), `progress <p>` as the download goes, then `verified` once the cached bytes, read back
/// through `cachedMediaData`, equal the pattern. Exit 1 when the cache cannot open, the download
/// fails, or the bytes differ. Prints no content.
enum MediaStressCommand {
    static let verb = "media-stress"
    static let url = "https://media.stress.test/big.bin"

    static func pattern(_ count: Int) -> Data {
        Data((0..<count).map { i in UInt8(truncatingIfNeeded: i &* 31 &+ (i >> 8)) })
    }

    static func run(_ raw: [String]) async throws -> Int32 {
        var args = try Arguments(raw, switches: ["json"])
        let common = try CommonOptions(&args)
        let root = absolutePath(try args.required("dir"))
        let user = try args.required("user")
        let runtime = absolutePath(try args.required("runtime-dir"))
        let count = try args.int("bytes", default: 2 << 20, range: 1...(64 << 20))
        try args.rejectUnknown()

        let simulator = ChatVaultSimulator(seed: 7, clock: SimulatedClock())
        let id: Int
        do {
            for uid in [user, "media-peer"] { try simulator.addUser(SimulatedUser(uid: uid, name: uid)) }
            simulator.registerMedia(url: url, bytes: pattern(count), mimeType: "application/octet-stream")
            simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 8 * 1024, delayPerChunk: .milliseconds(2)))
            id = try simulator.postMedia(.file, [SimulatedAttachment(name: "big.bin", mimeType: "application/octet-stream", url: url, size: count)],
                                         from: "media-peer", to: .user(user))
        } catch {
            throw CLIError.failure("the simulated server refused its seed: \(error)")
        }
        let callbacks = DispatchQueue(label: "chatvault.media-stress.callbacks")
        let vault = try makeOutboxVault(common, root: root, encryption: true, backend: simulator.client(for: user),
                                        callbacks: callbacks) { settings in
            settings.media.runtimeDirectory = runtime
        }
        let attempt = await vault.login(userId: user)
        guard vault.isOfflineEnabled(), vault.openCache != nil else {
            await vault.logout()
            throw CLIError.failure("cannot stress media: the cache is \(attempt.state.outcome)"
                                   + (attempt.state.unavailableReason.map { " (\($0))" } ?? ""))
        }
        emit("ready")
        emit("cached \(vault.getCachedMediaPath(url) == nil ? "no" : "yes")")
        do {
            _ = try await vault.downloadMedia(url: url, messageServerId: id, progress: { percent in emit("progress \(percent)") })
            let bytes = try await vault.cachedMediaData(url: url)
            callbacks.sync {}
            guard bytes == pattern(count) else {
                await vault.logout()
                throw CLIError.failure("the cached bytes differ from the server's")
            }
        } catch let error as CometChatException {
            await vault.logout()
            throw CLIError.failure("the download failed: \(error.errorCode)")
        }
        await vault.logout()
        emit("verified")
        return 0
    }
}
