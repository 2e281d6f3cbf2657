/* host16_kernels — the kernels of a 16-bit-activation graph (bk_ops_t.train16)
 * over a host backend's fp32 kernels: every activation and activation
 * gradient is stored as the 16 bits of its bf16 or fp16 value
 * (gpud/half_bits.h); each kernel unpacks its inputs into fp32 temporaries,
 * runs the backend's own fp32 kernel (be->ops->train) and packs what it
 * wrote, rounding it. So a graph on these buffers computes exactly the
 * numbers of the same graph on fp32 buffers with the engine's rounding
 * points (docs/BF16.md): that is what the reference backend is for, and
 * what the tests of the engine's 16-bit bookkeeping compare against. It is
 * slower than the fp32 buffers, not faster: native 16-bit kernels (oneDNN
 * bf16 memories, cuda NHWC bf16) are the fast implementations of the same
 * table.
 *
 * The fp32 table must have every kernel these wrap (bn_grad_sums,
 * bn_grad_apply and topk included); write_u8, put, bn_train_*, layout and
 * bf16_native are not wrapped. A temporary the kernel cannot allocate
 * fails the op where the kernel reports errors (bk_ctx_fail); the element-
 * wise kernels have no error path (backend_impl.h), so there gpud stops,
 * as Redis does on out-of-memory, with a line saying so. */
#include "gpud/cpu/host16_kernels.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/cpu/host_kernels.h"

static const bk_kernels_t *k32(const backend_t *be)
{
    return be->ops->train;
}

static int is_fp16(const backend_t *be)
{
    return be->precision == BK_FP16;
}

static size_t numel4(const int s[4])
{
    return (size_t)s[0] * s[1] * s[2] * s[3];
}

static void unpack(const backend_t *be, float *f, const void *h, size_t n)
{
    hk_unpack16(is_fp16(be) ? BK_HALF_FP16 : BK_HALF_BF16, f, h, n, be->threads);
}

static void pack(const backend_t *be, void *h, const float *f, size_t n)
{
    hk_pack16(is_fp16(be) ? BK_HALF_FP16 : BK_HALF_BF16, h, f, n, be->threads);
}

/* n floats holding the values of h (NULL: uninitialised room), or NULL. */
static float *temp(const backend_t *be, const void *h, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (f && h)
        unpack(be, f, h, n);
    return f;
}

/* temp() for a kernel without an error path. */
static float *temp_or_stop(const backend_t *be, const void *h, size_t n)
{
    float *f = temp(be, h, n);
    if (!f) {
        fprintf(stderr, "gpud: out of memory converting %zu 16-bit activations to fp32 (%s "
                "backend): give the process more memory, or run with "
                "DDPIPE_HALF_ACTIVATIONS=0\n", n, be->ops->name);
        abort();
    }
    return f;
}

/* Pack f into h (when both), and free f. */
static void done(const backend_t *be, void *h, float *f, size_t n)
{
    if (h && f)
        pack(be, h, f, n);
    free(f);
}

/* ------------------------------------------------------ memory, element-wise */

static void *h_alloc(bk_ctx_t *g, size_t count)   /* count 16-bit elements */
{
    return k32(g->be)->alloc(g, (count + 1) / 2);
}

static void h_release(backend_t *be, void *buf)
{
    k32(be)->release(be, buf);
}

static int h_write(bk_ctx_t *g, void *dst, const float *nchw, const int s[4], int layout)
{
    (void)layout;
    pack(g->be, dst, nchw, numel4(s));
    return 0;
}

static int h_read(bk_ctx_t *g, const void *src, float *nchw, const int s[4], int layout)
{
    (void)layout;
    unpack(g->be, nchw, src, numel4(s));
    return 0;
}

static void h_zero(backend_t *be, void *y, size_t count)
{
    (void)be;
    memset(y, 0, count * sizeof(uint16_t));
}

static void h_copy(backend_t *be, void *y, const void *x, size_t count)
{
    (void)be;
    if (y != x)
        memmove(y, x, count * sizeof(uint16_t));
}

static void h_add(backend_t *be, void *y, const void *a, const void *b, size_t count, int relu)
{
    float *fa = temp_or_stop(be, a, count), *fb = temp_or_stop(be, b, count);
    k32(be)->add(be, fa, fa, fb, count, relu);
    free(fb);
    done(be, y, fa, count);
}

static void h_acc(backend_t *be, void *y, const void *x, size_t count)
{
    float *fy = temp_or_stop(be, y, count), *fx = temp_or_stop(be, x, count);
    k32(be)->acc(be, fy, fx, count);
    free(fx);
    done(be, y, fy, count);
}

static void h_concat(backend_t *be, void *y, int cy, void *x, const int xs[4], int off,
                     int to_y)
{
    int ys[4] = {xs[0], cy, xs[2], xs[3]};
    size_t ny = numel4(ys), nx = numel4(xs);
    float *fy = temp_or_stop(be, y, ny), *fx = temp_or_stop(be, x, nx);
    k32(be)->concat(be, fy, cy, fx, xs, off, to_y);
    if (to_y) {
        free(fx);
        done(be, y, fy, ny);
    } else {
        free(fy);
        done(be, x, fx, nx);
    }
}

static void h_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward)
{
    size_t n = numel4(xs);
    float *fx = temp_or_stop(be, x, n), *fy = temp_or_stop(be, NULL, n);
    k32(be)->flatten(be, fy, fx, xs, backward);
    free(fx);
    done(be, y, fy, n);
}

static void h_dropout(backend_t *be, void *y, const void *x, const int s[4], float p,
                      uint32_t op, const uint64_t *keys)
{
    size_t n = numel4(s);
    float *fx = temp_or_stop(be, x, n), *fy = temp_or_stop(be, NULL, n);
    k32(be)->dropout(be, fy, fx, s, p, op, keys);
    free(fx);
    done(be, y, fy, n);
}

/* The loss and its gradient are fp32 buffers (bk_ops_t.train16). */
static void h_ce_fwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
                     float eps, void *loss)
{
    float *fl = temp_or_stop(be, logits, (size_t)n * k);
    k32(be)->ce_fwd(be, fl, labels, n, k, eps, loss);
    free(fl);
}

static void h_ce_bwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
                     float eps, const void *dloss, void *glogits)
{
    size_t cnt = (size_t)n * k;
    float *fl = temp_or_stop(be, logits, cnt), *fg = temp_or_stop(be, NULL, cnt);
    k32(be)->ce_bwd(be, fl, labels, n, k, eps, dloss, fg);
    free(fl);
    done(be, glogits, fg, cnt);
}

static int h_topk(bk_ctx_t *g, const void *x, int n, int c, int k, int32_t *out)
{
    float *f = temp(g->be, x, (size_t)n * c);
    if (!f) {
        bk_ctx_fail(g, "out of memory");
        return -1;
    }
    int rc = k32(g->be)->topk(g, f, n, c, k, out);
    free(f);
    return rc;
}

/* The values are 16-bit already: rounding them changes nothing. */
static void h_round_half(backend_t *be, bk_half_t fmt, void *y, size_t count)
{
    (void)be;
    (void)fmt;
    (void)y;
    (void)count;
}

/* ------------------------------------------------------------------ plans */

typedef struct {
    bk_plan_t base;
    bk_plan_t *inner;   /* the fp32 kernel's */
    size_t nin, nout;   /* elements of x and y */
} hplan_t;

static void hplan_destroy(bk_plan_t *bp)
{
    hplan_t *p = (hplan_t *)bp;
    if (p->inner)
        p->inner->destroy(p->inner);
    free(p);
}

static bk_plan_t *hplan_wrap(bk_ctx_t *g, bk_plan_t *inner, size_t nin, size_t nout)
{
    if (!inner)
        return NULL;
    hplan_t *p = calloc(1, sizeof *p);
    if (!p) {
        inner->destroy(inner);
        return bk_ctx_fail(g, "out of memory");
    }
    p->base.destroy = hplan_destroy;
    p->inner = inner;
    p->nin = nin;
    p->nout = nout;
    return &p->base;
}

/* Temporaries of a ctx kernel: up to 4, freed together. */
typedef struct {
    float *f[4];
    int n;
} temps_t;

static float *take(bk_ctx_t *g, temps_t *t, const void *h, size_t n, int *failed)
{
    if (*failed)
        return NULL;
    float *f = temp(g->be, h, n);
    if (!f) {
        *failed = 1;
        bk_ctx_fail(g, "out of memory converting %zu 16-bit activations", n);
        return NULL;
    }
    t->f[t->n++] = f;
    return f;
}

static void drop_all(temps_t *t)
{
    for (int i = 0; i < t->n; i++)
        free(t->f[i]);
}

static bk_plan_t *h_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                              const int in[4], const int out[4])
{
    return hplan_wrap(g, k32(g->be)->conv_plan(g, c, post, in, out), numel4(in), numel4(out));
}

static int h_conv_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const float *b,
                      const void *res, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    temps_t t = {0};
    int failed = 0;
    float *fx = take(g, &t, x, p->nin, &failed);
    float *fy = take(g, &t, res ? y : NULL, p->nout, &failed);   /* res is y's buffer */
    int rc = failed ? -1 : k32(g->be)->conv_fwd(g, p->inner, fx, w, b, res ? fy : NULL, fy);
    if (rc == 0)
        pack(g->be, y, fy, p->nout);
    drop_all(&t);
    return failed ? -1 : rc;
}

static int h_conv_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const void *gy,
                      void *gx, float *gw, float *gb)
{
    hplan_t *p = (hplan_t *)bp;
    temps_t t = {0};
    int failed = 0;
    float *fx = take(g, &t, x, p->nin, &failed), *fgy = take(g, &t, gy, p->nout, &failed);
    float *fgx = gx ? take(g, &t, NULL, p->nin, &failed) : NULL;
    int rc = failed ? -1 : k32(g->be)->conv_bwd(g, p->inner, fx, w, fgy, fgx, gw, gb);
    if (rc == 0 && gx)
        pack(g->be, gx, fgx, p->nin);
    drop_all(&t);
    return failed ? -1 : rc;
}

static bk_plan_t *h_bn_plan(bk_ctx_t *g, const int in[4], float eps, int relu)
{
    return hplan_wrap(g, k32(g->be)->bn_plan(g, in, eps, relu), numel4(in), numel4(in));
}

static int h_bn_fwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x, const float *gamma,
                    const float *beta, float *mean, float *var, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    temps_t t = {0};
    int failed = 0;
    float *fx = take(g, &t, x, p->nin, &failed), *fy = take(g, &t, NULL, p->nout, &failed);
    int rc = failed ? -1
                    : k32(g->be)->bn_fwd(g, p->inner, training, fx, gamma, beta, mean, var, fy);
    if (rc == 0)
        pack(g->be, y, fy, p->nout);
    drop_all(&t);
    return failed ? -1 : rc;
}

static int h_bn_bwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x, const void *y,
                    const void *gy, const float *gamma, const float *mean, const float *var,
                    void *gx, float *ggamma, float *gbeta)
{
    hplan_t *p = (hplan_t *)bp;
    temps_t t = {0};
    int failed = 0;
    float *fx = take(g, &t, x, p->nin, &failed), *fy = y ? take(g, &t, y, p->nin, &failed) : NULL;
    float *fgy = take(g, &t, gy, p->nin, &failed);
    float *fgx = gx ? take(g, &t, NULL, p->nin, &failed) : NULL;
    int rc = failed ? -1
                    : k32(g->be)->bn_bwd(g, p->inner, training, fx, fy, fgy, gamma, mean, var,
                                         fgx, ggamma, gbeta);
    if (rc == 0 && gx)
        pack(g->be, gx, fgx, p->nin);
    drop_all(&t);
    return failed ? -1 : rc;
}

static void h_chan_sums(backend_t *be, const void *x, const int s[4], const float *center,
                        double *out)
{
    float *fx = temp_or_stop(be, x, numel4(s));
    k32(be)->chan_sums(be, fx, s, center, out);
    free(fx);
}

static void h_chan_axpb(backend_t *be, void *y, const void *x, const int s[4],
                        const float *center, const float *a, const float *b)
{
    size_t n = numel4(s);
    float *fy = temp_or_stop(be, y, n), *fx = temp_or_stop(be, x, n);
    k32(be)->chan_axpb(be, fy, fx, s, center, a, b);
    free(fx);
    done(be, y, fy, n);
}

static void h_bn_grad_sums(backend_t *be, const void *x, const void *y, const void *gy,
                           const int s[4], int relu, float gscale, const float *center,
                           double *out)
{
    size_t n = numel4(s);
    float *fx = temp_or_stop(be, x, n), *fy = temp_or_stop(be, y, n);
    float *fgy = temp_or_stop(be, gy, n);
    k32(be)->bn_grad_sums(be, fx, fy, fgy, s, relu, gscale, center, out);
    free(fx);
    free(fy);
    free(fgy);
}

static void h_bn_grad_apply(backend_t *be, void *gx, const void *x, const void *y,
                            const void *gy, const int s[4], int relu, float gscale,
                            const float *center, const float *scale, const float *a,
                            const float *b)
{
    size_t n = numel4(s);
    float *fx = temp_or_stop(be, x, n), *fy = temp_or_stop(be, y, n);
    float *fgy = temp_or_stop(be, gy, n), *fgx = temp_or_stop(be, NULL, n);
    k32(be)->bn_grad_apply(be, fgx, fx, fy, fgy, s, relu, gscale, center, scale, a, b);
    free(fx);
    free(fy);
    free(fgy);
    done(be, gx, fgx, n);
}

static bk_plan_t *h_relu_plan(bk_ctx_t *g, const int in[4])
{
    return hplan_wrap(g, k32(g->be)->relu_plan(g, in), numel4(in), numel4(in));
}

static int h_relu_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    temps_t t = {0};
    int failed = 0;
    float *fx = take(g, &t, x, p->nin, &failed), *fy = take(g, &t, NULL, p->nout, &failed);
    int rc = failed ? -1 : k32(g->be)->relu_fwd(g, p->inner, fx, fy);
    if (rc == 0)
        pack(g->be, y, fy, p->nout);
    drop_all(&t);
    return failed ? -1 : rc;
}

static int h_relu_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *y, const void *gy, void *gx)
{
    hplan_t *p = (hplan_t *)bp;
    temps_t t = {0};
    int failed = 0;
    float *fy = take(g, &t, y, p->nin, &failed), *fgy = take(g, &t, gy, p->nin, &failed);
    float *fgx = take(g, &t, NULL, p->nin, &failed);
    int rc = failed ? -1 : k32(g->be)->relu_bwd(g, p->inner, fy, fgy, fgx);
    if (rc == 0)
        pack(g->be, gx, fgx, p->nin);
    drop_all(&t);
    return failed ? -1 : rc;
}

static bk_plan_t *h_pool_plan(bk_ctx_t *g, const bk_pool_t *pp, const int in[4],
                              const int out[4])
{
    return hplan_wrap(g, k32(g->be)->pool_plan(g, pp, in, out), numel4(in), numel4(out));
}

static int h_pool_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    temps_t t = {0};
    int failed = 0;
    float *fx = take(g, &t, x, p->nin, &failed), *fy = take(g, &t, NULL, p->nout, &failed);
    int rc = failed ? -1 : k32(g->be)->pool_fwd(g, p->inner, fx, fy);
    if (rc == 0)
        pack(g->be, y, fy, p->nout);
    drop_all(&t);
    return failed ? -1 : rc;
}

static int h_pool_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const void *gy, void *gx)
{
    hplan_t *p = (hplan_t *)bp;
    temps_t t = {0};
    int failed = 0;
    float *fx = take(g, &t, x, p->nin, &failed), *fgy = take(g, &t, gy, p->nout, &failed);
    float *fgx = take(g, &t, NULL, p->nin, &failed);
    int rc = failed ? -1 : k32(g->be)->pool_bwd(g, p->inner, fx, fgy, fgx);
    if (rc == 0)
        pack(g->be, gx, fgx, p->nin);
    drop_all(&t);
    return failed ? -1 : rc;
}

static bk_plan_t *h_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias)
{
    return hplan_wrap(g, k32(g->be)->linear_plan(g, in, out, has_bias), numel4(in),
                      (size_t)in[0] * out);
}

static int h_linear_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                        const float *b, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    temps_t t = {0};
    int failed = 0;
    float *fx = take(g, &t, x, p->nin, &failed), *fy = take(g, &t, NULL, p->nout, &failed);
    int rc = failed ? -1 : k32(g->be)->linear_fwd(g, p->inner, fx, w, b, fy);
    if (rc == 0)
        pack(g->be, y, fy, p->nout);
    drop_all(&t);
    return failed ? -1 : rc;
}

static int h_linear_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                        const void *gy, void *gx, float *gw, float *gb)
{
    hplan_t *p = (hplan_t *)bp;
    temps_t t = {0};
    int failed = 0;
    float *fx = take(g, &t, x, p->nin, &failed), *fgy = take(g, &t, gy, p->nout, &failed);
    float *fgx = gx ? take(g, &t, NULL, p->nin, &failed) : NULL;
    int rc = failed ? -1 : k32(g->be)->linear_bwd(g, p->inner, fx, w, fgy, fgx, gw, gb);
    if (rc == 0 && gx)
        pack(g->be, gx, fgx, p->nin);
    drop_all(&t);
    return failed ? -1 : rc;
}

/* round_half_param stays NULL: the fp32 tables this wraps work in host
 * memory, whose parameters the engine rounds itself. */
const bk_kernels_t HOST16_KERNELS = {
    .alloc = h_alloc,
    .release = h_release,
    .write = h_write,
    .read = h_read,
    .zero = h_zero,
    .copy = h_copy,
    .add = h_add,
    .acc = h_acc,
    .concat = h_concat,
    .flatten = h_flatten,
    .dropout = h_dropout,
    .ce_fwd = h_ce_fwd,
    .ce_bwd = h_ce_bwd,
    .topk = h_topk,
    .conv_plan = h_conv_plan,
    .conv_fwd = h_conv_fwd,
    .conv_bwd = h_conv_bwd,
    .bn_plan = h_bn_plan,
    .bn_fwd = h_bn_fwd,
    .bn_bwd = h_bn_bwd,
    .chan_sums = h_chan_sums,
    .chan_axpb = h_chan_axpb,
    .bn_grad_sums = h_bn_grad_sums,
    .bn_grad_apply = h_bn_grad_apply,
    .relu_plan = h_relu_plan,
    .relu_fwd = h_relu_fwd,
    .relu_bwd = h_relu_bwd,
    .pool_plan = h_pool_plan,
    .pool_fwd = h_pool_fwd,
    .pool_bwd = h_pool_bwd,
    .linear_plan = h_linear_plan,
    .linear_fwd = h_linear_fwd,
    .linear_bwd = h_linear_bwd,
    .round_half = h_round_half,
};
