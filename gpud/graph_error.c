/* graph_error — the sticky error of an eval graph (bk_prog_t): the first
 * failure is kept with the name of the op that failed, later ones dropped.
 * Below backend.c and every implementation (cpu/, cuda/), which all report
 * through bk_prog_fail: the implementations never call into backend.c. */
#include "gpud/backend_impl.h"

#include <stdarg.h>
#include <stdio.h>

void *bk_prog_fail(bk_prog_t *g, const char *fmt, ...)
{
    if (g->failed)
        return NULL;
    g->failed = 1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g->name[0])
        snprintf(g->err, sizeof g->err, "%s: %s", g->name, msg);
    else
        snprintf(g->err, sizeof g->err, "%s", msg);
    return NULL;
}

const char *bk_prog_error(const bk_prog_t *g)
{
    if (!g)
        return "no graph (out of memory?)";
    return g->failed ? g->err : NULL;
}

void bk_prog_set_name(bk_prog_t *g, const char *name)
{
    if (g)
        snprintf(g->name, sizeof g->name, "%s", name ? name : "");
}
