import ChatVaultSimulator
import ChatVaultTesting
import Foundation
import Synchronization
import XCTest
@testable import ChatVault
import VaultStore

/// Upload batches (`UploadFileRequest`) against the simulator: copies before uploads, offline
/// failures retried from the copies, a restart mid-upload, rejections, the byte budget, ending a
/// batch, and the nil cases of `getExistingUploadFileRequest`.
final class UploadBatchTests: XCTestCase {
    func testAHappyBatchCopiesPrivatelyUploadsEachFileThenEndsOnceItsAttachmentsAreSent() async throws {
        let h = try OutboxHarness()
        await h.login()
        let files = SourceFiles()
        let originals = [files.make("cat.jpg", bytes: 3000, seed: 31), files.make("report.pdf", bytes: 50_000, seed: 32)]
        let directory = try h.cacheDirectoryPath()
        let recorder = UploadRecorder()
        let copyChecks = Mutex<[String]>([])
        let request = h.uploadRequest(originals)
        XCTAssertNil(request.batchId)
        XCTAssertEqual(request.getItems().count, 0, "nothing kept for this composer yet")
        request.upload(onItemStatusChanged: { item in
            if item.state == .queued {
                // Reported queued only once the copy is in place, private and whole.
                let path = item.localCopyPath ?? "?"
                let original = originals.first { $0.lastPathComponent == item.name }
                let ok = mode(of: path) == 0o600 && mode(of: (path as NSString).deletingLastPathComponent) == 0o700
                    && mode(of: directory + "/outgoing") == 0o700
                    && FileManager.default.contents(atPath: path) == original.flatMap { FileManager.default.contents(atPath: $0.path) }
                copyChecks.withLock { $0.append(ok ? "ok" : "bad \(item.name)") }
            }
            recorder.onItem(item)
        }, onComplete: recorder.onComplete, onError: recorder.onError)
        await waitUntil { recorder.isDone }
        let items = try recorder.completed()
        XCTAssertEqual(copyChecks.withLock { $0 }, ["ok", "ok"])
        let batchId = try XCTUnwrap(request.batchId)
        XCTAssertEqual(items.map(\.state), [.uploaded, .uploaded])
        XCTAssertEqual(items.map(\.name), ["cat.jpg", "report.pdf"])
        XCTAssertEqual(items.map(\.size), [3000, 50_000])
        XCTAssertEqual(items.map(\.mime), ["image/jpeg", "application/pdf"])
        XCTAssertEqual(items.map(\.file), [nil, nil], "no file once uploaded")
        XCTAssertEqual(items.map(\.isRestored), [false, false])
        XCTAssertEqual(items.map(\.localCopyPath), ["\(directory)/outgoing/upload-\(batchId)/0", "\(directory)/outgoing/upload-\(batchId)/1"])
        for item in items {
            XCTAssertEqual(recorder.states(of: item.fileId), [.queued, .uploading, .uploaded])
            let attachment = try XCTUnwrap(item.attachment)
            XCTAssertEqual(attachment.localPath, item.localCopyPath)
            let download = try await h.client.downloadMedia(url: attachment.fileUrl).allBytes()
            let original = try XCTUnwrap(originals.first { $0.lastPathComponent == item.name })
            XCTAssertEqual(download, FileManager.default.contents(atPath: original.path))
        }
        XCTAssertEqual(try h.outgoingMediaRows().map(\.owner), ["upload-\(batchId)", "upload-\(batchId)"], "the copies count toward the budget")
        let again = try XCTUnwrap(h.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0))
        XCTAssertEqual(again.batchId, batchId)
        XCTAssertEqual(again.getItems().map(\.fileId), items.map(\.fileId))

        // Sending the attachments ends the batch.
        let message = MediaMessage(receiverUid: "bob", fileurl: nil, messageType: .file, receiverType: .user)
        message.attachments = request.getAttachments()
        let sent = h.sendMedia(message)
        await waitUntil { sent.isSent }
        let server = try XCTUnwrap(h.simulator.messageJSON(try XCTUnwrap(sent.sentIds.first), as: "bob"))
        XCTAssertEqual(server["data"]?["attachments"]?.arrayValue?.compactMap { $0["url"]?.stringValue }, items.compactMap { $0.attachment?.fileUrl })
        XCTAssertEqual(h.simulator.uploads.count, 2, "nothing uploaded twice")
        // The batch row goes first, then its copies' folder.
        await waitUntil { !FileManager.default.fileExists(atPath: "\(directory)/outgoing/upload-\(batchId)") }
        XCTAssertNil(h.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0))
        XCTAssertEqual(request.getItems().count, 0)
        XCTAssertEqual(try h.outgoingMediaRows().count, 0)
    }

    func testOfflineUploadsFailThenRetryFromTheCopyAfterTheOriginalsAreDeleted() async throws {
        let h = try OutboxHarness()
        h.client.network = .offline
        await h.login()
        let files = SourceFiles()
        let originals = [files.make("a.png", bytes: 1000, seed: 33), files.make("b.png", bytes: 2000, seed: 34)]
        let bytes = originals.map { FileManager.default.contents(atPath: $0.path) }
        let request = h.uploadRequest(originals)
        let failed = try await request.upload()
        XCTAssertEqual(failed.map(\.state), [.failed, .failed])
        XCTAssertEqual(failed.map { $0.error?.errorCode }, [CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE, CometChatConstants.Errors.ERROR_INTERNET_UNAVAILABLE])
        XCTAssertEqual(failed.map(\.file), originals.map { Optional($0) }, "not uploaded: the item still names the app's file")
        XCTAssertEqual(h.client.callCount(.uploadMedia), 1, "the first lost connection fails the rest without trying them")
        for original in originals { try FileManager.default.removeItem(at: original) }

        h.client.network = .online
        for (item, expected) in zip(failed, bytes) {
            let uploaded = try await request.retryAttachmentAndWait(fileId: item.fileId)
            XCTAssertEqual(uploaded.state, .uploaded)
            XCTAssertNil(uploaded.error)
            let download = try await h.client.downloadMedia(url: try XCTUnwrap(uploaded.attachment?.fileUrl)).allBytes()
            XCTAssertEqual(download, expected, "uploaded from the cache's own copy")
        }
        XCTAssertEqual(request.getItems().map(\.state), [.uploaded, .uploaded])
        let already = try await request.retryAttachmentAndWait(fileId: failed[0].fileId)
        XCTAssertEqual(already.state, .uploaded, "retrying an uploaded file answers it at once")
        XCTAssertEqual(h.simulator.uploads.count, 2)
        do {
            _ = try await request.retryAttachmentAndWait(fileId: "no-such-file")
            XCTFail("retried an unknown file")
        } catch {
            XCTAssertEqual(error.code, .offlineMessageNotFound)
        }
    }

    func testAnUploadInterruptedByARestartComesBackFailedNeverResumesAndIsRetriedThenSent() async throws {
        let h = try OutboxHarness()
        await h.login()
        let files = SourceFiles()
        let originals = [files.make("slow.mov", bytes: 4000, seed: 35), files.make("next.jpg", bytes: 500, seed: 36)]
        // The first upload stays in flight well past the end of the test.
        h.client.failNext(.uploadMedia, with: .delay(.seconds(120)))
        let recorder = UploadRecorder()
        let request = h.uploadRequest(originals)
        request.upload(onItemStatusChanged: recorder.onItem, onComplete: recorder.onComplete, onError: recorder.onError)
        await waitUntil { request.getItems().map(\.state) == [.uploading, .queued] }
        let batchId = try XCTUnwrap(request.batchId)
        for original in originals { try FileManager.default.removeItem(at: original) }

        try await h.restart()
        h.drain()
        XCTAssertEqual(recorder.error?.code, .offlineDisabled, "the first launch's upload call heard the stop")
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(h.client.callCount(.uploadMedia), 0, "a batch never resumes on its own")
        XCTAssertNil(h.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 7), "another composer")
        let restored = try XCTUnwrap(h.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0))
        XCTAssertEqual(restored.batchId, batchId)
        let items = restored.getItems()
        XCTAssertEqual(items.map(\.state), [.failed, .failed], "queued and uploading files come back failed")
        XCTAssertEqual(items.map { $0.error?.code }, [.requestTimedOut, .requestTimedOut])
        XCTAssertEqual(items.map(\.isRestored), [true, true])
        for (item, original) in zip(items, originals) {
            let file = try XCTUnwrap(item.file, "a restored item still names its file")
            XCTAssertEqual(file.lastPathComponent, item.name)
            XCTAssertEqual(file, original)
            XCTAssertFalse(FileManager.default.fileExists(atPath: file.path), "a name, but no bytes behind it")
            let copy = try XCTUnwrap(item.localCopyPath)
            XCTAssertEqual(mode(of: copy), 0o600)
            XCTAssertEqual(Int64(FileManager.default.contents(atPath: copy)?.count ?? -1), item.size, "the preview is the copy")
        }

        for item in items { restored.retryAttachment(fileId: item.fileId) }
        await waitUntil { restored.getItems().map(\.state) == [.uploaded, .uploaded] }
        XCTAssertEqual(h.client.callCount(.uploadMedia), 2)
        let message = MediaMessage(receiverUid: "bob", fileurl: nil, messageType: .video, receiverType: .user)
        message.attachments = restored.getAttachments()
        XCTAssertEqual(message.attachments.map(\.fileName), ["slow.mov", "next.jpg"])
        let sent = h.sendMedia(message)
        await waitUntil { sent.isSent }
        let server = try XCTUnwrap(h.simulator.messageJSON(try XCTUnwrap(sent.sentIds.first), as: "bob"))
        let urls = try XCTUnwrap(server["data"]?["attachments"]?.arrayValue?.compactMap { $0["url"]?.stringValue })
        XCTAssertEqual(urls.count, 2)
        let first = try await h.client.downloadMedia(url: urls[0]).allBytes()
        XCTAssertEqual(first.count, 4000)
        let folder = try h.cacheDirectoryPath() + "/outgoing/upload-\(batchId)"
        await waitUntil { !FileManager.default.fileExists(atPath: folder) }
        XCTAssertTrue(restored.getItems().isEmpty, "the sent files left the batch, which ended")
    }

    func testRejectedFilesCannotBeRetried() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxMediaCacheSize(1000) })
        await h.login()
        h.simulator.maxUploadBytes = 100
        let files = SourceFiles()
        let request = h.uploadRequest([
            files.make("fits.jpg", bytes: 50, seed: 37),
            files.make("too-large-for-the-server.jpg", bytes: 300, seed: 38),
            files.make("too-large-for-the-budget.jpg", bytes: 900, seed: 39),
            URL(fileURLWithPath: files.path("missing.jpg")),
        ])
        let items = try await request.upload()
        XCTAssertEqual(items.map(\.state), [.uploaded, .rejected, .rejected, .rejected])
        XCTAssertEqual(items.map { $0.error?.errorCode }, [nil, "ERR_FILE_TOO_LARGE", CometChatConstants.Errors.ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW,
                                                           CometChatConstants.Errors.ERROR_OFFLINE_MEDIA_COPY_FAILED])
        XCTAssertNotNil(items[0].localCopyPath)
        XCTAssertEqual(items.dropFirst().map(\.localCopyPath), [nil, nil, nil], "a rejected file keeps no copy")
        let batchId = try XCTUnwrap(request.batchId)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: try h.cacheDirectoryPath() + "/outgoing/upload-\(batchId)"), ["0"])
        XCTAssertEqual(try h.outgoingMediaRows().map(\.bytes), [50])
        XCTAssertEqual(h.client.callCount(.uploadMedia), 2, "only the copied files that fit were sent to the server")

        for item in items.dropFirst() {
            do {
                _ = try await request.retryAttachmentAndWait(fileId: item.fileId)
                XCTFail("retried a rejected file")
            } catch {
                XCTAssertEqual(error.errorCode, item.error?.errorCode, "the refusal is the rejection's own error")
            }
        }
        XCTAssertEqual(request.getItems().map(\.state), [.uploaded, .rejected, .rejected, .rejected], "nothing changed")
        XCTAssertEqual(h.client.callCount(.uploadMedia), 2)

        try await request.remove(fileId: items[1].fileId)
        XCTAssertEqual(request.getItems().map(\.fileId), [items[0].fileId, items[2].fileId, items[3].fileId])
    }

    func testBatchCopiesCountTowardTheBudgetEvictReceivedMediaAndAreNeverEvicted() async throws {
        let h = try OutboxHarness(configure: { $0.setMaxMediaCacheSize(1000) })
        await h.login()
        let old = try h.insertReceivedMedia("old", bytes: 400, lastAccess: 1)
        let recent = try h.insertReceivedMedia("recent", bytes: 400, lastAccess: 2)
        let files = SourceFiles()
        // 800 used; 500 more needs 300 freed: the least recently used received file goes.
        let request = h.uploadRequest([files.make("kept.jpg", bytes: 500, seed: 40)])
        let items = try await request.upload()
        XCTAssertEqual(items.map(\.state), [.uploaded])
        XCTAssertEqual(try h.receivedMediaKeys(), ["recent"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: old))
        XCTAssertTrue(FileManager.default.fileExists(atPath: recent))

        // 900 used; a 600-byte send can evict "recent" only (400): refused, and the batch's copy stays.
        let message = MediaMessage(receiverUid: "bob", files: [files.make("send.jpg", bytes: 600, seed: 41)], messageType: .image, receiverType: .user)
        let refused = h.sendMedia(message)
        await waitUntil { !refused.errors.isEmpty }
        XCTAssertEqual(refused.errors, [CometChatConstants.Errors.ERROR_OFFLINE_MEDIA_BYTE_OVERFLOW])
        XCTAssertEqual(try h.receivedMediaKeys(), ["recent"])
        XCTAssertTrue(FileManager.default.fileExists(atPath: try XCTUnwrap(items[0].localCopyPath)))
        XCTAssertEqual(request.getItems().map(\.state), [.uploaded])

        // A second batch file that cannot fit is rejected; the first batch file is not evicted.
        let more = try await h.uploadRequest([files.make("more.jpg", bytes: 700, seed: 42)]).upload()
        XCTAssertEqual(more.map(\.state), [.rejected])
        XCTAssertEqual(request.getItems().count, 2, "added to the composer's batch")
        XCTAssertTrue(FileManager.default.fileExists(atPath: try XCTUnwrap(items[0].localCopyPath)))
    }

    func testRemoveClearAndClearOfflineCacheEndBatchesAndTheirCopies() async throws {
        let h = try OutboxHarness()
        await h.login()
        let directory = try h.cacheDirectoryPath()
        let files = SourceFiles()
        let request = h.uploadRequest([files.make("one.jpg", bytes: 10, seed: 43), files.make("two.jpg", bytes: 20, seed: 44)])
        let items = try await request.upload()
        let batchId = try XCTUnwrap(request.batchId)
        // Another composer of the same chat (a thread) has a batch of its own.
        let thread = h.uploadRequest([files.make("reply.jpg", bytes: 30, seed: 45)], parent: 42)
        _ = try await thread.upload()
        XCTAssertNotEqual(thread.batchId, batchId)
        // A second request for the main composer joins its batch.
        let joined = h.uploadRequest([files.make("three.jpg", bytes: 40, seed: 46)])
        _ = try await joined.upload()
        XCTAssertEqual(joined.batchId, batchId)
        XCTAssertEqual(request.getItems().map(\.name), ["one.jpg", "two.jpg", "three.jpg"])

        try await request.remove(fileId: items[0].fileId)
        XCTAssertEqual(request.getItems().map(\.name), ["two.jpg", "three.jpg"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: try XCTUnwrap(items[0].localCopyPath)))
        XCTAssertEqual(try h.outgoingMediaRows().filter { $0.owner == "upload-\(batchId)" }.count, 2)
        do {
            try await request.remove(fileId: items[0].fileId)
            XCTFail("removed twice")
        } catch {
            XCTAssertEqual(error.code, .offlineMessageNotFound)
        }

        try await request.clear()
        XCTAssertNil(h.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0))
        XCTAssertEqual(request.getItems().count, 0)
        XCTAssertEqual(joined.getItems().count, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(directory)/outgoing/upload-\(batchId)"))
        XCTAssertEqual(try h.outgoingMediaRows().filter { $0.owner == "upload-\(batchId)" }.count, 0)
        do {
            try await request.clear()
            XCTFail("cleared twice")
        } catch {
            XCTAssertEqual(error.code, .offlineMessageNotFound)
        }
        XCTAssertNotNil(h.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 42))

        // An upload still waiting when its batch is cleared hears it.
        h.client.failNext(.uploadMedia, with: .delay(.seconds(120)))
        let waiting = UploadRecorder()
        let slow = h.uploadRequest([files.make("slow.jpg", bytes: 10, seed: 47)], to: "carol")
        slow.upload(onItemStatusChanged: waiting.onItem, onComplete: waiting.onComplete, onError: waiting.onError)
        await waitUntil { slow.getItems().map(\.state) == [.uploading] }
        try await slow.clear()
        await waitUntil { waiting.isDone }
        XCTAssertEqual(waiting.error?.code, .offlineMessageDiscarded)

        try await h.vault.clearOfflineCacheAndWait()
        XCTAssertNil(h.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 42))
        XCTAssertEqual(try h.outgoingMediaRows().count, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(directory)/outgoing/upload-\(try XCTUnwrap(thread.batchId))"))
    }

    func testGetExistingUploadFileRequestIsNilWithoutOfflineSupportOrAUserOrABatch() async throws {
        let h = try OutboxHarness()
        XCTAssertNil(h.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0), "nobody logged in")
        await h.login()
        XCTAssertNil(h.vault.getExistingUploadFileRequest(receiverId: "bob", receiverType: .user, parentMessageId: 0), "no batch kept")
        let files = SourceFiles()
        _ = try await h.uploadRequest([files.make("x.jpg", bytes: 10, seed: 48)], to: "group-1", type: .group).upload()
        XCTAssertNotNil(h.vault.getExistingUploadFileRequest(receiverId: "group-1", receiverType: .group, parentMessageId: 0))
        XCTAssertNil(h.vault.getExistingUploadFileRequest(receiverId: "group-1", receiverType: .user, parentMessageId: 0), "another receiver type")

        let previous = CometChat.offlineVault
        defer { CometChat.offlineVault = previous }
        CometChat.offlineVault = h.vault
        XCTAssertNotNil(CometChat.getExistingUploadFileRequest(receiverId: "group-1", receiverType: .group, parentMessageId: 0))
        CometChat.offlineVault = nil
        XCTAssertNil(CometChat.getExistingUploadFileRequest(receiverId: "group-1", receiverType: .group, parentMessageId: 0), "no vault installed")

        await h.vault.logout()
        XCTAssertNil(h.vault.getExistingUploadFileRequest(receiverId: "group-1", receiverType: .group, parentMessageId: 0), "logged out")
        do {
            _ = try await h.uploadRequest([files.make("y.jpg", bytes: 10, seed: 49)]).upload()
            XCTFail("uploaded while logged out")
        } catch {
            XCTAssertEqual(error.code, .offlineDisabled)
        }

        let off = try OutboxHarness(configure: { $0.setEnabled(false) })
        let attempt = await off.vault.login(userId: off.me)
        XCTAssertEqual(attempt.state, .disabled)
        XCTAssertNil(off.vault.getExistingUploadFileRequest(receiverId: "group-1", receiverType: .group, parentMessageId: 0), "offline off")
        do {
            _ = try await off.uploadRequest([files.make("z.jpg", bytes: 10, seed: 50)]).upload()
            XCTFail("uploaded with offline off")
        } catch {
            XCTAssertEqual(error.code, .offlineDisabled)
        }
    }

    func testInvalidRequestsAreRefusedBeforeAnythingIsCopied() async throws {
        let h = try OutboxHarness()
        await h.login()
        let files = SourceFiles()
        let file = files.make("a.jpg", bytes: 10, seed: 51)
        for request in [h.uploadRequest([]), h.uploadRequest([file], to: ""), h.uploadRequest([file], parent: -1)] {
            do {
                _ = try await request.upload()
                XCTFail("accepted an invalid request")
            } catch {
                XCTAssertEqual(error.code, .invalidMessage)
            }
        }
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: try h.cacheDirectoryPath() + "/outgoing")) ?? [], [])
    }
}

// MARK: - Support

/// The callbacks of one `upload` call.
final class UploadRecorder: Sendable {
    private let log = Mutex<[(String, UploadFileState)]>([])
    private let outcome = Mutex<Result<[UploadFileItemStatus], CometChatException>?>(nil)

    var onItem: @Sendable (UploadFileItemStatus) -> Void {
        { [self] item in log.withLock { $0.append((item.fileId, item.state)) } }
    }

    var onComplete: @Sendable ([UploadFileItemStatus]) -> Void {
        { [self] items in outcome.withLock { $0 = .success(items) } }
    }

    var onError: @Sendable (CometChatException) -> Void {
        { [self] error in outcome.withLock { $0 = .failure(error) } }
    }

    var isDone: Bool { outcome.withLock { $0 != nil } }

    func states(of fileId: String) -> [UploadFileState] {
        log.withLock { $0.filter { $0.0 == fileId }.map(\.1) }
    }

    func completed() throws -> [UploadFileItemStatus] {
        try XCTUnwrap(outcome.withLock { $0 }).get()
    }

    var error: CometChatException? {
        if case .failure(let error)? = outcome.withLock({ $0 }) { return error }
        return nil
    }
}

extension OutboxHarness {
    func uploadRequest(_ files: [URL], to receiver: String = "bob", type: ReceiverType = .user, parent: Int = 0) -> UploadFileRequest {
        UploadFileRequest.UploadFileRequestBuilder(vault: vault)
            .set(receiverId: receiver).set(receiverType: type).set(parentMessageId: parent)
            .set(files: files)
            .build()
    }
}
