/// A user's search as the index is asked it: the query language kept simple and safe (issue 24,
/// first step). Words must all match; `"a phrase"` matches its words in order; `prefix*` matches
/// words that start so; `-word` or `-"a phrase"` excludes messages holding it. Whatever the user
/// types is reduced to letters, digits and marks before it reaches `MATCH`: quotes, `*`, `OR`,
/// `NEAR`, column filters, parentheses and control characters are never operators of SQLite's
/// query syntax, and a hostile query is at most a typed error.
///
/// Debian's SQLite has FTS4's standard query syntax only, where `-` cannot exclude a phrase
/// (checked: `-"apps"` excludes nothing); an exclusion is therefore its own `MATCH`, subtracted
/// from the positive one in SQL:
///
///     let q = try SearchQuery("lin* \"offline cache\" -windows")
///     q.match        // "lin*" "offline cache"
///     q.exclusions   // ["\"windows\""]
///     // SELECT docid FROM idx WHERE idx MATCH :match AND docid NOT IN (SELECT docid FROM idx WHERE idx MATCH :exclusion)
struct SearchQuery: Sendable, Equatable {
    /// A term as the user wrote it, reduced to its tokens.
    struct Term: Sendable, Equatable {
        /// The term's tokens, prepared as indexed text is (`SearchText.prepare`), in order.
        var tokens: [String]
        /// The last token is a prefix.
        var prefix: Bool
        /// The term excludes.
        var excluded: Bool
    }

    /// Why a query cannot be asked.
    enum Problem: Error, Sendable, Equatable {
        /// Nothing searchable (only spaces, punctuation or operators).
        case empty
        /// Only exclusions: there is nothing to subtract them from.
        case onlyExclusions
        /// Longer than `SearchQuery.maxCharacters`.
        case tooLong(limit: Int)
        /// More than `SearchQuery.maxTerms` terms.
        case tooManyTerms(limit: Int)
    }

    /// The longest query accepted, in characters.
    static let maxCharacters = 1_024
    /// The most terms (words, phrases, exclusions) a query may have.
    static let maxTerms = 32

    /// Every term, in the order written.
    let terms: [Term]

    /// Parses what the user typed.
    /// - Throws: `Problem`.
    init(_ text: String) throws(Problem) {
        guard text.count <= Self.maxCharacters else { throw .tooLong(limit: Self.maxCharacters) }
        var terms: [Term] = []
        for raw in Self.split(text) {
            let tokens = Self.tokens(of: raw.text)
            guard !tokens.isEmpty else { continue }
            terms.append(Term(tokens: tokens, prefix: raw.prefix, excluded: raw.excluded))
        }
        guard terms.count <= Self.maxTerms else { throw .tooManyTerms(limit: Self.maxTerms) }
        guard !terms.isEmpty else { throw .empty }
        guard terms.contains(where: { !$0.excluded }) else { throw .onlyExclusions }
        self.terms = terms
    }

    /// The positive terms as one FTS4 `MATCH` expression: each a double-quoted phrase of tokens,
    /// `*` after a prefix's last token.
    var match: String {
        terms.filter { !$0.excluded }.map(Self.phrase).joined(separator: " ")
    }

    /// Each excluded term as its own `MATCH` expression.
    var exclusions: [String] {
        terms.filter(\.excluded).map(Self.phrase)
    }

    private static func phrase(_ term: Term) -> String {
        var tokens = term.tokens
        // One CJK character is found as the start of a bigram or the end of a run: a prefix.
        let lone = tokens.count == 1 && tokens[0].unicodeScalars.count == 1 && tokens[0].unicodeScalars.allSatisfy(SearchText.isCJK)
        if (term.prefix || lone), let last = tokens.last { tokens[tokens.count - 1] = last + "*" }
        return "\"" + tokens.joined(separator: " ") + "\""
    }

    /// The user's terms: quoted phrases, `-` and `*` marks, the rest split on white space.
    private static func split(_ text: String) -> [(text: String, prefix: Bool, excluded: Bool)] {
        var out: [(text: String, prefix: Bool, excluded: Bool)] = []
        var scalars = Array(text.unicodeScalars)
        // Control characters (NUL included) are spaces.
        for i in scalars.indices where scalars[i].properties.generalCategory == .control { scalars[i] = " " }
        var i = 0
        while i < scalars.count {
            while i < scalars.count, scalars[i].properties.isWhitespace { i += 1 }
            guard i < scalars.count else { break }
            var excluded = false
            if scalars[i] == "-" {
                excluded = true
                i += 1
            }
            var word = String.UnicodeScalarView()
            var prefix = false
            if i < scalars.count, scalars[i] == "\"" {
                i += 1
                while i < scalars.count, scalars[i] != "\"" {
                    word.append(scalars[i])
                    i += 1
                }
                i += 1 // the closing quote (or the end)
                if i < scalars.count, scalars[i] == "*" {
                    prefix = true
                    i += 1
                }
            } else {
                while i < scalars.count, !scalars[i].properties.isWhitespace, scalars[i] != "\"" {
                    word.append(scalars[i])
                    i += 1
                }
                if let last = word.last, last == "*" {
                    prefix = true
                    while word.last == "*" { word.removeLast() }
                }
            }
            out.append((String(word), prefix, excluded))
        }
        return out
    }

    /// A term's tokens as the index holds them: prepared, then split where the tokenizer splits
    /// (anything but letters, digits and marks), lowercased.
    static func tokens(of text: String) -> [String] {
        var tokens: [String] = []
        var current = String.UnicodeScalarView()
        for scalar in SearchText.prepare(text, query: true).unicodeScalars {
            switch scalar.properties.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
                 .decimalNumber, .letterNumber, .otherNumber, .nonspacingMark, .spacingMark, .enclosingMark:
                current.append(scalar)
            default:
                if !current.isEmpty { tokens.append(String(current).lowercased()) }
                current = String.UnicodeScalarView()
            }
        }
        if !current.isEmpty { tokens.append(String(current).lowercased()) }
        return tokens
    }
}
