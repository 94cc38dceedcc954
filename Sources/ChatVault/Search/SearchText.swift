import VaultStore

/// The text of a message as the local search index holds it, and the one transformation applied
/// to indexed text and to query terms alike (issue 24, first step; the index itself comes next).
///
/// SQLite's `unicode61` tokenizer (with `remove_diacritics=1`) folds case and accents and splits
/// on anything that is not a letter, digit or mark; what it cannot do is done here first:
/// - CJK text (Han, kana, Hangul) has no spaces between words, so a run of it becomes overlapping
///   bigrams plus its last character (`東京タワー` → `東京 京タ タワ ワー ー`): a query of two or more
///   characters is the phrase of its own bigrams (`タワー` → `"タワ ワー"`, found inside the longer
///   run), and one character is a prefix of the bigram it starts or the character that ends a run
///   (as Seshat's n-gram mode does);
/// - Turkish dotless `ı` folds to `i` (the tokenizer folds `İ` but keeps `ı` a letter of its own),
///   so `isik` finds `ışık` as it finds `IŞIK`.
///
///     SearchText.indexable(message)      // what of a message is indexed
///     SearchText.prepare("東京タワー")     // "東京 京タ タワ ワー ー"
enum SearchText {
    /// What of a message is searchable: a text message's text, a media message's caption and
    /// file names, a custom message's declared text (`conversationText`); never metadata, ids or
    /// the app's custom data. Prepared (`prepare`). Empty for a deleted message.
    static func indexable(_ m: BaseMessage) -> String {
        prepare(searchable(m))
    }

    /// What of a message is searchable, as written (before `prepare`): the text a search result
    /// highlights. Parts (a caption, each file name) one per line.
    static func searchable(_ m: BaseMessage) -> String {
        guard m.deletedAt == 0 else { return "" }
        var parts: [String] = []
        switch m {
        case let text as TextMessage:
            parts.append(text.text)
        case let media as MediaMessage:
            if let caption = media.caption { parts.append(caption) }
            parts += media.attachments.map(\.fileName)
        case let custom as CustomMessage:
            if let declared = custom.conversationText { parts.append(declared) }
        default:
            break
        }
        return parts.joined(separator: "\n")
    }

    /// What is indexed of a stored message (`messages.payload`), for the SQL function the index's
    /// content view calls (`chatvault_search_text(payload)`); nil when the bytes do not decode.
    ///
    /// It runs for every message written (the index's triggers) and every row the build visits,
    /// so it reads only the fields `searchable(_:)` uses, straight from the stored object, instead
    /// of decoding the whole message (sender, receiver, metadata, reactions…: most of ingest's
    /// cost with the index, in bench search's profile). Same answer as `indexable(decoded message)`
    /// for every payload the decoder accepts (`SearchTextTests`); for one it refuses, whatever it
    /// answers, the same bytes always give the same text (the index reads it back to delete).
    static func indexable(payload: [UInt8]) -> String? {
        guard let object = try? BinaryObject(payload: payload) else { return nil }
        if let deleted = object.value("deletedAt")?.doubleValue, deleted != 0 { return "" }
        let category = object.value("category")?.stringValue ?? "message"
        let type = object.value("type")?.stringValue ?? ""
        let data = object.value("data")
        var parts: [String] = []
        switch category {
        case MessageCategory.message.rawValue:
            if type == MessageType.text.rawValue {
                parts.append(data?["text"]?.stringValue ?? "")
            } else if [MessageType.image, .video, .audio, .file].map(\.rawValue).contains(type) {
                if let caption = data?["caption"]?.stringValue { parts.append(caption) }
                parts += (data?["attachments"]?.arrayValue ?? []).map { $0["name"]?.stringValue ?? "" }
            }
        case MessageCategory.custom.rawValue:
            if let declared = data?["conversationText"]?.stringValue { parts.append(declared) }
        default:
            break
        }
        return prepare(parts.joined(separator: "\n"))
    }

    /// `text` ready for the tokenizer: CJK runs as bigrams, dotless `ı` as `i`.
    /// - Parameter query: for a query term: a run's bigrams only (a lone character stays itself),
    ///   so a phrase of them meets the indexed bigrams in order whatever follows the run there.
    static func prepare(_ text: String, query: Bool = false) -> String {
        var out = String.UnicodeScalarView()
        var run: [Unicode.Scalar] = []
        func flushRun() {
            guard !run.isEmpty else { return }
            var grams = zip(run, run.dropFirst()).map { String($0.0) + String($0.1) }
            if let last = run.last, !query || run.count == 1 { grams.append(String(last)) }
            out.append(contentsOf: (" " + grams.joined(separator: " ") + " ").unicodeScalars)
            run.removeAll(keepingCapacity: true)
        }
        for scalar in text.unicodeScalars {
            if isCJK(scalar) {
                run.append(scalar)
                continue
            }
            flushRun()
            out.append(scalar == "\u{0131}" ? "i" : scalar)
        }
        flushRun()
        return String(out)
    }

    /// Whether `scalar` is written without spaces between words (Han, kana, Hangul).
    static func isCJK(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x3040...0x30FF,   // Hiragana, Katakana (the long vowel mark included)
             0x31F0...0x31FF,   // Katakana phonetic extensions
             0x3400...0x4DBF,   // CJK extension A
             0x4E00...0x9FFF,   // CJK unified ideographs
             0xF900...0xFAFF,   // CJK compatibility ideographs
             0xFF66...0xFF9F,   // halfwidth Katakana
             0x1100...0x11FF,   // Hangul Jamo
             0x3130...0x318F,   // Hangul compatibility Jamo
             0xAC00...0xD7AF,   // Hangul syllables
             0x20000...0x2FA1F: // CJK extensions B… and compatibility supplement
            return true
        default:
            return false
        }
    }
}
