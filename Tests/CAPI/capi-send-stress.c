/* A C process that sends through the durable outbox and is SIGKILLed at random moments
 * (Tests/CAPI/send-stress.py). Prints, one write(2) each:
 *     left <local id>      an unsent message found in the outbox at start (an earlier run's)
 *     cached <local id>    a sent message found in the cache at start (an earlier run's, whose
 *                          "sent" line a kill may have cut off)
 *     ready
 *     pending <local id>   its row is committed (it survives a kill from here); printed after
 *                          the dispatch that delivered it, so a send the full outbox refused
 *                          (the seeds: onMessagePending, then onError ERROR_QUEUE_FULL, in one
 *                          go) is never claimed
 *     refused <local id>   the outbox was full (nothing committed)
 *     sent <local id>      the server has it (this run's or an earlier run's message)
 *     done                 the outbox is empty
 * (pending and refused lines end with " <text>": each message's text is unique, "stress RUN-I").
 *
 *     capi-send-stress ROOT KEYDIR COUNT RUN
 *
 * Against the in-process simulator, each run's server is new and numbers its messages from 1:
 * RUN messages between two other users come first, so that no two runs give the same id to
 * different messages (a real server never reuses one). With CHATVAULT_STRESS_HOMESERVER,
 * CHATVAULT_STRESS_USER and CHATVAULT_STRESS_PEER set, the vault is a Matrix one over that
 * homeserver instead (its session kept in the Secret Service; the password read from descriptor
 * 3 when it is open), so the messages can be counted on the server afterwards. */
#define _POSIX_C_SOURCE 200809L
#include <chatvault/chatvault.h>

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Prints "WHAT LOCALID" (and " TEXT" when with_text) for a message's JSON. */
static void emit_line(const char *what, const char *json, int with_text) {
    char line[512];
    const char *id = json != NULL ? strstr(json, "\"localMessageId\":\"") : NULL;
    if (id == NULL)
        return;
    id += strlen("\"localMessageId\":\"");
    int n = (int)strcspn(id, "\"");
    const char *text = with_text ? strstr(json, "\"text\":\"") : NULL;
    int t = text != NULL ? (int)strcspn(text + 8, "\"") : 0;
    int len = text != NULL ? snprintf(line, sizeof line, "%s %.*s %.*s\n", what, n, id, t, text + 8)
                           : snprintf(line, sizeof line, "%s %.*s\n", what, n, id);
    if (len > 0 && (size_t)len < sizeof line && write(1, line, (size_t)len) < 0)
        _exit(3);
}

static void emit(const char *what, const char *json) {
    emit_line(what, json, 0);
}

static void on_outbox(cv_outbox_event event, const char *message_json, cv_failure_reason reason, void *user_data) {
    (void)reason;
    (void)user_data;
    if (event == CV_OUTBOX_SENT)
        emit("sent", message_json);
}

/* This dispatch's pending sends (their message JSON), and which the outbox refused. */
static char *batch[64];
static int refused[64];
static int batched = 0;

static void on_send(const char *stage, const char *message_json, const cv_error *error, void *user_data) {
    (void)user_data;
    const char *id = strstr(message_json, "\"localMessageId\":\"");
    if (strcmp(stage, "pending") == 0 && batched < 64) {
        refused[batched] = 0;
        batch[batched++] = strdup(message_json);
    } else if (strcmp(stage, "error") == 0 && error != NULL && strcmp(error->code, "ERROR_QUEUE_FULL") == 0 && id != NULL) {
        for (int i = 0; i < batched; i++)
            if (strncmp(strstr(batch[i], "\"localMessageId\":\""), id, 60) == 0)
                refused[i] = 1;
    }
}

static void flush_batch(void) {
    for (int i = 0; i < batched; i++) {
        emit_line(refused[i] ? "refused" : "pending", batch[i], 1);
        free(batch[i]);
    }
    batched = 0;
}

/* Listens to the outbox, then prints what earlier runs left: the unsent messages ("left") and the
 * sent ones in the cache with their local ids ("cached": sent before a kill cut their "sent"
 * line off). */
static void list_earlier_runs(cv_vault *vault, const char *peer) {
    cv_vault_add_outbox_listener(vault, on_outbox, NULL, NULL, NULL);
    char *left = cv_vault_get_pending_messages_sync(vault, NULL);
    for (const char *p = left; p != NULL && (p = strstr(p, "\"localMessageId\":\"")) != NULL; p += 18)
        emit("left", p);
    cv_free(left);
    char *page = cv_vault_fetch_messages_sync(vault, CV_RECEIVER_USER, peer, 100, NULL);
    const char *server_phase = page != NULL ? strstr(page, "\"server\":") : NULL;
    for (const char *p = page; p != NULL && (p = strstr(p, "\"localMessageId\":\"")) != NULL && (server_phase == NULL || p < server_phase); p += 18)
        emit("cached", p);
    cv_free(page);
}

/* Sends COUNT messages ("stress RUN-I") and dispatches until the outbox is empty, then "done". */
static void send_and_drain(cv_vault *vault, const char *peer, int count, int run) {
    char text[64];
    for (int i = 0; i < count; i++) {
        snprintf(text, sizeof text, "stress %d-%d", run, i);
        cv_vault_send_text(vault, CV_RECEIVER_USER, peer, text, on_send, NULL, NULL, NULL);
    }
    for (int rounds = 0; rounds < 600; rounds++) {
        struct pollfd entry = { .fd = cv_vault_get_fd(vault), .events = POLLIN, .revents = 0 };
        poll(&entry, 1, 50);
        cv_vault_dispatch(vault);
        flush_batch();
        char *pending = cv_vault_get_pending_messages_sync(vault, NULL);
        int empty = pending != NULL && strcmp(pending, "[]") == 0;
        cv_free(pending);
        if (empty && rounds > 2)
            break;
    }
    if (write(1, "done\n", 5) < 0)
        _exit(3);
}

/* The same over a Matrix homeserver: the messages land on a real server that outlives the process. */
static int run_matrix(const char *settings, const char *homeserver, const char *user, const char *peer, int count, int run) {
    if (user == NULL || peer == NULL)
        return 2;
    cv_error *error = NULL;
    int password_fd = fcntl(3, F_GETFD) != -1 ? 3 : -1;
    cv_vault *vault = cv_vault_new_matrix_sync(settings, homeserver, user, password_fd, &error);
    char *detail = NULL;
    cv_open_state state = vault != NULL ? cv_vault_login_sync(vault, user, &detail, &error) : CV_OPEN_LOGGED_OUT;
    if (state != CV_OPEN_READY) {
        fprintf(stderr, "capi-send-stress: not ready: state %d %s %s\n", (int)state, detail ? detail : "", error ? error->code : "");
        return 1;
    }
    cv_free(detail);
    list_earlier_runs(vault, peer);
    if (write(1, "ready\n", 6) < 0)
        return 3;
    send_and_drain(vault, peer, count, run);
    cv_vault_free(vault);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5)
        return 2;
    int count = atoi(argv[3]), offset = atoi(argv[4]);
    char settings[4096];
    snprintf(settings, sizeof settings,
             "{\"enabled\": true, \"encryption\": true, \"applicationId\": \"org.chatvault.capistress\", "
             "\"rootDirectory\": \"%s\", \"keyStore\": \"software\", \"keyDirectory\": \"%s\"}", argv[1], argv[2]);
    const char *homeserver = getenv("CHATVAULT_STRESS_HOMESERVER");
    if (homeserver != NULL)
        return run_matrix(settings, homeserver, getenv("CHATVAULT_STRESS_USER"), getenv("CHATVAULT_STRESS_PEER"), count, offset);
    cv_simulator *server = cv_simulator_new(3);
    cv_simulator_add_user(server, "alice", "Alice", NULL);
    cv_simulator_add_user(server, "bob", "Bob", NULL);
    cv_simulator_add_user(server, "carol", "Carol", NULL);
    cv_simulator_add_user(server, "dave", "Dave", NULL);
    for (int i = 0; i < offset; i++)
        cv_simulator_post_text(server, "carol", CV_RECEIVER_USER, "dave", "filler", NULL, NULL);
    cv_error *error = NULL;
    cv_vault *vault = cv_vault_new_simulated(settings, server, "alice", &error);
    /* Offline first: this run's server is a new one (the simulator lives in the process), and its
     * empty pages must not reconcile the earlier runs' messages away before they are listed. */
    cv_simulator_set_online(server, "alice", false, NULL);
    char *detail = NULL;
    cv_open_state state = vault != NULL ? cv_vault_login_sync(vault, "alice", &detail, &error) : CV_OPEN_LOGGED_OUT;
    if (state != CV_OPEN_READY) {
        fprintf(stderr, "capi-send-stress: not ready: state %d %s %s\n", (int)state, detail ? detail : "", error ? error->code : "");
        return 1;
    }
    cv_free(detail);
    list_earlier_runs(vault, "bob");
    cv_simulator_set_online(server, "alice", true, NULL);
    if (write(1, "ready\n", 6) < 0)
        return 3;
    send_and_drain(vault, "bob", count, offset);
    cv_vault_free(vault);
    cv_simulator_free(server);
    return 0;
}
