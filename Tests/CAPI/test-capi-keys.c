/* Key management through the C API: rotation keeps every cached message (read back, and after a
 * logout and login); a recovery secret written to the test's descriptor brings the old cache back
 * after its key is deleted and the next login reset it (the reset heard on this thread); a wrong
 * secret is a typed error that changes nothing; the quarantine listed and restored; an export and
 * its secret through a descriptor imported into a fresh root; bad input refused; and no secret in
 * any string the library returns. Built by Scripts/test-capi from an installed prefix with
 * pkg-config, under ASan and UBSan.
 *
 *     test-capi-keys WORKDIR        (a fresh private directory)
 */
#define _POSIX_C_SOURCE 200809L
#include <chatvault/chatvault.h>

#include "check.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- secrets: every one the library wrote to a descriptor, and the check that no returned string holds one ---- */
static char secrets[8][64];
static int secret_count = 0;

/* The 36 symbols of a secret without its dashes (a returned string must not hold either form). */
static void bare(const char *secret, char *out, size_t size) {
    size_t n = 0;
    for (const char *p = secret; *p != '\0' && n + 1 < size; p++)
        if (*p != '-')
            out[n++] = *p;
    out[n] = '\0';
}

static bool holds_secret(const char *text) {
    for (int i = 0; text != NULL && i < secret_count; i++) {
        char plain[64];
        bare(secrets[i], plain, sizeof plain);
        if (strstr(text, secrets[i]) != NULL || strstr(text, plain) != NULL)
            return true;
    }
    return false;
}

static void no_secret_in(const char *text, const char *what) {
    CHECK(!holds_secret(text), "%s holds a secret", what);
}

/* A secret the library wrote: one line, nine groups of four of A-Z and 2-7; remembered. */
static void remember_secret(const char *line, char *out, size_t size) {
    size_t len = strcspn(line, "\n");
    CHECK(len == 44, "a secret of 44 characters (%zu)", len);
    CHECK(line[len] == '\n' && line[len + 1] == '\0', "one line, ended by a newline");
    bool shaped = len == 44;
    for (size_t i = 0; shaped && i < len; i++)
        shaped = (i % 5 == 4) ? line[i] == '-' : (isupper((unsigned char)line[i]) || (line[i] >= '2' && line[i] <= '7'));
    CHECK(shaped, "nine groups of four of A-Z and 2-7");
    snprintf(out, size, "%.*s", (int)len, line);
    if (secret_count < 8)
        snprintf(secrets[secret_count++], sizeof secrets[0], "%.*s", (int)len, line);
    /* The detector itself: it finds the secret in a string that holds it, dashed or not. */
    char plain[64], planted[128];
    bare(out, plain, sizeof plain);
    snprintf(planted, sizeof planted, "{\"x\":\"%s\"}", plain);
    CHECK(holds_secret(line) && holds_secret(planted), "the secret detector finds the secret");
}

/* Reads a descriptor to its end. */
static void read_all(int fd, char *out, size_t size) {
    size_t n = 0;
    ssize_t got;
    while (n + 1 < size && (got = read(fd, out + n, size - 1 - n)) > 0)
        n += (size_t)got;
    out[n] = '\0';
}

/* A pipe holding `text` with its write end closed: the read end, for a secret_fd. */
static int pipe_with(const char *text) {
    int ends[2];
    if (pipe(ends) != 0)
        return -1;
    ssize_t written = write(ends[1], text, strlen(text));
    CHECK(written == (ssize_t)strlen(text), "the pipe took the text");
    close(ends[1]);
    return ends[0];
}

/* check.h's expect_error, and no secret in the message. */
static void expect_secretless_error(cv_error *error, const char *domain, const char *code, const char *what) {
    if (error != NULL)
        no_secret_in(error->message, what);
    expect_error(error, domain, code, what);
}

static void expect_secretless_argument_error(cv_error *error, const char *what) {
    expect_secretless_error(error, CV_ERROR_DOMAIN_ARGUMENT, "ERR_INVALID_ARGUMENT", what);
}

/* A returned JSON string, checked for secrets and kept for the caller to free. */
static char *returned(char *json, cv_error **error, const char *what) {
    CHECK(json != NULL, "%s: %s %s", what, *error ? (*error)->code : "", *error ? (*error)->message : "");
    no_secret_in(json, what);
    cv_error_free(*error);
    *error = NULL;
    return json;
}

/* The string value of `"key":"…"` at its first occurrence in `json` (keys are unique per object). */
static bool json_string(const char *json, const char *key, char *out, size_t size) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *at = json ? strstr(json, pattern) : NULL;
    if (at == NULL)
        return false;
    at += strlen(pattern);
    size_t n = strcspn(at, "\"");
    if (n >= size)
        return false;
    memcpy(out, at, n);
    out[n] = '\0';
    return true;
}

static long json_int(const char *json, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *at = json ? strstr(json, pattern) : NULL;
    return at == NULL ? -999 : strtol(at + strlen(pattern), NULL, 10);
}

/* The object of a quarantine list whose "reason" is `reason` (the first), copied into `out`. */
static bool quarantine_entry(const char *list, const char *reason, char *out, size_t size) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"reason\":\"%s\"", reason);
    const char *at = list ? strstr(list, pattern) : NULL;
    if (at == NULL)
        return false;
    const char *start = at;
    while (start > list && *start != '{')
        start--;
    const char *end = strchr(at, '}');
    if (end == NULL || (size_t)(end - start + 1) >= size)
        return false;
    memcpy(out, start, (size_t)(end - start + 1));
    out[end - start + 1] = '\0';
    return true;
}

/* Whether the cached phase of a read of the conversation with bob holds `text` (the server phase
 * is not looked at: the device is offline whenever that matters). */
static bool cached_has(cv_vault *vault, const char *text) {
    cv_error *error = NULL;
    char *page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, "bob", 50, &error);
    CHECK(page != NULL, "a page: %s", error ? error->message : "");
    cv_error_free(error);
    bool found = false;
    if (page != NULL) {
        char *cached = strstr(page, "\"cached\":");
        char *server = strstr(page, ",\"server\":");
        if (cached != NULL && server != NULL && server > cached) {
            *server = '\0';
            found = strstr(cached, text) != NULL;
        }
    }
    cv_free(page);
    return found;
}

/* ---- the reset listener ---- */
typedef struct {
    int calls, destroyed, wrong_thread;
    cv_reset_reason reason;
} reset_record;

static void on_reset(cv_reset_reason reason, int pending_messages_lost, void *user_data) {
    (void)pending_messages_lost;
    reset_record *r = user_data;
    if (!pthread_equal(pthread_self(), main_thread))
        r->wrong_thread++;
    r->calls++;
    r->reason = reason;
}

static void on_reset_destroy(void *user_data) {
    ((reset_record *)user_data)->destroyed++;
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

static void settings_for(char *out, size_t size, const char *root, const char *keys) {
    snprintf(out, size,
             "{\"enabled\": true, \"encryption\": true, \"applicationId\": \"org.chatvault.capikeys\", "
             "\"rootDirectory\": \"%s\", \"keyStore\": \"software\", \"keyDirectory\": \"%s\"}", root, keys);
}

static const char *const kept = "kept by bob";

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test-capi-keys WORKDIR\n");
        return 2;
    }
    main_thread = pthread_self();
    const char *work = argv[1];
    char root[2048], keys[2048], root2[2048], keys2[2048], settings[8192], settings2[8192];
    snprintf(root, sizeof root, "%s/root", work);
    snprintf(keys, sizeof keys, "%s/keys", work);
    snprintf(root2, sizeof root2, "%s/root2", work);
    snprintf(keys2, sizeof keys2, "%s/keys2", work);
    mkdir(root, 0700);
    mkdir(keys, 0700);
    mkdir(root2, 0700);
    mkdir(keys2, 0700);
    settings_for(settings, sizeof settings, root, keys);
    settings_for(settings2, sizeof settings2, root2, keys2);

    cv_error *error = NULL;
    cv_simulator *sim = cv_simulator_new(11);
    CHECK(cv_simulator_add_user(sim, "alice", "Alice", NULL) && cv_simulator_add_user(sim, "bob", "Bob", NULL), "users");
    for (int i = 0; i < 3; i++)
        CHECK(cv_simulator_post_text(sim, "bob", CV_RECEIVER_USER, "alice", "kept by bob", NULL, NULL), "posted");

    cv_vault *vault = cv_vault_new_simulated(settings, sim, "alice", &error);
    CHECK(vault != NULL, "a vault: %s", error ? error->message : "");
    if (vault == NULL)
        return 1;

    /* Nobody logged in yet: a typed library error, not an argument error. */
    CHECK(cv_vault_rotate_key_sync(vault, &error) == NULL, "no rotation without a login");
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_NO_CACHE, "a rotation before login");
    error = NULL;
    char *list = returned(cv_vault_list_quarantined_caches_sync(vault, &error), &error, "the list before login");
    CHECK(list != NULL && strcmp(list, "[]") == 0, "no quarantine before login: %s", list);
    cv_free(list);

    reset_record heard = { 0 };
    CHECK(cv_vault_add_reset_listener(vault, on_reset, &heard, on_reset_destroy, &error) > 0, "a reset listener");
    CHECK(cv_vault_login_sync(vault, "alice", NULL, &error) == CV_OPEN_READY, "ready");
    CHECK(!cached_has(vault, kept), "nothing cached before the first read");
    CHECK(cached_has(vault, kept), "bob's messages cached by the first read");

    /* ---- Rotation: a new key id, every cached message still read, and after logout + login. ---- */
    char *report = returned(cv_vault_rotate_key_sync(vault, &error), &error, "a rotation");
    char old_id[128] = "", new_id[128] = "", to_store[64] = "";
    CHECK(json_string(report, "oldKeyId", old_id, sizeof old_id) && json_string(report, "newKeyId", new_id, sizeof new_id),
          "key ids in the report: %s", report);
    CHECK(old_id[0] != '\0' && strcmp(old_id, new_id) != 0, "a new key id (%s -> %s)", old_id, new_id);
    CHECK(json_string(report, "toStore", to_store, sizeof to_store), "the store in the report: %s", report);
    CHECK(json_int(report, "databaseBytes") > 0, "the database's size: %s", report);
    cv_free(report);
    CHECK(cached_has(vault, kept), "bob's messages read after the rotation");
    CHECK(cv_simulator_set_online(sim, "alice", false, NULL), "offline");
    CHECK(cv_vault_logout_sync(vault, &error), "logout");
    CHECK(cv_vault_login_sync(vault, "alice", NULL, &error) == CV_OPEN_READY, "ready again under the new key");
    CHECK(heard.calls == 0, "no reset after the rotation (%d)", heard.calls);
    CHECK(cached_has(vault, kept), "bob's messages read after logout and login (offline: from the cache)");
    char *status = cv_vault_get_encryption_status(vault, &error);
    CHECK(contains(status, "\"atRest\":\"SQLCIPHER\""), "still encrypted: %s", status);
    cv_free(status);

    /* Moving the key: this vault has one store (software, "file"), so the typed refusals. */
    CHECK(cv_vault_move_key_sync(vault, "secret-service", &error) == NULL, "no secret-service store configured");
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_UNKNOWN_STORE, "a move to an unconfigured store");
    error = NULL;
    CHECK(cv_vault_move_key_sync(vault, to_store, &error) == NULL, "already in %s", to_store);
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_ALREADY_IN_STORE, "a move to its own store");
    error = NULL;
    CHECK(cached_has(vault, kept), "the refused moves changed nothing");

    /* ---- A recovery secret: to a closed pipe (an error, no SIGPIPE), to a pipe, then to a file. ---- */
    int ends[2];
    CHECK(pipe(ends) == 0, "a pipe");
    close(ends[0]);
    CHECK(cv_vault_create_recovery_secret_sync(vault, ends[1], &error) == NULL, "a pipe nobody reads");
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_SECRET_NOT_WRITTEN, "a secret to a closed pipe");
    error = NULL;
    close(ends[1]);

    char line[256], secret_a[64] = "", secret_b[64] = "";
    CHECK(pipe(ends) == 0, "a pipe");
    report = cv_vault_create_recovery_secret_sync(vault, ends[1], &error);
    close(ends[1]);
    read_all(ends[0], line, sizeof line);
    close(ends[0]);
    remember_secret(line, secret_a, sizeof secret_a);
    report = returned(report, &error, "a recovery secret to a pipe");
    error = NULL;
    CHECK(contains(report, "\"keyId\":\"") && contains(report, "\"kdfSeconds\":"), "the secret's report: %s", report);
    CHECK(json_string(report, "keyId", line, sizeof line) && strcmp(line, new_id) == 0, "it opens the current key (%s)", line);
    cv_free(report);

    char secret_path[2300];
    snprintf(secret_path, sizeof secret_path, "%s/secret-b", work);
    int file = open(secret_path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(file >= 0, "a 0600 file for the secret");
    report = cv_vault_create_recovery_secret_sync(vault, file, &error);
    close(file);
    file = open(secret_path, O_RDONLY);
    read_all(file, line, sizeof line);
    close(file);
    remember_secret(line, secret_b, sizeof secret_b);
    report = returned(report, &error, "a recovery secret to a file");
    cv_free(report);
    CHECK(strcmp(secret_a, secret_b) != 0, "a new secret each time");

    /* ---- The key is lost: the next login resets (heard here, before login returns). ---- */
    cv_vault_free(vault);
    CHECK(heard.destroyed == 1 && heard.calls == 0 && heard.wrong_thread == 0, "the first listener: destroyed at free, no reset");
    remove_files_in(keys);
    vault = cv_vault_new_simulated(settings, sim, "alice", &error);
    CHECK(vault != NULL, "a vault after the key was lost");
    if (vault == NULL)
        return 1;
    reset_record reset = { 0 };
    CHECK(cv_vault_add_reset_listener(vault, on_reset, &reset, on_reset_destroy, &error) > 0, "a reset listener");
    CHECK(cv_vault_login_sync(vault, "alice", NULL, &error) == CV_OPEN_READY, "a new cache");
    CHECK(reset.calls == 1 && reset.reason == CV_RESET_KEY_LOST, "the reset heard: %d calls, reason %d", reset.calls, reset.reason);
    CHECK(!cached_has(vault, kept), "the new cache has none of bob's messages (offline)");

    /* The quarantine: the lost cache, recoverable with its secret, not restorable (no key). */
    list = returned(cv_vault_list_quarantined_caches_sync(vault, &error), &error, "the quarantine");
    char entry[2048] = "", lost_id[256] = "";
    CHECK(quarantine_entry(list, "keyLost", entry, sizeof entry), "a keyLost entry: %s", list);
    CHECK(json_string(entry, "id", lost_id, sizeof lost_id), "its id: %s", entry);
    CHECK(contains(entry, "\"recoverableWithSecret\":true") && contains(entry, "\"restorable\":false")
              && contains(entry, "\"keyPresent\":false") && contains(entry, "\"encrypted\":true"),
          "recoverable with the secret only: %s", entry);
    cv_free(list);
    CHECK(cv_vault_restore_quarantined_cache_sync(vault, lost_id, &error) == NULL, "no restore without its key");
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_KEY_NOT_PRESENT, "a restore of the lost cache");
    error = NULL;
    CHECK(cv_vault_restore_quarantined_cache_sync(vault, "no-such-entry", &error) == NULL, "no such entry");
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_NO_SUCH_ENTRY, "a restore of an unknown entry");
    error = NULL;

    /* Wrong secrets: typed errors, and nothing changed. */
    char typed[128];
    snprintf(typed, sizeof typed, "%s\n", secret_a); /* replaced by secret B: well formed, wrong */
    int fd = pipe_with(typed);
    CHECK(cv_vault_recover_sync(vault, fd, &error) == NULL, "the replaced secret opens nothing");
    close(fd);
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_WRONG_SECRET, "a wrong secret");
    error = NULL;
    snprintf(typed, sizeof typed, "%s", secret_b);
    typed[0] = typed[0] == 'A' ? 'B' : 'A'; /* a typo */
    fd = pipe_with(typed);
    CHECK(cv_vault_recover_sync(vault, fd, &error) == NULL, "a typo");
    close(fd);
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_SECRET_TYPO, "a secret with a typo");
    error = NULL;
    fd = pipe_with("not a secret");
    CHECK(cv_vault_recover_sync(vault, fd, &error) == NULL, "not a secret");
    close(fd);
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_SECRET_MALFORMED, "a malformed secret");
    error = NULL;
    CHECK(!cached_has(vault, kept), "the wrong secrets restored nothing");
    list = returned(cv_vault_list_quarantined_caches_sync(vault, &error), &error, "the quarantine after wrong secrets");
    CHECK(contains(list, lost_id) && quarantine_entry(list, "keyLost", entry, sizeof entry), "the lost cache still there: %s", list);
    cv_free(list);
    CHECK(reset.wrong_thread == 0 && reset.calls == 1, "no other reset; on this thread");

    /* The right secret, read from the file's descriptor. */
    file = open(secret_path, O_RDONLY);
    report = returned(cv_vault_recover_sync(vault, file, &error), &error, "a recovery");
    close(file);
    error = NULL;
    CHECK(json_string(report, "restoredEntry", line, sizeof line) && strcmp(line, lost_id) == 0, "the lost cache restored: %s", report);
    CHECK(json_int(report, "messages") >= 3, "its messages: %s", report);
    char replaced_id[256] = "";
    CHECK(json_string(report, "replacedAs", replaced_id, sizeof replaced_id), "the fresh cache set aside: %s", report);
    cv_free(report);
    CHECK(cached_has(vault, kept), "bob's messages back in the cache after the recovery (offline)");
    CHECK(cv_vault_logout_sync(vault, &error), "logout");
    CHECK(cv_vault_login_sync(vault, "alice", NULL, &error) == CV_OPEN_READY, "ready again");
    CHECK(reset.calls == 1, "the recovered cache opens without a reset (%d)", reset.calls);
    CHECK(cached_has(vault, kept), "bob's messages there after logout and login");

    /* ---- Restore: the cache the recovery set aside still has its key, so it restores (and back). ---- */
    list = returned(cv_vault_list_quarantined_caches_sync(vault, &error), &error, "the quarantine after the recovery");
    char replaced_entry[256] = "";
    CHECK(quarantine_entry(list, "replaced", entry, sizeof entry) && json_string(entry, "id", replaced_entry, sizeof replaced_entry),
          "a replaced entry: %s", list);
    CHECK(strstr(replaced_id, replaced_entry) != NULL, "the one the recovery named (%s, %s)", replaced_id, replaced_entry);
    CHECK(contains(entry, "\"restorable\":true") && contains(entry, "\"keyPresent\":true"), "restorable: %s", entry);
    CHECK(!contains(list, lost_id), "the recovered entry left the quarantine: %s", list);
    cv_free(list);
    report = returned(cv_vault_restore_quarantined_cache_sync(vault, replaced_entry, &error), &error, "a restore");
    CHECK(json_string(report, "restoredEntry", line, sizeof line) && strcmp(line, replaced_entry) == 0, "the entry restored: %s", report);
    CHECK(contains(report, "\"replacedAs\":\"quarantine/"), "the recovered cache set aside: %s", report);
    cv_free(report);
    CHECK(!cached_has(vault, kept), "the restored (fresh) cache is current: none of bob's messages");
    list = returned(cv_vault_list_quarantined_caches_sync(vault, &error), &error, "the quarantine after the restore");
    char back_entry[256] = "";
    CHECK(quarantine_entry(list, "replaced", entry, sizeof entry) && json_string(entry, "id", back_entry, sizeof back_entry)
              && strcmp(back_entry, replaced_entry) != 0 && contains(entry, "\"restorable\":true"),
          "the recovered cache, restorable: %s", list);
    cv_free(list);
    report = returned(cv_vault_restore_quarantined_cache_sync(vault, back_entry, &error), &error, "a restore back");
    CHECK(json_int(report, "messages") >= 3, "its messages: %s", report);
    cv_free(report);
    CHECK(cached_has(vault, kept), "restored back: bob's messages");

    /* ---- Export: the file, its secret to a pipe; a second export to the same path refused. ---- */
    char export_path[2300], secret_e[64] = "";
    snprintf(export_path, sizeof export_path, "%s/alice.cvexport", work);
    CHECK(pipe(ends) == 0, "a pipe");
    report = cv_vault_export_cache_sync(vault, export_path, ends[1], &error);
    close(ends[1]);
    read_all(ends[0], line, sizeof line);
    close(ends[0]);
    remember_secret(line, secret_e, sizeof secret_e);
    report = returned(report, &error, "an export");
    error = NULL;
    CHECK(json_int(report, "bytes") > 0 && json_int(report, "files") >= 1, "the export's report: %s", report);
    cv_free(report);
    struct stat st;
    CHECK(stat(export_path, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size > 0, "the export file, 0600");
    CHECK(pipe(ends) == 0, "a pipe");
    CHECK(cv_vault_export_cache_sync(vault, export_path, ends[1], &error) == NULL, "not over an existing file");
    close(ends[1]);
    read_all(ends[0], line, sizeof line);
    close(ends[0]);
    CHECK(line[0] == '\0', "no secret written for a refused export");
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_FILE_UNUSABLE, "an export over a file");
    error = NULL;

    /* ---- Bad input: argument errors, never a crash, nothing changed. ---- */
    CHECK(cv_vault_rotate_key_sync(NULL, &error) == NULL, "NULL");
    expect_secretless_argument_error(error, "a rotation of NULL");
    error = NULL;
    CHECK(cv_vault_rotate_key_sync((cv_vault *)(void *)sim, &error) == NULL, "a simulator as a vault");
    expect_secretless_argument_error(error, "a rotation of a simulator");
    error = NULL;
    CHECK(cv_vault_move_key_sync(vault, NULL, &error) == NULL, "a NULL store");
    expect_secretless_argument_error(error, "a NULL store");
    error = NULL;
    CHECK(cv_vault_move_key_sync(vault, "\xff\xfe", &error) == NULL, "an invalid UTF-8 store");
    expect_secretless_argument_error(error, "an invalid UTF-8 store");
    error = NULL;
    CHECK(cv_vault_create_recovery_secret_sync(NULL, STDERR_FILENO, &error) == NULL, "NULL");
    expect_secretless_argument_error(error, "a secret for NULL");
    error = NULL;
    CHECK(cv_vault_create_recovery_secret_sync(vault, -1, &error) == NULL, "fd -1");
    expect_secretless_argument_error(error, "a secret to fd -1");
    error = NULL;
    fd = pipe_with("");
    CHECK(cv_vault_create_recovery_secret_sync(vault, fd, &error) == NULL, "a read-only descriptor");
    close(fd);
    expect_secretless_argument_error(error, "a secret to a read end");
    error = NULL;
    CHECK(cv_vault_recover_sync(vault, -1, &error) == NULL, "fd -1");
    expect_secretless_argument_error(error, "a recovery from fd -1");
    error = NULL;
    CHECK(pipe(ends) == 0, "a pipe");
    CHECK(cv_vault_recover_sync(vault, ends[1], &error) == NULL, "a write-only descriptor");
    close(ends[0]);
    close(ends[1]);
    expect_secretless_argument_error(error, "a recovery from a write end");
    error = NULL;
    CHECK(cv_vault_recover_sync(vault, 987, &error) == NULL, "a closed descriptor");
    expect_secretless_argument_error(error, "a recovery from a closed descriptor");
    error = NULL;
    CHECK(cv_vault_restore_quarantined_cache_sync(vault, NULL, &error) == NULL, "a NULL id");
    expect_secretless_argument_error(error, "a NULL entry id");
    error = NULL;
    CHECK(cv_vault_restore_quarantined_cache_sync(vault, "\xc3\x28", &error) == NULL, "an invalid UTF-8 id");
    expect_secretless_argument_error(error, "an invalid UTF-8 entry id");
    error = NULL;
    CHECK(cv_vault_list_quarantined_caches_sync(NULL, &error) == NULL, "NULL");
    expect_secretless_argument_error(error, "the quarantine of NULL");
    error = NULL;
    CHECK(cv_vault_export_cache_sync(vault, "\xff/export", STDERR_FILENO, &error) == NULL, "an invalid UTF-8 path");
    expect_secretless_argument_error(error, "an export to an invalid UTF-8 path");
    error = NULL;
    CHECK(cv_vault_export_cache_sync(vault, NULL, STDERR_FILENO, &error) == NULL, "a NULL path");
    expect_secretless_argument_error(error, "an export to NULL");
    error = NULL;
    char other_export[2300];
    snprintf(other_export, sizeof other_export, "%s/never.cvexport", work);
    CHECK(cv_vault_export_cache_sync(vault, other_export, -1, &error) == NULL, "fd -1");
    expect_secretless_argument_error(error, "an export's secret to fd -1");
    error = NULL;
    CHECK(access(other_export, F_OK) != 0, "no export file made for a refused descriptor");
    fd = pipe_with(secret_e);
    CHECK(cv_vault_import_cache_sync(vault, "\xff", fd, &error) == NULL, "an invalid UTF-8 path");
    close(fd);
    expect_secretless_argument_error(error, "an import from an invalid UTF-8 path");
    error = NULL;
    CHECK(cv_vault_import_cache_sync(vault, export_path, -1, &error) == NULL, "fd -1");
    expect_secretless_argument_error(error, "an import with fd -1");
    error = NULL;
    CHECK(cached_has(vault, kept), "bad input changed nothing");

    cv_vault_free(vault);
    CHECK(reset.destroyed == 1 && reset.wrong_thread == 0, "the reset listener: destroyed at free, only on this thread");
    CHECK(cv_vault_rotate_key_sync(vault, &error) == NULL, "a freed vault");
    expect_secretless_argument_error(error, "a rotation of a freed vault");
    error = NULL;
    fd = pipe_with(secret_b);
    CHECK(cv_vault_recover_sync(vault, fd, &error) == NULL, "a freed vault");
    close(fd);
    expect_secretless_argument_error(error, "a recovery on a freed vault");
    error = NULL;
    CHECK(cv_vault_export_cache_sync(vault, other_export, STDERR_FILENO, &error) == NULL, "a freed vault");
    expect_secretless_argument_error(error, "an export of a freed vault");
    error = NULL;

    /* ---- Import in a fresh root (another machine): a wrong secret and a non-export refused, then
     * the export's secret from a pipe brings bob's messages, offline. ---- */
    cv_vault *other = cv_vault_new_simulated(settings2, sim, "alice", &error);
    CHECK(other != NULL, "a vault in a fresh root");
    if (other == NULL)
        return 1;
    reset_record other_reset = { 0 };
    CHECK(cv_vault_add_reset_listener(other, on_reset, &other_reset, on_reset_destroy, &error) > 0, "a reset listener");
    CHECK(cv_vault_login_sync(other, "alice", NULL, &error) == CV_OPEN_READY, "ready in the fresh root");
    CHECK(!cached_has(other, kept), "the fresh root has none of bob's messages (offline)");
    fd = pipe_with(secret_b);
    CHECK(cv_vault_import_cache_sync(other, export_path, fd, &error) == NULL, "another secret");
    close(fd);
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_WRONG_SECRET, "an import with the wrong secret");
    error = NULL;
    fd = pipe_with(secret_e);
    CHECK(cv_vault_import_cache_sync(other, secret_path, fd, &error) == NULL, "not an export");
    close(fd);
    expect_secretless_error(error, CV_ERROR_DOMAIN_CHATVAULT, CV_KEY_ERROR_FILE_UNUSABLE, "an import of a file that is no export");
    error = NULL;
    CHECK(!cached_has(other, kept), "the refused imports changed nothing");
    fd = pipe_with(secret_e);
    report = returned(cv_vault_import_cache_sync(other, export_path, fd, &error), &error, "an import");
    close(fd);
    error = NULL;
    CHECK(json_int(report, "messages") >= 3, "the import's messages: %s", report);
    cv_free(report);
    CHECK(cached_has(other, kept), "bob's messages in the fresh root after the import (offline)");
    CHECK(cv_vault_logout_sync(other, &error), "logout");
    CHECK(cv_vault_login_sync(other, "alice", NULL, &error) == CV_OPEN_READY, "ready again");
    CHECK(cached_has(other, kept), "the imported cache opens under this root's key store");
    cv_vault_free(other);
    CHECK(other_reset.calls == 0 && other_reset.wrong_thread == 0 && other_reset.destroyed == 1, "no reset in the fresh root");
    CHECK(secret_count == 3, "three secrets written (%d)", secret_count);

    /* ---- A move that happens: two stores configured (the key file first, then memory), the key
     * moved to memory and back; the file store alone then opens the cache. ---- */
    char root3[2048], keys3[2048], settings3[8192], both[8192], store[64];
    snprintf(root3, sizeof root3, "%s/root3", work);
    snprintf(keys3, sizeof keys3, "%s/keys3", work);
    mkdir(root3, 0700);
    mkdir(keys3, 0700);
    settings_for(settings3, sizeof settings3, root3, keys3);
    snprintf(both, sizeof both,
             "{\"enabled\": true, \"encryption\": true, \"applicationId\": \"org.chatvault.capikeys\", \"rootDirectory\": \"%s\", "
             "\"keyStore\": [\"software\", \"memory\"], \"keyDirectory\": \"%s\"}", root3, keys3);
    CHECK(cv_vault_new_simulated("{\"applicationId\": \"org.chatvault.capikeys\", \"keyStore\": [\"memory\", \"memory\"]}", sim,
                                 "alice", &error) == NULL, "a store listed twice");
    expect_secretless_argument_error(error, "a store listed twice");
    error = NULL;
    CHECK(cv_vault_new_simulated("{\"applicationId\": \"org.chatvault.capikeys\", \"keyStore\": [\"software\", 7]}", sim, "alice",
                                 &error) == NULL, "a store that is not a name");
    expect_secretless_argument_error(error, "a store that is not a name");
    error = NULL;
    CHECK(cv_simulator_set_online(sim, "alice", true, NULL), "online");
    cv_vault *mover = cv_vault_new_simulated(both, sim, "alice", &error);
    CHECK(mover != NULL && cv_vault_login_sync(mover, "alice", NULL, &error) == CV_OPEN_READY, "ready with two stores");
    CHECK(!cached_has(mover, kept) && cached_has(mover, kept), "bob's messages cached by the first read");
    report = returned(cv_vault_move_key_sync(mover, "memory", &error), &error, "a move to memory");
    CHECK(json_string(report, "toStore", store, sizeof store) && strcmp(store, "memory") == 0, "moved to memory: %s", report);
    cv_free(report);
    status = cv_vault_get_encryption_status(mover, &error);
    CHECK(contains(status, "\"atRest\":\"SQLCIPHER\""), "still encrypted: %s", status);
    cv_free(status);
    CHECK(cv_vault_logout_sync(mover, &error) && cv_vault_login_sync(mover, "alice", NULL, &error) == CV_OPEN_READY,
          "ready again with the key in memory");
    CHECK(cached_has(mover, kept), "every message after the move");
    report = returned(cv_vault_move_key_sync(mover, "file", &error), &error, "a move back to the file");
    CHECK(json_string(report, "toStore", store, sizeof store) && strcmp(store, "file") == 0, "moved back: %s", report);
    cv_free(report);
    cv_vault_free(mover);
    cv_vault *filed = cv_vault_new_simulated(settings3, sim, "alice", &error);
    reset_record none = { 0 };
    CHECK(filed != NULL && cv_vault_add_reset_listener(filed, on_reset, &none, NULL, &error) > 0, "a vault on the file store alone");
    CHECK(cv_vault_login_sync(filed, "alice", NULL, &error) == CV_OPEN_READY && none.calls == 0, "ready, no reset (%d)", none.calls);
    CHECK(cv_simulator_set_online(sim, "alice", false, NULL), "offline");
    CHECK(cached_has(filed, kept), "the file store's key opens the cache the move left there");
    cv_vault_free(filed);

    cv_simulator_free(sim);
    if (failures == 0)
        printf("test-capi-keys: all checks passed\n");
    return failures == 0 ? 0 : 1;
}
