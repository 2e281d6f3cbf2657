/* graph_error — the sticky error of a graph: the kernels' context
 * (bk_ctx_t, graph_ctx.h) and the tape graph's own (bk_fail,
 * bk_graph_error). The first failure is kept with the name of the op that
 * failed, later ones dropped. Below everything that reports: the tape
 * (backend_train.c, tape_compile.c), the planner (graph_plan.c) and every
 * implementation (cpu/, cuda/), so none of them calls into another to fail. */
#include <stdarg.h>
#include <stdio.h>

#include "gpud/tape_priv.h"

void *bk_ctx_fail(bk_ctx_t *g, const char *fmt, ...)
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

const char *bk_ctx_error(const bk_ctx_t *g)
{
    if (!g)
        return "no graph (out of memory?)";
    return g->failed ? g->err : NULL;
}

void bk_ctx_set_name(bk_ctx_t *g, const char *name)
{
    if (g)
        snprintf(g->name, sizeof g->name, "%s", name ? name : "");
}

void *bk_fail(bk_graph_t *g, const char *fmt, ...)
{
    if (!g || g->base.failed)
        return NULL;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bk_ctx_fail(&g->base, "%s", msg);
}

const char *bk_graph_error(const bk_graph_t *g)
{
    if (!g)
        return "no training graph (out of memory?)";
    return g->base.failed ? g->base.err : NULL;
}

void bk_graph_set_name(bk_graph_t *g, const char *name)
{
    if (g)
        bk_ctx_set_name(&g->base, name);
}
