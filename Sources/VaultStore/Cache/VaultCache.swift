import Foundation
internal import CSQLCipher
package import VaultKeys
import Synchronization

/// An open cache: a writer and a reader connection (WAL), each on its own serial queue, and the
/// directory lock that keeps other processes out until `close()`.
package final class VaultCache: Sendable {
    package let directory: CacheDirectory
    /// The manifest as of the open.
    package let manifest: Manifest
    /// The store holding the key (nil for a plaintext cache).
    package let keyStoreName: String?
    /// The cipher description once proven by a keyed open and the file header, else nil.
    package let provenCipher: String?
    /// True when the database was too large to check during open: call `verifyIntegrity()`.
    package var needsBackgroundIntegrityCheck: Bool {
        background.withLock { state in
            switch state {
            case .pending, .running: return true
            case .none: return false
            }
        }
    }
    /// Whether the background check's `quick_check` has started on its connection (tests).
    var isBackgroundCheckRunning: Bool { checkStarted.load(ordering: .acquiring) && needsBackgroundIntegrityCheck }
    private let checkStarted = Atomic(false)
    package let writer: DatabaseQueue
    package let reader: DatabaseQueue
    /// The background check of a large cache. It gets a connection of its own, so a long
    /// `quick_check` delays neither reads nor writes; that connection is opened by
    /// `verifyIntegrity()` (after the cache is ready, never during the open) and closed once the
    /// check has run or been interrupted.
    private let background: Mutex<BackgroundCheck>
    /// Raised by `close()`: a running check stops at once (`Integrity.interrupted`).
    private let stop = StopFlag()
    private let lock: DirectoryLock
    private let closed = Mutex(false)

    enum BackgroundCheck {
        /// No background check (checked during the open, or done).
        case none
        /// To run: how to open its connection.
        case pending(ConnectionKeying, ConnectionOptions)
        /// Running on this connection.
        case running(DatabaseQueue)
    }

    init(directory: CacheDirectory, manifest: Manifest, keyStoreName: String?, provenCipher: String?,
         backgroundCheck: (ConnectionKeying, ConnectionOptions)?, writer: DatabaseQueue, reader: DatabaseQueue, lock: DirectoryLock) {
        self.directory = directory
        self.manifest = manifest
        self.keyStoreName = keyStoreName
        self.provenCipher = provenCipher
        background = Mutex(backgroundCheck.map { .pending($0.0, $0.1) } ?? .none)
        self.writer = writer
        self.reader = reader
        self.lock = lock
    }

    package var cacheId: String { manifest.cacheId }
    package var isEncrypted: Bool { manifest.encrypted && provenCipher != nil }
    package var keyStorage: KeyStorageTier { manifest.encrypted ? manifest.keyStorage : .none }
    package var isClosed: Bool { closed.withLock { $0 } }

    /// Checkpoints the WAL into the database, closes both connections and releases the lock.
    /// The files stay (logout keeps the cache). A background check still running is interrupted
    /// and reports `.interrupted` (it runs again at the next open); close waits until its
    /// statement has stopped. A check that has not started yet never starts. On SQLite 3.15 a
    /// `quick_check` already under way does not notice the interrupt (it is one VDBE step), so
    /// close then waits for it to end (about 1.6 ms per MiB). Not waiting is worse: a process
    /// that exits right after logout while the check is still inside SQLCipher can crash at
    /// exit (seen in `bench open`, about 1 child in 100).
    package func close() {
        guard shutDown() else { return }
        lock.release()
    }

    /// Closes the connections (after a full checkpoint: the WAL is empty) but keeps the directory
    /// lock, and returns it: a key change works on the closed files with no other process or
    /// instance able to open them meanwhile. Nil when the cache was already closed.
    package func closeKeepingLock() -> DirectoryLock? {
        shutDown() ? lock : nil
    }

    /// Stops the background check and closes the connections; false when already closed.
    private func shutDown() -> Bool {
        let wasClosed = closed.withLock { state in
            defer { state = true }
            return state
        }
        guard !wasClosed else { return false }
        stop.raise()
        let retired = background.withLock { state -> DatabaseQueue? in
            defer { state = .none }
            guard case .running(let connection) = state else { return nil }
            return connection
        }
        retired?.closeInterrupting()
        reader.close()
        _ = try? writer.sync { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        writer.close()
        return true
    }

    deinit { close() }

    /// What a background integrity check found.
    package enum Integrity: Sendable, Equatable {
        case intact
        /// `quick_check` reported damage (or SQLCipher refused a page): grounds for a reset.
        case damaged
        /// The check could not run (out of memory, an I/O error): says nothing.
        case unknown
        /// The cache was closed (logout) before the check ended, and the check was stopped: the
        /// cache is simply not checked. Never damage, never grounds for a reset; the next open
        /// of a large cache checks it again.
        case interrupted
    }

    /// Runs `PRAGMA quick_check` on a connection of its own when the open left a background check
    /// (opening it now, closing it afterwards), else on the reader. `close()` interrupts it.
    package func verifyIntegrity() async -> Integrity {
        let connection: DatabaseQueue
        let own: Bool
        do throws(DatabaseError) {
            // Opened under the state's lock, so `close()` either finds it (and closes it) or has
            // already run (and nothing is opened).
            let opened = try background.withLock { state throws(DatabaseError) -> DatabaseQueue? in
                guard case .pending(let keying, let options) = state else { return nil }
                guard !stop.isRaised else {
                    state = .none
                    return nil
                }
                let queue = try DatabaseQueue(path: directory.database, keying: keying, options: options, label: "integrity")
                state = .running(queue)
                return queue
            }
            if stop.isRaised { return .interrupted }
            (connection, own) = opened.map { ($0, true) } ?? (reader, false)
        } catch {
            background.withLock { $0 = .none }
            return stop.isRaised ? .interrupted : error.failureClass == .damaged ? .damaged : .unknown
        }
        let flag = stop
        var result: Integrity
        do {
            let passed = try await connection.run { db in
                if own { self.checkStarted.store(true, ordering: .releasing) }
                return try db.interruptible(by: flag) { try IntegrityCheck.run(db, stop: flag) }
            }
            result = passed ? .intact : .damaged
        } catch let error as DatabaseError where error.failureClass == .damaged {
            result = .damaged
        } catch {
            result = .unknown
        }
        // Stopped by `close()`, or ended after it: whatever it answered speaks for a cache nobody
        // uses any more (and an interrupted statement's answer says nothing). Not checked; the
        // next open checks again.
        if stop.isRaised { result = .interrupted }
        if own {
            let retired = background.withLock { state -> DatabaseQueue? in
                guard case .running(let running) = state, running === connection else { return nil }
                state = .none
                return running
            }
            retired?.close()
        }
        return result
    }

    /// Prunes old quarantine entries (and deletes their key items) as the open procedure does
    /// unless `pruneQuarantineDuringOpen` is off, for an engine that runs it after ready, in the
    /// background, with the configuration it opened this cache with. Does nothing once the cache
    /// is closed, and stops before the next entry when it closes meanwhile.
    package func pruneQuarantine(_ configuration: StoreConfiguration) {
        guard !stop.isRaised else { return }
        Quarantine(directory: directory, policy: configuration.quarantine, now: configuration.now)
            .prune(currentCacheId: cacheId, keyStores: configuration.keyStores, applicationId: configuration.applicationId,
                   account: configuration.account, shouldStop: { [stop] in stop.isRaised })
    }

    /// Bytes on disk: database, WAL and media directories.
    package func bytesOnDisk() -> Int64 { directory.bytesOnDisk() }
}

package enum IntegrityCheck {
    /// `quick_check` reads every page (SQLCipher verifies each page's HMAC as it decrypts it) and
    /// checks the b-tree structure; "ok" is the only passing answer.
    ///
    /// SQLCipher 3.4.1 answers a page whose HMAC fails with rows ("… unable to get the page …"), so
    /// `false`. SQLCipher 4.x fails the statement instead, with a code that depends on the release
    /// (1, 7, 11 or 26; 4.18 returns a few rows, then SQLITE_ERROR "SQL logic error"), which alone
    /// would be `unclassified` (or even `resources`). So when the check fails with an error on 4.x,
    /// ask the engine which pages fail their HMAC (`authenticationFailures`): any such page means
    /// damage (`false`); none means the error says nothing about the file, and it is rethrown for
    /// the usual classification.
    ///
    /// Only ever run on a connection whose key is proven right: the manifest's key-check matched
    /// and page 1 decrypted (the probe), so a later page failing its HMAC is a damaged page, not a
    /// wrong key.
    ///
    /// A raised `stop` (the cache closing) ends it with the interruption's error, never `false`.
    static func run(_ db: Database, engine: CipherEngine = .current, stop: StopFlag? = nil) throws -> Bool {
        if stop?.isRaised == true {
            throw DatabaseError(extendedCode: SQLITE_INTERRUPT, message: "the cache closed before its check", operation: "quick_check")
        }
        do {
            return try problems(db).isEmpty
        } catch {
            if stop?.isRaised == true { throw error }
            if (engine.majorVersion ?? 0) >= 4, !authenticationFailures(db).isEmpty { return false }
            throw error
        }
    }

    /// What `PRAGMA quick_check` reports, one line each (SQLite 3.15 puts several in one row),
    /// without "ok" and without the search index's own consistency check: an empty answer is a
    /// passing check.
    ///
    /// From SQLite 3.44 (SQLCipher 4.x here) the check also asks each FTS table whether its index
    /// agrees with its content. The search index's content is a view computed by an application
    /// function the engine defines on its own connections only, and a background build may be
    /// under way: that check answers "unable to validate the inverted index…" or "malformed
    /// inverted index…" for `search_index` although no page is damaged. The index is derived data
    /// (repaired or rebuilt, never grounds for a reset), and its pages are still checked like every
    /// other b-tree's, so those two answers are left out.
    package static func problems(_ db: Database) throws -> [String] {
        let lines = try db.texts("PRAGMA quick_check(10000)").flatMap { $0.split(separator: "\n").map(String.init) }
        return lines.filter { $0 != "ok" && !isSearchIndexConsistencyCheck($0) }
    }

    static func isSearchIndexConsistencyCheck(_ line: String) -> Bool {
        let table = "FTS4 table main.\(SearchIndexSchema.table)"
        return (line.hasPrefix("unable to validate the inverted index for ") || line.hasPrefix("malformed inverted index for "))
            && (line.hasSuffix(table) || line.contains(table + ":"))
    }

    /// The pages of the main database whose HMAC does not verify under the connection's key, from
    /// SQLCipher 4's `PRAGMA cipher_integrity_check` (which reads the file itself, page by page, so
    /// it still answers after a page error). Empty when every page verifies, and also when the
    /// engine cannot tell (3.4.1 ignores the pragma; an unkeyed connection; the check failing):
    /// empty never proves the file intact, it only withholds the `damaged` verdict.
    static func authenticationFailures(_ db: Database) -> [String] {
        guard let lines = try? db.texts("PRAGMA cipher_integrity_check") else { return [] }
        return lines.filter { $0.hasPrefix("HMAC verification failed for page") }
    }
}
