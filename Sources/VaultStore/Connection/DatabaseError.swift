import Foundation
internal import CSQLCipher

/// An SQLite or SQLCipher result code with the operation that produced it.
///
/// The description never carries bound values or SQL text: message bodies and keys are only ever
/// bound as parameters, and SQLite's own messages name tables and columns, not values.
package struct DatabaseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The extended result code (`sqlite3_extended_errcode`).
    package let extendedCode: Int32
    /// SQLite's message for the code (`sqlite3_errmsg`), which names objects, never bound values.
    package let message: String
    /// What we were doing ("open", "key", "prepare", "step", "exec", …).
    package let operation: String
    /// The errno behind an I/O failure (`sqlite3_system_errno`), 0 when none.
    package let systemErrno: Int32

    package init(extendedCode: Int32, message: String, operation: String, systemErrno: Int32 = 0) {
        self.extendedCode = extendedCode
        self.message = message
        self.operation = operation
        self.systemErrno = systemErrno
    }

    /// The primary result code (`SQLITE_BUSY`, `SQLITE_NOTADB`, …).
    package var primaryCode: Int32 { extendedCode & 0xff }

    package var description: String {
        "SQLite error \(primaryCode) (\(DatabaseError.name(of: primaryCode))) during \(operation): \(message)"
    }

    /// SQLite's constant name for a primary code, as people search for it.
    package static func name(of code: Int32) -> String {
        switch code {
        case SQLITE_ERROR: return "SQLITE_ERROR"
        case SQLITE_INTERNAL: return "SQLITE_INTERNAL"
        case SQLITE_PERM: return "SQLITE_PERM"
        case SQLITE_ABORT: return "SQLITE_ABORT"
        case SQLITE_BUSY: return "SQLITE_BUSY"
        case SQLITE_LOCKED: return "SQLITE_LOCKED"
        case SQLITE_NOMEM: return "SQLITE_NOMEM"
        case SQLITE_READONLY: return "SQLITE_READONLY"
        case SQLITE_INTERRUPT: return "SQLITE_INTERRUPT"
        case SQLITE_IOERR: return "SQLITE_IOERR"
        case SQLITE_CORRUPT: return "SQLITE_CORRUPT"
        case SQLITE_NOTFOUND: return "SQLITE_NOTFOUND"
        case SQLITE_FULL: return "SQLITE_FULL"
        case SQLITE_CANTOPEN: return "SQLITE_CANTOPEN"
        case SQLITE_PROTOCOL: return "SQLITE_PROTOCOL"
        case SQLITE_SCHEMA: return "SQLITE_SCHEMA"
        case SQLITE_TOOBIG: return "SQLITE_TOOBIG"
        case SQLITE_CONSTRAINT: return "SQLITE_CONSTRAINT"
        case SQLITE_MISMATCH: return "SQLITE_MISMATCH"
        case SQLITE_MISUSE: return "SQLITE_MISUSE"
        case SQLITE_NOLFS: return "SQLITE_NOLFS"
        case SQLITE_AUTH: return "SQLITE_AUTH"
        case SQLITE_FORMAT: return "SQLITE_FORMAT"
        case SQLITE_RANGE: return "SQLITE_RANGE"
        case SQLITE_NOTADB: return "SQLITE_NOTADB"
        default: return "code \(code)"
        }
    }

    /// How the open procedure treats a failure with this code. The errno decides first: a full
    /// disk often surfaces as SQLITE_IOERR (creating the shm file) or a plain SQLITE_ERROR (an
    /// export), not as SQLITE_FULL.
    package var failureClass: FailureClass {
        switch systemErrno {
        case ENOSPC, EDQUOT, EFBIG: return .diskFull
        case EROFS, EACCES, EPERM: return .readOnly
        case EMFILE, ENFILE, ENOMEM, EAGAIN, EINTR: return .resources
        default: break
        }
        if message.contains("database or disk is full") { return .diskFull }
        switch primaryCode {
        case SQLITE_NOTADB, SQLITE_CORRUPT, SQLITE_FORMAT: return .damaged
        case SQLITE_BUSY, SQLITE_LOCKED: return .busy
        case SQLITE_FULL: return .diskFull
        case SQLITE_READONLY, SQLITE_PERM, SQLITE_AUTH: return .readOnly
        case SQLITE_CANTOPEN: return .cannotOpen
        case SQLITE_NOMEM, SQLITE_INTERRUPT: return .resources
        default: return .unclassified
        }
    }

    /// The classes of failure the open procedure distinguishes (ARCHITECTURE.md §5).
    package enum FailureClass: Sendable, Equatable {
        /// The file is not a database under this key, or a page is damaged.
        case damaged
        /// Another connection holds a lock.
        case busy
        /// No space left.
        case diskFull
        /// The file or the file system refuses writes.
        case readOnly
        /// The file could not be opened at all (permissions, a missing directory).
        case cannotOpen
        /// Out of memory or interrupted.
        case resources
        /// Anything else: counted, and escalated if it recurs.
        case unclassified
    }
}
