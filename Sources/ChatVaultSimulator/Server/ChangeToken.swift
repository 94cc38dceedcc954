import ChatVault

/// The simulator's sync token: the server time (whole seconds) the client has read the change log
/// up to, in a format only the simulator reads — `cvs1.<seconds in base 36>.<check>`, where the
/// check is an FNV-1a hash of the rest, so that a truncated, edited or foreign string is refused
/// (400 `ERR_SYNC_TOKEN_INVALID`) instead of being read as some other point. Not a secret and not
/// tamper-proof: it only has to catch accidents, as a real server's cursor would.
enum ChangeToken {
    private static let prefix = "cvs1"
    /// Longer strings are refused before any parsing (a token is about 20 characters).
    static let maximumLength = 64

    static func encode(_ time: Int64) -> String {
        let body = "\(prefix).\(String(max(time, 0), radix: 36))"
        return "\(body).\(check(body))"
    }

    /// The time `token` stands for, or nil when it is not a token this simulator made.
    static func decode(_ token: String) -> Int64? {
        guard token.utf8.count <= maximumLength else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == prefix else { return nil }
        let digits = parts[1]
        guard !digits.isEmpty, digits.count <= 12,
              digits.unicodeScalars.allSatisfy({ ("0"..."9").contains($0) || ("a"..."z").contains($0) }),
              let time = Int64(digits, radix: 36), time >= 0
        else { return nil }
        let body = "\(prefix).\(digits)"
        guard parts[2] == check(body), encode(time) == token else { return nil }
        return time
    }

    /// FNV-1a (32 bits) of `body`, as 8 hex digits.
    private static func check(_ body: String) -> String {
        var hash: UInt32 = 0x811c_9dc5
        for byte in body.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }
}
