/* cuda_infer — --precision bf16 and fp16 on the cuda backend: graph_plan.c's
 * inference plan (conv with BatchNorm folded + bias + ReLU / residual sum,
 * add [+ ReLU], ReLU, pooling, linear; flatten and dropout are aliases) on
 * tensor cores, the numbers of docs/BF16.md "bf16 inference plan" (fp16:
 * the same with fp16 values, docs/FP16.md "The inference plan"). Below,
 * "bf16" stands for the precision's 16-bit format (cuinf_fp16):
 *
 *   activations  bf16, NHWC (channels last) end to end: every buffer of a
 *                bf16 graph (cuinf_alloc: 2 bytes an element); the input
 *                converted from the caller's NCHW floats on the device
 *                (cuinf_write), the logits back to NCHW floats (cuinf_read)
 *   convolution  cuDNN (legacy API), x and w bf16 NHWC, compute type
 *                float on tensor cores (CUDNN_TENSOR_OP_MATH), deterministic
 *                algorithms only, chosen once per plan (heuristics; timed
 *                with DDPIPE_CUDA_ALGO=find); channels padded to multiples
 *                of 8 with zeros (exact) so the tensor-core kernels apply;
 *                as one cuDNN graph (cuda_fused.c: conv, bias, post-ops in
 *                fp32, one rounding at its end) where the output channels
 *                need no padding; else, or where cuDNN builds no graph,
 *                cuDNN stores its fp32 sum rounded to bf16, then the
 *                epilogue kernel adds the bias and applies the post-ops in
 *                fp32 and rounds once more (the one rounding point more than
 *                the cpu plan: docs/CUDA.md)
 *   linear       cublasGemmEx, bf16 inputs, fp32 sums (CUBLAS_COMPUTE_32F)
 *                into an fp32 buffer, + bias, rounded once to bf16; the
 *                weight's columns permuted to the NHWC order of its input,
 *                so a flatten costs nothing
 *   weights      the engine's folded copies (fp32 device memory holding bf16
 *                values), converted to bf16 NHWC once per g->params_version
 *
 * Training and every other tape graph in bf16 or fp16 run the 16-bit
 * training table (cuda_train16.c; fp32 NCHW buffers with
 * DDPIPE_HALF_ACTIVATIONS=0); the kinds of buffer live on one backend (a
 * training job's validation), told apart by the registry of this file's
 * buffers (cuinf_buf). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gpud/cuda/cuda_fused.h"
#include "gpud/cuda/cuda_infer.h"
#include "gpud/cuda/cuda_infer_kernels.h"
#include "gpud/cuda/cuda_priv.h"

static size_t count4(const int s[4])
{
    return (size_t)s[0] * s[1] * s[2] * s[3];
}

static cudaStream_t stream_of(backend_t *be)
{
    return cu_be(be)->stream;
}

/* the plan's 16-bit format: 1 fp16, 0 bf16 (the kernels' fp16 argument) */
static int plan_fp16(const bk_ctx_t *g)
{
    return cuinf_fp16(g->be);
}

static const char *h16_name(const bk_ctx_t *g)
{
    return plan_fp16(g) ? "fp16" : "bf16";
}

static cudnnDataType_t h16_dnn(const bk_ctx_t *g)
{
    return plan_fp16(g) ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

/* Tensor cores take NHWC bf16 channels in multiples of 8 (16 bytes). */
static int round8(int c)
{
    return (c + 7) / 8 * 8;
}

int cuinf_refuse(bk_ctx_t *g, const char *what)
{
    bk_ctx_fail(g, "%s: a kernel of the 16-bit inference plan was asked for by a graph that "
                "does not run the plan (training, DDPIPE_BF16_EVAL=tape, DDPIPE_FP16_EVAL=tape, "
                "or an op without a fused form: gpud's debug log names it), a bug: report it "
                "with the model, or use --precision fp32 on cuda", what);
    return -1;
}

/* ------------------------------------------------------- buffers, misc */

int cuinf_layout(backend_t *be, const int s[4])
{
    (void)s;
    return cuinf_on(be) ? CU_LAYOUT_BF16_NHWC : 0;
}

void *cuinf_alloc(bk_ctx_t *g, size_t count)
{
    if (!g->infer) {
        cuinf_refuse(g, "a tape graph");
        return NULL;
    }
    cuda_backend_t *cb = cu_be(g->be);
    if (cb->nbf16 == cb->capbf16) {
        size_t cap = cb->capbf16 ? 2 * cb->capbf16 : 64;
        void **b = realloc(cb->bf16_bufs, cap * sizeof *b);
        if (!b) {
            bk_ctx_fail(g, "out of memory");
            return NULL;
        }
        cb->bf16_bufs = b;
        cb->capbf16 = cap;
    }
    void *p = cu_alloc(g, count * 2);
    if (p)
        cb->bf16_bufs[cb->nbf16++] = p;
    return p;
}

/* A buffer's base address is what the kernels get (views of a buffer are
 * never handed over), so an equality search suffices; a graph has tens. */
int cuinf_buf(const backend_t *be, const void *p)
{
    const cuda_backend_t *cb = (const cuda_backend_t *)be;
    for (size_t i = 0; p && i < cb->nbf16; i++)
        if (cb->bf16_bufs[i] == p)
            return 1;
    return 0;
}

void cuinf_forget(backend_t *be, const void *p)
{
    cuda_backend_t *cb = cu_be(be);
    for (size_t i = 0; p && i < cb->nbf16; i++)
        if (cb->bf16_bufs[i] == p) {
            cb->bf16_bufs[i] = cb->bf16_bufs[--cb->nbf16];
            return;
        }
}

size_t cuinf_bytes(const backend_t *be, const void *p, size_t count)
{
    return count * (cuinf_buf(be, p) ? 2 : sizeof(float));
}

/* The floats go up into the backend's scratch (counted as the batch's
 * bytes, as fp32's write), then one kernel rounds them into dst (bf16, or
 * with fp16 an fp16 buffer of cuda_train16.c). */
int cuinf_write(bk_ctx_t *g, int fp16, void *dst, const float *nchw, const int s[4])
{
    size_t bytes = count4(s) * sizeof(float);
    float *f = cu_scratch(g, bytes);
    if (!f || cu_up_n(g, &cu_be(g->be)->traffic.batch_in, f, nchw, bytes) < 0)
        return -1;
    return cu_check(g, ckb_from_nchw(stream_of(g->be), fp16, f, s[0], s[1], s[2] * s[3], dst),
                    "16-bit input conversion kernel");
}

int cuinf_read(bk_ctx_t *g, int fp16, const void *src, float *nchw, const int s[4])
{
    size_t bytes = count4(s) * sizeof(float);
    float *f = cu_scratch(g, bytes);
    if (!f || cu_check(g, ckb_to_nchw(stream_of(g->be), fp16, src, s[0], s[1], s[2] * s[3], f),
                       "16-bit output conversion kernel") < 0)
        return -1;
    return cu_down_n(g, &cu_be(g->be)->traffic.out, nchw, f, bytes);
}

void cuinf_add(backend_t *be, void *y, const void *a, const void *b, size_t count, int relu)
{
    cu_note(be, ckb_add(stream_of(be), cuinf_fp16(be), y, a, b, count, relu), "16-bit add kernel");
}

void cuinf_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward)
{
    if (backward) {   /* inference graphs have no backward */
        cu_note(be, cudaErrorNotSupported, "16-bit inference-plan flatten backward");
        return;
    }
    cu_note(be, ckb_flatten(stream_of(be), cuinf_fp16(be), x, xs[0], xs[1], xs[2] * xs[3], y),
            "16-bit flatten kernel");
}

/* dst = src rounded to fmt, on the backend's stream */
static cudaError_t round_to(backend_t *be, bk_half_t fmt, const float *src, size_t count,
                            float *dst)
{
    return fmt == BK_HALF_FP16 ? ck_round_fp16(stream_of(be), src, count, dst)
                               : ck_round_bf16(stream_of(be), src, count, dst);
}

void cuinf_round(backend_t *be, bk_half_t fmt, void *y, size_t count)
{
    if (!cuinf_buf(be, y))   /* a tape graph's fp32 buffer */
        cu_note(be, round_to(be, fmt, y, count, y),
                fmt == BK_HALF_FP16 ? "fp16 rounding kernel" : "bf16 rounding kernel");
}

void cuinf_round_param(backend_t *be, bk_half_t fmt, float *dst, const float *src,
                       size_t count)
{
    cu_note(be, round_to(be, fmt, src, count, dst),
            fmt == BK_HALF_FP16 ? "fp16 weight rounding kernel" : "bf16 weight rounding kernel");
}

int cuinf_native(const char **isa)
{
    if (isa)
        *isa = "cuda tensor cores";
    return 3;   /* fast native kernels (backend_bf16_native) */
}

/* ------------------------------------------------------------ convolution */

typedef struct {
    bk_plan_t base;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo;
    int in[4], out[4], kh, kw;
    int icp, ocp;       /* channels padded to multiples of 8 */
    int s2d;            /* a stride-2 stem run as its space-to-depth form */
    int xs[4];          /* the input as cuDNN sees it: in[] padded, or s2d's */
    int kh2, kw2;       /* the kernel cuDNN runs (s2d: half the size, rounded up) */
    int pad_h, pad_w;   /* the layer's padding (s2d: applied by ckb_s2d) */
    ck_post_t post;
    void *w16;          /* bf16 [ocp, kh2, kw2, icp] */
    void *xpad;         /* the input with icp channels (or in s2d form), or NULL */
    void *tmp;          /* cuDNN's output when it is not y: a sum post-op (y holds
                         * the residual) or ocp != out[1]; else NULL */
    unsigned wver;      /* g->params_version of w16 */
    int wset;
    cu_fused_t *fused;  /* the conv + epilogue as one cuDNN graph (ocp == oc), or NULL */
} iconv_t;

static void iconv_destroy(bk_plan_t *bp)
{
    iconv_t *p = (iconv_t *)bp;
    cu_fused_free(p->fused);
    if (p->xd)
        cudnnDestroyTensorDescriptor(p->xd);
    if (p->yd)
        cudnnDestroyTensorDescriptor(p->yd);
    if (p->wd)
        cudnnDestroyFilterDescriptor(p->wd);
    if (p->cd)
        cudnnDestroyConvolutionDescriptor(p->cd);
    cudaFree(p->w16);   /* synchronises with queued work; NULL is a no-op */
    cudaFree(p->xpad);
    cudaFree(p->tmp);
    free(p);
}

/* c as cuDNN runs it: c itself, or (s2d) a 1-strided unpadded kh2 x kw2 */
static int iconv_descs(bk_ctx_t *g, iconv_t *p, const bk_conv_t *c)
{
    int n = 0, k = 0, h = 0, w = 0;
    if (cudnn_check(g, cudnnCreateTensorDescriptor(&p->xd), "cudnnCreateTensorDescriptor") < 0 ||
        cudnn_check(g, cudnnCreateTensorDescriptor(&p->yd), "cudnnCreateTensorDescriptor") < 0 ||
        cudnn_check(g, cudnnCreateFilterDescriptor(&p->wd), "cudnnCreateFilterDescriptor") < 0 ||
        cudnn_check(g, cudnnCreateConvolutionDescriptor(&p->cd),
                    "cudnnCreateConvolutionDescriptor") < 0)
        return -1;
    cudnnDataType_t dt = h16_dnn(g);
    if (cudnn_check(g, cudnnSetTensor4dDescriptor(p->xd, CUDNN_TENSOR_NHWC, dt, p->xs[0],
                                                  p->xs[1], p->xs[2], p->xs[3]),
                    "cudnnSetTensor4dDescriptor (16-bit NHWC input)") < 0 ||
        cudnn_check(g, cudnnSetTensor4dDescriptor(p->yd, CUDNN_TENSOR_NHWC, dt, p->out[0],
                                                  p->ocp, p->out[2], p->out[3]),
                    "cudnnSetTensor4dDescriptor (16-bit NHWC output)") < 0 ||
        cudnn_check(g, cudnnSetFilter4dDescriptor(p->wd, dt, CUDNN_TENSOR_NHWC, p->ocp, p->icp,
                                                  c->kh, c->kw),
                    "cudnnSetFilter4dDescriptor (16-bit NHWC)") < 0 ||
        /* PyTorch's conv is a cross-correlation; fp32 sums */
        cudnn_check(g, cudnnSetConvolution2dDescriptor(p->cd, c->pad_h, c->pad_w, c->stride_h,
                                                       c->stride_w, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                    "cudnnSetConvolution2dDescriptor (16-bit)") < 0 ||
        cudnn_check(g, cudnnSetConvolutionMathType(p->cd, CUDNN_TENSOR_OP_MATH),
                    "cudnnSetConvolutionMathType (tensor ops)") < 0 ||
        cudnn_check(g, cudnnGetConvolution2dForwardOutputDim(p->cd, p->xd, p->wd, &n, &k, &h, &w),
                    "cudnnGetConvolution2dForwardOutputDim") < 0)
        return -1;
    if (n != p->out[0] || k != p->ocp || h != p->out[2] || w != p->out[3]) {
        bk_ctx_fail(g, "cuDNN's %s convolution gives [%d,%d,%d,%d], the graph has [%d,%d,%d,%d] "
                    "(%d channels padded to %d%s): report the layer's shapes", h16_name(g), n, k,
                    h, w,
                    p->out[0], p->out[1], p->out[2], p->out[3], p->out[1], p->ocp,
                    p->s2d ? ", space-to-depth" : "");
        return -1;
    }
    return 0;
}

/* The first deterministic algorithm that fits the workspace cap, tensor-op
 * math first (cuDNN's heuristics give the same order in every process). */
static int iconv_pick(const cudnnConvolutionFwdAlgoPerf_t *perf, int count, size_t cap)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < count; i++)
            if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= cap &&
                perf[i].determinism == CUDNN_DETERMINISTIC &&
                (pass == 1 || perf[i].mathType == CUDNN_TENSOR_OP_MATH))
                return i;
    return -1;
}

static int iconv_algo(bk_ctx_t *g, iconv_t *p)
{
    cuda_backend_t *cb = cu_be(g->be);
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    int n = 0;
    cudnnStatus_t st =
        cb->algo_find
            ? cudnnFindConvolutionForwardAlgorithm(cb->dnn, p->xd, p->wd, p->cd, p->yd, 16, &n,
                                                   perf)
            : cudnnGetConvolutionForwardAlgorithm_v7(cb->dnn, p->xd, p->wd, p->cd, p->yd, 16, &n,
                                                     perf);
    if (cudnn_check(g, st, cb->algo_find ? "cudnnFindConvolutionForwardAlgorithm (16-bit)"
                                         : "cudnnGetConvolutionForwardAlgorithm_v7 (16-bit)") < 0)
        return -1;
    int i = iconv_pick(perf, n, cb->ws_cap);
    if (i < 0) {
        bk_ctx_fail(g, "cuDNN offers no deterministic %s NHWC forward algorithm for a %dx%d "
                    "convolution of [%d,%d,%d,%d] (%d candidates, workspace cap %zu MB): raise "
                    "DDPIPE_CUDA_WORKSPACE_MB, or use --precision fp32", h16_name(g), p->kh, p->kw,
                    p->in[0],
                    p->in[1], p->in[2], p->in[3], n, cb->ws_cap >> 20);
        return -1;
    }
    p->algo = perf[i].algo;
    if (cudnn_check(g, cudnnSetConvolutionMathType(p->cd, perf[i].mathType),
                    "cudnnSetConvolutionMathType") < 0)
        return -1;
    return cu_workspace(g, perf[i].memory);
}

/* 1 when c over in[] runs as its space-to-depth form (ckb_s2d_shape):
 * cs is then the conv cuDNN runs, kh2 x kw2, stride 1, no padding, over
 * xs[] (the channels padded to 16) */
static int s2d_form(const bk_conv_t *c, const int in[4], const int out[4], bk_conv_t *cs,
                    int xs[4])
{
    int f[4];
    if (!ckb_s2d_shape(in[1], in[2], in[3], c->kh, c->kw, c->stride_h, c->stride_w, c->pad_h,
                       c->pad_w, out[2], out[3], f))
        return 0;
    *cs = *c;
    cs->kh = f[2];
    cs->kw = f[3];
    cs->stride_h = cs->stride_w = 1;
    cs->pad_h = cs->pad_w = 0;
    xs[0] = in[0];
    xs[1] = round8(4 * in[1]);
    xs[2] = f[0];
    xs[3] = f[1];
    return 1;
}

static atomic_ulong n_s2d, n_plans[2];

unsigned long cuinf_conv_plans(int fp16)
{
    return atomic_load(&n_plans[fp16 ? 1 : 0]);
}

unsigned long cuinf_s2d_count(void)
{
    return atomic_load(&n_s2d);
}

void cuinf_s2d_note(void)
{
    atomic_fetch_add(&n_s2d, 1);
}

bk_plan_t *cuinf_conv_plan(bk_ctx_t *g, const bk_conv_t *c0, const bk_post_t *post,
                           const int in[4], const int out[4])
{
    if (!g->infer || !post) {
        cuinf_refuse(g, "convolution");
        return NULL;
    }
    iconv_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = iconv_destroy;
    memcpy(p->in, in, sizeof p->in);
    memcpy(p->out, out, sizeof p->out);
    p->kh = c0->kh;
    p->kw = c0->kw;
    p->pad_h = c0->pad_h;
    p->pad_w = c0->pad_w;
    p->icp = round8(in[1]);
    p->ocp = round8(out[1]);
    bk_conv_t cs;
    const bk_conv_t *c = c0;
    int xs[4] = {in[0], p->icp, in[2], in[3]};
    if ((p->s2d = s2d_form(c0, in, out, &cs, xs))) {
        c = &cs;
        p->icp = xs[1];
        atomic_fetch_add(&n_s2d, 1);
        log_info("cuda: %s conv %dx%d/2 %d->%d on [%d,%d,%d,%d] as space-to-depth: %dx%d/1 "
                 "over [%d,%d,%d,%d]", h16_name(g), c0->kh, c0->kw, in[1], out[1], in[0], in[1],
                 in[2], in[3], c->kh, c->kw, xs[0], xs[1], xs[2], xs[3]);
    }
    memcpy(p->xs, xs, sizeof p->xs);
    p->kh2 = c->kh;
    p->kw2 = c->kw;
    int sum = 0;
    for (int i = 0; i < post->n && i < CK_MAX_POST; i++) {
        p->post.post[i] = (int)post->op[i];
        sum |= post->op[i] == BK_PO_SUM;
    }
    p->post.n_post = post->n < CK_MAX_POST ? post->n : CK_MAX_POST;
    size_t pix_in = (size_t)in[0] * in[2] * in[3], pix_out = (size_t)out[0] * out[2] * out[3];
    size_t nw = (size_t)p->ocp * p->icp * c->kh * c->kw;
    size_t pix_x = (size_t)xs[0] * xs[2] * xs[3];   /* pix_in but for s2d */
    int ok = post->n <= CK_MAX_POST && iconv_descs(g, p, c) == 0 && iconv_algo(g, p) == 0 &&
             (p->w16 = cu_alloc(g, nw * 2)) != NULL &&
             ((!p->s2d && p->icp == in[1]) ||
              (p->xpad = cu_alloc(g, (p->s2d ? pix_x : pix_in) * p->icp * 2)) != NULL) &&
             ((!sum && p->ocp == out[1]) || (p->tmp = cu_alloc(g, pix_out * p->ocp * 2)) != NULL);
    if (!ok) {
        iconv_destroy(&p->base);
        return g->failed ? NULL : bk_ctx_fail(g, "%d post-ops (at most %d)", post->n, CK_MAX_POST);
    }
    /* the graph (one rounding, at its end) where no output channel is padding */
    cu_fused_shape_t fs = {.in = {xs[0], xs[1], xs[2], xs[3]}, .kh = c->kh, .kw = c->kw,
                           .sh = c->stride_h, .sw = c->stride_w, .ph = c->pad_h,
                           .pw = c->pad_w, .bf16_nhwc = 1, .fp16 = plan_fp16(g), .tensor_core = 1,
                           .bias = 1,
                           .n_post = p->post.n_post};
    memcpy(fs.out, out, sizeof fs.out);
    memcpy(fs.post, p->post.post, sizeof fs.post);
    if (p->ocp == out[1] && !(p->fused = cu_fused_new(g, &fs)) && g->failed) {
        iconv_destroy(&p->base);
        return NULL;
    }
    atomic_fetch_add(&n_plans[plan_fp16(g)], 1);
    return &p->base;
}

/* w, b: the folded weights and bias (fp32 device memory, bf16 values). */
int cuinf_conv_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const float *b,
                   const void *res, void *y)
{
    iconv_t *p = (iconv_t *)bp;
    cuda_backend_t *cb = cu_be(g->be);
    cudaStream_t s = cb->stream;
    const float one = 1.0f, zero = 0.0f;
    int oc = p->out[1];
    size_t pix_in = (size_t)p->in[0] * p->in[2] * p->in[3];
    size_t pix_out = (size_t)p->out[0] * p->out[2] * p->out[3];
    if (cu_sticky(g) < 0)
        return -1;
    if (res && !p->tmp) {
        bk_ctx_fail(g, "a residual given to a 16-bit conv planned without a sum post-op");
        return -1;
    }
    int h = plan_fp16(g);
    if (!p->wset || p->wver != g->params_version) {
        if (p->s2d ? cu_check(g, ckb_weights_s2d(s, h, w, oc, p->in[1], p->kh, p->kw, p->kh2,
                                                 p->kw2, p->icp, p->w16),
                              "16-bit space-to-depth weight kernel") < 0
                   : cu_check(g, ckb_weights(s, h, w, oc, p->in[1], p->kh * p->kw, p->ocp,
                                             p->icp, p->w16),
                              "16-bit weight conversion kernel") < 0)
            return -1;
        p->wver = g->params_version;
        p->wset = 1;
    }
    const void *xin = x;
    if (p->s2d) {
        if (cu_check(g, ckb_s2d(s, h, x, p->in[0], p->in[2], p->in[3], p->in[1], p->pad_h, p->pad_w,
                                p->xs[2], p->xs[3], p->icp, p->xpad),
                     "16-bit space-to-depth kernel") < 0)
            return -1;
        xin = p->xpad;
    } else if (p->xpad) {
        if (cu_check(g, ckb_pad(s, h, x, pix_in, p->in[1], p->icp, p->xpad),
                     "16-bit channel padding kernel") < 0)
            return -1;
        xin = p->xpad;
    }
    void *out = p->tmp ? p->tmp : y;
    int rc = p->fused ? cu_fused_run(g, p->fused, xin, p->w16, b, res, p->tmp, y) : 1;
    if (rc <= 0)   /* 1: the legacy conv + epilogue (no graph, or it failed: off for good) */
        return rc;
    if (cudnn_check(g, cudnnConvolutionForward(cb->dnn, &one, p->xd, xin, p->wd, p->w16, p->cd,
                                               p->algo, cb->ws, cb->ws_size, &zero, p->yd, out),
                    "cudnnConvolutionForward (16-bit NHWC)") < 0)
        return -1;
    if (out == y && !b && p->post.n_post == 0)
        return 0;
    return cu_check(g, ckb_epilogue(s, h, y, out, p->tmp ? p->ocp : oc, b, pix_out * oc, oc,
                                    p->post, res),
                    "16-bit conv epilogue kernel");
}

/* ------------------------------------------------------ relu, pooling */

typedef struct {
    bk_plan_t base;
    size_t count;
    ck_pool_t pool;
    int c;
} isimple_t;

static void isimple_destroy(bk_plan_t *bp)
{
    free(bp);
}

static isimple_t *isimple_new(bk_ctx_t *g, const char *what)
{
    if (!g->infer) {
        cuinf_refuse(g, what);
        return NULL;
    }
    isimple_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = isimple_destroy;
    return p;
}

bk_plan_t *cuinf_relu_plan(bk_ctx_t *g, const int in[4])
{
    isimple_t *p = isimple_new(g, "relu");
    if (p)
        p->count = count4(in);
    return p ? &p->base : NULL;
}

int cuinf_relu_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    return cu_check(g, ckb_relu(stream_of(g->be), plan_fp16(g), y, x, ((isimple_t *)bp)->count),
                    "16-bit relu kernel");
}

bk_plan_t *cuinf_pool_plan(bk_ctx_t *g, const bk_pool_t *pp, const int in[4],
                           const int out[4])
{
    isimple_t *p = isimple_new(g, "pooling");
    if (!p)
        return NULL;
    p->c = in[1];
    p->pool = (ck_pool_t){.nc = in[0] * in[1], .ih = in[2], .iw = in[3], .oh = out[2],
                          .ow = out[3], .kh = pp->kh, .kw = pp->kw, .sh = pp->stride_h,
                          .sw = pp->stride_w, .ph = pp->pad_h, .pw = pp->pad_w,
                          .alg = pp->alg == BK_POOL_MAX ? 0 : pp->alg == BK_POOL_AVG ? 1 : 2};
    return &p->base;
}

int cuinf_pool_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    isimple_t *p = (isimple_t *)bp;
    return cu_check(g, ckb_pool(stream_of(g->be), plan_fp16(g), &p->pool, p->c, x, y, NULL),
                    "16-bit pooling kernel");
}

/* ----------------------------------------------------------------- linear */

typedef struct {
    bk_plan_t base;
    int n, c, hw, out;
    void *w16;      /* 16-bit [out, h, w, c]: the NHWC order of the input */
    float *acc;     /* the fp32 sums [n, out] */
    unsigned wver;
    int wset;
} ilin_t;

static void ilin_destroy(bk_plan_t *bp)
{
    ilin_t *p = (ilin_t *)bp;
    cudaFree(p->w16);
    cudaFree(p->acc);
    free(p);
}

bk_plan_t *cuinf_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias)
{
    (void)has_bias;
    if (!g->infer) {
        cuinf_refuse(g, "linear");
        return NULL;
    }
    ilin_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = ilin_destroy;
    p->n = in[0];
    p->c = in[1];
    p->hw = in[2] * in[3];
    p->out = out;
    if (!(p->w16 = cu_alloc(g, (size_t)out * p->c * p->hw * 2)) ||
        !(p->acc = cu_alloc(g, (size_t)p->n * out * sizeof(float)))) {
        ilin_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

/* Row-major acc[n, out] = x[n, in] w[out, in]^T is column-major
 * acc^T (out x n) = op_T(w as in x out) * (x^T as in x n), in = h*w*c. */
int cuinf_linear_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const float *b,
                     void *y)
{
    ilin_t *p = (ilin_t *)bp;
    cuda_backend_t *cb = cu_be(g->be);
    const float one = 1.0f, zero = 0.0f;
    int in = p->c * p->hw;
    if (cu_sticky(g) < 0)
        return -1;
    if (!p->wset || p->wver != g->params_version) {
        if (cu_check(g, ckb_weights(cb->stream, plan_fp16(g), w, p->out, p->c, p->hw, p->out, p->c,
                                    p->w16),
                     "16-bit linear weight conversion kernel") < 0)
            return -1;
        p->wver = g->params_version;
        p->wset = 1;
    }
    /* tensor cores: the handle's pedantic math (fp32's no-TF32 rule)
     * would keep this 16-bit GEMM off them; bf16 and fp16 products are
     * exact in fp32 and the sums stay fp32 (CUBLAS_COMPUTE_32F: no fp16
     * reduced-precision reduction) */
    cudaDataType dt = plan_fp16(g) ? CUDA_R_16F : CUDA_R_16BF;
    cublasStatus_t st = cublasSetMathMode(cb->blas, CUBLAS_DEFAULT_MATH);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasGemmEx(cb->blas, CUBLAS_OP_T, CUBLAS_OP_N, p->out, p->n, in, &one, p->w16, dt,
                          in, x, dt, in, &zero, p->acc, CUDA_R_32F, p->out, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT);
    cublasStatus_t back = cublasSetMathMode(cb->blas, cb->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                               : CUBLAS_PEDANTIC_MATH);
    if (cublas_check(g, st != CUBLAS_STATUS_SUCCESS ? st : back, "cublasGemmEx (16-bit linear)") <
        0)
        return -1;
    return cu_check(g, ckb_linear_out(cb->stream, plan_fp16(g), y, p->acc, b, p->n, p->out),
                    "16-bit linear output kernel");
}
