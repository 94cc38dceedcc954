/* The C API's local search, from C: hits with their snippets, and matches as UTF-8 byte offsets
 * that slice the found word out of the text and the snippet (accents, CJK, an excerpt cut with
 * "…" and an ideographic space); paging with a cursor until there is none, none twice; the options
 * (conversation, sender, types, categories, time range, each order, the limit); hostile queries as
 * ERROR_INVALID_SEARCH_QUERY or as plain words, never a crash; the asynchronous form through
 * cv_vault_dispatch (on the main thread, its destroy notifier once, nothing after free); the index
 * progress and its listener; every bad handle and value refused. Built by Scripts/test-capi from
 * the installed prefix, under ASan and UBSan and under valgrind (every page, cursor, string and
 * error freed).
 *
 *     test-capi-search WORKDIR        (a fresh private directory)
 */
#define _POSIX_C_SOURCE 200809L
#include <chatvault/chatvault.h>

#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define QUERY_ERROR "ERROR_INVALID_SEARCH_QUERY"

/* `length` bytes of `s` from `start`, as a new string (the caller frees). */
static char *slice(const char *s, cv_search_match m) {
    char *out = malloc(m.length + 1);
    memcpy(out, s + m.start, m.length);
    out[m.length] = '\0';
    return out;
}

/* The hit's message "id". */
static int64_t hit_id(cv_search_page *page, size_t i) {
    char *json = cv_search_page_get_message(page, i, NULL);
    const char *p = json ? strstr(json, "\"id\":") : NULL;
    int64_t id = p ? strtoll(p + 5, NULL, 10) : -1;
    cv_free(json);
    return id;
}

/* Every match of hit `i` in `field` slices out `word` (compared without case: the query is
 * folded); answers how many matches there were (-1 when one did not). */
static int matches_are(cv_search_page *page, size_t i, cv_search_field field, const char *word) {
    cv_error *error = NULL;
    char *s = field == CV_SEARCH_FIELD_TEXT ? cv_search_page_get_text(page, i, &error) : cv_search_page_get_snippet(page, i, &error);
    cv_search_match *marks = NULL;
    size_t n = 99;
    bool ok = cv_search_page_get_matches(page, i, field, &marks, &n, &error);
    CHECK(ok && error == NULL && s != NULL, "the matches of hit %zu", i);
    cv_error_free(error);
    int count = (int)n;
    for (size_t k = 0; ok && k < n; k++) {
        CHECK(marks[k].start + marks[k].length <= strlen(s), "match %zu inside the string", k);
        char *found = slice(s, marks[k]);
        if (strcasecmp(found, word) != 0) {
            fprintf(stderr, "  hit %zu match %zu: \"%s\" in \"%s\"\n", i, k, found, s);
            count = -1;
        }
        free(found);
    }
    CHECK(n == 0 || marks != NULL, "an array for %zu matches", n);
    cv_free(marks);
    cv_free(s);
    return count;
}

/* A synchronous search that must answer a page. */
static cv_search_page *search(cv_vault *vault, const char *query, const cv_search_options *options) {
    cv_error *error = NULL;
    cv_search_page *page = cv_vault_search_cached_messages_sync(vault, query, options, &error);
    CHECK(page != NULL && error == NULL, "a page for \"%s\": %s", query, error ? error->message : "");
    cv_error_free(error);
    return page;
}

/* How many hits a search finds with `options` (every page, -1 on error). */
static int count_hits(cv_vault *vault, const char *query, cv_search_options *options) {
    cv_search_page *page = search(vault, query, options);
    int n = page ? (int)cv_search_page_get_hit_count(page) : -1;
    cv_search_page_free(page);
    return n;
}

/* The asynchronous form's answer, and its destroy notifier. */
typedef struct {
    int called;
    int destroyed;
    bool on_main;
    bool destroyed_after_call;
    cv_search_page *page;
    char code[64];
} async_search;

static void on_search(cv_search_page *page, const cv_error *error, void *user_data) {
    async_search *s = user_data;
    s->called++;
    s->on_main = s->on_main && pthread_equal(pthread_self(), main_thread);
    s->page = page;
    snprintf(s->code, sizeof s->code, "%s", error ? error->code : "");
}

static void on_search_destroyed(void *user_data) {
    async_search *s = user_data;
    s->destroyed++;
    s->destroyed_after_call = s->called == 1;
}

/* The index listener's reports. */
typedef struct {
    int heard;
    int destroyed;
    bool on_main;
    int64_t indexed, total;
    bool complete;
} index_listener;

static void on_index(int64_t indexed, int64_t total, bool complete, void *user_data) {
    index_listener *l = user_data;
    l->heard++;
    l->on_main = l->on_main && pthread_equal(pthread_self(), main_thread);
    l->indexed = indexed;
    l->total = total;
    l->complete = complete;
}

static void on_index_destroyed(void *user_data) {
    ((index_listener *)user_data)->destroyed++;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test-capi-search WORKDIR\n");
        return 2;
    }
    main_thread = pthread_self();
    const char *work = argv[1];
    char root[2048], keys[2048], settings[8192], text[512];
    snprintf(root, sizeof root, "%s/root", work);
    snprintf(keys, sizeof keys, "%s/keys", work);
    mkdir(root, 0700);
    mkdir(keys, 0700);

    cv_error *error = NULL;
    cv_simulator *sim = cv_simulator_new(24);
    CHECK(cv_simulator_add_user(sim, "alice", "Alice", &error), "alice");
    CHECK(cv_simulator_add_user(sim, "bob", "Bob", &error), "bob");
    CHECK(cv_simulator_add_user(sim, "carol", "Carol", &error), "carol");
    CHECK(cv_simulator_add_group(sim, "team", "Team", "bob", &error), "a group");
    CHECK(cv_simulator_add_member(sim, "team", "alice", &error), "alice in the group");
    CHECK(cv_simulator_add_member(sim, "team", "carol", &error), "carol in the group");

    /* 25 trains from bob, then the texts the highlights are checked on; two trains in the group. */
    int64_t trains[25];
    for (int i = 0; i < 25; i++) {
        snprintf(text, sizeof text, "Train %02d leaves from platform %d", i, i % 4);
        CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", text, &trains[i], &error), "train %d", i);
    }
    const char *dessert = "Crème brûlée au café, près de la gare de 東京駅";
    int64_t dessert_id = 0, long_id = 0, group_carol = 0, group_bob = 0;
    CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", dessert, &dessert_id, &error), "the dessert");
    /* A long text: the needle after 40 words and an ideographic space, 20 words after it. */
    char longer[1024] = "";
    for (int i = 0; i < 40; i++) {
        snprintf(text, sizeof text, "word%d ", i);
        strcat(longer, text);
    }
    strcat(longer, "\xe3\x80\x80needle");
    for (int i = 0; i < 20; i++) {
        snprintf(text, sizeof text, " tail%d", i);
        strcat(longer, text);
    }
    CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", longer, &long_id, &error), "the long text");
    CHECK(cv_simulator_post_text(sim, "carol", CV_RECEIVER_GROUP, "team", "the train to the mountains", &group_carol, &error), "carol");
    CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_GROUP, "team", "a train of thought", &group_bob, &error), "bob in the group");

    snprintf(settings, sizeof settings,
             "{\"enabled\": true, \"encryption\": true, \"applicationId\": \"org.chatvault.capisearch\", \"rootDirectory\": \"%s\", "
             "\"keyStore\": \"software\", \"keyDirectory\": \"%s\"}",
             root, keys);
    cv_vault *vault = cv_vault_new_simulated(settings, sim, "alice", &error);
    CHECK(vault != NULL, "a vault: %s", error ? error->message : "");
    if (vault == NULL)
        return 1;

    /* Before login: no cache to search or measure. */
    CHECK(cv_vault_search_cached_messages_sync(vault, "train", NULL, &error) == NULL, "no cache");
    expect_error(error, CV_ERROR_DOMAIN_CHATVAULT, "ERROR_OFFLINE_DISABLED", "a search before login");
    error = NULL;
    int64_t indexed = -1, total = -1;
    bool complete = false;
    CHECK(!cv_vault_get_search_index_progress(vault, &indexed, &total, &complete, &error), "no progress before login");
    expect_error(error, CV_ERROR_DOMAIN_CHATVAULT, "ERROR_OFFLINE_DISABLED", "progress before login");
    error = NULL;

    /* The index listener, registered before login, hears the index complete after it. */
    index_listener first = { .on_main = true };
    unsigned first_id = cv_vault_add_search_index_listener(vault, on_index, &first, on_index_destroyed, &error);
    CHECK(first_id > 0, "an index listener");
    CHECK(cv_vault_login_sync(vault, "alice", NULL, &error) == CV_OPEN_READY, "ready");
    double deadline = now_seconds() + 20;
    while (!first.complete && now_seconds() < deadline)
        dispatch_for(vault, 0.05);
    CHECK(first.heard >= 1 && first.complete && first.indexed == first.total, "the listener heard the index complete (%d: %lld of %lld)",
          first.heard, (long long)first.indexed, (long long)first.total);
    CHECK(first.on_main, "the listener ran on the main thread");

    /* Cached through reads (the server phase writes what it brings), then indexed as written. */
    char *page_json = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 100, &error);
    CHECK(contains(page_json, "needle"), "bob's conversation read");
    const char *sent = page_json ? strstr(page_json, "\"sentAt\":") : NULL;
    int64_t sent_at = sent ? strtoll(sent + 9, NULL, 10) : 0;
    CHECK(sent_at > 0, "a sentAt");
    cv_free(page_json);
    page_json = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_GROUP, "team", 100, &error);
    CHECK(contains(page_json, "mountains"), "the group read");
    cv_free(page_json);
    CHECK(cv_vault_wait_for_search_index_sync(vault, &error), "the index built");
    CHECK(cv_vault_get_search_index_progress(vault, &indexed, &total, &complete, &error), "progress");
    /* Complete; its counts are the build's last report (at login), not those of the messages
     * cached since (they are indexed as written: the page below counts them). */
    CHECK(complete && indexed == total, "every message indexed: %lld of %lld", (long long)indexed, (long long)total);
    CHECK(cv_vault_get_search_index_progress(vault, NULL, NULL, NULL, &error), "progress with no outputs");

    /* The dessert: accents folded, the word sliced out of the text and the snippet by bytes. */
    cv_search_page *page = search(vault, "brulee", NULL);
    CHECK(cv_search_page_get_hit_count(page) == 1 && hit_id(page, 0) == dessert_id, "one dessert");
    char *found = cv_search_page_get_text(page, 0, &error);
    CHECK(found != NULL && strcmp(found, dessert) == 0, "the searched text: %s", found);
    cv_free(found);
    char *message = cv_search_page_get_message(page, 0, &error);
    CHECK(contains(message, "\"sender\":\"bob\"") && contains(message, "\"type\":\"text\"") && contains(message, "Crème brûlée"),
          "the message as JSON: %.300s", message);
    cv_free(message);
    CHECK(matches_are(page, 0, CV_SEARCH_FIELD_TEXT, "brûlée") == 1, "brûlée in the text");
    CHECK(matches_are(page, 0, CV_SEARCH_FIELD_SNIPPET, "brûlée") == 1, "brûlée in the snippet");
    cv_search_match *marks = NULL;
    size_t n = 0;
    CHECK(cv_search_page_get_matches(page, 0, CV_SEARCH_FIELD_TEXT, &marks, &n, &error) && n == 1, "one match");
    CHECK(n == 1 && marks[0].start == strlen("Crème ") && marks[0].length == strlen("brûlée"), "at byte 7, 8 bytes long: %zu, %zu",
          n ? marks[0].start : 0, n ? marks[0].length : 0);
    cv_free(marks);
    bool page_complete = false;
    int64_t page_indexed = 0, page_total = 0;
    CHECK(cv_search_page_get_index_progress(page, &page_indexed, &page_total, &page_complete, &error), "the page's progress");
    CHECK(page_complete && page_indexed == 29 && page_total == 29, "the page says the index was complete");
    cv_search_cursor *none = cv_search_page_get_next_cursor(page, &error);
    CHECK(none == NULL && error == NULL, "one hit: no next page");
    cv_search_page_free(page);

    page = search(vault, "cafe", NULL);
    CHECK(cv_search_page_get_hit_count(page) == 1 && matches_are(page, 0, CV_SEARCH_FIELD_SNIPPET, "café") == 1, "café");
    cv_search_page_free(page);
    page = search(vault, "東京", NULL);
    CHECK(cv_search_page_get_hit_count(page) == 1 && matches_are(page, 0, CV_SEARCH_FIELD_TEXT, "東京") == 1, "東京 in the text");
    CHECK(matches_are(page, 0, CV_SEARCH_FIELD_SNIPPET, "東京") == 1, "東京 in the snippet");
    cv_search_page_free(page);

    /* The long text: the snippet is cut ("…" first), the needle at another offset in each. */
    page = search(vault, "needle", NULL);
    CHECK(cv_search_page_get_hit_count(page) == 1 && hit_id(page, 0) == long_id, "the long text");
    char *snippet = cv_search_page_get_snippet(page, 0, &error);
    CHECK(snippet != NULL && strncmp(snippet, "\xe2\x80\xa6", 3) == 0 && strlen(snippet) < strlen(longer), "a cut snippet: %s", snippet);
    cv_free(snippet);
    CHECK(matches_are(page, 0, CV_SEARCH_FIELD_TEXT, "needle") == 1, "needle in the text");
    CHECK(matches_are(page, 0, CV_SEARCH_FIELD_SNIPPET, "needle") == 1, "needle in the snippet");
    cv_search_match *in_text = NULL, *in_snippet = NULL;
    size_t n_text = 0, n_snippet = 0;
    cv_search_page_get_matches(page, 0, CV_SEARCH_FIELD_TEXT, &in_text, &n_text, NULL);
    cv_search_page_get_matches(page, 0, CV_SEARCH_FIELD_SNIPPET, &in_snippet, &n_snippet, NULL);
    CHECK(n_text == 1 && n_snippet == 1 && in_text[0].start == (size_t)(strstr(longer, "needle") - longer) && in_snippet[0].start < in_text[0].start,
          "the text's offset is the needle's; the snippet's is smaller");
    cv_free(in_text);
    cv_free(in_snippet);
    cv_search_page_free(page);

    /* Paging bob's trains 10 at a time, newest first: 10, 10, 5, then no cursor; none twice. */
    cv_search_options *options = cv_search_options_new();
    CHECK(options != NULL, "options");
    CHECK(cv_search_options_set_conversation(options, CV_RECEIVER_USER, "bob", &error), "bob's conversation");
    CHECK(cv_search_options_set_limit(options, 10, &error), "a limit of 10");
    int64_t newest[25];
    int seen = 0, pages = 0;
    bool paged_well = true;
    for (;;) {
        page = search(vault, "train", options);
        if (page == NULL)
            break;
        size_t count = cv_search_page_get_hit_count(page);
        int expected_count = pages < 2 ? 10 : 5;
        CHECK((int)count == expected_count, "page %d: %zu hits", pages, count);
        for (size_t i = 0; i < count && seen < 25; i++) {
            newest[seen++] = hit_id(page, i);
            if (matches_are(page, i, CV_SEARCH_FIELD_TEXT, "train") != 1 || matches_are(page, i, CV_SEARCH_FIELD_SNIPPET, "train") != 1)
                paged_well = false;
        }
        cv_search_cursor *next = cv_search_page_get_next_cursor(page, &error);
        cv_search_page_free(page);
        pages++;
        if (next == NULL || pages > 5) {
            cv_search_cursor_free(next);
            break;
        }
        /* A copy serves as well as the original (which goes first). */
        cv_search_cursor *copy = cv_search_cursor_copy(next, &error);
        cv_search_cursor_free(next);
        CHECK(cv_search_options_set_cursor(options, copy, &error), "the cursor set");
        cv_search_cursor_free(copy);
    }
    CHECK(paged_well, "every match is the word");
    CHECK(pages == 3 && seen == 25, "three pages, 25 trains: %d, %d", pages, seen);
    int distinct = 0;
    for (int i = 0; i < 25; i++) {
        bool posted = false, twice = false;
        for (int j = 0; j < 25; j++) {
            posted = posted || newest[i] == trains[j];
            twice = twice || (j != i && j < seen && newest[j] == newest[i]);
        }
        distinct += posted && !twice;
    }
    CHECK(distinct == 25, "each train once: %d", distinct);

    /* Oldest first is newest first backwards; by relevance every train too. */
    CHECK(cv_search_options_set_cursor(options, NULL, &error), "the first page again");
    CHECK(cv_search_options_set_limit(options, 100, &error), "a limit of 100");
    CHECK(cv_search_options_set_order(options, CV_SEARCH_ORDER_OLDEST_FIRST, &error), "oldest first");
    page = search(vault, "train", options);
    bool reversed = page != NULL && cv_search_page_get_hit_count(page) == 25;
    for (size_t i = 0; reversed && i < 25; i++)
        reversed = hit_id(page, i) == newest[24 - i];
    CHECK(reversed, "oldest first reverses newest first");
    cv_search_page_free(page);
    CHECK(cv_search_options_set_order(options, CV_SEARCH_ORDER_RELEVANCE, &error), "relevance");
    CHECK(count_hits(vault, "train", options) == 25, "by relevance, every train");
    CHECK(count_hits(vault, "train platform", options) == 25, "two words");
    CHECK(count_hits(vault, "\"platform 3\"", options) == 6, "a phrase");
    CHECK(count_hits(vault, "train -platform", options) == 0, "an exclusion");
    CHECK(count_hits(vault, "pla*", options) == 25, "a prefix");

    /* The other options. */
    CHECK(cv_search_options_set_order(options, CV_SEARCH_ORDER_NEWEST_FIRST, &error), "newest first");
    CHECK(cv_search_options_set_conversation(options, CV_RECEIVER_GROUP, "team", &error), "the group");
    CHECK(count_hits(vault, "train", options) == 2, "two trains in the group");
    CHECK(cv_search_options_set_sender(options, "carol", &error), "carol's");
    page = search(vault, "train", options);
    CHECK(page && cv_search_page_get_hit_count(page) == 1 && hit_id(page, 0) == group_carol, "carol's train");
    cv_search_page_free(page);
    CHECK(cv_search_options_set_sender(options, NULL, &error), "anyone's");
    CHECK(cv_search_options_set_conversation(options, CV_RECEIVER_USER, NULL, &error), "every conversation");
    CHECK(count_hits(vault, "train", options) == 27, "27 trains in all");
    const char *image[] = { "image", "file", NULL };
    const char *texts[] = { "text", NULL };
    const char *messages[] = { "message", NULL };
    const char *custom[] = { "custom", NULL };
    CHECK(cv_search_options_set_types(options, image, &error), "images and files");
    CHECK(count_hits(vault, "train", options) == 0, "no image train");
    CHECK(cv_search_options_set_types(options, texts, &error), "texts");
    CHECK(count_hits(vault, "train", options) == 27, "every train is a text");
    CHECK(cv_search_options_set_types(options, NULL, &error), "any type");
    CHECK(cv_search_options_set_categories(options, custom, &error), "custom");
    CHECK(count_hits(vault, "train", options) == 0, "no custom train");
    CHECK(cv_search_options_set_categories(options, messages, &error), "messages");
    CHECK(count_hits(vault, "train", options) == 27, "every train a message");
    CHECK(cv_search_options_set_time_range(options, sent_at + 1, 0, &error), "after them");
    CHECK(count_hits(vault, "train", options) == 0, "none sent after");
    CHECK(cv_search_options_set_time_range(options, sent_at, sent_at + 1, &error), "around them");
    CHECK(count_hits(vault, "train", options) == 27, "all sent then");
    CHECK(cv_search_options_set_time_range(options, 0, sent_at, &error), "before them");
    CHECK(count_hits(vault, "train", options) == 0, "none sent before");
    CHECK(cv_search_options_set_time_range(options, 0, 0, &error), "no bounds");
    CHECK(count_hits(vault, "train", options) == 27, "no bounds again");

    /* Hostile queries: typed errors when there is nothing to look for, otherwise plain words. */
    char too_long[2100];
    memset(too_long, 'a', 2000);
    too_long[2000] = '\0';
    char many[512] = "";
    for (int i = 0; i < 40; i++) {
        snprintf(text, sizeof text, "w%d ", i);
        strcat(many, text);
    }
    const char *invalid[] = { "", "   ", "\"\"", "* - ( ) : ^", "-train", "-train -platform", too_long, many };
    const char *details[] = { "empty", "empty", "empty", "empty", "onlyExclusions", "onlyExclusions", "tooLong", "tooManyTerms" };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        CHECK(cv_vault_search_cached_messages_sync(vault, invalid[i], NULL, &error) == NULL, "refused: %.40s", invalid[i]);
        CHECK(error != NULL && error->details != NULL && strcmp(error->details, details[i]) == 0, "details of %.40s: %s", invalid[i],
              error && error->details ? error->details : "(none)");
        expect_error(error, CV_ERROR_DOMAIN_CHATVAULT, QUERY_ERROR, invalid[i]);
        error = NULL;
    }
    const char *words[] = { "train OR bus", "NEAR(train platform)", "train) OR (x", "body:train", "'; DROP TABLE messages; --",
                            "\"unterminated train", "train\x01\x7f", "train*** -", "^train" };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        page = cv_vault_search_cached_messages_sync(vault, words[i], NULL, &error);
        CHECK(page != NULL && error == NULL, "taken as words: %s (%s)", words[i], error ? error->code : "");
        cv_error_free(error);
        error = NULL;
        cv_search_page_free(page);
    }
    CHECK(count_hits(vault, "train", NULL) == 20, "the messages are all still there (the default limit: 20)");

    /* Offline: the cache answers alone. */
    CHECK(cv_simulator_set_online(sim, "alice", false, &error), "offline");
    CHECK(count_hits(vault, "mountains", NULL) == 1, "found offline");
    CHECK(cv_simulator_set_online(sim, "alice", true, &error), "online");

    /* The asynchronous form: the page through dispatch, on the main thread, destroy after. */
    async_search found_async = { .on_main = true };
    CHECK(cv_vault_search_cached_messages(vault, "mountains", options, on_search, &found_async, on_search_destroyed, &error), "started");
    cv_search_options_free(options); /* copied by the search */
    options = NULL;
    dispatch_until(vault, &found_async.destroyed, 20);
    CHECK(found_async.called == 1 && found_async.destroyed == 1 && found_async.destroyed_after_call, "called once, then destroyed");
    CHECK(found_async.on_main, "on the main thread");
    CHECK(found_async.page != NULL && cv_search_page_get_hit_count(found_async.page) == 1 &&
              hit_id(found_async.page, 0) == group_carol, "the page, the receiver's");
    cv_search_page_free(found_async.page);
    async_search refused_async = { .on_main = true };
    CHECK(cv_vault_search_cached_messages(vault, "  ", NULL, on_search, &refused_async, on_search_destroyed, &error), "started");
    dispatch_until(vault, &refused_async.destroyed, 20);
    CHECK(refused_async.called == 1 && refused_async.page == NULL && strcmp(refused_async.code, QUERY_ERROR) == 0,
          "the error through the callback: %s", refused_async.code);
    CHECK(refused_async.destroyed == 1 && refused_async.destroyed_after_call, "then destroyed");

    /* Bad handles and values, each refused as an argument before anything runs. */
    options = cv_search_options_new();
    CHECK(cv_vault_search_cached_messages_sync(NULL, "train", NULL, &error) == NULL, "a NULL vault");
    expect_argument_error(error, "a NULL vault");
    error = NULL;
    CHECK(cv_vault_search_cached_messages_sync(vault, NULL, NULL, &error) == NULL, "a NULL query");
    expect_argument_error(error, "a NULL query");
    error = NULL;
    CHECK(cv_vault_search_cached_messages_sync(vault, "tr\xc3\x28in", NULL, &error) == NULL, "invalid UTF-8");
    expect_argument_error(error, "an invalid UTF-8 query");
    error = NULL;
    CHECK(cv_vault_search_cached_messages_sync(vault, "train", (cv_search_options *)(void *)vault, &error) == NULL, "a vault as options");
    expect_argument_error(error, "a vault as options");
    error = NULL;
    CHECK(!cv_vault_search_cached_messages(vault, "train", NULL, NULL, NULL, NULL, &error), "no callback");
    expect_argument_error(error, "a search without a callback");
    error = NULL;
    CHECK(!cv_vault_search_cached_messages((cv_vault *)(void *)options, "train", NULL, on_search, NULL, NULL, &error), "options as a vault");
    expect_argument_error(error, "options as a vault");
    error = NULL;
    CHECK(!cv_search_options_set_limit(options, 0, &error), "a limit of 0");
    expect_argument_error(error, "a limit of 0");
    error = NULL;
    CHECK(!cv_search_options_set_limit(options, 101, &error), "a limit of 101");
    expect_argument_error(error, "a limit of 101");
    error = NULL;
    CHECK(!cv_search_options_set_order(options, (cv_search_order)7, &error), "an out-of-range order");
    expect_argument_error(error, "an out-of-range order");
    error = NULL;
    CHECK(!cv_search_options_set_conversation(options, (cv_receiver_type)9, "bob", &error), "an out-of-range receiver type");
    expect_argument_error(error, "an out-of-range receiver type");
    error = NULL;
    CHECK(!cv_search_options_set_conversation(options, CV_RECEIVER_USER, "", &error), "an empty id");
    expect_argument_error(error, "an empty conversation id");
    error = NULL;
    CHECK(!cv_search_options_set_sender(options, "\xff", &error), "an invalid sender");
    expect_argument_error(error, "an invalid UTF-8 sender");
    error = NULL;
    CHECK(!cv_search_options_set_time_range(options, -1, 0, &error), "a negative time");
    expect_argument_error(error, "a negative time");
    error = NULL;
    const char *empty_type[] = { "text", "", NULL };
    CHECK(!cv_search_options_set_types(options, empty_type, &error), "an empty type");
    expect_argument_error(error, "an empty type");
    error = NULL;
    const char *bad_category[] = { "\xc3\x28", NULL };
    CHECK(!cv_search_options_set_categories(options, bad_category, &error), "an invalid category");
    expect_argument_error(error, "an invalid UTF-8 category");
    error = NULL;
    const char *lots[102];
    for (int i = 0; i < 101; i++)
        lots[i] = "text";
    lots[101] = NULL;
    CHECK(!cv_search_options_set_types(options, lots, &error), "101 types");
    expect_argument_error(error, "101 types");
    error = NULL;
    CHECK(!cv_search_options_set_cursor(options, (cv_search_cursor *)(void *)options, &error), "options as a cursor");
    expect_argument_error(error, "options as a cursor");
    error = NULL;
    CHECK(!cv_search_options_set_limit(NULL, 10, &error), "NULL options");
    expect_argument_error(error, "NULL options");
    error = NULL;
    CHECK(cv_search_cursor_copy(NULL, &error) == NULL, "a NULL cursor");
    expect_argument_error(error, "copying a NULL cursor");
    error = NULL;
    CHECK(cv_search_page_get_hit_count(NULL) == 0, "a NULL page has no hits");
    CHECK(cv_search_page_get_text(NULL, 0, &error) == NULL, "a NULL page");
    expect_argument_error(error, "a NULL page");
    error = NULL;
    CHECK(cv_search_page_get_next_cursor((cv_search_page *)(void *)options, &error) == NULL, "options as a page");
    expect_argument_error(error, "options as a page");
    error = NULL;
    CHECK(!cv_search_page_get_index_progress(NULL, NULL, NULL, NULL, &error), "a NULL page's progress");
    expect_argument_error(error, "a NULL page's progress");
    error = NULL;
    page = search(vault, "mountains", NULL);
    CHECK(cv_search_page_get_snippet(page, 1, &error) == NULL, "past the last hit");
    expect_argument_error(error, "an index past the last hit");
    error = NULL;
    CHECK(cv_search_page_get_message(page, (size_t)-1, &error) == NULL, "SIZE_MAX");
    expect_argument_error(error, "SIZE_MAX as an index");
    error = NULL;
    marks = (cv_search_match *)(void *)page;
    n = 7;
    CHECK(!cv_search_page_get_matches(page, 0, (cv_search_field)5, &marks, &n, &error) && marks == NULL && n == 0, "an out-of-range field");
    expect_argument_error(error, "an out-of-range field");
    error = NULL;
    CHECK(!cv_search_page_get_matches(page, 0, CV_SEARCH_FIELD_TEXT, NULL, &n, &error), "no matches_out");
    expect_argument_error(error, "a NULL matches_out");
    error = NULL;
    CHECK(!cv_vault_get_search_index_progress(NULL, NULL, NULL, NULL, &error), "a NULL vault's progress");
    expect_argument_error(error, "a NULL vault's progress");
    error = NULL;
    CHECK(!cv_vault_wait_for_search_index_sync(NULL, &error), "waiting on a NULL vault");
    expect_argument_error(error, "waiting on a NULL vault");
    error = NULL;
    CHECK(cv_vault_add_search_index_listener(vault, NULL, NULL, NULL, &error) == 0, "a listener without a callback");
    expect_argument_error(error, "a listener without a callback");
    error = NULL;
    cv_search_options_free(options);
    cv_search_options_free(NULL);
    cv_search_page_free(NULL);
    cv_search_cursor_free(NULL);
    CHECK(!cv_search_options_set_limit(options, 10, &error), "freed options");
    expect_argument_error(error, "freed options");
    error = NULL;

    /* The first listener removed; a second one hears the next login, the first nothing more. */
    CHECK(cv_vault_remove_listener(vault, first_id, &error) && first.destroyed == 1, "the first listener removed, destroyed once");
    int heard_before = first.heard;
    index_listener second = { .on_main = true };
    unsigned second_id = cv_vault_add_search_index_listener(vault, on_index, &second, on_index_destroyed, &error);
    CHECK(second_id > 0 && second_id != first_id, "a second listener");
    CHECK(cv_vault_logout_sync(vault, &error), "logout");
    CHECK(cv_vault_search_cached_messages_sync(vault, "train", NULL, &error) == NULL, "no cache after logout");
    expect_error(error, CV_ERROR_DOMAIN_CHATVAULT, "ERROR_OFFLINE_DISABLED", "a search after logout");
    error = NULL;
    CHECK(cv_vault_login_sync(vault, "alice", NULL, &error) == CV_OPEN_READY, "ready again");
    deadline = now_seconds() + 20;
    while (!second.complete && now_seconds() < deadline)
        dispatch_for(vault, 0.05);
    CHECK(second.complete && second.indexed == 29 && second.total == 29 && second.on_main, "the second listener heard 29 of 29");
    CHECK(first.heard == heard_before && first.destroyed == 1, "the removed listener heard nothing");

    /* A page outlives its vault; a search under way at free never calls back, its destroy runs once. */
    cv_search_page *kept = search(vault, "brulee", NULL);
    async_search dropped = { .on_main = true };
    CHECK(cv_vault_search_cached_messages(vault, "train", NULL, on_search, &dropped, on_search_destroyed, &error), "a search at free");
    cv_vault_free(vault);
    CHECK(dropped.called == 0 && dropped.destroyed == 1, "not called, destroyed once: %d, %d", dropped.called, dropped.destroyed);
    CHECK(second.destroyed == 1, "the second listener destroyed at free");
    found = cv_search_page_get_text(kept, 0, &error);
    CHECK(found != NULL && strcmp(found, dessert) == 0, "the page after its vault");
    cv_free(found);
    cv_search_page_free(kept);
    CHECK(cv_search_page_get_hit_count(kept) == 0, "a freed page has no hits");
    cv_simulator_free(sim);

    if (failures == 0)
        printf("test-capi-search: all checks passed\n");
    return failures == 0 ? 0 : 1;
}
