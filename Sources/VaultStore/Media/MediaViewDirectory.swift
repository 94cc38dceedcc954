import Foundation

/// Where decrypted views of media files live while a user is logged in:
/// `$XDG_RUNTIME_DIR/<applicationId>/media-views/<account>/`.
///
/// `$XDG_RUNTIME_DIR` (a tmpfs that the system removes at logout) must be an absolute path to an
/// existing directory, not a symbolic link, owned by the current user, mode 0700; otherwise
/// `.noSafeRuntimeDirectory` and no decrypted view is written anywhere. Every level below it is
/// created 0700; a level that already exists must be a directory of ours (not a link) without
/// group or other access.
package struct MediaViewDirectory: Sendable {
    /// The per-account directory, without a trailing slash.
    package let path: String

    private init(path: String) { self.path = path }

    /// Checks `$XDG_RUNTIME_DIR` in `environment` and creates (or checks) the levels below it.
    /// `applicationId` and `account` must each be one plain path component (no "/", not "." or "..").
    package static func resolve(applicationId: String, account: String,
                               environment: [String: String] = ProcessInfo.processInfo.environment) throws(MediaFileError) -> MediaViewDirectory {
        guard var runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else {
            throw .noSafeRuntimeDirectory("XDG_RUNTIME_DIR is unset")
        }
        guard runtime.hasPrefix("/") else { throw .noSafeRuntimeDirectory("XDG_RUNTIME_DIR is not an absolute path") }
        while runtime.count > 1 && runtime.hasSuffix("/") { runtime.removeLast() }
        guard MediaFileIO.isPlainName(applicationId) else {
            throw .noSafeRuntimeDirectory("the application id is not a plain path component")
        }
        guard MediaFileIO.isPlainName(account) else {
            throw .noSafeRuntimeDirectory("the account is not a plain path component")
        }
        var st = stat()
        guard lstat(runtime, &st) == 0 else {
            throw .noSafeRuntimeDirectory("XDG_RUNTIME_DIR does not exist (errno \(errno))")
        }
        try check(st, what: "XDG_RUNTIME_DIR")

        var path = runtime == "/" ? "" : runtime
        for (level, what) in [(applicationId, "the application's directory"), ("media-views", "media-views"),
                              (account, "the account's directory")] {
            path += "/\(level)"
            if mkdir(path, 0o700) == 0 {
                // The umask can only take bits away; make it exactly 0700.
                _ = chmod(path, 0o700)
            } else if errno != EEXIST {
                throw .io(operation: "mkdir media view directory", errno: errno)
            }
            guard lstat(path, &st) == 0 else { throw .io(operation: "lstat media view directory", errno: errno) }
            try check(st, what: "\(what) under XDG_RUNTIME_DIR")
        }
        return MediaViewDirectory(path: path)
    }

    /// Removes the whole per-account directory with every decrypted view in it (links inside are
    /// removed, never followed). Best effort: a failure leaves what could not be removed.
    package func removeAll() {
        try? FileManager.default.removeItem(atPath: path)
    }

    private static func check(_ st: stat, what: String) throws(MediaFileError) {
        let type = st.st_mode & S_IFMT
        if type == S_IFLNK { throw .noSafeRuntimeDirectory("\(what) is a symbolic link") }
        if type != S_IFDIR { throw .noSafeRuntimeDirectory("\(what) is not a directory") }
        if st.st_uid != geteuid() { throw .noSafeRuntimeDirectory("\(what) is not owned by us (uid \(st.st_uid))") }
        let mode = UInt32(st.st_mode) & 0o7777
        if mode & 0o077 != 0 || mode & 0o700 != 0o700 {
            throw .noSafeRuntimeDirectory("\(what) has mode \(String(mode, radix: 8)), not 0700")
        }
    }
}
