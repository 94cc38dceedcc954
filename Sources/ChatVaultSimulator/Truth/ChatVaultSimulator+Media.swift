public import Foundation
public import ChatVault

/// Media bytes behind attachment URLs, expiring URLs and re-signing, and devices' uploads.
extension ChatVaultSimulator {
    /// Makes `url` downloadable. With `expiresAt` (epoch seconds on the simulator's clock), a
    /// download at or after that time gets `.server(403, "ERR_URL_EXPIRED")` until the client asks
    /// `resignMediaURL` for a fresh URL.
    ///
    ///     simulator.registerMedia(url: "https://media.test/cat.jpg", bytes: Data([0xFF, 0xD8]), mimeType: "image/jpeg")
    public func registerMedia(url: String, bytes: Data, mimeType: String? = nil, expiresAt: Double? = nil) {
        state.withLock { $0.media[url] = StoredMedia(bytes: bytes, mimeType: mimeType, expiresAt: expiresAt) }
    }

    /// Expires a registered URL now.
    ///
    ///     simulator.expireMedia(url: "https://media.test/cat.jpg")   // downloads: 403 until re-signed
    public func expireMedia(url: String) {
        let now = clock.now
        state.withLock { state in
            if state.media[url] != nil { state.media[url]!.expiresAt = now }
            if let signed = state.resignedURLs[url] { state.resignedURLs[url] = (signed.original, now) }
        }
    }

    /// How `url` (and every URL re-signed from it) is served from now on: chunk size, the
    /// content length answered, a real-time delay before each chunk, and how the download ends.
    /// Downloads already started keep the behaviour they started with.
    ///
    ///     simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(chunkSize: 1024, delayPerChunk: .milliseconds(5)))
    ///     simulator.setMediaBehaviour(url: url, SimulatedMediaBehaviour(contentLength: .claimed(10), ending: .failing(afterBytes: 4096, with: .timedOut)))
    public func setMediaBehaviour(url: String, _ behaviour: SimulatedMediaBehaviour) {
        state.withLock { $0.mediaBehaviours[$0.originalMediaURL(url)] = behaviour }
    }

    /// How many downloads of `url` (or of URLs re-signed from it) were started: answered with a
    /// stream, whatever became of it. Refused downloads (expired, unknown, offline, injected
    /// faults before the server) do not count.
    ///
    ///     XCTAssertEqual(simulator.mediaDownloadCount(url: url), 1)   // two requests, one download
    public func mediaDownloadCount(url: String) -> Int {
        state.withLock { $0.mediaServed[$0.originalMediaURL(url)]?.started ?? 0 }
    }

    /// How many downloads of `url` are still in progress: started, not yet ended (complete or
    /// failed) and still held by a consumer. Dropping the stream or cancelling the task that
    /// iterates it ends the download.
    public func mediaDownloadsInProgress(url: String) -> Int {
        state.withLock { $0.mediaServed[$0.originalMediaURL(url)]?.inProgress ?? 0 }
    }

    /// How many chunks, and how many bytes, the server has produced for downloads of `url`, all
    /// downloads together. Chunks are produced only when the consumer asks for the next one.
    public func mediaChunksServed(url: String) -> Int {
        state.withLock { $0.mediaServed[$0.originalMediaURL(url)]?.chunks ?? 0 }
    }

    public func mediaBytesServed(url: String) -> Int64 {
        state.withLock { $0.mediaServed[$0.originalMediaURL(url)]?.bytes ?? 0 }
    }

    /// How long a re-signed URL works, in seconds (default 3600).
    public var signedURLLifetime: Double {
        get { state.withLock { $0.signedURLLifetime } }
        set { state.withLock { $0.signedURLLifetime = newValue } }
    }

    /// The largest file `SimulatedClient.uploadMedia` accepts, in bytes (default 100 MiB); a
    /// larger one gets `.server(413, "ERR_FILE_TOO_LARGE")`.
    ///
    ///     simulator.maxUploadBytes = 1024
    public var maxUploadBytes: Int {
        get { state.withLock { $0.maxUploadBytes } }
        set { state.withLock { $0.maxUploadBytes = newValue } }
    }

    /// Every file devices uploaded, oldest first (each one's bytes download from its `url`).
    ///
    ///     XCTAssertEqual(simulator.uploads.map(\.name), ["cat.jpg"])
    public var uploads: [SimulatedUpload] {
        state.withLock { $0.uploads }
    }
}

/// How the simulated server serves one media URL (`ChatVaultSimulator.setMediaBehaviour`). The
/// default: the whole file in 64 KiB chunks, its true length announced, no delay.
public struct SimulatedMediaBehaviour: Sendable, Equatable {
    /// The `contentLength` a download answers.
    public enum ContentLength: Sendable, Equatable {
        /// The registered bytes' length.
        case actual
        /// None, as for a chunked answer.
        case absent
        /// This length, whatever is actually sent (a lying server).
        case claimed(Int64)
    }

    /// How the stream of chunks ends.
    public enum Ending: Sendable, Equatable {
        /// After the last registered byte.
        case complete
        /// After exactly `afterBytes` bytes (at most the file's length), with `error`
        /// (`.timedOut`, `.unreachable`…) instead of an end.
        case failing(afterBytes: Int, with: BackendError)
        /// Never: after the registered bytes come chunks of zero bytes, one per request, forever.
        case endless
        /// After `afterBytes` bytes (at most the file's length) the server sends nothing more and
        /// never ends the stream; only cancelling the task that iterates it ends it (`.timedOut`).
        case stalling(afterBytes: Int)
    }

    /// The largest chunk, in bytes (default 64 KiB; at least 1).
    public var chunkSize: Int
    public var contentLength: ContentLength
    /// Real time the server waits before each chunk (default none).
    public var delayPerChunk: Duration
    public var ending: Ending

    public init(chunkSize: Int = 64 * 1024, contentLength: ContentLength = .actual, delayPerChunk: Duration = .zero,
                ending: Ending = .complete) {
        self.chunkSize = chunkSize
        self.contentLength = contentLength
        self.delayPerChunk = delayPerChunk
        self.ending = ending
    }
}

extension MediaStream {
    /// For tests: every chunk of a small download, joined. Throws the stream's error, or a
    /// `SimulatorError` once more than `limit` bytes arrived (the default, 64 MiB, suits tests).
    ///
    ///     let bytes = try await client.downloadMedia(url: url).allBytes()
    public func allBytes(limit: Int = 64 << 20) async throws -> Data {
        var bytes = Data()
        for try await chunk in chunks {
            guard bytes.count + chunk.count <= limit else { throw SimulatorError("the download is larger than \(limit) bytes") }
            bytes.append(chunk)
        }
        return bytes
    }
}
