/* dnnl_train16 — the "cpu" backend's bk_ops_t.train16: a --precision bf16
 * graph on the tape (training) with its activations and activation
 * gradients stored as bf16 (2 bytes, NHWC), as autocast's own tensors are
 * (docs/BF16.md "16-bit activations"). The numbers are those of the fp32
 * buffers with the engine's rounding points, bit for bit: every kernel
 * computes in fp32 from the bf16 values, exactly as the fp32 table does,
 * and packs its outputs rounded (gpud/half_bits.h).
 *
 * Where the time goes decides how each kernel reads bf16:
 *   - element-wise ops (add, acc): own loops on the 16 bits; copies,
 *     concat, flatten and the uint8 input: host_kernels.c's moves, on
 *     2-byte elements (hk16_*);
 *   - training BatchNorm's sums and gradient (hk16_*, host_kernels.c): the
 *     fp32 loops on rows unpacked into per-thread tiles, same order;
 *   - convolutions and linear layers, native bf16 (BK_BF16_NATIVE): the
 *     buffers ARE the primitives' bf16 src and diff_dst (dnnl_train.c,
 *     cpu_conv_plan16), no staging copy; their fp32 dst and diff_src are
 *     packed (Winograd's write bf16 themselves: cpu_w_fwd16, _bwd16);
 *   - a training BatchNorm's normalisation and ReLU's backward: own loops
 *     on the 16 bits, oneDNN's arithmetic (the same bits);
 *   - the rest (emulated convolutions, ReLU's forward, pooling), and the
 *     rare ops (dropout, the loss, top-k; chan_axpb, which bn_grad_apply
 *     replaces here): unpacked into fp32 temporaries around the fp32
 *     kernels (host16_kernels.c's wrappers, or the backend's temporaries
 *     here for the hot ones).
 *
 * bf16 only: an fp16 graph keeps the fp32 buffers on cpu (BK_CAP_ACT16_FP16
 * unset). The table starts as host16_kernels.c's and replaces what is
 * faster done here (cpu_train16_init fills it once, before the first
 * backend exists). The plans are the training ones whatever g->infer says
 * (a 16-bit graph has no fused ops and no layouts of its own). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "gpud/cpu/dnnl_priv.h"
#include "gpud/cpu/host16_kernels.h"
#include "gpud/cpu/host_kernels.h"
#include "gpud/half_bits.h"
#include "gpud/simd_clones.h"

bk_kernels_t CPU_T16KERNELS;
static pthread_once_t cpu16_once = PTHREAD_ONCE_INIT;

#define CHUNK 32768   /* elements per thread's turn of the element-wise loops */

static size_t numel4(const int s[4])
{
    return (size_t)s[0] * s[1] * s[2] * s[3];
}

/* ---------------------------------------------------------- temporaries */

/* fp32 temporary `which` (0-3) of the backend, grown to at least count
 * floats (contents lost), shared by every plan as the scratchpad is (one
 * kernel at a time); NULL after bk_ctx_fail. */
static float *tmp32(bk_ctx_t *g, int which, size_t count)
{
    cpu_backend_t *be = (cpu_backend_t *)g->be;
    return cpu_grow(g, &be->t32[which], &be->t32_cap[which], (count ? count : 1) * sizeof(float),
                    "fp32 temporary of 16-bit activations (DDPIPE_HALF_ACTIVATIONS=0 runs "
                    "without)");
}

void cpu_train16_free(cpu_backend_t *be)
{
    for (int i = 0; i < 4; i++) {
        free(be->t32[i]);
        be->t32[i] = NULL;
        be->t32_cap[i] = 0;
    }
}

/* Temporary `which` holding the values of h (NULL: uninitialised). */
static float *in32(bk_ctx_t *g, int which, const void *h, size_t count)
{
    float *f = tmp32(g, which, count);
    if (f && h)
        hk_unpack16(BK_HALF_BF16, f, h, count, g->be->threads);
    return f;
}

static void out16(bk_ctx_t *g, void *h, const float *f, size_t count)
{
    hk_pack16(BK_HALF_BF16, h, f, count, g->be->threads);
}

/* ----------------------------------------------------------- element-wise */

/* y = a + b (then max(0, .)) in fp32, rounded: hk_add then the engine's
 * rounding, per element. */
SIMD_CLONES static void add_run(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n,
                                int relu)
{
    if (relu)
        for (size_t i = 0; i < n; i++) {
            float v = bf16_unpack(a[i]) + bf16_unpack(b[i]);
            y[i] = bf16_pack(v > 0.0f ? v : 0.0f);
        }
    else
        for (size_t i = 0; i < n; i++)
            y[i] = bf16_pack(bf16_unpack(a[i]) + bf16_unpack(b[i]));
}

static void c16_add(backend_t *be, void *y, const void *a, const void *b, size_t count,
                    int relu)
{
    size_t nchunks = (count + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) num_threads(be->threads) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * CHUNK, n = count - off < CHUNK ? count - off : CHUNK;
        add_run((uint16_t *)y + off, (const uint16_t *)a + off, (const uint16_t *)b + off, n,
                relu);
    }
}

/* y += x: the second branch's gradient added to the first's. */
static void c16_acc(backend_t *be, void *y, const void *x, size_t count)
{
    c16_add(be, y, y, x, count, 0);
}

static void c16_chan_sums(backend_t *be, const void *x, const int s[4], const float *center,
                          double *out)
{
    hk16_chan_sums(x, s, center, out, be->threads);
}

static void c16_bn_grad_sums(backend_t *be, const void *x, const void *y, const void *gy,
                             const int s[4], int relu, float gscale, const float *center,
                             double *out)
{
    hk16_bn_grad_sums(x, y, gy, s, relu, gscale, center, out, be->threads);
}

static void c16_bn_grad_apply(backend_t *be, void *gx, const void *x, const void *y,
                              const void *gy, const int s[4], int relu, float gscale,
                              const float *center, const float *scale, const float *a,
                              const float *b)
{
    hk16_bn_grad_apply(gx, x, y, gy, s, relu, gscale, center, scale, a, b, be->threads);
}

/* NCHW floats into the NHWC bf16 buffer, rounded; and back (exact). */
static int c16_write(bk_ctx_t *g, void *dst, const float *src, const int s[4], int layout)
{
    (void)g;
    (void)layout;   /* 0: a 16-bit graph has no layouts of its own */
    uint16_t *d = dst;
    size_t hw = (size_t)s[2] * s[3];
    for (int b = 0; b < s[0]; b++)
        for (int c = 0; c < s[1]; c++)
            for (size_t p = 0; p < hw; p++)
                d[((size_t)b * hw + p) * s[1] + c] = bf16_pack(src[((size_t)b * s[1] + c) * hw + p]);
    return 0;
}

static int c16_read(bk_ctx_t *g, const void *src, float *dst, const int s[4], int layout)
{
    (void)g;
    (void)layout;
    const uint16_t *x = src;
    size_t hw = (size_t)s[2] * s[3];
    for (int b = 0; b < s[0]; b++)
        for (int c = 0; c < s[1]; c++)
            for (size_t p = 0; p < hw; p++)
                dst[((size_t)b * s[1] + c) * hw + p] = bf16_unpack(x[((size_t)b * hw + p) * s[1] + c]);
    return 0;
}

/* uint8 NCHW pixels through lut into the NHWC bf16 input, rounded as
 * write would round those floats. */
static int c16_write_u8(bk_ctx_t *g, void *dst, const uint8_t *px, const float *lut,
                        const int s[4], int layout)
{
    if (layout)
        return 1;
    hk16_write_u8(dst, px, lut, s, g->be->threads);
    return 0;
}

static void c16_concat(backend_t *be, void *y, int cy, void *x, const int xs[4], int off,
                       int to_y)
{
    (void)be;
    hk16_concat(y, cy, x, xs, off, to_y);
}

static void c16_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward)
{
    (void)be;
    hk16_flatten(y, x, xs, backward);
}

/* --------------------------------------------------------- planned ops */

/* A plan of the fp32 table's (or cpu_*_plan16's, native) with the element
 * counts of its input and output. */
typedef struct {
    bk_plan_t base;
    bk_plan_t *inner;
    size_t nin, nout;
    int direct;   /* inner takes the bf16 buffers (native cpu_*_plan16) */
    int bn_c, bn_relu;   /* a BatchNorm's channels (0: not one) and fused ReLU */
    float bn_eps;
} c16plan_t;

static void c16plan_destroy(bk_plan_t *bp)
{
    c16plan_t *p = (c16plan_t *)bp;
    if (p->inner)
        p->inner->destroy(p->inner);
    free(p);
}

static bk_plan_t *c16plan_wrap(bk_ctx_t *g, bk_plan_t *inner, size_t nin, size_t nout,
                               int direct)
{
    if (!inner)
        return NULL;
    c16plan_t *p = calloc(1, sizeof *p);
    if (!p) {
        inner->destroy(inner);
        return bk_ctx_fail(g, "out of memory");
    }
    p->base.destroy = c16plan_destroy;
    p->inner = inner;
    p->nin = nin;
    p->nout = nout;
    p->direct = direct;
    return &p->base;
}

/* Native bf16 kernels that can read the buffers (not the tests' f32
 * staging, cpu_bf16_test_f32). */
static int native(const bk_ctx_t *g)
{
    return g->be->precision == BK_BF16_NATIVE && cpu_bf16_type() == dnnl_bf16;
}

static bk_plan_t *c16_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                                const int in[4], const int out[4])
{
    if (post)   /* an inference plan's fused op never runs on 16-bit buffers */
        return bk_ctx_fail(g, "16-bit activations: no fused convolutions");
    int d = native(g);
    return c16plan_wrap(g, d ? cpu_conv_plan16(g, c, in, out) : cpu_conv_plan(g, c, in, out),
                        numel4(in), numel4(out), d);
}

static bk_plan_t *c16_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias)
{
    int d = native(g);
    return c16plan_wrap(g, d ? cpu_linear_plan16(g, in, out, has_bias)
                             : cpu_linear_plan(g, in, out, has_bias),
                        numel4(in), (size_t)in[0] * out, d);
}

/* conv and linear forward: y (fp32 temporary) from x (bf16 itself when
 * direct), packed. */
static int c16_w_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const float *b,
                     void *y)
{
    c16plan_t *p = (c16plan_t *)bp;
    int r = p->direct ? cpu_w_fwd16(g, p->inner, x, w, b, y) : 1;   /* Winograd's: bf16 y */
    if (r <= 0)
        return r;
    const void *xa = p->direct ? x : in32(g, 0, x, p->nin);
    float *fy = tmp32(g, 1, p->nout);
    if (!xa || !fy || cpu_w_fwd(g, p->inner, xa, w, b, fy) < 0)
        return -1;
    out16(g, y, fy, p->nout);
    return 0;
}

static int c16_conv_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                        const float *b, const void *res, void *y)
{
    (void)res;   /* no post-ops here (c16_conv_plan) */
    return c16_w_fwd(g, bp, x, w, b, y);
}

static int c16_w_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const void *gy,
                     void *gx, float *gw, float *gb)
{
    c16plan_t *p = (c16plan_t *)bp;
    int r = p->direct ? cpu_w_bwd16(g, p->inner, x, gy, gx, gw, gb) : 1;   /* bf16 gx */
    if (r <= 0)
        return r;
    const void *xa = p->direct ? x : in32(g, 0, x, p->nin);
    const void *gya = p->direct ? gy : in32(g, 1, gy, p->nout);
    float *fgx = gx ? tmp32(g, 2, p->nin) : NULL;
    if (!xa || !gya || (gx && !fgx) || cpu_w_bwd(g, p->inner, xa, w, gya, fgx, gw, gb) < 0)
        return -1;
    if (gx)
        out16(g, gx, fgx, p->nin);
    return 0;
}

static bk_plan_t *c16_bn_plan(bk_ctx_t *g, const int in[4], float eps, int relu)
{
    c16plan_t *p = (c16plan_t *)c16plan_wrap(g, cpu_bn_plan(g, in, eps, relu), numel4(in),
                                             numel4(in), 0);
    if (p) {
        p->bn_c = in[1];
        p->bn_relu = relu;
        p->bn_eps = eps;
    }
    return p ? &p->base : NULL;
}

/* Rows r0..r1 of a BatchNorm's output with given statistics: the value
 * oneDNN's stores (host_bn_add.c: fmaf(x - mean, scale, beta), then its
 * fused ReLU as v > 0 ? v : +0), rounded as the engine rounds. */
static inline __attribute__((always_inline)) void bn_rows_body(
    uint16_t *y, const uint16_t *x, size_t r0, size_t r1, size_t c, const float *mean,
    const float *scale, const float *beta, int relu)
{
    for (size_t r = r0; r < r1; r++) {
        const uint16_t *px = x + r * c;
        uint16_t *py = y + r * c;
        for (size_t j = 0; j < c; j++) {
            float v = fmaf(bf16_unpack(px[j]) - mean[j], scale[j], beta[j]);
            py[j] = bf16_pack(relu && !(v > 0.0f) ? 0.0f : v);
        }
    }
}

/* Rows r0..r1 of a BatchNorm's output with given statistics: the value
 * oneDNN's stores (host_bn_add.c: fmaf(x - mean, scale, beta), then its
 * fused ReLU as v > 0 ? v : +0), rounded as the engine rounds. Built with
 * FMA for AVX-512 and AVX2, else generic: the same bits. GCC 12 vectorises
 * this loop of 16- and 32-bit values at 256 bits, where fmaf needs FMA
 * (or AVX512VL): under SIMD_CLONES_FMA's "avx512f" clone it ran scalar,
 * 4x slower than oneDNN (a loop of floats alone vectorises there). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BN_ROWS_ARGS                                                                   \
    uint16_t *y, const uint16_t *x, size_t r0, size_t r1, size_t c, const float *mean, \
        const float *scale, const float *beta, int relu
__attribute__((target("avx512f,fma"), optimize("fp-contract=off"))) static void
bn_rows_avx512(BN_ROWS_ARGS)
{
    bn_rows_body(y, x, r0, r1, c, mean, scale, beta, relu);
}

__attribute__((target("avx2,fma"), optimize("fp-contract=off"))) static void
bn_rows_avx2(BN_ROWS_ARGS)
{
    bn_rows_body(y, x, r0, r1, c, mean, scale, beta, relu);
}
#endif

static void bn_rows(uint16_t *y, const uint16_t *x, size_t r0, size_t r1, size_t c,
                    const float *mean, const float *scale, const float *beta, int relu)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (__builtin_cpu_supports("fma") && __builtin_cpu_supports("avx512f")) {
        bn_rows_avx512(y, x, r0, r1, c, mean, scale, beta, relu);
        return;
    }
    if (__builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2")) {
        bn_rows_avx2(y, x, r0, r1, c, mean, scale, beta, relu);
        return;
    }
#endif
    bn_rows_body(y, x, r0, r1, c, mean, scale, beta, relu);
}

/* Normalising with given statistics on the bf16 buffers themselves: the
 * fp32 kernel between an unpacking and a packing was 4 % of a ResNet-18
 * bf16 step. 1 where it does not apply (oneDNN's, on temporaries, then). */
static int bn_norm16(bk_ctx_t *g, c16plan_t *p, const void *x, const float *gamma,
                     const float *beta, const float *mean, const float *var, void *y)
{
    if (!p->bn_c)
        return 1;
    float *scale = hk_bn_scale_new(gamma, var, p->bn_eps, p->bn_c);
    if (!scale) {
        bk_ctx_fail(g, "out of memory");
        return -1;
    }
    size_t c = (size_t)p->bn_c, rows = p->nin / c, per = (CHUNK + c - 1) / c;
    size_t nchunks = (rows + per - 1) / per;
#pragma omp parallel for schedule(static) num_threads(g->be->threads) if (nchunks > 1)
    for (size_t k = 0; k < nchunks; k++) {
        size_t r0 = k * per, r1 = r0 + per < rows ? r0 + per : rows;
        bn_rows(y, x, r0, r1, c, mean, scale, beta, p->bn_relu);
    }
    free(scale);
    return 0;
}

static int c16_bn_fwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x,
                      const float *gamma, const float *beta, float *mean, float *var, void *y)
{
    c16plan_t *p = (c16plan_t *)bp;
    int r = training ? 1 : bn_norm16(g, p, x, gamma, beta, mean, var, y);
    if (r <= 0)
        return r;
    float *fx = in32(g, 0, x, p->nin), *fy = tmp32(g, 1, p->nout);
    if (!fx || !fy || cpu_bn_fwd(g, p->inner, training, fx, gamma, beta, mean, var, fy) < 0)
        return -1;
    out16(g, y, fy, p->nout);
    return 0;
}

static int c16_bn_bwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x, const void *y,
                      const void *gy, const float *gamma, const float *mean, const float *var,
                      void *gx, float *ggamma, float *gbeta)
{
    c16plan_t *p = (c16plan_t *)bp;
    float *fx = in32(g, 0, x, p->nin), *fy = y ? in32(g, 1, y, p->nin) : NULL;
    float *fgy = in32(g, 2, gy, p->nin), *fgx = gx ? tmp32(g, 3, p->nin) : NULL;
    if (!fx || (y && !fy) || !fgy || (gx && !fgx) ||
        cpu_bn_bwd(g, p->inner, training, fx, fy, fgy, gamma, mean, var, fgx, ggamma, gbeta) < 0)
        return -1;
    if (gx)
        out16(g, gx, fgx, p->nin);
    return 0;
}

static bk_plan_t *c16_relu_plan(bk_ctx_t *g, const int in[4])
{
    return c16plan_wrap(g, cpu_relu_plan(g, in), numel4(in), numel4(in), 0);
}

/* ReLU and pooling, forward y = f(x) and backward gx = f(a, gy) (a: y for
 * ReLU, x for pooling; a and gx of the input's size, gy of the output's):
 * the fp32 kernel f on unpacked temporaries, its output packed. */
typedef int (*unary_fwd_f)(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y);
typedef int (*unary_bwd_f)(bk_ctx_t *g, bk_plan_t *p, const void *a, const void *gy, void *gx);

static int unary_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y, unary_fwd_f f)
{
    c16plan_t *p = (c16plan_t *)bp;
    float *fx = in32(g, 0, x, p->nin), *fy = tmp32(g, 1, p->nout);
    if (!fx || !fy || f(g, p->inner, fx, fy) < 0)
        return -1;
    out16(g, y, fy, p->nout);
    return 0;
}

/* a NULL: f does not read it (pooling's backward reads its workspace) */
static int unary_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *a, const void *gy, void *gx,
                     unary_bwd_f f)
{
    c16plan_t *p = (c16plan_t *)bp;
    float *fa = a ? in32(g, 0, a, p->nin) : NULL, *fgy = in32(g, 1, gy, p->nout);
    float *fgx = tmp32(g, 2, p->nin);
    if ((a && !fa) || !fgy || !fgx || f(g, p->inner, fa, fgy, fgx) < 0)
        return -1;
    out16(g, gx, fgx, p->nin);
    return 0;
}

static int c16_relu_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    return unary_fwd(g, bp, x, y, cpu_relu_fwd);
}

/* gx = y > 0 ? gy : gy * 0, oneDNN's relu_use_dst_for_bwd (alpha 0: a
 * signed zero, NaN from an infinite or NaN gy) then the engine's rounding,
 * on the 16 bits themselves: the fp32 kernel between an unpacking and a
 * packing was 3 % of a ResNet-18 step. */
SIMD_CLONES static void relu_bwd_run(uint16_t *gx, const uint16_t *y, const uint16_t *gy,
                                     size_t n)
{
    /* on the bits: the same on floats (bf16_unpack, bf16_pack) stays
     * scalar in the SIMD_CLONES build, 15x slower. y > 0 is a clear sign,
     * not zero, not NaN; bf16_pack makes every NaN 0xffff, and gy * 0 is
     * NaN for an infinite gy, else gy's signed zero */
    for (size_t i = 0; i < n; i++) {
        unsigned a = y[i] & 0x7fffu, b = gy[i], bm = b & 0x7fffu;
        unsigned pos = !(y[i] & 0x8000u) && a != 0 && a <= 0x7f80u;
        unsigned out = pos ? (bm > 0x7f80u ? 0xffffu : b) : (bm >= 0x7f80u ? 0xffffu : b & 0x8000u);
        gx[i] = (uint16_t)out;
    }
}

static int c16_relu_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *y, const void *gy, void *gx)
{
    c16plan_t *p = (c16plan_t *)bp;   /* a ReLU's nin = nout */
    size_t nchunks = (p->nin + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) num_threads(g->be->threads) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * CHUNK, n = p->nin - off < CHUNK ? p->nin - off : CHUNK;
        relu_bwd_run((uint16_t *)gx + off, (const uint16_t *)y + off, (const uint16_t *)gy + off,
                     n);
    }
    return 0;
}

static bk_plan_t *c16_pool_plan(bk_ctx_t *g, const bk_pool_t *q, const int in[4],
                                const int out[4])
{
    return c16plan_wrap(g, cpu_pool_plan(g, q, in, out), numel4(in), numel4(out), 0);
}

static int c16_pool_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    return unary_fwd(g, bp, x, y, cpu_pool_fwd);
}

static int c16_pool_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const void *gy, void *gx)
{
    /* cpu_pool_bwd reads the forward's workspace, not x: x's unpacking (the
     * stem's 64 x 112 x 112 an image) was 4 % of a ResNet-18 step */
    (void)x;
    return unary_bwd(g, bp, NULL, gy, gx, cpu_pool_bwd);
}

/* ------------------------------------------------------------ the table */

static void fill(void)
{
    CPU_T16KERNELS = HOST16_KERNELS;   /* alloc, dropout, the loss, top-k, round_half */
    CPU_T16KERNELS.write = c16_write;
    CPU_T16KERNELS.read = c16_read;
    CPU_T16KERNELS.write_u8 = c16_write_u8;
    CPU_T16KERNELS.zero = hk16_zero;
    CPU_T16KERNELS.copy = hk16_copy;
    CPU_T16KERNELS.add = c16_add;
    CPU_T16KERNELS.acc = c16_acc;
    CPU_T16KERNELS.concat = c16_concat;
    CPU_T16KERNELS.flatten = c16_flatten;
    CPU_T16KERNELS.chan_sums = c16_chan_sums;
    CPU_T16KERNELS.bn_grad_sums = c16_bn_grad_sums;
    CPU_T16KERNELS.bn_grad_apply = c16_bn_grad_apply;
    CPU_T16KERNELS.conv_plan = c16_conv_plan;
    CPU_T16KERNELS.conv_fwd = c16_conv_fwd;
    CPU_T16KERNELS.conv_bwd = c16_w_bwd;
    CPU_T16KERNELS.linear_plan = c16_linear_plan;
    CPU_T16KERNELS.linear_fwd = c16_w_fwd;
    CPU_T16KERNELS.linear_bwd = c16_w_bwd;
    CPU_T16KERNELS.bn_plan = c16_bn_plan;
    CPU_T16KERNELS.bn_fwd = c16_bn_fwd;
    CPU_T16KERNELS.bn_bwd = c16_bn_bwd;
    CPU_T16KERNELS.relu_plan = c16_relu_plan;
    CPU_T16KERNELS.relu_fwd = c16_relu_fwd;
    CPU_T16KERNELS.relu_bwd = c16_relu_bwd;
    CPU_T16KERNELS.pool_plan = c16_pool_plan;
    CPU_T16KERNELS.pool_fwd = c16_pool_fwd;
    CPU_T16KERNELS.pool_bwd = c16_pool_bwd;
}

void cpu_train16_init(void)
{
    pthread_once(&cpu16_once, fill);
}
