import Foundation
import XCTest
import ChatVaultTesting
@testable import VaultKeys

/// No bus and no provider, for real: the store pointed at a socket nobody listens on, and at a
/// private dbus-daemon of the test's own with no Secret Service (the default session configuration
/// would activate gnome-keyring through /usr/share/dbus-1/services/org.freedesktop.secrets.service,
/// so these daemons use a configuration of their own).
final class SecretServiceBusTests: XCTestCase {
    private let id = KeyItemID(applicationId: "org.chatvault.test.bus", account: "0123abcd", cacheId: "cache-1")
    private var directory = ""
    private var daemon: Process?

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "chatvault-bus-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }

    override func tearDownWithError() throws {
        if let daemon, daemon.isRunning {
            daemon.terminate()
            daemon.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testAnUnreachableBusIsNoBusEverywhere() throws {
        let store = SecretServiceKeyStore(busAddress: "unix:path=\(directory)/no-such-socket")
        let (lookup, seconds) = elapsed { store.lookup(id) }
        XCTAssertEqual(lookup.unavailableReason, .noBus, "\(lookup)")
        XCTAssertLessThan(seconds, store.timeout.seconds, "answered before the deadline")
        XCTAssertEqual(store.availability(), .unavailable(.noBus))
        XCTAssertEqual(store.items(applicationId: id.applicationId, account: id.account).unavailableReason, .noBus)
        XCTAssertThrowsError(try store.store(try CacheKey.generate(), keyId: "k", for: id, label: "l")) { error in
            XCTAssertEqual((error as? KeyStoreError)?.reason, .noBus)
        }
        XCTAssertThrowsError(try store.delete(id)) { error in
            XCTAssertEqual((error as? KeyStoreError)?.reason, .noBus)
        }
        XCTAssertTrue(KeyUnavailableReason.noBus.meansStoreMissing)
    }

    func testAMalformedBusAddressIsNoBus() {
        XCTAssertEqual(SecretServiceKeyStore(busAddress: "not an address").lookup(id).unavailableReason, .noBus)
    }

    func testNoSessionBusInTheEnvironmentIsNoBus() throws {
        // What an app started outside a desktop session sees: no DBUS_SESSION_BUS_ADDRESS, no
        // $XDG_RUNTIME_DIR/bus, no display to autolaunch one ("Cannot autolaunch D-Bus without X11
        // $DISPLAY"). GLib reads these on every connection attempt, so setting them here is enough.
        let environment = ProcessInfo.processInfo.environment
        let saved = ["DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "DISPLAY"].map { ($0, environment[$0]) }
        defer {
            for (name, value) in saved {
                if let value { setenv(name, value, 1) } else { unsetenv(name) }
            }
        }
        unsetenv("DBUS_SESSION_BUS_ADDRESS")
        unsetenv("DISPLAY")
        setenv("XDG_RUNTIME_DIR", directory, 1)

        let store = SecretServiceKeyStore()
        let (lookup, seconds) = elapsed { store.lookup(id) }
        XCTAssertEqual(lookup.unavailableReason, .noBus, "\(lookup)")
        XCTAssertLessThan(seconds, store.timeout.seconds, "answered before the deadline")
    }

    func testABusWithoutASecretServiceIsNoProvider() throws {
        let address = try startBus(serviceDirectory: nil)
        let store = SecretServiceKeyStore(busAddress: address)
        let (lookup, seconds) = elapsed { store.lookup(id) }
        XCTAssertEqual(lookup.unavailableReason, .noProvider, "\(lookup)")
        XCTAssertLessThan(seconds, store.timeout.seconds, "answered before the deadline")
        XCTAssertEqual(store.availability(), .unavailable(.noProvider))
        XCTAssertThrowsError(try store.store(try CacheKey.generate(), keyId: "k", for: id, label: "l")) { error in
            XCTAssertEqual((error as? KeyStoreError)?.reason, .noProvider)
            XCTAssertTrue("\(error)".contains("ServiceUnknown"), "\(error)")
        }
        XCTAssertTrue(KeyUnavailableReason.noProvider.meansStoreMissing)
    }

    func testAProviderThatFailsToStartIsNoProvider() throws {
        // The bus knows an org.freedesktop.secrets service, but its program exits at once.
        let services = directory + "/services"
        try FileManager.default.createDirectory(atPath: services, withIntermediateDirectories: true)
        try "[D-BUS Service]\nName=org.freedesktop.secrets\nExec=/bin/false\n"
            .write(toFile: services + "/org.freedesktop.secrets.service", atomically: true, encoding: .utf8)
        let address = try startBus(serviceDirectory: services)
        let lookup = SecretServiceKeyStore(busAddress: address).lookup(id)
        XCTAssertEqual(lookup.unavailableReason, .noProvider, "\(lookup)")
    }

    func testTheSessionKeyringIsReachedThroughAnExplicitAddressToo() throws {
        try TestKeyring.require()
        let address = try XCTUnwrap(ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"])
        let store = SecretServiceKeyStore(busAddress: address)
        let item = KeyItemID(applicationId: uniqueApplicationId(), account: uniqueAccount(), cacheId: "c1")
        defer { _ = try? store.deleteAll(applicationId: item.applicationId) }
        let key = try CacheKey.generate()
        try store.store(key, keyId: "k", for: item, label: "ChatVault tests")
        XCTAssertTrue(try XCTUnwrap(SecretServiceKeyStore().lookup(item).foundKey).key.isEqual(to: key))
    }

    /// Starts a dbus-daemon of our own on a socket in the test directory; returns its address.
    private func startBus(serviceDirectory: String?) throws -> String {
        let socket = directory + "/bus"
        let config = PrivateBus.configuration(listen: "unix:path=\(socket)", serviceDirectory: serviceDirectory)
        let configPath = directory + "/bus.conf"
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["dbus-daemon", "--config-file=\(configPath)", "--nofork", "--nosyslog"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        daemon = process
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: socket) {
            guard Date() < deadline, process.isRunning else {
                XCTFail("dbus-daemon did not start")
                throw CocoaError(.fileNoSuchFile)
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return "unix:path=\(socket)"
    }
}
