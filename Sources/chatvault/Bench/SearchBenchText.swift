import ChatVaultSimulator
import Foundation

/// The text of the messages `chatvault bench search` searches: chat-like bodies whose words repeat
/// as words do in real text, so a query word matches a known share of the messages (the filler of
/// `bench reads` repeats the same dozen words in every message, where any word matches every row).
///
/// Words are drawn from a vocabulary of 30,000 by Zipf's law (the word of rank r with weight
/// 1 / (r + 1)): the top ranks are everyday chat words ("the", "i", "you", … about half of all
/// words written), the tail pronounceable made-up words (`tabeko`, `minuro`). A body has 2 to 60
/// words (exponentially spread, about 12 on average, most of them short), the first capitalised,
/// now and then a comma, and a full stop, question or exclamation mark at the end. Message `i`'s
/// body depends on `i` alone (a fixed pseudo-random generator seeded with it), so every run and
/// every cache holds the same text.
///
/// The query words sit at fixed ranks, so their share is known before the cache exists (the bench
/// also counts the rows each query matches): `tomorrow` rank 10 (about 1 word in 120: in ~9 % of
/// the messages), `meeting` rank 25 (~4 %), `dinner` rank 100 (~1 %), `passport` rank 2,000
/// (~0.05 %).
enum SearchBenchText {
    static let vocabularySize = 30_000

    /// Everyday chat words, most frequent first; the query words are placed among them.
    private static let everyday: [String] = [
        "the", "i", "you", "to", "a", "and", "it", "is", "that", "of",
        "tomorrow", "in", "for", "we", "on", "my", "me", "so", "be", "this",
        "have", "just", "was", "but", "can", "meeting", "with", "not", "at", "do",
        "are", "what", "ok", "yes", "no", "will", "up", "get", "if", "all",
        "know", "your", "like", "how", "out", "time", "good", "see", "now", "there",
        "go", "one", "about", "think", "then", "here", "today", "want", "when", "back",
        "lol", "did", "from", "they", "he", "she", "would", "really", "well", "some",
        "too", "right", "going", "thanks", "been", "come", "let", "by", "an", "our",
        "more", "need", "new", "make", "sure", "still", "maybe", "night", "day", "work",
        "week", "home", "said", "got", "had", "should", "could", "were", "great", "love",
    ]

    /// Words placed at ranks beyond `everyday` (in the made-up tail).
    private static let placed: [Int: String] = [100: "dinner", 2_000: "passport"]

    /// The vocabulary, rank 0 first.
    static let vocabulary: [String] = {
        var words = everyday
        var taken = Set(everyday).union(placed.values)
        let consonants = Array("bdfghklmnprstvz"), vowels = Array("aeiou")
        let syllables = consonants.flatMap { c in vowels.map { v in String([c, v]) } }  // 75
        var k = 0
        while words.count < vocabularySize {
            if let word = placed[words.count] {
                words.append(word)
                continue
            }
            // Two syllables for the first 75², then three; spread over the syllables so that
            // neighbouring ranks do not share a first syllable.
            let n = syllables.count
            let two = n * n
            var word = ""
            if k < two {
                let m = (k &* 2_731) % two
                word = syllables[m / n] + syllables[m % n]
            } else {
                let m = ((k - two) &* 7_919) % (two * n)
                word = syllables[m / two] + syllables[(m / n) % n] + syllables[m % n]
            }
            k += 1
            if taken.insert(word).inserted { words.append(word) }
        }
        return words
    }()

    /// Cumulative Zipf weights over `vocabulary`, ending at 1.
    private static let cumulative: [Double] = {
        var sum = 0.0
        var out: [Double] = []
        out.reserveCapacity(vocabularySize)
        for rank in 0..<vocabularySize {
            sum += 1 / Double(rank + 1)
            out.append(sum)
        }
        return out.map { $0 / sum }
    }()

    /// The rank of `word` in the vocabulary, if it is there.
    static func rank(of word: String) -> Int? { vocabulary.firstIndex(of: word) }

    /// The share of all words written that are `word` (its Zipf weight).
    static func share(of word: String) -> Double {
        guard let r = rank(of: word) else { return 0 }
        return (cumulative[r] - (r == 0 ? 0 : cumulative[r - 1]))
    }

    /// The body of message `i`.
    static func body(_ i: Int) -> String {
        var random = SeededGenerator(seed: UInt64(truncatingIfNeeded: i) &+ 0x5EA2C4)
        let count = min(60, 2 + Int(-log(1 - random.nextUnit()) * 10))
        var text = ""
        for w in 0..<count {
            var word = vocabulary[sample(random.nextUnit())]
            if w == 0, let first = word.first { word = first.uppercased() + word.dropFirst() }
            if w > 0 { text += random.next() % 9 == 0 ? ", " : " " }
            text += word
        }
        switch random.next() % 6 {
        case 0: text += "?"
        case 1: text += "!"
        case 2, 3: text += "."
        default: break
        }
        return text
    }

    /// The rank whose cumulative weight first reaches `u` (0 ≤ u < 1).
    private static func sample(_ u: Double) -> Int {
        var lo = 0, hi = cumulative.count - 1
        while lo < hi {
            let mid = (lo + hi) / 2
            if cumulative[mid] < u { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }
}
