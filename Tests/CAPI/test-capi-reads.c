/* The C API's paged reads, lookups and settings, from C: message pages both ways (online, then
 * offline from the cache where the last page stopped), threads, users, groups and members, single
 * lookups in both phases, the settings' nested keys (a cooldown of 0 lets sweeps run back to back)
 * and every bad-input case (unknown keys, wrong types, out-of-range values, a request whose vault
 * was freed). Built by Scripts/test-capi from the installed prefix, under ASan and UBSan.
 *
 *     test-capi-reads WORKDIR        (a fresh private directory)
 */
#define _POSIX_C_SOURCE 200809L
#include <chatvault/chatvault.h>

#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The ids ("id":N) of the items in one phase ("cached" or "server") of a page; the phase's
 * array ends at the next top-level key, which the page writes in sorted order. */
typedef struct {
    int64_t ids[128];
    int count;
    bool present; /* the phase is an array, not null */
} id_list;

static id_list phase_ids(const char *page, const char *phase) {
    id_list list = { .count = 0, .present = false };
    char key[32];
    snprintf(key, sizeof key, "\"%s\":", phase);
    const char *start = page ? strstr(page, key) : NULL;
    if (start == NULL)
        return list;
    start += strlen(key);
    if (strncmp(start, "null", 4) == 0)
        return list;
    list.present = true;
    /* Top-level keys after the phase: "cached" < "server" < "serverError". */
    const char *end = strcmp(phase, "cached") == 0 ? strstr(start, "],\"server\":") : strstr(start, "],\"serverError\":");
    if (end == NULL)
        end = start + strlen(start);
    for (const char *p = strstr(start, "\"id\":"); p != NULL && p < end && list.count < 128; p = strstr(p + 1, "\"id\":"))
        list.ids[list.count++] = strtoll(p + 5, NULL, 10);
    return list;
}

static int64_t min_id(id_list l) {
    int64_t m = INT64_MAX;
    for (int i = 0; i < l.count; i++)
        if (l.ids[i] < m)
            m = l.ids[i];
    return m;
}

static int64_t max_id(id_list l) {
    int64_t m = 0;
    for (int i = 0; i < l.count; i++)
        if (l.ids[i] > m)
            m = l.ids[i];
    return m;
}

static int occurrences(const char *haystack, const char *needle) {
    int n = 0;
    for (const char *p = haystack ? strstr(haystack, needle) : NULL; p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test-capi-reads WORKDIR\n");
        return 2;
    }
    main_thread = pthread_self();
    const char *work = argv[1];
    char root[2048], keys[2048], settings[8192], bad[8192];
    snprintf(root, sizeof root, "%s/root", work);
    snprintf(keys, sizeof keys, "%s/keys", work);
    mkdir(root, 0700);
    mkdir(keys, 0700);
    const char *common = "\"enabled\": true, \"encryption\": true, \"applicationId\": \"org.chatvault.capireads\"";

    cv_error *error = NULL;
    cv_simulator *sim = cv_simulator_new(11);
    CHECK(cv_simulator_add_user(sim, "alice", "Alice", &error), "alice");
    CHECK(cv_simulator_add_user(sim, "bob", "Bob", &error), "bob");
    CHECK(cv_simulator_add_user(sim, "carol", "Carol", &error), "carol");
    CHECK(cv_simulator_add_group(sim, "team", "Team", "bob", &error), "a group");
    CHECK(cv_simulator_add_member(sim, "team", "alice", &error), "alice in the group");
    CHECK(cv_simulator_add_member(sim, "team", "carol", &error), "carol in the group");
    CHECK(!cv_simulator_add_member(sim, "no-such-group", "carol", &error) && error != NULL, "no such group");
    CHECK(error != NULL && strcmp(error->domain, CV_ERROR_DOMAIN_CHATVAULT) == 0, "a library error");
    cv_error_free(error);
    error = NULL;
    CHECK(!cv_simulator_add_group(sim, "", "Empty", NULL, &error), "an empty guid");
    expect_argument_error(error, "an empty guid");
    error = NULL;

    /* 45 messages from bob, a thread of 3 replies in the group. */
    int64_t first = 0, last = 0, id = 0;
    char text[64];
    for (int i = 0; i < 45; i++) {
        snprintf(text, sizeof text, "message %d", i);
        CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", text, &id, &error), "posted %d", i);
        if (i == 0)
            first = id;
        last = id;
    }
    int64_t parent = 0;
    CHECK(cv_simulator_post_text(sim, "carol", CV_RECEIVER_GROUP, "team", "a thread starts", &parent, &error), "a parent");
    for (int i = 0; i < 3; i++)
        CHECK(cv_simulator_post_reply(sim, "bob", CV_RECEIVER_GROUP, "team", parent, "a reply", NULL, &error), "reply %d", i);
    CHECK(!cv_simulator_post_reply(sim, "bob", CV_RECEIVER_GROUP, "team", 0, "x", NULL, &error), "a reply needs a parent");
    expect_argument_error(error, "a reply without a parent");
    error = NULL;

    /* Settings: every nested key checked, every value in range. */
    const char *refused[] = {
        "\"sync\": {\"bogus\": 1}",
        "\"sync\": {\"pageSize\": 0}",
        "\"sync\": \"fast\"",
        "\"retry\": {\"multiplier\": 0.5}",
        "\"retry\": {\"initialDelayMs\": 5000, \"maximumDelayMs\": 10}",
        "\"reconnect\": {\"initialDelayMs\": -1}",
        "\"media\": {\"backgroundConcurrency\": 9}",
        "\"quarantine\": {\"maxEntries\": \"three\"}",
        "\"escalationThreshold\": 0",
        "\"secretServiceTimeoutMs\": 1.5",
        "\"encryptionFailureBehavior\": \"sometimes\"",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(bad, sizeof bad, "{%s, \"keyStore\": \"memory\", %s}", common, refused[i]);
        CHECK(cv_vault_new_simulated(bad, sim, "alice", &error) == NULL, "refused: %s", refused[i]);
        expect_argument_error(error, refused[i]);
        error = NULL;
    }
    CHECK(cv_vault_new_simulated("{\"applicationId\": \"not a/valid id\"}", sim, "alice", &error) == NULL, "a bad application id");
    expect_argument_error(error, "a bad application id");
    error = NULL;

    snprintf(settings, sizeof settings,
             "{%s, \"rootDirectory\": \"%s\", \"keyStore\": \"software\", \"keyDirectory\": \"%s\", "
             "\"retry\": {\"initialDelayMs\": 200, \"maximumDelayMs\": 5000, \"multiplier\": 1.5}, "
             "\"reconnect\": {\"initialDelayMs\": 100, \"maximumDelayMs\": 2000}, \"escalationThreshold\": 5, "
             "\"quarantine\": {\"maxEntries\": 2, \"maxAgeDays\": 7}, \"evictionDelayMs\": 500, \"stableConnectionDelayMs\": 300, "
             "\"sync\": {\"forceCooldownMs\": 0, \"pageSize\": 500, \"flushWaitMs\": 1000}, "
             "\"media\": {\"maxFileBytes\": 1048576, \"idleTimeoutMs\": 5000, \"backgroundConcurrency\": 1}}",
             common, root, keys);
    cv_vault *vault = cv_vault_new_simulated(settings, sim, "alice", &error);
    CHECK(vault != NULL, "a vault with every nested setting: %s", error ? error->message : "");
    if (vault == NULL)
        return 1;
    CHECK(cv_vault_login_sync(vault, "alice", NULL, &error) == CV_OPEN_READY, "ready");

    /* A cooldown of 0: sweeps back to back are never refused (the default, 10 s, refuses the second). */
    int swept = 0, cooldowns = 0;
    for (int attempt = 0; attempt < 200 && swept < 3; attempt++) {
        if (cv_vault_force_sync_now_sync(vault, &error)) {
            swept++;
        } else {
            if (error != NULL && strcmp(error->code, "ERROR_OFFLINE_SYNC_COOLDOWN") == 0)
                cooldowns++;
            cv_error_free(error); /* ERROR_OFFLINE_SYNC_IN_PROGRESS: the login's own sweep */
            error = NULL;
            sleep_ms(20);
        }
    }
    CHECK(swept == 3 && cooldowns == 0, "three sweeps back to back: %d, refused for the cooldown %d", swept, cooldowns);

    /* Requests: bad input. */
    CHECK(cv_request_new(NULL, CV_REQUEST_MESSAGES, "{}", &error) == NULL, "a NULL vault");
    expect_argument_error(error, "a request on a NULL vault");
    error = NULL;
    CHECK(cv_request_new(vault, (cv_request_kind)42, "{}", &error) == NULL, "an out-of-range kind");
    expect_argument_error(error, "an out-of-range kind");
    error = NULL;
    CHECK(cv_request_new(vault, CV_REQUEST_MESSAGES, "{\"uid\": \"bob\", \"limitt\": 3}", &error) == NULL, "an unknown key");
    expect_argument_error(error, "an unknown query key");
    error = NULL;
    CHECK(cv_request_new(vault, CV_REQUEST_MESSAGES, "{\"uid\": \"bob\", \"guid\": \"team\"}", &error) == NULL, "uid and guid");
    expect_argument_error(error, "uid and guid");
    error = NULL;
    CHECK(cv_request_new(vault, CV_REQUEST_MESSAGES, "{\"uid\": \"bob\", \"limit\": 500}", &error) == NULL, "a limit of 500");
    expect_argument_error(error, "a limit of 500");
    error = NULL;
    CHECK(cv_request_new(vault, CV_REQUEST_MESSAGES, "[1, 2]", &error) == NULL, "not an object");
    expect_argument_error(error, "a query that is not an object");
    error = NULL;
    CHECK(cv_request_new(vault, CV_REQUEST_MESSAGES, "{\"uid\": \"\xc3\x28\"}", &error) == NULL, "invalid UTF-8");
    expect_argument_error(error, "invalid UTF-8 in a query");
    error = NULL;
    CHECK(cv_request_new(vault, CV_REQUEST_GROUP_MEMBERS, "{}", &error) == NULL, "members without a guid");
    expect_argument_error(error, "members without a guid");
    error = NULL;
    CHECK(cv_request_new(vault, CV_REQUEST_USERS, "{\"status\": \"asleep\"}", &error) == NULL, "an unknown status");
    expect_argument_error(error, "an unknown status");
    error = NULL;
    CHECK(cv_request_fetch_next_sync(NULL, &error) == NULL, "a NULL request");
    expect_argument_error(error, "a NULL request");
    error = NULL;
    CHECK(cv_request_fetch_next_sync((cv_request *)(void *)vault, &error) == NULL, "a vault as a request");
    expect_argument_error(error, "a vault as a request");
    error = NULL;
    cv_request_free(NULL);

    /* Message pages backwards, online: 20, 20, 5, each older than the one before, none twice. */
    cv_request *older = cv_request_new(vault, CV_REQUEST_MESSAGES, "{\"uid\": \"bob\", \"limit\": 20}", &error);
    CHECK(older != NULL, "a message request");
    int64_t floor_id = INT64_MAX;
    int expected[] = { 20, 20, 5 };
    int total = 0;
    for (int i = 0; i < 3; i++) {
        char *page = cv_request_fetch_previous_sync(older, &error);
        id_list server = phase_ids(page, "server");
        CHECK(server.present && server.count == expected[i], "page %d: %d messages (%.200s)", i, server.count, page);
        CHECK(max_id(server) < floor_id, "page %d is older than the one before", i);
        CHECK(contains(page, "\"serverError\":null"), "page %d: no server error", i);
        floor_id = min_id(server);
        total += server.count;
        cv_free(page);
    }
    CHECK(total == 45 && floor_id == first, "every message once, down to the first (%d, %lld)", total, (long long)floor_id);
    cv_request_free(older);

    /* Forwards from the first message: the next ten, newer, in order. */
    snprintf(bad, sizeof bad, "{\"uid\": \"bob\", \"limit\": 10, \"messageId\": %lld}", (long long)first);
    cv_request *newer = cv_request_new(vault, CV_REQUEST_MESSAGES, bad, &error);
    char *page = cv_request_fetch_next_sync(newer, &error);
    id_list forward = phase_ids(page, "server");
    CHECK(forward.count == 10 && min_id(forward) > first, "ten newer messages: %d (%.200s)", forward.count, page);
    CHECK(forward.count < 2 || forward.ids[0] < forward.ids[1], "oldest first");
    cv_free(page);
    page = cv_request_fetch_next_sync(newer, &error);
    id_list forward2 = phase_ids(page, "server");
    CHECK(forward2.count == 10 && min_id(forward2) > max_id(forward), "the next ten continue: %d", forward2.count);
    cv_free(page);
    cv_request_free(newer);

    /* The other kinds refuse to page backwards. */
    cv_request *conversations = cv_request_new(vault, CV_REQUEST_CONVERSATIONS, "{\"limit\": 10}", &error);
    CHECK(cv_request_fetch_previous_sync(conversations, &error) == NULL, "a conversation list has no previous page");
    expect_argument_error(error, "a conversation list backwards");
    error = NULL;
    page = cv_request_fetch_next_sync(conversations, &error);
    CHECK(contains(page, "\"with\":\"bob\"") && contains(page, "\"with\":\"team\""), "both conversations: %.300s", page);
    cv_free(page);
    cv_request_free(conversations);

    /* Threads, users, groups, members. */
    /* Alice took no part in the thread: the default (participatedByMe) lists none of it. */
    cv_request *mine = cv_request_new(vault, CV_REQUEST_THREADS, "{\"guid\": \"team\"}", &error);
    page = cv_request_fetch_next_sync(mine, &error);
    CHECK(contains(page, "\"server\":[]"), "no thread alice took part in: %.200s", page);
    cv_free(page);
    cv_request_free(mine);
    cv_request *threads = cv_request_new(vault, CV_REQUEST_THREADS, "{\"guid\": \"team\", \"participatedByMe\": false}", &error);
    CHECK(threads != NULL, "a thread request: %s", error ? error->message : "");
    page = cv_request_fetch_next_sync(threads, &error);
    snprintf(text, sizeof text, "\"parentMessageId\":%lld", (long long)parent);
    CHECK(contains(page, text) && contains(page, "\"replyCount\":3"), "the thread with its 3 replies: %.400s", page);
    CHECK(contains(page, "a thread starts"), "its parent message");
    cv_free(page);
    cv_request_free(threads);

    snprintf(bad, sizeof bad, "{\"parentMessageId\": %lld, \"guid\": \"team\"}", (long long)parent);
    cv_request *replies = cv_request_new(vault, CV_REQUEST_MESSAGES, bad, &error);
    page = cv_request_fetch_previous_sync(replies, &error);
    CHECK(phase_ids(page, "server").count == 3, "the thread's replies: %.300s", page);
    cv_free(page);
    cv_request_free(replies);

    cv_request *users = cv_request_new(vault, CV_REQUEST_USERS, "{\"limit\": 50}", &error);
    page = cv_request_fetch_next_sync(users, &error);
    CHECK(contains(page, "\"uid\":\"bob\"") && contains(page, "\"uid\":\"carol\"") && contains(page, "\"name\":\"Carol\""),
          "the users: %.300s", page);
    cv_free(page);
    cv_request_free(users);
    cv_request *search = cv_request_new(vault, CV_REQUEST_USERS, "{\"searchKeyword\": \"car\"}", &error);
    page = cv_request_fetch_next_sync(search, &error);
    CHECK(contains(page, "\"uid\":\"carol\"") && !contains(page, "\"uid\":\"bob\""), "a search finds carol only: %.300s", page);
    cv_free(page);
    cv_request_free(search);

    cv_request *groups = cv_request_new(vault, CV_REQUEST_GROUPS, "{\"joinedOnly\": true}", &error);
    page = cv_request_fetch_next_sync(groups, &error);
    CHECK(contains(page, "\"guid\":\"team\"") && contains(page, "\"name\":\"Team\"") && contains(page, "\"owner\":\"bob\""),
          "the group: %.300s", page);
    cv_free(page);
    cv_request_free(groups);

    cv_request *members = cv_request_new(vault, CV_REQUEST_GROUP_MEMBERS, "{\"guid\": \"team\"}", &error);
    page = cv_request_fetch_next_sync(members, &error);
    CHECK(contains(page, "\"uid\":\"carol\"") && contains(page, "\"scope\":\"participant\"") && contains(page, "\"scope\":\"admin\""),
          "the members with their scopes: %.400s", page);
    CHECK(occurrences(strstr(page ? page : "", "\"server\":"), "\"uid\":") == 3, "three members on the server");
    cv_free(page);
    cv_request_free(members);

    /* Lookups, both phases. */
    page = cv_vault_get_message_sync(vault, last, &error);
    snprintf(text, sizeof text, "\"id\":%lld", (long long)last);
    CHECK(contains(page, "\"cached\":{") && contains(page, "\"server\":{") && contains(page, text), "a message in both phases: %.300s", page);
    CHECK(contains(page, "message 44"), "its text");
    cv_free(page);
    CHECK(cv_vault_get_message_sync(vault, 0, &error) == NULL, "message id 0");
    expect_argument_error(error, "message id 0");
    error = NULL;
    page = cv_vault_get_conversation_sync(vault, CV_RECEIVER_GROUP, "team", &error);
    CHECK(contains(page, "\"server\":{") && contains(page, "\"with\":\"team\""), "the group conversation: %.300s", page);
    cv_free(page);
    CHECK(cv_vault_get_conversation_sync(vault, (cv_receiver_type)9, "team", &error) == NULL, "an out-of-range type");
    expect_argument_error(error, "an out-of-range receiver type");
    error = NULL;

    /* Offline: pages come from the cache, continuing where the last cached page stopped. */
    CHECK(cv_simulator_set_online(sim, "alice", false, &error), "offline");
    cv_request *offline = cv_request_new(vault, CV_REQUEST_MESSAGES, "{\"uid\": \"bob\", \"limit\": 20}", &error);
    page = cv_request_fetch_previous_sync(offline, &error);
    id_list cached1 = phase_ids(page, "cached");
    CHECK(cached1.count == 20 && max_id(cached1) == last, "the newest 20 from the cache: %d", cached1.count);
    CHECK(contains(page, "\"server\":null") && contains(page, "ERROR_INTERNET_UNAVAILABLE"), "the server phase says offline");
    cv_free(page);
    page = cv_request_fetch_previous_sync(offline, &error);
    id_list cached2 = phase_ids(page, "cached");
    CHECK(cached2.count == 20 && max_id(cached2) < min_id(cached1), "the next 20 older, from the cache: %d", cached2.count);
    cv_free(page);
    page = cv_vault_get_message_sync(vault, first, &error);
    CHECK(contains(page, "\"cached\":{") && contains(page, "ERROR_INTERNET_UNAVAILABLE"), "a lookup offline: cached, then offline");
    cv_free(page);
    CHECK(cv_simulator_set_online(sim, "alice", true, &error), "online");

    /* A request outlives its vault only as a refusal. */
    cv_vault_free(vault);
    CHECK(cv_request_fetch_previous_sync(offline, &error) == NULL, "the vault was freed");
    expect_argument_error(error, "a request whose vault was freed");
    error = NULL;
    cv_request_free(offline);
    cv_simulator_free(sim);

    if (failures == 0)
        printf("test-capi-reads: all checks passed\n");
    return failures == 0 ? 0 : 1;
}
