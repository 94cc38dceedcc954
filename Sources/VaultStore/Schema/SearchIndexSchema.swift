/// The local search index's tables (issue 24), inside the encrypted database like everything else.
///
/// - `search_content`: a view over `messages` whose `body` is what of each message is searchable,
///   computed by the application SQL function `chatvault_search_text(payload)` (ChatVault defines
///   it on its own connections: the text of a stored payload). The text is never stored twice.
/// - `search_index`: an FTS4 table over that view (external content), case and accents folded
///   (`unicode61`, `remove_diacritics=1`), without prefix indexes (measured with bench search:
///   `prefix="2,3"` doubled the index, slowed its build by 40 % and the ingest by 0.04–0.05× for
///   about 1 ms off a 3-letter prefix query that takes 4.4 ms without them). FTS4 reads
///   the view only to remove a row's old words (and for `rebuild`); a query reads the index alone.
///
/// Who keeps it: the engine's writer connection (ChatVault's `SearchIndex` installs triggers and
/// an update hook on it), so a connection without the function (a tool, a test, a key change
/// copying the file) never has to compute it. An index that misses rows is built in the background from `buildStateKey`'s
/// cursor; one that is damaged is dropped and recreated with `recreate` (never a reset of the cache).
package enum SearchIndexSchema {
    /// The FTS4 table.
    package static let table = "search_index"
    /// Its external content: a view over `messages`.
    package static let view = "search_content"
    /// The application SQL function the view calls.
    package static let function = "chatvault_search_text"
    /// `kv` key: how far the background build has come (a `messages.row_id`, as text) or `complete`.
    package static let buildStateKey = "search.build"
    /// `kv` key: the version of the indexed text's rules the index was built with.
    package static let formatKey = "search.format"

    /// The FTS4 table's definition.
    package static let createTable = """
        CREATE VIRTUAL TABLE IF NOT EXISTS search_index USING fts4(content="search_content", body,
            tokenize=unicode61 "remove_diacritics=1")
        """

    /// The view and the table, as migration 6 creates them.
    package static let create: [String] = [
        "CREATE VIEW IF NOT EXISTS search_content AS SELECT row_id AS rowid, chatvault_search_text(payload) AS body FROM messages",
        createTable,
    ]

    /// The FTS4 table's own tables (its b-trees in the file), for telling a damaged index apart
    /// from a damaged cache.
    package static let shadowTables = ["search_index_content", "search_index_segments", "search_index_segdir",
                                       "search_index_docsize", "search_index_stat"]

    /// Empties the index in place, as `clearOfflineCache` does with the rows: FTS4's own tables
    /// emptied (segments, their directory, sizes and totals: what an index that never held a row
    /// has), no row read back, and no `DROP` (which SQLite refuses, `SQLITE_LOCKED`, while any
    /// statement of the connection is still open). The first statement of its transaction, so no
    /// words of it are pending in memory.
    package static func empty(_ db: Database) throws {
        for table in ["search_index_segments", "search_index_segdir", "search_index_docsize", "search_index_stat"] {
            try db.execute("DELETE FROM \(table)")
        }
        try db.run("DELETE FROM kv WHERE key = ?", .text(buildStateKey))
    }

    /// Empties the index: drops and recreates the FTS4 table and forgets the build's progress (the
    /// next build starts from the first row). Cheap whatever the index held: no row is read.
    package static func recreate(_ db: Database) throws {
        try db.execute("DROP TABLE IF EXISTS search_index")
        try db.execute(createTable)
        try db.run("DELETE FROM kv WHERE key = ?", .text(buildStateKey))
    }
}
