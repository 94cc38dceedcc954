/* The C API from C: every entry point, the bad-input cases, callbacks on the dispatching thread
 * only, none after their vault or listener is gone, the reset listener after a key is lost.
 * Built by Scripts/test-capi from an installed prefix with pkg-config, under ASan and UBSan.
 *
 *     test-capi WORKDIR        (a fresh private directory)
 */
#define _POSIX_C_SOURCE 200809L
#include <chatvault/chatvault.h>

#include "check.h"

#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


/* ---- a send's stages ---- */
typedef struct {
    int pending, sent, errors, destroyed, wrong_thread;
    char last_error[64];
} send_record;

static void on_send(const char *stage, const char *message_json, const cv_error *error, void *user_data) {
    send_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    CHECK(message_json != NULL && message_json[0] == '{', "a message as JSON");
    if (strcmp(stage, "pending") == 0) {
        r->pending++;
        CHECK(contains(message_json, "\"status\""), "the pending message has its status");
    } else if (strcmp(stage, "sent") == 0) {
        r->sent++;
    } else if (strcmp(stage, "error") == 0) {
        r->errors++;
        CHECK(error != NULL && error->code != NULL, "an error stage carries the error");
        if (error != NULL)
            snprintf(r->last_error, sizeof r->last_error, "%s", error->code);
    }
}

static void on_send_destroy(void *user_data) {
    ((send_record *)user_data)->destroyed++;
}

/* ---- the reset listener ---- */
typedef struct {
    int calls, destroyed, wrong_thread;
    cv_reset_reason reason;
    int lost;
} reset_record;

static void on_reset(cv_reset_reason reason, int pending_messages_lost, void *user_data) {
    reset_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    r->calls++;
    r->reason = reason;
    r->lost = pending_messages_lost;
}

static void on_reset_destroy(void *user_data) {
    ((reset_record *)user_data)->destroyed++;
}

/* ---- the message and outbox listeners ---- */
typedef struct {
    int received, synced, wrong_thread, destroyed;
    char last_text[128];
} message_record;

static void on_message(const char *event, const char *message_json, void *user_data) {
    message_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    if (strcmp(event, "received") == 0) {
        r->received++;
        const char *text = strstr(message_json, "\"text\":\"");
        if (text != NULL)
            snprintf(r->last_text, sizeof r->last_text, "%s", text + 8);
    } else if (strcmp(event, "synced") == 0) {
        r->synced++;
    }
}

static void on_message_destroy(void *user_data) {
    ((message_record *)user_data)->destroyed++;
}

typedef struct {
    int pending, sent, failed, wrong_thread;
    cv_failure_reason reason;
    char local_id[128];
} outbox_record;

static void on_outbox(cv_outbox_event event, const char *message_json, cv_failure_reason reason, void *user_data) {
    outbox_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    CHECK(event == CV_OUTBOX_FAILED || reason == CV_FAILURE_NONE, "a reason only for a failure (%d)", (int)reason);
    if (event == CV_OUTBOX_PENDING) {
        r->pending++;
        const char *id = strstr(message_json, "\"localMessageId\":\"");
        if (id != NULL) {
            id += strlen("\"localMessageId\":\"");
            size_t n = strcspn(id, "\"");
            if (n < sizeof r->local_id) {
                memcpy(r->local_id, id, n);
                r->local_id[n] = '\0';
            }
        }
    } else if (event == CV_OUTBOX_SENT) {
        r->sent++;
    } else if (event == CV_OUTBOX_FAILED) {
        r->failed++;
        r->reason = reason;
    }
}

static void remove_files_in(const char *directory) {
    DIR *dir = opendir(directory);
    if (dir == NULL)
        return;
    struct dirent *entry;
    char path[4096];
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", directory, entry->d_name);
        unlink(path);
    }
    closedir(dir);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test-capi WORKDIR\n");
        return 2;
    }
    main_thread = pthread_self();
    const char *work = argv[1];
    char root[2048], keys[2048], settings[8192];
    snprintf(root, sizeof root, "%s/root", work);
    snprintf(keys, sizeof keys, "%s/keys", work);
    mkdir(root, 0700);
    mkdir(keys, 0700);
    snprintf(settings, sizeof settings,
             "{\"enabled\": true, \"encryption\": true, \"applicationId\": \"org.chatvault.capitest\", "
             "\"rootDirectory\": \"%s\", \"keyStore\": \"software\", \"keyDirectory\": \"%s\"}", root, keys);

    const char *version = cv_version();
    CHECK(version != NULL && strchr(version, '.') != NULL, "a version");
    cv_free(NULL);
    cv_error_free(NULL);

    /* The simulator. */
    cv_error *error = NULL;
    cv_simulator *sim = cv_simulator_new(7);
    CHECK(sim != NULL, "a simulator");
    CHECK(cv_simulator_add_user(sim, "alice", "Alice", &error), "alice added");
    CHECK(cv_simulator_add_user(sim, "bob", "Bob", &error), "bob added");
    CHECK(!cv_simulator_add_user(sim, "bob", "Bob", &error) && error != NULL, "a second bob is refused");
    cv_error_free(error);
    error = NULL;
    int64_t first = 0;
    for (int i = 0; i < 3; i++)
        CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", "hello from bob", &first, NULL), "posted");
    CHECK(first > 0, "an id");

    /* Bad input: every kind gives an argument error, never a crash. */
    CHECK(cv_vault_new_simulated(NULL, sim, "alice", &error) == NULL, "NULL settings");
    expect_argument_error(error, "NULL settings");
    error = NULL;
    CHECK(cv_vault_new_simulated("{not json", sim, "alice", &error) == NULL, "malformed JSON");
    expect_argument_error(error, "malformed JSON");
    error = NULL;
    CHECK(cv_vault_new_simulated("{\"applicationId\": \"x\", \"bogus\": 1}", sim, "alice", &error) == NULL, "an unknown key");
    expect_argument_error(error, "an unknown key");
    error = NULL;
    CHECK(cv_vault_new_simulated("{\"applicationId\": \"x\", \"enabled\": \"yes\"}", sim, "alice", &error) == NULL, "a wrong type");
    expect_argument_error(error, "a wrong type");
    error = NULL;
    CHECK(cv_vault_new_simulated(settings, (cv_simulator *)(void *)0x1234, "alice", &error) == NULL, "a foreign simulator");
    expect_argument_error(error, "a foreign simulator");
    error = NULL;
    CHECK(cv_vault_new_simulated(settings, sim, "\xff\xfe", &error) == NULL, "invalid UTF-8");
    expect_argument_error(error, "invalid UTF-8");
    error = NULL;
    CHECK(cv_vault_login_sync(NULL, "alice", NULL, &error) == CV_OPEN_LOGGED_OUT, "a NULL vault");
    expect_argument_error(error, "a NULL vault");
    error = NULL;
    CHECK(cv_vault_login_sync((cv_vault *)(void *)sim, "alice", NULL, &error) == CV_OPEN_LOGGED_OUT, "a simulator as a vault");
    expect_argument_error(error, "a simulator as a vault");
    error = NULL;
    CHECK(!cv_vault_is_offline_enabled(NULL), "NULL is not enabled");
    CHECK(cv_vault_get_fd(NULL) == -1, "no descriptor for NULL");
    CHECK(cv_vault_dispatch(NULL) == 0, "nothing to dispatch for NULL");
    CHECK(cv_vault_get_cache_size(NULL, NULL) == -1, "no size for NULL (error ignored)");

    /* A vault: login, the status, a two-phase read. */
    cv_vault *vault = cv_vault_new_simulated(settings, sim, "alice", &error);
    CHECK(vault != NULL, "a vault: %s", error ? error->message : "");
    if (vault == NULL)
        return 1;
    CHECK(cv_vault_get_fd(vault) >= 0, "a descriptor");
    CHECK(cv_vault_fetch_messages_sync(vault, (cv_receiver_type)7, "bob", 30, &error) == NULL, "an out-of-range enum");
    expect_argument_error(error, "an out-of-range enum");
    error = NULL;
    CHECK(cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 0, &error) == NULL, "a limit of 0");
    expect_argument_error(error, "a limit of 0");
    error = NULL;

    char *detail = NULL;
    cv_open_state state = cv_vault_login_sync(vault, "alice", &detail, &error);
    CHECK(state == CV_OPEN_READY, "ready: %d %s", state, detail ? detail : "");
    CHECK(detail == NULL, "no detail when ready");
    cv_free(detail);
    CHECK(cv_vault_is_offline_enabled(vault), "offline enabled");
    char *status = cv_vault_get_encryption_status(vault, &error);
    CHECK(contains(status, "\"atRest\":\"SQLCIPHER\""), "encrypted at rest: %s", status);
    CHECK(contains(status, "\"keyStorage\":\"SOFTWARE\""), "the key in the software store: %s", status);
    cv_free(status);
    CHECK(cv_vault_get_cache_size(vault, NULL) > 0, "a cache on disk");
    char *journal = cv_vault_get_audit_journal(vault, &error);
    CHECK(contains(journal, "\"kind\":\"opened\"") && contains(journal, "\"outcome\":\"ready\""), "the open journalled: %s", journal);
    CHECK(!contains(journal, "alice"), "no user id in the journal: %s", journal);
    cv_free(journal);
    CHECK(cv_vault_get_audit_journal(NULL, &error) == NULL, "no journal for NULL");
    expect_argument_error(error, "no journal for NULL");
    error = NULL;

    char *page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 30, &error);
    CHECK(contains(page, "\"cached\":[]"), "nothing cached yet: %s", page);
    CHECK(contains(page, "hello from bob"), "the server phase: %.200s", page);
    cv_free(page);
    page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 30, &error);
    CHECK(contains(page, "\"cached\":[{"), "cached now: %.200s", page);
    cv_free(page);

    /* A send: pending, then sent, each on this thread, then its destroy notifier. */
    send_record sent = { 0 };
    CHECK(cv_vault_send_text(vault, CV_RECEIVER_USER, "bob", "hi bob", on_send, &sent, on_send_destroy, &error), "a send");
    CHECK(dispatch_until(vault, &sent.destroyed, 20), "the send finished");
    CHECK(sent.pending == 1 && sent.sent == 1 && sent.errors == 0, "pending %d sent %d errors %d", sent.pending, sent.sent, sent.errors);
    CHECK(sent.destroyed == 1 && sent.wrong_thread == 0, "destroyed %d, off-thread %d", sent.destroyed, sent.wrong_thread);
    CHECK(!cv_vault_send_text(vault, CV_RECEIVER_USER, "bob", "x", NULL, NULL, NULL, &error), "a send needs a callback");
    expect_argument_error(error, "a send needs a callback");
    error = NULL;

    /* Realtime: a message bob sends reaches the message listener, on this thread. */
    message_record messages = { 0 };
    unsigned message_listener = cv_vault_add_message_listener(vault, on_message, &messages, on_message_destroy, &error);
    CHECK(message_listener > 0, "a message listener");
    CHECK(cv_vault_add_message_listener(vault, NULL, NULL, NULL, &error) == 0, "a listener needs a callback");
    expect_argument_error(error, "a message listener without a callback");
    error = NULL;
    CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", "live from bob", NULL, &error), "posted live");
    volatile int *heard_live = &messages.received;
    CHECK(dispatch_until(vault, heard_live, 10), "the realtime message was heard");
    CHECK(strncmp(messages.last_text, "live from bob", 13) == 0, "its text: %s", messages.last_text);
    CHECK(messages.wrong_thread == 0, "on this thread");

    /* The conversation list, two-phase; the catch-up sync. */
    char *conversations = cv_vault_fetch_conversations_sync(vault, 30, &error);
    CHECK(contains(conversations, "\"with\":\"bob\""), "the conversation with bob: %.300s", conversations);
    cv_free(conversations);
    CHECK(cv_vault_fetch_conversations_sync(vault, 0, &error) == NULL, "a limit of 0");
    expect_argument_error(error, "a conversation limit of 0");
    error = NULL;
    /* The login's own sweep may still run (valgrind on a loaded machine): while it does, the forced
     * one is refused as ERROR_OFFLINE_SYNC_IN_PROGRESS and asked again; then only the cooldown may
     * refuse it. */
    double sync_deadline = now_seconds() + 30;
    while (!cv_vault_force_sync_now_sync(vault, &error)) {
        bool in_progress = error != NULL && strcmp(error->code, "ERROR_OFFLINE_SYNC_IN_PROGRESS") == 0;
        CHECK(error != NULL && (in_progress || strcmp(error->code, "ERROR_OFFLINE_SYNC_COOLDOWN") == 0),
              "a sync refused only while one runs or for its cooldown: %s", error ? error->code : "");
        cv_error_free(error);
        error = NULL;
        if (!in_progress || now_seconds() > sync_deadline)
            break;
        dispatch_for(vault, 0.1);
    }
    CHECK(cv_vault_get_last_sync_timestamp(vault) > 0, "caught up to a server time");
    CHECK(cv_vault_get_sync_state(vault) == CV_SYNC_IDLE || cv_vault_get_sync_state(vault) == CV_SYNC_SYNCING, "a sync state");
    CHECK(cv_vault_get_last_sync_timestamp(NULL) == -1, "no timestamp for NULL");

    outbox_record outbox = { 0 };
    CHECK(cv_vault_add_outbox_listener(vault, on_outbox, &outbox, NULL, &error) > 0, "an outbox listener");

    /* Offline: the cached phase answers, the server phase says so; a send waits in the outbox. */
    CHECK(cv_simulator_set_online(sim, "alice", false, NULL), "offline");
    page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 30, &error);
    CHECK(contains(page, "ERROR_INTERNET_UNAVAILABLE"), "offline: %.300s", page);
    CHECK(contains(page, "hi bob"), "the sent message is cached");
    cv_free(page);
    send_record queued = { 0 };
    CHECK(cv_vault_send_text(vault, CV_RECEIVER_USER, "bob", "while offline", on_send, &queued, on_send_destroy, &error), "queued");
    volatile int errored = 0;
    double deadline = now_seconds() + 10;
    while (queued.errors == 0 && now_seconds() < deadline) {
        cv_vault_dispatch(vault);
        sleep_ms(20);
    }
    errored = queued.errors;
    CHECK(queued.pending == 1 && errored == 1, "pending %d, error %d", queued.pending, queued.errors);
    CHECK(strcmp(queued.last_error, "ERROR_INTERNET_UNAVAILABLE") == 0, "queued, sent on reconnect: %s", queued.last_error);
    char *unsent = cv_vault_get_pending_messages_sync(vault, &error);
    CHECK(contains(unsent, "\"status\":\"pending\"") || contains(unsent, "\"localMessageId\""), "one unsent: %.300s", unsent);
    cv_free(unsent);
    CHECK(cv_simulator_set_online(sim, "alice", true, NULL), "online again");
    CHECK(dispatch_until(vault, &queued.destroyed, 30), "the queued send went out on reconnect");
    CHECK(queued.sent == 1 && queued.wrong_thread == 0, "sent %d off-thread %d", queued.sent, queued.wrong_thread);

    CHECK(outbox.pending >= 1 && outbox.sent >= 1 && outbox.wrong_thread == 0, "the outbox listener: pending %d sent %d",
          outbox.pending, outbox.sent);

    /* A message discarded from the outbox: its send fails as discarded. */
    CHECK(cv_simulator_set_online(sim, "alice", false, NULL), "offline");
    send_record dropped = { 0 };
    outbox.local_id[0] = '\0';
    CHECK(cv_vault_send_text(vault, CV_RECEIVER_USER, "bob", "to be discarded", on_send, &dropped, on_send_destroy, &error), "queued");
    volatile int *queued_pending = &dropped.pending;
    CHECK(dispatch_until(vault, queued_pending, 10), "pending");
    CHECK(outbox.local_id[0] != '\0', "the outbox named its local id");
    /* A send attempt may hold the row for a moment (ERROR_OFFLINE_MESSAGE_IN_FLIGHT): tried again then. */
    bool discarded = false;
    for (int attempt = 0; attempt < 100 && !discarded; attempt++) {
        discarded = cv_vault_discard_message_sync(vault, outbox.local_id, &error);
        if (!discarded && error != NULL && strcmp(error->code, "ERROR_OFFLINE_MESSAGE_IN_FLIGHT") == 0) {
            cv_error_free(error);
            error = NULL;
            cv_vault_dispatch(vault);
            sleep_ms(20);
        } else if (!discarded) {
            break;
        }
    }
    CHECK(discarded, "discarded: %s", error ? error->code : "");
    /* The seeds: a discarded message's send gets no final outcome and no outbox event fires; its
     * C callback's destroy notifier has run. */
    CHECK(dropped.destroyed == 1, "the discarded send's destroy notifier ran (%d)", dropped.destroyed);
    int failed_before = outbox.failed, dropped_stages = dropped.pending + dropped.sent + dropped.errors;
    volatile int quiet = 0;
    dispatch_until(vault, &quiet, 0.5);
    CHECK(outbox.failed == failed_before && dropped.pending + dropped.sent + dropped.errors == dropped_stages,
          "no outbox event and no stage after the discard");
    CHECK(!cv_vault_discard_message_sync(vault, outbox.local_id, &error), "not twice");
    CHECK(error != NULL && strcmp(error->domain, CV_ERROR_DOMAIN_CHATVAULT) == 0, "a library error for an unknown local id");
    cv_error_free(error);
    error = NULL;
    CHECK(!cv_vault_retry_message_sync(vault, "no-such-local-id", &error), "no such message to retry");
    cv_error_free(error);
    error = NULL;
    char *left = cv_vault_get_pending_messages_sync(vault, &error);
    CHECK(left != NULL && !contains(left, outbox.local_id), "the discarded message is gone: %.200s", left);
    cv_free(left);
    CHECK(cv_simulator_set_online(sim, "alice", true, NULL), "online");

    /* clearOfflineCache: the cached data goes, the cache keeps serving, and an unsent message fails
     * as discarded (the seeds), its send's destroy notifier after that last stage. */
    CHECK(cv_simulator_set_online(sim, "alice", false, NULL), "offline");
    send_record cleared = { 0 };
    CHECK(cv_vault_send_text(vault, CV_RECEIVER_USER, "bob", "cleared before it went", on_send, &cleared, on_send_destroy, &error),
          "queued");
    volatile int *cleared_pending = &cleared.pending;
    CHECK(dispatch_until(vault, cleared_pending, 10), "pending");
    CHECK(cv_vault_clear_offline_cache_sync(vault, &error), "cleared: %s", error ? error->code : "");
    CHECK(dispatch_until(vault, &cleared.destroyed, 10), "the cleared send ended");
    CHECK(strcmp(cleared.last_error, "ERROR_OFFLINE_MESSAGE_DISCARDED") == 0, "failed as discarded: %s", cleared.last_error);
    CHECK(cv_vault_is_offline_enabled(vault), "the cache still serves");
    page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 30, &error);
    CHECK(contains(page, "\"cached\":[]"), "nothing cached after the clear: %.200s", page);
    cv_free(page);
    char *none_left = cv_vault_get_pending_messages_sync(vault, &error);
    CHECK(none_left != NULL && strcmp(none_left, "[]") == 0, "no unsent message after the clear: %s", none_left);
    cv_free(none_left);
    CHECK(!cv_vault_clear_offline_cache_sync(NULL, &error), "a NULL vault");
    expect_argument_error(error, "clearing a NULL vault");
    error = NULL;
    CHECK(cv_simulator_set_online(sim, "alice", true, NULL), "online");

    /* The message listener removed: its destroy notifier once, silent after. */
    CHECK(cv_vault_remove_listener(vault, message_listener, &error), "the message listener removed");
    CHECK(messages.destroyed == 1, "destroyed once");
    int received = messages.received;
    CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", "after removal", NULL, &error), "posted");
    volatile int never = 0;
    dispatch_until(vault, &never, 1);
    CHECK(messages.received == received, "no message after removal");

    /* A listener removed: its destroy notifier once, its callback never. */
    reset_record removed = { 0 };
    unsigned id = cv_vault_add_reset_listener(vault, on_reset, &removed, on_reset_destroy, &error);
    CHECK(id > 0, "a listener id");
    CHECK(cv_vault_remove_listener(vault, id, &error), "removed");
    CHECK(removed.destroyed == 1, "destroyed once");
    CHECK(!cv_vault_remove_listener(vault, id, &error), "not twice");
    expect_argument_error(error, "a listener removed twice");
    error = NULL;

    /* No callback after free: a send started and its vault freed at once. */
    send_record orphan = { 0 };
    CHECK(cv_simulator_set_online(sim, "alice", false, NULL), "offline");
    CHECK(cv_vault_send_text(vault, CV_RECEIVER_USER, "bob", "orphan", on_send, &orphan, on_send_destroy, &error), "a send");
    cv_vault_free(vault);
    CHECK(orphan.destroyed == 1, "the destroy notifier ran at free (%d)", orphan.destroyed);
    int before = orphan.pending + orphan.sent + orphan.errors;
    sleep_ms(300);
    CHECK(orphan.pending + orphan.sent + orphan.errors == before, "no callback after free");
    CHECK(cv_vault_login_sync(vault, "alice", NULL, &error) == CV_OPEN_LOGGED_OUT, "a freed vault");
    expect_argument_error(error, "a freed vault");
    error = NULL;
    cv_vault_free(vault); /* a second free is ignored */
    CHECK(cv_simulator_set_online(sim, "alice", true, NULL), "online");

    /* The key is lost: the next login resets, and the listener hears it on this thread before
     * login returns, with the number of unsent messages lost (the orphan). */
    remove_files_in(keys);
    cv_vault *again = cv_vault_new_simulated(settings, sim, "alice", &error);
    CHECK(again != NULL, "a vault again");
    reset_record heard = { 0 };
    CHECK(cv_vault_add_reset_listener(again, on_reset, &heard, on_reset_destroy, &error) > 0, "a reset listener");
    state = cv_vault_login_sync(again, "alice", NULL, &error);
    CHECK(state == CV_OPEN_READY, "a new cache: %d", state);
    CHECK(heard.calls == 1, "one reset heard before login returned (%d)", heard.calls);
    CHECK(heard.reason == CV_RESET_KEY_LOST, "key lost (%d)", heard.reason);
    CHECK(heard.lost == 1 || heard.lost == CV_PENDING_COUNT_UNKNOWN, "pending lost %d", heard.lost);
    CHECK(heard.wrong_thread == 0, "on this thread");
    CHECK(cv_vault_logout_sync(again, &error), "logout");
    cv_vault_free(again);
    CHECK(heard.destroyed == 1, "the listener's destroy notifier ran at free");

    cv_simulator_free(sim);
    CHECK(!cv_simulator_add_user(sim, "carol", "Carol", &error), "a freed simulator");
    expect_argument_error(error, "a freed simulator");

    if (failures == 0)
        printf("test-capi: all checks passed\n");
    return failures == 0 ? 0 : 1;
}
