import Foundation

/// Cache keys in the desktop's Secret Service (gnome-keyring, KeePassXC, KWallet's bridge…),
/// reached over D-Bus through libsecret. Tier `KEYSTORE`, name `secret-service`.
///
///     let store = SecretServiceKeyStore()
///     let id = KeyItemID(applicationId: "org.example.chat", account: accountHash, cacheId: cacheId)
///     try store.store(key, keyId: keyId, for: id, label: "Example Chat offline cache key (alice)")
///     switch store.lookup(id) {
///     case .found(let key, let keyId): …
///     case .absent: …                     // definitely gone: the default collection exists, all unlocked
///     case .unavailable(let reason): …    // locked, no bus, no provider…: try again later
///     }
///
/// ## Item format
///
/// One item per cache, in the collection behind the `default` alias (gnome-keyring's "login"
/// keyring), with these attributes:
///
/// | attribute     | value                                                          |
/// |---------------|----------------------------------------------------------------|
/// | `xdg:schema`  | `org.chatvault.CacheKey`                                       |
/// | `application` | the application id, e.g. `org.example.chat`                     |
/// | `account`     | the opaque per-user identifier of `KeyItemID` (a hash, never a user id) |
/// | `cache-id`    | the cache id (a UUID)                                          |
/// | `key-id`      | the key id recorded in the cache's manifest                     |
///
/// The label is the caller's (e.g. "Example Chat offline cache key (alice)"). The secret is the key
/// as 64 lowercase hexadecimal digits (ASCII), content type `text/plain`. Find or remove items with
/// `secret-tool search --all xdg:schema org.chatvault.CacheKey application org.example.chat` and
/// `secret-tool clear xdg:schema org.chatvault.CacheKey application org.example.chat cache-id <id>`.
///
/// ## What a lookup reports
///
/// libsecret's convenience API answers a lookup in a locked collection exactly like a lookup of a
/// missing item (NULL, no error). This store therefore searches with `SearchItems`, which returns
/// locked and unlocked matches separately, and concludes `.absent` only when nothing matched, the
/// `default` collection (where this store writes) exists, and every collection (the `default` one
/// included) reports `Locked = false`. A locked match, or no match while any collection is locked,
/// is `.unavailable(.locked)`. So a user who keeps a second keyring locked sees `.locked`, never a
/// `keyLost` reset, until it is unlocked. No match without a `default` collection is
/// `.unavailable(.other)`: a KeePassXC database that is closed (rather than locked) is no collection
/// at all, and a fresh keyring may not have its login collection yet, so an empty search there
/// says nothing about the key.
///
/// | situation | answer |
/// |---|---|
/// | no session bus (unset, unreachable, "Cannot autolaunch D-Bus without X11 $DISPLAY") | `.noBus` |
/// | bus, nobody owns `org.freedesktop.secrets` and nothing can be activated (`ServiceUnknown`, `NameHasNoOwner`, a failed activation `Spawn.*`) | `.noProvider` |
/// | item or collection locked, prompting off | `.locked` |
/// | prompting on, the prompt dismissed (or no prompter can be shown) | `.denied` |
/// | prompting on, nobody answered before the timeout | `.promptTimedOut` |
/// | any call that does not return before the timeout, without a prompt | `.other` |
/// | no `default` collection (a closed KeePassXC database, a fresh keyring without a login collection) and no match | `.other` (storing: with a detail saying so) |
///
/// ## Threads and time
///
/// Every libsecret call runs on a worker thread owned by the store (shared by its copies); a call
/// waits for it at most `timeout` (60 s with `unlockPrompt`, otherwise 10 s), then cancels it and
/// answers. No GLib object leaves the worker. After any D-Bus error the store drops its connection
/// and tries once more on a fresh one (a replaced keyring daemon invalidates the old transfer
/// session). Create one store and share it; each instance has its own thread.
///
/// - Note: unlocking needs a prompter (gcr-prompter on GNOME). Headless, gnome-keyring's prompt
///   fails at once and an unlock attempt reports `.denied`.
public struct SecretServiceKeyStore: KeyStore {
    /// The `xdg:schema` attribute of every item this store writes.
    package static let schemaName = "org.chatvault.CacheKey"
    /// The content type of the secret (64 hexadecimal digits).
    package static let contentType = "text/plain"
    /// The alias of the collection that holds new items.
    package static let collectionAlias = "default"

    /// Attribute names of the item format.
    package enum Attribute {
        package static let schema = "xdg:schema"
        package static let application = "application"
        package static let account = "account"
        package static let cacheId = "cache-id"
        package static let keyId = "key-id"
    }

    public var tier: KeyStorageTier { .keystore }
    public var name: String { "secret-service" }

    /// Whether a locked collection is answered with an unlock prompt (`secret_service_unlock`).
    public let unlockPrompt: Bool
    /// How long a caller waits for any one operation, prompt included.
    public let timeout: Duration
    /// The D-Bus address used instead of the session bus, if any.
    public let busAddress: String?

    private let workers: SecretServiceWorkers

    /// - Parameters:
    ///   - unlockPrompt: ask the Secret Service to unlock a locked collection (it shows its own
    ///     password prompt). Off by default: a locked keyring then answers `.locked` at once.
    ///   - timeout: the most any call waits; nil means 60 s when prompting, 10 s otherwise.
    ///   - busAddress: a D-Bus address (e.g. `unix:path=/run/user/1000/bus`) to use instead of the
    ///     session bus. Nil: `DBUS_SESSION_BUS_ADDRESS`, then `$XDG_RUNTIME_DIR/bus`.
    public init(unlockPrompt: Bool = false, timeout: Duration? = nil, busAddress: String? = nil) {
        self.init(unlockPrompt: unlockPrompt, timeout: timeout, busAddress: busAddress) {
            LibSecretCalls(busAddress: busAddress)
        }
    }

    /// The seam: tests pass their own `SecretServiceCalls` (a dead bus, a locked keyring, a call
    /// that never returns). `makeCalls` runs on the worker thread, once per worker.
    init(unlockPrompt: Bool = false, timeout: Duration? = nil, busAddress: String? = nil,
         makeCalls: @escaping @Sendable () -> any SecretServiceCalls) {
        self.unlockPrompt = unlockPrompt
        self.timeout = timeout ?? (unlockPrompt ? .seconds(60) : .seconds(10))
        self.busAddress = busAddress
        self.workers = SecretServiceWorkers(makeCalls: makeCalls)
    }

    // MARK: KeyStore

    /// `.available` when the bus, the provider and the `default` collection are there and the
    /// collection is unlocked (with `unlockPrompt`, after asking to unlock it); else the reason.
    public func availability() -> KeyStoreAvailability {
        let prompt = unlockPrompt
        let outcome = run("checking the default collection") { calls, context throws(SecretCallError) -> KeyStoreError? in
            switch try Self.defaultCollection(calls, context, prompt: prompt) {
            case .success: return nil
            case .failure(let error): return error
            }
        }
        switch outcome {
        case .success(nil): return .available
        case .success(let error?): return .unavailable(error.reason)
        case .failure(let error): return .unavailable(error.reason)
        }
    }

    /// Connects to the bus and opens the Secret Service session (the D-Bus connection, the
    /// service proxy and the encrypted transfer session: most of a first lookup's time) on the
    /// store's worker, which keeps them for the lookup that follows. Calls no method on any
    /// collection or item.
    public func prepare() {
        _ = run("connecting") { _, _ throws(SecretCallError) -> Bool in true }
    }

    /// Looks up one cache's key without prompting (unless `unlockPrompt`): `.found` from an
    /// unlocked item (the newest, if an interrupted replace left two), `.unavailable(.locked)` for
    /// a locked match or for no match while a collection is locked, `.absent` only for no match
    /// while the `default` collection exists and every collection is unlocked; no match without a
    /// `default` collection is `.unavailable(.other)`. A secret that is not 64 hex digits is
    /// `.unavailable(.other)`.
    public func lookup(_ id: KeyItemID) -> KeyLookup {
        guard Self.isValid(id) else { return .unavailable(.other) }
        let query = Self.query(id)
        let prompt = unlockPrompt
        let outcome = run("looking up a key") { calls, context throws(SecretCallError) -> KeyLookup in
            try Self.lookup(query, calls, context, prompt: prompt)
        }
        switch outcome {
        case .success(let lookup): return lookup
        case .failure(let error): return .unavailable(error.reason)
        }
    }

    /// Lists the account's items by their attributes, locked ones included (gnome-keyring shows a
    /// locked item's attributes; its secret stays unread). A listing must be complete, since a
    /// manifest repair picks its key from it, so (the same rule as `lookup`: "none" must mean none):
    /// `.unavailable(.other)` without a `default` collection; `.unavailable(.locked)` when a
    /// matching locked item hides its attributes, or when a collection is locked and the search
    /// showed no locked match (the provider may leave locked items out of searches). One summary
    /// per cache id.
    public func items(applicationId: String, account: String) -> KeyListing {
        guard Self.isValidText(applicationId), KeyItemNames.isSafeComponent(account) else { return .unavailable(.other) }
        let query = [
            Attribute.schema: Self.schemaName,
            Attribute.application: applicationId,
            Attribute.account: account,
        ]
        let prompt = unlockPrompt
        let outcome = run("listing keys") { calls, context throws(SecretCallError) -> KeyListing in
            try Self.list(query, applicationId: applicationId, account: account, calls, context, prompt: prompt)
        }
        switch outcome {
        case .success(let listing): return listing
        case .failure(let error): return .unavailable(error.reason)
        }
    }

    /// Stores the key, replacing any item of the same application, account and cache id. The new
    /// item is written before the old ones are deleted, so a failure never leaves the cache keyless.
    public func store(_ key: CacheKey, keyId: String, for id: KeyItemID, label: String) throws(KeyStoreError) {
        guard Self.isValid(id) else { throw KeyStoreError(.other, "unsafe characters in a key item name") }
        guard Self.isValidText(keyId), Self.isValidText(label, limit: 1024) else {
            throw KeyStoreError(.other, "the key id or label is empty, too long or contains NUL")
        }
        let query = Self.query(id)
        let attributes = query.merging([Attribute.keyId: keyId]) { _, new in new }
        let prompt = unlockPrompt
        let outcome = run("storing a key") { calls, context throws(SecretCallError) -> KeyStoreError? in
            try Self.replaceItem(query, prompt: prompt, calls, context) { (collection) throws(SecretCallError) -> String in
                // The hex digits exist only in this scratch buffer (zeroed when it returns) and in
                // libsecret's secure memory; never in a String.
                try key.withHexDigits { (hex) throws(SecretCallError) -> String in
                    try calls.createItem(inCollection: collection, label: label, attributes: attributes,
                                         secret: hex, contentType: Self.contentType, context)
                }
            }
        }
        try Self.settle(outcome)
    }

    /// Creates the new item in the `default` collection (through `create`, given its path), then
    /// deletes the older items matching `query`: a failure never leaves no item at all.
    static func replaceItem(_ query: [String: String], prompt: Bool, _ calls: any SecretServiceCalls, _ context: SecretCallContext,
                            create: (String) throws(SecretCallError) -> String) throws(SecretCallError) -> KeyStoreError? {
        let collection: String
        switch try defaultCollection(calls, context, prompt: prompt) {
        case .success(let path): collection = path
        case .failure(let error): return error
        }
        let previous = try calls.searchItems(query, context)
        let created = try create(collection)
        for path in previous.unlocked where path != created {
            try deleteIgnoringMissing(path, calls, context)
        }
        return nil
    }

    /// Throws what a store operation ended with, if anything.
    static func settle(_ outcome: Result<KeyStoreError?, KeyStoreError>) throws(KeyStoreError) {
        switch outcome {
        case .success(nil): return
        case .success(let error?): throw error
        case .failure(let error): throw error
        }
    }

    /// Deletes the cache's item(s). Nothing to delete is success; a matching item in a locked
    /// collection is `.locked` (libsecret's `secret_service_clear` would skip it and report
    /// success, leaving the key behind).
    public func delete(_ id: KeyItemID) throws(KeyStoreError) {
        guard Self.isValid(id) else { return }
        _ = try deleteMatching(Self.query(id), "deleting a key")
    }

    public func locator(for id: KeyItemID) -> [String: String] {
        Self.query(id)
    }

    // MARK: Maintenance

    /// Deletes every item of this schema with the given application id (all accounts and caches),
    /// for scenario and test cleanup. Returns how many items were deleted.
    /// - Warning: destroys keys; the caches they protect become unreadable.
    @discardableResult
    public func deleteAll(applicationId: String) throws(KeyStoreError) -> Int {
        guard Self.isValidText(applicationId) else { throw KeyStoreError(.other, "invalid application id") }
        return try deleteMatching([Attribute.schema: Self.schemaName, Attribute.application: applicationId],
                                  "deleting an application's keys")
    }

    /// Locks the collection behind the `default` alias (`secret_service_lock`), as a user's screen
    /// lock or "Lock keyring" would. Tests and the CLI's scenarios use it.
    package func lockDefaultCollection() throws(KeyStoreError) {
        let outcome = run("locking the default collection") { calls, context throws(SecretCallError) -> KeyStoreError? in
            guard let path = try calls.readAlias(Self.collectionAlias, context) else {
                return KeyStoreError(.other, "the Secret Service has no default collection")
            }
            try calls.lock([path], context)
            return nil
        }
        switch outcome {
        case .success(nil): return
        case .success(let error?): throw error
        case .failure(let error): throw error
        }
    }

    /// Whether the `default` collection is locked now (nil: no such collection).
    package func isDefaultCollectionLocked() throws(KeyStoreError) -> Bool? {
        let outcome = run("checking the default collection") { calls, context throws(SecretCallError) -> Bool? in
            guard let path = try calls.readAlias(Self.collectionAlias, context) else { return nil }
            return try calls.isCollectionLocked(path, context)
        }
        return try outcome.get()
    }
}

// MARK: - Operations (run on the worker)

extension SecretServiceKeyStore {
    /// The attributes that identify one cache's item (everything but the key id).
    static func query(_ id: KeyItemID) -> [String: String] {
        [
            Attribute.schema: schemaName,
            Attribute.application: id.applicationId,
            Attribute.account: id.account,
            Attribute.cacheId: id.cacheId,
        ]
    }

    static func isValid(_ id: KeyItemID) -> Bool {
        KeyItemNames.isSafe(id) && isValidText(id.applicationId)
    }

    /// Non-empty, bounded, and free of NUL (which C would silently cut at).
    static func isValidText(_ text: String, limit: Int = 255) -> Bool {
        !text.isEmpty && text.utf8.count <= limit && !text.utf8.contains(0)
    }

    static func lookup(_ query: [String: String], _ calls: any SecretServiceCalls, _ context: SecretCallContext,
                       prompt: Bool) throws(SecretCallError) -> KeyLookup {
        let found = try lookupItem(query, calls, context, prompt: prompt) { bytes in
            try? parseKey(bytes)
        }
        switch found {
        case .found(let key, let attributes): return .found(key, keyId: attributes[Attribute.keyId] ?? "")
        case .absent: return .absent
        // Not 64 hex digits: damaged or not ours. Not "absent": never a reset.
        case .unreadable: return .unavailable(.other)
        case .unavailable(let reason): return .unavailable(reason)
        }
    }

    /// What a search for one item found, its secret parsed by the caller.
    enum ItemLookup<T> {
        case found(T, attributes: [String: String])
        case absent
        /// The newest unlocked match's secret did not parse.
        case unreadable
        case unavailable(KeyUnavailableReason)
    }

    /// The search behind every lookup: the newest unlocked match's secret through `parse` (the
    /// bytes are zeroed when it returns), or why there is none (see `lookup(_:)` for the rules:
    /// "absent" only when the `default` collection exists and no collection is locked).
    static func lookupItem<T>(_ query: [String: String], _ calls: any SecretServiceCalls, _ context: SecretCallContext,
                              prompt: Bool, parse: (UnsafeRawBufferPointer) -> T?) throws(SecretCallError) -> ItemLookup<T> {
        var prompted = false
        while true {
            let found = try calls.searchItems(query, context)
            if !found.unlocked.isEmpty {
                var infos: [SecretItemInfo] = []
                for path in found.unlocked {
                    infos.append(try calls.itemInfo(path, context))
                }
                // Normally one item; after an interrupted replace, the newest one is the current one.
                for info in newestFirst(infos) where !info.locked {
                    let parsed = try calls.withSecret(ofItem: info.path, context) { bytes in parse(bytes) }
                    switch parsed {
                    case .some(.some(let value)): return .found(value, attributes: info.attributes ?? [:])
                    case .some(.none): return .unreadable
                    case .none: continue // locked meanwhile
                    }
                }
            }
            let locked: [String]
            if found.isEmpty {
                // Nothing matched: "absent" only if the place the item would live is there and open.
                let collections = try collectionStates(calls, context)
                if collections.locked.isEmpty {
                    return collections.hasDefault ? .absent : .unavailable(.other)
                }
                locked = collections.locked
            } else if found.locked.isEmpty {
                return .unavailable(.locked) // the unlocked matches locked while being read
            } else {
                locked = found.locked
            }
            guard prompt, !prompted else { return .unavailable(.locked) }
            if let refusal = try promptToUnlock(locked, calls, context) { return .unavailable(refusal) }
            prompted = true
        }
    }

    static func list(_ query: [String: String], applicationId: String, account: String,
                     _ calls: any SecretServiceCalls, _ context: SecretCallContext,
                     prompt: Bool) throws(SecretCallError) -> KeyListing {
        var prompted = false
        while true {
            let found = try calls.searchItems(query, context)
            // Complete only if the default collection is there and nothing can hide in a locked
            // collection: none is locked, or the search showed locked matches (so the provider
            // lists locked items, as gnome-keyring does).
            let collections = try collectionStates(calls, context)
            guard collections.hasDefault else { return .unavailable(.other) }
            if !collections.locked.isEmpty && found.locked.isEmpty {
                guard prompt, !prompted else { return .unavailable(.locked) }
                if let refusal = try promptToUnlock(collections.locked, calls, context) { return .unavailable(refusal) }
                prompted = true
                continue
            }
            // Locked items count: their attributes (cache id, key id) are public in gnome-keyring.
            // A provider that hides a locked item's attributes makes the listing unknowable.
            var newest: [String: SecretItemInfo] = [:]
            for path in found.unlocked + found.locked {
                let info = try calls.itemInfo(path, context)
                guard let attributes = info.attributes else {
                    if info.locked { return .unavailable(.locked) }
                    continue
                }
                guard let cacheId = attributes[Attribute.cacheId] else { continue }
                if let other = newest[cacheId], newestFirst([other, info]).first == other { continue }
                newest[cacheId] = info
            }
            let summaries = newest.sorted { $0.key < $1.key }.map { cacheId, info in
                KeyItemSummary(id: KeyItemID(applicationId: applicationId, account: account, cacheId: cacheId),
                               keyId: info.attributes?[Attribute.keyId] ?? "")
            }
            return .items(summaries)
        }
    }

    /// The path of the `default` collection, unlocked (prompting if allowed), or why not.
    static func defaultCollection(_ calls: any SecretServiceCalls, _ context: SecretCallContext,
                                  prompt: Bool) throws(SecretCallError) -> Result<String, KeyStoreError> {
        guard let path = try calls.readAlias(collectionAlias, context) else {
            // gnome-keyring creates the login collection on the first unlock with a password; a
            // collection created over D-Bus needs a password prompt, so it is not created here.
            return .failure(KeyStoreError(.other, "the Secret Service has no default collection (no login keyring); "
                + "create one (e.g. with Seahorse, or by logging in to the desktop) and try again"))
        }
        guard try calls.isCollectionLocked(path, context) else { return .success(path) }
        guard prompt else { return .failure(KeyStoreError(.locked, "the default collection is locked")) }
        if let refusal = try promptToUnlock([path], calls, context) {
            return .failure(KeyStoreError(refusal, "the default collection stayed locked: the unlock prompt was dismissed"))
        }
        guard try !calls.isCollectionLocked(path, context) else {
            return .failure(KeyStoreError(.locked, "the default collection is still locked"))
        }
        return .success(path)
    }

    /// What the collections say about an empty (or possibly partial) search.
    struct CollectionStates: Sendable, Equatable {
        /// Whether the `default` alias names a collection (one that answers for its `Locked`
        /// property: an alias to a vanished collection fails that read, which is never "absent").
        var hasDefault: Bool
        /// Every collection (the `default` one included) whose `Locked` property is true.
        var locked: [String]
    }

    static func collectionStates(_ calls: any SecretServiceCalls,
                                 _ context: SecretCallContext) throws(SecretCallError) -> CollectionStates {
        let defaultPath = try calls.readAlias(collectionAlias, context)
        var paths = try calls.collectionPaths(context)
        if let defaultPath, !paths.contains(defaultPath) {
            paths.append(defaultPath)
        }
        var locked: [String] = []
        for path in paths {
            if try calls.isCollectionLocked(path, context) { locked.append(path) }
        }
        return CollectionStates(hasDefault: defaultPath != nil, locked: locked)
    }

    /// Asks the service to unlock `paths`. Nil when something was unlocked; `.denied` when the
    /// prompt was dismissed (headless gnome-keyring dismisses it at once: no prompter can start).
    static func promptToUnlock(_ paths: [String], _ calls: any SecretServiceCalls,
                               _ context: SecretCallContext) throws(SecretCallError) -> KeyUnavailableReason? {
        context.notePrompt()
        let unlocked = try calls.unlock(paths, context)
        return unlocked.isEmpty ? .denied : nil
    }

    static func deleteIgnoringMissing(_ path: String, _ calls: any SecretServiceCalls,
                                      _ context: SecretCallContext) throws(SecretCallError) {
        do throws(SecretCallError) {
            try calls.deleteItem(path, context)
        } catch {
            switch error.kind {
            case .dbus(SecretCallError.Name.noSuchObject), .dbus(SecretCallError.Name.unknownObject),
                 .dbus(SecretCallError.Name.unknownMethod):
                return // deleted meanwhile
            default:
                throw error
            }
        }
    }

    /// Deletes every unlocked match (locked matches: `.locked`).
    @discardableResult
    func deleteAllMatching(_ query: [String: String], _ what: String) throws(KeyStoreError) -> Int {
        try deleteMatching(query, what)
    }

    private func deleteMatching(_ query: [String: String], _ what: String) throws(KeyStoreError) -> Int {
        let prompt = unlockPrompt
        let outcome = run(what) { calls, context throws(SecretCallError) -> Result<Int, KeyStoreError> in
            var found = try calls.searchItems(query, context)
            if !found.locked.isEmpty {
                guard prompt else {
                    return .failure(KeyStoreError(.locked, "\(found.locked.count) matching item(s) are in a locked collection"))
                }
                if let refusal = try Self.promptToUnlock(found.locked, calls, context) {
                    return .failure(KeyStoreError(refusal, "the unlock prompt was dismissed"))
                }
                found = try calls.searchItems(query, context)
                if !found.locked.isEmpty {
                    return .failure(KeyStoreError(.locked, "matching items are still locked"))
                }
            }
            for path in found.unlocked {
                try Self.deleteIgnoringMissing(path, calls, context)
            }
            return .success(found.unlocked.count)
        }
        return try outcome.get().get()
    }

    /// The key from an item's secret: exactly 64 hexadecimal digits, checked here before
    /// `CacheKey.fromHex` sees them, since the bytes come from outside (anyone with access to the
    /// keyring can edit an item).
    static func parseKey(_ bytes: UnsafeRawBufferPointer) throws(KeyMaterialError) -> CacheKey {
        guard bytes.count == CacheKey.byteCount * 2 else { throw .wrongLength(bytes.count / 2) }
        let isHex = bytes.allSatisfy { c in
            (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "f"))
                || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "F"))
        }
        guard isHex else { throw .malformed }
        return try CacheKey.fromHex(bytes)
    }

    static func newestFirst(_ infos: [SecretItemInfo]) -> [SecretItemInfo] {
        infos.sorted { a, b in
            if a.modified != b.modified { return a.modified > b.modified }
            if a.created != b.created { return a.created > b.created }
            return a.path > b.path
        }
    }
}

// MARK: - Running and mapping

extension SecretServiceKeyStore {
    /// Runs `body` on the worker after making sure the bus and the service are open. A D-Bus error
    /// drops the connection and the whole body runs once more on a fresh one. Errors that remain
    /// are mapped to a reason here; the deadline is enforced by the worker.
    func run<T: Sendable>(_ what: String,
                          _ body: @escaping @Sendable (any SecretServiceCalls, SecretCallContext) throws(SecretCallError) -> T)
        -> Result<T, KeyStoreError> {
        let outcome = workers.run(timeout: timeout) { calls, context -> Result<T, KeyStoreError> in
            var attempt = 0
            while true {
                attempt += 1
                var stage = Stage.bus
                do throws(SecretCallError) {
                    try calls.connectBus(context)
                    stage = .service
                    try calls.openService(context)
                    stage = .call
                    return .success(try body(calls, context))
                } catch {
                    calls.disconnect()
                    if attempt < 2, error.kind != .cancelled { continue }
                    let reason = Self.reason(for: error, stage: stage, promptInvolved: context.promptInvolved)
                    return .failure(KeyStoreError(reason, "\(what): \(error)"))
                }
            }
        }
        switch outcome {
        case .finished(let result):
            return result
        case .timedOut(let promptInvolved):
            if promptInvolved {
                return .failure(KeyStoreError(.promptTimedOut, "\(what): nobody answered the unlock prompt within \(Self.format(timeout))"))
            }
            return .failure(KeyStoreError(.other, "\(what): the Secret Service did not answer within \(Self.format(timeout))"))
        }
    }

    /// Where a failure happened: reaching the bus, opening the service, or a later call.
    enum Stage: Sendable {
        case bus, service, call
    }

    /// The one place where a failed call becomes a `KeyUnavailableReason`.
    static func reason(for error: SecretCallError, stage: Stage, promptInvolved: Bool) -> KeyUnavailableReason {
        if error.kind == .cancelled { return promptInvolved ? .promptTimedOut : .other }
        // Whatever prevents reaching the bus at all (no address, "Cannot autolaunch D-Bus without
        // X11 $DISPLAY", a dead socket, a refused authentication) means there is no bus.
        if stage == .bus { return .noBus }
        switch error.kind {
        case .dbus(let name):
            switch name {
            case SecretCallError.Name.serviceUnknown, SecretCallError.Name.nameHasNoOwner:
                return .noProvider
            case let spawn where spawn.hasPrefix(SecretCallError.Name.spawnPrefix):
                // The bus knows a provider but could not start it: as good as none.
                return .noProvider
            case SecretCallError.Name.noServer, SecretCallError.Name.disconnected:
                return .noBus
            case SecretCallError.Name.isLocked:
                return .locked
            case SecretCallError.Name.accessDenied:
                return .denied
            default:
                return .other
            }
        case .io(let code):
            // The bus connection closed under us (the bus went away), or its socket vanished.
            let busGone: Set<Int32> = [ioErrorClosed, ioErrorBrokenPipe, ioErrorConnectionRefused, ioErrorNotConnected]
            return busGone.contains(code) ? .noBus : .other
        case .cancelled, .other:
            return .other
        }
    }

    static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        if attoseconds == 0 { return "\(seconds) s" }
        return "\(Double(seconds) + Double(attoseconds) / 1e18) s"
    }
}
