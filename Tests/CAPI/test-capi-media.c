/* The C API's media, custom sends and sync listener, from C: a media send (pending, then sent
 * with its attachment), a custom send carrying its customData back, a download with progress
 * of a photo another user posted, its cached path online and offline (the bytes the API
 * promises at that path), the media listener hearing a background download, the sync listener
 * hearing a catch-up's phases; every callback on the main thread, none after removal or free,
 * bad input refused as an argument error. Built by Scripts/test-capi from an installed prefix
 * with pkg-config, under ASan and UBSan.
 *
 *     test-capi-media WORKDIR        (a fresh private directory)
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
#include <unistd.h>

/* The byte at `i` of a test file with `seed`. */
static unsigned char pattern(size_t i, unsigned seed) {
    return (unsigned char)((i * 31u + seed) & 0xffu);
}

static bool write_file(const char *path, size_t size, unsigned seed) {
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return false;
    for (size_t i = 0; i < size; i++)
        fputc(pattern(i, seed), f);
    return fclose(f) == 0;
}

/* Whether the file at `path` holds exactly the `size` bytes of `seed`. */
static bool file_holds(const char *path, size_t size, unsigned seed) {
    if (path == NULL)
        return false;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    size_t i = 0;
    int c;
    bool same = true;
    while ((c = fgetc(f)) != EOF) {
        if (i >= size || (unsigned char)c != pattern(i, seed))
            same = false;
        i++;
    }
    fclose(f);
    return same && i == size;
}

/* ---- a send's stages ---- */
typedef struct {
    int pending, sent, errors, destroyed, wrong_thread;
    char last_error[64];
    char sent_json[8192];
} send_record;

static void on_send(const char *stage, const char *message_json, const cv_error *error, void *user_data) {
    send_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    CHECK(message_json != NULL && message_json[0] == '{', "a message as JSON");
    if (strcmp(stage, "pending") == 0) {
        r->pending++;
    } else if (strcmp(stage, "sent") == 0) {
        r->sent++;
        snprintf(r->sent_json, sizeof r->sent_json, "%s", message_json);
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

/* ---- a download ---- */
typedef struct {
    int progress_calls, done, destroyed, wrong_thread, backwards, after_done;
    int percents[64];
    char path[4096];
    char error_code[64], error_domain[64];
} download_record;

static void on_progress(int percent, void *user_data) {
    download_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    if (r->done)
        r->after_done++;
    if (r->progress_calls > 0 && percent <= r->percents[(r->progress_calls - 1) % 64])
        r->backwards++;
    r->percents[r->progress_calls % 64] = percent;
    r->progress_calls++;
}

static void on_done(const char *local_path, const cv_error *error, void *user_data) {
    download_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    r->done++;
    CHECK((local_path == NULL) != (error == NULL), "a path or an error, not both");
    if (local_path != NULL)
        snprintf(r->path, sizeof r->path, "%s", local_path);
    if (error != NULL) {
        snprintf(r->error_code, sizeof r->error_code, "%s", error->code);
        snprintf(r->error_domain, sizeof r->error_domain, "%s", error->domain);
    }
}

static void on_download_destroy(void *user_data) {
    ((download_record *)user_data)->destroyed++;
}

/* ---- the media listener ---- */
typedef struct {
    int downloaded, failed, destroyed, wrong_thread;
    char message_id[64], url[1024], path[4096];
} media_record;

static void on_media(cv_media_event event, const char *message_id, const char *url, const char *local_path, const cv_error *error,
                     void *user_data) {
    media_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    if (event == CV_MEDIA_DOWNLOADED) {
        r->downloaded++;
        CHECK(message_id != NULL && url != NULL && local_path != NULL && error == NULL, "downloaded: id, url and path");
        snprintf(r->message_id, sizeof r->message_id, "%s", message_id ? message_id : "");
        snprintf(r->url, sizeof r->url, "%s", url ? url : "");
        snprintf(r->path, sizeof r->path, "%s", local_path ? local_path : "");
    } else {
        r->failed++;
        CHECK(error != NULL, "a failure carries its error");
    }
}

static void on_media_destroy(void *user_data) {
    ((media_record *)user_data)->destroyed++;
}

/* ---- the sync listener ---- */
typedef struct {
    int calls, conversations_started, conversations_completed, messages_started, messages_completed, failed;
    int destroyed, wrong_thread, out_of_order;
    cv_sync_event last;
    bool brought_text, bob_conversation, caught_up;
} sync_record;

static void on_sync(cv_sync_event event, const char *payload_json, const cv_error *error, void *user_data) {
    sync_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    CHECK(payload_json != NULL && payload_json[0] == '{', "a payload object");
    /* Each phase in order: started, then completed or failed; conversations before messages. */
    if (r->calls > 0) {
        bool follows = (event == CV_SYNC_EVENT_CONVERSATIONS_STARTED && (r->last == CV_SYNC_EVENT_MESSAGES_COMPLETED || r->last == CV_SYNC_EVENT_MESSAGES_FAILED))
            || ((event == CV_SYNC_EVENT_CONVERSATIONS_COMPLETED || event == CV_SYNC_EVENT_CONVERSATIONS_FAILED) && r->last == CV_SYNC_EVENT_CONVERSATIONS_STARTED)
            || (event == CV_SYNC_EVENT_MESSAGES_STARTED && (r->last == CV_SYNC_EVENT_CONVERSATIONS_COMPLETED || r->last == CV_SYNC_EVENT_CONVERSATIONS_FAILED))
            || ((event == CV_SYNC_EVENT_MESSAGES_COMPLETED || event == CV_SYNC_EVENT_MESSAGES_FAILED) && r->last == CV_SYNC_EVENT_MESSAGES_STARTED);
        if (!follows)
            r->out_of_order++;
    } else if (event != CV_SYNC_EVENT_CONVERSATIONS_STARTED) {
        r->out_of_order++;
    }
    r->calls++;
    r->last = event;
    switch (event) {
    case CV_SYNC_EVENT_CONVERSATIONS_STARTED: r->conversations_started++; break;
    case CV_SYNC_EVENT_CONVERSATIONS_COMPLETED:
        r->conversations_completed++;
        if (contains(payload_json, "\"conversations\":[") && contains(payload_json, "\"with\":\"bob\""))
            r->bob_conversation = true;
        break;
    case CV_SYNC_EVENT_MESSAGES_STARTED: r->messages_started++; break;
    case CV_SYNC_EVENT_MESSAGES_COMPLETED:
        r->messages_completed++;
        if (contains(payload_json, "while you were away"))
            r->brought_text = true;
        if (contains(payload_json, "\"outcome\":\"caughtUp\""))
            r->caught_up = true;
        break;
    case CV_SYNC_EVENT_CONVERSATIONS_FAILED:
    case CV_SYNC_EVENT_MESSAGES_FAILED:
        r->failed++;
        CHECK(error != NULL, "a failed phase carries its error");
        break;
    }
}

static void on_sync_destroy(void *user_data) {
    ((sync_record *)user_data)->destroyed++;
}

static void never_send(const char *stage, const char *message_json, const cv_error *error, void *user_data) {
    (void)stage, (void)message_json, (void)error, (void)user_data;
    CHECK(false, "a refused send never calls back");
}

static void never_done(const char *local_path, const cv_error *error, void *user_data) {
    (void)local_path, (void)error, (void)user_data;
    CHECK(false, "a refused download never calls back");
}

static void never_media(cv_media_event event, const char *message_id, const char *url, const char *local_path, const cv_error *error,
                        void *user_data) {
    (void)event, (void)message_id, (void)url, (void)local_path, (void)error, (void)user_data;
}

static void never_sync(cv_sync_event event, const char *payload_json, const cv_error *error, void *user_data) {
    (void)event, (void)payload_json, (void)error, (void)user_data;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test-capi-media WORKDIR\n");
        return 2;
    }
    main_thread = pthread_self();
    const char *work = argv[1];
    char root[2048], keys[2048], runtime[2048], photo[2048], second[2048], third[2048], fourth[2048], outgoing[2048];
    char settings_off[8192], settings_auto[8192];
    snprintf(root, sizeof root, "%s/root", work);
    snprintf(keys, sizeof keys, "%s/keys", work);
    snprintf(runtime, sizeof runtime, "%s/runtime", work);
    snprintf(photo, sizeof photo, "%s/bob-photo.jpg", work);
    snprintf(second, sizeof second, "%s/bob-second.jpg", work);
    snprintf(third, sizeof third, "%s/bob-third.png", work);
    snprintf(fourth, sizeof fourth, "%s/bob-fourth.png", work);
    snprintf(outgoing, sizeof outgoing, "%s/alice-sends.png", work);
    mkdir(root, 0700);
    mkdir(keys, 0700);
    mkdir(runtime, 0700);
    /* Encrypted media opens through decrypted views under $XDG_RUNTIME_DIR (a private 0700 directory). */
    setenv("XDG_RUNTIME_DIR", runtime, 1);
    const char *common = "\"enabled\": true, \"encryption\": true, \"applicationId\": \"org.chatvault.capimedia\", \"keyStore\": \"software\"";
    snprintf(settings_off, sizeof settings_off, "{%s, \"mediaCaching\": \"off\", \"rootDirectory\": \"%s\", \"keyDirectory\": \"%s\"}",
             common, root, keys);
    snprintf(settings_auto, sizeof settings_auto, "{%s, \"mediaCaching\": \"auto\", \"rootDirectory\": \"%s\", \"keyDirectory\": \"%s\"}",
             common, root, keys);
    const size_t photo_size = 300000, second_size = 70000, third_size = 100000, fourth_size = 90000, outgoing_size = 5000;
    CHECK(write_file(photo, photo_size, 7) && write_file(second, second_size, 11) && write_file(third, third_size, 13)
              && write_file(fourth, fourth_size, 17) && write_file(outgoing, outgoing_size, 3),
          "the test files written");

    cv_error *error = NULL;
    cv_simulator *sim = cv_simulator_new(11);
    CHECK(cv_simulator_add_user(sim, "alice", "Alice", NULL) && cv_simulator_add_user(sim, "bob", "Bob", NULL)
              && cv_simulator_add_user(sim, "carol", "Carol", NULL),
          "users");
    CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", "hello from bob", NULL, NULL), "a first message");

    /* The simulator's media: bad input refused. */
    CHECK(!cv_simulator_post_media(NULL, "bob", CV_RECEIVER_USER, "alice", CV_MEDIA_IMAGE, photo, NULL, NULL, NULL, NULL, &error),
          "a NULL simulator");
    expect_argument_error(error, "post_media: a NULL simulator");
    error = NULL;
    CHECK(!cv_simulator_post_media(sim, "bob", CV_RECEIVER_USER, "alice", (cv_media_type)42, photo, NULL, NULL, NULL, NULL, &error),
          "an out-of-range media type");
    expect_argument_error(error, "post_media: an out-of-range media type");
    error = NULL;
    CHECK(!cv_simulator_post_media(sim, "bob", CV_RECEIVER_USER, "alice", CV_MEDIA_IMAGE, photo, "\xc3\x28", NULL, NULL, NULL, &error),
          "an invalid UTF-8 mime type");
    expect_argument_error(error, "post_media: invalid UTF-8");
    error = NULL;

    /* A vault that downloads only on request (mediaCaching "off"). */
    cv_vault *vault = cv_vault_new_simulated(settings_off, sim, "alice", &error);
    CHECK(vault != NULL, "a vault: %s", error ? error->message : "");
    if (vault == NULL)
        return 1;
    /* The sync listeners, before login: one to be removed, one kept (the proof that a later sweep happened). */
    sync_record syncs = { 0 }, kept = { 0 };
    unsigned sync_listener = cv_vault_add_sync_listener(vault, on_sync, &syncs, on_sync_destroy, &error);
    CHECK(sync_listener > 0, "a sync listener");
    CHECK(cv_vault_add_sync_listener(vault, on_sync, &kept, on_sync_destroy, &error) > 0, "a second sync listener");
    CHECK(cv_vault_login_sync(vault, "alice", NULL, &error) == CV_OPEN_READY, "ready");
    CHECK(cv_vault_get_media_caching_mode(vault, &error) == CV_MEDIA_CACHING_OFF && error == NULL, "media caching off");

    /* Bad input: argument errors, no callback. */
    CHECK(cv_vault_get_media_caching_mode(NULL, &error) == CV_MEDIA_CACHING_OFF, "no mode for NULL");
    expect_argument_error(error, "mode of a NULL vault");
    error = NULL;
    CHECK(!cv_vault_send_media((cv_vault *)(void *)sim, CV_RECEIVER_USER, "bob", outgoing, CV_MEDIA_IMAGE, NULL, never_send, NULL, NULL, &error),
          "a simulator as a vault");
    expect_argument_error(error, "send_media: a simulator as a vault");
    error = NULL;
    CHECK(!cv_vault_send_media(vault, CV_RECEIVER_USER, "bob", outgoing, (cv_media_type)9, NULL, never_send, NULL, NULL, &error),
          "an out-of-range media type");
    expect_argument_error(error, "send_media: an out-of-range media type");
    error = NULL;
    CHECK(!cv_vault_send_media(vault, (cv_receiver_type)5, "bob", outgoing, CV_MEDIA_IMAGE, NULL, never_send, NULL, NULL, &error),
          "an out-of-range receiver type");
    expect_argument_error(error, "send_media: an out-of-range receiver type");
    error = NULL;
    CHECK(!cv_vault_send_media(vault, CV_RECEIVER_USER, "bob", NULL, CV_MEDIA_IMAGE, NULL, never_send, NULL, NULL, &error), "no path");
    expect_argument_error(error, "send_media: no path");
    error = NULL;
    CHECK(!cv_vault_send_media(vault, CV_RECEIVER_USER, "bob", outgoing, CV_MEDIA_IMAGE, "\xff", never_send, NULL, NULL, &error),
          "an invalid UTF-8 caption");
    expect_argument_error(error, "send_media: an invalid UTF-8 caption");
    error = NULL;
    CHECK(!cv_vault_send_media(vault, CV_RECEIVER_USER, "bob", outgoing, CV_MEDIA_IMAGE, NULL, NULL, NULL, NULL, &error), "no callback");
    expect_argument_error(error, "send_media: no callback");
    error = NULL;
    CHECK(!cv_vault_send_custom(vault, CV_RECEIVER_USER, "bob", "location", "{\"lat\": ", never_send, NULL, NULL, &error), "malformed JSON");
    expect_argument_error(error, "send_custom: malformed JSON");
    error = NULL;
    CHECK(!cv_vault_send_custom(vault, CV_RECEIVER_USER, "bob", "location", "[1, 2]", never_send, NULL, NULL, &error), "an array");
    expect_argument_error(error, "send_custom: not an object");
    error = NULL;
    CHECK(!cv_vault_send_custom(vault, CV_RECEIVER_USER, "bob", NULL, "{}", never_send, NULL, NULL, &error), "no custom type");
    expect_argument_error(error, "send_custom: no type");
    error = NULL;
    CHECK(!cv_vault_send_custom(vault, CV_RECEIVER_USER, "bob", "location", "{\"a\": \"\xfe\"}", never_send, NULL, NULL, &error),
          "invalid UTF-8 in the JSON");
    expect_argument_error(error, "send_custom: invalid UTF-8");
    error = NULL;
    CHECK(cv_vault_get_cached_media_path(vault, NULL, &error) == NULL, "no url");
    expect_argument_error(error, "cached path: no url");
    error = NULL;
    CHECK(cv_vault_get_cached_media_path((cv_vault *)(void *)0x5a5a, "https://x.test/a", &error) == NULL, "a foreign vault");
    expect_argument_error(error, "cached path: a foreign vault");
    error = NULL;
    CHECK(!cv_vault_download_media(vault, "https://x.test/a", -1, NULL, never_done, NULL, NULL, &error), "a negative message id");
    expect_argument_error(error, "download: a negative id");
    error = NULL;
    CHECK(!cv_vault_download_media(vault, "https://x.test/a", 0, NULL, NULL, NULL, NULL, &error), "no done callback");
    expect_argument_error(error, "download: no done callback");
    error = NULL;
    CHECK(!cv_vault_download_media(vault, "\xc0\xaf", 0, NULL, never_done, NULL, NULL, &error), "an invalid UTF-8 url");
    expect_argument_error(error, "download: invalid UTF-8");
    error = NULL;
    CHECK(cv_vault_add_media_listener(vault, NULL, NULL, NULL, &error) == 0, "a media listener needs a callback");
    expect_argument_error(error, "media listener: no callback");
    error = NULL;
    CHECK(cv_vault_add_sync_listener((cv_vault *)(void *)sim, never_sync, NULL, NULL, &error) == 0, "a simulator as a vault");
    expect_argument_error(error, "sync listener: a simulator as a vault");
    error = NULL;
    CHECK(cv_vault_add_media_listener(NULL, never_media, NULL, NULL, &error) == 0, "a NULL vault");
    expect_argument_error(error, "media listener: a NULL vault");
    error = NULL;

    /* A media send: pending, then sent with its attachment (uploaded) and caption. */
    send_record media = { 0 };
    CHECK(cv_vault_send_media(vault, CV_RECEIVER_USER, "bob", outgoing, CV_MEDIA_IMAGE, "the view", on_send, &media, on_send_destroy, &error),
          "a media send");
    CHECK(dispatch_until(vault, &media.destroyed, 30), "the media send finished");
    CHECK(media.pending == 1 && media.sent == 1 && media.errors == 0, "pending %d sent %d errors %d (%s)", media.pending, media.sent,
          media.errors, media.last_error);
    CHECK(contains(media.sent_json, "\"attachment\":{") && contains(media.sent_json, "\"url\":\"http"), "an attachment: %.400s",
          media.sent_json);
    CHECK(contains(media.sent_json, "\"type\":\"image\"") && contains(media.sent_json, "\"caption\":\"the view\""), "an image, captioned: %.400s",
          media.sent_json);
    CHECK(contains(media.sent_json, "\"size\":") && contains(media.sent_json, "\"mimeType\":\"") && contains(media.sent_json, "\"fileName\":\""),
          "the attachment's name, type and size: %.400s", media.sent_json);
    CHECK(media.destroyed == 1 && media.wrong_thread == 0, "destroyed %d, off-thread %d", media.destroyed, media.wrong_thread);

    /* A file that cannot be copied: only an error stage, the last one. */
    send_record missing = { 0 };
    char nowhere[2100];
    snprintf(nowhere, sizeof nowhere, "%s/no-such-file.png", work);
    CHECK(cv_vault_send_media(vault, CV_RECEIVER_USER, "bob", nowhere, CV_MEDIA_FILE, NULL, on_send, &missing, on_send_destroy, &error),
          "a send of a missing file is accepted");
    CHECK(dispatch_until(vault, &missing.destroyed, 10), "and finished");
    CHECK(missing.errors == 1 && missing.pending == 0 && missing.sent == 0, "one error stage: pending %d errors %d", missing.pending,
          missing.errors);
    CHECK(strcmp(missing.last_error, "ERROR_OFFLINE_MEDIA_COPY_FAILED") == 0, "the copy failed: %s", missing.last_error);

    /* A custom send: its customData comes back in the sent message and from the server. */
    send_record custom = { 0 };
    CHECK(cv_vault_send_custom(vault, CV_RECEIVER_USER, "bob", "location", "{\"place\": \"Berlin\", \"lat\": 52.5, \"tags\": [\"x\"]}",
                               on_send, &custom, on_send_destroy, &error),
          "a custom send");
    CHECK(dispatch_until(vault, &custom.destroyed, 20), "the custom send finished");
    CHECK(custom.pending == 1 && custom.sent == 1 && custom.errors == 0, "pending %d sent %d errors %d", custom.pending, custom.sent,
          custom.errors);
    CHECK(contains(custom.sent_json, "\"customData\":{") && contains(custom.sent_json, "\"place\":\"Berlin\"")
              && contains(custom.sent_json, "\"lat\":52.5") && contains(custom.sent_json, "\"tags\":[\"x\"]"),
          "its customData: %.400s", custom.sent_json);
    CHECK(contains(custom.sent_json, "\"category\":\"custom\""), "a custom message: %.300s", custom.sent_json);
    CHECK(contains(custom.sent_json, "\"customType\":\"location\""), "its custom type: %.300s", custom.sent_json);
    CHECK(custom.wrong_thread == 0, "on this thread");
    char *page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 30, &error);
    CHECK(contains(page, "\"place\":\"Berlin\"") && contains(page, "\"customType\":\"location\""), "the server has the customData and type: %.300s", page);
    cv_free(page);

    /* A photo from bob, downloaded on request: progress, then the path. */
    int64_t photo_id = 0;
    char *photo_url = NULL;
    CHECK(cv_simulator_post_media(sim, "bob", CV_RECEIVER_USER, "alice", CV_MEDIA_IMAGE, photo, "image/jpeg", "from bob", &photo_id,
                                  &photo_url, &error),
          "bob posts a photo");
    CHECK(photo_id > 0 && contains(photo_url, "https://"), "its id and url");
    if (photo_url == NULL)
        return 1;
    dispatch_for(vault, 0.5);
    CHECK(cv_vault_get_cached_media_path(vault, photo_url, &error) == NULL && error == NULL, "not cached before the download (mode off)");
    download_record dl = { 0 };
    CHECK(cv_vault_download_media(vault, photo_url, photo_id, on_progress, on_done, &dl, on_download_destroy, &error), "a download");
    CHECK(dispatch_until(vault, &dl.destroyed, 30), "the download finished");
    CHECK(dl.done == 1 && dl.path[0] != '\0' && dl.error_code[0] == '\0', "done with a path (%s)", dl.error_code);
    CHECK(dl.progress_calls >= 2, "progress reported along the way (%d calls)", dl.progress_calls);
    CHECK(dl.backwards == 0, "progress only forward");
    CHECK(dl.progress_calls > 0 && dl.percents[(dl.progress_calls - 1) % 64] == 100, "progress ends at 100 (%d)",
          dl.progress_calls > 0 ? dl.percents[(dl.progress_calls - 1) % 64] : -1);
    CHECK(dl.after_done == 0 && dl.destroyed == 1 && dl.wrong_thread == 0, "after done %d, destroyed %d, off-thread %d", dl.after_done,
          dl.destroyed, dl.wrong_thread);
    CHECK(file_holds(dl.path, photo_size, 7), "the path opens to bob's bytes: %s", dl.path);
    CHECK(strncmp(dl.path, runtime, strlen(runtime)) == 0, "encrypted at rest: the path is a decrypted view under XDG_RUNTIME_DIR: %s", dl.path);
    char *cached = cv_vault_get_cached_media_path(vault, photo_url, &error);
    CHECK(cached != NULL && strcmp(cached, dl.path) == 0, "the cached path is the download's: %s", cached ? cached : "(null)");
    cv_free(cached);

    /* The first sweep of a new cache (once the connection has held) sets its sync point; the
     * catch-up after a reconnect replays from there. */
    CHECK(dispatch_until(vault, &syncs.messages_completed, 40), "the login's sweep completed");
    CHECK(!syncs.brought_text, "not before bob wrote it");

    /* Offline: the cached path still answers, and a download answers it from the cache; bytes not
     * cached cannot come. Bob writes meanwhile (the catch-up brings it). */
    CHECK(cv_simulator_set_online(sim, "alice", false, NULL), "offline");
    int64_t second_id = 0;
    char *second_url = NULL;
    CHECK(cv_simulator_post_media(sim, "bob", CV_RECEIVER_USER, "alice", CV_MEDIA_IMAGE, second, NULL, NULL, &second_id, &second_url, &error),
          "bob posts another photo");
    CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", "while you were away", NULL, &error), "bob writes");
    cached = cv_vault_get_cached_media_path(vault, photo_url, &error);
    CHECK(cached != NULL && strcmp(cached, dl.path) == 0 && file_holds(cached, photo_size, 7), "offline, the cached path answers: %s",
          cached ? cached : "(null)");
    cv_free(cached);
    download_record offline = { 0 };
    CHECK(cv_vault_download_media(vault, photo_url, photo_id, on_progress, on_done, &offline, on_download_destroy, &error), "offline download");
    CHECK(dispatch_until(vault, &offline.destroyed, 10), "answered");
    CHECK(offline.done == 1 && strcmp(offline.path, dl.path) == 0, "from the cache: %s", offline.path);
    download_record uncached = { 0 };
    CHECK(cv_vault_download_media(vault, second_url, second_id, NULL, on_done, &uncached, on_download_destroy, &error), "uncached download");
    CHECK(dispatch_until(vault, &uncached.destroyed, 10), "answered");
    CHECK(uncached.done == 1 && uncached.path[0] == '\0', "no path offline");
    CHECK(strcmp(uncached.error_domain, CV_ERROR_DOMAIN_CHATVAULT) == 0 && strcmp(uncached.error_code, "ERROR_OFFLINE_MEDIA_NOT_CACHED") == 0,
          "not cached: %s %s", uncached.error_domain, uncached.error_code);
    CHECK(uncached.wrong_thread == 0 && offline.wrong_thread == 0, "on this thread");

    /* Back online: the reconnect's catch-up, heard phase by phase, brings what bob wrote. */
    CHECK(cv_simulator_set_online(sim, "alice", true, NULL), "online");
    CHECK(dispatch_until_at_least(vault, &syncs.messages_completed, 2, 40), "the catch-up completed");
    CHECK(syncs.conversations_started >= 2 && syncs.conversations_completed >= 2 && syncs.messages_started >= 2,
          "started and completed: conversations %d/%d, messages %d/%d", syncs.conversations_started, syncs.conversations_completed,
          syncs.messages_started, syncs.messages_completed);
    CHECK(syncs.out_of_order == 0 && syncs.failed == 0, "in order (%d), none failed (%d)", syncs.out_of_order, syncs.failed);
    CHECK(syncs.brought_text, "the messages phase brought bob's text");
    CHECK(syncs.caught_up, "caught up");
    CHECK(syncs.bob_conversation, "the conversations phase has the conversation with bob");
    CHECK(syncs.wrong_thread == 0, "on this thread");

    /* Removed: its destroy notifier once, silent through the next sweep (which the kept one hears). */
    CHECK(cv_vault_remove_listener(vault, sync_listener, &error), "the sync listener removed");
    CHECK(syncs.destroyed == 1, "destroyed once");
    int heard = syncs.calls, kept_completed = kept.messages_completed;
    bool forced = false;
    double deadline = now_seconds() + 30;
    while (!forced && now_seconds() < deadline) {
        forced = cv_vault_force_sync_now_sync(vault, &error);
        if (!forced) {
            CHECK(error != NULL && (strcmp(error->code, "ERROR_OFFLINE_SYNC_COOLDOWN") == 0 || strcmp(error->code, "ERROR_OFFLINE_SYNC_IN_PROGRESS") == 0),
                  "refused only while cooling down: %s", error ? error->code : "");
            cv_error_free(error);
            error = NULL;
            dispatch_for(vault, 0.5);
        }
    }
    CHECK(forced, "a forced sweep ran");
    CHECK(kept.messages_completed > kept_completed, "the kept listener heard it before the call returned (%d)", kept.messages_completed);
    CHECK(syncs.calls == heard, "the removed one heard nothing (%d, was %d)", syncs.calls, heard);
    CHECK(kept.wrong_thread == 0 && kept.out_of_order == 0, "the kept one: on this thread, in order");

    /* A download still running when its vault is freed: its destroy notifier at free, no callback after. */
    char *third_url = NULL;
    int64_t third_id = 0;
    CHECK(cv_simulator_post_media(sim, "bob", CV_RECEIVER_USER, "alice", CV_MEDIA_IMAGE, third, NULL, NULL, &third_id, &third_url, &error),
          "a third photo");
    download_record orphan = { 0 };
    CHECK(cv_vault_download_media(vault, third_url, third_id, on_progress, on_done, &orphan, on_download_destroy, &error), "a download");
    cv_vault_free(vault);
    CHECK(orphan.destroyed == 1, "its destroy notifier ran at free (%d)", orphan.destroyed);
    CHECK(kept.destroyed == 1, "the kept listener's too");
    sleep_ms(300);
    CHECK(orphan.done == 0 && orphan.progress_calls == 0, "no callback after free (done %d, progress %d)", orphan.done, orphan.progress_calls);
    cv_free(third_url);

    /* A vault that caches received media in the background: the media listener hears it. Carol's:
     * a simulated user has one device, whose realtime stream a freed vault's engine may still
     * be reading for a while (a new vault of alice's would then miss events). */
    vault = cv_vault_new_simulated(settings_auto, sim, "carol", &error);
    CHECK(vault != NULL, "an auto vault: %s", error ? error->message : "");
    if (vault == NULL)
        return 1;
    CHECK(cv_vault_get_media_caching_mode(vault, &error) == CV_MEDIA_CACHING_OFF, "off before login (no cache serving)");
    sync_record settle = { 0 };
    CHECK(cv_vault_add_sync_listener(vault, on_sync, &settle, on_sync_destroy, &error) > 0, "a sync listener");
    media_record heard_media = { 0 }, control = { 0 };
    unsigned media_listener = cv_vault_add_media_listener(vault, on_media, &heard_media, on_media_destroy, &error);
    CHECK(media_listener > 0, "a media listener");
    CHECK(cv_vault_add_media_listener(vault, on_media, &control, on_media_destroy, &error) > 0, "a second media listener");
    CHECK(cv_vault_login_sync(vault, "carol", NULL, &error) == CV_OPEN_READY, "ready");
    CHECK(cv_vault_get_media_caching_mode(vault, &error) == CV_MEDIA_CACHING_AUTO, "media caching auto");
    /* The login's sweep first: a message it brings is not a live one (no background download). */
    CHECK(dispatch_until(vault, &settle.messages_completed, 40), "the login's sweep completed");
    for (int i = 0; i < 100 && cv_vault_get_sync_state(vault) != CV_SYNC_IDLE; i++)
        dispatch_for(vault, 0.05);
    int64_t fourth_id = 0;
    char *fourth_url = NULL;
    CHECK(cv_simulator_post_media(sim, "bob", CV_RECEIVER_USER, "carol", CV_MEDIA_FILE, fourth, "image/png", NULL, &fourth_id, &fourth_url,
                                  &error),
          "bob posts live");
    int before = heard_media.downloaded;
    CHECK(dispatch_until_at_least(vault, &heard_media.downloaded, before + 1, 30), "the media listener heard the background download");
    char expected_id[32];
    snprintf(expected_id, sizeof expected_id, "%lld", (long long)fourth_id);
    CHECK(strcmp(heard_media.message_id, expected_id) == 0, "its message id: %s (expected %s)", heard_media.message_id, expected_id);
    CHECK(fourth_url != NULL && strcmp(heard_media.url, fourth_url) == 0, "its url: %s", heard_media.url);
    CHECK(file_holds(heard_media.path, fourth_size, 17), "its path opens to the bytes: %s", heard_media.path);
    cached = cv_vault_get_cached_media_path(vault, fourth_url, &error);
    CHECK(cached != NULL && strcmp(cached, heard_media.path) == 0, "the cached path is the one heard: %s", cached ? cached : "(null)");
    cv_free(cached);
    CHECK(heard_media.failed == 0 && heard_media.wrong_thread == 0, "no failure (%d), on this thread", heard_media.failed);

    /* Removed: silent after, while the other listener hears the next one. */
    CHECK(cv_vault_remove_listener(vault, media_listener, &error), "the media listener removed");
    CHECK(heard_media.destroyed == 1, "destroyed once");
    int downloads_heard = heard_media.downloaded + heard_media.failed;
    int control_before = control.downloaded;
    char *fifth_url = NULL;
    CHECK(cv_simulator_post_media(sim, "bob", CV_RECEIVER_USER, "carol", CV_MEDIA_AUDIO, second, "audio/ogg", NULL, NULL, &fifth_url, &error),
          "bob posts again");
    CHECK(dispatch_until_at_least(vault, &control.downloaded, control_before + 1, 30), "the other listener heard it");
    CHECK(fifth_url != NULL && strcmp(control.url, fifth_url) == 0, "the new one: %s", control.url);
    CHECK(heard_media.downloaded + heard_media.failed == downloads_heard, "the removed listener heard nothing");
    CHECK(control.wrong_thread == 0, "on this thread");

    cv_vault_free(vault);
    CHECK(control.destroyed == 1 && settle.destroyed == 1, "the other listeners' destroy notifiers ran at free");
    CHECK(cv_vault_get_cached_media_path(vault, photo_url, &error) == NULL, "a freed vault");
    expect_argument_error(error, "cached path: a freed vault");
    error = NULL;
    cv_free(photo_url);
    cv_free(second_url);
    cv_free(fourth_url);
    cv_free(fifth_url);
    cv_simulator_free(sim);

    if (failures == 0)
        printf("test-capi-media: all checks passed\n");
    return failures == 0 ? 0 : 1;
}
