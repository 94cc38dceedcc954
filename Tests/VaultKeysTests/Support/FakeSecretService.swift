import Foundation
import Synchronization
@testable import VaultKeys

/// An in-memory Secret Service behind the store's seam (`SecretServiceCalls`). It only answers
/// calls: every decision (locked or absent, which reason) is still the store's. Faults are injected
/// per method: an error, or a call that blocks until the test releases it (or forever).
final class FakeSecretService: Sendable {
    enum Method: Hashable, Sendable {
        case connectBus, openService, readAlias, collectionPaths, isCollectionLocked, searchItems
        case itemInfo, withSecret, createItem, deleteItem, lock, unlock
    }

    struct Item: Sendable {
        var collection: String
        var attributes: [String: String]
        var secret: [UInt8]
        var contentType: String
        var label: String
        var modified: UInt64
    }

    struct State: Sendable {
        var collections: [String: Bool] = ["/org/freedesktop/secrets/collection/login": false]
        var aliases: [String: String] = ["default": "/org/freedesktop/secrets/collection/login"]
        var items: [String: Item] = [:]
        /// Whether a locked item's attributes are shown (gnome-keyring: yes; some providers: no).
        var showsLockedAttributes = true
        /// Whether a search returns items of locked collections at all.
        var searchShowsLockedItems = true
        /// What `unlock` does: unlock for real, or act as a dismissed prompt.
        var unlockSucceeds = false
        var failures: [Method: [SecretCallError]] = [:]
        var hangs: Set<Method> = []
        var calls: [Method] = []
        var instances = 0
        var nextItem = 1
        var clock: UInt64 = 1
    }

    let state = Mutex(State())
    /// Released by `releaseHangs()`: a hanging call waits on it.
    private let hangGate = DispatchSemaphore(value: 0)

    static let login = "/org/freedesktop/secrets/collection/login"

    /// The factory to give the store.
    var makeCalls: @Sendable () -> any SecretServiceCalls {
        { [self] in
            state.withLock { $0.instances += 1 }
            return Calls(self)
        }
    }

    func fail(_ method: Method, with error: SecretCallError, times: Int = 1) {
        state.withLock { $0.failures[method, default: []] += Array(repeating: error, count: times) }
    }

    func hang(_ method: Method) {
        state.withLock { _ = $0.hangs.insert(method) }
    }

    func stopHanging() {
        state.withLock { $0.hangs.removeAll() }
    }

    /// Lets every blocked call return (with a cancellation error).
    func releaseHangs(count: Int = 16) {
        for _ in 0..<count { hangGate.signal() }
    }

    func setLocked(_ locked: Bool, _ collection: String = FakeSecretService.login) {
        state.withLock { $0.collections[collection] = locked }
    }

    func addItem(_ attributes: [String: String], secret: [UInt8], in collection: String = FakeSecretService.login) {
        state.withLock { s in
            let path = "\(collection)/\(s.nextItem)"
            s.nextItem += 1
            s.clock += 1
            s.items[path] = Item(collection: collection, attributes: attributes, secret: secret,
                                 contentType: "text/plain", label: "fake", modified: s.clock)
        }
    }

    var calls: [Method] { state.withLock { $0.calls } }

    /// Records the call, then fails, hangs or proceeds as injected.
    fileprivate func enter(_ method: Method, _ context: SecretCallContext) throws(SecretCallError) {
        let (failure, hangs) = state.withLock { s -> (SecretCallError?, Bool) in
            s.calls.append(method)
            let failure = s.failures[method]?.isEmpty == false ? s.failures[method]!.removeFirst() : nil
            return (failure, s.hangs.contains(method))
        }
        if hangs {
            // Like a D-Bus call that never answers: only a release gets it out (the real one would
            // also return on cancellation, but the store must not rely on that).
            hangGate.wait()
            throw SecretCallError(.cancelled, "released")
        }
        if let failure { throw failure }
    }

    private final class Calls: SecretServiceCalls {
        let fake: FakeSecretService
        var connected = false
        var open = false

        init(_ fake: FakeSecretService) {
            self.fake = fake
        }

        func connectBus(_ context: SecretCallContext) throws(SecretCallError) {
            if connected { return }
            try fake.enter(.connectBus, context)
            connected = true
        }

        func openService(_ context: SecretCallContext) throws(SecretCallError) {
            if open { return }
            try fake.enter(.openService, context)
            open = true
        }

        func disconnect() {
            connected = false
            open = false
        }

        func readAlias(_ alias: String, _ context: SecretCallContext) throws(SecretCallError) -> String? {
            try fake.enter(.readAlias, context)
            return fake.state.withLock { $0.aliases[alias] }
        }

        func collectionPaths(_ context: SecretCallContext) throws(SecretCallError) -> [String] {
            try fake.enter(.collectionPaths, context)
            return fake.state.withLock { $0.collections.keys.sorted() }
        }

        func isCollectionLocked(_ path: String, _ context: SecretCallContext) throws(SecretCallError) -> Bool {
            try fake.enter(.isCollectionLocked, context)
            guard let locked = fake.state.withLock({ $0.collections[path] }) else {
                throw SecretCallError(.dbus(SecretCallError.Name.unknownObject), "no such collection")
            }
            return locked
        }

        func searchItems(_ attributes: [String: String], _ context: SecretCallContext) throws(SecretCallError) -> SecretSearchResult {
            try fake.enter(.searchItems, context)
            return fake.state.withLock { s in
                var result = SecretSearchResult(unlocked: [], locked: [])
                for (path, item) in s.items.sorted(by: { $0.key < $1.key })
                where attributes.allSatisfy({ item.attributes[$0.key] == $0.value }) {
                    if s.collections[item.collection] == true {
                        if s.searchShowsLockedItems { result.locked.append(path) }
                    } else {
                        result.unlocked.append(path)
                    }
                }
                return result
            }
        }

        func itemInfo(_ path: String, _ context: SecretCallContext) throws(SecretCallError) -> SecretItemInfo {
            try fake.enter(.itemInfo, context)
            let info = fake.state.withLock { s -> SecretItemInfo? in
                guard let item = s.items[path] else { return nil }
                let locked = s.collections[item.collection] == true
                return SecretItemInfo(path: path, locked: locked,
                                      attributes: locked && !s.showsLockedAttributes ? nil : item.attributes,
                                      created: item.modified, modified: item.modified)
            }
            guard let info else { throw SecretCallError(.dbus(SecretCallError.Name.unknownObject), "no such item") }
            return info
        }

        func withSecret<R>(ofItem path: String, _ context: SecretCallContext,
                           _ body: (UnsafeRawBufferPointer) -> R) throws(SecretCallError) -> R? {
            try fake.enter(.withSecret, context)
            let secret = fake.state.withLock { s -> [UInt8]? in
                guard let item = s.items[path], s.collections[item.collection] != true else { return nil }
                return item.secret
            }
            return secret.map { $0.withUnsafeBytes(body) }
        }

        func createItem(inCollection collection: String, label: String, attributes: [String: String],
                        secret: UnsafeRawBufferPointer, contentType: String,
                        _ context: SecretCallContext) throws(SecretCallError) -> String {
            try fake.enter(.createItem, context)
            let bytes = Array(secret)
            return try fake.state.withLock { (s) throws(SecretCallError) -> String in
                if s.collections[collection] == true {
                    throw SecretCallError(.dbus(SecretCallError.Name.isLocked), "Cannot create an item in a locked collection")
                }
                s.clock += 1
                let item = Item(collection: collection, attributes: attributes, secret: bytes,
                                contentType: contentType, label: label, modified: s.clock)
                if let same = s.items.first(where: { $0.value.collection == collection && $0.value.attributes == attributes })?.key {
                    s.items[same] = item
                    return same
                }
                let path = "\(collection)/\(s.nextItem)"
                s.nextItem += 1
                s.items[path] = item
                return path
            }
        }

        func deleteItem(_ path: String, _ context: SecretCallContext) throws(SecretCallError) {
            try fake.enter(.deleteItem, context)
            _ = fake.state.withLock { $0.items.removeValue(forKey: path) }
        }

        func lock(_ paths: [String], _ context: SecretCallContext) throws(SecretCallError) {
            try fake.enter(.lock, context)
            fake.state.withLock { s in
                for path in paths where s.collections[path] != nil { s.collections[path] = true }
            }
        }

        func unlock(_ paths: [String], _ context: SecretCallContext) throws(SecretCallError) -> [String] {
            try fake.enter(.unlock, context)
            return fake.state.withLock { s in
                guard s.unlockSucceeds else { return [] }
                for path in paths {
                    // An item path unlocks the collection that holds it.
                    if let collection = s.items[path]?.collection { s.collections[collection] = false }
                    if s.collections[path] != nil { s.collections[path] = false }
                }
                return paths
            }
        }
    }
}
