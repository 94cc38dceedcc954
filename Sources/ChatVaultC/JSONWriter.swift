import ChatVault
import Foundation
import Synchronization

/// JSON text written straight into one growing buffer, for the models the C API hands over: no
/// dictionary, no key sort, no intermediate value per field, no Array bookkeeping per byte
/// (`chatvault bench capi`: a JSONValue per message, sorted at encoding time, was most of the C
/// layer's cost of a cached page; an Array-backed writer still cost 2.4 ns a byte, this one about
/// 1). The renderers write each object's keys in sorted order by hand, so the text is what a
/// sorted encoder would write.
///
///     var w = JSONWriter()
///     w.open(); w.key("id"); w.int(42); w.key("text"); w.string("hi"); w.close()
///     let text = w.finish()
struct JSONWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int
    /// A value ended just before: the next value or key needs a comma first.
    private var needsComma = false

    init(capacity: Int = 1024) {
        self.capacity = max(capacity, 64)
        // malloc'd (room for the NUL kept aside), so that the finished text can go to C as it is.
        base = Self.allocate(self.capacity + 1)
    }

    private static func allocate(_ bytes: Int) -> UnsafeMutablePointer<UInt8> {
        guard let memory = malloc(bytes) else { fatalError("out of memory") }
        return memory.bindMemory(to: UInt8.self, capacity: bytes)
    }

    deinit { free(base) }

    /// The text written, NUL-terminated, handed over without a copy.
    consuming func finish() -> JSONText {
        base[count] = 0
        let text = JSONText(taking: base, count: count)
        base = Self.allocate(1) // what deinit frees
        return text
    }

    @inline(__always) private mutating func reserve(_ n: Int) {
        if n > capacity &- count { grow(count + n) }
    }

    private mutating func grow(_ needed: Int) {
        var size = capacity * 2
        while size < needed { size *= 2 }
        guard let bigger = realloc(base, size + 1) else { fatalError("out of memory") }
        base = bigger.bindMemory(to: UInt8.self, capacity: size + 1)
        capacity = size
    }

    @inline(__always) private mutating func put(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always) private mutating func put(_ run: UnsafeBufferPointer<UInt8>) {
        guard let from = run.baseAddress, run.count > 0 else { return }
        reserve(run.count)
        (base + count).update(from: from, count: run.count)
        count += run.count
    }

    @inline(__always) private mutating func ascii(_ s: StaticString) {
        let n = s.utf8CodeUnitCount
        reserve(n)
        (base + count).update(from: s.utf8Start, count: n)
        count += n
    }

    @inline(__always) private mutating func separate() {
        if needsComma { put(UInt8(ascii: ",")) }
        needsComma = false
    }

    mutating func open() { separate(); put(UInt8(ascii: "{")) }
    mutating func close() { put(UInt8(ascii: "}")); needsComma = true }
    mutating func openArray() { separate(); put(UInt8(ascii: "[")) }
    mutating func closeArray() { put(UInt8(ascii: "]")); needsComma = true }

    /// An object key (a literal: our own field names need no escaping).
    mutating func key(_ k: StaticString) {
        separate()
        put(UInt8(ascii: "\""))
        ascii(k)
        ascii("\":")
    }

    mutating func null() { separate(); ascii("null"); needsComma = true }
    mutating func bool(_ b: Bool) { separate(); if b { ascii("true") } else { ascii("false") }; needsComma = true }

    mutating func int(_ n: Int64) {
        separate()
        reserve(21)
        if n < 0 { base[count] = UInt8(ascii: "-"); count += 1 }
        // The digits written lowest first, then reversed in place.
        var rest = n.magnitude
        let first = count
        repeat {
            base[count] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
            count += 1
            rest /= 10
        } while rest > 0
        var i = first, j = count - 1
        while i < j {
            let low = base[i]
            base[i] = base[j]
            base[j] = low
            i += 1
            j -= 1
        }
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
            var s = "\(d)"
            s.withUTF8 { put($0) }
            needsComma = true
        }
    }

    /// A string, escaped as RFC 8259 requires (runs without an escape copied whole).
    mutating func string(_ s: String) {
        separate()
        put(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var start = 0, i = 0
            let n = utf8.count
            while i < n {
                let byte = utf8[i]
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    put(UnsafeBufferPointer(rebasing: utf8[start..<i]))
                    escape(byte)
                    start = i + 1
                }
                i += 1
            }
            put(UnsafeBufferPointer(rebasing: utf8[start..<n]))
        }
        put(UInt8(ascii: "\""))
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
            put(hex.utf8Start[Int(byte >> 4)])
            put(hex.utf8Start[Int(byte & 0xf)])
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
                put(UInt8(ascii: ":"))
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
}

/// JSON text on its way to C: a malloc'd, NUL-terminated buffer handed over once to the caller
/// (`cv_free`) or lent for a callback, without a Swift String in between (no copy, no UTF-8
/// validation of text that was written from Swift Strings).
final class JSONText: @unchecked Sendable {
    /// The buffer's address, 0 once handed over (a Mutex: the text is made on one thread and
    /// taken on another).
    private let buffer: Mutex<UInt>
    let count: Int

    init(taking pointer: UnsafeMutablePointer<UInt8>, count: Int) {
        buffer = Mutex(UInt(bitPattern: pointer))
        self.count = count
    }

    deinit {
        let address = buffer.withLock { $0 }
        if address != 0 { free(UnsafeMutableRawPointer(bitPattern: address)) }
    }

    /// The text for the caller to free with `cv_free`: the buffer itself, handed over once (nil after).
    func owned() -> UnsafeMutablePointer<CChar>? {
        let taken = buffer.withLock { address -> UInt in defer { address = 0 }; return address }
        if taken != 0 { return UnsafeMutablePointer(bitPattern: taken) }
        return nil
    }

    /// The text as a NUL-terminated C string for the duration of `body` (before it is handed over).
    func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        let address = buffer.withLock { $0 }
        guard let text = UnsafePointer<CChar>(bitPattern: address) else { return "".withCString(body) }
        return body(text)
    }
}
