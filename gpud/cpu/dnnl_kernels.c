/* dnnl_kernels — the "cpu" backend's kernel table (bk_kernels_t): the
 * layout conversions and host loops of the tape's NHWC activations
 * (host_kernels.c), the training plans (dnnl_train.c, dnnl_layers.c) and,
 * for an inference graph (g->infer), dnnl_infer.c's plans. */
#include <stdint.h>

#include "gpud/cpu/dnnl_priv.h"
#include "gpud/cpu/host_kernels.h"
#include "gpud/topk_rank.h"

static int c_write(bk_ctx_t *g, void *dst, const float *src, const int s[4], int layout)
{
    if (layout)
        return cpu_infer_write(g, dst, src, s, layout);
    float *d = dst;
    size_t hw = (size_t)s[2] * s[3];
    for (int b = 0; b < s[0]; b++)
        for (int c = 0; c < s[1]; c++)
            for (size_t p = 0; p < hw; p++)
                d[((size_t)b * hw + p) * s[1] + c] = src[((size_t)b * s[1] + c) * hw + p];
    return 0;
}

static int c_read(bk_ctx_t *g, const void *src, float *dst, const int s[4], int layout)
{
    if (layout)
        return cpu_infer_read(g, src, dst, s, layout);
    const float *x = src;
    size_t hw = (size_t)s[2] * s[3];
    for (int b = 0; b < s[0]; b++)
        for (int c = 0; c < s[1]; c++)
            for (size_t p = 0; p < hw; p++)
                dst[((size_t)b * s[1] + c) * hw + p] = x[((size_t)b * hw + p) * s[1] + c];
    return 0;
}

static int c_write_u8(bk_ctx_t *g, void *dst, const uint8_t *px, const float *lut,
                      const int s[4], int layout)
{
    if (layout)   /* an inference plan's own layout: from floats */
        return 1;
    hk_write_u8(dst, px, lut, s, 1, g->be->threads);
    return 0;
}

static void c_concat(backend_t *be, void *y, int cy, void *x, const int xs[4], int off, int to_y)
{
    (void)be;
    hk_concat(y, cy, x, xs, off, to_y, 1);
}

static void c_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward)
{
    (void)be;
    hk_flatten(y, x, xs, backward, 1);
}

/* bk_read_topk: the logits ranked where they are (host memory) */
static int c_topk(bk_ctx_t *g, const void *x, int n, int c, int k, int32_t *out)
{
    (void)g;
    topk_rank(x, n, c, k, out);
    return 0;
}

static void c_dropout(backend_t *be, void *y, const void *x, const int s[4], float p,
                      uint32_t op, const uint64_t *keys)
{
    (void)be;
    hk_dropout(y, x, s, p, op, keys, 1);
}

static void c_chan_sums(backend_t *be, const void *x, const int s[4], const float *center,
                        double *out)
{
    hk_chan_sums(x, s, center, out, 1, be->threads);
}

static void c_chan_axpb(backend_t *be, void *y, const void *x, const int s[4],
                        const float *center, const float *a, const float *b)
{
    hk_chan_axpb(y, x, s, center, a, b, 1, be->threads);
}

static void c_bn_grad_sums(backend_t *be, const void *x, const void *y, const void *gy,
                           const int s[4], int relu, float gscale, const float *center,
                           double *out)
{
    hk_bn_grad_sums(x, y, gy, s, relu, gscale, center, out, 1, be->threads);
}

static void c_bn_grad_apply(backend_t *be, void *gx, const void *x, const void *y,
                            const void *gy, const int s[4], int relu, float gscale,
                            const float *center, const float *scale, const float *a,
                            const float *b)
{
    hk_bn_grad_apply(gx, x, y, gy, s, relu, gscale, center, scale, a, b, 1, be->threads);
}

/* The plans of an inference graph (g->infer) are dnnl_infer.c's. */
static bk_plan_t *c_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                              const int in[4], const int out[4])
{
    return post ? cpu_infer_conv_plan(g, c, post, in, out) : cpu_conv_plan(g, c, in, out);
}

static int c_conv_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                      const float *b, const void *res, void *y)
{
    return g->infer ? cpu_infer_conv_fwd(g, p, x, w, b, res, y) : cpu_w_fwd(g, p, x, w, b, y);
}

static bk_plan_t *c_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias)
{
    return g->infer ? cpu_infer_linear_plan(g, in, out, has_bias)
                    : cpu_linear_plan(g, in, out, has_bias);
}

static int c_linear_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                        const float *b, void *y)
{
    return g->infer ? cpu_infer_linear_fwd(g, p, x, w, b, y) : cpu_w_fwd(g, p, x, w, b, y);
}

static bk_plan_t *c_relu_plan(bk_ctx_t *g, const int in[4])
{
    return g->infer ? cpu_infer_relu_plan(g, in) : cpu_relu_plan(g, in);
}

static int c_relu_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y)
{
    return g->infer ? cpu_infer_fwd(g, p, x, y) : cpu_relu_fwd(g, p, x, y);
}

static bk_plan_t *c_pool_plan(bk_ctx_t *g, const bk_pool_t *q, const int in[4],
                              const int out[4])
{
    return g->infer ? cpu_infer_pool_plan(g, q, in, out) : cpu_pool_plan(g, q, in, out);
}

static int c_pool_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y)
{
    return g->infer ? cpu_infer_fwd(g, p, x, y) : cpu_pool_fwd(g, p, x, y);
}

const bk_kernels_t CPU_TKERNELS = {
    .alloc = hk_alloc,
    .release = hk_release,
    .write = c_write,
    .read = c_read,
    .write_u8 = c_write_u8,
    .zero = hk_zero,
    .copy = hk_copy,
    .add = hk_add,
    .acc = hk_acc,
    .concat = c_concat,
    .flatten = c_flatten,
    .dropout = c_dropout,
    .topk = c_topk,
    .ce_fwd = hk_ce_fwd,
    .ce_bwd = hk_ce_bwd,
    .conv_plan = c_conv_plan,
    .conv_fwd = c_conv_fwd,
    .conv_bwd = cpu_w_bwd,
    .bn_plan = cpu_bn_plan,
    .bn_fwd = cpu_bn_fwd,
    .bn_bwd = cpu_bn_bwd,
    .bn_add_relu = cpu_bn_add_relu,
    .bn_relu_drop = cpu_bn_relu_drop,
    .chan_sums = c_chan_sums,
    .chan_axpb = c_chan_axpb,
    .bn_grad_sums = c_bn_grad_sums,
    .bn_grad_apply = c_bn_grad_apply,
    .relu_plan = c_relu_plan,
    .relu_fwd = c_relu_fwd,
    .relu_bwd = cpu_relu_bwd,
    .pool_plan = c_pool_plan,
    .pool_fwd = c_pool_fwd,
    .pool_bwd = cpu_pool_bwd,
    .linear_plan = c_linear_plan,
    .linear_fwd = c_linear_fwd,
    .linear_bwd = cpu_w_bwd,
    .round_half = hk_round_half,
    .bf16_native = cpu_bf16_native,
    .layout = cpu_infer_layout,
};
