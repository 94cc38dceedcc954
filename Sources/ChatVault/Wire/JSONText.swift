import Foundation

/// Why JSON text was refused, and where (`offset` counts bytes from the start of the text).
/// Says nothing of the text itself: a refused server answer may hold message content.
struct JSONTextError: Error, Equatable, CustomStringConvertible {
    enum Reason: String, Sendable {
        case unexpectedEnd = "the text ends inside a value"
        case unexpectedByte = "a byte no JSON value starts with, or out of place"
        case trailingText = "more text after the value"
        case tooDeep = "containers nested deeper than the limit"
        case badNumber = "a malformed number"
        case badString = "a malformed string (an unescaped control character, a bad escape or invalid UTF-8)"
    }

    let reason: Reason
    let offset: Int

    var description: String { "JSON text refused at byte \(offset): \(reason.rawValue)" }
}

/// Reads JSON text (RFC 8259, UTF-8) straight into a `JSONValue`: one pass over the bytes, no
/// Foundation objects between. A server's answer is parsed here, so the reader never recurses
/// (containers are kept on a stack of its own, at most `maxDepth` deep), never traps on what it
/// reads (numbers are checked for overflow; whole numbers beyond `Int64` become `.double`), and
/// refuses with a `JSONTextError` what is not JSON: a control character or invalid UTF-8 in a
/// string, a lone surrogate escape, a leading zero, text after the value.
///
/// What it accepts, and the value it gives, is what `JSONSerialization` (with fragments allowed)
/// gives for UTF-8 text, but for three things it got wrong on Linux: a whole number below
/// -2^53 or so became a `Double` (its last digits lost) where it is an exact `.int` here; one
/// from 2^63 to 2^64 wrapped to a negative `.int` where it is a `.double` here; and a trailing
/// comma (`[1,]`) was accepted where it is refused here, as RFC 8259 says.
/// `JSONTextTests` checks the two side by side on generated and damaged text. Of a key written
/// twice in one object, the last value is kept.
struct JSONTextReader {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index: Int
    private let maxDepth: Int

    /// One container being read: its elements so far, or its fields and the key whose value
    /// comes next.
    private struct Open {
        var isObject: Bool
        var items: [JSONValue] = []
        var fields: [String: JSONValue] = [:]
        var key: String = ""
    }

    static func value(of data: Data, maxDepth: Int) throws(JSONTextError) -> JSONValue {
        let parsed: Result<JSONValue, JSONTextError> = data.withUnsafeBytes { raw in
            let buffer = raw.bindMemory(to: UInt8.self)
            var reader = JSONTextReader(bytes: buffer, maxDepth: maxDepth)
            do throws(JSONTextError) {
                return .success(try reader.document())
            } catch {
                return .failure(error)
            }
        }
        return try parsed.get()
    }

    private init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        // A UTF-8 byte order mark is skipped, as JSONSerialization does.
        index = bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF ? 3 : 0
    }

    private func fail(_ reason: JSONTextError.Reason, at offset: Int? = nil) -> JSONTextError {
        JSONTextError(reason: reason, offset: offset ?? index)
    }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// The byte at the reading point, after any white space; throws at the end of the text.
    private mutating func nextByte() throws(JSONTextError) -> UInt8 {
        skipSpace()
        guard index < bytes.count else { throw fail(.unexpectedEnd) }
        return bytes[index]
    }

    private mutating func document() throws(JSONTextError) -> JSONValue {
        var open: [Open] = []
        var value: JSONValue
        readValue: while true {
            switch try nextByte() {
            case UInt8(ascii: "{"):
                guard open.count < maxDepth else { throw fail(.tooDeep) }
                index += 1
                if try nextByte() == UInt8(ascii: "}") {
                    index += 1
                    value = .object([:])
                } else {
                    open.append(Open(isObject: true, key: try key()))
                    continue readValue
                }
            case UInt8(ascii: "["):
                guard open.count < maxDepth else { throw fail(.tooDeep) }
                index += 1
                if try nextByte() == UInt8(ascii: "]") {
                    index += 1
                    value = .array([])
                } else {
                    open.append(Open(isObject: false))
                    continue readValue
                }
            case UInt8(ascii: "\""):
                value = .string(try string())
            case UInt8(ascii: "t"):
                try literal("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try literal("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try literal("null")
                value = .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = try number()
            default:
                throw fail(.unexpectedByte)
            }
            // A value is whole: it joins the container it is in, and every container it closes
            // joins its own, until one needs another value.
            while let last = open.indices.last {
                if open[last].isObject {
                    open[last].fields[open[last].key] = value
                } else {
                    open[last].items.append(value)
                }
                let separator = try nextByte()
                index += 1
                switch separator {
                case UInt8(ascii: ","):
                    if open[last].isObject { open[last].key = try key() }
                    continue readValue
                case UInt8(ascii: "}") where open[last].isObject:
                    value = .object(open.removeLast().fields)
                case UInt8(ascii: "]") where !open[last].isObject:
                    value = .array(open.removeLast().items)
                default:
                    throw fail(.unexpectedByte, at: index - 1)
                }
            }
            skipSpace()
            guard index == bytes.count else { throw fail(.trailingText) }
            return value
        }
    }

    /// An object's key and the colon after it.
    private mutating func key() throws(JSONTextError) -> String {
        guard try nextByte() == UInt8(ascii: "\"") else { throw fail(.unexpectedByte) }
        let key = try string()
        guard try nextByte() == UInt8(ascii: ":") else { throw fail(.unexpectedByte) }
        index += 1
        return key
    }

    private mutating func literal(_ word: StaticString) throws(JSONTextError) {
        let start = index
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw fail(.unexpectedEnd, at: bytes.count) }
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: count)
        for offset in 0..<count where bytes[start + offset] != expected[offset] {
            throw fail(.unexpectedByte, at: start + offset)
        }
        index += count
    }

    // MARK: Strings

    /// A string from its opening quote (at the reading point) to its closing one. Text without
    /// escapes is validated and copied once; escapes are decoded into a scratch buffer.
    private mutating func string() throws(JSONTextError) -> String {
        let start = index
        index += 1
        var scratch: [UInt8] = []
        var segment = index
        while true {
            guard index < bytes.count else { throw fail(.unexpectedEnd) }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text: String?
                if scratch.isEmpty {
                    text = String(validating: UnsafeBufferPointer(rebasing: bytes[segment..<index]), as: UTF8.self)
                } else {
                    scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[segment..<index]))
                    text = String(validating: scratch, as: UTF8.self)
                }
                guard let text else { throw fail(.badString, at: start) }
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") {
                scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[segment..<index]))
                try escape(into: &scratch)
                segment = index
                continue
            }
            guard byte >= 0x20 else { throw fail(.badString) }
            index += 1
        }
    }

    /// One escape, from its backslash (at the reading point), appended as UTF-8.
    private mutating func escape(into scratch: inout [UInt8]) throws(JSONTextError) {
        let start = index
        guard index + 1 < bytes.count else { throw fail(.unexpectedEnd, at: bytes.count) }
        let letter = bytes[index + 1]
        index += 2
        switch letter {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scratch.append(letter)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try hexQuad())
            if (0xD800...0xDBFF).contains(scalar) {
                // A high surrogate must be followed by an escaped low one.
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw fail(.badString, at: start)
                }
                index += 2
                let low = UInt32(try hexQuad())
                guard (0xDC00...0xDFFF).contains(low) else { throw fail(.badString, at: start) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw fail(.badString, at: start)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw fail(.badString, at: start) }
            if let encoded = UTF8.encode(unicode) { scratch.append(contentsOf: encoded) }
        default:
            throw fail(.badString, at: start)
        }
    }

    /// Four hex digits after `\u`.
    private mutating func hexQuad() throws(JSONTextError) -> UInt16 {
        guard bytes.count - index >= 4 else { throw fail(.unexpectedEnd, at: bytes.count) }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail(.badString)
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    // MARK: Numbers

    /// A number: `.int` when it has no fraction or exponent and fits `Int64`, else `.double`.
    private mutating func number() throws(JSONTextError) -> JSONValue {
        let start = index
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard index < bytes.count else { throw fail(.unexpectedEnd) }
        // The whole part: one 0, or digits not starting with 0. Accumulated toward the sign so
        // that Int64.min fits; an overflow only means the number is read as a Double.
        var whole: Int64 = 0
        var fits = true
        let first = bytes[index]
        guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { throw fail(.badNumber) }
        if first == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                let digit = Int64(bytes[index] - UInt8(ascii: "0"))
                if fits {
                    let (shifted, o1) = whole.multipliedReportingOverflow(by: 10)
                    let (next, o2) = negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
                    if o1 || o2 { fits = false } else { whole = next }
                }
                index += 1
            }
        }
        var integral = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            try digits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            integral = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            try digits()
        }
        if integral && fits { return .int(whole) }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        // Beyond Double's range (1e400) is refused, as JSONSerialization does: such a value could
        // not be written back as JSON.
        guard let double = Double(text), double.isFinite else { throw fail(.badNumber, at: start) }
        return .double(double)
    }

    /// One or more decimal digits.
    private mutating func digits() throws(JSONTextError) {
        let start = index
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        guard index > start else { throw fail(index == bytes.count ? .unexpectedEnd : .badNumber) }
    }
}
