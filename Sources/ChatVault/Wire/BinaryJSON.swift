import Foundation

/// A compact binary form of `JSONValue`, for model payloads stored in the cache: decoding it is a
/// few microseconds per message, where text JSON through Foundation costs tens.
///
/// Layout: one tag byte, then the value. Integers and lengths are LEB128 varints (signed integers
/// zig-zag encoded); doubles are 8 little-endian bytes; strings are UTF-8 with a length prefix;
/// arrays and objects are a count followed by their elements (objects: key string, value).
enum BinaryJSON {
    fileprivate enum Tag: UInt8 {
        case null = 0, `false` = 1, `true` = 2, int = 3, double = 4, string = 5, array = 6, object = 7
    }

    struct Malformed: Error {}

    /// The deepest nesting `decode` reads: values nested deeper are refused as malformed. Whatever
    /// is written to the cache is first held to `WireLimits.maxItemDepth`, which stays below it.
    static let maxDepth = 64

    /// Encodes a value of any depth: recursively (cheap: no work list) down to `maxDepth`, below
    /// that without recursion. The bytes are the same either way.
    static func encode(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        encode(value, depth: 0, into: &out)
        return out
    }

    private static func encode(_ value: JSONValue, depth: Int, into out: inout [UInt8]) {
        switch value {
        case .null:
            out.append(Tag.null.rawValue)
        case .bool(let b):
            out.append(b ? Tag.true.rawValue : Tag.false.rawValue)
        case .int(let n):
            out.append(Tag.int.rawValue)
            varint(zigzag(n), into: &out)
        case .double(let d):
            out.append(Tag.double.rawValue)
            let bits = d.bitPattern
            for shift in stride(from: 0, to: 64, by: 8) { out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        case .string(let s):
            out.append(Tag.string.rawValue)
            string(s, into: &out)
        case .array where depth >= maxDepth, .object where depth >= maxDepth:
            encodeIteratively(value, into: &out)
        case .array(let items):
            out.append(Tag.array.rawValue)
            varint(UInt64(items.count), into: &out)
            for item in items { encode(item, depth: depth + 1, into: &out) }
        case .object(let fields):
            out.append(Tag.object.rawValue)
            varint(UInt64(fields.count), into: &out)
            // Sorted keys, each before its value.
            for (key, item) in fields.sorted(by: { $0.key < $1.key }) {
                string(key, into: &out)
                encode(item, depth: depth + 1, into: &out)
            }
        }
    }

    /// The same encoding without recursion (a value of any depth).
    static func encodeIteratively(_ value: JSONValue, into out: inout [UInt8]) {
        enum Work {
            case value(JSONValue)
            case key(String)
        }
        var pending: [Work] = [.value(value)]
        while let work = pending.popLast() {
            switch work {
            case .key(let key):
                string(key, into: &out)
            case .value(.array(let items)):
                out.append(Tag.array.rawValue)
                varint(UInt64(items.count), into: &out)
                for item in items.reversed() { pending.append(.value(item)) }
            case .value(.object(let fields)):
                out.append(Tag.object.rawValue)
                varint(UInt64(fields.count), into: &out)
                // Sorted keys; pushed in reverse so the first key comes out first, before its value.
                for (key, item) in fields.sorted(by: { $0.key < $1.key }).reversed() {
                    pending.append(.value(item))
                    pending.append(.key(key))
                }
            case .value(let scalar):
                encode(scalar, depth: 0, into: &out)
            }
        }
    }

    static func decode(_ bytes: [UInt8]) throws -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(buffer: buffer)
            let value = try reader.value(depth: 0)
            guard reader.offset == buffer.count else { throw Malformed() }
            return value
        }
    }

    static func zigzag(_ n: Int64) -> UInt64 {
        UInt64(bitPattern: (n << 1) ^ (n >> 63))
    }

    /// The bytes `varint` writes for `value`.
    static func varintSize(_ value: UInt64) -> Int {
        var v = value
        var size = 1
        while v >= 0x80 {
            v >>= 7
            size += 1
        }
        return size
    }

    /// The bytes `string` writes for `s` (its length prefix and its UTF-8).
    static func stringSize(_ s: String) -> Int {
        let n = s.utf8.count
        return varintSize(UInt64(n)) + n
    }

    private static func string(_ s: String, into out: inout [UInt8]) {
        var copy = s
        copy.withUTF8 { utf8 in
            varint(UInt64(utf8.count), into: &out)
            out.append(contentsOf: utf8)
        }
    }

    private static func varint(_ value: UInt64, into out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(v & 0x7f) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    fileprivate struct Reader {
        let buffer: UnsafeBufferPointer<UInt8>
        var offset = 0

        mutating func byte() throws -> UInt8 {
            guard offset < buffer.count else { throw Malformed() }
            defer { offset += 1 }
            return buffer[offset]
        }

        mutating func varint() throws -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let b = try byte()
                guard shift < 64 else { throw Malformed() }
                result |= UInt64(b & 0x7f) << shift
                if b & 0x80 == 0 { return result }
                shift += 7
            }
        }

        mutating func count() throws -> Int {
            let n = try varint()
            guard n <= UInt64(buffer.count - offset) else { throw Malformed() }
            return Int(n)
        }

        mutating func string() throws -> String {
            let n = try count()
            defer { offset += n }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[offset..<(offset + n)]), as: UTF8.self)
        }

        /// Steps over one value, checking it as `value(depth:)` would, building nothing.
        mutating func skip(depth: Int) throws {
            guard depth < BinaryJSON.maxDepth, let tag = Tag(rawValue: try byte()) else { throw Malformed() }
            switch tag {
            case .null, .false, .true: return
            case .int: _ = try varint()
            case .double:
                guard buffer.count - offset >= 8 else { throw Malformed() }
                offset += 8
            case .string: offset += try count()
            case .array:
                let n = try count()
                for _ in 0..<n { try skip(depth: depth + 1) }
            case .object:
                let n = try count()
                for _ in 0..<n {
                    offset += try count()
                    try skip(depth: depth + 1)
                }
            }
        }

        /// The tag byte at `offset`, without moving.
        func peekTag() -> Tag? {
            offset < buffer.count ? Tag(rawValue: buffer[offset]) : nil
        }

        mutating func value(depth: Int) throws -> JSONValue {
            guard depth < BinaryJSON.maxDepth, let tag = Tag(rawValue: try byte()) else { throw Malformed() }
            switch tag {
            case .null: return .null
            case .false: return .bool(false)
            case .true: return .bool(true)
            case .int:
                let z = try varint()
                return .int(Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1))))
            case .double:
                var bits: UInt64 = 0
                for shift in stride(from: 0, to: 64, by: 8) { bits |= UInt64(try byte()) << UInt64(shift) }
                return .double(Double(bitPattern: bits))
            case .string: return .string(try string())
            case .array:
                let n = try count()
                var items: [JSONValue] = []
                items.reserveCapacity(n)
                for _ in 0..<n { items.append(try value(depth: depth + 1)) }
                return .array(items)
            case .object:
                let n = try count()
                var fields: [String: JSONValue] = [:]
                fields.reserveCapacity(n)
                for _ in 0..<n {
                    let key = try string()
                    fields[key] = try value(depth: depth + 1)
                }
                return .object(fields)
            }
        }
    }
}

/// One stored object read in place (a cached row's payload): its keys indexed once, each value
/// decoded only when asked for. Reading a cached message this way builds no dictionary and hashes
/// no key: the decoder asks for a few dozen fields of objects of a few dozen keys, so a scan of
/// the key table (lengths first, then bytes) is cheaper than building and probing a hash table.
///
/// `init` checks the whole value as `BinaryJSON.decode` would (tags, lengths, nesting), so a
/// damaged payload is refused up front and no later read of it can fail.
struct BinaryObject {
    private let bytes: [UInt8]
    /// Each key's byte range and the offset of its value's tag, in stored order.
    private var entries: [(keyStart: Int, keyCount: Int, value: Int)] = []
    /// Nesting of this object in the stored value.
    let depth: Int

    /// The object a whole payload holds; nil when it holds another kind of value.
    init?(payload bytes: [UInt8]) throws {
        // One pass: the key table is indexed while every value is checked.
        let parsed: [(keyStart: Int, keyCount: Int, value: Int)]? = try bytes.withUnsafeBufferPointer { buffer in
            var reader = BinaryJSON.Reader(buffer: buffer)
            guard reader.peekTag() == .object else {
                try reader.skip(depth: 0)
                guard reader.offset == buffer.count else { throw BinaryJSON.Malformed() }
                return nil
            }
            reader.offset += 1
            let n = try reader.count()
            var out: [(keyStart: Int, keyCount: Int, value: Int)] = []
            out.reserveCapacity(n)
            for _ in 0..<n {
                let keyCount = try reader.count()
                let keyStart = reader.offset
                reader.offset += keyCount
                out.append((keyStart, keyCount, reader.offset))
                try reader.skip(depth: 1)
            }
            guard reader.offset == buffer.count else { throw BinaryJSON.Malformed() }
            return out
        }
        guard let parsed else { return nil }
        self.bytes = bytes
        self.depth = 0
        self.entries = parsed
    }

    /// The object whose tag is at `offset` (already checked); nil when the value there is not one.
    private init?(bytes: [UInt8], at offset: Int, depth: Int) {
        self.bytes = bytes
        self.depth = depth
        let parsed: [(Int, Int, Int)]? = bytes.withUnsafeBufferPointer { buffer in
            var reader = BinaryJSON.Reader(buffer: buffer, offset: offset)
            guard reader.peekTag() == .object else { return nil }
            reader.offset += 1
            guard let n = try? reader.count() else { return nil }
            var out: [(Int, Int, Int)] = []
            out.reserveCapacity(n)
            for _ in 0..<n {
                guard let keyCount = try? reader.count() else { return nil }
                let keyStart = reader.offset
                reader.offset += keyCount
                out.append((keyStart, keyCount, reader.offset))
                guard (try? reader.skip(depth: depth + 1)) != nil else { return nil }
            }
            return out
        }
        guard let parsed else { return nil }
        entries = parsed.map { (keyStart: $0.0, keyCount: $0.1, value: $0.2) }
    }

    /// Where `key`'s value starts, when the object has that key.
    private func offset(of key: String) -> Int? {
        var key = key
        return key.withUTF8 { wanted in
            bytes.withUnsafeBufferPointer { buffer in
                guard let first = wanted.first else { return entries.first { $0.keyCount == 0 }?.value }
                for entry in entries where entry.keyCount == wanted.count && buffer[entry.keyStart] == first {
                    if let base = buffer.baseAddress, let w = wanted.baseAddress,
                       memcmp(base + entry.keyStart, w, wanted.count) == 0 {
                        return entry.value
                    }
                }
                return nil
            }
        }
    }

    /// `key`'s value, decoded; nil when absent.
    func value(_ key: String) -> JSONValue? {
        guard let at = offset(of: key) else { return nil }
        return bytes.withUnsafeBufferPointer { buffer in
            var reader = BinaryJSON.Reader(buffer: buffer, offset: at)
            // Checked in `init`: cannot fail.
            return try? reader.value(depth: depth + 1)
        }
    }

    /// What `key` holds, for a field that should be an object.
    enum Nested {
        /// Absent, or null.
        case absent
        case object(BinaryObject)
        /// Another kind of value.
        case other
    }

    /// `key`'s value when it is an object, read in place (one lookup).
    func nested(_ key: String) -> Nested {
        guard let at = offset(of: key), bytes[at] != BinaryJSON.Tag.null.rawValue else { return .absent }
        return BinaryObject(bytes: bytes, at: at, depth: depth + 1).map { .object($0) } ?? .other
    }
}
