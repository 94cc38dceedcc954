import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

/// Durable media sends against the simulator: the cache's own copy exists before pending, the
/// message survives the original's deletion and a restart, copy failures, the media byte budget,
/// upload progress, server refusals, and sends of already uploaded attachments.
final class OutboxMediaTests: XCTestCase {
    // MARK: The copy

    func testTheCopyIsPrivateAndCompleteBeforePendingFiresAndGoesOnceSent() async throws {
        let h = try OutboxHarness()
        let files = SourceFiles()
        let photo = files.make("photo.jpg", bytes: 3000, seed: 1)
        let notes = files.make("notes.pdf", bytes: 70_000, seed: 2)
        h.client.network = .offline
        await h.login()
        let directory = try h.cacheDirectoryPath()
        let seen = Mutex<[String]>([])
        let recorder = SendRecorder()
        let message = MediaMessage(receiverUid: "bob", files: [photo, notes], messageType: .file, receiverType: .user)
        h.vault.sendMediaMessage(message: message, onMessagePending: { m in
            // Checked inside the callback: the copies must already be there, private and whole.
            var problems: [String] = []
            let localId = m.localMessageId ?? "?"
            for dir in ["\(directory)/outgoing", "\(directory)/outgoing/\(localId)"] where mode(of: dir) != 0o700 {
                problems.append("\(dir) is \(String(mode(of: dir) ?? 0, radix: 8))")
            }
            for (index, original) in [photo, notes].enumerated() {
                let copy = "\(directory)/outgoing/\(localId)/\(index)"
                if mode(of: copy) != 0o600 { problems.append("copy \(index) mode \(String(mode(of: copy) ?? 0, radix: 8))") }
                if FileManager.default.contents(atPath: copy) != FileManager.default.contents(atPath: original.path) {
                    problems.append("copy \(index) differs")
                }
            }
            seen.withLock { $0 = problems.isEmpty ? ["ok"] : problems }
            recorder.onPending(m)
        }, onMessageSent: recorder.onSent, onError: recorder.onError)
        await waitUntil { recorder.errors.count == 1 }
        XCTAssertEqual(seen.withLock { $0 }, ["ok"])
        let localId = try XCTUnwrap(message.localMessageId)
        XCTAssertEqual(try h.outgoingMediaRows().map(\.owner), [localId, localId], "the copies count toward the media budget")

        h.client.network = .online
        await waitUntil { recorder.isSent }
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(directory)/outgoing/\(localId)"), "a sent message's copies are removed")
        XCTAssertEqual(try h.outgoingMediaRows().count, 0)
        // The sent message's attachments download as the original bytes.
        let sent = try XCTUnwrap(h.simulator.messageJSON(try XCTUnwrap(recorder.sentIds.first), as: "alice"))
        let urls = try XCTUnwrap(sent["data"]?["attachments"]?.arrayValue).compactMap { $0["url"]?.stringValue }
        XCTAssertEqual(urls.count, 2)
        for (url, original) in zip(urls, [photo, notes]) {
            let download = try await h.client.downloadMedia(url: url).allBytes()
            XCTAssertEqual(download, FileManager.default.contents(atPath: original.path))
        }
        XCTAssertEqual(message.attachments.map(\.fileUrl), urls, "the object the app sent adopts the uploaded attachments")
        XCTAssertEqual(h.simulator.uploads.map(\.name), ["photo.jpg", "notes.pdf"])
    }

    func testTheOriginalDeletedAfterPendingStillUploadsAndSendsAfterARestart() async throws {
        let h = try OutboxHarness()
        let files = SourceFiles()
        let original = files.make("holiday.mp4", bytes: 200_000, seed: 3)
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: original.path))
        h.client.network = .offline
        await h.login()
        let message = MediaMessage(receiverUid: "bob", files: [original], messageType: .video, receiverType: .user)
        let recorder = h.sendMedia(message)
        await waitUntil { recorder.errors == [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE] }
        let localId = try XCTUnwrap(message.localMessageId)
        try FileManager.default.removeItem(at: original)

        try await h.restart(network: .online)
        await waitUntil { h.listener.sentLocalIds.contains(localId) }
        guard case .sent(_, let serverId)? = h.listener.events(for: localId).last else { return XCTFail("not sent") }
        let sent = try XCTUnwrap(h.simulator.messageJSON(serverId, as: "bob"))
        let url = try XCTUnwrap(sent["data"]?["attachments"]?.arrayValue?.first?["url"]?.stringValue)
        let download = try await h.client.downloadMedia(url: url).allBytes()
        XCTAssertEqual(download, bytes, "uploaded from the cache's own copy")
        XCTAssertEqual(h.simulator.uploads.count, 1)
        XCTAssertFalse(recorder.isSent, "the closures of the first launch are gone")
        XCTAssertFalse(FileManager.default.fileExists(atPath: try h.cacheDirectoryPath() + "/outgoing/\(localId)"))
        XCTAssertEqual(try h.rows().count, 0)
    }

    func testAFileThatCannotBeCopiedFailsOnlyWithCopyFailedAndLeavesNothing() async throws {
        let h = try OutboxHarness()
        await h.login()
        let files = SourceFiles()
        let good = files.make("good.png", bytes: 500, seed: 4)
        let fifo = files.path("pipe.bin")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        var unusable: [(String, [URL])] = [
            ("missing", [URL(fileURLWithPath: files.path("missing.png"))]),
            ("directory", [URL(fileURLWithPath: files.path(""))]),
            // Regular by fstat, but reading it fails (EIO): unreadable even for root.
            ("unreadable", [URL(fileURLWithPath: "/proc/self/mem")]),
            // Not a regular file: refused at once, never blocking until a writer shows up.
            ("fifo", [URL(fileURLWithPath: fifo)]),
            ("good then missing", [good, URL(fileURLWithPath: files.path("gone.png"))]),
        ]
        if geteuid() != 0 {
            let locked = files.make("locked.png", bytes: 10, seed: 5)
            chmod(locked.path, 0)
            unusable.append(("no permission", [locked]))
        }
        for (what, urls) in unusable {
            let message = MediaMessage(receiverUid: "bob", files: urls, messageType: .image, receiverType: .user)
            let recorder = h.sendMedia(message)
            await waitUntil(10, what) { !recorder.events.isEmpty }
            try await Task.sleep(for: .milliseconds(30))
            h.drain()
            XCTAssertEqual(recorder.events, [.error(CometChatConstants.Errors.ERROR_OFFLINE_MEDIA_COPY_FAILED)], what)
            XCTAssertEqual(message.messageStatus, .failed, what)
            XCTAssertEqual(message.getFailureReason(), .permanent, what)
        }
        XCTAssertEqual(h.listener.events, [], "no outbox event for a send that was never queued")
        XCTAssertEqual(try h.rows().count, 0)
        XCTAssertEqual(try h.outgoingMediaRows().count, 0)
        let left = (try? FileManager.default.contentsOfDirectory(atPath: try h.cacheDirectoryPath() + "/outgoing")) ?? []
        XCTAssertEqual(left, [], "no copy is left behind")
        XCTAssertEqual(h.client.callCount(.uploadMedia), 0)
    }

    func testAFullQueueThatRejectsNewcomersRefusesAMediaSendBeforeCopyingItsFiles() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxPendingMessages(1) })
        h.client.network = .offline
        await h.login()
        let files = SourceFiles()
        let first = h.send(TextMessage(receiverUid: "bob", text: "fills the queue", receiverType: .user))
        await waitUntil { first.errors.count == 1 }
        // A file that cannot be copied: had the copy been tried, the send would fail with
        // ERROR_OFFLINE_MEDIA_COPY_FAILED; checked first, it is refused as the queue is full.
        let missing = MediaMessage(receiverUid: "bob", files: [URL(fileURLWithPath: files.path("missing.png"))],
                                   messageType: .image, receiverType: .user)
        let refusedMissing = h.sendMedia(missing)
        let big = MediaMessage(receiverUid: "bob", files: [files.make("big.mov", bytes: 200_000, seed: 21)], messageType: .video, receiverType: .user)
        let refusedBig = h.sendMedia(big)
        await waitUntil { refusedMissing.errors.count == 1 && refusedBig.errors.count == 1 }
        h.drain()
        XCTAssertEqual(refusedMissing.errors, [CometChatConstants.Errors.ERROR_QUEUE_FULL])
        XCTAssertEqual(refusedBig.errors, [CometChatConstants.Errors.ERROR_QUEUE_FULL])
        XCTAssertEqual(big.getFailureReason(), .queueFull)
        XCTAssertEqual(try h.rows().count, 1, "only the first message is queued")
        XCTAssertEqual(try h.outgoingMediaRows().count, 0)
        let left = (try? FileManager.default.contentsOfDirectory(atPath: try h.cacheDirectoryPath() + "/outgoing")) ?? []
        XCTAssertEqual(left, [], "nothing was copied for a refused send")

        // Once there is room, a media send is copied and queued as usual.
        h.client.network = .online
        await waitUntil { first.isSent }
        h.client.network = .offline
        let later = MediaMessage(receiverUid: "bob", files: [files.make("later.jpg", bytes: 500, seed: 22)], messageType: .image, receiverType: .user)
        let queued = h.sendMedia(later)
        await waitUntil { queued.errors.count == 1 }
        XCTAssertEqual(queued.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE], "queued, not refused")
        let laterId = try XCTUnwrap(later.localMessageId)
        XCTAssertTrue(FileManager.default.fileExists(atPath: try h.cacheDirectoryPath() + "/outgoing/\(laterId)/0"))
    }

    // MARK: The media byte budget

    func testReceivedMediaIsEvictedLeastRecentlyUsedFirstToAdmitASend() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxMediaCacheSize(2000) })
        h.client.network = .offline
        await h.login()
        let files = SourceFiles()
        // Another unsent message's copy (400 bytes): counted, never evicted.
        let earlier = h.sendMedia(MediaMessage(receiverUid: "carol", files: [files.make("earlier.jpg", bytes: 400, seed: 6)],
                                               messageType: .image, receiverType: .user))
        await waitUntil { earlier.errors.count == 1 }
        let oldest = try h.insertReceivedMedia("oldest", bytes: 300, lastAccess: 10)
        let newest = try h.insertReceivedMedia("newest", bytes: 300, lastAccess: 30)
        let middle = try h.insertReceivedMedia("middle", bytes: 300, lastAccess: 20)
        // 400 + 900 used; 900 more needs 1300 + 900 - 2000 = 200 freed: the oldest only.
        let message = MediaMessage(receiverUid: "bob", files: [files.make("new.jpg", bytes: 900, seed: 7)], messageType: .image, receiverType: .user)
        let recorder = h.sendMedia(message)
        await waitUntil { recorder.errors.count == 1 }
        XCTAssertEqual(recorder.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE], "queued")
        XCTAssertEqual(try h.receivedMediaKeys(), ["middle", "newest"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: oldest), "the evicted file is deleted")
        XCTAssertTrue(FileManager.default.fileExists(atPath: middle))
        XCTAssertTrue(FileManager.default.fileExists(atPath: newest))

        // 1900 used; 500 more needs 400 freed: both remaining received files, oldest first.
        let second = h.sendMedia(MediaMessage(receiverUid: "bob", files: [files.make("second.jpg", bytes: 500, seed: 8)],
                                              messageType: .image, receiverType: .user))
        await waitUntil { second.errors.count == 1 }
        XCTAssertEqual(second.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE])
        XCTAssertEqual(try h.receivedMediaKeys(), [])
        XCTAssertFalse(FileManager.default.fileExists(atPath: middle))
        XCTAssertFalse(FileManager.default.fileExists(atPath: newest))
        let pending = try await h.pending()
        XCTAssertEqual(pending.count, 3, "the other unsent messages keep their copies")
        for message in pending {
            for attachment in (message as? MediaMessage)?.attachments ?? [] {
                XCTAssertTrue(FileManager.default.fileExists(atPath: try XCTUnwrap(attachment.localPath)))
            }
        }
    }

    func testASendThatCannotFitEvenAfterEvictingAllReceivedMediaIsRefusedAndEvictsNothing() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxMediaCacheSize(2000) })
        h.client.network = .offline
        await h.login()
        let files = SourceFiles()
        let earlier = h.sendMedia(MediaMessage(receiverUid: "carol", files: [files.make("earlier.jpg", bytes: 1000, seed: 9)],
                                               messageType: .image, receiverType: .user))
        await waitUntil { earlier.errors.count == 1 }
        let a = try h.insertReceivedMedia("a", bytes: 300, lastAccess: 1)
        let b = try h.insertReceivedMedia("b", bytes: 300, lastAccess: 2)
        // 1600 used; 1100 more would need 700 freed, but only 600 bytes are received media.
        let message = MediaMessage(receiverUid: "bob", files: [files.make("big.mov", bytes: 1100, seed: 10)], messageType: .video, receiverType: .user)
        let recorder = h.sendMedia(message)
        await waitUntil { recorder.errors.count == 1 }
        h.drain()
        let localId = try XCTUnwrap(message.localMessageId)
        XCTAssertEqual(recorder.events, [.pending(localId, .pending), .error(CometChatConstants.Errors.ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW)])
        XCTAssertEqual(h.listener.events(for: localId), [.pending(localId), .failed(localId, .byteOverflow)])
        XCTAssertEqual(message.messageStatus, .failed)
        XCTAssertEqual(message.getFailureReason(), .byteOverflow)
        XCTAssertFalse(try h.rows().map(\.0).contains(localId), "a refused send has no row")
        XCTAssertFalse(FileManager.default.fileExists(atPath: try h.cacheDirectoryPath() + "/outgoing/\(localId)"), "its copies are removed")
        XCTAssertEqual(try h.receivedMediaKeys(), ["a", "b"], "nothing was evicted for a send that was refused")
        XCTAssertTrue(FileManager.default.fileExists(atPath: a))
        XCTAssertTrue(FileManager.default.fileExists(atPath: b))
        let pending = try await h.pending()
        XCTAssertEqual(pending.count, 1)
        XCTAssertTrue(FileManager.default.fileExists(atPath: try XCTUnwrap((pending.first as? MediaMessage)?.attachments.first?.localPath)))

        let retry = Mutex<CometChatException?>(nil)
        h.vault.retryMessage(localId, onSuccess: { XCTFail("no row to retry") }, onError: { e in retry.withLock { $0 = e } })
        await waitUntil { retry.withLock { $0 } != nil }
        XCTAssertEqual(retry.withLock { $0 }?.code, .offlineMessageNotFound)
    }

    func testARefusalOverTheByteBudgetRollsBackADropOldestEviction() async throws {
        let h = try OutboxHarness(configure: {
            $0.setMaxMediaCacheSize(1000).setMaxPendingMessages(1).setPendingQueueOverflowPolicy(.dropOldest)
        })
        h.client.network = .offline
        await h.login()
        let files = SourceFiles()
        let first = MediaMessage(receiverUid: "bob", files: [files.make("first.jpg", bytes: 600, seed: 11)], messageType: .image, receiverType: .user)
        let kept = h.sendMedia(first)
        await waitUntil { kept.errors.count == 1 }
        let firstId = try XCTUnwrap(first.localMessageId)
        // The queue is full, so `.dropOldest` would evict the first message, yet 1200 bytes do
        // not fit even in an empty media cache: the send is refused and the first one stays.
        let huge = MediaMessage(receiverUid: "bob", files: [files.make("huge.jpg", bytes: 1200, seed: 12)], messageType: .image, receiverType: .user)
        let refused = h.sendMedia(huge)
        await waitUntil { refused.errors.count == 1 }
        try await Task.sleep(for: .milliseconds(50))
        h.drain()
        XCTAssertEqual(refused.errors, [CometChatConstants.Errors.ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW])
        XCTAssertEqual(kept.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE], "the first message was not evicted")
        XCTAssertEqual(try h.rows().map(\.0), [firstId])
        XCTAssertEqual(try h.outgoingMediaRows().map(\.owner), [firstId])
        XCTAssertTrue(FileManager.default.fileExists(atPath: try h.cacheDirectoryPath() + "/outgoing/\(firstId)/0"))
        XCTAssertEqual(h.listener.events(for: firstId), [.pending(firstId)])

        h.client.network = .online
        await waitUntil { kept.isSent }
    }

    func testAZeroMediaCacheSizeMeansUnlimited() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxMediaCacheSize(0) })
        h.client.network = .offline
        await h.login()
        let received = try h.insertReceivedMedia("huge", bytes: 1 << 40, lastAccess: 1)
        let files = SourceFiles()
        let message = MediaMessage(receiverUid: "bob", files: [files.make("a.jpg", bytes: 5000, seed: 13)], messageType: .image, receiverType: .user)
        let recorder = h.sendMedia(message)
        await waitUntil { recorder.errors.count == 1 }
        XCTAssertEqual(recorder.errors, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE], "queued, never over a budget")
        XCTAssertEqual(try h.receivedMediaKeys(), ["huge"], "nothing evicted")
        XCTAssertTrue(FileManager.default.fileExists(atPath: received))
    }

    // MARK: Ending a media message

    func testDiscardingAMediaMessageRemovesItsCopies() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let files = SourceFiles()
        let message = MediaMessage(receiverUid: "bob", files: [files.make("a.jpg", bytes: 100, seed: 14), files.make("b.jpg", bytes: 100, seed: 15)],
                                   messageType: .image, receiverType: .user)
        let recorder = h.sendMedia(message)
        await waitUntil { recorder.errors.count == 1 }
        let localId = try XCTUnwrap(message.localMessageId)
        let folder = try h.cacheDirectoryPath() + "/outgoing/\(localId)"
        XCTAssertTrue(FileManager.default.fileExists(atPath: folder + "/1"))
        try await h.vault.discard(localId)
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder))
        XCTAssertEqual(try h.outgoingMediaRows().count, 0)
        XCTAssertEqual(try h.rows().count, 0)
        h.client.network = .online
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(h.client.serverCallCount(.uploadMedia), 0, "nothing of a discarded message is uploaded")
    }

    // MARK: Uploads

    func testUploadProgressSurvivesARestartAndNothingIsUploadedTwice() async throws {
        let h = try OutboxHarness()
        await h.login()
        let files = SourceFiles()
        let originals = [files.make("one.jpg", bytes: 1000, seed: 16), files.make("two.jpg", bytes: 2000, seed: 17)]
        h.client.failNext(.send, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
        let message = MediaMessage(receiverUid: "bob", files: originals, messageType: .image, receiverType: .user)
        let recorder = h.sendMedia(message)
        await waitUntil { recorder.errors == ["ERR_SERVICE_UNAVAILABLE"] }
        let localId = try XCTUnwrap(message.localMessageId)
        XCTAssertEqual(h.simulator.uploads.map(\.name), ["one.jpg", "two.jpg"], "both uploaded before the send failed")
        let uploadedURLs = h.simulator.uploads.map(\.url)
        for original in originals { try FileManager.default.removeItem(at: original) }

        try await h.restart()
        let failed = try await h.pending()
        XCTAssertEqual(failed.map(\.messageStatus), [.failed])
        XCTAssertEqual((failed.first as? MediaMessage)?.attachments.map(\.fileUrl), uploadedURLs, "the uploads' attachments were kept")
        let retried = Mutex(false)
        h.vault.retryMessage(localId, onSuccess: { retried.withLock { $0 = true } }, onError: { XCTFail("retry failed: \($0)") })
        await waitUntil { retried.withLock { $0 } }
        XCTAssertEqual(h.simulator.uploads.count, 2, "no file was uploaded a second time")
        XCTAssertEqual(h.client.callCount(.uploadMedia), 0, "the relaunched device uploaded nothing")
        guard case .sent(_, let serverId)? = h.listener.events(for: localId).last else { return XCTFail("not sent") }
        let sent = try XCTUnwrap(h.simulator.messageJSON(serverId, as: "bob"))
        XCTAssertEqual(sent["data"]?["attachments"]?.arrayValue?.compactMap { $0["url"]?.stringValue }, uploadedURLs)
    }

    func testAnUploadRefusedByTheServerFailsPermanent() async throws {
        let h = try OutboxHarness()
        await h.login()
        h.simulator.maxUploadBytes = 16
        let files = SourceFiles()
        let message = MediaMessage(receiverUid: "bob", files: [files.make("large.jpg", bytes: 1000, seed: 18)], messageType: .image, receiverType: .user)
        let recorder = h.sendMedia(message)
        await waitUntil { !recorder.errors.isEmpty }
        h.drain()
        let localId = try XCTUnwrap(message.localMessageId)
        XCTAssertEqual(recorder.errors, ["ERR_FILE_TOO_LARGE"])
        XCTAssertEqual(message.messageStatus, .failed)
        XCTAssertEqual(message.getFailureReason(), .permanent)
        XCTAssertEqual(h.listener.events(for: localId), [.pending(localId), .failed(localId, .permanent)])
        XCTAssertEqual(h.client.callCount(.send), 0, "nothing is sent without its file")
        XCTAssertEqual(try h.rows().map(\.2), [MessageFailureReason.permanent.rawValue])
        XCTAssertTrue(FileManager.default.fileExists(atPath: try h.cacheDirectoryPath() + "/outgoing/\(localId)/0"),
                      "a failed message keeps its copy until it is retried or discarded")
        h.vault.retryAllFailedMessages()
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(h.client.callCount(.uploadMedia), 1, "a permanent failure is not retried by retryAllFailedMessages")
    }

    // MARK: What the app sees

    func testPendingMediaMessagesShowTheirCopiesAsLocalPaths() async throws {
        let h = try OutboxHarness()
        await h.login()
        let files = SourceFiles()
        let uploaded = try await h.upload(files.make("before.png", bytes: 50, seed: 19))
        h.client.network = .offline
        let photo = files.make("photo.jpg", bytes: 1234, seed: 20)
        let clip = files.make("clip.mp4", bytes: 4321, seed: 21)
        let message = MediaMessage(receiverUid: "bob", files: [photo, clip], messageType: .image, receiverType: .user)
        message.attachments = [uploaded]
        message.caption = "three"
        let recorder = h.sendMedia(message)
        await waitUntil { recorder.errors.count == 1 }
        let localId = try XCTUnwrap(message.localMessageId)
        let directory = try h.cacheDirectoryPath()

        let pending = try await h.pending()
        let media = try XCTUnwrap(pending.first as? MediaMessage)
        XCTAssertEqual(media.localMessageId, localId)
        XCTAssertEqual(media.messageStatus, .pending)
        XCTAssertEqual(media.caption, "three")
        XCTAssertEqual(media.attachments.map(\.fileName), ["before.png", "photo.jpg", "clip.mp4"])
        XCTAssertEqual(media.attachments.map(\.fileMimeType), ["image/png", "image/jpeg", "video/mp4"])
        XCTAssertEqual(media.attachments.map(\.fileSize), [50, 1234, 4321])
        XCTAssertEqual(media.attachments[0].fileUrl, uploaded.fileUrl)
        XCTAssertNil(media.attachments[0].localPath, "an attachment uploaded before has no copy")
        XCTAssertEqual(media.attachments[1].localPath, "\(directory)/outgoing/\(localId)/0")
        XCTAssertEqual(media.attachments[2].localPath, "\(directory)/outgoing/\(localId)/1")
        for (attachment, original) in zip(media.attachments.dropFirst(), [photo, clip]) {
            XCTAssertEqual(FileManager.default.contents(atPath: try XCTUnwrap(attachment.localPath)), FileManager.default.contents(atPath: original.path))
        }
        XCTAssertEqual(media.files.map(\.path), ["\(directory)/outgoing/\(localId)/0", "\(directory)/outgoing/\(localId)/1"])

        h.client.network = .online
        await waitUntil { recorder.isSent }
        let sent = try XCTUnwrap(h.simulator.messageJSON(try XCTUnwrap(recorder.sentIds.first), as: "bob"))
        XCTAssertEqual(sent["data"]?["attachments"]?.arrayValue?.compactMap { $0["name"]?.stringValue }, ["before.png", "photo.jpg", "clip.mp4"])
    }

    func testAlreadyUploadedAttachmentsAreSentWithoutAnyCopy() async throws {
        let h = try OutboxHarness()
        await h.login()
        let files = SourceFiles()
        let original = files.make("shared.pdf", bytes: 777, seed: 22)
        let attachment = try await h.upload(original)
        try FileManager.default.removeItem(at: original)
        let directory = try h.cacheDirectoryPath()
        let copies = Mutex<[String]?>(nil)
        let recorder = SendRecorder()
        let message = MediaMessage(receiverUid: "bob", fileurl: nil, messageType: .file, receiverType: .user)
        message.attachments = [attachment]
        h.vault.sendMediaMessage(message: message, onMessagePending: { m in
            copies.withLock { $0 = (try? FileManager.default.contentsOfDirectory(atPath: "\(directory)/outgoing")) ?? [] }
            recorder.onPending(m)
        }, onMessageSent: recorder.onSent, onError: recorder.onError)
        await waitUntil { recorder.isSent }
        XCTAssertEqual(copies.withLock { $0 }, [], "nothing copied")
        XCTAssertEqual(recorder.errors, [])
        XCTAssertEqual(h.simulator.uploads.count, 1, "only the app's own upload")
        XCTAssertEqual(h.client.callCount(.uploadMedia), 1)
        let sent = try XCTUnwrap(h.simulator.messageJSON(try XCTUnwrap(recorder.sentIds.first), as: "bob"))
        XCTAssertEqual(sent["data"]?["attachments"]?.arrayValue?.first?["url"]?.stringValue, attachment.fileUrl)
        XCTAssertEqual(try h.outgoingMediaRows().count, 0)
    }
}

// MARK: - Support

/// Files an app would send, in a private temporary directory of their own.
final class SourceFiles: Sendable {
    let directory = TemporaryDirectory(prefix: "chatvault-sources")

    func path(_ name: String) -> String { directory.path + "/" + name }

    /// A file of `bytes` pseudo-random bytes (reproducible by `seed`).
    @discardableResult
    func make(_ name: String, bytes: Int, seed: UInt64) -> URL {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var data = Data(count: bytes)
        for i in 0..<bytes {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            data[i] = UInt8(truncatingIfNeeded: state)
        }
        _ = FileManager.default.createFile(atPath: path(name), contents: data)
        return URL(fileURLWithPath: path(name))
    }
}

/// The permission bits of a path (nil when it does not exist).
func mode(of path: String) -> mode_t? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o777
}

extension OutboxHarness {
    func cacheDirectoryPath() throws -> String {
        try XCTUnwrap(vault.cacheDirectory?.path)
    }

    /// Sends `message` through the outbox with a recorder's closures.
    @discardableResult
    func sendMedia(_ message: MediaMessage, _ recorder: SendRecorder = SendRecorder()) -> SendRecorder {
        vault.sendMediaMessage(message: message, onMessagePending: recorder.onPending, onMessageSent: recorder.onSent, onError: recorder.onError)
        return recorder
    }

    /// Uploads a file the way an app does before sending it as an attachment.
    func upload(_ file: URL) async throws -> Attachment {
        let json = try await client.uploadMedia(path: file.path, name: file.lastPathComponent,
                                                mimeType: OutgoingCopies.mimeType(forName: file.lastPathComponent))
        return try WireDecoder(limits: WireLimits()).attachment(json, path: "attachment")
    }

    /// A received media file as the media cache records it (test setup: the row and its file).
    /// Returns the file's absolute path.
    func insertReceivedMedia(_ key: String, bytes: Int64, lastAccess: Int64) throws -> String {
        let directory = try cacheDirectoryPath()
        let relative = "media/\(key)"
        _ = mkdir(directory + "/media", 0o700)
        _ = FileManager.default.createFile(atPath: directory + "/" + relative, contents: Data(repeating: 7, count: Int(min(bytes, 64))))
        let cache = try XCTUnwrap(vault.openCache)
        try cache.writer.sync { db in
            try db.run("INSERT INTO media (url_key, message_id, local_file, bytes, mime, outgoing, created_at, last_access) VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
                       .text(key), .text("1"), .text(relative), .int(bytes), .text("image/jpeg"), .int(lastAccess), .int(lastAccess))
        }
        return directory + "/" + relative
    }

    /// The received media rows' keys, in key order.
    func receivedMediaKeys() throws -> [String] {
        let cache = try XCTUnwrap(vault.openCache)
        return try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT url_key FROM media WHERE outgoing = 0 ORDER BY url_key")
            var keys: [String] = []
            while try stmt.step() { keys.append(stmt.text(0) ?? "") }
            return keys
        }
    }

    /// The outgoing media rows: (owner, file relative to the cache directory, bytes), by key.
    func outgoingMediaRows() throws -> [(owner: String, file: String, bytes: Int64)] {
        let cache = try XCTUnwrap(vault.openCache)
        return try cache.reader.sync { db in
            let stmt = try db.prepare("SELECT message_id, local_file, bytes FROM media WHERE outgoing = 1 ORDER BY url_key")
            var rows: [(owner: String, file: String, bytes: Int64)] = []
            while try stmt.step() { rows.append((stmt.text(0) ?? "", stmt.text(1) ?? "", stmt.int64(2))) }
            return rows
        }
    }
}
