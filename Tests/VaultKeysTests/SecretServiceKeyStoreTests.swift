import Foundation
import XCTest
import ChatVaultTesting
@testable import VaultKeys

/// The Secret Service store against the real gnome-keyring that `Scripts/test` starts.
final class SecretServiceKeyStoreTests: XCTestCase {
    private var applicationId = ""
    private var account = ""
    private let store = SecretServiceKeyStore()

    override func setUpWithError() throws {
        try TestKeyring.require()
        applicationId = uniqueApplicationId()
        account = uniqueAccount()
    }

    override func tearDownWithError() throws {
        guard TestKeyring.environment != nil else { return }
        // A failed locking test must not leave the keyring locked for the next one.
        if try store.isDefaultCollectionLocked() == true {
            try TestKeyring.unlockDefaultCollection()
        }
        try store.deleteAll(applicationId: applicationId)
    }

    private func itemID(_ cacheId: String = UUID().uuidString.lowercased()) -> KeyItemID {
        KeyItemID(applicationId: applicationId, account: account, cacheId: cacheId)
    }

    private func label() -> String { "ChatVault tests offline cache key (\(account))" }

    func testStoreThenLookupReturnsTheSameKeyAndKeyId() throws {
        let key = try CacheKey.generate()
        let id = itemID()
        try store.store(key, keyId: "key-1", for: id, label: label())

        let (lookup, seconds) = elapsed { store.lookup(id) }
        let found = try XCTUnwrap(lookup.foundKey, "expected .found, got \(lookup)")
        XCTAssertTrue(found.key.isEqual(to: key))
        XCTAssertEqual(found.keyId, "key-1")
        XCTAssertLessThan(seconds, store.timeout.seconds, "answered before the deadline")
    }

    func testAFreshStoreFindsTheKeyToo() throws {
        let key = try CacheKey.generate()
        let id = itemID()
        try store.store(key, keyId: "k", for: id, label: label())
        let other = SecretServiceKeyStore()
        XCTAssertTrue(try XCTUnwrap(other.lookup(id).foundKey).key.isEqual(to: key))
    }

    func testMissingItemInAnUnlockedKeyringIsAbsent() throws {
        XCTAssertEqual(try store.isDefaultCollectionLocked(), false)
        let lookup = store.lookup(itemID())
        XCTAssertTrue(lookup.isAbsent, "expected .absent, got \(lookup)")
    }

    func testLockedKeyringIsLockedNeverAbsent() throws {
        let stored = itemID()
        try store.store(try CacheKey.generate(), keyId: "k", for: stored, label: label())
        let missing = itemID()

        try TestKeyring.withLockedDefaultCollection {
            // Promptly, not by waiting: a lookup that hung until its deadline would answer .other.
            let (present, presentSeconds) = elapsed { store.lookup(stored) }
            XCTAssertEqual(present.unavailableReason, .locked, "a stored key in a locked keyring: got \(present)")
            let (absent, absentSeconds) = elapsed { store.lookup(missing) }
            XCTAssertEqual(absent.unavailableReason, .locked, "a missing key in a locked keyring: got \(absent)")
            XCTAssertLessThan(presentSeconds, store.timeout.seconds, "answered before the deadline")
            XCTAssertLessThan(absentSeconds, store.timeout.seconds, "answered before the deadline")
            XCTAssertEqual(store.availability(), .unavailable(.locked))
        }

        XCTAssertNotNil(store.lookup(stored).foundKey, "after unlocking, the same store finds the key again")
        XCTAssertTrue(store.lookup(missing).isAbsent)
    }

    func testStoringIntoALockedKeyringFailsWithLockedPromptly() throws {
        let key = try CacheKey.generate()
        let id = itemID()
        try TestKeyring.withLockedDefaultCollection {
            // A store that hung until its deadline would fail with .other, not .locked.
            let start = Date()
            XCTAssertThrowsError(try store.store(key, keyId: "k", for: id, label: label())) { error in
                XCTAssertEqual((error as? KeyStoreError)?.reason, .locked, "\(error)")
            }
            XCTAssertLessThan(Date().timeIntervalSince(start), store.timeout.seconds, "answered before the deadline")
        }
        XCTAssertTrue(store.lookup(id).isAbsent, "nothing was stored")
    }

    func testUnlockPromptWithoutAPrompterIsDeniedQuicklyAndNeverHangs() throws {
        let id = itemID()
        try store.store(try CacheKey.generate(), keyId: "k", for: id, label: label())
        let prompting = SecretServiceKeyStore(unlockPrompt: true, timeout: .seconds(20))
        try TestKeyring.withLockedDefaultCollection {
            let (lookup, seconds) = elapsed { prompting.lookup(id) }
            // gcr-prompter cannot open a display: gnome-keyring dismisses the prompt.
            XCTAssertEqual(lookup.unavailableReason, .denied, "got \(lookup)")
            XCTAssertLessThan(seconds, 10)
            let (storeError, storeSeconds) = elapsed {
                Result { try prompting.store(try CacheKey.generate(), keyId: "k2", for: id, label: label()) }
            }
            guard case .failure(let error) = storeError else { return XCTFail("storing into a locked keyring succeeded") }
            XCTAssertEqual((error as? KeyStoreError)?.reason, .denied, "\(error)")
            XCTAssertLessThan(storeSeconds, 10)
        }
    }

    func testStoreReplacesThePreviousKeyOfTheSameCache() throws {
        let id = itemID()
        let first = try CacheKey.generate()
        let second = try CacheKey.generate()
        try store.store(first, keyId: "key-1", for: id, label: label())
        try store.store(second, keyId: "key-2", for: id, label: label())

        let found = try XCTUnwrap(store.lookup(id).foundKey)
        XCTAssertTrue(found.key.isEqual(to: second))
        XCTAssertEqual(found.keyId, "key-2")
        XCTAssertEqual(store.items(applicationId: applicationId, account: account).summaries?.count, 1)
    }

    func testDeleteRemovesTheKeyAndDeletingAMissingKeySucceeds() throws {
        let id = itemID()
        try store.store(try CacheKey.generate(), keyId: "k", for: id, label: label())
        try store.delete(id)
        XCTAssertTrue(store.lookup(id).isAbsent)
        try store.delete(id)
    }

    func testDeletingInALockedKeyringFailsWithLocked() throws {
        let id = itemID()
        try store.store(try CacheKey.generate(), keyId: "k", for: id, label: label())
        try TestKeyring.withLockedDefaultCollection {
            XCTAssertThrowsError(try store.delete(id)) { error in
                XCTAssertEqual((error as? KeyStoreError)?.reason, .locked)
            }
        }
        XCTAssertNotNil(store.lookup(id).foundKey, "the key survived")
    }

    func testItemsListsEveryCacheOfTheAccountAndNoOther() throws {
        let a = itemID("cache-a")
        let b = itemID("cache-b")
        let elsewhere = KeyItemID(applicationId: applicationId, account: uniqueAccount(), cacheId: "cache-c")
        try store.store(try CacheKey.generate(), keyId: "ka", for: a, label: label())
        try store.store(try CacheKey.generate(), keyId: "kb", for: b, label: label())
        try store.store(try CacheKey.generate(), keyId: "kc", for: elsewhere, label: label())

        let listed = try XCTUnwrap(store.items(applicationId: applicationId, account: account).summaries)
        XCTAssertEqual(listed, [KeyItemSummary(id: a, keyId: "ka"), KeyItemSummary(id: b, keyId: "kb")])
        XCTAssertEqual(store.items(applicationId: applicationId, account: uniqueAccount()).summaries, [])
    }

    func testItemsOfALockedKeyringStillListLockedItems() throws {
        let a = itemID("cache-a")
        try store.store(try CacheKey.generate(), keyId: "ka", for: a, label: label())
        try TestKeyring.withLockedDefaultCollection {
            // gnome-keyring shows a locked item's attributes: the listing is still known.
            XCTAssertEqual(store.items(applicationId: applicationId, account: account).summaries,
                           [KeyItemSummary(id: a, keyId: "ka")])
            // An account with no items in a locked keyring: unknowable, so locked.
            XCTAssertEqual(store.items(applicationId: applicationId, account: uniqueAccount()).unavailableReason, .locked)
        }
    }

    func testDeleteAllRemovesEveryItemOfTheApplication() throws {
        try store.store(try CacheKey.generate(), keyId: "k", for: itemID(), label: label())
        try store.store(try CacheKey.generate(), keyId: "k", for: itemID(), label: label())
        XCTAssertEqual(try store.deleteAll(applicationId: applicationId), 2)
        XCTAssertEqual(store.items(applicationId: applicationId, account: account).summaries, [])
    }

    func testAvailabilityIsAvailableWhenTheDefaultCollectionIsUnlocked() {
        XCTAssertEqual(store.availability(), .available)
    }

    func testTheStoreReconnectsAfterTheKeyringDaemonWasReplaced() throws {
        let id = itemID()
        let key = try CacheKey.generate()
        try store.store(key, keyId: "k", for: id, label: label())
        // Replacing the daemon kills the transfer session the store holds.
        try TestKeyring.unlockDefaultCollection()
        XCTAssertTrue(try XCTUnwrap(store.lookup(id).foundKey).key.isEqual(to: key))
    }

    func testLocatorFindsTheItemWithSecretTool() throws {
        let id = itemID()
        let key = try CacheKey.generate()
        try store.store(key, keyId: "key-9", for: id, label: label())
        let locator = store.locator(for: id)
        XCTAssertEqual(locator, [
            "xdg:schema": "org.chatvault.CacheKey", "application": applicationId,
            "account": account, "cache-id": id.cacheId,
        ])

        // secret-tool prints the secret too: keep it out of failure messages.
        let search = try runSecretTool(["search", "--all"] + locator.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] })
            .split(separator: "\n").filter { !$0.hasPrefix("secret = ") }.joined(separator: "\n")
        XCTAssertTrue(search.contains("attribute.key-id = key-9"), search)
        XCTAssertTrue(search.contains("attribute.cache-id = \(id.cacheId)"), search)
        XCTAssertTrue(search.contains("label = \(label())"), search)
        XCTAssertTrue(search.contains("schema = org.chatvault.CacheKey"), search)

        // The secret is the key as 64 lowercase hex digits.
        let secret = try runSecretTool(["lookup"] + locator.sorted { $0.key < $1.key }.flatMap { [$0.key, $0.value] },
                                       redact: true)
        var expected = [UInt8]()
        key.withHexDigits { expected = Array($0) }
        XCTAssertEqual(Array(secret.utf8), expected)
    }

    func testNeitherLookupsNorErrorsShowTheKey() throws {
        let id = itemID()
        let key = try CacheKey.generate()
        var hex = ""
        key.withHexDigits { hex = String(decoding: $0, as: UTF8.self) }
        try store.store(key, keyId: "k", for: id, label: label())
        let lookup = store.lookup(id)
        for text in [String(describing: lookup), String(reflecting: lookup), "\(key)", String(reflecting: key)] {
            XCTAssertFalse(text.contains(hex), text)
            XCTAssertFalse(text.contains(hex.prefix(16)), text)
        }
        try TestKeyring.withLockedDefaultCollection {
            do {
                try store.store(key, keyId: "k", for: id, label: label())
                XCTFail("stored into a locked keyring")
            } catch {
                XCTAssertFalse("\(error)".contains(hex.prefix(16)))
                XCTAssertFalse(String(reflecting: error).contains(hex.prefix(16)))
            }
            XCTAssertFalse("\(store.lookup(id))".contains(hex.prefix(16)))
        }
    }

    /// Runs secret-tool on the test bus. `redact` keeps its output out of failure messages.
    private func runSecretTool(_ arguments: [String], redact: Bool = false) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["secret-tool"] + arguments
        // secret-tool search writes the attributes to stderr and the rest to stdout.
        let output = Pipe()
        process.standardOutput = output
        process.standardError = redact ? FileHandle.nullDevice : output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "secret-tool \(redact ? "lookup" : arguments.joined(separator: " ")) failed")
        return String(decoding: data, as: UTF8.self)
    }
}
