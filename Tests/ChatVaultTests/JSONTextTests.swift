import ChatVaultSimulator
import Foundation
import XCTest
@testable import ChatVault

/// `JSONValue(jsonData:)` reads a server's JSON text with ChatVault's own reader (`JSONTextReader`)
/// rather than through `JSONSerialization`'s objects. These tests hold it to what Foundation gave
/// for the same UTF-8 text: the same value or the same refusal, on generated documents written
/// in several styles and on damaged copies of them, plus the edges a hostile server aims at.
final class JSONTextTests: XCTestCase {
    /// What Foundation makes of the text, as a `JSONValue` (the reader this one replaced).
    static func foundation(_ data: Data) -> JSONValue? {
        guard let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else { return nil }
        return try? JSONValue(foundation: object)
    }

    static func ours(_ data: Data) -> JSONValue? {
        try? JSONValue(jsonData: data)
    }

    static func ours(_ text: String) -> JSONValue? { ours(Data(text.utf8)) }

    func testEveryKindOfValueReadsAsFoundationReadsIt() throws {
        let texts = [
            #"{"a":1,"b":[true,false,null],"c":{"d":"e"},"f":-2.5e3,"g":"","h":[],"i":{}}"#,
            " \t\r\n[1 , 2\n,\t3 ] \n",
            #""text""#, "0", "-0", "12", "-12", "1.0", "1e2", "1E+2", "1e-2", "0.000001", "true", "null",
            "9223372036854775807", "-9007199254740992", "-9223372036854775809",
            "18446744073709551616", "123456789012345678901234567890", "1e308", "2.2250738585072014e-308",
            #""\"\\\/\b\f\n\r\t\u0041\u00e9\u4e2d\ud83d\ude00""#, #""caf\u00E9 and raw café 中文 😀""#,
            #""\u0000 inside""#, #"{"dup":1,"dup":2}"#, "\u{FEFF}[1]",
            #"{"event_id":"$abc:example.org","origin_server_ts":1733400000000,"content":{"body":"hi","msgtype":"m.text","m.relates_to":{"rel_type":"m.replace","event_id":"$x"}}}"#,
        ]
        for text in texts {
            let data = Data(text.utf8)
            let expected = try XCTUnwrap(Self.foundation(data), "Foundation refused \(text)")
            XCTAssertEqual(Self.ours(data), expected, text)
        }
        // The kinds, spelled out (a reader that made every number a double would pass the above
        // only if Foundation did the same; these say what the engine relies on).
        XCTAssertEqual(Self.ours("12"), .int(12))
        XCTAssertEqual(Self.ours("-9223372036854775808"), .int(.min))
        XCTAssertEqual(Self.ours("9223372036854775807"), .int(.max))
        XCTAssertEqual(Self.ours("1.0"), .double(1))
        XCTAssertEqual(Self.ours("9223372036854775808"), .double(9_223_372_036_854_775_808))
        // Where Foundation was wrong: a large negative whole number lost its last digits, and one
        // past Int64.max wrapped around to a negative.
        XCTAssertEqual(Self.ours("-2087957982455319984"), .int(-2_087_957_982_455_319_984))
        XCTAssertNotEqual(Self.foundation(Data("-2087957982455319984".utf8)), .int(-2_087_957_982_455_319_984))
        XCTAssertEqual(Self.ours("18446744073709550632"), .double(Double(UInt64(18_446_744_073_709_550_632))))
        // Numbers beyond Double's range are refused (they could not be written back).
        XCTAssertNil(Self.ours("1e400"))
        XCTAssertNil(Self.ours("[-2e999]"))
        // Decimal text is read correctly rounded (as Swift's own Double(String) reads it).
        for text in ["18.467440737095514562", "1780446744073705508523", "0.1", "2.2250738585072011e-308", "4.9e-324"] {
            XCTAssertEqual(Self.ours(text), .double(try XCTUnwrap(Double(text))), text)
        }
        XCTAssertEqual(Self.ours(#""\ud83d\ude00""#), .string("😀"))
        XCTAssertEqual(Self.ours(#"{"dup":1,"dup":2}"#), ["dup": 2])
    }

    func testWhatIsNotJSONIsRefusedAsFoundationRefusesIt() {
        let texts = [
            "", " ", "[", "]", "[,1]", "{\"a\"}", "{\"a\":}", "{1:2}", "{'a':1}", "[1 2]",
            "01", "-", "-01", "1.", ".5", "+1", "1e", "1e+", "0x10", "NaN", "Infinity", "-Infinity",
            "tru", "nul", "True", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"a\u{01}b\"", "\"tab\there\"",
            "[1] [2]", "1 2", "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"", "{\"a\":1}}", "[[1]",
        ]
        for text in texts {
            XCTAssertNil(Self.foundation(Data(text.utf8)), "Foundation accepts \(text.debugDescription): the test is wrong")
            XCTAssertNil(Self.ours(text), text.debugDescription)
        }
        // Foundation lets a trailing comma through; RFC 8259 does not, nor does this reader.
        for text in ["[1,]", "{\"a\":1,}", "[[1] ,\n]"] {
            XCTAssertNotNil(Self.foundation(Data(text.utf8)), text.debugDescription)
            XCTAssertThrowsError(try JSONTextReader.value(of: Data(text.utf8), maxDepth: 512)) {
                XCTAssertEqual(($0 as? JSONTextError)?.reason, .unexpectedByte, text.debugDescription)
            }
        }
        for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xF8, 0x88, 0x80, 0x80, 0x80, 0x22]] {
            XCTAssertNil(Self.foundation(Data(bytes)), "Foundation accepts \(bytes)")
            XCTAssertNil(Self.ours(Data(bytes)), "invalid UTF-8 \(bytes)")
        }
    }

    func testTheErrorSaysWhereAndWhyButNotWhatTheTextHeld() {
        let secret = "attack at dawn"
        do {
            _ = try JSONTextReader.value(of: Data(#"{"body":"\#(secret)\#u{01}"}"#.utf8), maxDepth: 512)
            XCTFail("a control character in a string was accepted")
        } catch {
            XCTAssertEqual(error.reason, .badString)
            XCTAssertEqual(error.offset, 23)
            XCTAssertFalse(error.description.contains("attack"), error.description)
        }
        XCTAssertThrowsError(try JSONTextReader.value(of: Data("[1] x".utf8), maxDepth: 512)) {
            XCTAssertEqual($0 as? JSONTextError, JSONTextError(reason: .trailingText, offset: 4))
        }
    }

    func testNestingStopsAtTheLimitWithoutRecursion() throws {
        let limit = JSONValue.maxFoundationDepth
        let deepest = String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
        let read = try XCTUnwrap(Self.ours(deepest))
        XCTAssertNil(read.extentBreach(maxDepth: limit))
        XCTAssertEqual(read.extentBreach(maxDepth: limit - 1), .depth)
        XCTAssertEqual(Self.foundation(Data(deepest.utf8)), read)

        let tooDeep = "[" + deepest + "]"
        XCTAssertThrowsError(try JSONTextReader.value(of: Data(tooDeep.utf8), maxDepth: limit)) {
            XCTAssertEqual(($0 as? JSONTextError)?.reason, .tooDeep)
        }
        // Far deeper than any stack would take by recursion: refused at the limit, not crashed.
        let hostile = String(repeating: #"{"a":["#, count: 200_000)
        XCTAssertThrowsError(try JSONTextReader.value(of: Data(hostile.utf8), maxDepth: limit)) {
            XCTAssertEqual(($0 as? JSONTextError)?.reason, .tooDeep)
        }
    }

    // MARK: Side by side on generated text

    static let pieces = ["a", "é", "中", "😀", "\"", "\\", "/", "\n", "\t", "\u{01}", " ", "body", "$ev:x.org", "\u{7F}"]

    /// JSON text for a random value, in a random style: spaces, escapes for any character,
    /// numbers as integers, fractions or exponents.
    static func text(_ rng: inout SeededGenerator, depth: Int = 0) -> String {
        let space = [" ", "", "\n", "\t", "\r\n "][rng.below(5)]
        switch rng.below(depth > 4 ? 4 : 7) {
        case 0: return ["true", "false", "null"][rng.below(3)]
        case 1:
            switch rng.below(6) {
            case 0: return String(Int64(bitPattern: rng.next()))
            case 1: return String(rng.below(1000) - 500)
            case 2: return "\(rng.below(100)).\(rng.below(1000))"
            case 3: return "\(rng.below(10))e\(["", "+", "-"][rng.below(3)])\(rng.below(40))"
            case 4: return "-0.\(rng.below(10))E\(rng.below(5))"
            default: return String(UInt64.max - UInt64(rng.below(1000))) + String(rng.below(10))
            }
        case 2, 3: return string(&rng)
        case 4, 5:
            let items = (0..<rng.below(5)).map { _ in space + text(&rng, depth: depth + 1) + space }
            return "[" + items.joined(separator: ",") + "]"
        default:
            let fields = (0..<rng.below(5)).map { _ in
                space + string(&rng) + space + ":" + space + text(&rng, depth: depth + 1)
            }
            return "{" + fields.joined(separator: "," + space) + "}"
        }
    }

    static func string(_ rng: inout SeededGenerator) -> String {
        var out = "\""
        for _ in 0..<rng.below(6) {
            let piece = pieces[rng.below(pieces.count)]
            for scalar in piece.unicodeScalars {
                switch (scalar, rng.below(3)) {
                case ("\"", _): out += "\\\""
                case ("\\", _): out += "\\\\"
                case ("\n", 0): out += "\\n"
                case (_, 0) where scalar.value >= 0x10000:
                    let v = scalar.value - 0x10000
                    out += String(format: "\\u%04x\\u%04X", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF))
                case (_, let style) where style == 0 || scalar.value < 0x20:
                    out += String(format: "\\u%04x", scalar.value)
                case ("/", 1): out += "\\/"
                default: out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// Equal, or numbers where Foundation was wrong (see `JSONTextReader`): the same number
    /// within a few units in the last place, a wrapped one unwrapped.
    static func agree(_ ours: JSONValue, _ theirs: JSONValue) -> Bool {
        switch (ours, theirs) {
        case (.array(let a), .array(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { agree($0, $1) }
        case (.object(let a), .object(let b)):
            return a.count == b.count && a.allSatisfy { key, value in b[key].map { agree(value, $0) } ?? false }
        case (.double(let d), .int(let n)) where d >= 9_223_372_036_854_775_808:
            return close(d, Double(UInt64(bitPattern: n)))
        case (.int(let n), .double(let d)) where n < -(1 << 53):
            return close(Double(n), d)
        case (.double(let a), .double(let b)):
            return close(a, b)
        default:
            return ours == theirs
        }
    }

    static func close(_ a: Double, _ b: Double) -> Bool {
        a == b || abs(a - b) <= max(abs(a), abs(b)) * 4 * Double.ulpOfOne
    }

    func testGeneratedDocumentsReadAsFoundationReadsThem() throws {
        var rng = SeededGenerator(seed: 0xC4A7_5A17)
        var containers = 0
        for _ in 0..<3_000 {
            let text = Self.text(&rng)
            let data = Data(text.utf8)
            let expected = try XCTUnwrap(Self.foundation(data), "Foundation refused \(text.debugDescription)")
            let read = try XCTUnwrap(Self.ours(data), "refused \(text.debugDescription)")
            XCTAssertTrue(Self.agree(read, expected), "\(text.debugDescription): \(read) against Foundation's \(expected)")
            if text.hasPrefix("[") || text.hasPrefix("{") { containers += 1 }
        }
        XCTAssertGreaterThan(containers, 500, "the generator hardly made containers")
    }

    func testDamagedDocumentsAreReadOrRefusedAsFoundationDoes() {
        var rng = SeededGenerator(seed: 0xDA_4A6E)
        var refused = 0
        let alphabet = Array(#"{}[]":,\ -+.eE0123456789tfnu"#.utf8) + [0x00, 0x01, 0x7F, 0x80, 0xC3, 0xED, 0xFF]
        for _ in 0..<6_000 {
            var bytes = Array(Self.text(&rng).utf8)
            for _ in 0...rng.below(3) {
                let at = rng.below(bytes.count + 1)
                switch rng.below(3) {
                case 0: if at < bytes.count { bytes.remove(at: at) }
                case 1: bytes.insert(alphabet[rng.below(alphabet.count)], at: at)
                default: if at < bytes.count { bytes[at] = alphabet[rng.below(alphabet.count)] }
                }
            }
            // Foundation guesses UTF-16 or UTF-32 from NUL bytes at the start; servers send UTF-8.
            if bytes.prefix(4).contains(0) { continue }
            let data = Data(bytes)
            let text = String(decoding: bytes, as: UTF8.self)
            switch (Self.ours(data), Self.foundation(data)) {
            case (nil, nil): refused += 1
            case (let read?, let expected?):
                XCTAssertTrue(Self.agree(read, expected), "\(text.debugDescription): \(read) against Foundation's \(expected)")
            case (let read?, nil):
                XCTFail("\(text.debugDescription) read as \(read) where Foundation refused it")
            case (nil, _?):
                // Only a trailing comma, which Foundation lets through.
                XCTAssertNotNil(text.range(of: #",[ \t\r\n]*[\]}]"#, options: .regularExpression),
                                "\(text.debugDescription) refused where Foundation read it")
            }
        }
        XCTAssertGreaterThan(refused, 1_000, "the damage hardly broke anything")
    }
}

extension SeededGenerator {
    /// A value in 0..<n (the generator is seeded, so every run draws the same documents).
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
