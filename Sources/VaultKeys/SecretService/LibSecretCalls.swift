import Foundation
internal import CLibSecret

/// `GIOErrorEnum` codes the store's mapping recognises (GLib's values, stable ABI).
let ioErrorClosed = Int32(G_IO_ERROR_CLOSED.rawValue)
let ioErrorBrokenPipe = Int32(G_IO_ERROR_BROKEN_PIPE.rawValue)
let ioErrorConnectionRefused = Int32(G_IO_ERROR_CONNECTION_REFUSED.rawValue)
let ioErrorNotConnected = Int32(G_IO_ERROR_NOT_CONNECTED.rawValue)
let ioErrorNotFound = Int32(G_IO_ERROR_NOT_FOUND.rawValue)

/// The real `SecretServiceCalls`: libsecret's D-Bus-path API on a private bus connection.
///
/// Each call is wrapped once here and does nothing but translate: Swift values to GLib ones, the
/// `GError` to a `SecretCallError`, and every GLib object freed before returning. Confined to the
/// worker thread that created it (see `SecretServiceWorker`).
///
/// Why a private connection: `g_bus_get()` hands out a process-wide connection with `exit-on-close`
/// set, so a session bus that goes away would `raise(SIGTERM)` in the app. Ours is closed and
/// reopened at will (the store reopens after any D-Bus error, e.g. when a test replaces the keyring
/// daemon and the old transfer session dies).
final class LibSecretCalls: SecretServiceCalls {
    /// The Secret Service's well-known bus name.
    static let busName = "org.freedesktop.secrets"
    private static let servicePath = "/org/freedesktop/secrets"
    private static let serviceInterface = "org.freedesktop.Secret.Service"
    private static let collectionInterface = "org.freedesktop.Secret.Collection"
    private static let itemInterface = "org.freedesktop.Secret.Item"
    /// GDBus's default method-call timeout (the context's cancellable usually fires first).
    private static let callTimeoutMsec: Int32 = -1

    private let busAddress: String?
    private var connection: OpaquePointer?
    private var service: UnsafeMutablePointer<SecretService>?

    /// - Parameter busAddress: a D-Bus address to use instead of the session bus.
    init(busAddress: String?) {
        self.busAddress = busAddress
    }

    deinit {
        disconnect()
    }

    // MARK: Connection

    func connectBus(_ context: SecretCallContext) throws(SecretCallError) {
        if let connection, g_dbus_connection_is_closed(connection) == 0 { return }
        disconnect()
        var error: UnsafeMutablePointer<GError>?
        let address: String
        if let busAddress {
            address = busAddress
        } else {
            // DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus, else X11 autolaunch (which fails
            // with "Cannot autolaunch D-Bus without X11 $DISPLAY" on a headless machine).
            guard let found = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, context.cancellable, &error) else {
                throw Self.failure(error, "finding the session bus")
            }
            address = String(cString: found)
            g_free(found)
        }
        let flags = GDBusConnectionFlags(rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue
            | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
        guard let opened = g_dbus_connection_new_for_address_sync(address, flags, nil, context.cancellable, &error) else {
            throw Self.failure(error, "connecting to the bus")
        }
        // A private connection: closing it must never terminate the process.
        g_dbus_connection_set_exit_on_close(opened, 0)
        connection = opened
    }

    func openService(_ context: SecretCallContext) throws(SecretCallError) {
        if service != nil { return }
        guard let connection else { throw SecretCallError(.io(ioErrorClosed), "not connected") }
        var error: UnsafeMutablePointer<GError>?
        // OPEN_SESSION negotiates the transfer encryption (dh-ietf1024-sha256-aes128-cbc-pkcs7) now,
        // which is also the first call that proves a provider answers on the bus.
        guard let opened = chatvault_secret_service_new(connection, Self.busName, SECRET_SERVICE_OPEN_SESSION,
                                                        context.cancellable, &error) else {
            throw Self.failure(error, "opening the Secret Service")
        }
        service = opened
    }

    func disconnect() {
        if let service {
            g_object_unref(service)
            self.service = nil
        }
        if let connection {
            // Asynchronous close: never blocks, even on a bus that stopped answering.
            g_dbus_connection_close(connection, nil, nil, nil)
            g_object_unref(UnsafeMutableRawPointer(connection))
            self.connection = nil
        }
    }

    private func requireService() throws(SecretCallError) -> UnsafeMutablePointer<SecretService> {
        guard let service else { throw SecretCallError(.io(ioErrorClosed), "the Secret Service is not open") }
        return service
    }

    private func requireConnection() throws(SecretCallError) -> OpaquePointer {
        guard let connection else { throw SecretCallError(.io(ioErrorClosed), "not connected") }
        return connection
    }

    // MARK: Collections

    func readAlias(_ alias: String, _ context: SecretCallContext) throws(SecretCallError) -> String? {
        let service = try requireService()
        var error: UnsafeMutablePointer<GError>?
        // NULL without an error when the alias is not set (the service answered "/").
        guard let path = secret_service_read_alias_dbus_path_sync(service, alias, context.cancellable, &error) else {
            if error != nil { throw Self.failure(error, "reading the \(alias) alias") }
            return nil
        }
        defer { g_free(path) }
        return String(cString: path)
    }

    func collectionPaths(_ context: SecretCallContext) throws(SecretCallError) -> [String] {
        let value = try property(Self.servicePath, Self.serviceInterface, "Collections", context)
        defer { g_variant_unref(value) }
        guard chatvault_variant_is_of_type(value, "ao") != 0 else {
            throw SecretCallError(.other("protocol"), "the Collections property is not an object path array")
        }
        return Self.strings(of: value)
    }

    func isCollectionLocked(_ path: String, _ context: SecretCallContext) throws(SecretCallError) -> Bool {
        let value = try property(path, Self.collectionInterface, "Locked", context)
        defer { g_variant_unref(value) }
        guard chatvault_variant_is_of_type(value, "b") != 0 else {
            throw SecretCallError(.other("protocol"), "the Locked property is not a boolean")
        }
        return g_variant_get_boolean(value) != 0
    }

    private func property(_ path: String, _ interface: String, _ name: String,
                          _ context: SecretCallContext) throws(SecretCallError) -> OpaquePointer {
        let connection = try requireConnection()
        var error: UnsafeMutablePointer<GError>?
        guard let value = chatvault_dbus_get_property(connection, Self.busName, path, interface, name,
                                                      Self.callTimeoutMsec, context.cancellable, &error) else {
            throw Self.failure(error, "reading \(name) of \(path)")
        }
        return value
    }

    // MARK: Items

    func searchItems(_ attributes: [String: String], _ context: SecretCallContext) throws(SecretCallError) -> SecretSearchResult {
        let service = try requireService()
        let table = Self.stringTable(attributes)
        defer { g_hash_table_unref(table) }
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        var error: UnsafeMutablePointer<GError>?
        // Schema NULL: the attributes (xdg:schema included) are matched exactly as given.
        guard secret_service_search_for_dbus_paths_sync(service, nil, table, context.cancellable,
                                                        &unlocked, &locked, &error) != 0 else {
            throw Self.failure(error, "searching items")
        }
        defer {
            g_strfreev(unlocked)
            g_strfreev(locked)
        }
        return SecretSearchResult(unlocked: Self.strings(of: unlocked), locked: Self.strings(of: locked))
    }

    func itemInfo(_ path: String, _ context: SecretCallContext) throws(SecretCallError) -> SecretItemInfo {
        let connection = try requireConnection()
        var error: UnsafeMutablePointer<GError>?
        guard let all = chatvault_dbus_get_all_properties(connection, Self.busName, path, Self.itemInterface,
                                                          Self.callTimeoutMsec, context.cancellable, &error) else {
            throw Self.failure(error, "reading the properties of \(path)")
        }
        defer { g_variant_unref(all) }
        var info = SecretItemInfo(path: path, locked: true, attributes: nil, created: 0, modified: 0)
        if let locked = chatvault_variant_lookup(all, "Locked", "b") {
            info.locked = g_variant_get_boolean(locked) != 0
            g_variant_unref(locked)
        }
        if let attributes = chatvault_variant_lookup(all, "Attributes", "a{ss}") {
            info.attributes = Self.stringDictionary(of: attributes)
            g_variant_unref(attributes)
        }
        if let created = chatvault_variant_lookup(all, "Created", "t") {
            info.created = UInt64(g_variant_get_uint64(created))
            g_variant_unref(created)
        }
        if let modified = chatvault_variant_lookup(all, "Modified", "t") {
            info.modified = UInt64(g_variant_get_uint64(modified))
            g_variant_unref(modified)
        }
        return info
    }

    func withSecret<R>(ofItem path: String, _ context: SecretCallContext,
                       _ body: (UnsafeRawBufferPointer) -> R) throws(SecretCallError) -> R? {
        let service = try requireService()
        var error: UnsafeMutablePointer<GError>?
        guard let value = secret_service_get_secret_for_dbus_path_sync(service, path, context.cancellable, &error) else {
            if error != nil { throw Self.failure(error, "reading the secret of \(path)") }
            return nil
        }
        // The value lives in libsecret's secure memory, which is zeroed when the last reference goes.
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length = 0
        guard let bytes = secret_value_get(value, &length) else {
            return body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return body(UnsafeRawBufferPointer(start: UnsafeRawPointer(bytes), count: max(length, 0)))
    }

    func createItem(inCollection collection: String, label: String, attributes: [String: String],
                    secret: UnsafeRawBufferPointer, contentType: String,
                    _ context: SecretCallContext) throws(SecretCallError) -> String {
        let service = try requireService()
        guard let base = secret.baseAddress else { throw SecretCallError(.other("argument"), "empty secret") }
        let table = Self.stringTable(attributes)
        defer { g_hash_table_unref(table) }
        let properties = chatvault_item_properties_new(label, table)
        defer { g_hash_table_unref(properties) }
        // secret_value_new copies the bytes into libsecret's secure memory (zeroed on release);
        // the caller zeroes its own buffer.
        guard let value = secret_value_new(base.assumingMemoryBound(to: gchar.self), secret.count, contentType) else {
            throw SecretCallError(.other("memory"), "could not allocate a secret value")
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var error: UnsafeMutablePointer<GError>?
        guard let path = secret_service_create_item_dbus_path_sync(service, collection, properties, value,
                                                                   SECRET_ITEM_CREATE_REPLACE, context.cancellable, &error) else {
            throw Self.failure(error, "creating an item in \(collection)")
        }
        defer { g_free(path) }
        return String(cString: path)
    }

    func deleteItem(_ path: String, _ context: SecretCallContext) throws(SecretCallError) {
        let service = try requireService()
        var error: UnsafeMutablePointer<GError>?
        guard secret_service_delete_item_dbus_path_sync(service, path, context.cancellable, &error) != 0 else {
            throw Self.failure(error, "deleting \(path)")
        }
    }

    func lock(_ paths: [String], _ context: SecretCallContext) throws(SecretCallError) {
        let service = try requireService()
        var error: UnsafeMutablePointer<GError>?
        var locked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        let count = Self.withCStringArray(paths) { array in
            secret_service_lock_dbus_paths_sync(service, array, context.cancellable, &locked, &error)
        }
        g_strfreev(locked)
        if count < 0 || error != nil { throw Self.failure(error, "locking") }
    }

    func unlock(_ paths: [String], _ context: SecretCallContext) throws(SecretCallError) -> [String] {
        let service = try requireService()
        var error: UnsafeMutablePointer<GError>?
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        // Performs the service's prompt (gnome-keyring asks gcr-prompter for the password) and waits
        // for its Completed signal; a dismissed prompt answers 0 items and no error.
        let count = Self.withCStringArray(paths) { array in
            secret_service_unlock_dbus_paths_sync(service, array, context.cancellable, &unlocked, &error)
        }
        defer { g_strfreev(unlocked) }
        if count < 0 || error != nil { throw Self.failure(error, "unlocking") }
        return Self.strings(of: unlocked)
    }

    // MARK: Conversions

    /// Takes ownership of `error` (frees it) and reduces it to a `SecretCallError`.
    static func failure(_ error: UnsafeMutablePointer<GError>?, _ what: String) -> SecretCallError {
        guard let error else { return SecretCallError(.other("unknown"), "\(what) failed without an error") }
        defer { g_error_free(error) }
        let domain = error.pointee.domain
        let code = error.pointee.code
        if domain == g_io_error_quark(), code == Int32(G_IO_ERROR_CANCELLED.rawValue) {
            return SecretCallError(.cancelled, "\(what): cancelled")
        }
        // A remote error keeps its D-Bus name even when GLib maps it to a G_DBUS_ERROR or
        // SECRET_ERROR code; strip the "GDBus.Error:<name>: " prefix from the message.
        if let remote = g_dbus_error_get_remote_error(error) {
            defer { g_free(remote) }
            _ = g_dbus_error_strip_remote_error(error)
            return SecretCallError(.dbus(String(cString: remote)), "\(what): \(message(of: error))")
        }
        if domain == g_dbus_error_quark() || domain == secret_error_get_quark(), let name = g_dbus_error_encode_gerror(error) {
            defer { g_free(name) }
            return SecretCallError(.dbus(String(cString: name)), "\(what): \(message(of: error))")
        }
        if domain == g_io_error_quark() {
            return SecretCallError(.io(code), "\(what): \(message(of: error))")
        }
        let domainName = g_quark_to_string(domain).map { String(cString: $0) } ?? "unknown"
        return SecretCallError(.other("\(domainName):\(code)"), "\(what): \(message(of: error))")
    }

    private static func message(of error: UnsafeMutablePointer<GError>) -> String {
        error.pointee.message.map { String(cString: $0) } ?? ""
    }

    private static func stringTable(_ dictionary: [String: String]) -> OpaquePointer {
        let table = chatvault_string_table_new()!
        for (key, value) in dictionary {
            chatvault_string_table_insert(table, key, value)
        }
        return table
    }

    /// The strings of a NULL-terminated `gchar **` (NULL gives none).
    private static func strings(of array: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?) -> [String] {
        guard let array else { return [] }
        var result: [String] = []
        var index = 0
        while let element = array[index] {
            result.append(String(cString: element))
            index += 1
        }
        return result
    }

    /// The strings of an `as` or `ao` variant.
    private static func strings(of variant: OpaquePointer) -> [String] {
        (0..<g_variant_n_children(variant)).compactMap { index in
            let child = g_variant_get_child_value(variant, index)
            defer { g_variant_unref(child) }
            return g_variant_get_string(child, nil).map { String(cString: $0) }
        }
    }

    /// The entries of an `a{ss}` variant.
    private static func stringDictionary(of variant: OpaquePointer) -> [String: String] {
        var result: [String: String] = [:]
        for index in 0..<g_variant_n_children(variant) {
            let entry = g_variant_get_child_value(variant, index)
            defer { g_variant_unref(entry) }
            let key = g_variant_get_child_value(entry, 0)
            let value = g_variant_get_child_value(entry, 1)
            defer {
                g_variant_unref(key)
                g_variant_unref(value)
            }
            if let k = g_variant_get_string(key, nil), let v = g_variant_get_string(value, nil) {
                result[String(cString: k)] = String(cString: v)
            }
        }
        return result
    }

    /// Runs `body` with a NULL-terminated `const gchar **` of `strings`.
    private static func withCStringArray<R>(_ strings: [String],
                                            _ body: (UnsafeMutablePointer<UnsafePointer<gchar>?>) -> R) -> R {
        let copies = strings.map { g_strdup($0) }
        defer { copies.forEach { g_free($0) } }
        var array: [UnsafePointer<gchar>?] = copies.map { $0.map { UnsafePointer($0) } }
        array.append(nil)
        return array.withUnsafeMutableBufferPointer { buffer in
            body(buffer.baseAddress!)
        }
    }
}
