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
    a->v[a->n++] = strdup(flag);
    if (value)
        a->v[a->n++] = strdup(value);
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
