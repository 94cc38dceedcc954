import ChatVault
import ChatVaultSimulator
import Foundation
import Synchronization
import XCTest

/// Streaming downloads: chunking, content lengths, slow, failing, endless and stalled answers,
/// expiry before any bytes, the network, and what the server counts.
final class SimulatedMediaTests: SimulatorTestCase {
    let url = "https://media.test/file.bin"

    /// Polls (real time) until `condition` holds, at most about five seconds.
    func waitUntil(_ what: String, file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool) async {
        for _ in 0..<500 {
            if condition() { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
        XCTFail("timed out waiting until \(what)", file: file, line: line)
    }

    func testBytesArriveInOrderAndCompleteWhateverTheSize() async throws {
        let bob = simulator.client(for: "bob")
        for (size, chunkSize) in [(0, 1024), (1, 1024), (3 * 1024, 1024), (3 << 20, 64 * 1024), (3 << 20 | 5, 64 * 1024)] {
            let url = "https://media.test/\(size).bin"
            let bytes = pattern(size)
            simulator.registerMedia(url: url, bytes: bytes, mimeType: "application/octet-stream")
            if chunkSize != 64 * 1024 { simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: chunkSize)) }
            let stream = try await bob.downloadMedia(url: url)
            XCTAssertEqual(stream.contentLength, Int64(size))
            XCTAssertEqual(stream.mimeType, "application/octet-stream")
            let (chunks, error) = await drain(stream)
            XCTAssertNil(error)
            XCTAssertEqual(chunks.count, (size + chunkSize - 1) / chunkSize, "size \(size)")
            XCTAssertEqual(chunks.dropLast().filter { $0.count != chunkSize }.count, 0, "full chunks but the last")
            XCTAssertTrue(chunks.allSatisfy { !$0.isEmpty && $0.startIndex == 0 }, "no empty chunks, each indexed from 0")
            XCTAssertEqual(chunks.reduce(into: Data()) { $0.append($1) }, bytes, "size \(size)")
            XCTAssertEqual(simulator.mediaChunksServed(url: url), chunks.count)
            XCTAssertEqual(simulator.mediaBytesServed(url: url), Int64(size))
            XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 0)
        }
    }

    func testTheContentLengthIsTheTruthAbsentOrALie() async throws {
        let bob = simulator.client(for: "bob")
        let bytes = pattern(100)
        simulator.registerMedia(url: url, bytes: bytes)
        for (reported, expected) in [(SimulatedMediaBehaviour.ContentLength.actual, Int64(100)), (.absent, nil), (.claimed(10), 10),
                                     (.claimed(1 << 40), 1 << 40)] {
            simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 30, contentLength: reported))
            let stream = try await bob.downloadMedia(url: url)
            XCTAssertEqual(stream.contentLength, expected)
            XCTAssertNil(stream.mimeType)
            await assertEqual(try await stream.allBytes(), bytes, "the same bytes whatever the claim")
        }
    }

    func testADelayPerChunkMakesASlowDownloadThatProgresses() async throws {
        let bob = simulator.client(for: "bob")
        let bytes = pattern(50)
        simulator.registerMedia(url: url, bytes: bytes)
        simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 10, delayPerChunk: .milliseconds(40)))
        let started = ContinuousClock.now
        let stream = try await bob.downloadMedia(url: url)
        var iterator = stream.chunks.makeAsyncIterator()
        var received = Data()
        while let chunk = try await iterator.next() {
            received.append(chunk)
            // Each chunk arrives before the next is produced: the consumer sees progress.
            XCTAssertEqual(simulator.mediaBytesServed(url: url), Int64(received.count))
        }
        XCTAssertEqual(received, bytes)
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(200), "five chunks, each after 40 ms")
    }

    func testAFailingDownloadEndsWithTheErrorAfterExactlyKBytes() async throws {
        let bob = simulator.client(for: "bob")
        let bytes = pattern(1000)
        simulator.registerMedia(url: url, bytes: bytes)
        for (after, error) in [(300, BackendError.timedOut), (320, .unreachable), (0, .unreachable), (5000, .timedOut)] {
            simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 64, ending: .failing(afterBytes: after, with: error)))
            let stream = try await bob.downloadMedia(url: url)
            XCTAssertEqual(stream.contentLength, 1000, "the server promised the whole file")
            let (chunks, ended) = await drain(stream)
            let received = chunks.reduce(into: Data()) { $0.append($1) }
            XCTAssertEqual(received, bytes.prefix(min(after, 1000)), "after \(after)")
            XCTAssertEqual(ended, error, "after \(after)")
            XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 0)
        }
    }

    func testAnEndlessDownloadStopsProducingWhenTheConsumerIsCancelled() async throws {
        let bob = simulator.client(for: "bob")
        simulator.registerMedia(url: url, bytes: pattern(40))
        simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 16, ending: .endless))
        let stream = try await bob.downloadMedia(url: url)
        let received = ByteCounter()
        let consumer = Task {
            for try await chunk in stream.chunks { received.count.withLock { $0 += chunk.count } }
        }
        await waitUntil("well past the file") { simulator.mediaChunksServed(url: url) > 100 }
        XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 1)
        consumer.cancel()
        // Cancelled between chunks, the stream just ends (AsyncThrowingStream's way); cancelled
        // while a chunk is made, it ends with `.timedOut`.
        if case .failure(let error) = await consumer.result { XCTAssertEqual(error as? BackendError, .timedOut) }
        let served = simulator.mediaChunksServed(url: url)
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(simulator.mediaChunksServed(url: url), served, "nothing is produced once the consumer is gone")
        XCTAssertEqual(Int64(received.count.withLock { $0 }), simulator.mediaBytesServed(url: url), "nothing produced ahead of the consumer")
        XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 0)
    }

    func testAnEndlessDownloadDroppedByItsConsumerEnds() async throws {
        let bob = simulator.client(for: "bob")
        simulator.registerMedia(url: url, bytes: pattern(10))
        simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 4, ending: .endless))
        do {
            let stream = try await bob.downloadMedia(url: url)
            var iterator = stream.chunks.makeAsyncIterator()
            var received = Data()
            for _ in 0..<5 {
                let chunk = try await iterator.next()
                received.append(try XCTUnwrap(chunk))
            }
            XCTAssertEqual(received, pattern(10) + Data(count: 8), "the file in chunks of 4 (the last short), then filler")
            XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 1)
        }
        XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 0, "dropping the stream ends the download")
        XCTAssertEqual(simulator.mediaChunksServed(url: url), 5)
    }

    func testAStalledDownloadWaitsUntilItsConsumerIsCancelled() async throws {
        let bob = simulator.client(for: "bob")
        simulator.registerMedia(url: url, bytes: pattern(300))
        simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 50, ending: .stalling(afterBytes: 100)))
        let stream = try await bob.downloadMedia(url: url)
        let consumer = Task { await drain(stream) }
        await waitUntil("100 bytes served") { simulator.mediaBytesServed(url: url) == 100 }
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(simulator.mediaBytesServed(url: url), 100, "stalled")
        XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 1)
        consumer.cancel()
        let (chunks, error) = await consumer.value
        XCTAssertEqual(chunks, [pattern(50), pattern(100).suffix(50)].map { Data($0) })
        XCTAssertEqual(error, .timedOut)
        XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 0)
    }

    func testAnExpiredURLAnswers403BeforeAnyBytesAndAReSignedOneStreams() async throws {
        let bytes = pattern(200)
        let id = try simulator.postMedia(.file, [SimulatedAttachment(name: "file.bin", mimeType: "application/octet-stream", url: url, size: 200)],
                                         from: "alice", to: .user("bob"))
        let rendered = try await simulator.client(for: "bob").message(id: id)
        XCTAssertEqual(rendered["data"]?["attachments"]?.arrayValue?.first?["size"], 200, "media messages carry the attachment's size")
        simulator.registerMedia(url: url, bytes: bytes, expiresAt: clock.now + 60)
        simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 64))
        let bob = simulator.client(for: "bob")

        // A download started before the URL expires runs to its end.
        let early = try await bob.downloadMedia(url: url)
        clock.advance(by: 60)
        await assertEqual(try await early.allBytes(), bytes)

        let expired = await backendError(try await bob.downloadMedia(url: url))
        XCTAssertEqual(statusAndCode(expired), "403 ERR_URL_EXPIRED")
        XCTAssertEqual(simulator.mediaDownloadCount(url: url), 1, "a refused download never starts")
        XCTAssertEqual(simulator.mediaBytesServed(url: url), 200)

        let fresh = try await bob.resignMediaURL(url, messageId: id)
        let stream = try await bob.downloadMedia(url: fresh)
        let (chunks, error) = await drain(stream)
        XCTAssertNil(error)
        XCTAssertEqual(chunks.map(\.count), [64, 64, 64, 8], "the behaviour holds for re-signed URLs")
        XCTAssertEqual(chunks.reduce(into: Data()) { $0.append($1) }, bytes)
        XCTAssertEqual(simulator.mediaDownloadCount(url: url), 2)
        XCTAssertEqual(simulator.mediaDownloadCount(url: fresh), 2, "a re-signed URL counts for its original")
        let unknown = await backendError(try await bob.downloadMedia(url: "https://media.test/none"))
        XCTAssertEqual(statusAndCode(unknown), "404 ERR_NOT_FOUND")
    }

    func testTheNetworkAndInjectedFaultsFailTheDownloadBeforeAnyBytes() async throws {
        let bob = simulator.client(for: "bob")
        simulator.registerMedia(url: url, bytes: pattern(100))
        bob.network = .offline
        await XCTAssertThrowsBackendError(.unreachable, try await bob.downloadMedia(url: url))
        bob.network = .online
        bob.failNext(.downloadMedia, with: .status(503, code: "ERR_SERVICE_UNAVAILABLE"))
        bob.failNext(.downloadMedia, with: .timeout)
        let unavailable = await backendError(try await bob.downloadMedia(url: url))
        XCTAssertEqual(statusAndCode(unavailable), "503 ERR_SERVICE_UNAVAILABLE")
        await XCTAssertThrowsBackendError(.timedOut, try await bob.downloadMedia(url: url))
        XCTAssertEqual(simulator.mediaDownloadCount(url: url), 0)
        XCTAssertEqual(bob.callCount(.downloadMedia), 3)

        bob.failNext(.downloadMedia, with: .ackLost)
        await XCTAssertThrowsBackendError(.timedOut, try await bob.downloadMedia(url: url))
        XCTAssertEqual(simulator.mediaDownloadCount(url: url), 1, "the server started it; the answer was lost")
        XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 0)
        XCTAssertEqual(simulator.mediaChunksServed(url: url), 0)
    }

    func testGoingOfflineMidDownloadEndsTheStreamWithUnreachable() async throws {
        let bob = simulator.client(for: "bob")
        simulator.registerMedia(url: url, bytes: pattern(100))
        simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 10))
        let stream = try await bob.downloadMedia(url: url)
        var iterator = stream.chunks.makeAsyncIterator()
        var received = Data()
        for _ in 0..<3 {
            let chunk = try await iterator.next()
            received.append(try XCTUnwrap(chunk))
        }
        bob.network = .offline
        do {
            _ = try await iterator.next()
            XCTFail("the stream went on offline")
        } catch {
            XCTAssertEqual(error as? BackendError, .unreachable)
        }
        XCTAssertEqual(received, pattern(30))
        XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 0)
    }

    func testTheServerCountsDownloadsStartedAndInProgress() async throws {
        let bob = simulator.client(for: "bob"), carol = simulator.client(for: "carol")
        simulator.registerMedia(url: url, bytes: pattern(100))
        XCTAssertEqual(simulator.mediaDownloadCount(url: url), 0)
        var first: MediaStream? = try await bob.downloadMedia(url: url)
        let second = try await carol.downloadMedia(url: url)
        XCTAssertEqual(simulator.mediaDownloadCount(url: url), 2)
        XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 2)
        XCTAssertEqual(simulator.mediaChunksServed(url: url), 0, "nothing produced before the consumer asks")
        await assertEqual(try await second.allBytes(), pattern(100))
        XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 1)
        XCTAssertNotNil(first)
        first = nil
        XCTAssertEqual(simulator.mediaDownloadsInProgress(url: url), 0, "a dropped stream is no longer in progress")
        XCTAssertEqual(simulator.mediaDownloadCount(url: url), 2)
        XCTAssertEqual(simulator.mediaDownloadCount(url: "https://media.test/other"), 0)
    }
}

/// `count` bytes that differ from their neighbours, so order mistakes show.
private func pattern(_ count: Int) -> Data {
    Data((0..<count).map { UInt8(truncatingIfNeeded: $0 % 251) })
}

/// Every chunk of a stream, and the error that ended it, if any.
private func drain(_ stream: MediaStream) async -> (chunks: [Data], error: BackendError?) {
    var chunks: [Data] = []
    do {
        for try await chunk in stream.chunks { chunks.append(chunk) }
        return (chunks, nil)
    } catch {
        guard let backend = error as? BackendError else {
            XCTFail("not a BackendError: \(error)")
            return (chunks, nil)
        }
        return (chunks, backend)
    }
}

private final class ByteCounter: Sendable {
    let count = Mutex(0)
}
