/* The C API against the real Secret Service (a private gnome-keyring): run by Scripts/test-capi
 * in phases, the script changing the keyring between them.
 *
 *     test-capi-keyring WORKDIR seed       a cache keyed in the Secret Service, one unsent message
 *     (script: secret-tool clear …)        the key item deleted
 *     test-capi-keyring WORKDIR lost       the reset listener hears CV_RESET_KEY_LOST, with the count
 *     test-capi-keyring WORKDIR seed2      a fresh cache with messages
 *     (script: the keyring locked)
 *     test-capi-keyring WORKDIR locked     unavailable (locked), no reset, the files untouched
 *     (script: the keyring unlocked)
 *     test-capi-keyring WORKDIR unlocked   ready, no reset, every cached message there
 */
#define _POSIX_C_SOURCE 200809L
#include <chatvault/chatvault.h>

#include "check.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>


typedef struct {
    int calls, wrong_thread;
    cv_reset_reason reason;
    int lost;
} reset_record;

static void on_reset(cv_reset_reason reason, int lost, void *user_data) {
    reset_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    r->calls++;
    r->reason = reason;
    r->lost = lost;
}

typedef struct {
    int pending;
} send_record;

static void on_send(const char *stage, const char *message_json, const cv_error *error, void *user_data) {
    (void)message_json;
    (void)error;
    if (strcmp(stage, "pending") == 0)
        ((send_record *)user_data)->pending++;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test-capi-keyring WORKDIR seed|lost|seed2|locked|unlocked\n");
        return 2;
    }
    main_thread = pthread_self();
    const char *work = argv[1], *phase = argv[2];
    char root[2048], settings[4096];
    snprintf(root, sizeof root, "%s/root", work);
    mkdir(root, 0700);
    snprintf(settings, sizeof settings,
             "{\"enabled\": true, \"encryption\": true, \"applicationId\": \"org.chatvault.capitest\", "
             "\"rootDirectory\": \"%s\", \"keyStore\": \"secretService\"}", root);

    cv_error *error = NULL;
    cv_simulator *sim = cv_simulator_new(11);
    cv_simulator_add_user(sim, "alice", "Alice", NULL);
    cv_simulator_add_user(sim, "bob", "Bob", NULL);
    cv_vault *vault = cv_vault_new_simulated(settings, sim, "alice", &error);
    CHECK(vault != NULL, "a vault: %s", error ? error->message : "");
    if (vault == NULL)
        return 1;
    reset_record heard = { 0 };
    cv_vault_add_reset_listener(vault, on_reset, &heard, NULL, NULL);
    char *detail = NULL;
    cv_open_state state = cv_vault_login_sync(vault, "alice", &detail, &error);

    if (strcmp(phase, "seed") == 0 || strcmp(phase, "seed2") == 0) {
        CHECK(state == CV_OPEN_READY, "ready: %d %s", state, detail ? detail : "");
        char *status = cv_vault_get_encryption_status(vault, NULL);
        CHECK(status != NULL && strstr(status, "\"keyStorage\":\"KEYSTORE\"") != NULL, "the key in the Secret Service: %s", status);
        cv_free(status);
        /* Messages cached through a read, and (seed) one unsent message. */
        for (int i = 0; i < 3; i++)
            cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", "cached text", NULL, NULL);
        cv_free(cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 30, NULL));
        if (strcmp(phase, "seed") == 0) {
            cv_simulator_set_online(sim, "alice", false, NULL);
            send_record sent = { 0 };
            cv_vault_send_text(vault, CV_RECEIVER_USER, "bob", "never sent", on_send, &sent, NULL, NULL);
            for (int i = 0; i < 200 && sent.pending == 0; i++) {
                cv_vault_dispatch(vault);
                sleep_ms(10);
            }
            CHECK(sent.pending == 1, "committed as pending");
        }
        CHECK(heard.calls == 0, "no reset while seeding");
    } else if (strcmp(phase, "lost") == 0) {
        CHECK(state == CV_OPEN_READY, "a new cache: %d %s", state, detail ? detail : "");
        CHECK(heard.calls == 1, "the reset heard before login returned: %d", heard.calls);
        CHECK(heard.reason == CV_RESET_KEY_LOST, "key lost: %d", heard.reason);
        /* Without the key the old outbox cannot be read: the count is exact or, as here, unknown. */
        CHECK(heard.lost == 1 || heard.lost == CV_PENDING_COUNT_UNKNOWN, "the unsent message counted: %d", heard.lost);
        CHECK(heard.wrong_thread == 0, "on this thread");
        /* The journal says so: the reset, and its delivery to this listener before any read. */
        char *journal = cv_vault_get_audit_journal(vault, NULL);
        CHECK(journal != NULL && strstr(journal, "\"kind\":\"reset\"") && strstr(journal, "\"reason\":\"keyLost\"")
                  && strstr(journal, "\"kind\":\"delivered\"") && strstr(journal, "\"listeners\":[\"c-")
                  && strstr(journal, "\"readsServedBefore\":0"),
              "the reset and its delivery journalled: %s", journal ? journal : "(null)");
        cv_free(journal);
    } else if (strcmp(phase, "locked") == 0) {
        CHECK(state == CV_OPEN_UNAVAILABLE, "unavailable while locked: %d", state);
        CHECK(detail != NULL && strcmp(detail, "locked") == 0, "the detail says locked: %s", detail ? detail : "(none)");
        CHECK(heard.calls == 0, "a locked keyring is not a reset");
        CHECK(!cv_vault_is_offline_enabled(vault), "offline inactive while unavailable");
        char *page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 30, NULL);
        CHECK(page != NULL && strstr(page, "\"cached\":[]") != NULL, "nothing served while unavailable: %.200s", page);
        cv_free(page);
        /* Still locked: a retry changes nothing. */
        cv_free(detail);
        detail = NULL;
        CHECK(cv_vault_retry_open_sync(vault, &detail, NULL) == CV_OPEN_UNAVAILABLE, "still unavailable");
        CHECK(heard.calls == 0, "still no reset");
    } else if (strcmp(phase, "unlocked") == 0) {
        CHECK(state == CV_OPEN_READY, "ready once unlocked: %d %s", state, detail ? detail : "");
        CHECK(heard.calls == 0, "no reset after the lock");
        cv_simulator_set_online(sim, "alice", false, NULL);
        char *page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 30, NULL);
        CHECK(page != NULL && strstr(page, "cached text") != NULL, "the cached messages are there: %.200s", page);
        cv_free(page);
    } else {
        fprintf(stderr, "unknown phase %s\n", phase);
        return 2;
    }
    cv_free(detail);
    if (error != NULL)
        cv_error_free(error);
    cv_vault_free(vault);
    cv_simulator_free(sim);
    if (failures == 0)
        printf("test-capi-keyring %s: all checks passed\n", phase);
    return failures == 0 ? 0 : 1;
}
