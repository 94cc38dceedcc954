#ifndef CHATVAULT_CLIBSECRET_SHIM_H
#define CHATVAULT_CLIBSECRET_SHIM_H

/* The D-Bus-path API (secret-paths.h) is marked unstable but has not changed since libsecret 0.11;
 * it lets the key store see a search's locked and unlocked items separately, which the high-level
 * API hides (a locked item there looks exactly like a missing one). */
#ifndef SECRET_API_SUBJECT_TO_CHANGE
#define SECRET_API_SUBJECT_TO_CHANGE 1
#endif
#include <libsecret/secret.h>
#include <gio/gio.h>

/* Wrappers for what Swift cannot call: variadic functions (g_initable_new, g_variant_new,
 * g_variant_builder_add) and macros (G_VARIANT_TYPE, SECRET_TYPE_SERVICE). */

/* libsecret 0.20.x gives SecretService a GObject constructor that forces "g-bus-type" to the session
 * bus and "g-name" to the default after the caller's properties are applied, so a SecretService can
 * only live on the process-wide connection of g_bus_get() (whose exit-on-close raises SIGTERM in the
 * app when the bus goes away) and GDBusProxy asserts when given "g-connection". This subclass only
 * replaces that constructor with GDBusProxy's own, so the caller's properties stand; everything else
 * (instance init, properties, vfuncs) is libsecret's. Newer libsecret has no such constructor, and
 * the subclass then changes nothing. */
static GObject *chatvault_secret_service_constructor(GType type, guint n_properties,
                                                     GObjectConstructParam *properties) {
    GObjectClass *proxy_class = G_OBJECT_CLASS(g_type_class_peek(G_TYPE_DBUS_PROXY));
    return proxy_class->constructor(type, n_properties, properties);
}

static void chatvault_secret_service_class_init(gpointer klass, gpointer data) {
    (void)data;
    G_OBJECT_CLASS(klass)->constructor = chatvault_secret_service_constructor;
}

static inline GType chatvault_secret_service_get_type(void) {
    static gsize type_id = 0;
    if (g_once_init_enter(&type_id)) {
        /* The header may be compiled into more than one unit: register the name only once. */
        GType type = g_type_from_name("ChatVaultSecretService");
        if (type == 0) {
            GTypeQuery query;
            g_type_query(SECRET_TYPE_SERVICE, &query);
            type = g_type_register_static_simple(SECRET_TYPE_SERVICE, "ChatVaultSecretService",
                                                 query.class_size, chatvault_secret_service_class_init,
                                                 query.instance_size, NULL, (GTypeFlags)0);
        }
        g_once_init_leave(&type_id, type);
    }
    return type_id;
}

/* A SecretService proxy on a connection of our own (a private connection to the session bus or to
 * any address), instead of the process-wide session connection of g_bus_get(). Same properties as
 * libsecret's secret_service_open(), less its private interface info; no property cache and no
 * signal subscriptions (the store reads what it needs afresh, and nothing is dispatched to a main
 * context nobody runs). */
static inline SecretService *chatvault_secret_service_new(GDBusConnection *connection,
                                                          const gchar *bus_name,
                                                          SecretServiceFlags flags,
                                                          GCancellable *cancellable,
                                                          GError **error) {
    return (SecretService *)g_initable_new(chatvault_secret_service_get_type(), cancellable, error,
                                           "g-flags", G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES
                                                      | G_DBUS_PROXY_FLAGS_DO_NOT_CONNECT_SIGNALS,
                                           "g-connection", connection,
                                           "g-name", bus_name,
                                           "g-object-path", "/org/freedesktop/secrets",
                                           "g-interface-name", "org.freedesktop.Secret.Service",
                                           "flags", flags,
                                           NULL);
}

/* org.freedesktop.DBus.Properties.Get, returning the unboxed value (transfer full) or NULL. */
static inline GVariant *chatvault_dbus_get_property(GDBusConnection *connection,
                                                    const gchar *bus_name,
                                                    const gchar *object_path,
                                                    const gchar *interface_name,
                                                    const gchar *property_name,
                                                    gint timeout_msec,
                                                    GCancellable *cancellable,
                                                    GError **error) {
    GVariant *reply = g_dbus_connection_call_sync(connection, bus_name, object_path,
                                                  "org.freedesktop.DBus.Properties", "Get",
                                                  g_variant_new("(ss)", interface_name, property_name),
                                                  G_VARIANT_TYPE("(v)"), G_DBUS_CALL_FLAGS_NONE,
                                                  timeout_msec, cancellable, error);
    if (reply == NULL)
        return NULL;
    GVariant *value = NULL;
    g_variant_get(reply, "(v)", &value);
    g_variant_unref(reply);
    return value;
}

/* org.freedesktop.DBus.Properties.GetAll, returning the a{sv} dictionary (transfer full) or NULL. */
static inline GVariant *chatvault_dbus_get_all_properties(GDBusConnection *connection,
                                                          const gchar *bus_name,
                                                          const gchar *object_path,
                                                          const gchar *interface_name,
                                                          gint timeout_msec,
                                                          GCancellable *cancellable,
                                                          GError **error) {
    GVariant *reply = g_dbus_connection_call_sync(connection, bus_name, object_path,
                                                  "org.freedesktop.DBus.Properties", "GetAll",
                                                  g_variant_new("(s)", interface_name),
                                                  G_VARIANT_TYPE("(a{sv})"), G_DBUS_CALL_FLAGS_NONE,
                                                  timeout_msec, cancellable, error);
    if (reply == NULL)
        return NULL;
    GVariant *dict = g_variant_get_child_value(reply, 0);
    g_variant_unref(reply);
    return dict;
}

/* A string-to-string hash table (keys and values g_free'd), as libsecret takes attributes. */
static inline GHashTable *chatvault_string_table_new(void) {
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

static inline void chatvault_string_table_insert(GHashTable *table, const gchar *key, const gchar *value) {
    g_hash_table_insert(table, g_strdup(key), g_strdup(value));
}

/* The properties of a new item for CreateItem: Label (s) and Attributes (a{ss}) from a string table. */
static inline GHashTable *chatvault_item_properties_new(const gchar *label, GHashTable *attributes) {
    GHashTable *properties = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
                                                   (GDestroyNotify)g_variant_unref);
    g_hash_table_insert(properties, "org.freedesktop.Secret.Item.Label",
                        g_variant_ref_sink(g_variant_new_string(label)));
    GVariantBuilder builder;
    g_variant_builder_init(&builder, G_VARIANT_TYPE("a{ss}"));
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, attributes);
    while (g_hash_table_iter_next(&iter, &key, &value))
        g_variant_builder_add(&builder, "{ss}", (const gchar *)key, (const gchar *)value);
    g_hash_table_insert(properties, "org.freedesktop.Secret.Item.Attributes",
                        g_variant_ref_sink(g_variant_builder_end(&builder)));
    return properties;
}

/* Looks up one entry of an a{sv} dictionary with the expected type string ("b", "t", "a{ss}", "ao");
 * transfer full, or NULL when missing or of another type. */
static inline GVariant *chatvault_variant_lookup(GVariant *dictionary, const gchar *key, const gchar *type) {
    if (!g_variant_type_string_is_valid(type))
        return NULL;
    return g_variant_lookup_value(dictionary, key, (const GVariantType *)type);
}

static inline gboolean chatvault_variant_is_of_type(GVariant *value, const gchar *type) {
    return g_variant_type_string_is_valid(type) && g_variant_is_of_type(value, (const GVariantType *)type);
}

#endif
