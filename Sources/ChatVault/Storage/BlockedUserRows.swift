import Foundation
import VaultStore

/// One user of the blocked-users list: the uid and the user's wire JSON as the server sent it
/// (validated before it gets here).
struct BlockedUserRow: Sendable, Equatable {
    var uid: String
    var wire: JSONValue

    /// A user known only by uid (blocked while no profile could be fetched).
    static func bare(_ uid: String) -> BlockedUserRow {
        BlockedUserRow(uid: uid, wire: .object(["uid": .string(uid), "blockedByMe": .bool(true)]))
    }
}

/// Rows of `blocked_users(uid, position, payload)`: the SDK's own list of the users the logged-in
/// user blocked, in the server's order (`position`), replaced at login and on each catch-up sync,
/// and changed by `blockUsers` / `unblockUsers` once the server accepts.
///
/// Writers bump a revision (in `kv`) on every change they make, so a refresh that fetched the
/// server's list before a concurrent block landed can tell, and fetch again instead of undoing it.
enum BlockedUserRows {
    static let revisionKey = "blocked_users.revision"

    static func revision(_ db: Database) throws -> Int64 {
        try db.scalarInt("SELECT value FROM kv WHERE key = ?", .text(revisionKey)) ?? 0
    }

    static func bumpRevision(_ db: Database) throws {
        let next = try revision(db) &+ 1
        try db.run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", .text(revisionKey), .int(next))
    }

    /// The whole list, in order. A row that cannot be read is left out.
    static func all(decoder: WireDecoder, in db: Database) throws -> [User] {
        let stmt = try db.prepare("SELECT payload FROM blocked_users ORDER BY position, uid")
        var users: [User] = []
        while try stmt.step() {
            guard let bytes = stmt.blob(0), let wire = try? BinaryJSON.decode(bytes), let user = try? decoder.user(wire) else { continue }
            users.append(user)
        }
        return users
    }

    static func uids(in db: Database) throws -> [String] {
        try db.texts("SELECT uid FROM blocked_users ORDER BY position, uid")
    }

    /// Replaces the whole list (a refresh).
    static func replace(with rows: [BlockedUserRow], in db: Database) throws {
        try db.execute("DELETE FROM blocked_users")
        for (position, row) in rows.enumerated() {
            try db.run("INSERT OR REPLACE INTO blocked_users (uid, position, payload) VALUES (?, ?, ?)",
                       .text(row.uid), .int(Int64(position)), .blob(BinaryJSON.encode(row.wire)))
        }
    }

    /// Adds users at the end of the list; one already listed keeps its place and gets the new
    /// profile.
    static func add(_ rows: [BlockedUserRow], in db: Database) throws {
        guard !rows.isEmpty else { return }
        // Wrapping: a position read back from the disk is never trusted not to be Int64.max.
        var next = (try db.scalarInt("SELECT max(position) FROM blocked_users") ?? -1) &+ 1
        for row in rows {
            try db.run("UPDATE blocked_users SET payload = ? WHERE uid = ?", .blob(BinaryJSON.encode(row.wire)), .text(row.uid))
            if db.changes == 0 {
                try db.run("INSERT INTO blocked_users (uid, position, payload) VALUES (?, ?, ?)",
                           .text(row.uid), .int(next), .blob(BinaryJSON.encode(row.wire)))
                next &+= 1
            }
        }
        try bumpRevision(db)
    }

    static func remove(_ uids: [String], in db: Database) throws {
        guard !uids.isEmpty else { return }
        for uid in uids { try db.run("DELETE FROM blocked_users WHERE uid = ?", .text(uid)) }
        try bumpRevision(db)
    }

    /// Refreshes the profiles of users already listed; the list itself does not change.
    static func updateProfiles(_ rows: [BlockedUserRow], in db: Database) throws {
        for row in rows {
            try db.run("UPDATE blocked_users SET payload = ? WHERE uid = ?", .blob(BinaryJSON.encode(row.wire)), .text(row.uid))
        }
    }
}
