/* check — the reporter tests' assertion: report and count, keep going. */
#ifndef DDP_TEST_CHECK_H
#define DDP_TEST_CHECK_H
#include <stdio.h>

static int g_failures = 0;
#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
            g_failures++;                                                              \
        }                                                                              \
    } while (0)

#define CHECK_MSG(cond, ...)                                                           \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
            g_failures++;                                                              \
        }                                                                              \
    } while (0)

static inline int check_done(const char *name)
{
    if (g_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, g_failures);
        return 1;
    }
    printf("%s: ok\n", name);
    return 0;
}

/* Whole file into a NUL-terminated buffer (caller frees), NULL if absent. */
#include <stdlib.h>
static inline char *check_slurp(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    if (len_out)
        *len_out = len;
    return buf;
}
#endif
