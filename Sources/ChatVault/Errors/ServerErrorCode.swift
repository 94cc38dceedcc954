extension OfflineVault {
    /// A server's error code, passed through to the app only when it looks like one (`[A-Z0-9_]`,
    /// at most 64 characters); anything else becomes `ERROR_SERVER`. The server's free text is
    /// never passed on: a hostile server could echo content into it.
    static func safeCode(_ code: String) -> String {
        let valid = !code.isEmpty && code.utf8.count <= 64
            && code.unicodeScalars.allSatisfy { ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
        return valid ? code : "ERROR_SERVER"
    }
}
