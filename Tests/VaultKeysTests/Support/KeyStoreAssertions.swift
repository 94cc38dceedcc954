import Foundation
import VaultKeys

// Assertion helpers for the key store tests.
extension KeyLookup {
    /// The reason of an `.unavailable` answer (nil otherwise), for assertions.
    var unavailableReason: KeyUnavailableReason? {
        if case .unavailable(let reason) = self { return reason }
        return nil
    }

    var isAbsent: Bool {
        if case .absent = self { return true }
        return false
    }

    var foundKey: (key: CacheKey, keyId: String)? {
        if case .found(let key, let keyId) = self { return (key, keyId) }
        return nil
    }
}

extension KeyListing {
    var summaries: [KeyItemSummary]? {
        if case .items(let items) = self { return items }
        return nil
    }

    var unavailableReason: KeyUnavailableReason? {
        if case .unavailable(let reason) = self { return reason }
        return nil
    }
}

/// A fresh application id per test, so tests never see each other's items, and cleanup is one call.
func uniqueApplicationId(_ function: String = #function) -> String {
    "org.chatvault.test.\(UUID().uuidString.prefix(8).lowercased())"
}

/// A fresh opaque account identifier (hex, as the library derives them).
func uniqueAccount() -> String {
    String(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16))
}

/// Measures how long `body` takes.
func elapsed<R>(_ body: () throws -> R) rethrows -> (R, TimeInterval) {
    let start = Date()
    let result = try body()
    return (result, Date().timeIntervalSince(start))
}

// Timing. The test machines are shared and noisy (2 cores), so no test bounds a call by how fast it
// usually is. A test that proves "returns by its deadline" allows the configured timeout plus
// `deadlineSlack`; a hang blows through any finite bound, so the slack costs the test nothing. A
// test that proves "answers rather than hangs" over real D-Bus checks the answer itself (a call
// that hit its deadline answers `.other` or `.promptTimedOut`) and that it came before the deadline.

/// What a deadline test allows beyond the configured timeout (thread start-up, a loaded machine).
let deadlineSlack: TimeInterval = 5

extension Duration {
    /// The duration in seconds, to compare with `elapsed`.
    var seconds: TimeInterval {
        let (whole, attoseconds) = components
        return TimeInterval(whole) + TimeInterval(attoseconds) / 1e18
    }
}
