/* ref_device — the "ref-device" backend: the ref kernels over an EMULATED
 * device arena. Parameter memory (the model's params, grads and optimizer
 * arenas, the tape's per-channel vectors and folded weights) is host memory
 * handed out under addresses the host cannot dereference (bit 62 set: not
 * canonical on x86-64 or arm64, a load faults), reached only through the
 * arena's ops and the kernels, which take the tag off. So on any machine it
 * proves what the cuda backend relies on and cannot test without a GPU:
 * that the engine, the trainer, checkpoints and STATE touch device-resident
 * parameters only through bk_arena_ops_t, and hand the kernels parameter
 * memory where backend_impl.h says so and host arrays where it says host
 * (a kernel handed the wrong kind aborts, naming it). Results are the ref
 * backend's, bit for bit: the same kernels on the same floats.
 * Activations stay plain host buffers (only the arenas are emulated); bf16
 * rounds parameter memory through round_half_param, as on cuda. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/errbuf.h"
#include "gpud/backend_impl.h"
#include "gpud/half.h"
#include "gpud/bn_math.h"
#include "gpud/cpu/host_kernels.h"
#include "gpud/cpu/ref_ops.h"
#include "gpud/optim/optim_host.h"

#define TAG ((uintptr_t)1 << 62)

static _Noreturn void misuse(const char *what, const void *p)
{
    fprintf(stderr, "ref-device: %s got %p: %s (a bug in the engine: fix the caller)\n",
            what, p, (uintptr_t)p & TAG ? "a device address where backend_impl.h says host"
                                        : "a host address where backend_impl.h says "
                                          "parameter memory");
    abort();
}

/* Parameter memory -> the host floats behind it (NULL stays NULL). */
static float *dev(const float *p, const char *what)
{
    if (p && !((uintptr_t)p & TAG))
        misuse(what, p);
    return (float *)((uintptr_t)p & ~TAG);
}

/* A host array the kernel must get as such. */
static const float *host(const float *p, const char *what)
{
    if ((uintptr_t)p & TAG)
        misuse(what, p);
    return p;
}

/* ------------------------------------------------------------ the arena */

static float *a_alloc(void *ctx, size_t floats)
{
    float *p = bk_arena_host.alloc(ctx, floats);
    return p ? (float *)((uintptr_t)p | TAG) : NULL;
}

static void a_free(void *ctx, float *base)
{
    bk_arena_host.free(ctx, dev(base, "arena free"));
}

static int a_read(void *ctx, const float *base, size_t off, size_t n, float *dst)
{
    return bk_arena_host.read(ctx, dev(base, "arena read"), off, n, dst);
}

static int a_write(void *ctx, float *base, size_t off, size_t n, const float *src)
{
    return bk_arena_host.write(ctx, dev(base, "arena write"), off, n, host(src, "arena write"));
}

static int a_zero(void *ctx, float *base, size_t off, size_t n)
{
    return bk_arena_host.zero(ctx, dev(base, "arena zero"), off, n);
}

static int a_copy(void *ctx, float *dst, size_t doff, const float *src, size_t soff,
                  size_t n)
{
    return bk_arena_host.copy(ctx, dev(dst, "arena copy"), doff, dev(src, "arena copy"), soff, n);
}

static int a_find(void *ctx, const float *base, size_t off, size_t n, int64_t *at)
{
    return bk_arena_host.find_nonfinite(ctx, dev(base, "arena scan"), off, n, at);
}

static int a_scale(void *ctx, float *base, size_t off, size_t n, float factor)
{
    return bk_arena_host.scale(ctx, dev(base, "arena scale"), off, n, factor);
}

/* The host optimizer on the untagged views (its step state is the caller's). */
static int a_optim(void *ctx, const optim_cfg_t *c, double lr, bk_oparam_t *p, int n,
                   char *err, size_t errlen)
{
    (void)ctx;
    bk_oparam_t *q = malloc((size_t)(n > 0 ? n : 1) * sizeof *q);
    if (!q) {
        err_set(err, errlen, "ref-device optimizer: out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        q[i] = p[i];
        q[i].w = dev(p[i].w, "optimizer weights");
        q[i].g = dev(p[i].g, "optimizer gradient");
        q[i].buf = dev(p[i].buf, "optimizer state");
        q[i].sq = dev(p[i].sq, "optimizer state");
        q[i].sq_max = dev(p[i].sq_max, "optimizer state");
    }
    int rc = optim_host_step(c, lr, q, n, err, errlen);
    for (int i = 0; i < n; i++) {
        p[i].step = q[i].step;
        p[i].have_buf = q[i].have_buf;
    }
    free(q);
    return rc;
}

static const bk_arena_ops_t DEV_ARENA = {
    .name = "ref-device (emulated device)",
    .mem = BK_MEM_DEVICE,
    .alloc = a_alloc,
    .free = a_free,
    .read = a_read,
    .write = a_write,
    .zero = a_zero,
    .copy = a_copy,
    .find_nonfinite = a_find,
    .scale = a_scale,
    .optim_step = a_optim,
};

/* ------------------------------------------------------------ the kernels:
 * ref's, with parameter memory untagged and host vectors checked */

#define R REF_TKERNELS

static int d_conv_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w, const float *b,
                      const void *res, void *y)
{
    return R.conv_fwd(g, p, x, dev(w, "conv weight"), dev(b, "conv bias"), res, y);
}

static int d_conv_bwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w, const void *gy,
                      void *gx, float *gw, float *gb)
{
    return R.conv_bwd(g, p, x, dev(w, "conv weight"), gy, gx, dev(gw, "conv weight gradient"),
                      dev(gb, "conv bias gradient"));
}

static int d_bn_fwd(bk_ctx_t *g, bk_plan_t *p, int training, const void *x, const float *gamma,
                    const float *beta, float *mean, float *var, void *y)
{
    return R.bn_fwd(g, p, training, x, dev(gamma, "bn gamma"), dev(beta, "bn beta"),
                    dev(mean, "bn mean"), dev(var, "bn var"), y);
}

static int d_bn_add_relu(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *gamma,
                         const float *beta, const float *mean, const float *var, const void *res,
                         void *y)
{
    return R.bn_add_relu(g, p, x, dev(gamma, "bn gamma"), dev(beta, "bn beta"),
                         dev(mean, "bn mean"), dev(var, "bn var"), res, y);
}

static int d_bn_bwd(bk_ctx_t *g, bk_plan_t *p, int training, const void *x, const void *y,
                    const void *gy, const float *gamma, const float *mean, const float *var,
                    void *gx, float *ggamma, float *gbeta)
{
    return R.bn_bwd(g, p, training, x, y, gy, dev(gamma, "bn gamma"), dev(mean, "bn mean"),
                    dev(var, "bn var"), gx, dev(ggamma, "bn gamma gradient"),
                    dev(gbeta, "bn beta gradient"));
}

static void d_chan_sums(backend_t *be, const void *x, const int s[4], const float *center,
                        double *out)
{
    R.chan_sums(be, x, s, host(center, "chan_sums centre"), out);
}

static void d_chan_axpb(backend_t *be, void *y, const void *x, const int s[4],
                        const float *center, const float *a, const float *b)
{
    R.chan_axpb(be, y, x, s, host(center, "chan_axpb centre"), host(a, "chan_axpb a"),
                host(b, "chan_axpb b"));
}

static void d_bn_grad_sums(backend_t *be, const void *x, const void *y, const void *gy,
                           const int s[4], int relu, float gscale, const float *center,
                           double *out)
{
    R.bn_grad_sums(be, x, y, gy, s, relu, gscale, host(center, "bn_grad_sums centre"), out);
}

static void d_bn_grad_apply(backend_t *be, void *gx, const void *x, const void *y,
                            const void *gy, const int s[4], int relu, float gscale,
                            const float *center, const float *scale, const float *a,
                            const float *b)
{
    R.bn_grad_apply(be, gx, x, y, gy, s, relu, gscale, host(center, "bn_grad_apply centre"),
                    host(scale, "bn_grad_apply scale"), host(a, "bn_grad_apply a"),
                    host(b, "bn_grad_apply b"));
}

/* Training BatchNorm on the "device": what the cuda backend's bn_train_*
 * queue (chan_sums, bn_math.h's per-channel steps, the eval-mode kernel),
 * here on the untagged floats, with the host path's scratch sizes. */
static int d_bn_train_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const int s[4],
                          const bk_bn_train_t *t, void *y)
{
    size_t c = (size_t)s[1];
    float *mean = dev(t->stat, "bn statistics"), *var = mean + c;
    float *rm = dev(t->running_mean, "bn running mean");
    float *rv = dev(t->running_var, "bn running var");
    double *sum = malloc(c * sizeof *sum);
    if (!sum) {
        bk_ctx_fail(g, "out of memory");
        return -1;
    }
    R.chan_sums(g->be, x, s, NULL, sum);
    for (size_t i = 0; i < c; i++)
        mean[i] = bnm_stat(sum[i], t->count);
    R.chan_sums(g->be, x, s, mean, sum);
    for (size_t i = 0; i < c; i++)
        var[i] = bnm_stat(sum[i], t->count);
    free(sum);
    const float *gamma = dev(t->gamma, "bn gamma"), *beta = dev(t->beta, "bn beta");
    if ((t->res ? R.bn_add_relu(g, p, x, gamma, beta, mean, var, t->res, y)
                : R.bn_fwd(g, p, 0, x, gamma, beta, mean, var, y)) < 0)
        return -1;
    double unbias = bnm_unbias(t->count);
    for (size_t i = 0; i < c; i++) {
        rm[i] = bnm_running(rm[i], mean[i], t->momentum, 1.0);
        rv[i] = bnm_running(rv[i], var[i], t->momentum, unbias);
    }
    return 0;
}

static int d_bn_train_bwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const void *y,
                          const void *gy, const int s[4], const bk_bn_train_t *t, void *gx)
{
    (void)p;
    size_t c = (size_t)s[1];
    const float *mean = dev(t->stat, "bn statistics"), *var = mean + c;
    const float *gamma = dev(t->gamma, "bn gamma");
    float *gw = dev(t->ggamma, "bn gamma gradient"), *gb = dev(t->gbeta, "bn beta gradient");
    double *sum = malloc(2 * c * sizeof *sum);
    float *co = malloc(3 * c * sizeof *co);
    if (!sum || !co) {
        free(sum);
        free(co);
        bk_ctx_fail(g, "out of memory");
        return -1;
    }
    size_t count = (size_t)s[0] * c * s[2] * s[3];
    if (t->gy2 && t->gres) {   /* gy's last term too (tape_fuse.c): summed as acc sums */
        float *d = t->gres;
        const float *a = gy, *b = t->gy2;
        for (size_t i = 0; i < count; i++)
            d[i] = a[i] + b[i];
        gy = d;
    } else if (t->gy2) {
        free(sum);
        free(co);
        bk_ctx_fail(g, "batch-norm backward: a gradient's second term without gres");
        return -1;
    }
    if (t->gres && t->relu) {   /* the block end's ReLU backward fused (tape_fuse.c): */
        ref_relu_bwd(y, gy, t->gres, count);   /* dy' stored (in place with gy2) */
    }
    R.bn_grad_sums(g->be, x, y, gy, s, t->relu, 1.0f, mean, sum);
    for (size_t i = 0; i < c; i++) {
        sum[c + i] /= bnm_std(var[i], t->eps);
        if (gw && gb) {
            gw[i] = (float)sum[c + i];
            gb[i] = (float)sum[i];
        }
        bnm_coeffs(gamma[i], var[i], t->eps, sum[i], sum[c + i], t->count, &co[i], &co[c + i],
                   &co[2 * c + i]);
    }
    if (gx && t->gres)   /* dy' from where the sums' pass stored it */
        R.bn_grad_apply(g->be, gx, x, NULL, t->gres, s, 0, 1.0f, mean, co, co + c, co + 2 * c);
    else if (gx)
        R.bn_grad_apply(g->be, gx, x, y, gy, s, t->relu, 1.0f, mean, co, co + c, co + 2 * c);
    free(sum);
    free(co);
    return 0;
}

static void d_round_half_param(backend_t *be, bk_half_t fmt, float *dst, const float *src,
                               size_t n)
{
    (void)be;
    half_round(fmt, dev(dst, "16-bit weights"), dev(src, "16-bit weights"), n);
}

static int d_linear_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                        const float *b, void *y)
{
    return R.linear_fwd(g, p, x, dev(w, "linear weight"), dev(b, "linear bias"), y);
}

static int d_linear_bwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                        const void *gy, void *gx, float *gw, float *gb)
{
    return R.linear_bwd(g, p, x, dev(w, "linear weight"), gy, gx,
                        dev(gw, "linear weight gradient"), dev(gb, "linear bias gradient"));
}

static bk_kernels_t dev_kernels(void)
{
    bk_kernels_t k = R;
    k.conv_fwd = d_conv_fwd;
    k.conv_bwd = d_conv_bwd;
    k.bn_fwd = d_bn_fwd;
    k.bn_bwd = d_bn_bwd;
    k.bn_add_relu = d_bn_add_relu;
    k.bn_relu_drop = NULL;   /* its training BatchNorm is bn_train_*: nothing to fuse into */
    k.chan_sums = d_chan_sums;
    k.chan_axpb = d_chan_axpb;
    k.bn_grad_sums = d_bn_grad_sums;
    k.bn_grad_apply = d_bn_grad_apply;
    k.bn_train_fwd = d_bn_train_fwd;
    k.bn_train_bwd = d_bn_train_bwd;
    k.linear_fwd = d_linear_fwd;
    k.linear_bwd = d_linear_bwd;
    k.round_half_param = d_round_half_param;
    k.bf16_native = NULL;
    return k;
}

#undef R

typedef struct {
    backend_t base;
    bk_ops_t ops;
    bk_kernels_t kernels;
} ref_device_t;

static void rd_destroy(backend_t *be)
{
    free(be);
}

backend_t *ref_device_backend_new(int threads, char *err, size_t errlen)
{
    ref_device_t *self = calloc(1, sizeof *self);
    if (!self) {
        err_set(err, errlen, "ref-device backend: out of memory");
        return NULL;
    }
    self->kernels = dev_kernels();
    self->ops = (bk_ops_t){.name = "ref-device", .destroy = rd_destroy,
                           .train = &self->kernels, .caps = BK_CAPS_REF_DEVICE};
    self->base.ops = &self->ops;
    self->base.arena = &DEV_ARENA;
    self->base.threads = threads;
    return &self->base;
}
