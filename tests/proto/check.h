/* check — minimal test assertions: report file:line and keep going, so one
 * run lists every failure; main returns check_exit(). */
#ifndef DDP_TEST_CHECK_H
#define DDP_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                               \
    do {                                                                          \
        check_count++;                                                            \
        if (!(cond)) {                                                            \
            check_failures++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                         \
    } while (0)

#define CHECK_MSG(cond, ...)                                                      \
    do {                                                                          \
        check_count++;                                                            \
        if (!(cond)) {                                                            \
            check_failures++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

#define CHECK_STR(a, b) CHECK_MSG(strcmp((a), (b)) == 0, "'%s' != '%s'", (a), (b))

static inline int check_exit(const char *name)
{
    if (check_failures) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failures, check_count);
        return 1;
    }
    printf("%s: all %d checks passed\n", name, check_count);
    return 0;
}

#endif
