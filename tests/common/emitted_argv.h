/* emitted_argv — an options_emit callback that gathers what is emitted
 * into an argv (argv[0] is the caller's) for a round trip through
 * options_parse. */
#ifndef DDP_TEST_EMITTED_ARGV_H
#define DDP_TEST_EMITTED_ARGV_H

#include <stdlib.h>
#include <string.h>

typedef struct {
    char *argv[64];
    int argc;
} emitted_argv_t;

static inline void emitted_argv_add(void *arg, const char *flag, const char *value)
{
    emitted_argv_t *a = arg;
    a->argv[a->argc++] = strdup(flag);
    if (value)
        a->argv[a->argc++] = strdup(value);
    a->argv[a->argc] = NULL;
}

/* Frees what emitted_argv_add copied and starts again at argv[0]. */
static inline void emitted_argv_free(emitted_argv_t *a)
{
    for (int i = 1; i < a->argc; i++)
        free(a->argv[i]);
    a->argc = 1;
    a->argv[1] = NULL;
}
#endif
