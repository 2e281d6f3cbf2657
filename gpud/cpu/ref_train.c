/* ref_train — training kernels of the "ref" backend: NCHW host floats, the
 * plain loops of ref_ops.c. Plans only remember the shapes. */
#include <stdlib.h>
#include <string.h>

#include "gpud/backend_impl.h"
#include "gpud/cpu/host_kernels.h"
#include "gpud/cpu/ref_ops.h"
#include "gpud/topk_rank.h"

typedef struct {
    bk_plan_t base;
    int in[4], out[4];
    bk_conv_t conv;    /* geometry only */
    bk_pool_t pool;
    float eps;
    int relu;
    float *tmp;         /* fused BN+ReLU: gy masked by y > 0; conv: the residual */
    bk_post_t post;     /* an inference conv's post-ops */
} rplan_t;

static void rplan_destroy(bk_plan_t *bp)
{
    free(((rplan_t *)bp)->tmp);
    free(bp);
}

static rplan_t *rplan_new(bk_ctx_t *g, const int in[4], const int out[4])
{
    rplan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = rplan_destroy;
    memcpy(p->in, in, sizeof p->in);
    if (out)
        memcpy(p->out, out, sizeof p->out);
    return p;
}

static int r_write(bk_ctx_t *g, void *dst, const float *src, const int s[4], int layout)
{
    (void)g;
    (void)layout;
    memcpy(dst, src, (size_t)s[0] * s[1] * s[2] * s[3] * sizeof(float));
    return 0;
}

static int r_read(bk_ctx_t *g, const void *src, float *dst, const int s[4], int layout)
{
    (void)g;
    (void)layout;
    memcpy(dst, src, (size_t)s[0] * s[1] * s[2] * s[3] * sizeof(float));
    return 0;
}

static void r_concat(backend_t *be, void *y, int cy, void *x, const int xs[4], int off, int to_y)
{
    (void)be;
    hk_concat(y, cy, x, xs, off, to_y, 0);
}

static void r_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward)
{
    (void)be;
    hk_flatten(y, x, xs, backward, 0);
}

/* bk_read_topk: the logits ranked where they are (host memory) */
static int r_topk(bk_ctx_t *g, const void *x, int n, int c, int k, int32_t *out)
{
    (void)g;
    topk_rank(x, n, c, k, out);
    return 0;
}

static void r_dropout(backend_t *be, void *y, const void *x, const int s[4], float p,
                      uint32_t op, const uint64_t *keys)
{
    (void)be;
    hk_dropout(y, x, s, p, op, keys, 0);
}

static size_t pnumel(const int s[4])
{
    return (size_t)s[0] * s[1] * s[2] * s[3];
}

/* An inference conv with a SUM post-op keeps the residual in tmp: it is
 * y's own buffer, which the convolution overwrites. */
static bk_plan_t *r_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                              const int in[4], const int out[4])
{
    rplan_t *p = rplan_new(g, in, out);
    if (!p)
        return NULL;
    p->conv = *c;
    if (post)
        p->post = *post;
    for (int i = 0; post && i < post->n; i++)
        if (post->op[i] == BK_PO_SUM && !p->tmp &&
            !(p->tmp = malloc(pnumel(out) * sizeof(float)))) {
            rplan_destroy(&p->base);
            return bk_ctx_fail(g, "out of memory");
        }
    return &p->base;
}

/* conv + bias, then the post-ops in order. */
static int r_conv_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                      const float *b, const void *res, void *y)
{
    (void)g;
    const rplan_t *p = (const rplan_t *)bp;
    const bk_conv_t *c = &p->conv;
    size_t n = pnumel(p->out);
    if (res)
        memcpy(p->tmp, res, n * sizeof(float));
    ref_conv2d(x, p->in[0], p->in[1], p->in[2], p->in[3], w, b, c->oc, c->kh, c->kw,
               c->stride_h, c->stride_w, c->pad_h, c->pad_w, y, p->out[2], p->out[3]);
    for (int i = 0; i < p->post.n; i++) {
        if (p->post.op[i] == BK_PO_RELU)
            ref_relu(y, n);
        else
            ref_add(y, p->tmp, y, n);
    }
    return 0;
}

static int r_conv_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                      const void *gy, void *gx, float *gw, float *gb)
{
    (void)g;
    const rplan_t *p = (const rplan_t *)bp;
    const bk_conv_t *c = &p->conv;
    if (gx)
        ref_conv2d_bwd_data(gy, p->in[0], p->in[1], p->in[2], p->in[3], w, c->oc, c->kh,
                            c->kw, c->stride_h, c->stride_w, c->pad_h, c->pad_w, gx,
                            p->out[2], p->out[3]);
    if (gw || gb)
        ref_conv2d_bwd_weights(x, p->in[0], p->in[1], p->in[2], p->in[3], gy, c->oc, c->kh,
                               c->kw, c->stride_h, c->stride_w, c->pad_h, c->pad_w, gw, gb,
                               p->out[2], p->out[3]);
    return 0;
}

static bk_plan_t *r_bn_plan(bk_ctx_t *g, const int in[4], float eps, int relu)
{
    rplan_t *p = rplan_new(g, in, NULL);
    if (!p)
        return NULL;
    p->eps = eps;
    p->relu = relu;
    if (relu && !(p->tmp = malloc(pnumel(in) * sizeof(float)))) {
        rplan_destroy(&p->base);
        return bk_ctx_fail(g, "out of memory");
    }
    return &p->base;
}

static int r_bn_fwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x,
                    const float *gamma, const float *beta, float *mean, float *var, void *y)
{
    (void)g;
    const rplan_t *p = (const rplan_t *)bp;
    int hw = p->in[2] * p->in[3];
    if (training)
        ref_bn_train_fwd(x, p->in[0], p->in[1], hw, gamma, beta, p->eps, mean, var, y);
    else
        ref_bn_eval_fwd(x, p->in[0], p->in[1], hw, gamma, beta, mean, var, p->eps, y);
    if (p->relu)
        ref_relu(y, pnumel(p->in));
    return 0;
}

/* The reference: the normalising pass, then the add with its ReLU, as the
 * tape runs them apart (the plan's own ReLU is off for a fused op). */
static int r_bn_add_relu(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *gamma,
                         const float *beta, const float *mean, const float *var, const void *res,
                         void *y)
{
    const rplan_t *p = (const rplan_t *)bp;
    if (r_bn_fwd(g, bp, 0, x, gamma, beta, (float *)mean, (float *)var, y) < 0)
        return -1;
    hk_add(g->be, y, y, res, pnumel(p->in), 1);
    return 0;
}

/* The reference: the normalising pass with the plan's ReLU, then the
 * dropout in place, as the tape runs them apart. */
static int r_bn_relu_drop(bk_ctx_t *g, bk_plan_t *bp, const void *x, const int s[4],
                          const float *gamma, const float *beta, const float *mean,
                          const float *var, float drop_p, uint32_t op, const uint64_t *keys,
                          void *y)
{
    const rplan_t *p = (const rplan_t *)bp;
    if (!p->relu) {
        bk_ctx_fail(g, "BatchNorm + dropout fused without the BatchNorm's ReLU");
        return -1;
    }
    if (r_bn_fwd(g, bp, 0, x, gamma, beta, (float *)mean, (float *)var, y) < 0)
        return -1;
    r_dropout(g->be, y, y, s, drop_p, op, keys);
    return 0;
}

static int r_bn_bwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x, const void *y,
                    const void *gy, const float *gamma, const float *mean, const float *var,
                    void *gx, float *ggamma, float *gbeta)
{
    (void)g;
    const rplan_t *p = (const rplan_t *)bp;
    if (p->relu) {   /* through the ReLU first */
        ref_relu_bwd(y, gy, p->tmp, pnumel(p->in));
        gy = p->tmp;
    }
    ref_bn_bwd(x, gy, p->in[0], p->in[1], p->in[2] * p->in[3], gamma, mean, var, p->eps,
               training, gx, ggamma, gbeta);
    return 0;
}

static bk_plan_t *r_relu_plan(bk_ctx_t *g, const int in[4])
{
    rplan_t *p = rplan_new(g, in, NULL);
    return p ? &p->base : NULL;
}

static int r_relu_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    (void)g;
    size_t n = pnumel(((rplan_t *)bp)->in);
    memcpy(y, x, n * sizeof(float));
    ref_relu(y, n);
    return 0;
}

static int r_relu_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *y, const void *gy, void *gx)
{
    (void)g;
    ref_relu_bwd(y, gy, gx, pnumel(((rplan_t *)bp)->in));
    return 0;
}

static bk_plan_t *r_pool_plan(bk_ctx_t *g, const bk_pool_t *pp, const int in[4],
                              const int out[4])
{
    rplan_t *p = rplan_new(g, in, out);
    if (p)
        p->pool = *pp;
    return p ? &p->base : NULL;
}

static int r_pool_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    (void)g;
    const rplan_t *p = (const rplan_t *)bp;
    const bk_pool_t *q = &p->pool;
    const int *i = p->in, *o = p->out;
    if (q->alg == BK_POOL_MAX)
        ref_maxpool2d(x, i[0], i[1], i[2], i[3], q->kh, q->kw, q->stride_h, q->stride_w,
                      q->pad_h, q->pad_w, y, o[2], o[3]);
    else
        ref_avgpool2d(x, i[0], i[1], i[2], i[3], q->kh, q->kw, q->stride_h, q->stride_w,
                      q->pad_h, q->pad_w, q->alg == BK_POOL_AVG, y, o[2], o[3]);
    return 0;
}

static int r_pool_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const void *gy, void *gx)
{
    (void)g;
    const rplan_t *p = (const rplan_t *)bp;
    const bk_pool_t *q = &p->pool;
    const int *i = p->in, *o = p->out;
    if (q->alg == BK_POOL_MAX)
        ref_maxpool2d_bwd(x, gy, i[0], i[1], i[2], i[3], q->kh, q->kw, q->stride_h,
                          q->stride_w, q->pad_h, q->pad_w, gx, o[2], o[3]);
    else
        ref_avgpool2d_bwd(gy, i[0], i[1], i[2], i[3], q->kh, q->kw, q->stride_h, q->stride_w,
                          q->pad_h, q->pad_w, q->alg == BK_POOL_AVG, gx, o[2], o[3]);
    return 0;
}

static bk_plan_t *r_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias)
{
    (void)has_bias;
    int o[4] = {in[0], out, 1, 1};
    rplan_t *p = rplan_new(g, in, o);
    return p ? &p->base : NULL;
}

static int r_linear_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                        const float *b, void *y)
{
    (void)g;
    const rplan_t *p = (const rplan_t *)bp;
    ref_linear(x, p->in[0], p->in[1] * p->in[2] * p->in[3], w, b, p->out[1], y);
    return 0;
}

static int r_linear_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                        const void *gy, void *gx, float *gw, float *gb)
{
    (void)g;
    const rplan_t *p = (const rplan_t *)bp;
    ref_linear_bwd(x, gy, p->in[0], p->in[1] * p->in[2] * p->in[3], w, p->out[1], gx, gw, gb);
    return 0;
}

static void r_chan_sums(backend_t *be, const void *x, const int s[4], const float *center,
                        double *out)
{
    hk_chan_sums(x, s, center, out, 0, be->threads);
}

static void r_chan_axpb(backend_t *be, void *y, const void *x, const int s[4],
                        const float *center, const float *a, const float *b)
{
    hk_chan_axpb(y, x, s, center, a, b, 0, be->threads);
}

static void r_bn_grad_sums(backend_t *be, const void *x, const void *y, const void *gy,
                           const int s[4], int relu, float gscale, const float *center,
                           double *out)
{
    hk_bn_grad_sums(x, y, gy, s, relu, gscale, center, out, 0, be->threads);
}

static void r_bn_grad_apply(backend_t *be, void *gx, const void *x, const void *y,
                            const void *gy, const int s[4], int relu, float gscale,
                            const float *center, const float *scale, const float *a,
                            const float *b)
{
    hk_bn_grad_apply(gx, x, y, gy, s, relu, gscale, center, scale, a, b, 0, be->threads);
}

const bk_kernels_t REF_TKERNELS = {
    .alloc = hk_alloc,
    .release = hk_release,
    .write = r_write,
    .read = r_read,
    .zero = hk_zero,
    .copy = hk_copy,
    .add = hk_add,
    .acc = hk_acc,
    .concat = r_concat,
    .flatten = r_flatten,
    .dropout = r_dropout,
    .topk = r_topk,
    .ce_fwd = hk_ce_fwd,
    .ce_bwd = hk_ce_bwd,
    .conv_plan = r_conv_plan,
    .conv_fwd = r_conv_fwd,
    .conv_bwd = r_conv_bwd,
    .bn_plan = r_bn_plan,
    .bn_fwd = r_bn_fwd,
    .bn_bwd = r_bn_bwd,
    .bn_add_relu = r_bn_add_relu,
    .bn_relu_drop = r_bn_relu_drop,
    .chan_sums = r_chan_sums,
    .chan_axpb = r_chan_axpb,
    .bn_grad_sums = r_bn_grad_sums,
    .bn_grad_apply = r_bn_grad_apply,
    .relu_plan = r_relu_plan,
    .relu_fwd = r_relu_fwd,
    .relu_bwd = r_relu_bwd,
    .pool_plan = r_pool_plan,
    .pool_fwd = r_pool_fwd,
    .pool_bwd = r_pool_bwd,
    .linear_plan = r_linear_plan,
    .linear_fwd = r_linear_fwd,
    .linear_bwd = r_linear_bwd,
    .round_half = hk_round_half,
};
