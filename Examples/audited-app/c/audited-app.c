/* A C app's offline set-up, audited by ChatVault's scenario kit through the C ABI.
 *
 * `chatvault audit-app -- ./audited-app VARIANT` runs this program once per launch of each
 * scenario (the protocol: ResetAudit(command:) in ChatVaultAudit, and the README's "Auditing your
 * app's reset handling"). It builds its vault as the app always does, with its reset listener, over
 * the kit's private D-Bus session (DBUS_SESSION_BUS_ADDRESS: its own gnome-keyring, never the
 * user's) and an in-process simulator, and prints what it showed the user as one JSON line.
 *
 * VARIANT "right" handles resets as the library asks: the listener registered before login, the
 * banner up at once (before the first screen reads), with the number of unsent messages lost
 * (-1: unknown). Each other variant plants one fault the kit must report:
 *   no-listener             never registers a reset listener                      -> noListener
 *   count-ignored           the banner omits the number of unsent messages lost    -> countIgnored
 *   deferred-banner         the banner goes up after the first screen has read    -> bannerAfterReads
 *   banner-when-unavailable a "history reset" banner whenever offline is off      -> resetShownWithoutReset
 *   banner-every-launch     the banner remembered on disk and shown at each launch -> announcedAgain
 */
#define _DEFAULT_SOURCE
#include <chatvault/chatvault.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct notice {
    const char *reason; /* NULL: the banner names none */
    bool has_count;
    int unsent_lost;
} notice;

enum { MAX_NOTICES = 16 };

typedef struct app {
    const char *variant;
    notice shown[MAX_NOTICES];
    int n_shown;
    notice deferred[MAX_NOTICES];
    int n_deferred;
    char banner_file[4096];
    int pending;
} app;

static bool is(const app *a, const char *variant) { return strcmp(a->variant, variant) == 0; }

static const char *env(const char *name) {
    const char *value = getenv(name);
    if (value == NULL) {
        fprintf(stderr, "audited-app: %s is not set (run me with chatvault audit-app)\n", name);
        exit(2);
    }
    return value;
}

static const char *reason_name(cv_reset_reason reason) {
    switch (reason) {
    case CV_RESET_KEY_LOST: return "keyLost";
    case CV_RESET_WRONG_KEY: return "wrongKey";
    case CV_RESET_CORRUPTED: return "corrupted";
    case CV_RESET_ESCALATED: return "escalated";
    case CV_RESET_ENCRYPTION_CHANGED: return "encryptionChanged";
    }
    return "unknown";
}

static void show(app *a, notice n) {
    if (a->n_shown < MAX_NOTICES) a->shown[a->n_shown++] = n;
}

/* The reset listener: runs inside a cv_vault_* _sync call or cv_vault_dispatch(), on this thread. */
static void on_reset(cv_reset_reason reason, int pending_messages_lost, void *user_data) {
    app *a = user_data;
    if (reason == CV_RESET_ENCRYPTION_CHANGED) return; /* migrated, nothing lost: nothing to tell */
    notice n = { reason_name(reason), !is(a, "count-ignored"), pending_messages_lost };
    if (is(a, "deferred-banner")) {
        if (a->n_deferred < MAX_NOTICES) a->deferred[a->n_deferred++] = n; /* shown later: a fault */
        return;
    }
    show(a, n);
    if (is(a, "banner-every-launch")) { /* remembered for ever: a fault */
        FILE *f = fopen(a->banner_file, "w");
        if (f != NULL) fclose(f);
    }
}

static void on_send(const char *stage, const char *message_json, const cv_error *error, void *user_data) {
    (void)message_json;
    (void)error;
    if (strcmp(stage, "pending") == 0) ((app *)user_data)->pending++;
}

/* Messages in a page's "cached" part (each message object has one "category" key). */
static int cached_count(const char *page) {
    if (page == NULL) return -1;
    const char *cached = strstr(page, "\"cached\":");
    if (cached == NULL || strncmp(cached + 9, "null", 4) == 0) return -1;
    const char *end = strstr(cached, "\"server\":");
    int n = 0;
    for (const char *p = strstr(cached, "\"category\":"); p != NULL && (end == NULL || p < end); p = strstr(p + 1, "\"category\":")) n++;
    return n;
}

static int count_messages(const char *array) {
    if (array == NULL) return -1;
    int n = 0;
    for (const char *p = strstr(array, "\"category\":"); p != NULL; p = strstr(p + 1, "\"category\":")) n++;
    return n;
}

static void print_notices(const notice *list, int n) {
    printf("[");
    for (int i = 0; i < n; i++) {
        printf("%s{\"reason\": ", i ? ", " : "");
        if (list[i].reason) printf("\"%s\"", list[i].reason); else printf("null");
        if (list[i].has_count) printf(", \"unsentMessagesLost\": %d}", list[i].unsent_lost); else printf(", \"unsentMessagesLost\": null}");
    }
    printf("]");
}

static const char *state_name(cv_open_state state) {
    switch (state) {
    case CV_OPEN_LOGGED_OUT: return "loggedOut";
    case CV_OPEN_DISABLED: return "disabled";
    case CV_OPEN_OPENING: return "opening";
    case CV_OPEN_READY: return "ready";
    case CV_OPEN_PLAINTEXT_FALLBACK: return "plaintextFallback";
    case CV_OPEN_UNAVAILABLE: return "unavailable";
    case CV_OPEN_ONLINE_ONLY: return "onlineOnly";
    }
    return "unknown";
}

int main(int argc, char **argv) {
    app a = { .variant = argc > 1 ? argv[1] : "right" };
    const char *step = env("CHATVAULT_AUDIT_STEP");
    const char *user = env("CHATVAULT_AUDIT_USER"), *peer = env("CHATVAULT_AUDIT_PEER");
    const char *root = env("CHATVAULT_AUDIT_ROOT");
    int messages = atoi(env("CHATVAULT_AUDIT_MESSAGES")), unsent = atoi(env("CHATVAULT_AUDIT_UNSENT"));
    int page_size = atoi(env("CHATVAULT_AUDIT_PAGE"));
    bool seeding = strcmp(step, "seed") == 0;
    snprintf(a.banner_file, sizeof a.banner_file, "%s.audited-app-banner", root);

    char settings[8192];
    snprintf(settings, sizeof settings,
             "{\"enabled\": true, \"applicationId\": \"%s\", \"applicationName\": \"Audited C App\", \"rootDirectory\": \"%s\", "
             "\"keyStore\": \"secretService\", \"encryption\": %s, \"encryptionFailureBehavior\": \"%s\", "
             "\"maxPendingMessages\": 500}",
             env("CHATVAULT_AUDIT_APP_ID"), root, strcmp(env("CHATVAULT_AUDIT_ENCRYPTION"), "on") == 0 ? "true" : "false",
             env("CHATVAULT_AUDIT_FAILURE_BEHAVIOR"));

    cv_error *error = NULL;
    cv_simulator *sim = cv_simulator_new(7);
    cv_simulator_add_user(sim, user, "Me", NULL);
    cv_simulator_add_user(sim, peer, "Peer", NULL);
    if (seeding) {
        for (int i = 0; i < messages; i++) {
            char text[64];
            snprintf(text, sizeof text, "audit message %d", i);
            cv_simulator_post_text(sim, peer, CV_RECEIVER_USER, user, text, NULL, NULL);
        }
    }
    cv_simulator_set_online(sim, user, seeding, NULL);
    cv_vault *vault = cv_vault_new_simulated(settings, sim, user, &error);
    if (vault == NULL) {
        fprintf(stderr, "audited-app: %s\n", error ? error->message : "no vault");
        return 1;
    }
    if (!is(&a, "no-listener")) cv_vault_add_reset_listener(vault, on_reset, &a, NULL, NULL);

    char *detail = NULL;
    cv_open_state state = cv_vault_login_sync(vault, user, &detail, NULL);
    if (is(&a, "banner-when-unavailable") && !cv_vault_is_offline_enabled(vault)) show(&a, (notice){ NULL, false, 0 });
    if (is(&a, "banner-every-launch") && access(a.banner_file, F_OK) == 0 && a.n_shown == 0) show(&a, (notice){ NULL, false, 0 });

    /* The first screen: what is up now is what the user sees while it reads. */
    notice at_first_read[MAX_NOTICES];
    int n_at_first_read = a.n_shown;
    memcpy(at_first_read, a.shown, sizeof a.shown);
    char *page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, peer, page_size, NULL);
    int cached = cached_count(page);
    cv_free(page);
    for (int i = 0; i < a.n_deferred; i++) show(&a, a.deferred[i]);

    if (seeding && state == CV_OPEN_READY) {
        cv_simulator_set_online(sim, user, false, NULL);
        for (int i = 0; i < unsent; i++) {
            char text[64];
            snprintf(text, sizeof text, "unsent %d", i);
            cv_vault_send_text(vault, CV_RECEIVER_USER, peer, text, on_send, &a, NULL, NULL);
        }
        char photo[] = "/tmp/audited-app-photo-XXXXXX";
        int fd = mkstemp(photo);
        if (fd >= 0) {
            char bytes[4096];
            for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (char)(i * 31);
            if (write(fd, bytes, sizeof bytes) != (ssize_t)sizeof bytes) fprintf(stderr, "audited-app: short write\n");
            close(fd);
            cv_vault_send_media(vault, CV_RECEIVER_USER, peer, photo, CV_MEDIA_IMAGE, NULL, on_send, &a, NULL, NULL);
        }
        for (int waited = 0; a.pending < unsent + 1 && waited < 500; waited++) {
            cv_vault_dispatch(vault);
            usleep(10000);
        }
        if (fd >= 0) unlink(photo);
    }

    char *pending = cv_vault_get_pending_messages_sync(vault, NULL);
    char *status = cv_vault_get_encryption_status(vault, NULL);
    printf("{\"state\": \"%s\", \"unavailableReason\": ", state_name(state));
    if (state == CV_OPEN_UNAVAILABLE && detail) printf("\"%s\"", detail); else printf("null");
    printf(", \"offlineEnabled\": %s, \"status\": %s, \"noticesAtFirstRead\": ", cv_vault_is_offline_enabled(vault) ? "true" : "false",
           status ? status : "null");
    print_notices(at_first_read, n_at_first_read);
    printf(", \"notices\": ");
    print_notices(a.shown, a.n_shown);
    printf(", \"cachedMessages\": ");
    if (cached >= 0) printf("%d", cached); else printf("null");
    int unsent_now = count_messages(pending);
    printf(", \"pendingMessages\": ");
    if (unsent_now >= 0) printf("%d}\n", unsent_now); else printf("null}\n");
    cv_free(pending);
    cv_free(status);
    cv_free(detail);
    cv_vault_logout_sync(vault, NULL);
    cv_vault_free(vault);
    cv_simulator_free(sim);
    cv_error_free(error);
    return 0;
}
