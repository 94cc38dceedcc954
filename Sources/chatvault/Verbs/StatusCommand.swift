import ChatVault
import Foundation
import VaultKeys
import VaultStore

/// `chatvault status --dir D [--user U] [--marker TEXT] [--keystore …]`: audits a cache without
/// changing anything: the manifest, the cipher profile, file modes, whether the key item exists,
/// a plaintext scan of every file for the seeded marker, and the catch-up sync's bookkeeping
/// (`sync_state`: the sync point's server time and age, the last attempt, how the last sweep ended
/// and its error code). The sync token itself is never shown (only whether one is stored), nor
/// any message content.
enum StatusCommand {
    static func run(_ raw: [String]) throws -> Int32 {
        var args = try Arguments(raw)
        let common = try CommonOptions(&args)
        let given = absolutePath(try args.required("dir"))
        let user = args.string("user")
        let marker = args.string("marker") ?? CommonOptions.defaultMarker
        try args.rejectUnknown()

        let directory = try resolve(given, user: user, applicationId: common.applicationId)
        let audit = Audit(directory: directory, common: common, marker: marker)
        let report = audit.json()
        if common.json {
            emit(report.render())
        } else {
            emit(audit.table(report))
        }
        return 0
    }

    /// The cache directory: D itself, D/<account of --user>, or D's only cache.
    static func resolve(_ path: String, user: String?, applicationId: String) throws -> CacheDirectory {
        if let user {
            return CacheDirectory(root: path, account: CacheDirectory.account(applicationId: applicationId, userId: user))
        }
        let direct = CacheDirectory(path: path)
        if isCache(direct) { return direct }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        let caches = names.sorted().map { CacheDirectory(path: "\(path)/\($0)") }.filter(isCache)
        guard !caches.isEmpty else { throw CLIError.failure("no cache found in \(path)") }
        guard caches.count == 1 else { throw CLIError.usage("\(path) holds \(caches.count) caches; name one with --user") }
        return caches[0]
    }

    static func isCache(_ dir: CacheDirectory) -> Bool {
        FileManager.default.fileExists(atPath: dir.manifest) || FileManager.default.fileExists(atPath: dir.database)
    }
}

/// A read-only look at one cache directory.
struct Audit {
    let directory: CacheDirectory
    let common: CommonOptions
    let marker: String

    var account: String { directory.account }

    func json() -> JSON {
        let manifestState = ManifestFile.read(directory: directory.path)
        var manifest: Manifest?
        var manifestJSON: JSON = .null
        switch manifestState {
        case .valid(let m):
            manifest = m
            manifestJSON = .object([
                ("state", .string("valid")), ("formatVersion", .int(m.formatVersion)), ("cacheId", .string(m.cacheId)),
                ("encrypted", .bool(m.encrypted)), ("keyStorage", .string(m.keyStorage.rawValue)), ("keyStore", .optional(m.keyStore)),
                ("keyId", .optional(m.keyId)), ("createdAt", .string(m.createdAt)),
                ("consecutiveUnclassifiedFailures", .int(m.consecutiveUnclassifiedFailures)),
            ])
        case .missing: manifestJSON = .object([("state", .string("missing"))])
        case .damaged(let why): manifestJSON = .object([("state", .string("damaged")), ("detail", .string(why))])
        case .newerFormat(let v): manifestJSON = .object([("state", .string("newerFormat")), ("formatVersion", .int(v))])
        case .unreadable(let code): manifestJSON = .object([("state", .string("unreadable")), ("errno", .int(Int(code)))])
        }
        let header = CipherProof.header(of: directory.database)
        let (keyPresent, keyLookup, attributes, key) = keyItem(manifest)
        let files = listFiles()
        let hits = files.filter { $0.isRegular && contains(marker, file: "\(directory.path)/\($0.path)") }.map(\.path)
        // After the files are listed and scanned, so they are reported as found (the read-only
        // connection's transient -wal and -shm files are never among them).
        let inUse = isLocked()
        let sync = SyncAudit.read(directory: directory, manifest: manifest, header: header, key: key, inUse: inUse)
        let search: JSON
        switch ReadOnlyCache.read(directory: directory, manifest: manifest, header: header, key: key, inUse: inUse, what: "the search index",
                                  { db in try SearchIndexRows.progress(in: db) }) {
        case .success(let p):
            search = .object([("available", .bool(true)), ("complete", .bool(p.isComplete)), ("indexedMessages", .int(p.indexedMessages)),
                              ("totalMessages", .int(p.totalMessages))])
        case .failure(let why):
            search = .object([("available", .bool(false)), ("detail", .string(why.description))])
        }
        // What the file says, not what the manifest claims; a disagreement is reported.
        let encryptedOnDisk = header == .opaque
        let fields: [(String, JSON)] = [
            ("directory", .string(directory.path)),
            ("cacheId", .optional(manifest?.cacheId)),
            ("encrypted", .bool(encryptedOnDisk)),
            ("manifestSaysEncrypted", manifest.map { .bool($0.encrypted) } ?? .null),
            ("manifestAgreesWithFile", manifest.map { .bool($0.encrypted == encryptedOnDisk || header == .missing) } ?? .null),
            ("databaseHeader", .string(headerName(header))),
            ("keyStorage", .string(manifest.map { $0.encrypted ? $0.keyStorage.rawValue : "NONE" } ?? "unknown")),
            ("keyPresent", keyPresent.map { .bool($0) } ?? .null),
            ("keyLookup", .string(keyLookup)),
            ("keyItemAttributes", .object(attributes.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
            ("manifest", manifestJSON),
            ("cipherProfile", manifest?.cipherProfile.map(profileJSON) ?? .null),
            ("inUse", .bool(inUse)),
            ("files", .array(files.map(fileJSON))),
            ("unsafeModes", .array(files.filter { $0.mode & 0o077 != 0 || $0.isSymlink }.map { .string($0.path) })),
            ("quarantine", .array(quarantineEntries().map { .string($0) })),
            ("marker", .string(marker.isEmpty ? "" : "(given)")),
            ("plaintextHits", .array(hits.map { .string($0) })),
            ("sync", sync.json),
            ("searchIndex", search),
        ]
        return .object(fields)
    }

    func fileJSON(_ f: FileEntry) -> JSON {
        let kind = f.isDirectory ? "directory" : f.isSymlink ? "symlink" : "file"
        return .object([("path", .string(f.path)), ("mode", .string(String(format: "%04o", f.mode))), ("bytes", .int(Int(f.bytes))),
                        ("kind", .string(kind))])
    }

    func headerName(_ header: CipherProof.Header) -> String {
        switch header {
        case .missing: return "missing"
        case .empty: return "empty"
        case .plaintext: return "plaintext"
        case .opaque: return "encrypted"
        case .unreadable: return "unreadable"
        }
    }

    func profileJSON(_ p: CipherProfile) -> JSON {
        .object([
            ("keying", .string(p.keying)), ("pageSize", .int(p.pageSize)), ("useHMAC", .bool(p.useHMAC)),
            ("hmacAlgorithm", .string(p.hmacAlgorithm)), ("kdfAlgorithm", .string(p.kdfAlgorithm)),
            ("kdfIterations", .int(p.kdfIterations)), ("fastKdfIterations", .int(p.fastKdfIterations)), ("createdBy", .string(p.createdBy)),
        ])
    }

    /// Whether the key item exists (never its value), how the lookup answered, and its locator;
    /// and the key itself when it matches (only to read `sync_state`; never printed).
    func keyItem(_ manifest: Manifest?) -> (Bool?, String, [String: String], CacheKey?) {
        guard let manifest, manifest.encrypted else { return (nil, "not encrypted", [:], nil) }
        let reachable: [any KeyStore] = [
            SoftwareKeyStore(directory: common.keyDirectory ?? VaultSettings.defaultSoftwareKeyDirectory(applicationId: common.applicationId)),
            SecretServiceKeyStore(),
        ]
        guard let store = KeyStoreSelection.store(for: manifest, among: reachable) else {
            return (nil, "the key is held by a \(manifest.keyStore ?? "unknown") store this process cannot reach", [:], nil)
        }
        let id = KeyItemID(applicationId: common.applicationId, account: account, cacheId: manifest.cacheId)
        let attributes = store.locator(for: id)
        switch store.lookup(id) {
        case .found(let key, _):
            let matches = key.checkValue(cacheId: manifest.cacheId) == manifest.keyCheck
            return (true, matches ? "found; key-check matches" : "found; key-check DIFFERS (wrong key)", attributes, matches ? key : nil)
        case .absent: return (false, "absent", attributes, nil)
        case .unavailable(let reason): return (nil, "unavailable (\(reason.rawValue))", attributes, nil)
        }
    }

    struct FileEntry {
        var path: String
        var mode: UInt32
        var bytes: Int64
        var isDirectory: Bool
        var isSymlink: Bool
        var isRegular: Bool
    }

    func listFiles() -> [FileEntry] {
        var out: [FileEntry] = []
        guard let walker = FileManager.default.enumerator(atPath: directory.path) else { return out }
        while let relative = walker.nextObject() as? String {
            var st = stat()
            guard lstat("\(directory.path)/\(relative)", &st) == 0 else { continue }
            let type = st.st_mode & S_IFMT
            out.append(FileEntry(path: relative, mode: UInt32(st.st_mode) & 0o7777, bytes: Int64(st.st_size),
                                 isDirectory: type == S_IFDIR, isSymlink: type == S_IFLNK, isRegular: type == S_IFREG))
        }
        return out.sorted { $0.path < $1.path }
    }

    /// Whether another process holds the cache (tested with a shared lock that is released at
    /// once; the lock file is not created when missing).
    func isLocked() -> Bool {
        let fd = open(directory.lockFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return false
        }
        return true
    }

    func quarantineEntries() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.quarantine)) ?? []).sorted()
    }

    /// Streams a regular file looking for `needle` (no whole-file read, overlaps handled). Links
    /// are not followed and nothing but a regular file is opened (a FIFO would block).
    func contains(_ needle: String, file: String) -> Bool {
        let pattern = Array(needle.utf8)
        let fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard !pattern.isEmpty, fd >= 0 else { return false }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            return false
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        let needleData = Data(pattern)
        var carry = Data()
        while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            let window = carry + chunk
            if window.range(of: needleData) != nil { return true }
            carry = window.suffix(pattern.count - 1)
        }
        return false
    }

    func table(_ report: JSON) -> String {
        var table = Table(header: ["path", "mode", "bytes", "marker"])
        let hits: Set<String> = {
            if case .array(let items)? = report["plaintextHits"] { return Set(items.compactMap { if case .string(let s) = $0 { return s } else { return nil } }) }
            return []
        }()
        for f in listFiles() {
            table.rows.append([f.path + (f.isDirectory ? "/" : ""), String(format: "%04o", f.mode), f.isDirectory ? "-" : String(f.bytes),
                               hits.contains(f.path) ? "FOUND" : ""])
        }
        func text(_ key: String) -> String {
            switch report[key] {
            case .string(let s)?: return s
            case .bool(let b)?: return b ? "yes" : "no"
            default: return "-"
            }
        }
        func searchLine(_ search: JSON?) -> String {
            guard let search, case .bool(true)? = search["available"] else {
                if case .string(let why)? = search?["detail"] { return "search index: unavailable (\(why))" }
                return "search index: unavailable"
            }
            guard case .int(let indexed)? = search["indexedMessages"], case .int(let total)? = search["totalMessages"] else { return "search index: -" }
            if case .bool(true)? = search["complete"] { return "search index: complete (\(total) messages)" }
            return "search index: building (\(indexed) of \(total) messages)"
        }
        return """
            cache \(text("cacheId")) in \(directory.path)
            encrypted: \(text("encrypted")) (header: \(text("databaseHeader"))), key storage: \(text("keyStorage")), key item: \(text("keyLookup"))
            in use by a process: \(text("inUse")); plaintext hits: \(hits.count)
            \(SyncAudit.line(report["sync"]))
            \(searchLine(report["searchIndex"]))

            \(table.render())
            """
    }
}
