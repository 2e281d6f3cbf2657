/* tape_mem — the tape's parameter memory (see tape_priv.h): on a host
 * arena plain arrays used in place, on a device arena (cuda, ref-device)
 * the arena's own ops, each copy counted. */
#include <string.h>

#include "gpud/tape_priv.h"

static const bk_arena_ops_t *ops_of(const bk_graph_t *g)
{
    return backend_arena_ops(g->base.be);
}

int tape_pmem_host(const bk_graph_t *g)
{
    return ops_of(g)->mem == BK_MEM_HOST;
}

float *tape_pmem_new(bk_graph_t *g, size_t n)
{
    const bk_arena_ops_t *ops = ops_of(g);
    float *p = ops->alloc(ops->ctx, n);
    if (!p)
        bk_ctx_fail(&g->base, "out of %s memory for %zu floats", ops_of(g)->name, n);
    return p;
}

void tape_pmem_free(bk_graph_t *g, float *p)
{
    if (p)
        ops_of(g)->free(ops_of(g)->ctx, p);
}

uint64_t *tape_count_bn(bk_graph_t *g)
{
    return g->traffic ? &g->traffic->bn : NULL;
}

uint64_t *tape_count_params(bk_graph_t *g)
{
    return g->traffic ? &g->traffic->params : NULL;
}

static void count(const bk_graph_t *g, uint64_t *c, size_t n)
{
    if (c && !tape_pmem_host(g))
        *c += (uint64_t)n * sizeof(float);
}

int tape_pmem_get(bk_graph_t *g, float *host, const float *pm, size_t n, uint64_t *c)
{
    if (ops_of(g)->read(ops_of(g)->ctx, pm, 0, n, host) < 0) {
        bk_ctx_fail(&g->base, "reading %zu floats of %s memory failed", n, ops_of(g)->name);
        return -1;
    }
    count(g, c, n);
    return 0;
}

int tape_pmem_put(bk_graph_t *g, float *pm, const float *host, size_t n, uint64_t *c)
{
    if (ops_of(g)->write(ops_of(g)->ctx, pm, 0, n, host) < 0) {
        bk_ctx_fail(&g->base, "writing %zu floats of %s memory failed", n, ops_of(g)->name);
        return -1;
    }
    count(g, c, n);
    return 0;
}

float *tape_pmem_view(bk_graph_t *g, float *pm, float *stage, size_t n, uint64_t *c)
{
    if (tape_pmem_host(g))
        return pm;
    return tape_pmem_get(g, stage, pm, n, c) < 0 ? NULL : stage;
}

int tape_pmem_round(bk_graph_t *g, float *dst, const float *src, size_t n)
{
    if (tape_pmem_host(g)) {
        half_round(g->half_fmt, dst, src, n);
        return 0;
    }
    if (!g->k32->round_half_param) {   /* backend_set_precision refuses this */
        bk_ctx_fail(&g->base, "%s: the %s backend cannot round its parameter memory",
                    half_name(g->half_fmt), g->base.be->ops->name);
        return -1;
    }
    g->k32->round_half_param(g->base.be, g->half_fmt, dst, src, n);
    return 0;
}

int tape_pmem_commit(bk_graph_t *g, float *pm, const float *view, size_t n, uint64_t *c)
{
    return view == pm ? 0 : tape_pmem_put(g, pm, view, n, c);
}
