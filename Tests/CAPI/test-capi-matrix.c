/* The C API over a real Matrix homeserver (the throwaway Synapse of Scripts/test): sign in with a
 * password read from a descriptor, send into a new direct room, read it back; then a new process
 * signs in with the session kept in the Secret Service, with no password at all.
 *
 *     test-capi-matrix WORKDIR HOMESERVER ALICE BOB PASSWORD_FILE first
 *     test-capi-matrix WORKDIR HOMESERVER ALICE BOB -             again
 *     test-capi-matrix WORKDIR HOMESERVER ALICE BOB -             no-session */
#define _POSIX_C_SOURCE 200809L
#include <chatvault/chatvault.h>

#include "check.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    int pending, sent, errors;
    char code[64];
} send_record;

static void on_send(const char *stage, const char *message_json, const cv_error *error, void *user_data) {
    (void)message_json;
    send_record *r = user_data;
    if (strcmp(stage, "pending") == 0) r->pending++;
    else if (strcmp(stage, "sent") == 0) r->sent++;
    else {
        r->errors++;
        snprintf(r->code, sizeof r->code, "%s", error ? error->code : "");
    }
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: test-capi-matrix WORKDIR HOMESERVER ALICE BOB PASSWORD_FILE|- first|again|no-session\n");
        return 2;
    }
    main_thread = pthread_self();
    const char *work = argv[1], *homeserver = argv[2], *alice = argv[3], *bob = argv[4], *phase = argv[6];
    char root[2048], settings[4096];
    snprintf(root, sizeof root, "%s/matrix-root", work);
    mkdir(root, 0700);
    snprintf(settings, sizeof settings,
             "{\"enabled\": true, \"encryption\": true, \"applicationId\": \"%s\", \"rootDirectory\": \"%s\", \"keyStore\": \"secretService\"}",
             strcmp(phase, "no-session") == 0 ? "org.chatvault.capimatrix.other" : "org.chatvault.capimatrix", root);
    int fd = strcmp(argv[5], "-") == 0 ? -1 : open(argv[5], O_RDONLY | O_CLOEXEC);
    cv_error *error = NULL;
    cv_vault *vault = cv_vault_new_matrix_sync(settings, homeserver, alice, fd, &error);
    if (fd >= 0)
        close(fd);

    if (strcmp(phase, "no-session") == 0) {
        CHECK(vault == NULL, "no kept session and no password: refused");
        CHECK(error != NULL && strcmp(error->code, "ERR_MATRIX_PASSWORD_NEEDED") == 0, "password needed: %s", error ? error->code : "");
        cv_error_free(error);
        error = NULL;
        CHECK(cv_vault_new_matrix_sync(settings, "ftp://nope", alice, -1, &error) == NULL, "not an http URL");
        CHECK(error != NULL && strcmp(error->code, "ERR_INVALID_ARGUMENT") == 0, "an argument error");
        cv_error_free(error);
        error = NULL;
        CHECK(cv_vault_new_matrix_sync(settings, homeserver, "alice", -1, &error) == NULL, "not a Matrix user id");
        cv_error_free(error);
    } else {
        CHECK(vault != NULL, "signed in (%s): %s", phase, error ? error->code : "");
        if (vault == NULL)
            return 1;
        char *detail = NULL;
        cv_open_state state = cv_vault_login_sync(vault, alice, &detail, &error);
        CHECK(state == CV_OPEN_READY, "ready: %d %s", state, detail ? detail : "");
        cv_free(detail);
        if (strcmp(phase, "first") == 0) {
            send_record sent = { 0 };
            CHECK(cv_vault_send_text(vault, CV_RECEIVER_USER, bob, "hello over Matrix from C", on_send, &sent, NULL, &error), "a send");
            for (int i = 0; i < 600 && sent.sent == 0 && sent.errors == 0; i++) {
                struct pollfd entry = { .fd = cv_vault_get_fd(vault), .events = POLLIN, .revents = 0 };
                poll(&entry, 1, 50);
                cv_vault_dispatch(vault);
            }
            CHECK(sent.pending == 1 && sent.sent == 1, "pending %d sent %d errors %d %s", sent.pending, sent.sent, sent.errors, sent.code);
        }
        char *page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, bob, 30, &error);
        const char *server = page != NULL ? strstr(page, "\"server\":[") : NULL;
        CHECK(server != NULL && contains(server, "hello over Matrix from C"), "the server phase has it: %.300s", page);
        if (strcmp(phase, "again") == 0) {
            char *cached_end = server != NULL ? strstr(page, "\"server\":") : NULL;
            CHECK(cached_end != NULL && strstr(page, "hello over Matrix from C") < cached_end, "cached from the first run");
        }
        cv_free(page);
        CHECK(cv_vault_logout_sync(vault, NULL), "logout");
        cv_vault_free(vault);
    }
    if (failures == 0)
        printf("test-capi-matrix %s: all checks passed\n", phase);
    return failures == 0 ? 0 : 1;
}
