/* wino_avx2 — the AVX2 + FMA kernels of Winograd F(2x2, 3x3) (wino.h), the
 * bits of wino_ref.c's: the same additions in the same order, 8 channels a
 * vector; the products as one FMA chain per output element.
 *
 * 16 ymm registers: the GEMM takes a group's 14 rows in passes of 5, 5 and
 * 4 rows by 16 output channels (up to 10 accumulators, two weight vectors
 * and a broadcast); 8 independent FMA chains at least per pass, enough
 * for two FMA units of 4 cycles' latency. The input transform packs the
 * rows channel-major ([c][14], wino.h) with 8x8 transposes in registers.
 * The weight gradient (wino_wgrad.c): the tiles' transforms a tile a row,
 * then 4 x 16 blocks of gU over the tiles, one FMA a tile. */
#include "gpud/cpu/wino.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

/* r[i] = column i of the 8x8 matrix whose rows were r[0..7]. */
AVX2 INLINE void transpose8(__m256 r[8])
{
    __m256 t[8], q[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        q[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        q[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        q[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        q[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* q[4i + j]: column j (low half) and 4 + j (high half) of rows 4i.. */
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(q[j], q[4 + j], 0x20);
        r[4 + j] = _mm256_permute2f128_ps(q[j], q[4 + j], 0x31);
    }
}

/* The 16 points of one tile's 8 channels from x (its pixels at off). */
AVX2 INLINE void in_tile(const float *x, const long off[16], __m256 pt[16])
{
    __m256 d[4][4], q[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            d[i][j] = off[i * 4 + j] >= 0 ? _mm256_loadu_ps(x + off[i * 4 + j])
                                          : _mm256_setzero_ps();
    for (int j = 0; j < 4; j++) {
        q[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
        q[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
        q[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
        q[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
    }
    for (int i = 0; i < 4; i++) {
        pt[i * 4 + 0] = _mm256_sub_ps(q[i][0], q[i][2]);
        pt[i * 4 + 1] = _mm256_add_ps(q[i][1], q[i][2]);
        pt[i * 4 + 2] = _mm256_sub_ps(q[i][2], q[i][1]);
        pt[i * 4 + 3] = _mm256_sub_ps(q[i][1], q[i][3]);
    }
}

AVX2 static void avx2_in(const wino_geom_t *s, const void *xv, long t0, int nr, void *vv,
                         size_t xs)
{
    const float *x = xv;   /* fp32: s->x16 is the bf16 kernels' */
    float *v = vv;
    __m256 pts[16][16];   /* [point][row], rows nr.. zero */
    long off[WINO_ROWS][16];
    const __m256i tail = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);   /* rows 8..13 */
    for (int r = 0; r < nr; r++)
        wino_tile_pixels(s, t0 + r, off[r]);
    for (int r = nr; r < 16; r++)
        for (int p = 0; p < 16; p++)
            pts[p][r] = _mm256_setzero_ps();
    for (int ch0 = 0; ch0 < s->c; ch0 += 8) {
        for (int r = 0; r < nr; r++) {
            __m256 pt[16];
            in_tile(x + ch0, off[r], pt);
            for (int p = 0; p < 16; p++)
                pts[p][r] = pt[p];
        }
        for (int p = 0; p < 16; p++) {
            __m256 lo[8], hi[8];
            for (int r = 0; r < 8; r++) {
                lo[r] = pts[p][r];
                hi[r] = pts[p][8 + r];
            }
            transpose8(lo);
            transpose8(hi);
            float *o = v + (size_t)p * xs + (size_t)ch0 * WINO_ROWS;
            for (int ch = 0; ch < 8; ch++) {
                _mm256_storeu_ps(o + ch * WINO_ROWS, lo[ch]);
                _mm256_maskstore_ps(o + ch * WINO_ROWS + 8, tail, hi[ch]);
            }
        }
    }
}

/* rows [r0, r0 + nr) x 16 columns from j0, of a panel pw wide. */
AVX2 INLINE void gemm_pass(const float *v, const float *u, int c, int pw, float *m, int ldm,
                           int r0, int nr, int j0)
{
    __m256 acc[5][2];
    for (int r = 0; r < 5; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    v += r0;
    u += j0;
    for (int ch = 0; ch < c; ch++, v += WINO_ROWS, u += pw) {
        __m256 u0 = _mm256_loadu_ps(u), u1 = _mm256_loadu_ps(u + 8);
#pragma GCC unroll 5
        for (int r = 0; r < 5; r++) {
            if (r >= nr)
                break;
            __m256 b = _mm256_broadcast_ss(v + r);
            acc[r][0] = _mm256_fmadd_ps(b, u0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(b, u1, acc[r][1]);
        }
    }
    for (int r = 0; r < nr; r++) {
        _mm256_storeu_ps(m + (size_t)(r0 + r) * ldm + j0, acc[r][0]);
        _mm256_storeu_ps(m + (size_t)(r0 + r) * ldm + j0 + 8, acc[r][1]);
    }
}

AVX2 static void avx2_gemm(const void *v, const void *u, int c, int pw, float *m, int ldm)
{
    for (int j0 = 0; j0 < pw; j0 += 16) {
        gemm_pass(v, u, c, pw, m, ldm, 0, 5, j0);
        gemm_pass(v, u, c, pw, m, ldm, 5, 5, j0);
        gemm_pass(v, u, c, pw, m, ldm, 10, 4, j0);
    }
}

AVX2 static void avx2_out(const wino_geom_t *s, const float *m, size_t xs, long t,
                          const float *bias, void *yv)
{
    float *y = yv;   /* fp32: s->y16 is the bf16 kernels' */
    int img, y0, x0;
    wino_tile_at(s, t, &img, &y0, &x0);
    const __m256 zero = _mm256_setzero_ps();
    for (int o = 0; o < s->k; o += 8) {
        __m256 a[16], q[2][4], r[4];
        for (int p = 0; p < 16; p++)
            a[p] = _mm256_loadu_ps(m + (size_t)p * xs + o);
        for (int j = 0; j < 4; j++) {
            q[0][j] = _mm256_add_ps(_mm256_add_ps(a[j], a[4 + j]), a[8 + j]);
            q[1][j] = _mm256_sub_ps(_mm256_sub_ps(a[4 + j], a[8 + j]), a[12 + j]);
        }
        for (int i = 0; i < 2; i++) {
            r[i * 2 + 0] = _mm256_add_ps(_mm256_add_ps(q[i][0], q[i][1]), q[i][2]);
            r[i * 2 + 1] = _mm256_sub_ps(_mm256_sub_ps(q[i][1], q[i][2]), q[i][3]);
        }
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                if (y0 + i >= s->oh || x0 + j >= s->ow)
                    continue;
                float *d = y + (((size_t)img * s->oh + y0 + i) * s->ow + x0 + j) * s->k + o;
                __m256 val = r[i * 2 + j];
                if (bias)
                    val = _mm256_add_ps(val, _mm256_loadu_ps(bias + o));
                for (int p = 0; p < s->post.n; p++)
                    val = s->post.op[p] == BK_PO_RELU ? _mm256_max_ps(zero, val)
                                                      : _mm256_add_ps(val, _mm256_loadu_ps(d));
                _mm256_storeu_ps(d, val);
            }
    }
}

/* ------------------------------------------------- the weight gradient */

/* A g A^T of 8 channels of tile t from channel o0 (wino_ref.c's gy_points). */
AVX2 INLINE void gy_tile(const wino_geom_t *s, const float *gy, long t, int o0, __m256 pt[16])
{
    __m256 g[2][2], a[4][2];
    int img, y0, x0;
    wino_tile_at(s, t, &img, &y0, &x0);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            g[i][j] = y0 + i < s->oh && x0 + j < s->ow
                          ? _mm256_loadu_ps(gy + (((size_t)img * s->oh + y0 + i) * s->ow + x0 + j) *
                                                     s->k + o0)
                          : _mm256_setzero_ps();
    const __m256 zero = _mm256_setzero_ps();
    for (int j = 0; j < 2; j++) {
        a[0][j] = g[0][j];
        a[1][j] = _mm256_add_ps(g[0][j], g[1][j]);
        a[2][j] = _mm256_sub_ps(g[0][j], g[1][j]);
        a[3][j] = _mm256_sub_ps(zero, g[1][j]);
    }
    for (int i = 0; i < 4; i++) {
        pt[i * 4 + 0] = a[i][0];
        pt[i * 4 + 1] = _mm256_add_ps(a[i][0], a[i][1]);
        pt[i * 4 + 2] = _mm256_sub_ps(a[i][0], a[i][1]);
        pt[i * 4 + 3] = _mm256_sub_ps(zero, a[i][1]);
    }
}

/* The tiles t0.. (nt) a row each, gy's points or x's, 8 channels a store. */
AVX2 static void tiles_f32(const wino_geom_t *s, const float *src, int gy, long t0, int nt,
                           float *v, size_t ps)
{
    int nch = gy ? s->k : s->c;
    for (int i = 0; i < nt; i++) {
        long off[16];
        int live = t0 + i < s->ntiles;
        if (live && !gy)
            wino_tile_pixels(s, t0 + i, off);
        for (int ch0 = 0; ch0 < nch; ch0 += 8) {
            __m256 pt[16];
            if (live && gy)
                gy_tile(s, src, t0 + i, ch0, pt);
            else if (live)
                in_tile(src + ch0, off, pt);
            else
                for (int p = 0; p < 16; p++)
                    pt[p] = _mm256_setzero_ps();
            for (int p = 0; p < 16; p++)
                _mm256_storeu_ps(v + (size_t)p * ps + (size_t)i * nch + ch0, pt[p]);
        }
    }
}

AVX2 static void avx2_tiles_in(const wino_geom_t *s, const void *x, long t0, int nt, void *v,
                               size_t ps)
{
    tiles_f32(s, x, 0, t0, nt, v, ps);
}

AVX2 static void avx2_tiles_gy(const wino_geom_t *s, const void *gy, long t0, int nt, void *v,
                               size_t ps)
{
    tiles_f32(s, gy, 1, t0, nt, v, ps);
}

/* 4 output channels x 16 input channels a block over the tiles in order:
 * 8 accumulators (two FMA units of 4 cycles' latency), 2 loads and 4
 * broadcasts per 8 FMAs. */
AVX2 static void avx2_wgemm(const void *gmv, const void *vv, int nt, int k, int c, float *gu,
                            int first)
{
    for (int o0 = 0; o0 < k; o0 += 4)
        for (int c0 = 0; c0 < c; c0 += 16) {
            const float *gm = (const float *)gmv + o0, *v = (const float *)vv + c0;
            float *out = gu + (size_t)o0 * c + c0;
            __m256 acc[4][2];
            for (int r = 0; r < 4; r++)
                for (int j = 0; j < 2; j++)
                    acc[r][j] = first ? _mm256_setzero_ps()
                                      : _mm256_loadu_ps(out + (size_t)r * c + 8 * j);
            for (int t = 0; t < nt; t++, gm += k, v += c) {
                __m256 b0 = _mm256_loadu_ps(v), b1 = _mm256_loadu_ps(v + 8);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    __m256 a = _mm256_broadcast_ss(gm + r);
                    acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
                }
            }
            for (int r = 0; r < 4; r++)
                for (int j = 0; j < 2; j++)
                    _mm256_storeu_ps(out + (size_t)r * c + 8 * j, acc[r][j]);
        }
}

static const wino_kern_t avx2 = {.name = "avx2",
                                 .esz = 4,
                                 .in = avx2_in,
                                 .gemm = avx2_gemm,
                                 .out = avx2_out,
                                 .wg_in = avx2_tiles_in,
                                 .wg_gy = avx2_tiles_gy,
                                 .wgemm = avx2_wgemm};
const wino_kern_t *const WINO_AVX2 = &avx2;

#else

const wino_kern_t *const WINO_AVX2 = NULL;

#endif
