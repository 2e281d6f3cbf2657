/* wino_avx512 — the AVX-512 kernels of Winograd F(2x2, 3x3) (wino.h), the
 * bits of wino_ref.c's: the same additions in the same order, 16 channels
 * a vector; the products as one FMA chain per output element.
 *
 * The GEMM micro-kernel is 14 rows (tiles) x 32 output channels: 28
 * accumulators, two weight vectors and a broadcast in the 32 registers;
 * per input channel 2 loads and 14 broadcasts (embedded in the FMAs) feed
 * 28 FMAs. Its rows are the group's tiles, packed channel-major ([c][14],
 * wino.h), so the broadcasts are one stream at immediate offsets: the
 * input transform makes them with a 16x16 transpose in registers.
 *
 * The weight gradient (wino_wgrad.c) in fp32: the tiles' transforms a
 * tile a row, then 8 x 32 blocks of gU over the tiles, one FMA a tile.
 *
 * The bf16 kernels (avx512_bf16): the same input transform, its values
 * rounded by VCVTNEPS2BF16 and stored in channel pairs; the micro-kernel
 * the same 14 x 32 with VDPBF16PS, one broadcast pair of channels a row,
 * half the instructions per channel; the output transform fp32's. */
#include "gpud/cpu/wino.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>
#include <stdint.h>

#define AVX512 __attribute__((target("avx512f")))
#define AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define INLINE static inline __attribute__((always_inline))

/* r[i] = column i of the 16x16 matrix whose rows were r[0..15]. */
AVX512 INLINE void transpose16(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int q = 0; q < 4; q++) {
        t[q + 0] = _mm512_shuffle_f32x4(r[q], r[4 + q], 0x88);
        t[q + 4] = _mm512_shuffle_f32x4(r[q], r[4 + q], 0xDD);
        t[q + 8] = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0x88);
        t[q + 12] = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0xDD);
    }
    for (int q = 0; q < 4; q++) {
        r[q + 0] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0x88);
        r[q + 8] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0xDD);
        r[q + 4] = _mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0x88);
        r[q + 12] = _mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0xDD);
    }
}

/* 16 channels of x from element i: fp32, or bf16 (x16) widened exactly. */
AVX512 INLINE __m512 load16(const void *x, long i, int x16)
{
    if (!x16)
        return _mm512_loadu_ps((const float *)x + i);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)x + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The 16 points of one tile's 16 channels from channel ch0 of x (its pixels
 * at off). */
AVX512 INLINE void in_tile(const void *x, int x16, int ch0, const long off[16], __m512 pt[16])
{
    __m512 d[4][4], q[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            d[i][j] = off[i * 4 + j] >= 0 ? load16(x, off[i * 4 + j] + ch0, x16)
                                          : _mm512_setzero_ps();
    for (int j = 0; j < 4; j++) {
        q[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
        q[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
        q[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
        q[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
    }
    for (int i = 0; i < 4; i++) {
        pt[i * 4 + 0] = _mm512_sub_ps(q[i][0], q[i][2]);
        pt[i * 4 + 1] = _mm512_add_ps(q[i][1], q[i][2]);
        pt[i * 4 + 2] = _mm512_sub_ps(q[i][2], q[i][1]);
        pt[i * 4 + 3] = _mm512_sub_ps(q[i][1], q[i][3]);
    }
}

/* The group's tiles' 16 points of channels ch0..ch0+15, transposed: col[p][ch]
 * holds channel ch's 16 rows (nr.. zero) of point p. */
AVX512 INLINE void chunk_points(const void *x, int x16, const long off[][16], int nr, int ch0,
                                __m512 col[16][16])
{
    for (int r = 0; r < nr; r++) {
        __m512 pt[16];
        in_tile(x, x16, ch0, off[r], pt);
        for (int p = 0; p < 16; p++)
            col[p][r] = pt[p];
    }
    for (int r = nr; r < 16; r++)
        for (int p = 0; p < 16; p++)
            col[p][r] = _mm512_setzero_ps();
    for (int p = 0; p < 16; p++)
        transpose16(col[p]);
}

AVX512 static void avx_in(const wino_geom_t *s, const void *x, long t0, int nr, void *vv,
                          size_t xs)
{
    const __mmask16 rows = (__mmask16)((1u << WINO_ROWS) - 1);
    long off[WINO_ROWS][16];
    for (int r = 0; r < nr; r++)
        wino_tile_pixels(s, t0 + r, off[r]);
    for (int ch0 = 0; ch0 < s->c; ch0 += 16) {
        __m512 col[16][16];
        chunk_points(x, 0, (const long(*)[16])off, nr, ch0, col);   /* x16: not fp32's */
        for (int p = 0; p < 16; p++) {
            float *o = (float *)vv + (size_t)p * xs + (size_t)ch0 * WINO_ROWS;
            for (int ch = 0; ch < 16; ch++)
                _mm512_mask_storeu_ps(o + ch * WINO_ROWS, rows, col[p][ch]);
        }
    }
}

/* VPERMW's index: 16 even values (low half) and 16 odd ones (high)
 * interleaved into 16 (even, odd) pairs. */
AVX512BF16 INLINE __m512i pair_index(void)
{
    return _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                            22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
}

/* bf16: each channel pair's rows rounded (VCVTNE2PS2BF16: the even channel's
 * 16 in the low half, the odd's in the high) and interleaved into 14
 * (even, odd) pairs (VPERMW). x fp32, or bf16 (x16). */
AVX512BF16 INLINE void in_bf16(const wino_geom_t *s, const void *x, int x16, long t0, int nr,
                               void *vv, size_t xs)
{
    const __mmask16 rows = (__mmask16)((1u << WINO_ROWS) - 1);
    const __m512i pairs = pair_index();
    long off[WINO_ROWS][16];
    for (int r = 0; r < nr; r++)
        wino_tile_pixels(s, t0 + r, off[r]);
    for (int ch0 = 0; ch0 < s->c; ch0 += 16) {
        __m512 col[16][16];
        chunk_points(x, x16, (const long(*)[16])off, nr, ch0, col);
        for (int p = 0; p < 16; p++) {
            uint16_t *o = (uint16_t *)vv + (size_t)p * xs + (size_t)ch0 * WINO_ROWS;
            for (int ch = 0; ch < 16; ch += 2) {
                __m512i h = (__m512i)_mm512_cvtne2ps_pbh(col[p][ch + 1], col[p][ch]);
                _mm512_mask_storeu_epi32(o + ch * WINO_ROWS, rows,
                                         _mm512_permutexvar_epi16(pairs, h));
            }
        }
    }
}

AVX512BF16 static void avx_in_bf16(const wino_geom_t *s, const void *x, long t0, int nr,
                                   void *vv, size_t xs)
{
    if (s->x16)
        in_bf16(s, x, 1, t0, nr, vv, xs);
    else
        in_bf16(s, x, 0, t0, nr, vv, xs);
}

/* 14 rows x (16 * NV) columns over c channels. */
AVX512 INLINE void gemm_rows(const float *v, const float *u, int c, float *m, int ldm, int nv)
{
    __m512 acc[WINO_ROWS][2];
    for (int r = 0; r < WINO_ROWS; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const int pw = 16 * nv;
    for (int ch = 0; ch < c; ch++, v += WINO_ROWS, u += pw) {
        __m512 u0 = _mm512_loadu_ps(u);
        __m512 u1 = nv > 1 ? _mm512_loadu_ps(u + 16) : u0;
#pragma GCC unroll 14
        for (int r = 0; r < WINO_ROWS; r++) {
            __m512 b = _mm512_set1_ps(v[r]);
            acc[r][0] = _mm512_fmadd_ps(b, u0, acc[r][0]);
            if (nv > 1)
                acc[r][1] = _mm512_fmadd_ps(b, u1, acc[r][1]);
        }
    }
    for (int r = 0; r < WINO_ROWS; r++) {
        _mm512_storeu_ps(m + (size_t)r * ldm, acc[r][0]);
        if (nv > 1)
            _mm512_storeu_ps(m + (size_t)r * ldm + 16, acc[r][1]);
    }
}

AVX512 static void avx_gemm(const void *v, const void *u, int c, int pw, float *m, int ldm)
{
    if (pw == 32)
        gemm_rows(v, u, c, m, ldm, 2);
    else
        gemm_rows(v, u, c, m, ldm, 1);
}

/* bf16: 14 rows x (16 * NV) columns over c channels, a pair at a time:
 * v [c / 2][14] pairs, u [c / 2][16 * nv] pairs. */
AVX512BF16 INLINE void gemm_rows_bf16(const uint32_t *v, const uint16_t *u, int c, float *m,
                                      int ldm, int nv)
{
    __m512 acc[WINO_ROWS][2];
    for (int r = 0; r < WINO_ROWS; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const int pw = 16 * nv;
    for (int c2 = 0; c2 < c / 2; c2++, v += WINO_ROWS, u += 2 * pw) {
        __m512bh u0 = (__m512bh)_mm512_loadu_si512(u);
        __m512bh u1 = nv > 1 ? (__m512bh)_mm512_loadu_si512(u + 32) : u0;
#pragma GCC unroll 14
        for (int r = 0; r < WINO_ROWS; r++) {
            __m512bh b = (__m512bh)_mm512_set1_epi32((int)v[r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], b, u0);
            if (nv > 1)
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], b, u1);
        }
    }
    for (int r = 0; r < WINO_ROWS; r++) {
        _mm512_storeu_ps(m + (size_t)r * ldm, acc[r][0]);
        if (nv > 1)
            _mm512_storeu_ps(m + (size_t)r * ldm + 16, acc[r][1]);
    }
}

AVX512BF16 static void avx_gemm_bf16(const void *v, const void *u, int c, int pw, float *m,
                                     int ldm)
{
    if (pw == 32)
        gemm_rows_bf16(v, u, c, m, ldm, 2);
    else
        gemm_rows_bf16(v, u, c, m, ldm, 1);
}

/* val rounded to bf16 as bf16_pack rounds it (gpud/half_bits.h: to nearest
 * even, a NaN to 0xffff), stored at d. */
AVX512 INLINE void store_bf16(uint16_t *d, __m512 val)
{
    __m512i u = _mm512_castps_si512(val);
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
                         _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))),
        16);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0xffff));
    _mm256_storeu_si256((__m256i *)d, _mm512_cvtepi32_epi16(r));
}

AVX512 static void avx_out(const wino_geom_t *s, const float *m, size_t xs, long t,
                           const float *bias, void *y)
{
    int img, y0, x0;
    wino_tile_at(s, t, &img, &y0, &x0);
    const __m512 zero = _mm512_setzero_ps();
    for (int o = 0; o < s->k; o += 16) {
        __m512 a[16], q[2][4], r[4];
        for (int p = 0; p < 16; p++)
            a[p] = _mm512_loadu_ps(m + (size_t)p * xs + o);
        for (int j = 0; j < 4; j++) {
            q[0][j] = _mm512_add_ps(_mm512_add_ps(a[j], a[4 + j]), a[8 + j]);
            q[1][j] = _mm512_sub_ps(_mm512_sub_ps(a[4 + j], a[8 + j]), a[12 + j]);
        }
        for (int i = 0; i < 2; i++) {
            r[i * 2 + 0] = _mm512_add_ps(_mm512_add_ps(q[i][0], q[i][1]), q[i][2]);
            r[i * 2 + 1] = _mm512_sub_ps(_mm512_sub_ps(q[i][1], q[i][2]), q[i][3]);
        }
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                if (y0 + i >= s->oh || x0 + j >= s->ow)
                    continue;
                size_t at = (((size_t)img * s->oh + y0 + i) * s->ow + x0 + j) * s->k + o;
                __m512 val = r[i * 2 + j];
                if (bias)
                    val = _mm512_add_ps(val, _mm512_loadu_ps(bias + o));
                if (s->y16) {   /* a SUM adds 0 here, as wino_ref.c's (wino.h: none) */
                    for (int p = 0; p < s->post.n; p++)
                        val = s->post.op[p] == BK_PO_RELU ? _mm512_max_ps(zero, val)
                                                          : _mm512_add_ps(val, zero);
                    store_bf16((uint16_t *)y + at, val);
                    continue;
                }
                float *d = (float *)y + at;
                for (int p = 0; p < s->post.n; p++)
                    val = s->post.op[p] == BK_PO_RELU ? _mm512_max_ps(zero, val)
                                                      : _mm512_add_ps(val, _mm512_loadu_ps(d));
                _mm512_storeu_ps(d, val);
            }
    }
}

/* ------------------------------------------------- the weight gradient */

/* Tiles a and a + 1's 16 points (pa, pb), rounded and paired, at o[p * ps]. */
AVX512BF16 INLINE void store_pairs(const __m512 pa[16], const __m512 pb[16], uint16_t *o,
                                   size_t ps)
{
    const __m512i idx = pair_index();
    for (int p = 0; p < 16; p++) {
        __m512i h = (__m512i)_mm512_cvtne2ps_pbh(pb[p], pa[p]);
        _mm512_storeu_si512(o + (size_t)p * ps, _mm512_permutexvar_epi16(idx, h));
    }
}

/* A g A^T of 16 channels from ch0 of tile t (wino_ref.c's gy_points). */
AVX512 INLINE void gy_tile(const wino_geom_t *s, const void *gy, int x16, long t, int o0,
                               __m512 pt[16])
{
    __m512 g[2][2], a[4][2];
    int img, y0, x0;
    wino_tile_at(s, t, &img, &y0, &x0);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            g[i][j] = y0 + i < s->oh && x0 + j < s->ow
                          ? load16(gy, (long)((((size_t)img * s->oh + y0 + i) * s->ow + x0 + j) *
                                              s->k) + o0, x16)
                          : _mm512_setzero_ps();
    const __m512 zero = _mm512_setzero_ps();
    for (int j = 0; j < 2; j++) {
        a[0][j] = g[0][j];
        a[1][j] = _mm512_add_ps(g[0][j], g[1][j]);
        a[2][j] = _mm512_sub_ps(g[0][j], g[1][j]);
        a[3][j] = _mm512_sub_ps(zero, g[1][j]);
    }
    for (int i = 0; i < 4; i++) {
        pt[i * 4 + 0] = a[i][0];
        pt[i * 4 + 1] = _mm512_add_ps(a[i][0], a[i][1]);
        pt[i * 4 + 2] = _mm512_sub_ps(a[i][0], a[i][1]);
        pt[i * 4 + 3] = _mm512_sub_ps(zero, a[i][1]);
    }
}

/* The weight gradient's 16 points of tile t's 16 channels from ch0: gy's
 * (gy_tile) or x's (in_tile, the tile's pixels at off), zero past
 * s->ntiles. */
AVX512 INLINE void wg_tile(const wino_geom_t *s, const void *src, int x16, int gy, long t,
                           const long off[16], int ch0, __m512 pt[16])
{
    if (t >= s->ntiles)
        for (int p = 0; p < 16; p++)
            pt[p] = _mm512_setzero_ps();
    else if (gy)
        gy_tile(s, src, x16, t, ch0, pt);
    else
        in_tile(src, x16, ch0, off, pt);
}

/* The tiles t0.. (nt, even) in pairs: gy's points (A gy A^T, s->k
 * channels) or x's (B^T d B, s->c), tiles past s->ntiles zero. */
AVX512BF16 INLINE void pairs(const wino_geom_t *s, const void *src, int x16, int gy, long t0,
                             int nt, void *v, size_t ps)
{
    int nch = gy ? s->k : s->c;
    for (int i = 0; i < nt; i += 2) {
        long off[2][16];
        for (int h = 0; h < 2; h++)
            if (t0 + i + h < s->ntiles && !gy)
                wino_tile_pixels(s, t0 + i + h, off[h]);
        for (int ch0 = 0; ch0 < nch; ch0 += 16) {
            __m512 pt[2][16];
            for (int h = 0; h < 2; h++)
                wg_tile(s, src, x16, gy, t0 + i + h, off[h], ch0, pt[h]);
            store_pairs(pt[0], pt[1], (uint16_t *)v + (size_t)(i / 2) * 2 * nch + 2 * ch0, ps);
        }
    }
}

AVX512BF16 static void avx_pair_in(const wino_geom_t *s, const void *x, long t0, int nt,
                                   void *v, size_t ps)
{
    if (s->x16)
        pairs(s, x, 1, 0, t0, nt, v, ps);
    else
        pairs(s, x, 0, 0, t0, nt, v, ps);
}

AVX512BF16 static void avx_pair_gy(const wino_geom_t *s, const void *gy, long t0, int nt,
                                   void *v, size_t ps)
{
    if (s->x16)
        pairs(s, gy, 1, 1, t0, nt, v, ps);
    else
        pairs(s, gy, 0, 1, t0, nt, v, ps);
}

/* 16 output channels (a broadcast pair of tiles each) x 16 input channels
 * (a vector of pairs) a block: 16 accumulators, one load and 16 broadcasts
 * per 16 VDPBF16PS. */
AVX512BF16 static void avx_wgemm_bf16(const void *gmv, const void *vv, int nt, int k, int c,
                                      float *gu, int first)
{
    const uint32_t *gm = gmv;
    const uint16_t *v = vv;
    const int np = nt / 2;
    for (int o0 = 0; o0 < k; o0 += 16)
        for (int c0 = 0; c0 < c; c0 += 16) {
            __m512 acc[16];
            float *out = gu + (size_t)o0 * c + c0;
            for (int r = 0; r < 16; r++)
                acc[r] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + (size_t)r * c);
            for (int t2 = 0; t2 < np; t2++) {
                __m512bh b = (__m512bh)_mm512_loadu_si512(v + ((size_t)t2 * c + c0) * 2);
                const uint32_t *g = gm + (size_t)t2 * k + o0;
#pragma GCC unroll 16
                for (int r = 0; r < 16; r++)
                    acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_set1_epi32((int)g[r]), b);
            }
            for (int r = 0; r < 16; r++)
                _mm512_storeu_ps(out + (size_t)r * c, acc[r]);
        }
}

/* fp32: the tiles t0.. (nt) a row each, gy's points or x's, 16 channels a
 * store (wino.h). */
AVX512 static void tiles_f32(const wino_geom_t *s, const void *src, int gy, long t0, int nt,
                             float *v, size_t ps)
{
    int nch = gy ? s->k : s->c;
    for (int i = 0; i < nt; i++) {
        long off[16];
        if (t0 + i < s->ntiles && !gy)
            wino_tile_pixels(s, t0 + i, off);
        for (int ch0 = 0; ch0 < nch; ch0 += 16) {
            __m512 pt[16];
            wg_tile(s, src, 0, gy, t0 + i, off, ch0, pt);
            for (int p = 0; p < 16; p++)
                _mm512_storeu_ps(v + (size_t)p * ps + (size_t)i * nch + ch0, pt[p]);
        }
    }
}

AVX512 static void avx_tiles_in(const wino_geom_t *s, const void *x, long t0, int nt, void *v,
                                size_t ps)
{
    tiles_f32(s, x, 0, t0, nt, v, ps);
}

AVX512 static void avx_tiles_gy(const wino_geom_t *s, const void *gy, long t0, int nt, void *v,
                                size_t ps)
{
    tiles_f32(s, gy, 1, t0, nt, v, ps);
}

/* fp32: 8 output channels (a broadcast each) x 16 * NV input channels a
 * block, over the tiles in order: 8 * NV accumulators, NV loads and 8
 * broadcasts per 8 * NV FMAs. The blocks' rows walk the output channels
 * outside their columns, so a block's 8 columns of gm (32 bytes a tile)
 * stay in L1 while v's columns stream. */
AVX512 INLINE void wgemm_block(const float *gm, const float *v, int nt, int k, int c, float *out,
                               int first, int nv)
{
    __m512 acc[8][2];
    for (int r = 0; r < 8; r++)
        for (int j = 0; j < nv; j++)
            acc[r][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + (size_t)r * c + 16 * j);
    for (int t = 0; t < nt; t++, gm += k, v += c) {
        __m512 b0 = _mm512_loadu_ps(v);
        __m512 b1 = nv > 1 ? _mm512_loadu_ps(v + 16) : b0;
#pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            __m512 a = _mm512_set1_ps(gm[r]);
            acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
            if (nv > 1)
                acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < 8; r++)
        for (int j = 0; j < nv; j++)
            _mm512_storeu_ps(out + (size_t)r * c + 16 * j, acc[r][j]);
}

AVX512 static void avx_wgemm(const void *gmv, const void *vv, int nt, int k, int c, float *gu,
                             int first)
{
    const float *gm = gmv, *v = vv;
    for (int o0 = 0; o0 < k; o0 += 8)
        for (int c0 = 0; c0 < c; c0 += 32) {
            float *out = gu + (size_t)o0 * c + c0;
            if (c - c0 >= 32)
                wgemm_block(gm + o0, v + c0, nt, k, c, out, first, 2);
            else
                wgemm_block(gm + o0, v + c0, nt, k, c, out, first, 1);
        }
}

static const wino_kern_t avx512 = {.name = "avx512",
                                   .esz = 4,
                                   .in = avx_in,
                                   .gemm = avx_gemm,
                                   .out = avx_out,
                                   .wg_in = avx_tiles_in,
                                   .wg_gy = avx_tiles_gy,
                                   .wgemm = avx_wgemm};
static const wino_kern_t avx512_bf16 = {.name = "avx512_bf16",
                                        .esz = 2,
                                        .in = avx_in_bf16,
                                        .gemm = avx_gemm_bf16,
                                        .out = avx_out,
                                        .wg_in = avx_pair_in,
                                        .wg_gy = avx_pair_gy,
                                        .wgemm = avx_wgemm_bf16};
const wino_kern_t *const WINO_AVX512 = &avx512;
const wino_kern_t *const WINO_AVX512_BF16 = &avx512_bf16;

#else

const wino_kern_t *const WINO_AVX512 = NULL;
const wino_kern_t *const WINO_AVX512_BF16 = NULL;

#endif
