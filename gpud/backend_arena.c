/* backend_arena — the arena helpers and the host-memory arena (see
 * backend_arena.h). */
#include "gpud/backend_arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errbuf.h"
#include "gpud/backend_impl.h"
#include "gpud/finite.h"
#include "gpud/optim/optim_host.h"

#define ARENA_ALIGN 64   /* a cache line: every kernel's vector loads start aligned */

static float *host_alloc(void *ctx, size_t floats)
{
    (void)ctx;
    size_t bytes = (floats ? floats : 1) * sizeof(float);
    bytes = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    float *p = aligned_alloc(ARENA_ALIGN, bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

static void host_free(void *ctx, float *base)
{
    (void)ctx;
    free(base);
}

static int host_read(void *ctx, const float *base, size_t off, size_t n, float *dst)
{
    (void)ctx;
    if (n)
        memmove(dst, base + off, n * sizeof *dst);
    return 0;
}

static int host_write(void *ctx, float *base, size_t off, size_t n, const float *src)
{
    (void)ctx;
    if (n)
        memmove(base + off, src, n * sizeof *src);
    return 0;
}

static int host_zero(void *ctx, float *base, size_t off, size_t n)
{
    (void)ctx;
    if (n)
        memset(base + off, 0, n * sizeof *base);
    return 0;
}

static int host_copy(void *ctx, float *dst, size_t doff, const float *src, size_t soff,
                     size_t n)
{
    (void)ctx;
    if (n)
        memmove(dst + doff, src + soff, n * sizeof *dst);
    return 0;
}

static int host_find_nonfinite(void *ctx, const float *base, size_t off, size_t n,
                               int64_t *at)
{
    (void)ctx;
    *at = finite_first_bad(base + off, n);
    return 0;
}

static int host_scale(void *ctx, float *base, size_t off, size_t n, float factor)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        base[off + i] *= factor;
    return 0;
}

static int host_optim(void *ctx, const optim_cfg_t *c, double lr, bk_oparam_t *p, int n,
                      char *err, size_t errlen)
{
    (void)ctx;
    return optim_host_step(c, lr, p, n, err, errlen);
}

const bk_arena_ops_t bk_arena_host = {
    .name = "host",
    .mem = BK_MEM_HOST,
    .alloc = host_alloc,
    .free = host_free,
    .read = host_read,
    .write = host_write,
    .zero = host_zero,
    .copy = host_copy,
    .find_nonfinite = host_find_nonfinite,
    .scale = host_scale,
    .optim_step = host_optim,
};

int bk_arena_alloc(bk_arena_t *a, const bk_arena_ops_t *ops, size_t floats,
                   bk_traffic_t *traffic)
{
    *a = (bk_arena_t){.ops = ops, .floats = floats, .traffic = traffic};
    a->base = ops->alloc(ops->ctx, floats);
    return a->base ? 0 : -1;
}

void bk_arena_free(bk_arena_t *a)
{
    if (a->base)
        a->ops->free(a->ops->ctx, a->base);
    a->base = NULL;
    a->floats = 0;
}

static void count(const bk_arena_t *a, size_t n)
{
    if (a->traffic && a->ops->mem != BK_MEM_HOST)
        a->traffic->params += (uint64_t)n * sizeof(float);
}

int bk_arena_read(const bk_arena_t *a, size_t off, size_t n, float *dst)
{
    if (off > a->floats || n > a->floats - off ||
        a->ops->read(a->ops->ctx, a->base, off, n, dst) < 0)
        return -1;
    count(a, n);
    return 0;
}

int bk_arena_write(const bk_arena_t *a, size_t off, size_t n, const float *src)
{
    if (off > a->floats || n > a->floats - off ||
        a->ops->write(a->ops->ctx, a->base, off, n, src) < 0)
        return -1;
    count(a, n);
    return 0;
}

int bk_arena_zero(const bk_arena_t *a, size_t off, size_t n)
{
    if (off > a->floats || n > a->floats - off)
        return -1;
    return a->ops->zero(a->ops->ctx, a->base, off, n);
}

int bk_arena_copy(const bk_arena_t *dst, size_t doff, const bk_arena_t *src, size_t soff,
                  size_t n)
{
    if (dst->ops != src->ops || doff > dst->floats || n > dst->floats - doff ||
        soff > src->floats || n > src->floats - soff)
        return -1;
    return dst->ops->copy(dst->ops->ctx, dst->base, doff, src->base, soff, n);
}

void *bk_arena_stream(const bk_arena_t *a)
{
    return a && a->ops && a->ops->stream ? a->ops->stream(a->ops->ctx) : NULL;
}

int bk_arena_scan(const bk_arena_t *a, size_t off, size_t n, int64_t *at)
{
    *at = -1;
    if (off > a->floats || n > a->floats - off)
        return -1;
    return a->ops->find_nonfinite(a->ops->ctx, a->base, off, n, at);
}

int bk_arena_scale(const bk_arena_t *a, size_t off, size_t n, float factor)
{
    if (off > a->floats || n > a->floats - off)
        return -1;
    return a->ops->scale(a->ops->ctx, a->base, off, n, factor);
}

int bk_arena_check(const bk_arena_t *a, size_t off, size_t n, const char *name, char *err,
                   size_t errlen)
{
    int64_t at = -1;
    float v = 0.0f;
    if (off > a->floats || n > a->floats - off ||
        bk_arena_scan(a, off, n, &at) < 0 ||
        (at >= 0 && bk_arena_read(a, off + (size_t)at, 1, &v) < 0)) {
        err_set(err, errlen, "%s: cannot scan the %s arena for non-finite values", name,
                a->ops->name);
        return -1;
    }
    if (at < 0)
        return 0;
    err_set(err, errlen, "%s: element %lld of %zu is %g", name, (long long)at, n, (double)v);
    return -1;
}

float *bk_arena_host_view(const bk_arena_t *a, size_t off)
{
    return a->base && a->ops->mem == BK_MEM_HOST && off <= a->floats ? a->base + off : NULL;
}

const bk_arena_ops_t *backend_arena_ops(const backend_t *be)
{
    return be && be->arena ? be->arena : &bk_arena_host;
}

int backend_bn_on_device(const backend_t *be)
{
    const bk_kernels_t *k = be ? be->ops->train : NULL;
    return k && k->bn_train_fwd && k->bn_train_bwd && backend_arena_ops(be)->mem != BK_MEM_HOST;
}

int backend_ranks_topk(const backend_t *be)
{
    return be && be->ops->train && be->ops->train->topk;
}

void backend_traffic_take(backend_t *be, bk_traffic_t *t)
{
    if (be && be->ops->traffic)
        be->ops->traffic(be, t);
}
