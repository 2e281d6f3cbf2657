/* tcheck — minimal assertions for gpud's unit tests: a failed CHECK prints
 * where and why and counts; tests exit non-zero if any failed. */
#ifndef DDP_TCHECK_H
#define DDP_TCHECK_H

#include <stdio.h>
#include <stdlib.h>

static int tc_failures;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            tc_failures++;                                                      \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__,    \
                    #cond);                                                     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

/* Abort the test now: later steps would only cascade. cond is evaluated
 * once. */
#define REQUIRE(cond, ...)                                                      \
    do {                                                                        \
        int tc_ok_ = !!(cond);                                                  \
        CHECK(tc_ok_ && #cond, __VA_ARGS__);                                    \
        if (!tc_ok_)                                                            \
            exit(1);                                                            \
    } while (0)

static inline int tc_done(const char *name)
{
    if (tc_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, tc_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

/* Path of a file under the source tree: $DDPIPE_SRC/rel (ctest sets it),
 * else relative to the working directory. */
static inline const char *tc_src(const char *rel, char *buf, size_t len)
{
    const char *root = getenv("DDPIPE_SRC");
    snprintf(buf, len, "%s/%s", root ? root : ".", rel);
    return buf;
}

#endif
