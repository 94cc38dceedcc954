/* What the C tests of the C ABI share: CHECK (counts a failure and goes on), the main thread, a
 * sleep, error expectations and dispatch loops. Include it once per program, after
 * <chatvault/chatvault.h>. */
#ifndef CHATVAULT_TESTS_CHECK_H
#define CHATVAULT_TESTS_CHECK_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int failures = 0;
static pthread_t main_thread;

#define CHECK(cond, ...)                                                                            \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            failures++;                                                                             \
            fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond);                       \
            fprintf(stderr, __VA_ARGS__);                                                           \
            fputc('\n', stderr);                                                                    \
        }                                                                                           \
    } while (0)

static inline void sleep_ms(long ms) {
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static inline bool contains(const char *haystack, const char *needle) {
    return haystack != NULL && strstr(haystack, needle) != NULL;
}

/* Checks that `error` is set with this domain and code and a message, then frees it. */
static inline void expect_error(cv_error *error, const char *domain, const char *code, const char *what) {
    CHECK(error != NULL, "%s: an error", what);
    if (error == NULL)
        return;
    CHECK(strcmp(error->domain, domain) == 0, "%s: domain %s", what, error->domain);
    CHECK(strcmp(error->code, code) == 0, "%s: code %s (%s)", what, error->code, error->message);
    CHECK(error->message != NULL && error->message[0] != '\0', "%s: a message", what);
    cv_error_free(error);
}

static inline void expect_argument_error(cv_error *error, const char *what) {
    CHECK(error == NULL || error->details == NULL, "%s: no details", what);
    expect_error(error, CV_ERROR_DOMAIN_ARGUMENT, "ERR_INVALID_ARGUMENT", what);
}

static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Dispatches until *flag reaches `target` or `seconds` pass, polling the vault's descriptor as a
 * main loop would. */
static inline bool dispatch_until_at_least(cv_vault *vault, volatile int *flag, int target, double seconds) {
    double deadline = now_seconds() + seconds;
    while (*flag < target && now_seconds() < deadline) {
        struct pollfd entry = { .fd = cv_vault_get_fd(vault), .events = POLLIN, .revents = 0 };
        poll(&entry, 1, 50);
        cv_vault_dispatch(vault);
    }
    return *flag >= target;
}

static inline bool dispatch_until(cv_vault *vault, volatile int *flag, double seconds) {
    return dispatch_until_at_least(vault, flag, 1, seconds);
}

/* Dispatches for `seconds`, whatever arrives. */
static inline void dispatch_for(cv_vault *vault, double seconds) {
    volatile int never = 0;
    dispatch_until(vault, &never, seconds);
}

#endif
