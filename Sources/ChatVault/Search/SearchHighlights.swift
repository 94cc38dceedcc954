import Foundation

/// Where a query's words are in a message's text, and a short excerpt around them (issue 24):
/// computed in memory from the decoded message, never stored, never logged.
///
/// The text is cut into units as the index sees it: words (letters, digits, marks) compared
/// case- and accent-folded, and CJK characters one by one. A term matches where its units follow
/// each other (a phrase's words, a CJK run's characters), its last unit as a prefix for `word*`.
///
///     let marks = SearchHighlights(query: try SearchQuery("creme brul*"))
///     marks.ranges(in: "Crème brûlée tonight")   // "Crème", "brûlée"
enum SearchHighlights {
    /// A unit of text: its range and its folded form.
    struct Unit {
        let range: Range<String.Index>
        let key: String
        let cjk: Bool
    }

    /// A term as units to find: folded keys, the last one a prefix when `prefix`.
    struct Needle {
        let keys: [String]
        let prefix: Bool
    }

    static func fold(_ word: String) -> String {
        // Most words are ASCII: lowercasing is all their folding (Foundation's `folding` was most
        // of a page's highlighting time in bench search's profile).
        if word.utf8.allSatisfy({ $0 < 0x80 }) { return word.lowercased() }
        return word.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
            .replacingOccurrences(of: "\u{0131}", with: "i")
    }

    static func isWordScalar(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII {
            let v = scalar.value
            return (v >= 0x30 && v <= 0x39) || (v >= 0x41 && v <= 0x5A) || (v >= 0x61 && v <= 0x7A)
        }
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
             .decimalNumber, .letterNumber, .otherNumber, .nonspacingMark, .spacingMark, .enclosingMark:
            return true
        default:
            return false
        }
    }

    static func units(of text: String) -> [Unit] {
        var out: [Unit] = []
        let scalars = text.unicodeScalars
        var i = scalars.startIndex
        while i < scalars.endIndex {
            let scalar = scalars[i]
            if SearchText.isCJK(scalar) {
                let next = scalars.index(after: i)
                out.append(Unit(range: i..<next, key: String(scalar), cjk: true))
                i = next
            } else if isWordScalar(scalar) {
                var j = i
                while j < scalars.endIndex, isWordScalar(scalars[j]), !SearchText.isCJK(scalars[j]) { j = scalars.index(after: j) }
                out.append(Unit(range: i..<j, key: fold(String(scalars[i..<j])), cjk: false))
                i = j
            } else {
                i = scalars.index(after: i)
            }
        }
        return out
    }

    /// The positive terms of `query` as needles.
    static func needles(_ query: SearchQuery) -> [Needle] {
        query.terms.filter { !$0.excluded }.map { term in
            var keys: [String] = []
            var previousCJK: String?
            for token in term.tokens {
                let scalars = Array(token.unicodeScalars)
                if let first = scalars.first, SearchText.isCJK(first) {
                    // Bigrams overlap by a character: `東京 京タ` is 東, 京, タ.
                    if let previousCJK, scalars.count == 2, previousCJK.unicodeScalars.last == first {
                        keys.append(String(scalars[1]))
                    } else {
                        keys += scalars.map { String($0) }
                    }
                    previousCJK = token
                } else {
                    keys.append(fold(token))
                    previousCJK = nil
                }
            }
            let lone = keys.count == 1 && keys[0].unicodeScalars.count == 1 && keys[0].unicodeScalars.allSatisfy(SearchText.isCJK)
            return Needle(keys: keys, prefix: term.prefix || lone)
        }
    }

    /// Every place a needle matches, in text order, overlaps merged.
    static func ranges(of needles: [Needle], in text: String) -> [Range<String.Index>] {
        let units = units(of: text)
        var found: [Range<String.Index>] = []
        for needle in needles where !needle.keys.isEmpty {
            var i = 0
            while i + needle.keys.count <= units.count {
                var matched = true
                for (k, key) in needle.keys.enumerated() {
                    let unit = units[i + k]
                    let last = k == needle.keys.count - 1
                    if !(unit.key == key || (last && needle.prefix && unit.key.hasPrefix(key))) {
                        matched = false
                        break
                    }
                    // A CJK run's characters follow each other with nothing between.
                    if k > 0, unit.cjk, units[i + k - 1].range.upperBound != unit.range.lowerBound {
                        matched = false
                        break
                    }
                }
                if matched {
                    found.append(units[i].range.lowerBound..<units[i + needle.keys.count - 1].range.upperBound)
                }
                i += 1
            }
        }
        found.sort { $0.lowerBound < $1.lowerBound }
        var merged: [Range<String.Index>] = []
        for range in found {
            if let last = merged.last, range.lowerBound <= last.upperBound {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        return merged
    }

    /// An excerpt of `text` around its first match (about `before` characters before it and up
    /// to `length` in all, cut at spaces), on one line, with the matches inside it.
    static func snippet(of text: String, matches: [Range<String.Index>], before: Int = 30, length: Int = 96)
        -> (String, [Range<String.Index>]) {
        let scalars = text.unicodeScalars
        let anchor = matches.first?.lowerBound ?? text.startIndex
        var lo = scalars.index(anchor, offsetBy: -before, limitedBy: scalars.startIndex) ?? scalars.startIndex
        if lo > scalars.startIndex {
            // Start after a space when one is near, so the excerpt begins with a whole word.
            var j = lo
            while j < anchor, !scalars[j].properties.isWhitespace { j = scalars.index(after: j) }
            if j < anchor { lo = scalars.index(after: j) }
        }
        var hi = scalars.index(lo, offsetBy: length, limitedBy: scalars.endIndex) ?? scalars.endIndex
        if hi < scalars.endIndex {
            var j = hi
            while j > anchor, !scalars[j].properties.isWhitespace { j = scalars.index(before: j) }
            if j > anchor { hi = j }
        }
        if let first = matches.first, hi < first.upperBound { hi = first.upperBound }
        let lead = lo > scalars.startIndex ? "…" : ""
        let tail = hi < scalars.endIndex ? "…" : ""
        let body = String(String.UnicodeScalarView(scalars[lo..<hi].map { $0.properties.isWhitespace ? " " : $0 }))
        let snippet = lead + body + tail
        // Same scalars in the body as in the text (white space replaced one for one).
        let shift = lead.unicodeScalars.count
        let base = scalars.distance(from: scalars.startIndex, to: lo)
        let out = snippet.unicodeScalars
        var ranges: [Range<String.Index>] = []
        for match in matches where match.lowerBound >= lo && match.upperBound <= hi {
            let start = scalars.distance(from: scalars.startIndex, to: match.lowerBound) - base + shift
            let count = scalars.distance(from: match.lowerBound, to: match.upperBound)
            let a = out.index(out.startIndex, offsetBy: start)
            ranges.append(a..<out.index(a, offsetBy: count))
        }
        return (snippet, ranges)
    }
}
