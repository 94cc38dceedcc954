import Foundation
import Synchronization
import XCTest
@testable import VaultKeys

/// The store's decisions, driven through its seam with an in-memory Secret Service: the mapping of
/// every failure to a reason, the deadline, the reconnect, and "absent only when unlocked".
final class SecretServiceSeamTests: XCTestCase {
    private let id = KeyItemID(applicationId: "org.example.chat", account: "0123abcd", cacheId: "cache-1")

    private func store(_ fake: FakeSecretService, unlockPrompt: Bool = false,
                       timeout: Duration = .seconds(5)) -> SecretServiceKeyStore {
        SecretServiceKeyStore(unlockPrompt: unlockPrompt, timeout: timeout, makeCalls: fake.makeCalls)
    }

    private func hex(of key: CacheKey) -> [UInt8] {
        key.withHexDigits { Array($0) }
    }

    private func storedItem(_ fake: FakeSecretService, key: CacheKey, keyId: String = "key-1") {
        var attributes = SecretServiceKeyStore.query(id)
        attributes["key-id"] = keyId
        fake.addItem(attributes, secret: hex(of: key))
    }

    // MARK: Lookup decisions

    func testFoundItemReturnsTheKeyParsedFromItsHexDigits() throws {
        let fake = FakeSecretService()
        let key = try CacheKey.generate()
        storedItem(fake, key: key)
        let found = try XCTUnwrap(store(fake).lookup(id).foundKey)
        XCTAssertTrue(found.key.isEqual(to: key))
        XCTAssertEqual(found.keyId, "key-1")
    }

    func testNothingFoundInUnlockedCollectionsIsAbsent() {
        let fake = FakeSecretService()
        XCTAssertTrue(store(fake).lookup(id).isAbsent)
    }

    func testLockedItemIsLockedNeverAbsent() throws {
        let fake = FakeSecretService()
        storedItem(fake, key: try CacheKey.generate())
        fake.setLocked(true)
        XCTAssertEqual(store(fake).lookup(id).unavailableReason, .locked)
    }

    func testNothingFoundWhileTheDefaultCollectionIsLockedIsLocked() {
        // A provider that hides locked items from searches: only the collection's state tells.
        let fake = FakeSecretService()
        fake.state.withLock { $0.searchShowsLockedItems = false }
        fake.setLocked(true)
        XCTAssertEqual(store(fake).lookup(id).unavailableReason, .locked)
    }

    func testNothingFoundWhileAnotherCollectionIsLockedIsLocked() {
        let fake = FakeSecretService()
        fake.state.withLock { s in
            s.searchShowsLockedItems = false
            s.collections["/org/freedesktop/secrets/collection/work"] = true
        }
        XCTAssertEqual(store(fake).lookup(id).unavailableReason, .locked)
    }

    func testNoDefaultCollectionAndNoCollectionsIsUnavailableNeverAbsent() {
        // A KeePassXC database that is closed (not locked), or a fresh keyring whose login
        // collection does not exist yet: the place the key would live is not there to be asked.
        let fake = FakeSecretService()
        fake.state.withLock { s in
            s.aliases = [:]
            s.collections = [:]
        }
        let subject = store(fake)
        XCTAssertEqual(subject.lookup(id).unavailableReason, .other)
        XCTAssertEqual(subject.items(applicationId: id.applicationId, account: id.account).unavailableReason, .other)
        XCTAssertEqual(subject.availability(), .unavailable(.other))
    }

    func testNoDefaultCollectionWithOtherCollectionsUnlockedIsUnavailableNeverAbsent() {
        // The database behind `default` is closed while another one is open: the key may live in
        // the closed one, which no search can see.
        let fake = FakeSecretService()
        fake.state.withLock { s in
            s.aliases = [:]
            s.collections = ["/org/freedesktop/secrets/collection/session": false]
        }
        let subject = store(fake)
        XCTAssertEqual(subject.lookup(id).unavailableReason, .other)
        XCTAssertEqual(subject.items(applicationId: id.applicationId, account: id.account).unavailableReason, .other)
    }

    func testADefaultAliasToAMissingCollectionIsUnavailableNeverAbsent() {
        let fake = FakeSecretService()
        fake.state.withLock { s in
            s.aliases = ["default": "/org/freedesktop/secrets/collection/gone"]
        }
        XCTAssertEqual(store(fake).lookup(id).unavailableReason, .other)
        XCTAssertEqual(store(fake).items(applicationId: id.applicationId, account: id.account).unavailableReason, .other)
    }

    func testAKeyFoundWithoutADefaultCollectionIsStillFound() throws {
        // Only "nothing there" needs the default collection; a key that answers is the key.
        let fake = FakeSecretService()
        let key = try CacheKey.generate()
        storedItem(fake, key: key)
        fake.state.withLock { $0.aliases = [:] }
        XCTAssertTrue(try XCTUnwrap(store(fake).lookup(id).foundKey).key.isEqual(to: key))
    }

    func testMalformedSecretIsOtherNeverAbsent() {
        var attributes = SecretServiceKeyStore.query(id)
        attributes["key-id"] = "k"
        for secret in [Array("not a key".utf8), [UInt8](repeating: UInt8(ascii: "z"), count: 64),
                       [UInt8](repeating: UInt8(ascii: "a"), count: 63) + [0], []] {
            let fake = FakeSecretService()
            fake.addItem(attributes, secret: secret)
            XCTAssertEqual(store(fake).lookup(id).unavailableReason, .other, "\(secret.count) bytes")
        }
    }

    func testTheNewestOfTwoItemsWins() throws {
        // What an interrupted replace leaves behind: the newer item holds the current key.
        let fake = FakeSecretService()
        let old = try CacheKey.generate()
        let new = try CacheKey.generate()
        storedItem(fake, key: old, keyId: "old")
        storedItem(fake, key: new, keyId: "new")
        let found = try XCTUnwrap(store(fake).lookup(id).foundKey)
        XCTAssertEqual(found.keyId, "new")
        XCTAssertTrue(found.key.isEqual(to: new))
    }

    func testLookupNeverPromptsByDefault() throws {
        let fake = FakeSecretService()
        storedItem(fake, key: try CacheKey.generate())
        fake.setLocked(true)
        _ = store(fake).lookup(id)
        XCTAssertFalse(fake.calls.contains(.unlock))
    }

    // MARK: Prompting

    func testADismissedPromptIsDenied() throws {
        let fake = FakeSecretService()
        storedItem(fake, key: try CacheKey.generate())
        fake.setLocked(true)
        XCTAssertEqual(store(fake, unlockPrompt: true).lookup(id).unavailableReason, .denied)
        XCTAssertTrue(fake.calls.contains(.unlock))
    }

    func testAnAnsweredPromptUnlocksAndFindsTheKey() throws {
        let fake = FakeSecretService()
        let key = try CacheKey.generate()
        storedItem(fake, key: key)
        fake.setLocked(true)
        fake.state.withLock { $0.unlockSucceeds = true }
        XCTAssertTrue(try XCTUnwrap(store(fake, unlockPrompt: true).lookup(id).foundKey).key.isEqual(to: key))
    }

    func testAPromptNobodyAnswersTimesOutAsPromptTimedOutWithinTheDeadline() throws {
        let fake = FakeSecretService()
        storedItem(fake, key: try CacheKey.generate())
        fake.setLocked(true)
        fake.hang(.unlock)
        defer { fake.releaseHangs() }
        let timeout = Duration.milliseconds(400)
        let (lookup, seconds) = elapsed { store(fake, unlockPrompt: true, timeout: timeout).lookup(id) }
        XCTAssertEqual(lookup.unavailableReason, .promptTimedOut)
        XCTAssertGreaterThanOrEqual(seconds, 0.35, "it waited for the prompt")
        // The unlock call never returns: only the deadline can end the wait.
        XCTAssertLessThan(seconds, timeout.seconds + deadlineSlack)
    }

    // MARK: Deadline

    func testACallThatNeverReturnsTimesOutAsOtherWithinTheDeadline() {
        let fake = FakeSecretService()
        fake.hang(.searchItems)
        defer { fake.releaseHangs() }
        let timeout = Duration.milliseconds(300)
        let subject = store(fake, timeout: timeout)
        // The search never returns: only the deadline can end the wait.
        let (lookup, seconds) = elapsed { subject.lookup(id) }
        XCTAssertEqual(lookup.unavailableReason, .other)
        XCTAssertLessThan(seconds, timeout.seconds + deadlineSlack)

        let (storeError, storeSeconds) = elapsed {
            Result { try subject.store(try CacheKey.generate(), keyId: "k", for: id, label: "l") }
        }
        guard case .failure(let error) = storeError else { return XCTFail("store succeeded through a hung call") }
        XCTAssertEqual((error as? KeyStoreError)?.reason, .other)
        XCTAssertTrue("\(error)".contains("did not answer"), "\(error)")
        XCTAssertLessThan(storeSeconds, timeout.seconds + deadlineSlack)
    }

    func testAfterATimeoutTheNextCallRunsOnAFreshWorker() throws {
        let fake = FakeSecretService()
        let key = try CacheKey.generate()
        storedItem(fake, key: key)
        fake.hang(.searchItems)
        defer { fake.releaseHangs() }
        let timeout = Duration.milliseconds(300)
        let subject = store(fake, timeout: timeout)
        XCTAssertEqual(subject.lookup(id).unavailableReason, .other)
        // The first worker is still stuck in its call (until the deferred release); the store must
        // not queue behind it. Queued, this lookup would time out too: the found key proves it
        // was not, and the bound only catches a hang.
        fake.stopHanging()
        let (lookup, seconds) = elapsed { subject.lookup(id) }
        XCTAssertTrue(try XCTUnwrap(lookup.foundKey).key.isEqual(to: key))
        XCTAssertLessThan(seconds, timeout.seconds + deadlineSlack)
        XCTAssertEqual(fake.state.withLock { $0.instances }, 2)
    }

    func testConcurrentCallersAreServedAndEachGetsAnAnswer() throws {
        let fake = FakeSecretService()
        let key = try CacheKey.generate()
        storedItem(fake, key: key)
        let subject = store(fake)
        let found = Mutex(0)
        let item = id
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            if subject.lookup(item).foundKey != nil { found.withLock { $0 += 1 } }
        }
        XCTAssertEqual(found.withLock { $0 }, 8)
    }

    // MARK: Failures and their reasons

    func testAnyFailureToReachTheBusIsNoBus() {
        let fake = FakeSecretService()
        fake.fail(.connectBus, with: SecretCallError(.io(0), "Cannot autolaunch D-Bus without X11 $DISPLAY"), times: 2)
        XCTAssertEqual(store(fake).lookup(id).unavailableReason, .noBus)

        let refused = FakeSecretService()
        refused.fail(.connectBus, with: SecretCallError(.io(ioErrorNotFound), "Could not connect: No such file or directory"), times: 10)
        XCTAssertEqual(store(refused).availability(), .unavailable(.noBus))
        XCTAssertThrowsError(try store(refused).store(try CacheKey.generate(), keyId: "k", for: id, label: "l")) { error in
            XCTAssertEqual((error as? KeyStoreError)?.reason, .noBus)
        }
    }

    func testNoProviderOnTheBusIsNoProvider() {
        for name in [SecretCallError.Name.serviceUnknown, SecretCallError.Name.nameHasNoOwner,
                     "org.freedesktop.DBus.Error.Spawn.ChildExited"] {
            let fake = FakeSecretService()
            fake.fail(.openService, with: SecretCallError(.dbus(name), "no provider"), times: 2)
            XCTAssertEqual(store(fake).lookup(id).unavailableReason, .noProvider, name)
        }
    }

    func testErrorsDuringCallsMapToTheirReasons() {
        let cases: [(SecretCallError.Kind, KeyUnavailableReason)] = [
            (.dbus(SecretCallError.Name.isLocked), .locked),
            (.dbus(SecretCallError.Name.accessDenied), .denied),
            (.dbus(SecretCallError.Name.serviceUnknown), .noProvider),
            (.dbus(SecretCallError.Name.disconnected), .noBus),
            (.io(ioErrorClosed), .noBus),
            (.dbus("org.freedesktop.DBus.Error.NoReply"), .other),
            (.dbus("org.freedesktop.DBus.Error.Failed"), .other),
            (.other("g-spawn-error-quark:3"), .other),
        ]
        for (kind, reason) in cases {
            let fake = FakeSecretService()
            fake.fail(.searchItems, with: SecretCallError(kind, "injected"), times: 2)
            XCTAssertEqual(store(fake).lookup(id).unavailableReason, reason, "\(kind)")
        }
    }

    func testTheMappingIsTheStoresNotTheFakes() {
        typealias S = SecretServiceKeyStore
        let anything = SecretCallError(.dbus(SecretCallError.Name.serviceUnknown), "x")
        XCTAssertEqual(S.reason(for: anything, stage: .bus, promptInvolved: false), .noBus)
        XCTAssertEqual(S.reason(for: anything, stage: .service, promptInvolved: false), .noProvider)
        let cancelled = SecretCallError(.cancelled, "x")
        XCTAssertEqual(S.reason(for: cancelled, stage: .call, promptInvolved: true), .promptTimedOut)
        XCTAssertEqual(S.reason(for: cancelled, stage: .call, promptInvolved: false), .other)
    }

    func testADBusErrorReconnectsOnceAndTheRetrySucceeds() throws {
        // A replaced keyring daemon: the old transfer session is gone.
        let fake = FakeSecretService()
        let key = try CacheKey.generate()
        storedItem(fake, key: key)
        fake.fail(.withSecret, with: SecretCallError(.dbus("org.freedesktop.Secret.Error.NoSession"), "No such session"))
        XCTAssertTrue(try XCTUnwrap(store(fake).lookup(id).foundKey).key.isEqual(to: key))
        XCTAssertEqual(fake.calls.filter { $0 == .connectBus }.count, 2)
        XCTAssertEqual(fake.calls.filter { $0 == .openService }.count, 2)
    }

    func testAPersistentErrorIsReportedAfterOneRetry() {
        let fake = FakeSecretService()
        fake.fail(.searchItems, with: SecretCallError(.dbus("org.freedesktop.DBus.Error.Failed"), "x"), times: 5)
        XCTAssertEqual(store(fake).lookup(id).unavailableReason, .other)
        XCTAssertEqual(fake.calls.filter { $0 == .searchItems }.count, 2)
    }

    // MARK: Store, delete, list

    func testStoreWritesTheDocumentedItem() throws {
        let fake = FakeSecretService()
        let key = try CacheKey.generate()
        try store(fake).store(key, keyId: "key-7", for: id, label: "Example Chat offline cache key (alice)")
        let items = fake.state.withLock { Array($0.items.values) }
        XCTAssertEqual(items.count, 1)
        let item = try XCTUnwrap(items.first)
        XCTAssertEqual(item.collection, FakeSecretService.login)
        XCTAssertEqual(item.attributes, [
            "xdg:schema": "org.chatvault.CacheKey", "application": "org.example.chat",
            "account": "0123abcd", "cache-id": "cache-1", "key-id": "key-7",
        ])
        XCTAssertEqual(item.label, "Example Chat offline cache key (alice)")
        XCTAssertEqual(item.contentType, "text/plain")
        XCTAssertEqual(item.secret, hex(of: key))
        XCTAssertTrue(item.secret.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) })
    }

    func testStoreReplacesOnlyAfterTheNewItemIsWritten() throws {
        let fake = FakeSecretService()
        let subject = store(fake)
        try subject.store(try CacheKey.generate(), keyId: "one", for: id, label: "l")
        fake.fail(.createItem, with: SecretCallError(.dbus("org.freedesktop.DBus.Error.Failed"), "disk full"), times: 2)
        XCTAssertThrowsError(try subject.store(try CacheKey.generate(), keyId: "two", for: id, label: "l"))
        XCTAssertEqual(subject.lookup(id).foundKey?.keyId, "one", "a failed replace keeps the old key")
        try subject.store(try CacheKey.generate(), keyId: "three", for: id, label: "l")
        XCTAssertEqual(fake.state.withLock { $0.items.count }, 1)
        XCTAssertEqual(subject.lookup(id).foundKey?.keyId, "three")
    }

    func testStoreWithoutADefaultCollectionIsOtherWithAClearDetail() {
        let fake = FakeSecretService()
        fake.state.withLock { $0.aliases = [:] }
        XCTAssertThrowsError(try store(fake).store(try CacheKey.generate(), keyId: "k", for: id, label: "l")) { error in
            let storeError = error as? KeyStoreError
            XCTAssertEqual(storeError?.reason, .other)
            XCTAssertTrue(storeError?.detail.contains("no default collection") == true, "\(error)")
        }
        XCTAssertEqual(store(fake).availability(), .unavailable(.other))
    }

    func testStoreIntoALockedCollectionIsLockedAndWritesNothing() {
        let fake = FakeSecretService()
        fake.setLocked(true)
        XCTAssertThrowsError(try store(fake).store(try CacheKey.generate(), keyId: "k", for: id, label: "l")) { error in
            XCTAssertEqual((error as? KeyStoreError)?.reason, .locked)
        }
        XCTAssertFalse(fake.calls.contains(.createItem))
    }

    func testDeleteOfALockedItemIsLockedAndOfAMissingOneSucceeds() throws {
        let fake = FakeSecretService()
        try store(fake).delete(id)
        storedItem(fake, key: try CacheKey.generate())
        fake.setLocked(true)
        XCTAssertThrowsError(try store(fake).delete(id)) { error in
            XCTAssertEqual((error as? KeyStoreError)?.reason, .locked)
        }
        XCTAssertEqual(fake.state.withLock { $0.items.count }, 1)
    }

    func testListingWhoseLockedAttributesAreHiddenIsLocked() throws {
        let fake = FakeSecretService()
        storedItem(fake, key: try CacheKey.generate())
        fake.setLocked(true)
        fake.state.withLock { $0.showsLockedAttributes = false }
        XCTAssertEqual(store(fake).items(applicationId: id.applicationId, account: id.account).unavailableReason, .locked)
    }

    func testAnEmptyListingOfUnlockedCollectionsIsEmpty() {
        let fake = FakeSecretService()
        XCTAssertEqual(store(fake).items(applicationId: id.applicationId, account: id.account).summaries, [])
    }

    func testAListingWithoutADefaultCollectionIsUnavailableEvenWhenItFoundItems() throws {
        // The database behind `default` is closed: whatever the open ones hold may be only part of
        // the account's keys, and a partial listing can make a manifest repair pick the wrong key.
        let fake = FakeSecretService()
        let session = "/org/freedesktop/secrets/collection/session"
        var attributes = SecretServiceKeyStore.query(id)
        attributes["key-id"] = "k"
        fake.state.withLock { s in
            s.aliases = [:]
            s.collections = [session: false]
        }
        fake.addItem(attributes, secret: hex(of: try CacheKey.generate()), in: session)
        XCTAssertEqual(store(fake).items(applicationId: id.applicationId, account: id.account).unavailableReason, .other)
    }

    func testAListingThatMayMissItemsHiddenInALockedCollectionIsLocked() throws {
        // A provider that leaves locked items out of searches, and a second, locked collection:
        // the unlocked match may not be the account's only key.
        let fake = FakeSecretService()
        let work = "/org/freedesktop/secrets/collection/work"
        storedItem(fake, key: try CacheKey.generate())
        fake.state.withLock { s in
            s.searchShowsLockedItems = false
            s.collections[work] = true
        }
        var hidden = SecretServiceKeyStore.query(KeyItemID(applicationId: id.applicationId, account: id.account, cacheId: "cache-2"))
        hidden["key-id"] = "k2"
        fake.addItem(hidden, secret: hex(of: try CacheKey.generate()), in: work)
        XCTAssertEqual(store(fake).items(applicationId: id.applicationId, account: id.account).unavailableReason, .locked)
    }

    func testAListingThatShowsLockedItemsIsComplete() throws {
        // gnome-keyring returns locked matches (with their attributes): nothing is hidden.
        let fake = FakeSecretService()
        storedItem(fake, key: try CacheKey.generate(), keyId: "key-1")
        fake.setLocked(true)
        XCTAssertEqual(store(fake).items(applicationId: id.applicationId, account: id.account).summaries,
                       [KeyItemSummary(id: id, keyId: "key-1")])
    }

    func testInvalidNamesAreRefusedBeforeAnyCall() {
        let fake = FakeSecretService()
        let bad = KeyItemID(applicationId: "org.example.chat", account: "../x", cacheId: "c")
        XCTAssertEqual(store(fake).lookup(bad).unavailableReason, .other)
        let nul = KeyItemID(applicationId: "org.example\u{0}chat", account: "a", cacheId: "c")
        XCTAssertEqual(store(fake).lookup(nul).unavailableReason, .other)
        XCTAssertThrowsError(try store(fake).store(try CacheKey.generate(), keyId: "k\u{0}", for: id, label: "l"))
        XCTAssertTrue(fake.calls.isEmpty)
    }
}
