/* cuda_train — the training kernels (bk_kernels_t) of the cuda backend.
 * Activations and gradients are device buffers in NCHW float; parameters
 * and their gradients are device memory too (the backend's arena is
 * cuda_arena.c: backend_impl.h's contract), used in place: weights
 * are read and gradients written by the kernels, never copied. What still
 * crosses, counted by purpose (cuda_backend_t.traffic): the batch in
 * (labels, sample ids), the outputs read back, and training BatchNorm's
 * per-channel host vectors (chan_sums, chan_axpb, bn_grad_*: the centres
 * and coefficients up, the double sums down; tape_copies.c plans them:
 * change both together). Convolutions and linear layers run in cuDNN /
 * cuBLAS (an inference graph's conv + bias + post-ops as one cuDNN graph,
 * cuda_fused.c, the legacy conv + epilogue kernel its fallback);
 * batch-norm, ReLU, pooling, dropout and cross-entropy are the own kernels
 * of cuda_kernels.cu, which follow gpud/cpu/ref_ops.c.
 *
 * --precision bf16: an inference graph runs the bf16 inference plan in NHWC
 * on tensor cores (cuinf_graph, cuda_infer.c; the entries below hand over
 * to it at their top); a tape graph (training) runs these fp32 kernels
 * with the engine's bf16 rounding points (round_half, round_half_param). */
#include <stdlib.h>
#include <string.h>

#include "gpud/bn_math.h"
#include "gpud/cuda/cuda_ce_kernels.h"
#include "gpud/cuda/cuda_fused.h"
#include "gpud/cuda/cuda_infer.h"
#include "gpud/cuda/cuda_priv.h"

static size_t count4(const int s[4])
{
    return (size_t)s[0] * s[1] * s[2] * s[3];
}

static cudaStream_t stream_of(backend_t *be)
{
    return cu_be(be)->stream;
}

/* The counters of the copies (cuda_backend_t.traffic; tape_copies.c plans
 * the BN ones call for call). */
#define BN(be) (&cu_be(be)->traffic.bn)
#define BATCH(be) (&cu_be(be)->traffic.batch_in)

/* ---------------------------------------------------------- memory, misc */

static void *ct_alloc(bk_ctx_t *g, size_t count)
{
    if (cuinf_graph(g))
        return cuinf_alloc(g, count);
    return cu_alloc(g, count * sizeof(float));
}

static void ct_release(backend_t *be, void *buf)
{
    cuinf_forget(be, buf);
    cudaFree(buf);   /* synchronises with queued work; NULL is a no-op */
}

static int ct_write(bk_ctx_t *g, void *dst, const float *nchw, const int shape[4], int layout)
{
    if (layout == CU_LAYOUT_BF16_NHWC)
        return cuinf_write(g, cuinf_fp16(g->be), dst, nchw, shape);
    return cu_up_n(g, BATCH(g->be), dst, nchw, count4(shape) * sizeof(float));
}

static int ct_read(bk_ctx_t *g, const void *src, float *nchw, const int shape[4], int layout)
{
    if (layout == CU_LAYOUT_BF16_NHWC)
        return cuinf_read(g, cuinf_fp16(g->be), src, nchw, shape);
    return cu_down_n(g, &cu_be(g->be)->traffic.out, nchw, src, count4(shape) * sizeof(float));
}

static void ct_zero(backend_t *be, void *y, size_t count)
{
    cu_note(be, cudaMemsetAsync(y, 0, cuinf_bytes(be, y, count), stream_of(be)),
            "cudaMemsetAsync");
}

static void ct_copy(backend_t *be, void *y, const void *x, size_t count)
{
    cu_note(be, cudaMemcpyAsync(y, x, cuinf_bytes(be, y, count), cudaMemcpyDeviceToDevice,
                                stream_of(be)), "device copy");
}

static void ct_add(backend_t *be, void *y, const void *a, const void *b, size_t count,
                   int relu)
{
    if (cuinf_buf(be, y)) {
        cuinf_add(be, y, a, b, count, relu);
        return;
    }
    cu_note(be, ck_add(stream_of(be), y, a, b, count, relu), "add kernel");
}

static void ct_acc(backend_t *be, void *y, const void *x, size_t count)
{
    cu_note(be, ck_acc(stream_of(be), y, x, count), "accumulate kernel");
}

static void ct_concat(backend_t *be, void *y, int cy, void *x, const int xs[4], int off,
                      int to_y)
{
    cu_note(be, ck_concat(stream_of(be), y, cy, x, xs[0], xs[1], xs[2] * xs[3], off, to_y),
            "concat kernel");
}

/* NCHW is already PyTorch's flatten order, both ways */
static void ct_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward)
{
    if (cuinf_buf(be, y) || cuinf_buf(be, x)) {   /* NHWC: a permutation */
        cuinf_flatten(be, y, x, xs, backward);
        return;
    }
    ct_copy(be, y, x, count4(xs));
}

/* write_u8: the default layout (fp32 NCHW), or the 16-bit inference plan's
 * (cu_write_u8's half: 1 bf16, 2 fp16) */
static int ct_write_u8(bk_ctx_t *g, void *dst, const uint8_t *px, const float *lut,
                       const int s[4], int layout)
{
    if (layout && layout != CU_LAYOUT_BF16_NHWC)
        return 1;
    int half = layout != CU_LAYOUT_BF16_NHWC ? 0 : cuinf_fp16(g->be) ? 2 : 1;
    return cu_write_u8(g, dst, px, lut, s, half);
}

/* keys: device memory (the graph's, put), read in place: nothing from the host */
static void ct_dropout(backend_t *be, void *y, const void *x, const int s[4], float p,
                       uint32_t op, const uint64_t *keys)
{
    cu_note(be, ck_dropout(stream_of(be), y, x, s[0], (size_t)s[1] * s[2] * s[3], p, op, keys),
            "dropout kernel");
}

/* put: a graph's step inputs (labels, dropout keys) into its own device
 * buffer, once a step before the pass (a recorded pass reads them there at
 * replay); counted as the batch's bytes */
static int ct_put(bk_ctx_t *g, void *dst, const void *src, size_t bytes)
{
    return cu_up_n(g, BATCH(g->be), dst, src, bytes);
}

/* topk: a training step's ranks where its logits are (ck_topk_ce, as
 * cuda_topk_ce and model_topk_ce rank), n * k ids down instead of the
 * n * c logits; the caller counts them. Not a bf16 inference buffer. */
static int ct_topk(bk_ctx_t *g, const void *x, int n, int c, int k, int32_t *out)
{
    backend_t *be = g->be;
    cuda_backend_t *cb = cu_be(be);
    if (cuinf_buf(be, x))
        return 1;
    size_t bytes = (size_t)(n > 0 ? n : 1) * (size_t)k * sizeof *out;
    int32_t *d = cu_grow_be(be, &cb->topk, &cb->topk_cap, bytes, "growing the top-k buffer");
    if (!d)
        return cu_sticky(g) < 0 ? -1 : cu_check(g, cudaErrorMemoryAllocation, "top-k buffer");
    if (n == 0)
        return 0;
    if (cu_check(g, ck_topk_ce(cb->stream, x, n, c, NULL, k, d, NULL), "top-k kernel") < 0)
        return -1;
    return cu_download(g, out, d, (size_t)n * k * sizeof *out);
}

static void ct_ce_fwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
                      float eps, void *loss)
{
    cu_note(be, ck_ce_fwd(stream_of(be), logits, labels, n, k, eps, loss), "cross-entropy kernel");
}

static void ct_ce_bwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
                      float eps, const void *dloss, void *glogits)
{
    cu_note(be, ck_ce_bwd(stream_of(be), logits, labels, n, k, eps, dloss, glogits),
            "cross-entropy backward kernel");
}

/* ------------------------------------------------------------ convolution */

typedef struct {
    bk_plan_t base;
    cu_conv_t conv;
    int in[4], out[4];
    double *sums;           /* device: the bias gradient's oc double sums, then
                             * their partials (ck_sum_parts) */
    /* an inference graph's conv (post non-NULL at plan time): */
    int infer;
    ck_post_t post;
    float *tmp;             /* with a sum: the conv's output (y holds the residual) */
    /* cuDNN graphs (cuda_fused.c), each NULL where the legacy call runs:
     * [CU_CONV_FWD] the forward (inference: with its bias and post-ops as
     * one graph; training: with its bias), and in training the two
     * gradients [CU_CONV_BWD_DATA], [CU_CONV_BWD_FILTER] */
    cu_fused_t *graph[3];
} conv_plan_t;

static void conv_plan_destroy(bk_plan_t *bp)
{
    conv_plan_t *p = (conv_plan_t *)bp;
    for (int k = 0; k < 3; k++)
        cu_fused_free(p->graph[k]);
    cu_conv_fini(&p->conv);
    cudaFree(p->sums);
    cudaFree(p->tmp);
    free(p);
}

/* post non-NULL: an inference graph's conv, its epilogue the post-ops. */
static bk_plan_t *ct_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                               const int in[4], const int out[4])
{
    if (cuinf_graph(g))
        return cuinf_conv_plan(g, c, post, in, out);
    conv_plan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = conv_plan_destroy;
    p->infer = post != NULL;
    int sum = 0;
    for (int i = 0; post && i < post->n; i++) {
        p->post.post[i] = (int)post->op[i];
        sum |= post->op[i] == BK_PO_SUM;
    }
    p->post.n_post = post ? post->n : 0;
    memcpy(p->in, in, sizeof p->in);
    memcpy(p->out, out, sizeof p->out);
    /* an inference conv has no backward: no backward algorithms, no gradients */
    int train = !p->infer;
    if (cu_conv_init(g, &p->conv, in, out, c->kh, c->kw, c->stride_h, c->stride_w, c->pad_h,
                     c->pad_w, train) < 0 ||
        (train && !(p->sums = cu_alloc(g, (size_t)c->oc * sizeof(double) *
                                              (1 + ck_sum_parts((size_t)out[0] * out[2] *
                                                                out[3]))))) ||
        (sum && !(p->tmp = cu_alloc(g, (size_t)out[0] * out[1] * out[2] * out[3] *
                                           sizeof(float))))) {
        conv_plan_destroy(&p->base);
        return g->failed ? NULL : bk_ctx_fail(g, "out of memory");
    }
    /* the cuDNN graphs too (inference: the fused forward; training: the
     * forward and both gradients, deterministic engines with fp32 sums,
     * TF32 only where allowed); the legacy calls above stay their fallback */
    for (int k = CU_CONV_FWD; k <= (train ? CU_CONV_BWD_FILTER : CU_CONV_FWD); k++) {
        cu_fused_shape_t fs = {.kind = k, .kh = c->kh, .kw = c->kw, .sh = c->stride_h,
                               .sw = c->stride_w, .ph = c->pad_h, .pw = c->pad_w,
                               .tensor_core = cu_be(g->be)->tf32,
                               /* training: a bias node only for a conv with a bias
                                * (a plain conv graph takes precompiled engines) */
                               .bias = k == CU_CONV_FWD && (p->infer || c->bias),
                               .n_post = k == CU_CONV_FWD ? p->post.n_post : 0};
        memcpy(fs.in, in, sizeof fs.in);
        memcpy(fs.out, out, sizeof fs.out);
        memcpy(fs.post, p->post.post, sizeof fs.post);
        if (!(p->graph[k] = cu_fused_new(g, &fs)) && g->failed) {
            conv_plan_destroy(&p->base);
            return NULL;
        }
    }
    return &p->base;
}

/* w and b are device memory, read where they are (training: the arena's
 * views; inference: the views or the engine's folded copy). With a sum
 * post-op the conv writes tmp and the epilogue sums it into y, which
 * holds the residual. */
static int ct_conv_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                       const float *b, const void *res, void *y)
{
    if (cuinf_graph(g))
        return cuinf_conv_fwd(g, bp, x, w, b, res, y);
    conv_plan_t *p = (conv_plan_t *)bp;
    float *out = res ? p->tmp : y;
    cu_fused_t *f = p->graph[CU_CONV_FWD];
    int rc = cu_sticky(g) < 0 ? -1 : f ? cu_fused_run(g, f, x, w, b, res, out, y) : 1;
    if (rc <= 0)   /* 1: the legacy path (no graph, or it failed and is off for good) */
        return rc;
    if (cu_conv_fwd(g, &p->conv, x, w, out) < 0)
        return -1;
    if (!b && p->post.n_post == 0)
        return 0;
    return cu_check(g, ck_bias_post(stream_of(g->be), y, out, b, p->out[0], p->out[1],
                                    p->out[2] * p->out[3], p->post, res),
                    "conv bias/post-op kernel");
}

static int set_math(bk_ctx_t *g, cu_conv_t *c, cudnnMathType_t m)
{
    return cudnn_check(g, cudnnSetConvolutionMathType(c->cd, m), "cudnnSetConvolutionMathType");
}

/* gb[o] = sum over (n, h, w) of gy, accumulated in double as ref does and
 * rounded once to float, all on the device */
static int conv_bias_grad(bk_ctx_t *g, conv_plan_t *p, const void *gy, float *gb)
{
    int oc = p->out[1];
    cudaStream_t s = stream_of(g->be);
    if (cu_check(g, ck_chan_sums(s, gy, p->out[0], oc, p->out[2] * p->out[3], NULL, p->sums,
                                 p->sums + oc), "bias gradient kernel") < 0)
        return -1;
    return cu_check(g, ck_d2f(s, p->sums, (size_t)oc, gb), "bias gradient rounding kernel");
}

static int ct_conv_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                       const void *gy, void *gx, float *gw, float *gb)
{
    conv_plan_t *p = (conv_plan_t *)bp;
    cuda_backend_t *cb = cu_be(g->be);
    cu_conv_t *c = &p->conv;
    const float one = 1.0f, zero = 0.0f;
    if (cu_sticky(g) < 0)
        return -1;
    /* the cuDNN graphs where built; 1 from one: its legacy call instead */
    cu_fused_t *gd = p->graph[CU_CONV_BWD_DATA], *gf = p->graph[CU_CONV_BWD_FILTER];
    cu_split_begin(g->be);
    int rc = gx && gd ? cu_fused_run_bwd_data(g, gd, gy, w, gx) : 1;
    if (rc < 0)
        return -1;
    if (gx && rc == 1 && (set_math(g, c, c->algo.math_bwd_data) < 0 ||
               cudnn_check(g, cudnnConvolutionBackwardData(cb->dnn, &one, c->wd, w, c->yd, gy,
                                                           c->cd, c->algo.bwd_data, cb->ws,
                                                           cb->ws_size, &zero, c->xd, gx),
                           "cudnnConvolutionBackwardData") < 0))
        return -1;
    cu_split_mark(g->be, CU_SPLIT_DATA);
    rc = gw && gf ? cu_fused_run_bwd_filter(g, gf, x, gy, gw) : 1;
    if (rc < 0)
        return -1;
    if (gw && rc == 1 && (set_math(g, c, c->algo.math_bwd_filter) < 0 ||
               cudnn_check(g, cudnnConvolutionBackwardFilter(cb->dnn, &one, c->xd, x, c->yd, gy,
                                                             c->cd, c->algo.bwd_filter, cb->ws,
                                                             cb->ws_size, &zero, c->wd, gw),
                           "cudnnConvolutionBackwardFilter") < 0))
        return -1;
    cu_split_mark(g->be, CU_SPLIT_FILTER);
    return gb ? conv_bias_grad(g, p, gy, gb) : 0;
}

/* ------------------------------------------------------------- batch-norm */

typedef struct {
    bk_plan_t base;
    int in[4];
    float eps;
    int relu;
    double *sums;           /* device: the backward's 2c sums (the forward's c),
                             * then from sums + 2c their partials (ck_sum_parts) */
    float *coef;            /* device: bn_train_bwd's scale, a, b (3c) */
} bn_plan_t;

static void bn_plan_destroy(bk_plan_t *bp)
{
    bn_plan_t *p = (bn_plan_t *)bp;
    cudaFree(p->sums);
    cudaFree(p->coef);
    free(p);
}

static bk_plan_t *ct_bn_plan(bk_ctx_t *g, const int in[4], float eps, int relu)
{
    if (cuinf_graph(g)) {   /* an inference plan folds every BatchNorm */
        cuinf_refuse(g, "batch-norm");
        return NULL;
    }
    bn_plan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = bn_plan_destroy;
    memcpy(p->in, in, sizeof p->in);
    p->eps = eps;
    p->relu = relu;
    size_t c2 = 2 * (size_t)in[1];
    if (!(p->sums = cu_alloc(g, c2 * sizeof(double) *
                                    (1 + ck_sum_parts((size_t)in[0] * in[2] * in[3])))) ||
        !(p->coef = cu_alloc(g, 3 * (size_t)in[1] * sizeof(float)))) {
        bn_plan_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

/* gamma, beta, mean, var: device memory (the arena's views, or the tape's
 * device copies of its batch statistics). training: the batch statistics
 * are written into mean/var on the device. */
static int ct_bn_fwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x,
                     const float *gamma, const float *beta, float *mean, float *var, void *y)
{
    bn_plan_t *p = (bn_plan_t *)bp;
    int n = p->in[0], c = p->in[1], hw = p->in[2] * p->in[3];
    cudaStream_t s = stream_of(g->be);
    if (cu_sticky(g) < 0 ||
        (training && cu_check(g, ck_bn_stats(s, x, n, c, hw, mean, var),
                              "batch-norm statistics kernel") < 0))
        return -1;
    return cu_check(g, ck_bn_apply(s, y, x, n, c, hw, gamma, beta, mean, var, p->eps, p->relu,
                                   NULL),
                    "batch-norm kernel");
}

static int ct_bn_add_relu(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *gamma,
                          const float *beta, const float *mean, const float *var,
                          const void *res, void *y)
{
    bn_plan_t *p = (bn_plan_t *)bp;
    return cu_sticky(g) < 0
               ? -1
               : cu_check(g, ck_bn_apply(stream_of(g->be), y, x, p->in[0], p->in[1],
                                         p->in[2] * p->in[3], gamma, beta, mean, var, p->eps, 1,
                                         res),
                          "batch-norm + add + ReLU kernel");
}

/* ggamma/gbeta (device, each optional) are the backward sums rounded once
 * to float on the device: sums[0, c) -> gbeta, sums[c, 2c) -> ggamma. */
static int ct_bn_bwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x, const void *y,
                     const void *gy, const float *gamma, const float *mean, const float *var,
                     void *gx, float *ggamma, float *gbeta)
{
    bn_plan_t *p = (bn_plan_t *)bp;
    int n = p->in[0], c = p->in[1], hw = p->in[2] * p->in[3];
    const float *mask = p->relu ? y : NULL;   /* through the fused ReLU first */
    cudaStream_t s = stream_of(g->be);
    if (cu_sticky(g) < 0 ||
        cu_check(g, ck_bn_bwd_sums(s, x, mask, gy, n, c, hw, mean, var, p->eps, p->sums),
                 "batch-norm backward sums kernel") < 0 ||
        (gbeta && cu_check(g, ck_d2f(s, p->sums, (size_t)c, gbeta),
                           "batch-norm beta gradient kernel") < 0) ||
        (ggamma && cu_check(g, ck_d2f(s, p->sums + c, (size_t)c, ggamma),
                            "batch-norm gamma gradient kernel") < 0))
        return -1;
    if (!gx)
        return 0;
    return cu_check(g, ck_bn_bwd_data(s, gx, x, mask, gy, n, c, hw, gamma, mean, var, p->eps,
                                      training, p->sums), "batch-norm backward kernel");
}

/* Training BatchNorm on the device (bk_kernels_t.bn_train_*): the host
 * path's steps (tape_bn.c) as kernels on the plan's own buffers, nothing
 * copied, nothing waited for, the same bits (bn_math.h). */
static int ct_bn_train_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const int sh[4],
                           const bk_bn_train_t *t, void *y)
{
    bn_plan_t *p = (bn_plan_t *)bp;
    int n = sh[0], c = sh[1], hw = sh[2] * sh[3];
    float *mean = t->stat, *var = t->stat + c;
    cudaStream_t s = stream_of(g->be);
    if (cu_sticky(g) < 0 ||
        cu_check(g, ck_chan_sums(s, x, n, c, hw, NULL, p->sums, p->sums + 2 * c),
                 "channel sums kernel") < 0 ||
        cu_check(g, ck_bn_stat(s, p->sums, c, t->count, mean), "batch mean kernel") < 0 ||
        cu_check(g, ck_chan_sums(s, x, n, c, hw, mean, p->sums, p->sums + 2 * c),
                 "channel sums kernel") < 0 ||
        cu_check(g, ck_bn_stat(s, p->sums, c, t->count, var), "batch variance kernel") < 0 ||
        (t->res ? ct_bn_add_relu(g, bp, x, t->gamma, t->beta, mean, var, t->res, y)
                : ct_bn_fwd(g, bp, 0, x, t->gamma, t->beta, mean, var, y)) < 0)
        return -1;
    return cu_check(g, ck_bn_running(s, t->running_mean, t->running_var, t->stat, c,
                                     t->momentum, bnm_unbias(t->count)),
                    "running statistics kernel");
}

static int ct_bn_train_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const void *y,
                           const void *gy, const int sh[4], const bk_bn_train_t *t, void *gx)
{
    bn_plan_t *p = (bn_plan_t *)bp;
    int n = sh[0], c = sh[1], hw = sh[2] * sh[3];
    const float *mean = t->stat, *var = t->stat + c, *mask = t->relu ? y : NULL;
    cudaStream_t s = stream_of(g->be);
    if (cu_sticky(g) < 0 ||
        cu_check(g, ck_bn_grad_sums(s, x, mask, gy, t->gy2, t->gres, n, c, hw, mean, p->sums,
                                    p->sums + 2 * c),
                 "batch-norm gradient sums kernel") < 0 ||
        cu_check(g, ck_bn_grad_finish(s, p->sums, c, t->gamma, var, t->eps, t->count,
                                      t->ggamma, t->gbeta, p->coef),
                 "batch-norm gradient coefficients kernel") < 0)
        return -1;
    if (!gx)
        return 0;
    if (t->gres)   /* dy' stored by the sums (the ReLU's backward fused) */
        mask = NULL, gy = t->gres;
    return cu_check(g, ck_bn_grad_apply(s, gx, x, mask, gy, n, c, hw, mean, p->coef,
                                        p->coef + c, p->coef + 2 * c),
                    "batch-norm gradient kernel");
}

/* SyncBatchNorm helpers: center/a/b/scale are host vectors and the double
 * sums host arrays (the host all-reduces them); their copies count as bn. */
static void ct_chan_sums(backend_t *be, const void *x, const int s[4], const float *center,
                         double *out)
{
    size_t c = (size_t)s[1];
    const float *dcen;
    double *dsum = cu_sums_scratch(be, BN(be), c, ck_sum_parts((size_t)s[0] * s[2] * s[3]), c,
                                   center, &dcen);   /* the sums, then their partials */
    if (!dsum)
        return;
    cu_note(be, ck_chan_sums(stream_of(be), x, s[0], (int)c, s[2] * s[3], dcen, dsum, dsum + c),
            "channel sums kernel");
    cu_down_be_n(be, BN(be), out, dsum, c * sizeof(double));
}

static void ct_chan_axpb(backend_t *be, void *y, const void *x, const int s[4],
                         const float *center, const float *a, const float *b)
{
    size_t c = (size_t)s[1];
    const float *v[3] = {center, a, b};
    float *d = cu_vectors_up(be, BN(be), c, 3, v);
    if (!d)
        return;
    cu_note(be, ck_chan_axpb(stream_of(be), y, x, s[0], (int)c, s[2] * s[3], d, d + c, d + 2 * c),
            "channel axpb kernel");
}

/* SyncBatchNorm backward sums in double (optional table entries) */
static void ct_bn_grad_sums(backend_t *be, const void *x, const void *y, const void *gy,
                            const int s[4], int relu, float gscale, const float *center,
                            double *out)
{
    if (!cu_gscale_one(be, gscale))
        return;
    size_t c = (size_t)s[1];
    const float *dcen;
    double *dsum = cu_sums_scratch(be, BN(be), 2 * c, ck_sum_parts((size_t)s[0] * s[2] * s[3]),
                                   c, center, &dcen);   /* the 2c sums, then their partials */
    if (!dsum)
        return;
    cu_note(be, ck_bn_grad_sums(stream_of(be), x, relu ? y : NULL, gy, NULL, NULL, s[0], (int)c,
                                s[2] * s[3], dcen, dsum, dsum + 2 * c),
            "batch-norm gradient sums kernel");
    cu_down_be_n(be, BN(be), out, dsum, 2 * c * sizeof(double));
}

static void ct_bn_grad_apply(backend_t *be, void *gx, const void *x, const void *y,
                             const void *gy, const int s[4], int relu, float gscale,
                             const float *center, const float *scale, const float *a,
                             const float *b)
{
    if (!cu_gscale_one(be, gscale))
        return;
    size_t c = (size_t)s[1];
    const float *v[4] = {center, scale, a, b};
    float *d = cu_vectors_up(be, BN(be), c, 4, v);
    if (!d)
        return;
    cu_note(be, ck_bn_grad_apply(stream_of(be), gx, x, relu ? y : NULL, gy, s[0], (int)c,
                                 s[2] * s[3], d, d + c, d + 2 * c, d + 3 * c),
            "batch-norm gradient kernel");
}

/* ------------------------------------------------------------ relu, pool */

typedef struct {
    bk_plan_t base;
    size_t count;
    ck_pool_t pool;
} simple_plan_t;

static void simple_plan_destroy(bk_plan_t *bp)
{
    free(bp);
}

static simple_plan_t *simple_plan(bk_ctx_t *g)
{
    simple_plan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = simple_plan_destroy;
    return p;
}

static bk_plan_t *ct_relu_plan(bk_ctx_t *g, const int in[4])
{
    if (cuinf_graph(g))
        return cuinf_relu_plan(g, in);
    simple_plan_t *p = simple_plan(g);
    if (p)
        p->count = count4(in);
    return p ? &p->base : NULL;
}

static int ct_relu_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    if (cuinf_graph(g))
        return cuinf_relu_fwd(g, bp, x, y);
    return cu_check(g, ck_relu(stream_of(g->be), y, x, ((simple_plan_t *)bp)->count),
                    "relu kernel");
}

static int ct_relu_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *y, const void *gy, void *gx)
{
    return cu_check(g, ck_relu_bwd(stream_of(g->be), gx, y, gy, ((simple_plan_t *)bp)->count),
                    "relu backward kernel");
}

static bk_plan_t *ct_pool_plan(bk_ctx_t *g, const bk_pool_t *pp, const int in[4],
                               const int out[4])
{
    if (cuinf_graph(g))
        return cuinf_pool_plan(g, pp, in, out);
    simple_plan_t *p = simple_plan(g);
    if (!p)
        return NULL;
    p->pool = (ck_pool_t){.nc = in[0] * in[1], .ih = in[2], .iw = in[3], .oh = out[2],
                          .ow = out[3], .kh = pp->kh, .kw = pp->kw, .sh = pp->stride_h,
                          .sw = pp->stride_w, .ph = pp->pad_h, .pw = pp->pad_w,
                          .alg = pp->alg == BK_POOL_MAX ? 0 : pp->alg == BK_POOL_AVG ? 1 : 2};
    return &p->base;
}

static int ct_pool_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    if (cuinf_graph(g))
        return cuinf_pool_fwd(g, bp, x, y);
    return cu_check(g, ck_pool_fwd(stream_of(g->be), &((simple_plan_t *)bp)->pool, x, y),
                    "pooling kernel");
}

static int ct_pool_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const void *gy, void *gx)
{
    return cu_check(g, ck_pool_bwd(stream_of(g->be), &((simple_plan_t *)bp)->pool, x, gy, gx),
                    "pooling backward kernel");
}

/* ----------------------------------------------------------------- linear */

typedef struct {
    bk_plan_t base;
    int n, in, out, has_bias;
} lin_plan_t;

static void lin_plan_destroy(bk_plan_t *bp)
{
    free(bp);
}

static bk_plan_t *ct_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias)
{
    if (cuinf_graph(g))
        return cuinf_linear_plan(g, in, out, has_bias);
    lin_plan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = lin_plan_destroy;
    p->n = in[0];
    p->in = in[1] * in[2] * in[3];
    p->out = out;
    p->has_bias = has_bias;
    return &p->base;
}

/* w, b: device memory (the arena's views), read in place */
static int ct_linear_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                         const float *b, void *y)
{
    if (cuinf_graph(g))
        return cuinf_linear_fwd(g, bp, x, w, b, y);
    lin_plan_t *p = (lin_plan_t *)bp;
    if (cu_sticky(g) < 0)
        return -1;
    return cu_linear_fwd(g, x, p->n, p->in, w, b, p->out, y);
}

/* Column-major views: gx^T (in x n) = w^T (in x out) gy^T (out x n);
 * gw^T (in x out) = x^T (in x n) gy (n x out). gw, gb: device memory,
 * written (not accumulated) in place. */
static int ct_linear_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                         const void *gy, void *gx, float *gw, float *gb)
{
    lin_plan_t *p = (lin_plan_t *)bp;
    cuda_backend_t *cb = cu_be(g->be);
    const float one = 1.0f, zero = 0.0f;
    if (cu_sticky(g) < 0)
        return -1;
    if (gx && cublas_check(g, cublasSgemm(cb->blas, CUBLAS_OP_N, CUBLAS_OP_N, p->in, p->n, p->out,
                                          &one, w, p->in, gy, p->out, &zero, gx, p->in),
                           "cublasSgemm (linear backward data)") < 0)
        return -1;
    if (gw && cublas_check(g, cublasSgemm(cb->blas, CUBLAS_OP_N, CUBLAS_OP_T, p->in, p->out, p->n,
                                          &one, x, p->in, gy, p->out, &zero, gw, p->in),
                           "cublasSgemm (linear backward weights)") < 0)
        return -1;
    if (gb && cu_check(g, ck_col_sums(cb->stream, gy, p->n, p->out, gb),
                       "linear bias gradient kernel") < 0)
        return -1;
    return 0;
}

const bk_kernels_t CUDA_TKERNELS = {
    .alloc = ct_alloc,
    .release = ct_release,
    .write = ct_write,
    .read = ct_read,
    .write_u8 = ct_write_u8,
    .zero = ct_zero,
    .copy = ct_copy,
    .add = ct_add,
    .acc = ct_acc,
    .concat = ct_concat,
    .flatten = ct_flatten,
    .dropout = ct_dropout,
    .ce_fwd = ct_ce_fwd,
    .ce_bwd = ct_ce_bwd,
    .put = ct_put,
    .topk = ct_topk,
    .conv_plan = ct_conv_plan,
    .conv_fwd = ct_conv_fwd,
    .conv_bwd = ct_conv_bwd,
    .bn_plan = ct_bn_plan,
    .bn_fwd = ct_bn_fwd,
    .bn_bwd = ct_bn_bwd,
    .bn_add_relu = ct_bn_add_relu,
    .chan_sums = ct_chan_sums,
    .chan_axpb = ct_chan_axpb,
    .bn_grad_sums = ct_bn_grad_sums,
    .bn_grad_apply = ct_bn_grad_apply,
    .bn_train_fwd = ct_bn_train_fwd,
    .bn_train_bwd = ct_bn_train_bwd,
    .relu_plan = ct_relu_plan,
    .relu_fwd = ct_relu_fwd,
    .relu_bwd = ct_relu_bwd,
    .pool_plan = ct_pool_plan,
    .pool_fwd = ct_pool_fwd,
    .pool_bwd = ct_pool_bwd,
    .linear_plan = ct_linear_plan,
    .linear_fwd = ct_linear_fwd,
    .linear_bwd = ct_linear_bwd,
    /* --precision bf16|fp16: the tape's rounding points; the 16-bit
     * inference plan (cuda_infer.c) */
    .round_half = cuinf_round,
    .round_half_param = cuinf_round_param,
    .bf16_native = cuinf_native,
    .layout = cuinf_layout,
};
