/* What the C tests of the C ABI share: CHECK (counts a failure and goes on), the main thread,
 * and a sleep. Include it once per program, after <chatvault/chatvault.h>. */
#ifndef CHATVAULT_TESTS_CHECK_H
#define CHATVAULT_TESTS_CHECK_H

#include <pthread.h>
#include <stdio.h>
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

#endif
