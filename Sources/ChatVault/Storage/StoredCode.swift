import VaultStore

/// A value kept in an integer column, by the one scheme every such value uses: each type lists its
/// codes once, in `storedCodes`. A code is written to disk, so it is never reused or renumbered;
/// a code no version wrote (a damaged or future row) reads as nil, and the caller picks the safe
/// reading, never a trap.
///
///     MessageStatus.read.storedCode                 // 4
///     MessageStatus(storedCode: 4)                  // .read
///     MessageSource(storedCode: 9)                  // nil
protocol StoredCode: Equatable, Sendable {
    /// Each value and its code, every value once.
    static var storedCodes: [(value: Self, code: Int64)] { get }
}

extension StoredCode {
    /// The value's code (every value has one: `StoredCodeTests` checks each table).
    var storedCode: Int64 {
        Self.storedCodes.first { $0.value == self }?.code ?? -1
    }

    /// The value stored as `code`, nil for a code no version wrote.
    init?(storedCode code: Int64) {
        guard let entry = Self.storedCodes.first(where: { $0.code == code }) else { return nil }
        self = entry.value
    }

    /// The value stored in column `index` of the current row, nil for an unknown code.
    init?(_ stmt: Statement, at index: Int32) {
        self.init(storedCode: stmt.int64(index))
    }
}

/// `messages.status`: ordered as a message progresses (a receipt moves rows with a lower code).
extension MessageStatus: StoredCode {
    static let storedCodes: [(value: MessageStatus, code: Int64)] = [
        (.pending, 0), (.sending, 1), (.sent, 2), (.delivered, 3), (.read, 4), (.failed, 5),
    ]
}

/// `messages.source`: how the cached row first arrived.
extension MessageSource: StoredCode {
    static let storedCodes: [(value: MessageSource, code: Int64)] = [(.realtime, 0), (.sync, 1)]
}

/// `outbox.state`.
extension OutboxRow.State: StoredCode {
    static let storedCodes: [(value: OutboxRow.State, code: Int64)] = [(.pending, 0), (.failed, 2)]
}

/// A table's columns as an enum whose case order is the order a read selects them: `list` is the
/// SQL column list and `index` a column's position in it, both from the one declaration, so no
/// read decodes by a positional literal.
///
///     enum OutboxColumn: String, RowColumns { case localId = "local_id", seq, … }
///     db.cached("SELECT \(OutboxColumn.list) FROM outbox"); stmt.int64(OutboxColumn.seq.index)
protocol RowColumns: RawRepresentable<String>, CaseIterable, Hashable where AllCases == [Self] {}

extension RowColumns {
    /// The columns, comma-separated, in declaration order.
    static var list: String { allCases.map(\.rawValue).joined(separator: ", ") }

    /// The column's index in `list` (a search of `allCases`: resolve it once where rows are many).
    var index: Int32 { Int32(Self.allCases.firstIndex(of: self) ?? 0) }
}
