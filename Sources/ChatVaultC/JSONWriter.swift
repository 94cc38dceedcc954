import ChatVault
import Foundation

/// JSON text written straight into bytes, for the models the C API hands over: no dictionary, no
/// key sort, no intermediate value per field (`chatvault bench capi`: building a JSONValue per
/// message and sorting its keys was most of the C layer's cost of a cached page). The renderers
/// write each object's keys in sorted order by hand, so the text is the same as a sorted encoder's.
///
///     var w = JSONWriter()
///     w.open(); w.key("id"); w.int(42); w.key("text"); w.string("hi"); w.close()
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    /// A value ended just before: the next value or key needs a comma first.
    private var needsComma = false

    init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = false
    }

    private mutating func ascii(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func open() { separate(); bytes.append(UInt8(ascii: "{")) }
    mutating func close() { bytes.append(UInt8(ascii: "}")); needsComma = true }
    mutating func openArray() { separate(); bytes.append(UInt8(ascii: "[")) }
    mutating func closeArray() { bytes.append(UInt8(ascii: "]")); needsComma = true }

    /// An object key (a literal: our own field names need no escaping).
    mutating func key(_ k: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        ascii(k)
        ascii("\":")
    }

    mutating func null() { separate(); ascii("null"); needsComma = true }
    mutating func bool(_ b: Bool) { separate(); if b { ascii("true") } else { ascii("false") }; needsComma = true }

    mutating func int(_ n: Int64) {
        separate()
        if n < 0 { bytes.append(UInt8(ascii: "-")) }
        // The digits appended lowest first, then reversed in place: no buffer per number.
        var rest = n.magnitude
        let first = bytes.count
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0
        bytes[first...].reverse()
        needsComma = true
    }

    mutating func int(_ n: Int) { int(Int64(n)) }

    /// A whole number as an integer, a non-finite one as null.
    mutating func double(_ d: Double) {
        if !d.isFinite {
            null()
        } else if d == d.rounded(), abs(d) < 1e15 {
            int(Int64(d))
        } else {
            separate()
            bytes.append(contentsOf: "\(d)".utf8)
            needsComma = true
        }
    }

    /// A string, escaped as RFC 8259 requires.
    mutating func string(_ s: String) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var start = 0
            for (i, byte) in utf8.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i]))
                escape(byte)
                start = i + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    private mutating func escape(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): ascii("\\\"")
        case UInt8(ascii: "\\"): ascii("\\\\")
        case 0x0a: ascii("\\n")
        case 0x0d: ascii("\\r")
        case 0x09: ascii("\\t")
        default:
            let hex: StaticString = "0123456789abcdef"
            ascii("\\u00")
            hex.withUTF8Buffer { h in
                bytes.append(h[Int(byte >> 4)])
                bytes.append(h[Int(byte & 0xf)])
            }
        }
    }

    mutating func string(_ s: String?) { if let s { string(s) } else { null() } }

    /// Any JSONValue (custom data, metadata: the app's own shapes), its keys sorted.
    mutating func value(_ v: JSONValue) {
        switch v {
        case .null: null()
        case .bool(let b): bool(b)
        case .int(let n): int(n)
        case .double(let d): double(d)
        case .string(let s): string(s)
        case .array(let items):
            openArray()
            for item in items { value(item) }
            closeArray()
        case .object(let fields):
            open()
            for k in fields.keys.sorted() {
                string(k)
                bytes.append(UInt8(ascii: ":"))
                needsComma = false
                value(fields[k] ?? .null)
            }
            close()
        }
    }

    /// An array of items, each written by `write`.
    mutating func array<Item>(_ items: [Item], _ write: (Item, inout JSONWriter) -> Void) {
        openArray()
        for item in items { write(item, &self) }
        closeArray()
    }

    /// The text written so far (valid UTF-8: every string came from a Swift String).
    var text: JSONText { JSONText(bytes: bytes) }
}

/// JSON text on its way to C: handed over as a malloc'd C string (`cv_free`) or lent for a
/// callback, without a Swift String in between (no second copy, no UTF-8 validation of text that
/// was written from Swift Strings).
struct JSONText: Sendable {
    let bytes: [UInt8]

    /// A copy the caller frees with `cv_free`.
    func owned() -> UnsafeMutablePointer<CChar>? {
        guard let memory = malloc(bytes.count + 1)?.bindMemory(to: CChar.self, capacity: bytes.count + 1) else { return nil }
        bytes.withUnsafeBytes { raw in
            if let base = raw.baseAddress { memcpy(memory, base, bytes.count) }
        }
        memory[bytes.count] = 0
        return memory
    }

    /// The text as a NUL-terminated C string for the duration of `body`.
    func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        (bytes + [0]).withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    var string: String { String(decoding: bytes, as: UTF8.self) }
}
