/// The error every offline callback and throwing call reports.
///
/// ```swift
/// onError: { exception in
///     if exception?.errorCode == CometChatConstants.Errors.ERROR_OFFLINE_SYNC_COOLDOWN { … }
/// }
/// ```
///
/// - Warning: Descriptions and details are **safe text only**. Callers construct an exception from a
///   code and a fixed, content-free sentence: never a message body, a file name or path chosen by a
///   user, a user's name, or any key material (key bytes, hex, length). The type cannot check this,
///   so it is a rule for every place in the library that creates one; `description` is what ends up
///   in logs and CLI output.
public struct CometChatException: Error, Sendable, Equatable, CustomStringConvertible {
    /// The code, as a string: one of ``CometChatConstants/Errors``, ``MediaDownloadErrors``, or a
    /// code passed through from a backend.
    public let errorCode: String
    /// A short, content-free explanation.
    public let errorDescription: String
    /// Optional extra diagnostic text, under the same rule as ``errorDescription``.
    public let details: String?

    /// An exception with any code string (for example one passed through from a backend).
    public init(errorCode: String, errorDescription: String, details: String? = nil) {
        self.errorCode = errorCode
        self.errorDescription = errorDescription
        self.details = details
    }

    /// An exception with one of the offline codes.
    ///
    /// ```swift
    /// throw CometChatException(.queueFull, "The outbox is full.")
    /// ```
    public init(_ code: OfflineErrorCode, _ description: String, details: String? = nil) {
        self.init(errorCode: code.rawValue, errorDescription: description, details: details)
    }

    /// The typed code, or `nil` when ``errorCode`` is not one of ``OfflineErrorCode``.
    public var code: OfflineErrorCode? { OfflineErrorCode(rawValue: errorCode) }

    /// `"<code>: <description>"`, with ` (<details>)` when there are details.
    public var description: String {
        var text = "\(errorCode): \(errorDescription)"
        if let details { text += " (\(details))" }
        return text
    }
}
