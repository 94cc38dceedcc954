public import Foundation

/// A JSON value: the wire format between a `ChatBackend` and the engine, and the form of free-form
/// model fields (`metaData`, `customData`, `interactiveData`). `Sendable`, unlike `[String: Any]`.
///
/// Equality, hashing and every conversion walk a value without recursion, or refuse one nested
/// deeper than `JSONValue.maxFoundationDepth`, so a deeply nested value cannot overflow the stack.
/// (Releasing such a value is the Swift runtime's own recursion: take one apart level by level.)
///
///     let data: JSONValue = ["text": "hi", "count": 2, "tags": ["a", "b"]]
///     data["text"]?.stringValue   // "hi"
public enum JSONValue: Sendable, Hashable {
    /// JSON `null` (a field that is null counts as absent wherever the decoder reads it).
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A whole number (a JSON number without a fraction or exponent, when it fits 64 bits).
    case int(Int64)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// A list, in order.
    case array([JSONValue])
    /// An object (its keys unordered; `jsonData()` writes them sorted).
    case object([String: JSONValue])

    /// The field `key` of an object; nil when absent or when the value is not an object.
    public subscript(key: String) -> JSONValue? {
        if case .object(let fields) = self { return fields[key] }
        return nil
    }

    /// The string; nil for any other kind of value.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The number as a whole number: an `.int`, or a `.double` with no fraction within `Int64`'s
    /// range; nil otherwise.
    public var intValue: Int64? {
        switch self {
        case .int(let n): return n
        case .double(let d) where d.rounded() == d && abs(d) < 9.2e18: return Int64(d)
        default: return nil
        }
    }

    /// The number as a `Double` (an `.int` converted); nil for any other kind of value.
    public var doubleValue: Double? {
        switch self {
        case .int(let n): return Double(n)
        case .double(let d): return d
        default: return nil
        }
    }

    /// The boolean; nil for any other kind of value (numbers are not booleans).
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The list's elements; nil for any other kind of value.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The object's fields; nil for any other kind of value.
    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// Whether the value is `.null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    /// `"text"` is `.string("text")`.
    public init(stringLiteral value: String) { self = .string(value) }
    /// `2` is `.int(2)`.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// `2.5` is `.double(2.5)`.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// `true` is `.bool(true)`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `["a", 1]` is `.array([.string("a"), .int(1)])`.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// `["k": 1]` is `.object(["k": .int(1)])`; of a key written twice, the last value wins.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    /// `nil` is `.null`.
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue {
    /// The deepest nesting `init(foundation:)`, `foundationValue` and `jsonData()` convert (the
    /// limit of Foundation's own JSON parser).
    public static let maxFoundationDepth = 512

    /// Parses JSON text (UTF-8). Throws on malformed input, or nesting deeper than `maxFoundationDepth`.
    /// Reads the bytes straight into values (no Foundation objects between), without recursion.
    public init(jsonData data: Data) throws {
        self = try JSONTextReader.value(of: data, maxDepth: Self.maxFoundationDepth)
    }

    /// Converts what `JSONSerialization` produces. Throws on other objects, or nesting deeper than
    /// `maxFoundationDepth`.
    public init(foundation object: Any) throws {
        self = try JSONValue(foundation: object, depth: 0)
    }

    private init(foundation object: Any, depth: Int) throws {
        switch object {
        case is NSNull: self = .null
        case let number as NSNumber:
            // Foundation's JSON booleans are NSNumbers whose type encoding is "c" (char).
            switch String(cString: number.objCType) {
            case "c", "B": self = .bool(number.boolValue)
            case "f", "d": self = .double(number.doubleValue)
            default: self = .int(number.int64Value)
            }
        case let string as String: self = .string(string)
        case let array as [Any]:
            guard depth < Self.maxFoundationDepth else { throw CocoaError(.propertyListReadCorrupt) }
            self = .array(try array.map { try JSONValue(foundation: $0, depth: depth + 1) })
        case let dict as [String: Any]:
            guard depth < Self.maxFoundationDepth else { throw CocoaError(.propertyListReadCorrupt) }
            self = .object(try dict.mapValues { try JSONValue(foundation: $0, depth: depth + 1) })
        default: throw CocoaError(.propertyListReadCorrupt)
        }
    }

    /// The value as `JSONSerialization` objects (for APIs that take `[String: Any]`). Containers
    /// nested deeper than `maxFoundationDepth` become `NSNull`.
    public var foundationValue: Any { foundationValue(depth: 0) }

    private func foundationValue(depth: Int) -> Any {
        switch self {
        case .null: return NSNull()
        case .bool(let b): return b
        case .int(let n): return n
        case .double(let d): return d
        case .string(let s): return s
        case .array(let a):
            guard depth < Self.maxFoundationDepth else { return NSNull() }
            return a.map { $0.foundationValue(depth: depth + 1) }
        case .object(let o):
            guard depth < Self.maxFoundationDepth else { return NSNull() }
            return o.mapValues { $0.foundationValue(depth: depth + 1) }
        }
    }

    /// Compact JSON text with sorted keys; `null` for a value `JSONSerialization` cannot write
    /// (a non-finite number) or one nested deeper than `maxFoundationDepth`.
    public func jsonData() -> Data {
        guard extentBreach(maxDepth: Self.maxFoundationDepth) == nil else { return Data("null".utf8) }
        return (try? JSONSerialization.data(withJSONObject: foundationValue, options: [.sortedKeys, .fragmentsAllowed])) ?? Data("null".utf8)
    }
}

// MARK: - Equality and hashing without recursion

extension JSONValue {
    /// Structural equality, strict about kinds (`.int(1)` is not `.double(1)`), without recursion.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        var pending: [(JSONValue, JSONValue)] = [(lhs, rhs)]
        while let (a, b) = pending.popLast() {
            switch (a, b) {
            case (.null, .null): continue
            case (.bool(let x), .bool(let y)): if x != y { return false }
            case (.int(let x), .int(let y)): if x != y { return false }
            case (.double(let x), .double(let y)): if x != y { return false }
            case (.string(let x), .string(let y)): if x != y { return false }
            case (.array(let x), .array(let y)):
                guard x.count == y.count else { return false }
                for i in x.indices { pending.append((x[i], y[i])) }
            case (.object(let x), .object(let y)):
                guard x.count == y.count else { return false }
                for (key, value) in x {
                    guard let other = y[key] else { return false }
                    pending.append((value, other))
                }
            default: return false
            }
        }
        return true
    }

    /// Hashes the whole value, consistently with `==`, without recursion.
    public func hash(into hasher: inout Hasher) {
        var pending: [JSONValue] = [self]
        while let value = pending.popLast() {
            switch value {
            case .null: hasher.combine(0 as UInt8)
            case .bool(let b): hasher.combine(1 as UInt8); hasher.combine(b)
            case .int(let n): hasher.combine(2 as UInt8); hasher.combine(n)
            case .double(let d): hasher.combine(3 as UInt8); hasher.combine(d)
            case .string(let s): hasher.combine(4 as UInt8); hasher.combine(s)
            case .array(let items):
                hasher.combine(5 as UInt8)
                hasher.combine(items.count)
                pending.append(contentsOf: items.reversed())
            case .object(let fields):
                // Keys in sorted order, then the values in the same order: equal objects hash alike.
                hasher.combine(6 as UInt8)
                hasher.combine(fields.count)
                let keys = fields.keys.sorted()
                for key in keys { hasher.combine(key) }
                for key in keys.reversed() { pending.append(fields[key] ?? .null) }
            }
        }
    }
}

// MARK: - Measuring without recursion

/// Which bound a value broke (see `JSONValue.extentBreach`).
enum JSONExtentBreach: Sendable, Equatable {
    case depth
    case bytes
}

extension JSONValue {
    /// Whether the value nests containers deeper than `maxDepth` (a scalar is 0 deep, `[]` and
    /// `[1]` are 1 deep) or takes more than `maxBytes` in `BinaryJSON`; nil when it fits. Walks
    /// the value without recursion and stops at the first bound crossed.
    func extentBreach(maxDepth: Int, maxBytes: Int = .max) -> JSONExtentBreach? {
        var pending: [(value: JSONValue, enclosing: Int)] = [(self, 0)]
        var bytes = 0
        while let (value, enclosing) = pending.popLast() {
            bytes += 1
            switch value {
            case .null, .bool: break
            case .int(let n): bytes += BinaryJSON.varintSize(BinaryJSON.zigzag(n))
            case .double: bytes += 8
            case .string(let s): bytes += BinaryJSON.stringSize(s)
            case .array(let items):
                guard enclosing < maxDepth else { return .depth }
                bytes += BinaryJSON.varintSize(UInt64(items.count))
                for item in items { pending.append((item, enclosing + 1)) }
            case .object(let fields):
                guard enclosing < maxDepth else { return .depth }
                bytes += BinaryJSON.varintSize(UInt64(fields.count))
                for (key, item) in fields {
                    bytes += BinaryJSON.stringSize(key)
                    pending.append((item, enclosing + 1))
                }
            }
            if bytes > maxBytes { return .bytes }
        }
        return nil
    }
}
