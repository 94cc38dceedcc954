import ChatVault
import Foundation

/// A JSON object the C side passed in (settings, a query), every key checked against the keys the
/// call documents and every value against its type: a caller's typo is an error, never ignored.
struct JSONFields {
    struct Refused: Error { let message: String }

    let fields: [String: JSONValue]
    /// Where these fields sit, for messages ("sync." inside the settings' "sync" object).
    private let path: String

    init(_ text: String, allowed: Set<String>, what: String) throws(Refused) {
        guard let json = try? JSONValue(jsonData: Data(text.utf8)), let object = json.objectValue else {
            throw Refused(message: "\(what) is not a JSON object")
        }
        try self.init(object, allowed: allowed, path: "")
    }

    private init(_ object: [String: JSONValue], allowed: Set<String>, path: String) throws(Refused) {
        for key in object.keys where !allowed.contains(key) {
            throw Refused(message: "unknown key \(path)\(key.prefix(64))")
        }
        fields = object
        self.path = path
    }

    func bool(_ key: String) throws(Refused) -> Bool? {
        guard let v = fields[key] else { return nil }
        guard let b = v.boolValue else { throw Refused(message: "\(path)\(key) must be true or false") }
        return b
    }

    func int(_ key: String) throws(Refused) -> Int64? {
        guard let v = fields[key] else { return nil }
        guard let n = v.intValue else { throw Refused(message: "\(path)\(key) must be a whole number") }
        return n
    }

    /// A whole number within `range` (a C caller's out-of-range value is refused, not clamped).
    func int(_ key: String, in range: ClosedRange<Int64>) throws(Refused) -> Int? {
        guard let n = try int(key) else { return nil }
        guard range.contains(n) else { throw Refused(message: "\(path)\(key) is \(range.lowerBound) to \(range.upperBound)") }
        return Int(clamping: n)
    }

    func double(_ key: String) throws(Refused) -> Double? {
        guard let v = fields[key] else { return nil }
        guard let d = v.doubleValue, d.isFinite else { throw Refused(message: "\(path)\(key) must be a number") }
        return d
    }

    /// Milliseconds as a Duration (0 to a year).
    func milliseconds(_ key: String) throws(Refused) -> Duration? {
        guard let n = try int(key, in: 0...(86_400_000 * 366)) else { return nil }
        return .milliseconds(n)
    }

    func string(_ key: String) throws(Refused) -> String? {
        guard let v = fields[key] else { return nil }
        guard let s = v.stringValue else { throw Refused(message: "\(path)\(key) must be a string") }
        return s
    }

    func strings(_ key: String) throws(Refused) -> [String]? {
        guard let v = fields[key] else { return nil }
        guard let items = v.arrayValue else { throw Refused(message: "\(path)\(key) must be an array of strings") }
        var out: [String] = []
        for item in items {
            guard let s = item.stringValue else { throw Refused(message: "\(path)\(key) must be an array of strings") }
            out.append(s)
        }
        return out
    }

    /// One of a Swift enum's raw values.
    func choice<T: RawRepresentable & CaseIterable>(_ key: String, _ type: T.Type) throws(Refused) -> T? where T.RawValue == String {
        guard let s = try string(key) else { return nil }
        guard let value = T(rawValue: s) else {
            throw Refused(message: "\(path)\(key) is one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return value
    }

    /// A nested object, its keys checked too.
    func object(_ key: String, allowed: Set<String>) throws(Refused) -> JSONFields? {
        guard let v = fields[key] else { return nil }
        guard let object = v.objectValue else { throw Refused(message: "\(path)\(key) must be an object") }
        return try JSONFields(object, allowed: allowed, path: "\(path)\(key).")
    }
}
