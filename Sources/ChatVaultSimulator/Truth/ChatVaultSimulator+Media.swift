public import Foundation

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
