public import CChatVault
import ChatVault
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Opaque handles: a pointer-sized number the C side holds and never dereferences. A freed or
/// foreign value is simply not in the table, and each kind has its own tag, so a simulator passed
/// as a vault is refused rather than misread.
final class HandleTable<Object: AnyObject & Sendable>: Sendable {
    private let objects = Mutex<(next: UInt, table: [UInt: Object])>((1, [:]))
    private let tag: UInt

    init(tag: UInt8) { self.tag = UInt(tag) }

    func insert(_ object: Object) -> OpaquePointer? {
        let key = objects.withLock { s -> UInt in
            let key = s.next << 8 | tag
            s.next += 1
            s.table[key] = object
            return key
        }
        return OpaquePointer(bitPattern: key)
    }

    func get(_ handle: OpaquePointer?) -> Object? {
        guard let handle else { return nil }
        let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle)))
        return objects.withLock { $0.table[key] }
    }

    func remove(_ handle: OpaquePointer?) -> Object? {
        guard let handle else { return nil }
        let key = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle)))
        return objects.withLock { $0.table.removeValue(forKey: key) }
    }
}


/// `cv_error **` as Swift sees it.
public typealias ErrorOut = UnsafeMutablePointer<UnsafeMutablePointer<cv_error>?>?

/// A C string the caller owns, copied (nil for NULL or invalid UTF-8).
func text(_ pointer: UnsafePointer<CChar>?) -> String? {
    guard let pointer else { return nil }
    return String(validatingCString: pointer)
}

/// A string the caller frees with `cv_free` (malloc'd).
func owned(_ s: String) -> UnsafeMutablePointer<CChar>? {
    strdup(s)
}

/// JSON text the caller frees with `cv_free`.
func owned(_ t: JSONText) -> UnsafeMutablePointer<CChar>? {
    t.owned()
}

enum CError {
    static let argument = "chatvault-argument"
    static let library = "chatvault"

    /// Sets `*out` to a new error (unless `out` is NULL or already holds one, as GError does).
    static func set(_ out: ErrorOut, domain: String, code: String, message: String, details: String? = nil) {
        guard let out, out.pointee == nil else { return }
        guard let raw = malloc(MemoryLayout<cv_error>.size) else { return }
        let error = raw.bindMemory(to: cv_error.self, capacity: 1)
        error.pointee = cv_error(domain: strdup(domain), code: strdup(code), message: strdup(message), details: details.flatMap { strdup($0) })
        out.pointee = error
    }

    static func invalid(_ out: ErrorOut, _ message: String) {
        set(out, domain: argument, code: "ERR_INVALID_ARGUMENT", message: message)
    }

    static func from(_ out: ErrorOut, _ exception: CometChatException) {
        set(out, domain: library, code: exception.errorCode, message: exception.errorDescription, details: exception.details)
    }
}

/// Work for the app's chosen thread: queued here, announced on an eventfd, run by
/// `cv_vault_dispatch` (or by a `_sync` call waiting on the same thread).
final class Dispatcher: Sendable {
    /// The read end of a non-blocking pipe: readable while work is due.
    let fd: Int32
    private let writeEnd: Int32
    private let queue = Mutex<(work: [@Sendable () -> Void], closed: Bool)>(([], false))

    init() {
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends {
                _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
                _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            }
        } else {
            ends = [-1, -1]
        }
        fd = ends[0]
        writeEnd = ends[1]
    }

    func post(_ work: @escaping @Sendable () -> Void) {
        let posted = queue.withLock { q -> Bool in
            guard !q.closed else { return false }
            q.work.append(work)
            return true
        }
        if posted { wake() }
    }

    /// Makes the descriptor readable (work is due, or a waiting `_sync` call has its answer). A
    /// full pipe is readable already.
    func wake() {
        var one: UInt8 = 1
        _ = write(writeEnd, &one, 1)
    }

    /// Runs what is due, in order; answers how many ran.
    func dispatch() -> UInt32 {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 512) { drain in
            while read(fd, drain.baseAddress, drain.count) > 0 {}
        }
        let work = queue.withLock { q -> [@Sendable () -> Void] in
            defer { q.work = [] }
            return q.closed ? [] : q.work
        }
        for item in work { item() }
        return UInt32(clamping: work.count)
    }

    /// Waits up to `milliseconds` for the descriptor to become readable.
    func waitReadable(milliseconds: Int32) {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&entry, 1, milliseconds)
    }

    /// Drops what is queued and refuses more; the descriptors are closed.
    func close() {
        queue.withLock { q in
            q.closed = true
            q.work = []
        }
        _ = Glibc.close(fd)
        _ = Glibc.close(writeEnd)
    }
}

/// The answer of an async call, for a `_sync` wrapper.
final class Answer<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)
    func set(_ v: T) { value.withLock { $0 = v } }
    var get: T? { value.withLock { $0 } }
}

/// Runs `body` and waits for it on the calling thread, running the vault's due callbacks there
/// meanwhile (a login delivers its reset listeners before it returns). The task starts on the
/// calling thread (`Task.immediate`, SE-0472) and leaves it at its first suspension: one thread
/// hand-off fewer than a detached task's (`chatvault bench capi` measures the hop alone).
func waitDispatching<T: Sendable>(_ dispatcher: Dispatcher, _ body: @escaping @Sendable () async -> T) -> T {
    let answer = Answer<T>()
    Task.immediate {
        answer.set(await body())
        dispatcher.wake()
    }
    // Due callbacks run at least once per call, even when the body answered without suspending:
    // engine work that ends on the callback executor (a sweep marks itself finished there) must
    // not wait for a main loop an app calling _sync functions in a loop may not run.
    while true {
        _ = dispatcher.dispatch()
        if let value = answer.get { return value }
        dispatcher.waitReadable(milliseconds: 100)
    }
}
