/* host_kernels — see host_kernels.h. */
#include "gpud/cpu/host_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/half.h"
#include "gpud/half_bits.h"
#include "gpud/cpu/host_bn_avx2.h"
#include "gpud/cpu/ref_ops.h"
#include "gpud/simd_clones.h"

void *hk_alloc(bk_ctx_t *g, size_t count)
{
    void *p = NULL;
    size_t bytes = (count ? count : 1) * sizeof(float);
    if (posix_memalign(&p, 64, bytes) != 0)
        return bk_ctx_fail(g, "out of memory (%zu floats)", count);
    memset(p, 0, bytes);
    return p;
}

void hk_release(backend_t *be, void *buf)
{
    (void)be;
    free(buf);
}

/* zero and copy in chunks over the backend's threads: a training step
 * moves whole activation gradients with them (one thread's memcpy is a
 * fraction of the memory bandwidth). Same bytes whatever the split. Bytes,
 * so that fp32 and 16-bit buffers (hk16_*) share them. */
#define HK_CHUNK (65536 * sizeof(float))   /* bytes */

/* x NULL: zero y */
static void move_bytes(int threads, void *y, const void *x, size_t bytes)
{
    char *py = y;
    const char *px = x;
    if (py == px)
        return;
    size_t nchunks = (bytes + HK_CHUNK - 1) / HK_CHUNK;
#pragma omp parallel for schedule(static) num_threads(threads) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * HK_CHUNK, n = bytes - off < HK_CHUNK ? bytes - off : HK_CHUNK;
        if (px)
            memcpy(py + off, px + off, n);
        else
            memset(py + off, 0, n);
    }
}

void hk_zero(backend_t *be, void *y, size_t count)
{
    move_bytes(be->threads, y, NULL, count * sizeof(float));
}

void hk_copy(backend_t *be, void *y, const void *x, size_t count)
{
    move_bytes(be->threads, y, x, count * sizeof(float));
}

void hk16_zero(backend_t *be, void *y, size_t count)
{
    move_bytes(be->threads, y, NULL, count * sizeof(uint16_t));
}

void hk16_copy(backend_t *be, void *y, const void *x, size_t count)
{
    move_bytes(be->threads, y, x, count * sizeof(uint16_t));
}

void hk_add(backend_t *be, void *y, const void *a, const void *b, size_t count, int relu)
{
    float *py = y;
    const float *pa = a, *pb = b;
    if (relu) {
#pragma omp parallel for simd schedule(static) num_threads(be->threads)
        for (size_t i = 0; i < count; i++) {
            float v = pa[i] + pb[i];
            py[i] = v > 0.0f ? v : 0.0f;
        }
        return;
    }
#pragma omp parallel for simd schedule(static) num_threads(be->threads)
    for (size_t i = 0; i < count; i++)
        py[i] = pa[i] + pb[i];
}

void hk_acc(backend_t *be, void *y, const void *x, size_t count)
{
    float *py = y;
    const float *px = x;
#pragma omp parallel for simd schedule(static) num_threads(be->threads)
    for (size_t i = 0; i < count; i++)
        py[i] += px[i];
}

/* bf16: y holds bf16 values (NHWC), each the rounded float. */
static void write_u8(void *y, const uint8_t *px, const float *lut, const int s[4], int nhwc,
                     int bf16, int threads)
{
    float *d = y;
    uint16_t *d16 = y;
    int c = s[1];
    size_t hw = (size_t)s[2] * s[3];
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int sc = 0; sc < s[0] * c; sc++) {
        const float *t = lut + (size_t)(sc % c) * 256;
        const uint8_t *p = px + (size_t)sc * hw;
        int b = sc / c, ch = sc % c;
        if (bf16)
            for (size_t i = 0; i < hw; i++)
                d16[((size_t)b * hw + i) * c + ch] = bf16_pack(t[p[i]]);
        else if (nhwc)
            for (size_t i = 0; i < hw; i++)
                d[((size_t)b * hw + i) * c + ch] = t[p[i]];
        else
            for (size_t i = 0; i < hw; i++)
                d[(size_t)sc * hw + i] = t[p[i]];
    }
}

void hk_write_u8(void *y, const uint8_t *px, const float *lut, const int s[4], int nhwc,
                 int threads)
{
    write_u8(y, px, lut, s, nhwc, 0, threads);
}

void hk16_write_u8(void *y, const uint8_t *px, const float *lut, const int s[4], int threads)
{
    write_u8(y, px, lut, s, 1, 1, threads);
}

/* In chunks over the threads; each element is rounded alone, so the
 * result does not depend on the split. */
void hk_round_half(backend_t *be, bk_half_t fmt, void *y, size_t count)
{
    float *py = y;
    const size_t chunk = 16384;
    size_t nchunks = (count + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) num_threads(be->threads)
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * chunk, n = count - off < chunk ? count - off : chunk;
        half_round(fmt, py + off, py + off, n);
    }
}

/* ------------------------------------------------ 16-bit conversions */

SIMD_CLONES static void unpack_run(bk_half_t fmt, float *f, const uint16_t *h, size_t n)
{
    if (fmt == BK_HALF_FP16)
        for (size_t i = 0; i < n; i++)
            f[i] = fp16_unpack(h[i]);
    else
        for (size_t i = 0; i < n; i++)
            f[i] = bf16_unpack(h[i]);
}

SIMD_CLONES static void pack_run(bk_half_t fmt, uint16_t *h, const float *f, size_t n)
{
    if (fmt == BK_HALF_FP16)
        for (size_t i = 0; i < n; i++)
            h[i] = fp16_pack(f[i]);
    else
        for (size_t i = 0; i < n; i++)
            h[i] = bf16_pack(f[i]);
}

#define CONV_CHUNK 16384   /* elements per thread's turn */

void hk_unpack16(bk_half_t fmt, float *f, const uint16_t *h, size_t n, int threads)
{
    size_t nchunks = (n + CONV_CHUNK - 1) / CONV_CHUNK;
#pragma omp parallel for schedule(static) num_threads(threads) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * CONV_CHUNK, m = n - off < CONV_CHUNK ? n - off : CONV_CHUNK;
        unpack_run(fmt, f + off, h + off, m);
    }
}

void hk_pack16(bk_half_t fmt, uint16_t *h, const float *f, size_t n, int threads)
{
    size_t nchunks = (n + CONV_CHUNK - 1) / CONV_CHUNK;
#pragma omp parallel for schedule(static) num_threads(threads) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * CONV_CHUNK, m = n - off < CONV_CHUNK ? n - off : CONV_CHUNK;
        pack_run(fmt, h + off, f + off, m);
    }
}

void hk_ce_fwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
               float eps, void *loss)
{
    (void)be;
    ref_ce_fwd(logits, labels, n, k, eps, loss);
}

void hk_ce_bwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
               float eps, const void *dloss, void *glogits)
{
    (void)be;
    ref_ce_bwd(logits, labels, n, k, eps, dloss, glogits);
}

/* es: the bytes of an element (4, or 2 for hk16_concat) */
static void concat_es(void *y, int cy, void *x, const int xs[4], int off, int to_y, int nhwc,
                      size_t es)
{
    char *py = y, *px = x;
    int n = xs[0], cx = xs[1];
    size_t hw = (size_t)xs[2] * xs[3];
    if (nhwc) {   /* runs of cx channels per pixel */
        for (size_t p = 0; p < (size_t)n * hw; p++) {
            char *a = py + (p * cy + off) * es, *b = px + p * cx * es;
            memcpy(to_y ? a : b, to_y ? b : a, (size_t)cx * es);
        }
        return;
    }
    for (int b = 0; b < n; b++) {   /* one block of cx planes per sample */
        char *a = py + ((size_t)b * cy + off) * hw * es, *s = px + (size_t)b * cx * hw * es;
        memcpy(to_y ? a : s, to_y ? s : a, (size_t)cx * hw * es);
    }
}

void hk_concat(void *y, int cy, void *x, const int xs[4], int off, int to_y, int nhwc)
{
    concat_es(y, cy, x, xs, off, to_y, nhwc, sizeof(float));
}

void hk16_concat(void *y, int cy, void *x, const int xs[4], int off, int to_y)
{
    concat_es(y, cy, x, xs, off, to_y, 1, sizeof(uint16_t));
}

static void flatten_es(void *y, const void *x, const int xs[4], int backward, int nhwc,
                       size_t es)
{
    size_t per = (size_t)xs[1] * xs[2] * xs[3], hw = (size_t)xs[2] * xs[3];
    if (!nhwc || hw == 1) {   /* same bytes: NCHW order already */
        memmove(y, x, (size_t)xs[0] * per * es);
        return;
    }
    const char *px = x;
    char *py = y;
    /* forward: y[b][c*hw + p] = x[b][p*C + c]; backward the reverse */
    for (int b = 0; b < xs[0]; b++)
        for (int c = 0; c < xs[1]; c++)
            for (size_t p = 0; p < hw; p++) {
                size_t flat = b * per + c * hw + p, hwc = b * per + p * xs[1] + c;
                size_t to = backward ? hwc : flat, from = backward ? flat : hwc;
                memcpy(py + to * es, px + from * es, es);
            }
}

void hk_flatten(void *y, const void *x, const int xs[4], int backward, int nhwc)
{
    flatten_es(y, x, xs, backward, nhwc, sizeof(float));
}

void hk16_flatten(void *y, const void *x, const int xs[4], int backward)
{
    flatten_es(y, x, xs, backward, 1, sizeof(uint16_t));
}

/* One sample's mask: IX[i] is the index mix of the logical (NCHW) index of
 * memory element i, the same for every sample of the call. Branch-free: a
 * kept element is x * scale, a dropped one +0 (its bits masked off); the
 * random keep/drop branch mispredicted a third of the time. */
SIMD_CLONES static void dropout_sample(float *y, const float *x, const uint64_t *ix,
                                       uint64_t key, uint64_t thr, float scale, size_t per)
{
    for (size_t i = 0; i < per; i++)
        y[i] = hk_drop_keep(x[i] * scale, ref_dropout_bits(key, ix[i]), thr);
}

uint64_t *hk_dropout_ix_new(const int s[4], int nhwc)
{
    size_t per = (size_t)s[1] * s[2] * s[3], hw = (size_t)s[2] * s[3];
    uint64_t *ix = malloc(per * sizeof *ix);
    /* i walks memory; the mask is drawn by the logical NCHW index */
    for (size_t i = 0; ix && i < per; i++)
        ix[i] = ref_dropout_index(nhwc ? (i % s[1]) * hw + i / s[1] : i);
    return ix;
}

/* Slow path when the index table cannot be allocated: the reference. */
static void dropout_plain(float *y, const float *x, const int s[4], float p, uint64_t key,
                          int nhwc)
{
    size_t per = (size_t)s[1] * s[2] * s[3], hw = (size_t)s[2] * s[3];
    for (size_t i = 0; i < per; i++) {
        size_t logical = nhwc ? (i % s[1]) * hw + i / s[1] : i;
        y[i] = ref_dropout_keep(key, logical, p) ? x[i] * (1.0f / (1.0f - p)) : 0.0f;
    }
}

void hk_dropout(void *y, const void *x, const int s[4], float p, uint32_t op,
                const uint64_t *keys, int nhwc)
{
    const float *px = x;
    float *py = y;
    size_t per = (size_t)s[1] * s[2] * s[3];
    if (p == 0.0f) {
        if (py != px)
            memcpy(py, px, (size_t)s[0] * per * sizeof(float));
        return;
    }
    float scale = 1.0f / (1.0f - p);
    uint64_t thr = ref_dropout_threshold(p);
    /* the index half of the hash, once per call instead of once per sample */
    uint64_t *ix = hk_dropout_ix_new(s, nhwc);
    for (int b = 0; b < s[0]; b++) {
        uint64_t key = dropout_op_key(keys[b], op);
        if (ix)
            dropout_sample(py + b * per, px + b * per, ix, key, thr, scale, per);
        else
            dropout_plain(py + b * per, px + b * per, s, p, key, nhwc);
    }
    free(ix);
}

#define SUM_CHUNKS 32   /* fixed: the summation order must not follow the threads */

/* What a per-channel reduction adds up (double accumulators). */
typedef struct {
    const float *x, *y, *gy;   /* y, gy: gradient sums only */
    const float *center;       /* NULL: plain sums of x */
    int relu;                  /* gradient sums: dy counts only where y > 0 */
    float gscale;              /* gradient sums: dy' is that dy times gscale (a fused
                                * dropout's 1 / (1 - p); else 1) */
    int grads;                 /* 1: [sum dy', sum dy' (x - center)]; 0: sum x or
                                * sum (x - center)^2 */
} red_t;

/* The hot NHWC loops are built per ISA (simd_clones.h): each lane is one
 * channel and every channel's additions keep their order, so the vector
 * width does not change a bit of the results (SyncBatchNorm's W ranks == 1
 * rank rests on that). */
#define HK_VECTOR SIMD_CLONES

#define TILE_ROWS 8    /* rows per pass of the channel blocks (in L1); measured best of 2-64 */
#define CBLK 16        /* channels whose accumulators stay in registers */

/* 8 channels of a row, as floats and as doubles (GCC/clang vector types:
 * element-wise operations, so each lane computes what the scalar code
 * would). */
typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));

/* Macros, not functions: vector-typed returns would change the ABI of the
 * baseline build (-Wpsabi). LD8 loads 8 unaligned floats; WIDE widens. */
#define LD8(dst, p) memcpy(&(dst), (p), sizeof(v8f))
#define WIDE(v) __builtin_convertvector((v), v8d)

/* 4 channels as floats and as doubles: the reductions' unit (one AVX2
 * register of doubles; the accumulators of a 16-channel block stay in
 * registers on every ISA). */
typedef float v4f __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
#define LD4(dst, p) memcpy(&(dst), (p), sizeof(v4f))
#define WIDE4(v) __builtin_convertvector((v), v4d)

/* Channels [cb, cb + CBLK) of rows [r0, r1): acc (+ c) += their
 * contributions, row by row (each channel adds in the order a row-by-row
 * walk of all channels would). One function per kind of sum, with the four
 * accumulators of each in named locals: arrays of vectors indexed in the
 * loop were kept on the stack (3.9 GB/s on AVX2). Always inlined, so that
 * each build of red_rows gets its own ISA. */
#define BLK_LOAD(s, p) v4d s##0, s##1, s##2, s##3; \
    memcpy(&s##0, (p), 32); memcpy(&s##1, (p) + 4, 32); \
    memcpy(&s##2, (p) + 8, 32); memcpy(&s##3, (p) + 12, 32)
#define BLK_STORE(s, p) do { memcpy((p), &s##0, 32); memcpy((p) + 4, &s##1, 32); \
    memcpy((p) + 8, &s##2, 32); memcpy((p) + 12, &s##3, 32); } while (0)

/* sum x */
__attribute__((always_inline)) static inline void blk_sum(const float *x, size_t r0, size_t r1,
                                                         size_t c, double *acc)
{
    BLK_LOAD(s, acc);
    for (size_t row = r0; row < r1; row++) {
        const float *p = x + row * c;
        v4f f0, f1, f2, f3;
        LD4(f0, p); LD4(f1, p + 4); LD4(f2, p + 8); LD4(f3, p + 12);
        s0 += WIDE4(f0); s1 += WIDE4(f1); s2 += WIDE4(f2); s3 += WIDE4(f3);
    }
    BLK_STORE(s, acc);
}

/* sum (x - center)^2, the difference and its square in double */
__attribute__((always_inline)) static inline void blk_sq(const float *x, const float *center,
                                                        size_t r0, size_t r1, size_t c,
                                                        double *acc)
{
    BLK_LOAD(s, acc);
    v4f k0, k1, k2, k3;
    LD4(k0, center); LD4(k1, center + 4); LD4(k2, center + 8); LD4(k3, center + 12);
    const v4d c0 = WIDE4(k0), c1 = WIDE4(k1), c2 = WIDE4(k2), c3 = WIDE4(k3);
    for (size_t row = r0; row < r1; row++) {
        const float *p = x + row * c;
        v4f f0, f1, f2, f3;
        LD4(f0, p); LD4(f1, p + 4); LD4(f2, p + 8); LD4(f3, p + 12);
        v4d d0 = WIDE4(f0) - c0, d1 = WIDE4(f1) - c1, d2 = WIDE4(f2) - c2, d3 = WIDE4(f3) - c3;
        s0 += d0 * d0; s1 += d1 * d1; s2 += d2 * d2; s3 += d3 * d3;
    }
    BLK_STORE(s, acc);
}

/* 4 channels of the gradient sums: dy' = (relu && y <= 0 ? +0 : dy) *
 * gscale, lane by lane; s += dy', t += dy' (x - center) in double, as the
 * NCHW path. */
#define GRAD4(i) do { \
        v4f g, xv; \
        LD4(g, gy + off + 4 * (i)); \
        LD4(xv, x + off + 4 * (i)); \
        if (relu) { \
            v4f yv; \
            LD4(yv, y + off + 4 * (i)); \
            g = (v4f)((v4i)g & (yv > zero)); \
        } \
        g *= gs; \
        s##i += WIDE4(g); \
        t##i += WIDE4(g) * (WIDE4(xv) - c##i); \
    } while (0)

__attribute__((always_inline)) static inline void blk_grad(const float *x, const float *y,
                                                          const float *gy,
                                                          const float *center, int relu,
                                                          float gscale, size_t r0, size_t r1,
                                                          size_t c, double *acc0, double *acc1)
{
    const v4f gs = {gscale, gscale, gscale, gscale};
    BLK_LOAD(s, acc0);
    BLK_LOAD(t, acc1);
    v4f k0, k1, k2, k3;
    LD4(k0, center); LD4(k1, center + 4); LD4(k2, center + 8); LD4(k3, center + 12);
    const v4d c0 = WIDE4(k0), c1 = WIDE4(k1), c2 = WIDE4(k2), c3 = WIDE4(k3);
    const v4f zero = {0};
    for (size_t row = r0; row < r1; row++) {
        size_t off = row * c;
        GRAD4(0); GRAD4(1); GRAD4(2); GRAD4(3);
    }
    BLK_STORE(s, acc0);
    BLK_STORE(t, acc1);
}

/* The same for n < CBLK channels [cb, cb + n), one scalar at a time. */
__attribute__((always_inline)) static inline void red_tail(const red_t *r, size_t r0, size_t r1,
                                                          int c, int cb, int n, double *acc)
{
    for (size_t row = r0; row < r1; row++)
        for (int j = cb; j < cb + n; j++) {
            size_t at = row * (size_t)c + (size_t)j;
            float x = r->x[at];
            if (!r->grads && !r->center) {
                acc[j] += x;
            } else if (!r->grads) {
                double d = (double)x - r->center[j];
                acc[j] += d * d;
            } else {
                float g = (!r->relu || r->y[at] > 0.0f ? r->gy[at] : 0.0f) * r->gscale;
                acc[j] += g;
                acc[c + j] += (double)g * ((double)x - r->center[j]);
            }
        }
}

/* acc (+ c) += the contributions of rows [r0, r1), TILE_ROWS at a time,
 * channel block by channel block. */
HK_VECTOR static void red_rows(const red_t *r, size_t r0, size_t r1, int c, double *acc)
{
    int avx2 = hbx_available(), nblk = c / CBLK;
    for (size_t t0 = r0; t0 < r1; t0 += TILE_ROWS) {
        size_t t1 = r1 - t0 < TILE_ROWS ? r1 : t0 + TILE_ROWS;
        int cb = 0;
        size_t cc = (size_t)c;
        if (avx2 && nblk) {   /* the same blocks in intrinsics (host_bn_avx2.h) */
            if (r->grads)
                hbx_grad(r->x, r->y, r->gy, r->center, r->relu, r->gscale, t0, t1, cc, nblk,
                         acc, acc + c);
            else if (r->center)
                hbx_sq(r->x, r->center, t0, t1, cc, nblk, acc);
            else
                hbx_sum(r->x, t0, t1, cc, nblk, acc);
            cb = nblk * CBLK;
        }
        for (; cb + CBLK <= c; cb += CBLK) {
            if (r->grads)
                blk_grad(r->x + cb, r->relu ? r->y + cb : NULL, r->gy + cb, r->center + cb,
                         r->relu, r->gscale, t0, t1, cc, acc + cb, acc + c + cb);
            else if (r->center)
                blk_sq(r->x + cb, r->center + cb, t0, t1, cc, acc + cb);
            else
                blk_sum(r->x + cb, t0, t1, cc, acc + cb);
        }
        if (cb < c)
            red_tail(r, t0, t1, c, cb, c - cb, acc);
    }
}

/* The same for one NCHW plane of n values of channel ch. */
static void red_plane(const red_t *r, size_t off, size_t n, int ch, double *acc, int c)
{
    const float *x = r->x + off;
    double cen = r->center ? r->center[ch] : 0.0, s0 = 0.0, s1 = 0.0;
    if (!r->grads) {
        for (size_t j = 0; j < n; j++) {
            double d = (double)x[j] - cen;
            s0 += r->center ? d * d : d;
        }
        acc[ch] += s0;
        return;
    }
    const float *y = r->y + off, *gy = r->gy + off;
    for (size_t j = 0; j < n; j++) {
        double g = (!r->relu || y[j] > 0.0f ? gy[j] : 0.0f) * r->gscale;
        s0 += g;
        s1 += g * ((double)x[j] - cen);
    }
    acc[ch] += s0;
    acc[c + ch] += s1;
}

/* ------------------------------------------ the same on bf16 NHWC rows */

#define TILE16 32   /* rows unpacked at a time (a multiple of TILE_ROWS) */

/* TILE16 rows of 3 arrays of c floats, or stop: the element-wise kernels
 * have no error path (backend_impl.h); gpud stops as Redis does on
 * out-of-memory, saying so. */
static float *tile16_new(size_t c)
{
    float *t = malloc(3 * TILE16 * c * sizeof *t);
    if (!t) {
        fprintf(stderr, "gpud: out of memory for the 16-bit activations' row tiles (%zu "
                "channels): give the process more memory, or run with "
                "DDPIPE_HALF_ACTIVATIONS=0\n", c);
        abort();
    }
    return t;
}

/* n rows from row r0 of bf16 array h (c per row) into t. */
static void rows16(float *t, const void *h, size_t r0, size_t n, size_t c)
{
    unpack_run(BK_HALF_BF16, t, (const uint16_t *)h + r0 * c, n * c);
}

/* red_rows over rows [r0, r1) of r's bf16 arrays (r->x etc. point at
 * uint16_t), TILE16 rows at a time through the float tile t: each channel
 * still adds its rows in order. */
static void red_rows16(const red_t *r, size_t r0, size_t r1, int c, double *acc, float *t)
{
    size_t cc = (size_t)c;
    for (size_t t0 = r0; t0 < r1; t0 += TILE16) {
        size_t n = r1 - t0 < TILE16 ? r1 - t0 : TILE16;
        red_t f = *r;
        rows16(t, r->x, t0, n, cc);
        f.x = t;
        if (r->grads) {
            rows16(t + TILE16 * cc, r->gy, t0, n, cc);
            f.gy = t + TILE16 * cc;
            if (r->relu) {
                rows16(t + 2 * TILE16 * cc, r->y, t0, n, cc);
                f.y = t + 2 * TILE16 * cc;
            }
        }
        red_rows(&f, 0, n, c, acc);
    }
}

/* NHWC: rows of c channels. Each of SUM_CHUNKS row ranges gets its own
 * partial sums, added in chunk order. half: r's arrays are bf16 (the
 * rows go through float tiles, red_rows16). */
static void reduce_nhwc(const red_t *r, size_t rows, int c, double *out, int threads, int half)
{
    size_t width = (size_t)c * (r->grads ? 2 : 1);
    size_t chunks = rows < SUM_CHUNKS ? rows : SUM_CHUNKS;
    double *part = calloc(chunks * width, sizeof *part);
    if (!part) {   /* no scratch: one serial chunk */
        chunks = 1;
        part = out;
        memset(out, 0, width * sizeof *out);
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t k = 0; k < chunks; k++) {
        size_t r0 = rows * k / chunks, r1 = rows * (k + 1) / chunks;
        if (half) {
            float *t = tile16_new((size_t)c);
            red_rows16(r, r0, r1, c, part + k * width, t);
            free(t);
        } else {
            red_rows(r, r0, r1, c, part + k * width);
        }
    }
    if (part == out)
        return;
    for (size_t j = 0; j < width; j++) {
        double sum = 0.0;
        for (size_t k = 0; k < chunks; k++)
            sum += part[k * width + j];
        out[j] = sum;
    }
    free(part);
}

/* NCHW: each channel is n planes of h*w values; one channel per thread. */
static void reduce_nchw(const red_t *r, const int s[4], double *out, int threads)
{
    size_t hw = (size_t)s[2] * s[3];
    int c = s[1];
    memset(out, 0, (size_t)c * (r->grads ? 2 : 1) * sizeof *out);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int ch = 0; ch < c; ch++)
        for (int b = 0; b < s[0]; b++)
            red_plane(r, ((size_t)b * c + ch) * hw, hw, ch, out, c);
}

static void reduce(const red_t *r, const int s[4], double *out, int nhwc, int threads)
{
    if (nhwc)
        reduce_nhwc(r, (size_t)s[0] * s[2] * s[3], s[1], out, threads, 0);
    else
        reduce_nchw(r, s, out, threads);
}

void hk16_chan_sums(const void *x, const int s[4], const float *center, double *out,
                    int threads)
{
    red_t r = {.x = x, .center = center};
    reduce_nhwc(&r, (size_t)s[0] * s[2] * s[3], s[1], out, threads, 1);
}

void hk16_bn_grad_sums(const void *x, const void *y, const void *gy, const int s[4], int relu,
                       float gscale, const float *center, double *out, int threads)
{
    red_t r = {.x = x, .y = y, .gy = gy, .center = center, .relu = relu, .gscale = gscale,
               .grads = 1};
    reduce_nhwc(&r, (size_t)s[0] * s[2] * s[3], s[1], out, threads, 1);
}

void hk_chan_sums(const void *x, const int s[4], const float *center, double *out, int nhwc,
                  int threads)
{
    red_t r = {.x = x, .center = center};
    reduce(&r, s, out, nhwc, threads);
}

void hk_bn_grad_sums(const void *x, const void *y, const void *gy, const int s[4], int relu,
                     float gscale, const float *center, double *out, int nhwc, int threads)
{
    red_t r = {.x = x, .y = y, .gy = gy, .center = center, .relu = relu, .gscale = gscale,
               .grads = 1};
    reduce(&r, s, out, nhwc, threads);
}

/* gx = scale * dy' + a * (x - center) + b over NHWC rows [r0, r1) of c
 * channels, in double as the NCHW path: the three terms cancel (dx is the
 * small remainder of the batch-mean subtraction), and float evaluation made
 * W ranks drift from 1 rank by 4e-5 in two epochs instead of 1e-7. */
HK_VECTOR static void apply_rows(float *gx, const float *x, const float *y, const float *gy,
                                 size_t r0, size_t r1, int c, int relu, float gscale,
                                 const double *wide)
{
    if (hbx_available()) {   /* the same in intrinsics (host_bn_avx2.h) */
        hbx_apply(gx, x, y, gy, r0, r1, c, relu, gscale, wide);
        return;
    }
    const v8f zero = {0};
    const v8f gs = {gscale, gscale, gscale, gscale, gscale, gscale, gscale, gscale};
    const double *dc = wide, *ds = wide + c, *da = wide + 2 * c, *db = wide + 3 * c;
    for (size_t row = r0; row < r1; row++) {
        size_t off = row * (size_t)c;
        float *o = gx + off;
        const float *px = x + off, *py = y + off, *pg = gy + off;
        int j = 0;
        /* 8 channels at a time in vector types: each lane evaluates the
         * scalar expression below, in the same order (the compiler's own
         * vectorisation of the mixed float/double loop was 3x slower); the
         * coefficients come widened (wide: centre, scale, a, b as doubles) */
        for (; j + 8 <= c; j += 8) {
            v8f vx, vg, vy;
            v8d wc, ws, wa, wb;
            LD8(vx, px + j);
            LD8(vg, pg + j);
            memcpy(&wc, dc + j, sizeof wc);
            memcpy(&ws, ds + j, sizeof ws);
            memcpy(&wa, da + j, sizeof wa);
            memcpy(&wb, db + j, sizeof wb);
            if (relu) {   /* dy' = y > 0 ? dy : +0, lane by lane */
                LD8(vy, py + j);
                vg = (v8f)((v8i)vg & (vy > zero));
            }
            vg *= gs;
            v8d r = ws * WIDE(vg) + wa * (WIDE(vx) - wc) + wb;
            v8f out = __builtin_convertvector(r, v8f);
            memcpy(o + j, &out, sizeof out);
        }
        for (; j < c; j++) {
            double g = (!relu || py[j] > 0.0f ? pg[j] : 0.0f) * gscale;
            o[j] = (float)(ds[j] * g + da[j] * ((double)px[j] - dc[j]) + db[j]);
        }
    }
}

/* The same for one NCHW plane of n values of channel ch, in double. */
static void apply_plane(float *gx, const float *x, const float *y, const float *gy, size_t n,
                        int relu, float gscale, double sc, double ac, double bc, double cen)
{
#pragma omp simd
    for (size_t j = 0; j < n; j++) {
        double g = (!relu || y[j] > 0.0f ? gy[j] : 0.0f) * gscale;
        gx[j] = (float)(sc * g + ac * ((double)x[j] - cen) + bc);
    }
}

#define APPLY_PARTS 64   /* row ranges of the NHWC apply, shared among the threads */

/* apply_rows' per-channel coefficients as doubles (centre, scale, a, b:
 * 4c), widened once per call rather than once per row; or stop, as
 * tile16_new. */
static double *widen_coeffs(const float *center, const float *scale, const float *a,
                            const float *b, size_t c)
{
    double *w = malloc(4 * c * sizeof *w);
    if (!w) {
        fprintf(stderr, "gpud: out of memory for BatchNorm's %zu coefficients\n", 4 * c);
        abort();
    }
    for (size_t j = 0; j < c; j++) {
        w[j] = center[j];
        w[c + j] = scale[j];
        w[2 * c + j] = a[j];
        w[3 * c + j] = b[j];
    }
    return w;
}

void hk_bn_grad_apply(void *gx, const void *x, const void *y, const void *gy, const int s[4],
                      int relu, float gscale, const float *center, const float *scale,
                      const float *a, const float *b, int nhwc, int threads)
{
    float *px = gx;
    const float *vx = x, *vy = y, *vg = gy;
    size_t hw = (size_t)s[2] * s[3], c = (size_t)s[1];
    if (nhwc) {
        size_t rows = (size_t)s[0] * hw;
        double *wide = widen_coeffs(center, scale, a, b, c);
#pragma omp parallel for schedule(static) num_threads(threads)
        for (size_t k = 0; k < APPLY_PARTS; k++)
            apply_rows(px, vx, vy, vg, rows * k / APPLY_PARTS, rows * (k + 1) / APPLY_PARTS,
                       (int)c, relu, gscale, wide);
        free(wide);
        return;
    }
    size_t planes = (size_t)s[0] * c;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t k = 0; k < planes; k++) {
        size_t ch = k % c, off = k * hw;
        apply_plane(px + off, vx + off, vy + off, vg + off, hw, relu, gscale, scale[ch], a[ch],
                    b[ch], center[ch]);
    }
}

void hk16_bn_grad_apply(void *gx, const void *x, const void *y, const void *gy, const int s[4],
                        int relu, float gscale, const float *center, const float *scale,
                        const float *a, const float *b, int threads)
{
    size_t c = (size_t)s[1], rows = (size_t)s[0] * s[2] * s[3];
    double *wide = widen_coeffs(center, scale, a, b, c);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t k = 0; k < APPLY_PARTS; k++) {
        float *t = tile16_new(c), *tx = t, *tg = t + TILE16 * c, *ty = relu ? t + 2 * TILE16 * c : tx;
        size_t r1 = rows * (k + 1) / APPLY_PARTS;
        for (size_t t0 = rows * k / APPLY_PARTS; t0 < r1; t0 += TILE16) {
            size_t n = r1 - t0 < TILE16 ? r1 - t0 : TILE16;
            rows16(tx, x, t0, n, c);
            rows16(tg, gy, t0, n, c);
            if (relu)
                rows16(ty, y, t0, n, c);
            apply_rows(tg, tx, ty, tg, 0, n, (int)c, relu, gscale, wide);
            pack_run(BK_HALF_BF16, (uint16_t *)gx + t0 * c, tg, n * c);
        }
        free(t);
    }
    free(wide);
}

void hk_chan_axpb(void *y, const void *x, const int s[4], const float *center, const float *a,
                  const float *b, int nhwc, int threads)
{
    float *py = y;
    const float *px = x;
    size_t total = (size_t)s[0] * s[1] * s[2] * s[3], hw = (size_t)s[2] * s[3];
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t i = 0; i < total; i++) {
        size_t ch = nhwc ? i % (size_t)s[1] : (i / hw) % (size_t)s[1];
        py[i] = (float)((double)py[i] + (double)a[ch] * ((double)px[i] - center[ch]) + b[ch]);
    }
}
