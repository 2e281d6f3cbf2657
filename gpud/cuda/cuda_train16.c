/* cuda_train16 — the cuda backend's bk_ops_t.train16: --precision bf16 or
 * fp16 on the tape (training, and inference that does not run the plan)
 * with every activation and activation gradient a 16-bit NHWC buffer (2
 * bytes an element, cuda_infer_kernels.h's layout; bf16 or fp16 by the
 * backend's precision: f16()), the loss fp32 (docs/BF16.md "16-bit
 * activations"). Two kinds of kernel:
 *
 *   native   the hot path of a ResNet step: convolutions without bias whose
 *            output channels are a multiple of 8 (cuDNN, 16-bit NHWC
 *            operands, fp32 sums on tensor cores; input channels padded
 *            with zeros to a multiple of 8; a stride-2 stem over an image
 *            in space-to-depth form, ckb_s2d_shape; the weights
 *            converted to a 16-bit NHWC filter each call, the weight
 *            gradient back to fp32 OIHW), training BatchNorm (statistics,
 *            normalising, its backward; SyncBatchNorm's sums and gradient,
 *            the normalising with given statistics), ReLU and its
 *            backward, the residual add, the gradient sum, pooling, concat,
 *            flatten, dropout, the input (floats or uint8 pixels) and reads;
 *   generic  every other kernel: its 16-bit NHWC operands converted to
 *            fp32 NCHW in a scratch of this backend (cuda_backend_t.h16),
 *            the fp32 kernel of cuda_train.c run on them, its outputs
 *            converted back, rounded: frozen BatchNorm's backward,
 *            convolutions with a bias or output channels not a multiple of
 *            8 (TF32 on 16-bit values, exact products), linear,
 *            cross-entropy, top-k.
 *
 * Numbers: each kernel stores what the fp32 kernel followed by the engine's
 * rounding stores, so up to cuDNN's sum order (16-bit tensor-op algorithms
 * against TF32 ones) this is the fp32 buffers' training; on the kernel
 * emulator, whose cuDNN sums in double either way, the same bits
 * (test_half_store's cuda case, both formats). */
#include <stdlib.h>
#include <string.h>

#include "common/env_switch.h"
#include "common/log.h"
#include "gpud/bn_math.h"
#include "gpud/cuda/cuda_fused.h"
#include "gpud/cuda/cuda_infer.h"
#include "gpud/cuda/cuda_infer_kernels.h"
#include "gpud/cuda/cuda_priv.h"
#include "gpud/cuda/cuda_sync16.h"
#include "gpud/cuda/cuda_bn16_kernels.h"
#include "gpud/cuda/cuda_train16_kernels.h"

static const bk_kernels_t *k32(const backend_t *be)
{
    return be->ops->train;
}

/* 1: the graph's 16-bit values are fp16 (--precision fp16), 0: bf16 */
static int f16(const backend_t *be)
{
    return be->precision == BK_FP16;
}

static size_t count4(const int s[4])
{
    return (size_t)s[0] * s[1] * s[2] * s[3];
}

static cudaStream_t stream_of(backend_t *be)
{
    return cu_be(be)->stream;
}

/* ------------------------------------------------- the generic conversion */

/* up to 5 fp32 NCHW temporaries carved from one scratch (grown once, then
 * reused by every kernel: the stream orders their uses) */
typedef struct {
    size_t off;
} temps_t;

static float *scratch16(backend_t *be, size_t floats)
{
    cuda_backend_t *cb = cu_be(be);
    return cu_grow_be(be, &cb->h16, &cb->h16_cap, floats * sizeof(float),
                      "growing the 16-bit conversion scratch");
}

/* base: scratch16's; takes count floats of it */
static float *carve(float *base, temps_t *t, size_t count)
{
    float *f = base + t->off;
    t->off += (count + 63) / 64 * 64;   /* 256-byte aligned parts */
    return f;
}

static size_t parts(size_t a, size_t b, size_t c, size_t d, size_t e)
{
    size_t s = 0, v[5] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++)
        s += (v[i] + 63) / 64 * 64;
    return s;
}

/* f (NCHW floats) = x (NHWC 16-bit) of shape s; and the way back, rounded */
static void unpack(backend_t *be, float *f, const void *x, const int s[4])
{
    cu_note(be, ckb_to_nchw(stream_of(be), f16(be), x, s[0], s[1], s[2] * s[3], f),
            "16-bit to fp32 conversion kernel");
}

static void pack(backend_t *be, void *y, const float *f, const int s[4])
{
    cu_note(be, ckb_from_nchw(stream_of(be), f16(be), f, s[0], s[1], s[2] * s[3], y),
            "fp32 to 16-bit conversion kernel");
}

/* ----------------------------------------------------- memory, element-wise */

static void *h_alloc(bk_ctx_t *g, size_t count)
{
    return cu_alloc(g, (count ? count : 1) * 2);
}

static void h_release(backend_t *be, void *buf)
{
    k32(be)->release(be, buf);
}

static int h_write(bk_ctx_t *g, void *dst, const float *nchw, const int s[4], int layout)
{
    (void)layout;
    return cuinf_write(g, f16(g->be), dst, nchw, s);
}

static int h_read(bk_ctx_t *g, const void *src, float *nchw, const int s[4], int layout)
{
    (void)layout;
    return cuinf_read(g, f16(g->be), src, nchw, s);
}

static int h_write_u8(bk_ctx_t *g, void *dst, const uint8_t *px, const float *lut,
                      const int s[4], int layout)
{
    (void)layout;
    return cu_write_u8(g, dst, px, lut, s, f16(g->be) ? 2 : 1);
}

static void h_zero(backend_t *be, void *y, size_t count)
{
    cu_note(be, cudaMemsetAsync(y, 0, count * 2, stream_of(be)), "cudaMemsetAsync");
}

static void h_copy(backend_t *be, void *y, const void *x, size_t count)
{
    cu_note(be, cudaMemcpyAsync(y, x, count * 2, cudaMemcpyDeviceToDevice, stream_of(be)),
            "device copy");
}

static void h_add(backend_t *be, void *y, const void *a, const void *b, size_t count, int relu)
{
    cu_note(be, ckb_add(stream_of(be), f16(be), y, a, b, count, relu), "16-bit add kernel");
}

static void h_acc(backend_t *be, void *y, const void *x, size_t count)
{
    cu_note(be, ckb_acc(stream_of(be), f16(be), y, x, count), "16-bit accumulate kernel");
}

static void h_concat(backend_t *be, void *y, int cy, void *x, const int xs[4], int off,
                     int to_y)
{
    cu_note(be, ckb_concat(stream_of(be), y, cy, x, (size_t)xs[0] * xs[2] * xs[3], xs[1], off,
                           to_y), "16-bit concat kernel");
}

/* PyTorch's order (NCHW) both ways: y (n, c*h*w, 1, 1), whose NHWC is that
 * order, from x (n, c, h, w) NHWC; backward the inverse */
static void h_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward)
{
    cudaStream_t s = stream_of(be);
    int hw = xs[2] * xs[3];
    cu_note(be, backward ? ckb_unflatten(s, x, xs[0], xs[1], hw, y)
                         : ckb_flatten(s, f16(be), x, xs[0], xs[1], hw, y),
            "16-bit flatten kernel");
}

/* keys: device memory (the graph's, put), as cuda_train.c's */
static void h_dropout(backend_t *be, void *y, const void *x, const int s[4], float p,
                      uint32_t op, const uint64_t *keys)
{
    cu_note(be, ckb_dropout(stream_of(be), f16(be), y, x, s[0], s[1], s[2] * s[3], p, op, keys),
            "16-bit dropout kernel");
}

/* logits (n, k, 1, 1): NHWC is NCHW; the loss and its gradient are fp32 */
static void h_ce_fwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
                     float eps, void *loss)
{
    int s[4] = {n, k, 1, 1};
    float *fl = scratch16(be, count4(s));
    if (!fl)
        return;
    unpack(be, fl, logits, s);
    k32(be)->ce_fwd(be, fl, labels, n, k, eps, loss);
}

static void h_ce_bwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
                     float eps, const void *dloss, void *glogits)
{
    int s[4] = {n, k, 1, 1};
    temps_t t = {0};
    float *base = scratch16(be, parts(count4(s), count4(s), 0, 0, 0));
    if (!base)
        return;
    float *fl = carve(base, &t, count4(s)), *fg = carve(base, &t, count4(s));
    unpack(be, fl, logits, s);
    k32(be)->ce_bwd(be, fl, labels, n, k, eps, dloss, fg);
    pack(be, glogits, fg, s);
}

static int h_put(bk_ctx_t *g, void *dst, const void *src, size_t bytes)
{
    return k32(g->be)->put(g, dst, src, bytes);
}

static int h_topk(bk_ctx_t *g, const void *x, int n, int c, int k, int32_t *out)
{
    int s[4] = {n, c, 1, 1};
    float *f = scratch16(g->be, count4(s));
    if (!f)
        return cu_sticky(g) < 0 ? -1 : 1;
    unpack(g->be, f, x, s);
    return cu_sticky(g) < 0 ? -1 : k32(g->be)->topk(g, f, n, c, k, out);
}

/* The values are bf16 already: rounding them changes nothing. */
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
    bk_plan_t *inner;       /* the fp32 kernel's plan (generic) */
    int in[4], out[4];
    /* a native convolution: */
    int native;
    cu_conv_t conv;         /* the legacy calls: always built, the graphs' fallback */
    cu_fused_t *graph[3];   /* CU_CONV_*: forward, backward data, backward filter as
                             * cuDNN graphs (deterministic, fp32 sums); NULL: legacy */
    void *w16, *dw16;       /* bf16 [oc, kh, kw, icp]: the filter, its gradient */
    int kk;                 /* kh * kw */
    int icp;                /* input channels padded to a multiple of 8 (zeros) */
    void *xpad;             /* icp > ic: the input padded (the forward's, which the
                             * filter gradient reads), or in s2d form */
    int s2d[4];             /* space-to-depth form (ckb_s2d_shape): hs, ws, kh2, kw2;
                             * s2d[0] 0: the plain form */
    int kh, kw, ph, pw;     /* the layer's kernel and padding */
    /* pooling: */
    ck_pool_t pool;
    uint8_t *win;           /* max: each output's choice, from the forward to the backward */
    /* batch-norm: */
    double *sums;           /* 2c sums, then their partials (ckb_sum_parts) */
    float *coef;            /* the backward's scale, a, b (3c) */
    float eps;
    int relu;
    uint8_t *mask;          /* training, with a ReLU (its own or the block end's): the
                             * forward's output signs, a bit an element (ckb_bn_apply),
                             * made at the first such forward; the backward reads them
                             * in place of the ReLU's output */
    int masked;             /* the last forward wrote them */
} hplan_t;

static void hplan_destroy(bk_plan_t *bp)
{
    hplan_t *p = (hplan_t *)bp;
    if (p->inner)
        p->inner->destroy(p->inner);
    cu_conv_fini(&p->conv);
    for (int k = 0; k < 3; k++)
        cu_fused_free(p->graph[k]);
    cudaFree(p->w16);
    cudaFree(p->dw16);
    cudaFree(p->xpad);
    cudaFree(p->sums);
    cudaFree(p->coef);
    cudaFree(p->win);
    cudaFree(p->mask);
    free(p);
}

static hplan_t *hplan_new(bk_ctx_t *g, const int in[4], const int out[4])
{
    hplan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = hplan_destroy;
    memcpy(p->in, in, sizeof p->in);
    memcpy(p->out, out, sizeof p->out);
    return p;
}

/* The generic plan: the fp32 plan inside (NULL after bk_ctx_fail). */
static bk_plan_t *wrap(bk_ctx_t *g, bk_plan_t *inner, const int in[4], const int out[4])
{
    if (!inner)
        return NULL;
    hplan_t *p = hplan_new(g, in, out);
    if (!p) {
        inner->destroy(inner);
        return NULL;
    }
    p->inner = inner;
    return &p->base;
}

/* --------------------------------------------------------------- convolution */

/* Native: no bias (PyTorch rounds a bf16 conv's output before adding one:
 * the fp32 kernel keeps the engine's single rounding) and output channels a
 * multiple of 8 (tensor cores); input channels are padded with zeros to
 * one (exact: zero products), so the 3-channel stem is native too. */
static int conv_native(const bk_conv_t *c, const bk_post_t *post)
{
    return !post && !c->bias && c->oc % 8 == 0;
}

static int round8(int c)
{
    return (c + 7) / 8 * 8;
}

static bk_plan_t *h_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                              const int in[4], const int out[4])
{
    if (!conv_native(c, post))
        return wrap(g, k32(g->be)->conv_plan(g, c, post, in, out), in, out);
    hplan_t *p = hplan_new(g, in, out);
    if (!p)
        return NULL;
    p->native = 1;
    p->kh = c->kh;
    p->kw = c->kw;
    p->ph = c->pad_h;
    p->pw = c->pad_w;
    /* the conv cuDNN runs: the layer, or its space-to-depth form (a
     * stride-2 stem over an image: 4x4/1 over 16 channels for ResNet's
     * 7x7/2 over 3) */
    int kh = c->kh, kw = c->kw, sh = c->stride_h, sw = c->stride_w, ph = c->pad_h, pw = c->pad_w;
    p->icp = round8(c->ic);
    int pin[4] = {in[0], p->icp, in[2], in[3]};
    if (ckb_s2d_shape(c->ic, in[2], in[3], kh, kw, sh, sw, ph, pw, out[2], out[3], p->s2d)) {
        p->icp = round8(4 * c->ic);
        pin[1] = p->icp;
        pin[2] = p->s2d[0];
        pin[3] = p->s2d[1];
        kh = p->s2d[2];
        kw = p->s2d[3];
        sh = sw = 1;
        ph = pw = 0;
        cuinf_s2d_note();
        log_info("cuda: %s conv %dx%d/2 %d->%d on [%d,%d,%d,%d] as space-to-depth: %dx%d/1 over "
                 "[%d,%d,%d,%d]", f16(g->be) ? "fp16" : "bf16", c->kh, c->kw, c->ic, c->oc,
                 in[0], in[1], in[2], in[3], kh, kw, pin[0], pin[1], pin[2], pin[3]);
    } else {
        p->s2d[0] = 0;
    }
    p->kk = kh * kw;   /* of the conv cuDNN runs */
    size_t nw = (size_t)c->oc * p->icp * p->kk * 2;
    size_t npix = (size_t)pin[0] * pin[2] * pin[3];
    if (cu_conv_init_as(g, &p->conv, pin, out, kh, kw, sh, sw, ph, pw, 1,
                        f16(g->be) ? 2 : 1) < 0 ||
        !(p->w16 = cu_alloc(g, nw)) || !(p->dw16 = cu_alloc(g, nw)) ||
        ((p->icp != c->ic || p->s2d[0]) && !(p->xpad = cu_alloc(g, npix * p->icp * 2)))) {
        hplan_destroy(&p->base);
        return NULL;
    }
    /* the three as cuDNN graphs where cuDNN builds them (cuda_fused.c: the
     * engines' numerical notes say deterministic and fp32 sums, which the
     * legacy calls cannot ask for); DDPIPE_CUDNN_GRAPH=0: legacy only */
    for (int k = CU_CONV_FWD; k <= CU_CONV_BWD_FILTER; k++) {
        cu_fused_shape_t fs = {.kind = k, .in = {pin[0], pin[1], pin[2], pin[3]},
                               .out = {out[0], out[1], out[2], out[3]}, .kh = kh, .kw = kw,
                               .sh = sh, .sw = sw, .ph = ph, .pw = pw, .bf16_nhwc = 1,
                               .fp16 = f16(g->be), .tensor_core = 1};
        if (!(p->graph[k] = cu_fused_new(g, &fs)) && g->failed) {
            hplan_destroy(&p->base);
            return NULL;
        }
    }
    return &p->base;
}

/* The step's weights (the fp32 master weights: h_conv_casts_weights) as
 * cuDNN's bf16 NHWC filter, each rounded once to nearest even as the
 * engine's rounded copy was (round_half_param), the same bits. */
static int filter16(bk_ctx_t *g, hplan_t *p, const float *w)
{
    int oc = p->out[1], ic = p->in[1];
    if (p->s2d[0])
        return cu_check(g, ckb_weights_s2d(stream_of(g->be), f16(g->be), w, oc, ic, p->kh, p->kw,
                                           p->s2d[2], p->s2d[3], p->icp, p->w16),
                        "16-bit space-to-depth filter kernel");
    return cu_check(g, ckb_weights(stream_of(g->be), f16(g->be), w, oc, ic, p->kk, oc, p->icp,
                                   p->w16),
                    "16-bit filter conversion kernel");
}

static size_t npix_in(const hplan_t *p)
{
    return (size_t)p->in[0] * p->in[2] * p->in[3];
}

/* the input as the conv cuDNN runs reads it: padded channels or s2d form */
static int input16(bk_ctx_t *g, hplan_t *p, const void *x)
{
    backend_t *be = g->be;
    if (p->s2d[0])
        return cu_check(g, ckb_s2d(stream_of(be), f16(be), x, p->in[0], p->in[2], p->in[3],
                                   p->in[1], p->ph, p->pw, p->s2d[0], p->s2d[1], p->icp,
                                   p->xpad),
                        "16-bit space-to-depth kernel");
    return cu_check(g, ckb_pad(stream_of(be), f16(be), x, npix_in(p), p->in[1], p->icp, p->xpad),
                    "16-bit channel padding kernel");
}

/* pixels of the input the conv cuDNN runs reads */
static size_t npix_run(const hplan_t *p)
{
    return p->s2d[0] ? (size_t)p->in[0] * p->s2d[0] * p->s2d[1] : npix_in(p);
}

static int set_math(bk_ctx_t *g, cu_conv_t *c, cudnnMathType_t m)
{
    return cudnn_check(g, cudnnSetConvolutionMathType(c->cd, m), "cudnnSetConvolutionMathType");
}

static int h_conv_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const float *b,
                      const void *res, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    backend_t *be = g->be;
    if (cu_sticky(g) < 0)
        return -1;
    if (!p->native) {
        float *base = scratch16(be, parts(count4(p->in), count4(p->out), 0, 0, 0));
        if (!base)
            return cu_sticky(g);
        temps_t t = {0};
        float *fx = carve(base, &t, count4(p->in)), *fy = carve(base, &t, count4(p->out));
        unpack(be, fx, x, p->in);
        if (res)
            unpack(be, fy, y, p->out);   /* a residual is y's own buffer */
        if (k32(be)->conv_fwd(g, p->inner, fx, w, b, res ? fy : NULL, fy) < 0)
            return -1;
        pack(be, y, fy, p->out);
        return cu_sticky(g);
    }
    cuda_backend_t *cb = cu_be(be);
    cu_conv_t *c = &p->conv;
    const float one = 1.0f, zero = 0.0f;
    if (filter16(g, p, w) < 0 || set_math(g, c, c->algo.math_fwd) < 0)
        return -1;
    if (p->xpad) {
        if (input16(g, p, x) < 0)
            return -1;
        x = p->xpad;
    }
    int rc = p->graph[CU_CONV_FWD] ? cu_fused_run(g, p->graph[CU_CONV_FWD], x, p->w16, NULL, NULL,
                                                  NULL, y)
                                   : 1;
    if (rc != 1)
        return rc;
    return cudnn_check(g, cudnnConvolutionForward(cb->dnn, &one, c->xd, x, c->wd, p->w16, c->cd,
                                                  c->algo.fwd, cb->ws, cb->ws_size, &zero,
                                                  c->yd, y),
                       "cudnnConvolutionForward (16-bit)");
}

/* A native conv casts its weights (filter16) and its weight gradient is
 * 16-bit values widened (ckb_weights_back): the engine keeps no rounded
 * copy and rounds neither (bk_kernels_t.conv_casts_weights). */
static int h_conv_casts_weights(const bk_plan_t *bp)
{
    return ((const hplan_t *)bp)->native;
}

static int h_conv_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const void *gy,
                      void *gx, float *gw, float *gb)
{
    hplan_t *p = (hplan_t *)bp;
    backend_t *be = g->be;
    if (cu_sticky(g) < 0)
        return -1;
    if (!p->native) {
        size_t ni = count4(p->in), no = count4(p->out);
        float *base = scratch16(be, parts(ni, no, gx ? ni : 0, 0, 0));
        if (!base)
            return cu_sticky(g);
        temps_t t = {0};
        float *fx = carve(base, &t, ni), *fgy = carve(base, &t, no);
        float *fgx = gx ? carve(base, &t, ni) : NULL;
        unpack(be, fx, x, p->in);
        unpack(be, fgy, gy, p->out);
        if (k32(be)->conv_bwd(g, p->inner, fx, w, fgy, fgx, gw, gb) < 0)
            return -1;
        if (gx)
            pack(be, gx, fgx, p->in);
        return cu_sticky(g);
    }
    cuda_backend_t *cb = cu_be(be);
    cu_conv_t *c = &p->conv;
    const float one = 1.0f, zero = 0.0f;
    /* p->w16 holds the forward's filter: cast from w at the forward, and a
     * step's weights do not move before its backward. No bias. */
    (void)w;
    (void)gb;
    /* a padded input: its gradient padded too (a scratch), then unpadded
     * (or gathered back from the s2d form) */
    void *dx = gx && p->xpad ? scratch16(be, (npix_run(p) * p->icp + 1) / 2) : gx;
    if (gx && !dx)
        return cu_sticky(g);
    cu_fused_t *gd = p->graph[CU_CONV_BWD_DATA], *gf = p->graph[CU_CONV_BWD_FILTER];
    cu_split_begin(be);
    int rc = gx && gd ? cu_fused_run_bwd_data(g, gd, gy, p->w16, dx) : 1;
    if (rc < 0)
        return -1;
    if (gx && rc == 1 &&
        (set_math(g, c, c->algo.math_bwd_data) < 0 ||
         cudnn_check(g, cudnnConvolutionBackwardData(cb->dnn, &one, c->wd, p->w16, c->yd, gy,
                                                     c->cd, c->algo.bwd_data, cb->ws,
                                                     cb->ws_size, &zero, c->xd, dx),
                     "cudnnConvolutionBackwardData (16-bit)") < 0))
        return -1;
    if (gx && dx != gx &&
        (p->s2d[0] ? cu_check(g, ckb_s2d_back(stream_of(be), f16(be), dx, p->in[0], p->in[2],
                                              p->in[3], p->in[1], p->ph, p->pw, p->s2d[0],
                                              p->s2d[1], p->icp, gx),
                              "16-bit space-to-depth backward kernel")
                   : cu_check(g, ckb_unpad(stream_of(be), f16(be), dx, npix_in(p), p->in[1],
                                           p->icp, gx),
                              "16-bit channel unpadding kernel")) < 0)
        return -1;
    cu_split_mark(be, CU_SPLIT_DATA);
    if (!gw)
        return 0;
    const void *xin = p->xpad ? p->xpad : x;
    rc = gf ? cu_fused_run_bwd_filter(g, gf, xin, gy, p->dw16) : 1;
    if (rc < 0)
        return -1;
    if (rc == 1 &&
        (set_math(g, c, c->algo.math_bwd_filter) < 0 ||
         cudnn_check(g, cudnnConvolutionBackwardFilter(cb->dnn, &one, c->xd, xin, c->yd, gy,
                                                       c->cd, c->algo.bwd_filter, cb->ws,
                                                       cb->ws_size, &zero, c->wd, p->dw16),
                     "cudnnConvolutionBackwardFilter (16-bit)") < 0))
        return -1;
    int back = p->s2d[0]
                   ? cu_check(g, ckb_weights_back_s2d(stream_of(be), f16(be), p->dw16, p->out[1],
                                                      p->in[1], p->kh, p->kw, p->s2d[2],
                                                      p->s2d[3], p->icp, gw),
                              "16-bit space-to-depth filter gradient kernel")
                   : cu_check(g, ckb_weights_back(stream_of(be), f16(be), p->dw16, p->out[1],
                                                  p->in[1], p->kk, p->icp, gw),
                              "16-bit filter gradient conversion kernel");
    cu_split_mark(be, CU_SPLIT_FILTER);
    return back;
}

/* -------------------------------------------------------------- batch-norm */

/* Native: training BatchNorm on the device (bn_train_*), the normalising
 * with given statistics (bn_fwd in eval mode: frozen layers, and the
 * SyncBatchNorm path's step after its all-reduce) and SyncBatchNorm's
 * sums and gradient (chan_sums, bn_grad_sums, bn_grad_apply); generic:
 * eval-mode backward (frozen layers) and chan_axpb (unused: bn_grad_apply
 * is given). */
static bk_plan_t *h_bn_plan(bk_ctx_t *g, const int in[4], float eps, int relu)
{
    hplan_t *p = (hplan_t *)wrap(g, k32(g->be)->bn_plan(g, in, eps, relu), in, in);
    if (!p)
        return NULL;
    p->eps = eps;
    p->relu = relu;
    size_t c = (size_t)in[1], parts = (size_t)ckb_sum_parts((size_t)in[0] * in[2] * in[3]);
    if (!(p->sums = cu_alloc(g, 2 * c * (1 + parts) * sizeof(double))) ||
        !(p->coef = cu_alloc(g, 3 * c * sizeof(float)))) {
        hplan_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

static int h_bn_fwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x, const float *gamma,
                    const float *beta, float *mean, float *var, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    size_t n = count4(p->in);
    if (!training)   /* the statistics given: one 16-bit pass, cuda_train.c's arithmetic */
        return cu_check(g, ckb_bn_apply(stream_of(g->be), f16(g->be), y, x,
                                        p->in[0] * p->in[2] * p->in[3], p->in[1], gamma, beta,
                                        mean, var, p->eps, p->relu, NULL, NULL, NULL),
                        "16-bit batch-norm kernel");
    float *base = scratch16(g->be, parts(n, n, 0, 0, 0));
    if (!base)
        return cu_sticky(g);
    temps_t t = {0};
    float *fx = carve(base, &t, n), *fy = carve(base, &t, n);
    unpack(g->be, fx, x, p->in);
    if (k32(g->be)->bn_fwd(g, p->inner, training, fx, gamma, beta, mean, var, fy) < 0)
        return -1;
    pack(g->be, y, fy, p->in);
    return cu_sticky(g);
}

static int h_bn_add_relu(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *gamma,
                         const float *beta, const float *mean, const float *var, const void *res,
                         void *y)
{
    hplan_t *p = (hplan_t *)bp;
    return cu_check(g, ckb_bn_apply(stream_of(g->be), f16(g->be), y, x,
                                    p->in[0] * p->in[2] * p->in[3], p->in[1], gamma, beta, mean,
                                    var, p->eps, 1, res, NULL, NULL),
                    "16-bit batch-norm + add + ReLU kernel");
}

static int h_bn_bwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x, const void *y,
                    const void *gy, const float *gamma, const float *mean, const float *var,
                    void *gx, float *ggamma, float *gbeta)
{
    hplan_t *p = (hplan_t *)bp;
    size_t n = count4(p->in);
    float *base = scratch16(g->be, parts(n, n, n, gx ? n : 0, 0));
    if (!base)
        return cu_sticky(g);
    temps_t t = {0};
    float *fx = carve(base, &t, n), *fy = carve(base, &t, n), *fgy = carve(base, &t, n);
    float *fgx = gx ? carve(base, &t, n) : NULL;
    unpack(g->be, fx, x, p->in);
    if (y)   /* NULL: a plan without ReLU, its output not stored (backend_impl.h) */
        unpack(g->be, fy, y, p->in);
    unpack(g->be, fgy, gy, p->in);
    if (k32(g->be)->bn_bwd(g, p->inner, training, fx, y ? fy : NULL, fgy, gamma, mean, var, fgx,
                           ggamma, gbeta) < 0)
        return -1;
    if (gx)
        pack(g->be, gx, fgx, p->in);
    return cu_sticky(g);
}

/* cuda_train.c's bn_train_fwd / bn_train_bwd on 16-bit NHWC: the same
 * steps (bn_math.h's arithmetic), the per-channel kernels shared. With a
 * ReLU the forward also stores its output's signs, a bit an element, and
 * the backward reads those in place of the ReLU's output (16 bits an
 * element, twice: the sums and the gradient pass): the same dy', 2 bytes
 * less an element each time (DDPIPE_CUDA_BN_MASK=0: y read). The mask is
 * made at the first such forward (op by op: a recorded pass replays it). */
static int h_bn_train_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const int sh[4],
                          const bk_bn_train_t *t, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    int npix = sh[0] * sh[2] * sh[3], c = sh[1], relu = t->relu || t->res;
    int use_mask = relu && c % 8 == 0 && env_switch_on("DDPIPE_CUDA_BN_MASK");
    if (use_mask && !p->mask) {
        enum cudaStreamCaptureStatus rec = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing(stream_of(g->be), &rec) == cudaSuccess &&
            rec != cudaStreamCaptureStatusNone)
            use_mask = 0;   /* not made inside a recording (its first forward was not op by op) */
        else if (!(p->mask = cu_alloc(g, (size_t)npix * (size_t)c / 8)))
            return -1;
    }
    float *mean = t->stat, *var = t->stat + c;
    double *part = p->sums + 2 * (size_t)c;
    cudaStream_t s = stream_of(g->be);
    int h = f16(g->be);
    if (cu_sticky(g) < 0 ||
        cu_check(g, ckb_bn_stats(s, h, x, npix, c, t->count, t->stat, t->running_mean,
                                 t->running_var, t->momentum, bnm_unbias(t->count), p->sums,
                                 part),
                 "16-bit batch and running statistics kernels") < 0)
        return -1;
    return cu_check(g, ckb_bn_apply(s, h, y, x, npix, c, t->gamma, t->beta, mean, var, t->eps,
                                    relu, t->res, use_mask ? p->mask : NULL, &p->masked),
                    "16-bit batch-norm kernel");
}

static int h_bn_train_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const void *y,
                          const void *gy, const int sh[4], const bk_bn_train_t *t, void *gx)
{
    hplan_t *p = (hplan_t *)bp;
    int npix = sh[0] * sh[2] * sh[3], c = sh[1];
    const float *mean = t->stat, *var = t->stat + c;
    const void *ry = t->relu ? y : NULL;   /* the ReLU's output, or its signs: */
    const uint8_t *bits = t->relu && p->masked ? p->mask : NULL;
    cudaStream_t s = stream_of(g->be);
    if (cu_sticky(g) < 0 ||
        cu_check(g, ckb_bn_grad(s, f16(g->be), x, ry, bits, gy, t->gy2, t->gres, npix, c, mean,
                                t->gamma, var, t->eps, t->count, t->ggamma, t->gbeta, p->coef,
                                p->sums, p->sums + 2 * (size_t)c),
                 "16-bit batch-norm gradient sums and coefficients kernels") < 0)
        return -1;
    if (!gx)
        return 0;
    if (t->gres)   /* dy' stored by the sums (the ReLU's backward fused) */
        ry = NULL, bits = NULL, gy = t->gres;
    return cu_check(g, ckb_bn_grad_apply(s, f16(g->be), gx, x, ry, bits, gy, npix, c, mean,
                                         p->coef, p->coef + c, p->coef + 2 * (size_t)c),
                    "16-bit batch-norm gradient kernel");
}

/* SyncBatchNorm's chan_axpb: the generic path (bn_grad_apply is given, so
 * the engine does not call it); its sums and gradient: cuda_sync16.c. */
static void h_chan_axpb(backend_t *be, void *y, const void *x, const int s[4],
                        const float *center, const float *a, const float *b)
{
    size_t n = count4(s);
    temps_t t = {0};
    float *base = scratch16(be, parts(n, n, 0, 0, 0));
    if (!base)
        return;
    float *fy = carve(base, &t, n), *fx = carve(base, &t, n);
    unpack(be, fy, y, s);
    unpack(be, fx, x, s);
    k32(be)->chan_axpb(be, fy, fx, s, center, a, b);
    pack(be, y, fy, s);
}

/* ------------------------------------------------------------ relu, pool */

static bk_plan_t *h_relu_plan(bk_ctx_t *g, const int in[4])
{
    hplan_t *p = hplan_new(g, in, in);
    return p ? &p->base : NULL;
}

static int h_relu_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    return cu_check(g, ckb_relu(stream_of(g->be), f16(g->be), y, x, count4(p->in)),
                    "16-bit relu kernel");
}

static int h_relu_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *y, const void *gy, void *gx)
{
    hplan_t *p = (hplan_t *)bp;
    return cu_check(g, ckb_relu_bwd(stream_of(g->be), f16(g->be), gx, y, gy, count4(p->in)),
                    "16-bit relu backward kernel");
}

static bk_plan_t *h_pool_plan(bk_ctx_t *g, const bk_pool_t *pp, const int in[4],
                              const int out[4])
{
    hplan_t *p = hplan_new(g, in, out);
    if (p)
        p->pool = (ck_pool_t){.nc = in[0] * in[1], .ih = in[2], .iw = in[3], .oh = out[2],
                              .ow = out[3], .kh = pp->kh, .kw = pp->kw, .sh = pp->stride_h,
                              .sw = pp->stride_w, .ph = pp->pad_h, .pw = pp->pad_w,
                              .alg = pp->alg == BK_POOL_MAX ? 0 : pp->alg == BK_POOL_AVG ? 1 : 2};
    /* max pooling keeps each window's choice for the backward (a byte an
     * output), which then reads it instead of finding the maximum again */
    if (p && p->pool.alg == 0 && pp->kh * pp->kw <= CKB_NO_WIN &&
        !(p->win = cu_alloc(g, (size_t)p->pool.nc * out[2] * out[3]))) {
        hplan_destroy(&p->base);
        return NULL;
    }
    return p ? &p->base : NULL;
}

static int h_pool_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    return cu_check(g, ckb_pool(stream_of(g->be), f16(g->be), &p->pool, p->in[1], x, y, p->win),
                    "16-bit pooling kernel");
}

static int h_pool_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const void *gy, void *gx)
{
    hplan_t *p = (hplan_t *)bp;
    return cu_check(g, ckb_pool_bwd(stream_of(g->be), f16(g->be), &p->pool, p->in[1], x, gy, gx,
                                    p->win),
                    "16-bit pooling backward kernel");
}

/* ---------------------------------------------------------- linear (generic) */

static bk_plan_t *h_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias)
{
    int o[4] = {in[0], out, 1, 1};
    return wrap(g, k32(g->be)->linear_plan(g, in, out, has_bias), in, o);
}

static int h_linear_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                        const float *b, void *y)
{
    hplan_t *p = (hplan_t *)bp;
    size_t ni = count4(p->in), no = count4(p->out);
    float *base = scratch16(g->be, parts(ni, no, 0, 0, 0));
    if (!base)
        return cu_sticky(g);
    temps_t t = {0};
    float *fx = carve(base, &t, ni), *fy = carve(base, &t, no);
    unpack(g->be, fx, x, p->in);
    if (k32(g->be)->linear_fwd(g, p->inner, fx, w, b, fy) < 0)
        return -1;
    pack(g->be, y, fy, p->out);
    return cu_sticky(g);
}

static int h_linear_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                        const void *gy, void *gx, float *gw, float *gb)
{
    hplan_t *p = (hplan_t *)bp;
    size_t ni = count4(p->in), no = count4(p->out);
    float *base = scratch16(g->be, parts(ni, no, gx ? ni : 0, 0, 0));
    if (!base)
        return cu_sticky(g);
    temps_t t = {0};
    float *fx = carve(base, &t, ni), *fgy = carve(base, &t, no);
    float *fgx = gx ? carve(base, &t, ni) : NULL;
    unpack(g->be, fx, x, p->in);
    unpack(g->be, fgy, gy, p->out);
    if (k32(g->be)->linear_bwd(g, p->inner, fx, w, fgy, fgx, gw, gb) < 0)
        return -1;
    if (gx)
        pack(g->be, gx, fgx, p->in);
    return cu_sticky(g);
}

const bk_kernels_t CUDA_T16KERNELS = {
    .alloc = h_alloc,
    .release = h_release,
    .write = h_write,
    .read = h_read,
    .write_u8 = h_write_u8,
    .zero = h_zero,
    .copy = h_copy,
    .add = h_add,
    .acc = h_acc,
    .concat = h_concat,
    .flatten = h_flatten,
    .dropout = h_dropout,
    .ce_fwd = h_ce_fwd,
    .ce_bwd = h_ce_bwd,
    .put = h_put,
    .topk = h_topk,
    .conv_plan = h_conv_plan,
    .conv_fwd = h_conv_fwd,
    .conv_bwd = h_conv_bwd,
    .conv_casts_weights = h_conv_casts_weights,
    .bn_plan = h_bn_plan,
    .bn_fwd = h_bn_fwd,
    .bn_bwd = h_bn_bwd,
    .bn_add_relu = h_bn_add_relu,
    .chan_sums = cu16_chan_sums,
    .chan_axpb = h_chan_axpb,
    .bn_grad_sums = cu16_bn_grad_sums,
    .bn_grad_apply = cu16_bn_grad_apply,
    .bn_train_fwd = h_bn_train_fwd,
    .bn_train_bwd = h_bn_train_bwd,
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
