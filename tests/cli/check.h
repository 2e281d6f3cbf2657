/* CHECK for the cli unit tests: report, count, go on. */
#ifndef DDP_TESTS_CLI_CHECK_H
#define DDP_TESTS_CLI_CHECK_H
#include <stdio.h>

static int s_failures;

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
            s_failures++;                                                                    \
        }                                                                                    \
    } while (0)

static inline int check_done(const char *name)
{
    printf("%s: %s\n", name, s_failures ? "FAILED" : "ok");
    return s_failures ? 1 : 0;
}
#endif
