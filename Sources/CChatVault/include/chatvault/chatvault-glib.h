/* chatvault-glib.h: ChatVault's callbacks on a GLib main context (GTK apps: the default one).
 *
 *     #include <chatvault/chatvault-glib.h>
 *     guint source = cv_vault_attach_main_context (vault, NULL);   // NULL: the default context
 *     ...
 *     g_source_remove (source);                                    // before cv_vault_free()
 *
 * Header-only: it needs glib-2.0 in the app, not in libchatvault. */
#ifndef CHATVAULT_CHATVAULT_GLIB_H
#define CHATVAULT_CHATVAULT_GLIB_H

#include <chatvault/chatvault.h>
#include <glib.h>
#include <glib-unix.h>

G_BEGIN_DECLS

static inline gboolean cv__glib_dispatch(gint fd, GIOCondition condition, gpointer vault) {
    (void)fd;
    (void)condition;
    cv_vault_dispatch((cv_vault *)vault);
    return G_SOURCE_CONTINUE;
}

/* Dispatches the vault's callbacks on `context` (NULL: the default main context) whenever they
 * are due; answers the source id in that context (remove it before freeing the vault). 0 for a
 * bad handle. */
static inline guint cv_vault_attach_main_context(cv_vault *vault, GMainContext *context) {
    int fd = cv_vault_get_fd(vault);
    if (fd < 0)
        return 0;
    GSource *source = g_unix_fd_source_new(fd, G_IO_IN);
    g_source_set_callback(source, (GSourceFunc)(void (*)(void))cv__glib_dispatch, vault, NULL);
    guint id = g_source_attach(source, context);
    g_source_unref(source);
    return id;
}

G_END_DECLS

#endif /* CHATVAULT_CHATVAULT_GLIB_H */
