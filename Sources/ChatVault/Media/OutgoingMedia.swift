import Foundation
import VaultStore

/// The copies of files being sent (`outgoing/`), encrypted like received media when the cache is.
///
/// A copy is written encrypted under the media key when the cache is encrypted and decrypted
/// views have a safe place; otherwise it stays plain (an upload needs a plaintext file to read,
/// and none may be written outside a safe runtime directory), which the encryption status's
/// `leakage` says. Whatever reads a copy's bytes (the upload, `localPath` of a pending message, an
/// upload batch's status) goes through `plaintextCopyPath`: the copy itself when plain, else its
/// decrypted view, made on demand, removed with the other views (logout, clear, reset, next
/// start) and once the send completes.
extension MediaCache {
    /// The key new outgoing copies are written under (nil: plain copies).
    func outgoingCopyKey(_ cache: VaultCache) -> MediaKey? {
        guard cache.isEncrypted else { return nil }
        return state.withLock { s -> MediaKey? in
            guard case .success? = s.views else { return nil }
            return s.key
        }
    }

    /// A path to the plaintext of the copy at `relative` (under the cache directory `root`): the
    /// copy itself when plain, its view when encrypted (made now if missing); nil when an
    /// encrypted copy cannot be read (no key or view place, or it fails authentication).
    func plaintextCopyPath(_ relative: String, root: String) -> String? {
        guard !relative.isEmpty, !relative.hasPrefix("/"), !relative.split(separator: "/").contains("..") else { return nil }
        let path = "\(root)/\(relative)"
        guard MediaFileReader.isEncryptedMediaFile(path) else { return path }
        let (key, views) = state.withLock { ($0.key, $0.views) }
        guard let key, case .success(let directory)? = views else { return nil }
        let view = "\(directory.path)/\(Self.copyViewName(relative))"
        // Views appear whole or not at all (renamed into place), and a copy never changes.
        if MediaCache.regularFileSize(view) != nil { return view }
        do {
            try MediaFileReader.decrypt(path, key: key, to: view, durable: false)
            return view
        } catch {
            unlink(view)
            return nil
        }
    }

    /// Removes the views of the copies under `folder` (`outgoing/<local id>`), once sent.
    func removeCopyViews(folder: String) {
        guard let directory = try? state.withLock({ $0.views })?.get() else { return }
        let prefix = Self.copyViewName(folder + "/")
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.hasPrefix(prefix) { unlink("\(directory.path)/\(name)") }
    }

    /// Removes the view of one copy (once sent).
    func removeCopyView(_ relative: String) {
        guard let directory = try? state.withLock({ $0.views })?.get() else { return }
        unlink("\(directory.path)/\(Self.copyViewName(relative))")
    }

    /// A view's name for the copy at `relative` (`c-outgoing~<local id>~0`).
    static func copyViewName(_ relative: String) -> String {
        "c-" + relative.replacingOccurrences(of: "/", with: "~")
    }
}
