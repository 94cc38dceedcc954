/// The cache schema and its migrations, written for SQLite 3.15.2 (Debian 12's SQLCipher 3.4.1):
/// no UPSERT, no JSON1, no window functions, no RETURNING, no DROP/RENAME COLUMN.
///
/// `PRAGMA user_version` holds the schema version. Each migration runs in one transaction with the
/// version bump, so a crash leaves the previous version intact.
package enum Schema {
    package struct Migration: Sendable {
        package let version: Int
        package let statements: [String]
        /// Work SQL alone cannot do, run after the statements in the same transaction.
        package let work: (@Sendable (Database) throws -> Void)?

        init(version: Int, statements: [String], work: (@Sendable (Database) throws -> Void)? = nil) {
            self.version = version
            self.statements = statements
            self.work = work
        }
    }

    /// Every migration, in order. Later work appends; it never edits a shipped migration.
    package static let migrations: [Migration] = [
        Migration(version: 1, statements: [
            // One row per conversation (user or group). Model fields beyond the indexed ones live
            // in `payload` (an encoded model) so later work can add fields without a migration.
            """
            CREATE TABLE conversations (
                id TEXT PRIMARY KEY NOT NULL,
                type TEXT NOT NULL,
                peer_id TEXT NOT NULL,
                last_message_at INTEGER NOT NULL DEFAULT 0,
                last_opened_at INTEGER NOT NULL DEFAULT 0,
                updated_at INTEGER NOT NULL DEFAULT 0,
                unread_count INTEGER NOT NULL DEFAULT 0,
                payload BLOB
            )
            """,
            // Messages received or sent. `server_id` is NULL until the server acknowledges;
            // `local_id` is the outbox handle (NULL for messages that never went through it).
            """
            CREATE TABLE messages (
                row_id INTEGER PRIMARY KEY,
                server_id INTEGER UNIQUE,
                local_id TEXT UNIQUE,
                conversation_id TEXT NOT NULL,
                parent_id INTEGER NOT NULL DEFAULT 0,
                sender_id TEXT NOT NULL,
                receiver_id TEXT NOT NULL,
                receiver_type TEXT NOT NULL,
                category TEXT NOT NULL,
                type TEXT NOT NULL,
                sent_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL DEFAULT 0,
                deleted_at INTEGER NOT NULL DEFAULT 0,
                status INTEGER NOT NULL DEFAULT 0,
                source INTEGER NOT NULL DEFAULT 0,
                flags INTEGER NOT NULL DEFAULT 0,
                body TEXT,
                payload BLOB
            )
            """,
            "CREATE INDEX messages_by_conversation ON messages (conversation_id, parent_id, sent_at, row_id)",
            // The durable outbox: unsent messages in compose order (`seq`).
            """
            CREATE TABLE outbox (
                local_id TEXT PRIMARY KEY NOT NULL,
                seq INTEGER NOT NULL UNIQUE,
                conversation_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                state INTEGER NOT NULL,
                failure_reason TEXT,
                attempts INTEGER NOT NULL DEFAULT 0,
                created_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL DEFAULT 0,
                payload BLOB NOT NULL
            )
            """,
            "CREATE INDEX outbox_by_conversation ON outbox (conversation_id, seq)",
            // Media files cached on disk (bytes live under media/ and outgoing/).
            """
            CREATE TABLE media (
                url_key TEXT PRIMARY KEY NOT NULL,
                message_id TEXT,
                local_file TEXT NOT NULL,
                bytes INTEGER NOT NULL,
                mime TEXT,
                outgoing INTEGER NOT NULL DEFAULT 0,
                created_at INTEGER NOT NULL,
                last_access INTEGER NOT NULL
            )
            """,
            "CREATE INDEX media_by_access ON media (outgoing, last_access)",
            // Entity-list snapshots recorded online, replayed offline page by page.
            """
            CREATE TABLE list_snapshots (
                query_key TEXT NOT NULL,
                page INTEGER NOT NULL,
                kind TEXT NOT NULL,
                recorded_at INTEGER NOT NULL,
                last_used INTEGER NOT NULL,
                payload BLOB NOT NULL,
                PRIMARY KEY (query_key, page)
            )
            """,
            // Small key-value state (sync points, settings).
            """
            CREATE TABLE kv (
                key TEXT PRIMARY KEY NOT NULL,
                value BLOB
            )
            """,
        ]),
        // Reads (two-phase requests, eviction): a conversation's messages in time order whatever
        // their thread, time-ordered scans for eviction, the blocked-users list, and when a
        // conversation was last opened.
        Migration(version: 2, statements: [
            "CREATE INDEX messages_by_conversation_time ON messages (conversation_id, sent_at, server_id)",
            "CREATE INDEX messages_by_time ON messages (sent_at)",
            "CREATE INDEX conversations_by_activity ON conversations (updated_at, id)",
            """
            CREATE TABLE blocked_users (
                uid TEXT PRIMARY KEY NOT NULL,
                position INTEGER NOT NULL,
                payload BLOB NOT NULL
            )
            """,
            """
            CREATE TABLE conversation_opened (
                conversation_id TEXT PRIMARY KEY NOT NULL,
                opened_at INTEGER NOT NULL
            )
            """,
        ]),
        // Catch-up sync: one row (id 1, created by its first writer) holding the backend's opaque
        // sync token, advanced in the same transaction as the change-log page it covers, the
        // server time that point stands for (`getLastSyncTimestamp()`), and how the last sweep
        // went (a code, never a message). ChatVault's `SyncStateRows` reads and writes it.
        Migration(version: 3, statements: [
            """
            CREATE TABLE sync_state (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                token TEXT,
                last_sync_at INTEGER NOT NULL DEFAULT 0,
                last_attempt_at INTEGER NOT NULL DEFAULT 0,
                last_outcome TEXT,
                last_error_code TEXT
            )
            """,
        ]),
        // Reads of an encrypted cache pay per database page: a conversation's messages move next to
        // each other in the table (`MessageClusters`), so a page of messages reads a few database
        // pages, not one per message. No table changes shape; every existing row gets its key.
        Migration(version: 4, statements: [], work: { db in try MessageClusters.renumber(db) }),
        // A server that names its messages with strings (a Matrix homeserver's event ids): the
        // engine's whole-number id for each, allocated once and kept, so a backend can turn the id
        // an app holds back into the server's own after a restart (`MessageIdentities`). Rows
        // are small and outlive the messages they name: an id is never given to another message.
        Migration(version: 5, statements: [
            """
            CREATE TABLE message_refs (
                ref TEXT PRIMARY KEY,
                id INTEGER NOT NULL UNIQUE
            ) WITHOUT ROWID
            """,
        ]),
        // Local search (issue 24): an FTS4 index of what each message says, over a view of
        // `messages` (no second copy of the text). Built in the background for the rows already
        // cached (`SearchIndexSchema`).
        Migration(version: 6, statements: SearchIndexSchema.create),
    ]

    /// The version this code writes.
    package static var currentVersion: Int { migrations.last?.version ?? 0 }

    /// The tables (and their columns) a cache must have at `currentVersion`. Checked on every open,
    /// so a damaged or foreign schema is caught before any read is served.
    package static let requiredColumns: [String: [String]] = [
        "conversations": ["id", "type", "peer_id", "last_message_at", "last_opened_at", "updated_at", "unread_count", "payload"],
        "messages": ["row_id", "server_id", "local_id", "conversation_id", "parent_id", "sender_id", "receiver_id",
                     "receiver_type", "category", "type", "sent_at", "updated_at", "deleted_at", "status", "source",
                     "flags", "body", "payload"],
        "outbox": ["local_id", "seq", "conversation_id", "kind", "state", "failure_reason", "attempts", "created_at",
                   "updated_at", "payload"],
        "media": ["url_key", "message_id", "local_file", "bytes", "mime", "outgoing", "created_at", "last_access"],
        "list_snapshots": ["query_key", "page", "kind", "recorded_at", "last_used", "payload"],
        "kv": ["key", "value"],
        "blocked_users": ["uid", "position", "payload"],
        "conversation_opened": ["conversation_id", "opened_at"],
        "sync_state": ["id", "token", "last_sync_at", "last_attempt_at", "last_outcome", "last_error_code"],
        "message_refs": ["ref", "id"],
    ]

    /// Why a schema cannot be used.
    package enum Problem: Error, Sendable, Equatable, CustomStringConvertible {
        /// The file has no tables although a cache was created here (truncated or emptied).
        case empty
        /// Written by a newer version of ChatVault.
        case newer(Int)
        /// A table or column is missing.
        case mismatch(String)

        package var description: String {
            switch self {
            case .empty: return "the database has no schema"
            case .newer(let v): return "schema version \(v) is newer than this build's \(Schema.currentVersion)"
            case .mismatch(let what): return "schema mismatch: \(what)"
            }
        }
    }

    /// Whether the database is at an older version than this code writes.
    static func needsMigration(_ db: Database) throws -> Bool {
        let version = Int(try db.scalarInt("PRAGMA user_version") ?? 0)
        return version < currentVersion
    }

    /// Brings a database to `currentVersion` and verifies its shape.
    /// - Parameter expectExisting: a cache was created here before, so an empty file is damage.
    static func prepare(_ db: Database, expectExisting: Bool) throws -> Void {
        let version = Int(try db.scalarInt("PRAGMA user_version") ?? 0)
        let tableCount = try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'table'") ?? 0
        if version == 0 && tableCount == 0 && expectExisting { throw Problem.empty }
        if version > currentVersion { throw Problem.newer(version) }
        for migration in migrations where migration.version > version {
            try db.transaction {
                for statement in migration.statements { try db.execute(statement) }
                try migration.work?(db)
                try db.execute("PRAGMA user_version = \(migration.version)")
            }
        }
        try verify(db)
    }

    static func verify(_ db: Database) throws {
        for (table, columns) in requiredColumns.sorted(by: { $0.key < $1.key }) {
            let stmt = try db.prepare("PRAGMA table_info(\(table))")
            var present = Set<String>()
            while try stmt.step() { present.insert(stmt.text(1) ?? "") }
            if present.isEmpty { throw Problem.mismatch("table \(table) is missing") }
            for column in columns where !present.contains(column) {
                throw Problem.mismatch("column \(table).\(column) is missing")
            }
        }
    }
}
