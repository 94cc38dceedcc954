import ChatVault
import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import VaultKeys
import XCTest

/// The plaintext scan (`chatvault status --marker`) over a cache that holds media whose bytes
/// carry the marker: received media (downloaded), a queued media send's copy and an upload
/// batch's copy. Encrypted, no file under the cache directory holds the marker, and the decrypted
/// views are gone after logout; the plaintext control finds it.
final class MediaMarkerScanTests: XCTestCase {
    static let marker = "MEDIA-SCAN-MARKER-5Z"

    /// A cache of alice's with the three kinds of media, all carrying the marker; logged out.
    func makeCache(encryption: Bool, root: String, runtime: String) async throws -> String {
        let simulator = ChatVaultSimulator(seed: 21, clock: SimulatedClock())
        for uid in ["alice", "bob"] { try simulator.addUser(SimulatedUser(uid: uid, name: uid)) }
        let client = simulator.client(for: "alice")
        let config = OfflineConfig.Builder().setEnabled(true).setEncryption(encryption).setMediaCaching(.off).build()
        var settings = VaultSettings(applicationId: "org.chatvault.clitests.mediascan", rootDirectory: root,
                                     keyStorage: [.custom(MemoryKeyStore())], callbackExecutor: .queue(DispatchQueue(label: "scan")),
                                     retry: .manualOnly)
        settings.media.runtimeDirectory = runtime
        let vault = try OfflineVault(config: config, settings: settings, backend: client)
        _ = await vault.login(userId: "alice")
        var bytes = Data(repeating: 0x20, count: 100_000)
        bytes.replaceSubrange(70_000..<(70_000 + Self.marker.utf8.count), with: Data(Self.marker.utf8))
        let url = "https://media.test/scan.bin"
        simulator.registerMedia(url: url, bytes: bytes, mimeType: "application/octet-stream")
        let id = try simulator.postMedia(.file, [SimulatedAttachment(name: "scan.bin", mimeType: "application/octet-stream", url: url)],
                                         from: "bob", to: .user("alice"))
        let path = try await vault.downloadMedia(url: url, messageServerId: id)
        XCTAssertEqual(FileManager.default.contents(atPath: path), bytes)

        client.network = .offline
        let sources = TemporaryDirectory()
        let file = URL(fileURLWithPath: "\(sources.path)/send.bin")
        try bytes.write(to: file)
        let queued = MediaMessage(receiverUid: "bob", files: [file], messageType: .file, receiverType: .user)
        vault.sendMediaMessage(message: queued, onMessagePending: { _ in }, onMessageSent: { _ in }, onError: { _ in })
        let batch = UploadFileRequest.UploadFileRequestBuilder(vault: vault).set(receiverId: "bob").set(receiverType: .user)
            .set(files: [file]).build()
        _ = try await batch.upload()
        let deadline = ContinuousClock.now + .seconds(10)
        while (try await vault.pendingMessages()).isEmpty, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let directory = try XCTUnwrap(vault.cacheDirectory).path
        let outgoing = FileManager.default.subpaths(atPath: "\(directory)/outgoing") ?? []
        XCTAssertGreaterThanOrEqual(outgoing.filter { $0.contains("/") }.count, 2, "a send's copy and a batch's copy: \(outgoing)")
        await vault.logout()
        return directory
    }

    func views(_ runtime: String) -> [String] {
        (FileManager.default.subpaths(atPath: runtime) ?? []).filter { path in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: "\(runtime)/\(path)", isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }

    func testAnEncryptedCacheWithMediaHasNoPlaintextAnywhereAndNoViewsAfterLogout() async throws {
        let root = TemporaryDirectory()
        let runtime = TemporaryDirectory(prefix: "chatvault-runtime")
        let directory = try await makeCache(encryption: true, root: root.path, runtime: runtime.path)
        XCTAssertEqual(views(runtime.path), [], "no decrypted view survives logout")
        let run = try CLI.run(["status", "--dir", directory, "--marker", Self.marker, "--app", "org.chatvault.clitests.mediascan", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let report = try run.json()
        XCTAssertEqual(report["plaintextHits"] as? [String], [])
        let files = try XCTUnwrap(report["files"] as? [[String: Any]]).compactMap { $0["path"] as? String }
        XCTAssertTrue(files.contains { $0.hasPrefix("media/") }, "the scan saw the received media: \(files)")
        XCTAssertGreaterThanOrEqual(files.filter { $0.hasPrefix("outgoing/") }.count, 2, "and the outgoing copies: \(files)")
        XCTAssertFalse(run.stdout.contains(Self.marker), "the marker itself is never printed")
    }

    func testThePlaintextControlFindsTheMarkerInEveryMediaFile() async throws {
        let root = TemporaryDirectory()
        let runtime = TemporaryDirectory(prefix: "chatvault-runtime")
        let directory = try await makeCache(encryption: false, root: root.path, runtime: runtime.path)
        let report = try CLI.run(["status", "--dir", directory, "--marker", Self.marker, "--app", "org.chatvault.clitests.mediascan", "--json"]).json()
        let hits = try XCTUnwrap(report["plaintextHits"] as? [String])
        XCTAssertTrue(hits.contains { $0.hasPrefix("media/") }, "\(hits)")
        XCTAssertGreaterThanOrEqual(hits.filter { $0.hasPrefix("outgoing/") }.count, 2, "\(hits)")
    }
}
