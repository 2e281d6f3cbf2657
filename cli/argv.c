#include "cli/argv.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void argv_init(argv_t *a, const char *prog)
{
    memset(a, 0, sizeof *a);
    a->v[a->n++] = strdup(prog);
}

void argv_add(argv_t *a, const char *flag, const char *value)
{
    if (a->n + 3 >= (int)(sizeof a->v / sizeof a->v[0]))
        return;
    if (value && strncmp(value, "--", 2) == 0 && strncmp(flag, "--", 2) == 0) {
        /* the daemons never take a separate "--..." word as a value
         * (common/options.c): such a value goes joined */
        size_t n = strlen(flag) + strlen(value) + 2;
        char *joined = malloc(n);
        if (joined)
            snprintf(joined, n, "%s=%s", flag, value);
        a->v[a->n++] = joined;
    } else {
        a->v[a->n++] = strdup(flag);
        if (value)
            a->v[a->n++] = strdup(value);
    }
    a->v[a->n] = NULL;
}

void argv_addf(argv_t *a, const char *flag, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    argv_add(a, flag, buf);
}

void argv_free(argv_t *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->v[i]);
    memset(a, 0, sizeof *a);
}

static void add_emitted(void *arg, const char *flag, const char *value)
{
    argv_add(arg, flag, value);
}

int argv_add_options(argv_t *a, const option_table_t *table, const void *opts)
{
    return options_emit(table, opts, NULL, add_emitted, a);
}
