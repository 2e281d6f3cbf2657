/* wino_ref — the scalar kernels of Winograd F(2x2, 3x3) (wino.h): the
 * reference whose bits the vector kernels reproduce, and the kernels of a
 * CPU without AVX-512 (DDPIPE_CONV_ALGO=winograd). The transforms are
 * additions in the order written here; the products fmaf chains (bf16:
 * VDPBF16PS's arithmetic, wino.h), the weight gradient's over the tiles. */
#include <math.h>
#include <stdint.h>

#include "gpud/cpu/wino.h"
#include "gpud/half_bits.h"

/* Point p of channel ch of row r: where it goes in v (fp32 or bf16). */
static void put(void *v, int esz, size_t at, float val)
{
    if (esz == 4)
        ((float *)v)[at] = val;
    else
        ((uint16_t *)v)[at] = wino_bf16(val);
}

/* Value i of an activation x (or gy): fp32, or bf16 (s->x16) */
static float x_at(const wino_geom_t *s, const void *x, size_t i)
{
    return s->x16 ? bf16_unpack(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

static void ref_transform_in(const wino_geom_t *s, const void *x, long t0, int nr, void *v,
                             size_t xs, int esz)
{
    for (int r = 0; r < WINO_ROWS; r++) {
        int img = 0, y0 = 0, x0 = 0;
        if (r < nr)
            wino_tile_at(s, t0 + r, &img, &y0, &x0);
        for (int ch = 0; ch < s->c; ch++) {
            float d[4][4], t[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) {
                    int yy = y0 + i - s->pad_h, xx = x0 + j - s->pad_w;
                    d[i][j] = r < nr && yy >= 0 && yy < s->h && xx >= 0 && xx < s->w
                                  ? x_at(s, x, (((size_t)img * s->h + yy) * s->w + xx) * s->c + ch)
                                  : 0.0f;
                }
            for (int j = 0; j < 4; j++) {   /* B^T d */
                t[0][j] = d[0][j] - d[2][j];
                t[1][j] = d[1][j] + d[2][j];
                t[2][j] = d[2][j] - d[1][j];
                t[3][j] = d[1][j] - d[3][j];
            }
            /* fp32: [c][14]; bf16: channel pairs, [c / 2][14][2] */
            size_t o = esz == 4 ? (size_t)ch * WINO_ROWS + r
                                : (size_t)(ch / 2) * 2 * WINO_ROWS + 2 * r + ch % 2;
            for (int i = 0; i < 4; i++) {   /* (B^T d) B */
                put(v, esz, o + (size_t)(i * 4 + 0) * xs, t[i][0] - t[i][2]);
                put(v, esz, o + (size_t)(i * 4 + 1) * xs, t[i][1] + t[i][2]);
                put(v, esz, o + (size_t)(i * 4 + 2) * xs, t[i][2] - t[i][1]);
                put(v, esz, o + (size_t)(i * 4 + 3) * xs, t[i][1] - t[i][3]);
            }
        }
    }
}

static void ref_in(const wino_geom_t *s, const void *x, long t0, int nr, void *v, size_t xs)
{
    ref_transform_in(s, x, t0, nr, v, xs, 4);
}

static void ref_in_bf16(const wino_geom_t *s, const void *x, long t0, int nr, void *v,
                        size_t xs)
{
    ref_transform_in(s, x, t0, nr, v, xs, 2);
}

static void ref_gemm(const void *vv, const void *uv, int c, int pw, float *m, int ldm)
{
    const float *v = vv, *u = uv;
    for (int r = 0; r < WINO_ROWS; r++)
        for (int j = 0; j < pw; j++) {
            float acc = 0.0f;
            for (int ch = 0; ch < c; ch++)
                acc = fmaf(v[(size_t)ch * WINO_ROWS + r], u[(size_t)ch * pw + j], acc);
            m[(size_t)r * ldm + j] = acc;
        }
}

/* A denormal result as zero of its sign (VDPBF16PS's FTZ). */
static float ftz(float f)
{
    return fpclassify(f) == FP_SUBNORMAL ? copysignf(0.0f, f) : f;
}

/* VDPBF16PS pair by pair: acc + the odd channel's product, then + the even
 * one's, each sum rounded (the products of bf16 values are exact). This
 * order is Intel's definition of the instruction and what Zen 5 computes
 * (checked bit for bit); test_wino compares the two wherever it runs. */
static void ref_gemm_bf16(const void *vv, const void *uv, int c, int pw, float *m, int ldm)
{
    const uint16_t *v = vv, *u = uv;
    for (int r = 0; r < WINO_ROWS; r++)
        for (int j = 0; j < pw; j++) {
            float acc = 0.0f;
            for (int c2 = 0; c2 < c / 2; c2++) {
                const uint16_t *a = v + (size_t)c2 * 2 * WINO_ROWS + 2 * r;
                const uint16_t *b = u + ((size_t)c2 * pw + j) * 2;
                float odd = bf16_unpack(a[1]) * bf16_unpack(b[1]),
                      even = bf16_unpack(a[0]) * bf16_unpack(b[0]);
                acc = ftz(acc + ftz(odd));
                acc = ftz(acc + ftz(even));
            }
            m[(size_t)r * ldm + j] = acc;
        }
}

/* The post-ops of one value whose residual is *res: ReLU as max(0, v)
 * with NaN kept (the vector kernels' _mm512_max_ps(0, v)). */
static float post_ops(const bk_post_t *post, float v, float res)
{
    for (int i = 0; i < post->n; i++)
        v = post->op[i] == BK_PO_RELU ? (0.0f > v ? 0.0f : v) : v + res;
    return v;
}

static void ref_out(const wino_geom_t *s, const float *m, size_t xs, long t, const float *bias,
                    void *yv)
{
    int img, y0, x0;
    wino_tile_at(s, t, &img, &y0, &x0);
    for (int o = 0; o < s->k; o++) {
        float a[4][4], q[2][4], r[2][2];
        for (int p = 0; p < 16; p++)
            a[p / 4][p % 4] = m[(size_t)p * xs + o];
        for (int j = 0; j < 4; j++) {   /* A^T a */
            q[0][j] = a[0][j] + a[1][j] + a[2][j];
            q[1][j] = a[1][j] - a[2][j] - a[3][j];
        }
        for (int i = 0; i < 2; i++) {   /* (A^T a) A */
            r[i][0] = q[i][0] + q[i][1] + q[i][2];
            r[i][1] = q[i][1] - q[i][2] - q[i][3];
        }
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                if (y0 + i >= s->oh || x0 + j >= s->ow)
                    continue;
                size_t at = (((size_t)img * s->oh + y0 + i) * s->ow + x0 + j) * s->k + o;
                float v = bias ? r[i][j] + bias[o] : r[i][j];
                if (s->y16) {
                    ((uint16_t *)yv)[at] = bf16_pack(post_ops(&s->post, v, 0.0f));
                } else {
                    float *d = (float *)yv + at;
                    *d = post_ops(&s->post, v, *d);
                }
            }
    }
}

/* ------------------------------------------------- the weight gradient */

/* The 16 points of channel ch of tile t (zero past s->ntiles). */
static void tile_points(const wino_geom_t *s, const void *x, long t, int ch, float pt[16])
{
    float d[4][4], q[4][4];
    long off[16];
    if (t < s->ntiles)
        wino_tile_pixels(s, t, off);
    for (int i = 0; i < 16; i++)
        d[i / 4][i % 4] = t < s->ntiles && off[i] >= 0 ? x_at(s, x, (size_t)off[i] + ch) : 0.0f;
    for (int j = 0; j < 4; j++) {   /* B^T d, as ref_transform_in */
        q[0][j] = d[0][j] - d[2][j];
        q[1][j] = d[1][j] + d[2][j];
        q[2][j] = d[2][j] - d[1][j];
        q[3][j] = d[1][j] - d[3][j];
    }
    for (int i = 0; i < 4; i++) {
        pt[i * 4 + 0] = q[i][0] - q[i][2];
        pt[i * 4 + 1] = q[i][1] + q[i][2];
        pt[i * 4 + 2] = q[i][2] - q[i][1];
        pt[i * 4 + 3] = q[i][1] - q[i][3];
    }
}

/* A g A^T of channel o of tile t's 2x2 output gradient (zero past the
 * output, past s->ntiles): per column a = A g (g0, g0 + g1, g0 - g1,
 * 0 - g1), then the same along the rows. */
static void gy_points(const wino_geom_t *s, const void *gy, long t, int o, float pt[16])
{
    float g[2][2] = {{0}}, a[4][2];
    if (t < s->ntiles) {
        int img, y0, x0;
        wino_tile_at(s, t, &img, &y0, &x0);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                if (y0 + i < s->oh && x0 + j < s->ow) {
                    size_t at = (((size_t)img * s->oh + y0 + i) * s->ow + x0 + j) * s->k + o;
                    g[i][j] = x_at(s, gy, at);
                }
    }
    for (int j = 0; j < 2; j++) {
        a[0][j] = g[0][j];
        a[1][j] = g[0][j] + g[1][j];
        a[2][j] = g[0][j] - g[1][j];
        a[3][j] = 0.0f - g[1][j];   /* not -g: +0 for 0, as the vector kernels' */
    }
    for (int i = 0; i < 4; i++) {
        pt[i * 4 + 0] = a[i][0];
        pt[i * 4 + 1] = a[i][0] + a[i][1];
        pt[i * 4 + 2] = a[i][0] - a[i][1];
        pt[i * 4 + 3] = 0.0f - a[i][1];
    }
}

/* The tiles t0.. (nt), gy's points or x's: fp32 a tile a row, bf16 in
 * pairs (wino.h). */
static void tiles(const wino_geom_t *s, const void *src, int gy, long t0, int nt, void *v,
                  size_t ps, int esz)
{
    int nch = gy ? s->k : s->c;
    for (int i = 0; i < nt; i++)
        for (int ch = 0; ch < nch; ch++) {
            float pt[16];
            if (gy)
                gy_points(s, src, t0 + i, ch, pt);
            else
                tile_points(s, src, t0 + i, ch, pt);
            size_t at = esz == 4 ? (size_t)i * nch + ch
                                 : (size_t)(i / 2) * 2 * nch + 2 * ch + i % 2;
            for (int p = 0; p < 16; p++)
                put(v, esz, p * ps + at, pt[p]);
        }
}

static void ref_tiles_in(const wino_geom_t *s, const void *x, long t0, int nt, void *v,
                         size_t ps)
{
    tiles(s, x, 0, t0, nt, v, ps, 4);
}

static void ref_tiles_gy(const wino_geom_t *s, const void *gy, long t0, int nt, void *v,
                         size_t ps)
{
    tiles(s, gy, 1, t0, nt, v, ps, 4);
}

static void ref_pair_in(const wino_geom_t *s, const void *x, long t0, int nt, void *v, size_t ps)
{
    tiles(s, x, 0, t0, nt, v, ps, 2);
}

static void ref_pair_gy(const wino_geom_t *s, const void *gy, long t0, int nt, void *v, size_t ps)
{
    tiles(s, gy, 1, t0, nt, v, ps, 2);
}

/* fp32: one fmaf a tile, in tile order. */
static void ref_wgemm(const void *gmv, const void *vv, int nt, int k, int c, float *gu,
                      int first)
{
    const float *gm = gmv, *v = vv;
    for (int o = 0; o < k; o++)
        for (int ch = 0; ch < c; ch++) {
            float acc = first ? 0.0f : gu[(size_t)o * c + ch];
            for (int t = 0; t < nt; t++)
                acc = fmaf(gm[(size_t)t * k + o], v[(size_t)t * c + ch], acc);
            gu[(size_t)o * c + ch] = acc;
        }
}

static void ref_wgemm_bf16(const void *gmv, const void *vv, int nt, int k, int c, float *gu,
                           int first)
{
    const uint16_t *gm = gmv, *v = vv;
    for (int o = 0; o < k; o++)
        for (int ch = 0; ch < c; ch++) {
            float acc = first ? 0.0f : gu[(size_t)o * c + ch];
            for (int t2 = 0; t2 < nt / 2; t2++) {
                const uint16_t *a = gm + ((size_t)t2 * k + o) * 2, *b = v + ((size_t)t2 * c + ch) * 2;
                float odd = bf16_unpack(a[1]) * bf16_unpack(b[1]),
                      even = bf16_unpack(a[0]) * bf16_unpack(b[0]);
                acc = ftz(acc + ftz(odd));
                acc = ftz(acc + ftz(even));
            }
            gu[(size_t)o * c + ch] = acc;
        }
}

const wino_kern_t WINO_REF = {.name = "scalar",
                              .esz = 4,
                              .in = ref_in,
                              .gemm = ref_gemm,
                              .out = ref_out,
                              .wg_in = ref_tiles_in,
                              .wg_gy = ref_tiles_gy,
                              .wgemm = ref_wgemm};
const wino_kern_t WINO_REF_BF16 = {.name = "scalar bf16",
                                   .esz = 2,
                                   .in = ref_in_bf16,
                                   .gemm = ref_gemm_bf16,
                                   .out = ref_out,
                                   .wg_in = ref_pair_in,
                                   .wg_gy = ref_pair_gy,
                                   .wgemm = ref_wgemm_bf16};
