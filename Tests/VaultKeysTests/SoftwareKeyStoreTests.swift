import Foundation
import XCTest
import VaultKeys

final class SoftwareKeyStoreTests: XCTestCase {
    private let id = KeyItemID(applicationId: "org.example.chat", account: "0123abcd", cacheId: "cache-1")
    private var root = ""
    private var directory: String { root + "/keys" }

    override func setUpWithError() throws {
        root = NSTemporaryDirectory() + "chatvault-software-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    private func mode(_ path: String) throws -> Int {
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0, path)
        return Int(st.st_mode) & 0o7777
    }

    func testAMissingDirectoryIsUnavailableNeverAbsent() throws {
        // "Never stored" and "not reachable" look the same from here: never a keyLost reset.
        let store = SoftwareKeyStore(directory: directory)
        XCTAssertEqual(store.lookup(id).unavailableReason, .other)
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).unavailableReason, .other)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory), "lookups and listings create nothing")
    }

    func testADirectoryOnAVolumeThatIsNotMountedIsUnavailableNeverAbsent() throws {
        // The key was stored; then the volume holding the directory went away (or XDG_CONFIG_HOME
        // points elsewhere in this run).
        let mounted = root + "/volume/keys"
        let store = SoftwareKeyStore(directory: mounted)
        try store.store(try CacheKey.generate(), keyId: "k", for: id, label: "l")
        try FileManager.default.removeItem(atPath: root + "/volume")
        XCTAssertEqual(store.lookup(id).unavailableReason, .other)
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).unavailableReason, .other)
    }

    func testAMissingFileInADirectoryThisStoreWroteToIsAbsent() throws {
        let store = SoftwareKeyStore(directory: directory)
        let other = KeyItemID(applicationId: id.applicationId, account: id.account, cacheId: "other-cache")
        try store.store(try CacheKey.generate(), keyId: "k", for: other, label: "ignored")
        try store.delete(other)
        XCTAssertEqual(try mode(directory), 0o700)
        XCTAssertTrue(store.lookup(id).isAbsent, "a directory that held keys and has no file for this one")
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).summaries, [])
    }

    func testAnEmptyDirectoryThisStoreNeverWroteToProvesNothing() throws {
        // An empty mount point, or a directory made while the real volume was not mounted.
        let store = SoftwareKeyStore(directory: directory)
        XCTAssertEqual(store.availability(), .available, "availability creates the directory for a new key")
        XCTAssertEqual(try mode(directory), 0o700)
        XCTAssertEqual(store.lookup(id).unavailableReason, .other, "never absent without the store's marker")
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).unavailableReason, .other)
    }

    func testStoreThenLookupRoundTripsWithPrivateModes() throws {
        let nested = root + "/a/b/keys"
        let store = SoftwareKeyStore(directory: nested)
        let key = try CacheKey.generate()
        try store.store(key, keyId: "key-1", for: id, label: "ignored")
        let found = try XCTUnwrap(store.lookup(id).foundKey)
        XCTAssertTrue(found.key.isEqual(to: key))
        XCTAssertEqual(found.keyId, "key-1")
        XCTAssertEqual(try mode(store.path(for: id)), 0o600)
        XCTAssertEqual(try mode(nested), 0o700)
        XCTAssertEqual(try mode(root + "/a"), 0o700)
        XCTAssertEqual(store.tier, .software)
        XCTAssertEqual(store.locator(for: id)["path"], store.path(for: id))
    }

    func testTheFileDoesNotHoldTheKeyAsHex() throws {
        let store = SoftwareKeyStore(directory: directory)
        let key = try CacheKey.generate()
        try store.store(key, keyId: "k", for: id, label: "l")
        let contents = try Data(contentsOf: URL(fileURLWithPath: store.path(for: id)))
        XCTAssertNil(contents.range(of: Data(key.withHexDigits { Array($0) })))
        XCTAssertFalse(store.path(for: id).contains("org.example.chat"), "the application id is hashed in file names")
    }

    func testStoreReplacesAndDeleteRemoves() throws {
        let store = SoftwareKeyStore(directory: directory)
        try store.store(try CacheKey.generate(), keyId: "one", for: id, label: "l")
        let second = try CacheKey.generate()
        try store.store(second, keyId: "two", for: id, label: "l")
        XCTAssertTrue(try XCTUnwrap(store.lookup(id).foundKey).key.isEqual(to: second))
        try store.delete(id)
        XCTAssertTrue(store.lookup(id).isAbsent)
        try store.delete(id)
    }

    func testItemsListsTheAccountsCaches() throws {
        let store = SoftwareKeyStore(directory: directory)
        let other = KeyItemID(applicationId: id.applicationId, account: id.account, cacheId: "cache-2")
        let elsewhere = KeyItemID(applicationId: id.applicationId, account: "ffff0000", cacheId: "cache-3")
        try store.store(try CacheKey.generate(), keyId: "a", for: id, label: "l")
        try store.store(try CacheKey.generate(), keyId: "b", for: other, label: "l")
        try store.store(try CacheKey.generate(), keyId: "c", for: elsewhere, label: "l")
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).summaries,
                       [KeyItemSummary(id: id, keyId: "a"), KeyItemSummary(id: other, keyId: "b")])
    }

    func testAKeyFileThatCannotBeReadIsStillListed() throws {
        // A manifest repair picks its key from the listing: leaving an unreadable key out would
        // make "no candidates" look like "no key" (a keyLost reset) instead of "cannot read it now".
        let store = SoftwareKeyStore(directory: directory)
        let refused = KeyItemID(applicationId: id.applicationId, account: id.account, cacheId: "cache-2")
        let damaged = KeyItemID(applicationId: id.applicationId, account: id.account, cacheId: "cache-3")
        try store.store(try CacheKey.generate(), keyId: "a", for: id, label: "l")
        try store.store(try CacheKey.generate(), keyId: "b", for: refused, label: "l")
        try store.store(try CacheKey.generate(), keyId: "c", for: damaged, label: "l")
        XCTAssertEqual(chmod(store.path(for: refused), 0o644), 0)
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: store.path(for: damaged)))
        try handle.truncate(atOffset: 20)
        try handle.close()
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).summaries, [
            KeyItemSummary(id: id, keyId: "a"), KeyItemSummary(id: refused, keyId: ""), KeyItemSummary(id: damaged, keyId: ""),
        ])
        XCTAssertEqual(store.lookup(refused).unavailableReason, .insecureStorage)
        XCTAssertEqual(store.lookup(damaged).unavailableReason, .other)
    }

    func testAFileNameThisStoreNeverWritesIsNotListed() throws {
        let store = SoftwareKeyStore(directory: directory)
        try store.store(try CacheKey.generate(), keyId: "a", for: id, label: "l")
        let stray = store.path(for: id).replacingOccurrences(of: ".cache-1.key", with: ".not.ours.key")
        XCTAssertTrue(FileManager.default.createFile(atPath: stray, contents: Data([1, 2, 3]), attributes: [.posixPermissions: 0o600]))
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).summaries,
                       [KeyItemSummary(id: id, keyId: "a")])
    }

    func testAKeyFileReadableByOthersIsRefused() throws {
        let store = SoftwareKeyStore(directory: directory)
        try store.store(try CacheKey.generate(), keyId: "k", for: id, label: "l")
        XCTAssertEqual(chmod(store.path(for: id), 0o644), 0)
        XCTAssertEqual(store.lookup(id).unavailableReason, .insecureStorage)
        XCTAssertEqual(try mode(store.path(for: id)), 0o644, "refused, never repaired")
    }

    func testADirectoryOpenToOthersIsRefused() throws {
        let store = SoftwareKeyStore(directory: directory)
        try store.store(try CacheKey.generate(), keyId: "k", for: id, label: "l")
        XCTAssertEqual(chmod(directory, 0o755), 0)
        XCTAssertEqual(store.lookup(id).unavailableReason, .insecureStorage)
        XCTAssertEqual(store.availability(), .unavailable(.insecureStorage))
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).unavailableReason, .insecureStorage)
        XCTAssertThrowsError(try store.store(try CacheKey.generate(), keyId: "k2", for: id, label: "l")) { error in
            XCTAssertEqual((error as? KeyStoreError)?.reason, .insecureStorage)
        }
    }

    func testASymlinkedKeyFileIsRefused() throws {
        let store = SoftwareKeyStore(directory: directory)
        try store.store(try CacheKey.generate(), keyId: "k", for: id, label: "l")
        let path = store.path(for: id)
        let moved = root + "/elsewhere.key"
        XCTAssertEqual(rename(path, moved), 0)
        XCTAssertEqual(symlink(moved, path), 0)
        XCTAssertEqual(store.lookup(id).unavailableReason, .insecureStorage)
    }

    func testASymlinkedDirectoryIsRefused() throws {
        let real = root + "/real"
        try SoftwareKeyStore(directory: real).store(try CacheKey.generate(), keyId: "k", for: id, label: "l")
        XCTAssertEqual(symlink(real, directory), 0)
        let store = SoftwareKeyStore(directory: directory)
        XCTAssertEqual(store.lookup(id).unavailableReason, .insecureStorage)
        XCTAssertEqual(store.availability(), .unavailable(.insecureStorage))
    }

    func testADamagedKeyFileIsOtherNeverAbsent() throws {
        let store = SoftwareKeyStore(directory: directory)
        try store.store(try CacheKey.generate(), keyId: "k", for: id, label: "l")
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: store.path(for: id)))
        try handle.truncate(atOffset: 20)
        try handle.close()
        XCTAssertEqual(store.lookup(id).unavailableReason, .other)
    }

    func testUnsafeNamesNeverReachThePath() {
        let store = SoftwareKeyStore(directory: directory)
        let hostile = KeyItemID(applicationId: id.applicationId, account: "0123abcd", cacheId: "../../etc/passwd")
        XCTAssertEqual(store.lookup(hostile).unavailableReason, .other)
        XCTAssertThrowsError(try store.store(try CacheKey.generate(), keyId: "k", for: hostile, label: "l"))
    }
}
