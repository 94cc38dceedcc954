public import ChatVault
import Foundation

/// Media over Matrix: uploads to `/_matrix/media/v3/upload` answer an `mxc://` URL; downloads go
/// through the authenticated `/_matrix/client/v1/media/download/{server}/{id}` with the access
/// token (current Synapse answers 404 on the old unauthenticated v3 download).
extension MatrixBackend {
    /// Uploads the file to `/_matrix/media/v3/upload` and answers its attachment (`url` the
    /// `mxc://` URI, `name`, `mimeType`, `size`, `extension` from the name).
    /// - Throws: 400 `ERR_FILE_NOT_FOUND` when the file cannot be read; 413 `ERR_MATRIX_TOO_LARGE`
    ///   over `MatrixConfiguration.maxMediaBytes`.
    public func uploadMedia(path: String, name: String, mimeType: String) async throws(BackendError) -> JSONValue {
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        guard let size = (attributes?[.size] as? NSNumber)?.int64Value else {
            throw .server(status: 400, code: "ERR_FILE_NOT_FOUND", message: "the file to upload cannot be read")
        }
        guard size <= Int64(configuration.maxMediaBytes) else {
            throw .server(status: 413, code: "ERR_MATRIX_TOO_LARGE", message: "the file is larger than the backend uploads")
        }
        guard let data = FileManager.default.contents(atPath: path), data.count == size else {
            throw .server(status: 400, code: "ERR_FILE_NOT_FOUND", message: "the file to upload cannot be read")
        }
        let http = self.http
        let answer = try await authorized { (token: String) async throws(BackendError) -> MatrixHTTP.Answer in
            try await http.upload("/_matrix/media/v3/upload", query: [("filename", name)], body: data,
                                  contentType: mimeType.isEmpty ? "application/octet-stream" : mimeType, token: token)
        }
        guard let uri = answer.json["content_uri"]?.stringValue, MatrixMedia.parse(uri) != nil else {
            throw MatrixHTTP.bad("the upload answered no mxc:// URI")
        }
        var attachment: [String: JSONValue] = ["url": .string(uri), "name": .string(name), "mimeType": .string(mimeType),
                                               "size": .int(Int64(data.count))]
        if let dot = name.lastIndex(of: "."), name.index(after: dot) < name.endIndex {
            attachment["extension"] = .string(String(name[name.index(after: dot)...].prefix(16)))
        }
        return .object(attachment)
    }

    /// Downloads an `mxc://` URI through the authenticated `/_matrix/client/v1/media/download` with
    /// the access token; the file is held whole (at most `maxMediaBytes`), then handed over in 64
    /// KiB chunks.
    /// - Throws: 404 `ERR_NOT_FOUND` for a URL that is not `mxc://`; 401 when logged out.
    public func downloadMedia(url: String) async throws(BackendError) -> MediaStream {
        guard let (server, id) = MatrixMedia.parse(url) else {
            throw .server(status: 404, code: "ERR_NOT_FOUND", message: "not an mxc:// URL")
        }
        guard state.withLock({ $0.loggedIn }) else { throw .server(status: 401, code: "ERR_NOT_LOGGED_IN", message: "log in first") }
        let http = self.http
        let path = "/_matrix/client/v1/media/download/\(MatrixHTTP.segment(server))/\(MatrixHTTP.segment(id))"
        let limit = configuration.maxMediaBytes
        let (data, mime) = try await authorized { (token: String) async throws(BackendError) -> (Data, String?) in
            try await http.download(path, token: token, limit: limit)
        }
        // Handed over in chunks, as a streaming download would: the engine never needs it whole.
        let chunks = AsyncThrowingStream<Data, any Error> { continuation in
            var offset = 0
            while offset < data.count {
                let end = min(offset + (64 << 10), data.count)
                continuation.yield(data.subdata(in: offset..<end))
                offset = end
            }
            continuation.finish()
        }
        return MediaStream(contentLength: Int64(data.count), mimeType: mime, chunks: chunks)
    }

    /// `mxc://` URLs do not expire: a 401 on download is the access token's (refresh it, or log in
    /// again). Answered as that 401, so the engine reports it rather than retrying the same URL.
    public func resignMediaURL(_ url: String, messageId: Int) async throws(BackendError) -> String {
        throw .server(status: 401, code: "M_UNKNOWN_TOKEN", message: "Matrix media URLs do not expire; the access token was refused")
    }
}

enum MatrixMedia {
    /// `mxc://<server>/<media id>`: both parts non-empty, bounded, with no `/` in the id.
    static func parse(_ url: String) -> (server: String, id: String)? {
        guard url.hasPrefix("mxc://"), url.utf8.count <= 1024 else { return nil }
        let rest = url.dropFirst(6)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let server = String(rest[..<slash]), id = String(rest[rest.index(after: slash)...])
        guard !server.isEmpty, !id.isEmpty, !id.contains("/"),
              !url.utf8.contains(where: { $0 < 0x21 || $0 == 0x7f }) else { return nil }
        return (server, id)
    }
}
