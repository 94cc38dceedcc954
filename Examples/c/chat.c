/* A small terminal chat client in C on a GLib main loop, over libchatvault: against its simulator,
 * or against a Matrix homeserver.
 *
 *     cc chat.c $(pkg-config --cflags --libs chatvault glib-2.0) -o chat
 *     ./chat --dir ~/.local/share/example-chat --user alice --peer bob
 *     ./chat --dir DIR --homeserver https://matrix.example.org --user @alice:example.org \
 *            --peer @bob:example.org [--password-fd 3] 3<password-file
 *
 * With --homeserver the session is kept in the Secret Service after the first sign-in; the
 * password is read from the descriptor only when there is none (never from the command line).
 *
 * Commands on standard input, one per line:
 *     /read            the conversation: the cached page at once, then the server's
 *     /send TEXT       a durable send: "pending" at once, "sent" when the server has it
 *     /offline /online take this device off the network and back
 *     /status          whether the cache serves, and its encryption
 *     /quit
 * The peer answers every message after a moment (the simulator plays the other side). Every
 * callback runs on the main loop's thread (chatvault-glib.h). No message text is logged anywhere
 * but this terminal. */
#include <chatvault/chatvault-glib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    GMainLoop *loop;
    cv_simulator *server; /* NULL against a homeserver */
    cv_vault *vault;
    const char *user, *peer;
    GString *input;
} chat;

static void print_messages(const char *label, const char *json) {
    /* A plain scan for the fields shown (a real client would use a JSON parser such as json-glib). */
    int count = 0;
    for (const char *p = json; (p = strstr(p, "\"text\":\"")) != NULL; p += 8)
        count++;
    printf("%s: %d message%s\n", label, count, count == 1 ? "" : "s");
}

static void show_page(chat *c) {
    cv_error *error = NULL;
    char *page = cv_vault_fetch_messages_sync(c->vault, CV_RECEIVER_USER, c->peer, 30, &error);
    if (page == NULL) {
        printf("read failed: %s\n", error->code);
        cv_error_free(error);
        return;
    }
    const char *server = strstr(page, "\"server\":");
    const char *failed = strstr(page, "\"serverError\":{");
    char *cached = g_strndup(page, server != NULL ? (gsize)(server - page) : strlen(page));
    print_messages("cached", cached);
    if (failed != NULL)
        printf("server: %s\n", strstr(failed, "ERROR_INTERNET_UNAVAILABLE") != NULL ? "offline" : "error");
    else if (server != NULL)
        print_messages("server", server);
    g_free(cached);
    cv_free(page);
}

typedef struct {
    chat *c;
    char *text;
} reply;

static gboolean peer_answers(gpointer data) {
    reply *r = data;
    cv_simulator_post_text(r->c->server, r->c->peer, CV_RECEIVER_USER, r->c->user, r->text, NULL, NULL);
    g_free(r->text);
    g_free(r);
    return G_SOURCE_REMOVE;
}

static void on_send(const char *stage, const char *message_json, const cv_error *error, void *user_data) {
    (void)message_json;
    chat *c = user_data;
    if (strcmp(stage, "error") == 0)
        printf("send: %s\n", strcmp(error->code, "ERROR_INTERNET_UNAVAILABLE") == 0 ? "queued (offline)" : error->code);
    else
        printf("send: %s\n", stage);
    if (strcmp(stage, "sent") == 0 && c->server != NULL) {
        reply *r = g_new0(reply, 1);
        r->c = c;
        r->text = g_strdup("got it");
        g_timeout_add(100, peer_answers, r);
    }
    fflush(stdout);
}

static void on_message(const char *event, const char *message_json, void *user_data) {
    (void)user_data;
    if (strcmp(event, "received") == 0 || strcmp(event, "synced") == 0) {
        const char *text = strstr(message_json, "\"text\":\"");
        int n = text != NULL ? (int)strcspn(text + 8, "\"") : 0;
        printf("%s: %.*s\n", event, n, text != NULL ? text + 8 : "");
        fflush(stdout);
    }
}

static void on_reset(cv_reset_reason reason, int lost, void *user_data) {
    (void)user_data;
    printf("the cache was reset (reason %d): %d unsent message%s lost\n", (int)reason, lost, lost == 1 ? "" : "s");
}

static void command(chat *c, const char *line) {
    if (strcmp(line, "/read") == 0) {
        show_page(c);
    } else if (strncmp(line, "/send ", 6) == 0) {
        cv_error *error = NULL;
        if (!cv_vault_send_text(c->vault, CV_RECEIVER_USER, c->peer, line + 6, on_send, c, NULL, &error)) {
            printf("send refused: %s\n", error->code);
            cv_error_free(error);
        }
    } else if ((strcmp(line, "/offline") == 0 || strcmp(line, "/online") == 0) && c->server == NULL) {
        printf("the network is the real one against a homeserver\n");
    } else if (strcmp(line, "/offline") == 0 || strcmp(line, "/online") == 0) {
        cv_simulator_set_online(c->server, c->user, line[2] == 'n', NULL);
        printf("%s\n", line + 1);
    } else if (strcmp(line, "/status") == 0) {
        char *status = cv_vault_get_encryption_status(c->vault, NULL);
        printf("offline cache: %s; %s\n", cv_vault_is_offline_enabled(c->vault) ? "serving" : "not serving",
               status != NULL && strstr(status, "\"atRest\":\"SQLCIPHER\"") != NULL ? "encrypted at rest" : "not encrypted");
        cv_free(status);
    } else if (strcmp(line, "/quit") == 0) {
        g_main_loop_quit(c->loop);
    } else if (line[0] != '\0') {
        printf("commands: /read /send TEXT /offline /online /status /quit\n");
    }
    fflush(stdout);
}

static gboolean on_input(gint fd, GIOCondition condition, gpointer data) {
    chat *c = data;
    char buffer[4096];
    ssize_t n = read(fd, buffer, sizeof buffer);
    (void)condition;
    if (n <= 0) {
        g_main_loop_quit(c->loop);
        return G_SOURCE_REMOVE;
    }
    g_string_append_len(c->input, buffer, n);
    char *newline;
    while ((newline = strchr(c->input->str, '\n')) != NULL) {
        *newline = '\0';
        command(c, c->input->str);
        g_string_erase(c->input, 0, newline - c->input->str + 1);
    }
    return G_SOURCE_CONTINUE;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *user = "alice", *peer = "bob", *homeserver = NULL;
    int password_fd = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
        else if (strcmp(argv[i], "--user") == 0) user = argv[i + 1];
        else if (strcmp(argv[i], "--peer") == 0) peer = argv[i + 1];
        else if (strcmp(argv[i], "--homeserver") == 0) homeserver = argv[i + 1];
        else if (strcmp(argv[i], "--password-fd") == 0) password_fd = atoi(argv[i + 1]);
    }
    if (dir == NULL) {
        fprintf(stderr, "usage: chat --dir DIR [--user U] [--peer P] [--homeserver URL [--password-fd N]]\n");
        return 2;
    }
    chat c = { .loop = g_main_loop_new(NULL, FALSE), .server = homeserver == NULL ? cv_simulator_new(1) : NULL, .user = user,
               .peer = peer, .input = g_string_new(NULL) };
    if (c.server != NULL) {
        cv_simulator_add_user(c.server, user, user, NULL);
        cv_simulator_add_user(c.server, peer, peer, NULL);
        cv_simulator_post_text(c.server, peer, CV_RECEIVER_USER, user, "welcome", NULL, NULL);
    }

    /* The cache's key in the desktop's Secret Service (a software key file beside it would
     * protect nothing); keyStore "software" with a keyDirectory outside DIR where there is none. */
    gchar *settings = g_strdup_printf("{\"enabled\": true, \"encryption\": true, \"applicationId\": \"org.chatvault.example\", "
                                      "\"rootDirectory\": \"%s\", \"keyStore\": \"%s\"%s%s%s}", dir,
                                      g_getenv("CHAT_KEY_DIR") != NULL ? "software" : "secretService",
                                      g_getenv("CHAT_KEY_DIR") != NULL ? ", \"keyDirectory\": \"" : "",
                                      g_getenv("CHAT_KEY_DIR") != NULL ? g_getenv("CHAT_KEY_DIR") : "",
                                      g_getenv("CHAT_KEY_DIR") != NULL ? "\"" : "");
    cv_error *error = NULL;
    if (c.server != NULL)
        c.vault = cv_vault_new_simulated(settings, c.server, user, &error);
    else
        c.vault = cv_vault_new_matrix_sync(settings, homeserver, user, password_fd, &error);
    g_free(settings);
    if (c.vault == NULL) {
        fprintf(stderr, "chat: %s (%s)\n", error->message, error->code);
        cv_error_free(error);
        return 1;
    }
    cv_vault_add_reset_listener(c.vault, on_reset, NULL, NULL, NULL);
    cv_vault_add_message_listener(c.vault, on_message, NULL, NULL, NULL);
    guint source = cv_vault_attach_main_context(c.vault, NULL);
    char *detail = NULL;
    cv_open_state state = cv_vault_login_sync(c.vault, user, &detail, &error);
    printf("login: %s%s%s\n", state == CV_OPEN_READY ? "ready" : "not ready", detail ? " " : "", detail ? detail : "");
    cv_free(detail);
    fflush(stdout);
    g_unix_fd_add(0, G_IO_IN | G_IO_HUP | G_IO_ERR, on_input, &c);
    g_main_loop_run(c.loop);

    g_source_remove(source);
    cv_vault_free(c.vault);
    cv_simulator_free(c.server);
    g_string_free(c.input, TRUE);
    g_main_loop_unref(c.loop);
    return 0;
}
