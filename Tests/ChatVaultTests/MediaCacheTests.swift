import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import VaultKeys
import VaultStore
import XCTest
@testable import ChatVault

/// The media cache against the simulator: downloads (cache, URL, one re-signed URL), progress,
/// shared downloads, hostile servers, the LRU budget, damaged files, decrypted views, and the
/// `.auto` / `.off` modes on the live paths and the sync path.
final class MediaCacheTests: XCTestCase, Polling {
    // MARK: - Support

    final class MediaRecorder: MediaDownloadListener, @unchecked Sendable {
        let downloaded = Mutex<[(String, String, String)]>([])
        let failed = Mutex<[(String?, String, String?)]>([])

        func onMediaDownloaded(_ messageId: String, _ url: String, _ localPath: String) {
            downloaded.withLock { $0.append((messageId, url, localPath)) }
        }

        func onMediaDownloadFailed(_ attachment: Attachment?, _ error: CometChatException) {
            failed.withLock { $0.append((attachment?.fileUrl, error.errorCode, error.details)) }
        }
    }

    struct Rig {
        let h: OutboxHarness
        let runtime: TemporaryDirectory
        let recorder = MediaRecorder()

        var vault: OfflineVault { h.vault }
        var simulator: ChatVaultSimulator { h.simulator }
        var mediaFolder: String { (vault.cacheDirectory?.path ?? "/nonexistent") + "/media" }

        /// The files under `media/` (no temporary files among them).
        func mediaFiles() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: mediaFolder)) ?? []).sorted()
        }

        /// The decrypted views of this account.
        func views() -> [String] {
            let root = "\(runtime.path)/org.chatvault.outboxtests/media-views"
            guard let accounts = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
            return accounts.flatMap { account in
                ((try? FileManager.default.contentsOfDirectory(atPath: "\(root)/\(account)")) ?? []).map { "\(root)/\(account)/\($0)" }
            }
        }

        /// Posts a media message from bob to alice with one attachment per URL; registers the
        /// bytes of those in `bytes`.
        @discardableResult
        func post(_ urls: [String], bytes: [String: Data] = [:], expiresAt: Double? = nil) throws -> Int {
            for (url, data) in bytes { simulator.registerMedia(url: url, bytes: data, mimeType: "image/png", expiresAt: expiresAt) }
            let attachments = urls.enumerated().map { index, url in
                SimulatedAttachment(name: "picture-\(index).png", mimeType: "image/png", url: url, size: bytes[url]?.count ?? 0)
            }
            return try simulator.postMedia(.image, attachments, from: "bob", to: .user("alice"))
        }

        /// The cached phase of a read of the chat with bob (online, the read also opens the chat:
        /// in `.auto` its server phase queues the downloads of what is not cached).
        func cachedMessages() async -> [BaseMessage] {
            let request = MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: "bob").set(limit: 100).build()
            return await request.fetchPrevious().cached ?? []
        }

        /// Whether the cache holds the message (straight from its rows).
        func isCached(_ id: Int) -> Bool {
            guard let cache = vault.openCache else { return false }
            return ((try? cache.reader.sync { db in try db.scalarInt("SELECT count(*) FROM messages WHERE server_id = ?", .int(Int64(id))) }) ?? 0) == 1
        }

        /// Opens the chat with bob online (both phases).
        func openChat() async -> [BaseMessage] {
            let request = MessagesRequest.MessageRequestBuilder(vault: vault).set(uid: "bob").set(limit: 100).build()
            return (try? await request.fetchPrevious().server.get()) ?? []
        }
    }

    func rig(encryption: Bool = true, mode: MediaCachingMode = .off, budget: Int64 = 0,
             media: @escaping (inout MediaSettings) -> Void = { _ in }) async throws -> Rig {
        let runtime = TemporaryDirectory(prefix: "chatvault-runtime")
        let h = try OutboxHarness(configure: { builder in
            builder.setEncryption(encryption).setMediaCaching(mode).setMaxMediaCacheSize(budget)
        }, settings: { settings in
            settings.media.runtimeDirectory = runtime.path
            media(&settings.media)
        })
        addTeardownBlock { await h.vault.logout() }
        let rig = Rig(h: h, runtime: runtime)
        h.vault.addMediaDownloadListener("recorder", rig.recorder)
        await h.login()
        try await waitUntil("connected") { h.client.isConnected }
        try await waitUntil("the first sweep") { h.vault.getLastSyncTimestamp() > 0 }
        await h.vault.waitForSyncIdle()
        return rig
    }

    static func bytes(_ count: Int, marker: String = "MEDIA-MARKER-7Q") -> Data {
        var data = Data(marker.utf8)
        while data.count < count { data.append(UInt8(data.count % 251)) }
        return data.prefix(count)
    }

    func errorCode(_ body: () async throws -> String) async -> String? {
        do {
            _ = try await body()
            return nil
        } catch let error as CometChatException {
            return error.errorCode
        } catch {
            return "\(error)"
        }
    }

    func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    // MARK: - Downloads

    func testADownloadIsCachedEncryptedAndServedFromTheCacheAfterwards() async throws {
        let r = try await rig()
        let url = "https://media.test/cat.png"
        let data = Self.bytes(200_000)
        let id = try r.post([url], bytes: [url: data])

        let path = try await r.vault.downloadMedia(url: url, messageServerId: id)
        XCTAssertEqual(contents(path), data, "the path opens the plaintext")
        XCTAssertTrue(path.hasPrefix(r.runtime.path + "/"), "an encrypted cache hands out a view in the runtime directory")
        let files = r.mediaFiles()
        XCTAssertEqual(files.count, 1)
        let name = try XCTUnwrap(files.first)
        XCTAssertTrue(name.range(of: "^[0-9a-f]{32}$", options: .regularExpression) != nil, "the name reveals nothing: \(name)")
        let onDisk = try XCTUnwrap(contents("\(r.mediaFolder)/\(name)"))
        XCTAssertNil(onDisk.range(of: Data("MEDIA-MARKER-7Q".utf8)), "the bytes at rest are encrypted")
        let mode = try FileManager.default.attributesOfItem(atPath: "\(r.mediaFolder)/\(name)")[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)

        // The cache answers from now on: no second download, re-signed spellings included.
        let again = try await r.vault.downloadMedia(url: url, messageServerId: id)
        XCTAssertEqual(contents(again), data)
        XCTAssertEqual(r.vault.getCachedMediaPath(url + "?sig=whatever#frag").map { contents($0) }, data)
        XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 1)
        let fromMemory = try await r.vault.cachedMediaData(url: url)
        XCTAssertEqual(fromMemory, data, "the bytes without any file")
        var streamed = Data()
        for try await chunk in try r.vault.cachedMediaChunks(url: url) { streamed.append(chunk) }
        XCTAssertEqual(streamed, data)

        // Views go at logout; the encrypted file stays for the next login.
        XCTAssertFalse(r.views().isEmpty)
        await r.vault.logout()
        XCTAssertEqual(r.views(), [], "no decrypted view survives logout")
        XCTAssertNil(r.vault.getCachedMediaPath(url), "nobody logged in")
        await r.h.login()
        XCTAssertEqual(r.vault.getCachedMediaPath(url).map { contents($0) }, data, "cached across logins")
        XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 1)
    }

    /// A media record goes through the cache writer like every other write, and is published
    /// after its commit with the message it belongs to; a second download of the same bytes
    /// (served from the cache) writes and publishes nothing.
    func testAMediaRecordIsWrittenByTheCacheWriterAndPublishedAfterItsCommit() async throws {
        let r = try await rig()
        let url = "https://media.test/published.png"
        let id = try r.post([url], bytes: [url: Self.bytes(10_000)])
        let cache = try XCTUnwrap(r.vault.openCache)
        let published = Mutex<[String]>([])
        r.vault.incoming.subscribe { committed in
            guard case .media(let message) = committed else { return }
            let rows = (try? cache.reader.sync { db in try db.scalarInt("SELECT count(*) FROM media WHERE outgoing = 0") }) ?? nil
            published.withLock { $0.append("\(message.map(\.description) ?? "-") rows=\(rows ?? -1)") }
        }
        _ = try await r.vault.downloadMedia(url: url, messageServerId: id)
        XCTAssertEqual(published.withLock { $0 }, ["\(id) rows=1"])
        _ = try await r.vault.downloadMedia(url: url, messageServerId: id)
        XCTAssertEqual(published.withLock { $0 }, ["\(id) rows=1"], "served from the cache: nothing written")
    }

    func testAPlaintextCacheHandsOutTheFileItself() async throws {
        let r = try await rig(encryption: false)
        let url = "https://media.test/plain.png"
        let data = Self.bytes(5_000)
        let id = try r.post([url], bytes: [url: data])
        let path = try await r.vault.downloadMedia(url: url, messageServerId: id)
        XCTAssertTrue(path.hasPrefix(r.mediaFolder + "/"), path)
        XCTAssertEqual(contents(path), data)
        XCTAssertEqual(r.views(), [])
    }

    func testAnExpiredURLIsReSignedOnceWithTheMessageId() async throws {
        let r = try await rig()
        let url = "https://media.test/expiring.png"
        let data = Self.bytes(3_000)
        let id = try r.post([url], bytes: [url: data])
        r.simulator.expireMedia(url: url)
        let path = try await r.vault.downloadMedia(url: url, messageServerId: id)
        XCTAssertEqual(contents(path), data)
        XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 1, "the expired URL was refused, the re-signed one served")

        // No message id to re-sign with, or a message without that attachment: unresolvable.
        let other = "https://media.test/expiring-2.png"
        let otherId = try r.post([other], bytes: [other: data])
        r.simulator.expireMedia(url: other)
        let withoutId = await errorCode { try await r.vault.downloadMedia(url: other, messageServerId: 0) }
        XCTAssertEqual(withoutId, "ERROR_OFFLINE_MEDIA_UNRESOLVABLE")
        let wrongMessage = await errorCode { try await r.vault.downloadMedia(url: other, messageServerId: id) }
        XCTAssertEqual(wrongMessage, "ERROR_OFFLINE_MEDIA_UNRESOLVABLE")
        let fine = try await r.vault.downloadMedia(url: other, messageServerId: otherId)
        XCTAssertEqual(contents(fine), data)
    }

    func testErrorsAreOfflineCodesNeverHTTPStatuses() async throws {
        let r = try await rig()
        let url = "https://media.test/known.png"
        let data = Self.bytes(1_000)
        let id = try r.post([url], bytes: [url: data])

        let unknown = await errorCode { try await r.vault.downloadMedia(url: "https://media.test/missing.png", messageServerId: id) }
        XCTAssertEqual(unknown, "ERROR_OFFLINE_MEDIA_UNRESOLVABLE")
        for hostile in ["file:///etc/passwd", "../../etc/passwd", "", "https://", "ftp://media.test/x", String(repeating: "a", count: 10_000)] {
            let code = await errorCode { try await r.vault.downloadMedia(url: hostile, messageServerId: id) }
            XCTAssertEqual(code, "ERROR_OFFLINE_MEDIA_UNRESOLVABLE", hostile.prefix(40).description)
        }

        r.h.client.network = .offline
        let offline = await errorCode { try await r.vault.downloadMedia(url: url, messageServerId: id) }
        XCTAssertEqual(offline, "ERROR_OFFLINE_MEDIA_NOT_CACHED")
        r.h.client.network = .online
        _ = try await r.vault.downloadMedia(url: url, messageServerId: id)
        r.h.client.network = .offline
        let cachedOffline = try await r.vault.downloadMedia(url: url, messageServerId: id)
        XCTAssertEqual(contents(cachedOffline), data, "offline, cached bytes are served")

        // The closure form reports on the callback executor.
        let outcome = Mutex<String?>(nil)
        r.vault.downloadMedia(url: "https://media.test/never.png", messageServerId: id, onSuccess: { _ in outcome.withLock { $0 = "ok" } },
                              onError: { error in outcome.withLock { $0 = error.errorCode } })
        try await waitUntil("the closure") { outcome.withLock { $0 } != nil }
        XCTAssertEqual(outcome.withLock { $0 }, "ERROR_OFFLINE_MEDIA_NOT_CACHED")

        await r.vault.logout()
        let disabled = await errorCode { try await r.vault.downloadMedia(url: url, messageServerId: id) }
        XCTAssertEqual(disabled, "ERROR_OFFLINE_DISABLED")
    }

    func testProgressRisesToOneHundredOnlyWhenTheLengthIsKnown() async throws {
        let r = try await rig()
        let url = "https://media.test/progress.png"
        let id = try r.post([url], bytes: [url: Self.bytes(20_000)])
        r.simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 1_000))
        let seen = Mutex<[Int]>([])
        let done = Mutex<String?>(nil)
        r.vault.downloadMedia(url: url, messageServerId: id, onProgress: { p in seen.withLock { $0.append(p) } },
                              onSuccess: { path in done.withLock { $0 = path } }, onError: { e in done.withLock { $0 = e.errorCode } })
        try await waitUntil("done") { done.withLock { $0 } != nil }
        r.h.drain()
        let progress = seen.withLock { $0 }
        XCTAssertEqual(progress.last, 100)
        XCTAssertEqual(progress, progress.sorted(), "never backwards")
        XCTAssertEqual(Set(progress).count, progress.count, "each value once")
        XCTAssertGreaterThanOrEqual(progress.count, 10)
        XCTAssertTrue(progress.allSatisfy { (0...100).contains($0) })

        let unknown = "https://media.test/unknown-length.png"
        let unknownId = try r.post([unknown], bytes: [unknown: Self.bytes(20_000)])
        r.simulator.setMediaBehaviour(url: unknown, SimulatedMediaBehaviour(chunkSize: 1_000, contentLength: .absent))
        let none = Mutex<[Int]>([])
        let path = try await r.vault.downloadMedia(url: unknown, messageServerId: unknownId, progress: { p in none.withLock { $0.append(p) } })
        r.h.drain()
        XCTAssertEqual(contents(path)?.count, 20_000)
        XCTAssertEqual(none.withLock { $0 }, [], "no progress without a length")
    }

    func testSeveralRequestsForOneURLShareOneDownload() async throws {
        let r = try await rig()
        let url = "https://media.test/shared.png"
        let data = Self.bytes(64 * 1024)
        let id = try r.post([url], bytes: [url: data])
        r.simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 2_048, delayPerChunk: .milliseconds(3)))
        let vault = r.vault
        let paths = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<6 { group.addTask { try await vault.downloadMedia(url: url, messageServerId: id) } }
            var out: [String] = []
            for try await path in group { out.append(path) }
            return out
        }
        XCTAssertEqual(paths.count, 6)
        XCTAssertEqual(Set(paths).count, 1, "one file, one view")
        XCTAssertEqual(contents(paths[0]), data)
        XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 1)
    }

    func testHostileDownloadsAreBoundedAndLeaveNothingBehind() async throws {
        let r = try await rig(media: { $0.maxFileBytes = 10_000; $0.idleTimeout = .milliseconds(300) })
        let base = "https://media.test/hostile-"
        var cases: [(String, SimulatedMediaBehaviour)] = [
            ("huge-claim", SimulatedMediaBehaviour(contentLength: .claimed(1 << 40))),
            ("short-claim", SimulatedMediaBehaviour(chunkSize: 500, contentLength: .claimed(10))),
            ("long-claim", SimulatedMediaBehaviour(chunkSize: 500, contentLength: .claimed(9_000))),
            ("endless", SimulatedMediaBehaviour(chunkSize: 1_000, contentLength: .absent, ending: .endless)),
            ("stalling", SimulatedMediaBehaviour(chunkSize: 500, ending: .stalling(afterBytes: 1_000))),
            ("failing", SimulatedMediaBehaviour(chunkSize: 500, ending: .failing(afterBytes: 2_000, with: .timedOut))),
        ]
        cases.append(("negative", SimulatedMediaBehaviour(contentLength: .claimed(-5))))
        for (name, behaviour) in cases {
            let url = base + name
            let id = try r.post([url], bytes: [url: Self.bytes(5_000)])
            r.simulator.setMediaBehaviour(url: url, behaviour)
            let started = ContinuousClock.now
            let code = await errorCode { try await r.vault.downloadMedia(url: url, messageServerId: id) }
            XCTAssertEqual(code, "ERROR_OFFLINE_MEDIA_UNRESOLVABLE", name)
            XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "\(name) is bounded in time")
            XCTAssertNil(r.vault.getCachedMediaPath(url), name)
        }
        let leftovers = ((try? FileManager.default.contentsOfDirectory(atPath: r.mediaFolder)) ?? [])
        XCTAssertEqual(leftovers, [], "no file, temporary or final, is left by a refused download")
        XCTAssertEqual(r.views(), [])
    }

    // MARK: - Modes and paths

    func testAutoDownloadsARealtimeMediaMessageAndHydratesEachAttachmentOnItsOwn() async throws {
        let r = try await rig(mode: .auto)
        let good = "https://media.test/auto-good.png"
        let missing = "https://media.test/auto-missing.png"
        let data = Self.bytes(4_000)
        let id = try r.post([good, missing], bytes: [good: data])
        try await waitUntil("the background downloads") {
            r.h.drain()
            return r.recorder.downloaded.withLock { $0.count } == 1 && r.recorder.failed.withLock { $0.count } == 1
        }
        let (messageId, reportedURL, path) = try XCTUnwrap(r.recorder.downloaded.withLock { $0.first })
        XCTAssertEqual(messageId, String(id))
        XCTAssertEqual(reportedURL, good)
        XCTAssertEqual(contents(path), data)
        let failure = try XCTUnwrap(r.recorder.failed.withLock { $0.first })
        XCTAssertEqual(failure.0, missing)
        XCTAssertEqual(failure.1, "ERROR_MEDIA_DOWNLOAD_FAILED")

        let cached = await r.cachedMessages()
        let message = try XCTUnwrap(cached.first { $0.id == id } as? MediaMessage)
        XCTAssertEqual(message.attachments.count, 2)
        XCTAssertEqual(message.attachments[0].localPath.flatMap { contents($0) }, data, "hydrated on a cached read")
        XCTAssertNil(message.attachments[1].localPath, "each attachment resolves on its own")
        XCTAssertEqual(r.vault.getMediaCachingMode(), .auto)
    }

    func testOffDownloadsNothingOnItsOwn() async throws {
        let r = try await rig(mode: .off)
        let url = "https://media.test/off.png"
        let id = try r.post([url], bytes: [url: Self.bytes(1_000)])
        try await waitUntil("the realtime message") { r.isCached(id) }
        _ = await r.openChat()
        await r.vault.waitForMediaDownloads()
        XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 0)
        let message = await r.cachedMessages().first { $0.id == id } as? MediaMessage
        XCTAssertNotNil(message, "the metadata is cached")
        XCTAssertNil(message?.attachment?.localPath)
        XCTAssertEqual(r.mediaFiles(), [])
    }

    func testASyncedMediaMessageIsMetadataOnlyUntilItsChatIsOpenedOnline() async throws {
        let r = try await rig(mode: .auto)
        // Away: the message reaches the cache through the catch-up sweep, not the connection.
        r.h.client.network = .offline
        try await waitUntil("disconnected") { !r.h.client.isConnected }
        let url = "https://media.test/synced.png"
        let data = Self.bytes(2_000)
        let id = try r.post([url], bytes: [url: data])
        r.h.client.network = .online
        try await waitUntil("the sweep wrote it") { r.isCached(id) }
        await r.vault.waitForSyncIdle()
        await r.vault.waitForMediaDownloads()
        XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 0, "a sync brings metadata only")

        let opened = await r.openChat()
        XCTAssertTrue(opened.contains { $0.id == id })
        try await waitUntil("the download the open started") { r.recorder.downloaded.withLock { $0.count } == 1 }
        await r.vault.waitForMediaDownloads()
        XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 1)
        let message = await r.cachedMessages().first { $0.id == id } as? MediaMessage
        XCTAssertEqual(message?.attachment?.localPath.flatMap { contents($0) }, data)
    }

    // MARK: - Budget and damage

    func testTheBudgetEvictsTheLeastRecentlyUsedFileFirst() async throws {
        let r = try await rig(budget: 5_000)
        var ids: [String: Int] = [:]
        for name in ["a", "b", "c"] {
            let url = "https://media.test/lru-\(name).png"
            ids[name] = try r.post([url], bytes: [url: Self.bytes(2_000)])
        }
        func url(_ name: String) -> String { "https://media.test/lru-\(name).png" }
        _ = try await r.vault.downloadMedia(url: url("a"), messageServerId: ids["a"]!)
        r.h.clock.advance(by: 1)
        _ = try await r.vault.downloadMedia(url: url("b"), messageServerId: ids["b"]!)
        r.h.clock.advance(by: 1)
        XCTAssertNotNil(r.vault.getCachedMediaPath(url("a")), "an explicit access: a is now the most recent")
        r.h.clock.advance(by: 1)
        _ = try await r.vault.downloadMedia(url: url("c"), messageServerId: ids["c"]!)
        XCTAssertNil(r.vault.getCachedMediaPath(url("b")), "b, least recently used, was evicted")
        XCTAssertNotNil(r.vault.getCachedMediaPath(url("a")))
        XCTAssertNotNil(r.vault.getCachedMediaPath(url("c")))
        XCTAssertEqual(r.mediaFiles().count, 2, "the evicted file is gone from disk")
        XCTAssertGreaterThan(r.vault.getCacheSize(), 4_000, "getCacheSize counts the media")
    }

    func testAFileDamagedOrRemovedBehindTheLibrarysBackIsDownloadedAgain() async throws {
        let r = try await rig()
        let damage: [(String, (String) -> Void)] = [
            ("flipped", { path in
                var bytes = [UInt8](FileManager.default.contents(atPath: path) ?? Data())
                bytes[bytes.count / 2] ^= 0x01
                _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
            }),
            ("truncated", { path in _ = truncate(path, 100) }),
            ("removed", { path in _ = unlink(path) }),
        ]
        for (name, spoil) in damage {
            let url = "https://media.test/damaged-\(name).png"
            let data = Self.bytes(80_000)
            let id = try r.post([url], bytes: [url: data])
            let before = Set(r.mediaFiles())
            _ = try await r.vault.downloadMedia(url: url, messageServerId: id)
            let file = try XCTUnwrap(Set(r.mediaFiles()).subtracting(before).first)
            let folder = r.mediaFolder
            // The view made at download time goes at logout; the next login meets the damage.
            await r.vault.logout()
            spoil("\(folder)/\(file)")
            await r.h.login()
            XCTAssertNil(r.vault.getCachedMediaPath(url), "\(name): never served")
            let again = try await r.vault.downloadMedia(url: url, messageServerId: id)
            XCTAssertEqual(contents(again), data, name)
            XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 2, name)
        }
    }

    func testClearingTheCacheRemovesMediaAndViews() async throws {
        let r = try await rig()
        let url = "https://media.test/clear.png"
        let id = try r.post([url], bytes: [url: Self.bytes(3_000)])
        _ = try await r.vault.downloadMedia(url: url, messageServerId: id)
        XCTAssertFalse(r.views().isEmpty)
        try await r.vault.clearOfflineCacheAndWait()
        XCTAssertEqual(r.mediaFiles(), [])
        XCTAssertEqual(r.views(), [])
        XCTAssertNil(r.vault.getCachedMediaPath(url))
        // A new media key: a download after the wipe opens again after a restart.
        _ = try await r.vault.downloadMedia(url: url, messageServerId: id)
        await r.vault.logout()
        await r.h.login()
        XCTAssertEqual(r.vault.getCachedMediaPath(url).map { contents($0)?.count }, 3_000)
    }

    func testWithoutASafeRuntimeDirectoryEncryptedMediaHasNoPathButItsBytes() async throws {
        let r = try await rig(media: { $0.runtimeDirectory = "/nonexistent-runtime-dir" })
        let url = "https://media.test/no-view.png"
        let data = Self.bytes(3_000)
        let id = try r.post([url], bytes: [url: data])
        let code = await errorCode { try await r.vault.downloadMedia(url: url, messageServerId: id) }
        XCTAssertEqual(code, "ERROR_OFFLINE_MEDIA_VIEW_UNAVAILABLE")
        XCTAssertEqual(r.mediaFiles().count, 1, "the bytes are cached (encrypted)")
        XCTAssertNil(r.vault.getCachedMediaPath(url), "but there is no path to hand out")
        let again = await errorCode { try await r.vault.downloadMedia(url: url, messageServerId: id) }
        XCTAssertEqual(again, "ERROR_OFFLINE_MEDIA_VIEW_UNAVAILABLE")
        XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 1, "not downloaded again")
        let fromMemory = try await r.vault.cachedMediaData(url: url)
        XCTAssertEqual(fromMemory, data, "the bytes reach the app without a file")
    }

    func testAResetQuarantinesReceivedMediaWithTheDatabase() async throws {
        let r = try await rig()
        let url = "https://media.test/reset.png"
        let id = try r.post([url], bytes: [url: Self.bytes(3_000)])
        _ = try await r.vault.downloadMedia(url: url, messageServerId: id)
        let folder = try XCTUnwrap(r.vault.cacheDirectory).path
        let file = try XCTUnwrap(r.mediaFiles().first)
        let cacheId = try XCTUnwrap(r.vault.openCache?.cacheId)
        await r.vault.logout()
        // The key is lost: the next login resets the cache.
        try r.h.keyStore.delete(KeyItemID(applicationId: "org.chatvault.outboxtests", account: (folder as NSString).lastPathComponent, cacheId: cacheId))
        let attempt = await r.vault.login(userId: "alice")
        XCTAssertEqual(attempt.resets.map(\.reason), [.keyLost])
        XCTAssertEqual(r.mediaFiles(), [], "the old files left the live cache")
        let entries = try FileManager.default.contentsOfDirectory(atPath: "\(folder)/quarantine")
        let moved = entries.contains { FileManager.default.fileExists(atPath: "\(folder)/quarantine/\($0)/media/\(file)") }
        XCTAssertTrue(moved, "they went into the quarantine entry with the database")
        XCTAssertNil(r.vault.getCachedMediaPath(url))
        XCTAssertEqual(r.views(), [])
    }

    // MARK: - Outgoing copies

    func testAutoKeepsTheOutgoingCopyAsTheSentAttachmentsCachedBytes() async throws {
        let r = try await rig(mode: .auto)
        let files = SourceFiles()
        let photo = files.make("photo.png", bytes: 30_000, seed: 5)
        let original = try XCTUnwrap(FileManager.default.contents(atPath: photo.path))
        let message = MediaMessage(receiverUid: "bob", files: [photo], messageType: .image, receiverType: .user)
        let recorder = r.h.sendMedia(message)
        try await waitUntil("sent") { recorder.isSent }
        let url = try XCTUnwrap(message.attachment?.fileUrl)
        XCTAssertEqual(message.attachment?.localPath.flatMap { contents($0) }, original, "the sent object's attachment points at the cached bytes")
        XCTAssertEqual(r.vault.getCachedMediaPath(url).flatMap { contents($0) }, original)
        XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 0, "nothing downloaded back")
        let localId = try XCTUnwrap(message.localMessageId)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(try XCTUnwrap(r.vault.cacheDirectory).path)/outgoing/\(localId)"))
        let file = try XCTUnwrap(r.mediaFiles().first)
        let atRest = try XCTUnwrap(contents("\(r.mediaFolder)/\(file)"))
        XCTAssertNotEqual(atRest.prefix(64), original.prefix(64), "kept encrypted, as received media")
        let cached = await r.cachedMessages().first { $0.id == recorder.sentIds.first } as? MediaMessage
        XCTAssertEqual(cached?.attachment?.localPath.flatMap { contents($0) }, original, "a later read hydrates it")
    }

    func testOffDropsTheOutgoingCopyOnceSent() async throws {
        let r = try await rig(mode: .off)
        let files = SourceFiles()
        let photo = files.make("photo.png", bytes: 10_000, seed: 6)
        let message = MediaMessage(receiverUid: "bob", files: [photo], messageType: .image, receiverType: .user)
        let recorder = r.h.sendMedia(message)
        try await waitUntil("sent") { recorder.isSent }
        let url = try XCTUnwrap(message.attachment?.fileUrl)
        XCTAssertNil(r.vault.getCachedMediaPath(url))
        XCTAssertNil(message.attachment?.localPath)
        XCTAssertEqual(r.mediaFiles(), [])
    }

    func testOutgoingCopiesAreEncryptedUploadedAsPlaintextAndSurviveASalvage() async throws {
        let r = try await rig(mode: .off)
        r.h.client.network = .offline
        let files = SourceFiles()
        let photo = files.make("photo.png", bytes: 70_000, seed: 8)
        let attachmentFile = files.make("notes.pdf", bytes: 9_000, seed: 9)
        let original = try XCTUnwrap(FileManager.default.contents(atPath: photo.path))
        let batchOriginal = try XCTUnwrap(FileManager.default.contents(atPath: attachmentFile.path))
        let directory = try XCTUnwrap(r.vault.cacheDirectory).path

        // A queued media send: its copy is ciphertext, its pending message opens the plaintext.
        let message = MediaMessage(receiverUid: "bob", files: [photo], messageType: .image, receiverType: .user)
        let recorder = r.h.sendMedia(message)
        try await waitUntil("pending") { recorder.pendingCount > 0 }
        let localId = try XCTUnwrap(message.localMessageId)
        let copy = try XCTUnwrap(contents("\(directory)/outgoing/\(localId)/0"))
        XCTAssertEqual(copy.prefix(4), Data("CVM1".utf8), "the copy is an encrypted media file")
        XCTAssertNil(copy.range(of: original.prefix(64)), "no plaintext in the copy")
        let listed = try await r.vault.pendingMessages()
        let pendingPath = try XCTUnwrap((listed.first { $0.localMessageId == localId } as? MediaMessage)?.attachment?.localPath)
        XCTAssertTrue(pendingPath.hasPrefix(r.runtime.path + "/"), pendingPath)
        XCTAssertEqual(contents(pendingPath), original)

        // An upload batch's copy too.
        let request = r.h.uploadRequest([attachmentFile])
        let items = try await request.upload()
        let batchCopy = try XCTUnwrap(items.first?.localCopyPath)
        XCTAssertTrue(batchCopy.hasPrefix(r.runtime.path + "/"), "the status hands out the view")
        XCTAssertEqual(contents(batchCopy), batchOriginal)

        // A damaged database is reset; the outbox, the batch and the media key are salvaged.
        try fillWithReceivedMessages(try XCTUnwrap(r.vault.openCache))
        await r.vault.logout()
        Damage.middlePage(directory + "/cache.db")
        try await r.h.restart(network: .offline)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory + "/quarantine").filter { !$0.hasPrefix(".") }.count, 1)
        let restored = try XCTUnwrap(r.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0))
        XCTAssertEqual(restored.getItems().first?.localCopyPath.flatMap { contents($0) }, batchOriginal, "still readable: the key came along")

        // Online: what reaches the server is the plaintext, never the ciphertext.
        r.h.client.network = .online
        try await waitUntil("sent after the restart", timeout: .seconds(10)) { r.h.listener.sentLocalIds.contains(localId) }
        let sentId = try XCTUnwrap(r.h.listener.events(for: localId).compactMap { event -> Int? in
            if case .sent(_, let id) = event { return id } else { return nil }
        }.last)
        let sent = try XCTUnwrap(r.simulator.messageJSON(sentId, as: "alice"))
        let url = try XCTUnwrap(sent["data"]?["attachments"]?.arrayValue?.first?["url"]?.stringValue)
        let uploaded = try await r.h.client.downloadMedia(url: url).allBytes()
        XCTAssertEqual(uploaded, original)
        XCTAssertFalse(r.views().contains { $0.contains("c-outgoing~\(localId)") }, "the sent copy's view is gone")
    }

    func testTheLeakageSaysWhetherCopiesOfFilesBeingSentAreEncrypted() async throws {
        let withViews = try await rig()
        XCTAssertEqual(withViews.vault.getOfflineEncryptionStatus()["leakage"] as? String, OfflineEncryptionStatus.encryptedLeakage)
        await withViews.vault.logout()
        let withoutViews = try await rig(media: { $0.runtimeDirectory = "/nonexistent-runtime-dir" })
        XCTAssertEqual(withoutViews.vault.getOfflineEncryptionStatus()["leakage"] as? String, OfflineEncryptionStatus.encryptedLeakageWithoutViews)
        // And it is true: without views a copy stays plain (it must be uploadable).
        withoutViews.h.client.network = .offline
        let files = SourceFiles()
        let photo = files.make("photo.png", bytes: 5_000, seed: 10)
        let message = MediaMessage(receiverUid: "bob", files: [photo], messageType: .image, receiverType: .user)
        let recorder = withoutViews.h.sendMedia(message)
        try await waitUntil("pending") { recorder.pendingCount > 0 }
        let localId = try XCTUnwrap(message.localMessageId)
        let copy = "\(try XCTUnwrap(withoutViews.vault.cacheDirectory).path)/outgoing/\(localId)/0"
        XCTAssertEqual(contents(copy), FileManager.default.contents(atPath: photo.path))
        let plaintext = try await rig(encryption: false)
        XCTAssertEqual(plaintext.vault.getOfflineEncryptionStatus()["leakage"] as? String, OfflineEncryptionStatus.plaintextLeakage)
    }

    func testListLoadsDoNotRefreshRecencyAndQueuedCopiesAreNeitherCountedNorEvicted() async throws {
        let r = try await rig(budget: 5_000)
        func url(_ name: String) -> String { "https://media.test/pin-\(name).png" }
        var ids: [String: Int] = [:]
        for name in ["a", "b", "c", "d"] { ids[name] = try r.post([url(name)], bytes: [url(name): Self.bytes(2_000)]) }
        _ = try await r.vault.downloadMedia(url: url("a"), messageServerId: ids["a"]!)
        r.h.clock.advance(by: 1)
        _ = try await r.vault.downloadMedia(url: url("b"), messageServerId: ids["b"]!)
        r.h.clock.advance(by: 1)
        // A list load hydrates a and b, and does not make a recent.
        let listed = await r.cachedMessages()
        XCTAssertEqual(listed.compactMap { ($0 as? MediaMessage)?.attachment?.localPath }.count, 2)
        r.h.clock.advance(by: 1)
        _ = try await r.vault.downloadMedia(url: url("c"), messageServerId: ids["c"]!)
        XCTAssertNil(r.vault.getCachedMediaPath(url("a")), "a was the least recently accessed despite the list load")
        XCTAssertNotNil(r.vault.getCachedMediaPath(url("b")))

        // A kept copy (an upload batch's, offline): admitting it makes room by evicting received
        // media (the send page's rule: b and c go); once kept, it neither counts toward the
        // received-media trim nor is ever evicted, so the total may pass the budget.
        r.h.client.network = .offline
        let files = SourceFiles()
        let big = files.make("big.png", bytes: 4_000, seed: 11)
        let items = try await r.h.uploadRequest([big]).upload()
        let kept = try XCTUnwrap(items.first?.localCopyPath)
        XCTAssertNil(r.vault.getCachedMediaPath(url("b")), "evicted to admit the copy")
        XCTAssertNil(r.vault.getCachedMediaPath(url("c")))
        r.h.client.network = .online
        ids["e"] = try r.post([url("e")], bytes: [url("e"): Self.bytes(2_000)])
        r.h.clock.advance(by: 1)
        _ = try await r.vault.downloadMedia(url: url("d"), messageServerId: ids["d"]!)
        r.h.clock.advance(by: 1)
        _ = try await r.vault.downloadMedia(url: url("e"), messageServerId: ids["e"]!)
        XCTAssertNotNil(r.vault.getCachedMediaPath(url("d")), "4,000 received bytes fit: the kept copy is not counted")
        XCTAssertNotNil(r.vault.getCachedMediaPath(url("e")))
        XCTAssertTrue(FileManager.default.fileExists(atPath: kept), "the kept copy is never evicted")
    }

    func testAutoKeepsAnUploadBatchsCopiesOnceTheirMessageIsSent() async throws {
        let r = try await rig(mode: .auto)
        let files = SourceFiles()
        let file = files.make("doc.pdf", bytes: 12_000, seed: 12)
        let original = try XCTUnwrap(FileManager.default.contents(atPath: file.path))
        let request = r.h.uploadRequest([file])
        let items = try await request.upload()
        XCTAssertEqual(items.map(\.state), [.uploaded])
        let batchId = try XCTUnwrap(request.batchId)
        let message = MediaMessage(receiverUid: "bob", fileurl: nil, messageType: .file, receiverType: .user)
        message.attachments = request.getAttachments()
        let sent = r.h.sendMedia(message)
        try await waitUntil("sent") { sent.isSent }
        let directory = try XCTUnwrap(r.vault.cacheDirectory).path
        try await waitUntil("the batch ended") { !FileManager.default.fileExists(atPath: "\(directory)/outgoing/upload-\(batchId)") }
        let url = try XCTUnwrap(items.first?.attachment?.fileUrl)
        XCTAssertEqual(r.vault.getCachedMediaPath(url).flatMap { contents($0) }, original, "kept as the sent attachment's bytes")
        XCTAssertEqual(r.simulator.mediaDownloadCount(url: url), 0)
        XCTAssertFalse(r.views().contains { $0.contains("c-outgoing~upload-") }, "the copy's view went with the batch")
    }

    func testThreadsAndReactionEventsCarryTheCachedPath() async throws {
        let r = try await rig(mode: .auto)
        let url = "https://media.test/thread-parent.png"
        let data = Self.bytes(3_000)
        let id = try r.post([url], bytes: [url: data])
        try await waitUntil("the background download") { r.h.drain(); return r.recorder.downloaded.withLock { $0.count } == 1 }
        _ = try r.simulator.postText("a reply", from: "alice", to: .user("bob"), parentId: id)
        let threads = ThreadsRequest.ThreadsRequestBuilder(vault: r.vault).build()
        let fetched = try await threads.fetchNext().server.get()
        let thread = try XCTUnwrap(fetched.first { $0.parentMessageId == id })
        XCTAssertEqual((thread.parentMessage as? MediaMessage)?.attachment?.localPath.flatMap { contents($0) }, data, "a thread's parent")

        // A reaction on the message: the event's message carries the path too.
        let events = MessageEventsRecorder()
        r.vault.addMessageListener("reactions", events)
        try r.simulator.react("👍", to: id, by: "bob")
        try await waitUntil("the reaction") { r.h.drain(); return events.reacted.withLock { $0 } != nil }
        let reacted = events.reacted.withLock { $0 }
        XCTAssertEqual((reacted as? MediaMessage)?.attachment?.localPath.flatMap { contents($0) }, data)
    }
}

final class MessageEventsRecorder: CometChatMessageDelegate, @unchecked Sendable {
    let reacted = Mutex<BaseMessage?>(nil)
    func onMessageReactionAdded(reactionEvent: ReactionEvent) { reacted.withLock { $0 = reactionEvent.message } }
}
