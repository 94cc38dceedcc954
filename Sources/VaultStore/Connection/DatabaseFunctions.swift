internal import CSQLCipher

/// The closure behind an application SQL function, owned by SQLite once defined (released by the
/// function's destructor when the connection closes or the name is defined again).
private final class TextFunction: Sendable {
    let body: @Sendable ([UInt8]?) -> String?

    init(_ body: @escaping @Sendable ([UInt8]?) -> String?) {
        self.body = body
    }
}

extension Database {
    /// Defines the SQL function `name(x)` on this connection: one argument, deterministic (the same
    /// bytes always give the same text, so SQLite may cache it and an index or view may use it).
    /// `body` gets the argument's bytes (a blob's or a text's; nil for NULL) and answers text, or
    /// nil for NULL. It runs inside whatever statement calls it, on this connection's queue, and
    /// must not use the database.
    ///
    ///     try db.defineTextFunction("chatvault_search_text") { payload in payload.flatMap(searchText) }
    ///     // CREATE VIEW … AS SELECT row_id AS rowid, chatvault_search_text(payload) AS body FROM messages
    /// - Throws: `DatabaseError` when SQLite refuses the definition.
    package func defineTextFunction(_ name: String, _ body: @escaping @Sendable ([UInt8]?) -> String?) throws(DatabaseError) {
        let box = Unmanaged.passRetained(TextFunction(body)).toOpaque()
        let rc = sqlite3_create_function_v2(handle, name, 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, box, { context, count, values in
            guard let context else { return }
            guard count == 1, let values, let value = values[0], let data = sqlite3_user_data(context) else {
                return sqlite3_result_null(context)
            }
            let function = Unmanaged<TextFunction>.fromOpaque(data).takeUnretainedValue()
            var bytes: [UInt8]?
            if sqlite3_value_type(value) != SQLITE_NULL {
                let length = Int(sqlite3_value_bytes(value))
                if let base = sqlite3_value_blob(value), length > 0 {
                    bytes = Array(UnsafeRawBufferPointer(start: base, count: length))
                } else {
                    bytes = []
                }
            }
            if let text = function.body(bytes) {
                sqlite3_result_text(context, text, -1, chatvault_sqlite_transient())
            } else {
                sqlite3_result_null(context)
            }
        }, nil, nil, { data in
            if let data { Unmanaged<TextFunction>.fromOpaque(data).release() }
        })
        // On failure SQLite has already called the destructor (it owns the box from the call on).
        guard rc == SQLITE_OK else { throw error(rc, "define function \(name)") }
    }
}

/// The closure behind a numeric application function (see `defineRealFunction`).
private final class RealFunction: Sendable {
    let body: @Sendable ([UInt8]) -> Double

    init(_ body: @escaping @Sendable ([UInt8]) -> Double) {
        self.body = body
    }
}

extension Database {
    /// Defines the SQL function `name(x)` answering a number from the bytes of `x` (a blob's, or
    /// none for NULL): deterministic, one argument, on this connection. For a ranking computed
    /// from `matchinfo()`'s blob:
    ///
    ///     try db.defineRealFunction("chatvault_rank") { matchinfo in bm25(matchinfo) }
    ///     // SELECT docid, chatvault_rank(matchinfo(idx, 'pcnalx')) FROM idx WHERE idx MATCH ?
    /// - Throws: `DatabaseError` when SQLite refuses the definition.
    package func defineRealFunction(_ name: String, _ body: @escaping @Sendable ([UInt8]) -> Double) throws(DatabaseError) {
        let box = Unmanaged.passRetained(RealFunction(body)).toOpaque()
        let rc = sqlite3_create_function_v2(handle, name, 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, box, { context, count, values in
            guard let context else { return }
            guard count == 1, let values, let value = values[0], let data = sqlite3_user_data(context) else {
                return sqlite3_result_double(context, 0)
            }
            let function = Unmanaged<RealFunction>.fromOpaque(data).takeUnretainedValue()
            var bytes: [UInt8] = []
            let length = Int(sqlite3_value_bytes(value))
            if sqlite3_value_type(value) == SQLITE_BLOB, let base = sqlite3_value_blob(value), length > 0 {
                bytes = Array(UnsafeRawBufferPointer(start: base, count: length))
            }
            sqlite3_result_double(context, function.body(bytes))
        }, nil, nil, { data in
            if let data { Unmanaged<RealFunction>.fromOpaque(data).release() }
        })
        guard rc == SQLITE_OK else { throw error(rc, "define function \(name)") }
    }
}
