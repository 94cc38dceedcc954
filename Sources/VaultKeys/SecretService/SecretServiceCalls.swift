import Foundation
import Synchronization
internal import CLibSecret

/// The thin seam between `SecretServiceKeyStore` and libsecret: one method per Secret Service call,
/// plain Swift values in and out, no decisions. Tests substitute it to inject a dead bus, a missing
/// provider, a locked keyring or a call that never returns; every mapping from a call's outcome to
/// a `KeyLookup` or a `KeyUnavailableReason` lives in the store, so a fake exercises the real logic.
///
/// An instance is created on, and used only from, one worker thread (`SecretServiceWorker`), so it
/// need not be `Sendable`; the GLib objects of the real implementation never leave that thread.
/// Every method may block; each honours `context` (its `GCancellable`) so a caller that gives up can
/// make it return.
protocol SecretServiceCalls: AnyObject {
    /// Connects to the bus (or keeps the connection it has). Failing here means "no bus".
    func connectBus(_ context: SecretCallContext) throws(SecretCallError)
    /// Opens the Secret Service proxy and its transfer session (or keeps the one it has).
    func openService(_ context: SecretCallContext) throws(SecretCallError)
    /// Drops the service and the connection; the next `connectBus` starts afresh.
    func disconnect()

    /// `ReadAlias`: the collection path behind an alias, or nil when the alias is not set.
    func readAlias(_ alias: String, _ context: SecretCallContext) throws(SecretCallError) -> String?
    /// The service's `Collections` property.
    func collectionPaths(_ context: SecretCallContext) throws(SecretCallError) -> [String]
    /// A collection's `Locked` property, read afresh.
    func isCollectionLocked(_ path: String, _ context: SecretCallContext) throws(SecretCallError) -> Bool
    /// `SearchItems` (no unlocking, no prompt): matching item paths, split by lock state.
    func searchItems(_ attributes: [String: String], _ context: SecretCallContext) throws(SecretCallError) -> SecretSearchResult
    /// An item's properties (`Locked`, `Attributes`, `Created`, `Modified`), read afresh.
    func itemInfo(_ path: String, _ context: SecretCallContext) throws(SecretCallError) -> SecretItemInfo
    /// Runs `body` with the item's secret bytes, which are freed (and zeroed by libsecret's secure
    /// memory) when `body` returns. Nil when the service returned no secret (the item is locked or
    /// gone).
    func withSecret<R>(ofItem path: String, _ context: SecretCallContext, _ body: (UnsafeRawBufferPointer) -> R) throws(SecretCallError) -> R?
    /// `CreateItem` with `replace` = true (an item with identical attributes is updated in place).
    /// Returns the new item's path. The caller zeroes `secret`.
    func createItem(inCollection collection: String, label: String, attributes: [String: String],
                    secret: UnsafeRawBufferPointer, contentType: String, _ context: SecretCallContext) throws(SecretCallError) -> String
    /// `Item.Delete`.
    func deleteItem(_ path: String, _ context: SecretCallContext) throws(SecretCallError)
    /// `Lock` the objects.
    func lock(_ paths: [String], _ context: SecretCallContext) throws(SecretCallError)
    /// `Unlock` the objects, performing the prompt the service asks for. Returns what was unlocked;
    /// an empty answer without an error is a dismissed prompt.
    func unlock(_ paths: [String], _ context: SecretCallContext) throws(SecretCallError) -> [String]
}

/// The answer of `SearchItems`.
struct SecretSearchResult: Sendable, Equatable {
    var unlocked: [String]
    var locked: [String]

    var isEmpty: Bool { unlocked.isEmpty && locked.isEmpty }
}

/// The properties of one item. No secret.
struct SecretItemInfo: Sendable, Equatable {
    var path: String
    var locked: Bool
    /// Nil when the service would not show them (some providers hide a locked item's attributes).
    var attributes: [String: String]?
    var created: UInt64
    var modified: UInt64
}

/// A failed Secret Service call, reduced to what the store maps: the D-Bus error name when there is
/// one. The message comes from GLib or the service and never contains a secret.
struct SecretCallError: Error, Sendable, Equatable, CustomStringConvertible {
    enum Kind: Sendable, Equatable {
        /// A D-Bus error name, e.g. `org.freedesktop.DBus.Error.ServiceUnknown`,
        /// `org.freedesktop.Secret.Error.IsLocked`.
        case dbus(String)
        /// A `G_IO_ERROR` code (`GIOErrorEnum`) that carries no D-Bus name.
        case io(Int32)
        /// The call's `GCancellable` was cancelled (the caller's deadline passed).
        case cancelled
        /// Anything else: `"<GError domain>:<code>"`.
        case other(String)
    }

    var kind: Kind
    var message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    var description: String {
        switch kind {
        case .dbus(let name): return "\(name): \(message)"
        case .io(let code): return "I/O error \(code): \(message)"
        case .cancelled: return "cancelled: \(message)"
        case .other(let what): return "\(what): \(message)"
        }
    }

    /// D-Bus error names the store recognises (kept here so fakes and the store agree).
    enum Name {
        static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
        static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
        static let spawnPrefix = "org.freedesktop.DBus.Error.Spawn."
        static let noServer = "org.freedesktop.DBus.Error.NoServer"
        static let disconnected = "org.freedesktop.DBus.Error.Disconnected"
        static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
        static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
        static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
        static let isLocked = "org.freedesktop.Secret.Error.IsLocked"
        static let noSuchObject = "org.freedesktop.Secret.Error.NoSuchObject"
    }
}

/// One store operation's cancellation and bookkeeping, shared between the caller (who cancels on
/// its deadline) and the worker (who runs the calls). `GCancellable` is thread-safe by design; it is
/// the one GLib object that crosses threads.
final class SecretCallContext: @unchecked Sendable {
    // Owned reference, released in deinit. Only g_cancellable_* calls touch it, which are thread-safe.
    private let handle: UnsafeMutablePointer<GCancellable>
    private let prompted = Atomic<Bool>(false)

    init() {
        handle = g_cancellable_new()
    }

    deinit {
        g_object_unref(handle)
    }

    /// The `GCancellable` to pass to libsecret.
    var cancellable: UnsafeMutablePointer<GCancellable> { handle }

    var isCancelled: Bool { g_cancellable_is_cancelled(handle) != 0 }

    /// Cancels the operation: libsecret aborts its D-Bus calls and dismisses a pending prompt.
    func cancel() {
        g_cancellable_cancel(handle)
    }

    /// Records that an unlock prompt was requested, so a timeout is reported as `.promptTimedOut`.
    func notePrompt() {
        prompted.store(true, ordering: .sequentiallyConsistent)
    }

    var promptInvolved: Bool { prompted.load(ordering: .sequentiallyConsistent) }
}
