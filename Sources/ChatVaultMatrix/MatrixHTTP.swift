import ChatVault
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where a backend's time went, for benchmarks: requests made, seconds waiting for answers
/// (network and server), seconds parsing JSON. The realtime long-poll, which waits by design, is
/// not counted.
public struct MatrixCallStatistics: Sendable, Equatable {
    /// Requests answered (the realtime long-poll left out).
    public var requests = 0
    /// Seconds spent waiting for answers (network and server).
    public var networkSeconds = 0.0
    /// Seconds spent parsing JSON answers.
    public var jsonSeconds = 0.0
    /// Bytes of the answers received.
    public var bytes = 0

    /// Zero of everything.
    public init() {}
}

/// HTTP to a homeserver's client-server API: JSON in, JSON out, every failure a `BackendError`.
///
/// - A refused or dropped connection is `.unreachable`, no answer in time `.timedOut`.
/// - An error answer is `.server(status:code:message:)` with Matrix's `errcode` as the code
///   (`M_UNKNOWN` when the body has none); 429 and 5xx are transient (`BackendError.isTransient`).
///   A refused access token (401 `M_UNKNOWN_TOKEN`) is `MatrixBackend.softLogoutCode` when the
///   homeserver says `soft_logout` (expired), `MatrixBackend.loggedOutCode` otherwise.
/// - An answer larger than `maxResponseBytes`, or one that is not JSON, is
///   `.server(502, "ERR_MATRIX_BAD_RESPONSE")`: nothing the server sends can crash the client.
/// - The access token travels in the `Authorization` header only, never in a URL, a log or an error.
final class MatrixHTTP: Sendable {
    let homeserver: URL
    let session: URLSession
    let maxResponseBytes: Int
    let requestTimeout: TimeInterval
    let statistics = Mutex(MatrixCallStatistics())

    static let badResponse = "ERR_MATRIX_BAD_RESPONSE"

    init(homeserver: URL, requestTimeout: TimeInterval, maxResponseBytes: Int) {
        self.homeserver = homeserver
        self.requestTimeout = requestTimeout
        self.maxResponseBytes = maxResponseBytes
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = requestTimeout
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration)
    }

    deinit {
        session.finishTasksAndInvalidate()
    }

    /// What an answer carried.
    struct Answer: Sendable {
        var status: Int
        var json: JSONValue
        /// The server's clock (the `Date` header), epoch seconds; nil when absent or unreadable.
        var serverTime: Int64?
    }

    /// One path segment, percent-encoded (`!room:server` and `$event` hold reserved characters).
    static func segment(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    func url(_ path: String, query: [(String, String)] = []) throws(BackendError) -> URL {
        guard var components = URLComponents(url: homeserver, resolvingAgainstBaseURL: false) else {
            throw .server(status: 400, code: "ERR_MATRIX_BAD_HOMESERVER", message: "the homeserver URL is not usable")
        }
        let base = components.percentEncodedPath.hasSuffix("/") ? String(components.percentEncodedPath.dropLast()) : components.percentEncodedPath
        components.percentEncodedPath = base + path
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        // `+` in a query value is a space to many servers: encode it.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        guard let url = components.url else {
            throw .server(status: 400, code: "ERR_MATRIX_BAD_HOMESERVER", message: "the homeserver URL is not usable")
        }
        return url
    }

    /// Sends a request and answers its JSON; an error status throws.
    func call(_ method: String, _ path: String, query: [(String, String)] = [], json body: JSONValue? = nil,
              token: String?, timeout: TimeInterval? = nil) async throws(BackendError) -> Answer {
        var request = URLRequest(url: try url(path, query: query))
        request.httpMethod = method
        request.timeoutInterval = timeout ?? requestTimeout
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = body.jsonData()
        }
        // A long-poll (its own, longer timeout) waits by design: not counted as waiting.
        let (data, response) = try await perform(request, counted: timeout == nil)
        // Rate limited with a short `retry_after_ms`: wait it out once, then try again; a longer
        // wait (or a second 429) goes to the engine as a transient error, for its own backoff.
        if let http = response as? HTTPURLResponse, http.statusCode == 429,
           let delay = (try? JSONValue(jsonData: data))?["retry_after_ms"]?.intValue, delay > 0, delay <= Self.maxRetryAfterMs {
            do { try await Task.sleep(for: .milliseconds(delay)) } catch { throw .timedOut }
            let (again, againResponse) = try await perform(request, counted: timeout == nil)
            return try answer(again, againResponse)
        }
        return try answer(data, response)
    }

    /// The longest `retry_after_ms` waited out inside one call.
    static let maxRetryAfterMs: Int64 = 5_000

    /// Uploads raw bytes (media).
    func upload(_ path: String, query: [(String, String)], body: Data, contentType: String, token: String?) async throws(BackendError) -> Answer {
        var request = URLRequest(url: try url(path, query: query))
        request.httpMethod = "POST"
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        request.httpBody = body
        let (data, response) = try await perform(request)
        return try answer(data, response)
    }

    /// Downloads raw bytes (media), bounded by `limit`.
    func download(_ path: String, token: String?, limit: Int) async throws(BackendError) -> (Data, String?) {
        var request = URLRequest(url: try url(path))
        request.httpMethod = "GET"
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await perform(request)
        guard let http = response as? HTTPURLResponse else { throw Self.bad("no HTTP answer") }
        guard (200..<300).contains(http.statusCode) else { _ = try answer(data, response); throw Self.bad("unexpected status") }
        guard data.count <= limit else { throw .server(status: 413, code: "ERR_MATRIX_TOO_LARGE", message: "the download is larger than allowed") }
        return (data, http.value(forHTTPHeaderField: "Content-Type"))
    }

    private func perform(_ request: URLRequest, counted: Bool = true) async throws(BackendError) -> (Data, URLResponse) {
        let started = ContinuousClock.now
        do {
            let answer = try await Self.data(for: request, in: session)
            let elapsed = ContinuousClock.now - started
            if counted { statistics.withLock { s in
                s.requests += 1
                s.networkSeconds += Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                s.bytes += answer.0.count
            } }
            return answer
        } catch let error as URLError {
            switch error.code {
            case .timedOut: throw .timedOut
            case .cancelled: throw .timedOut
            default: throw .unreachable
            }
        } catch {
            throw .unreachable
        }
    }

    private func answer(_ data: Data, _ response: URLResponse) throws(BackendError) -> Answer {
        guard let http = response as? HTTPURLResponse else { throw Self.bad("no HTTP answer") }
        guard data.count <= maxResponseBytes else { throw Self.bad("the answer is larger than allowed") }
        let json: JSONValue
        if data.isEmpty {
            json = .object([:])
        } else if let parsed = timedParse(data) {
            json = parsed
        } else if (200..<300).contains(http.statusCode) {
            throw Self.bad("the answer is not JSON")
        } else {
            json = .object([:])
        }
        let time = (http.value(forHTTPHeaderField: "Date")).flatMap(Self.httpDate)
        guard (200..<300).contains(http.statusCode) else {
            var code = json["errcode"]?.stringValue.map { String($0.prefix(64)) } ?? "M_UNKNOWN"
            var message = json["error"]?.stringValue.map { String($0.prefix(200)) } ?? "HTTP \(http.statusCode)"
            if http.statusCode == 401, code == "M_UNKNOWN_TOKEN" {
                // Expired (soft: the device lives on, renew or sign in again on it) or the device
                // logged out (hard): the two call for different things.
                let soft = json["soft_logout"]?.boolValue == true
                message = "M_UNKNOWN_TOKEN: " + message
                code = soft ? MatrixBackend.softLogoutCode : MatrixBackend.loggedOutCode
            }
            throw .server(status: http.statusCode, code: code, message: message)
        }
        guard case .object = json else { throw Self.bad("the answer is not a JSON object") }
        return Answer(status: http.statusCode, json: json, serverTime: time)
    }

    private func timedParse(_ data: Data) -> JSONValue? {
        let started = ContinuousClock.now
        let parsed = try? JSONValue(jsonData: data)
        let elapsed = ContinuousClock.now - started
        statistics.withLock { $0.jsonSeconds += Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18 }
        return parsed
    }

    static func bad(_ why: String) -> BackendError {
        .server(status: 502, code: badResponse, message: why)
    }

    /// One formatter for every answer's `Date` header (making one costs more than parsing).
    private static let dateFormatter: Mutex<DateFormatter> = {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return Mutex(formatter)
    }()

    private static func httpDate(_ text: String) -> Int64? {
        guard let date = dateFormatter.withLock({ $0.date(from: text) }) else { return nil }
        let seconds = date.timeIntervalSince1970
        guard seconds.isFinite, seconds >= 0, seconds < Double(WireLimits.maxWireNumber) else { return nil }
        return Int64(seconds)
    }
}

extension MatrixHTTP {
    /// `session.data(for:)`, cancellable without the deadlock of FoundationNetworking's own: its
    /// cancellation handler cancels the `URLSessionTask` synchronously on the session's queue while
    /// it holds the Swift task's status lock, and the session's queue, finishing that request at
    /// the same moment, waits for the same lock to resume the awaiting task — both wait forever
    /// (seen as a `logout()` that never returned: `MatrixBackend.logout` cancels the realtime
    /// loop mid-request; gdb showed `URLSessionTask.cancel` in `swift_task_cancel` on one thread
    /// and `CheckedContinuation.resume` in `withStatusRecordLock` on the other). Here the handler
    /// only hands the cancel to another queue and returns.
    static func data(for request: URLRequest, in session: URLSession) async throws -> (Data, URLResponse) {
        let pending = PendingRequest()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, URLResponse), any Error>) in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else if let data, let response {
                        continuation.resume(returning: (data, response))
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                pending.start(task)
            }
        } onCancel: {
            pending.cancel()
        }
    }
}

/// A request's `URLSessionDataTask`, cancelled off the cancelling thread (`MatrixHTTP.data`),
/// also when the cancel comes before the task exists.
private final class PendingRequest: Sendable {
    private let state = Mutex<(task: URLSessionDataTask?, cancelled: Bool)>((nil, false))

    func start(_ task: URLSessionDataTask) {
        let cancelled = state.withLock { s -> Bool in
            s.task = task
            return s.cancelled
        }
        task.resume()
        if cancelled { Self.cancelSoon(task) }
    }

    func cancel() {
        let task = state.withLock { s -> URLSessionDataTask? in
            s.cancelled = true
            return s.task
        }
        if let task { Self.cancelSoon(task) }
    }

    private static func cancelSoon(_ task: URLSessionDataTask) {
        DispatchQueue.global().async { task.cancel() }
    }
}
