/* Winograd F(2x2, 3x3) (gpud/cpu/wino.h) against its definition:
 *   - the scalar kernels (the reference) against a direct convolution in
 *     double, + bias and post-ops, over shapes with odd sizes, padding 0, 1
 *     and 2, channel counts of one and several 32-wide panels and a 16-wide
 *     tail: within a bound of fp32 rounding;
 *   - backward data (the flipped filter, padding 2 - pad) against the
 *     transposed convolution's definition in double;
 *   - the AVX-512 and AVX2 kernels, where the CPU has them, give the
 *     reference's bits;
 *   - an output's bits depend neither on the thread count (which sizes the
 *     blocks) nor on the batch (each image alone gives the same bits);
 *   - a NaN in the input or the weights reaches the outputs it touches,
 *     through the ReLU (nothing read as 0);
 *   - the weight gradient (wino_wgrad) against its definition in double,
 *     the vector kernels against the scalar bit for bit, 1/2/3 threads
 *     bit for bit, over several chunks of tiles;
 *   - x and gy as bf16 buffers (x16, the tape's 16-bit activations) give
 *     the bits of the same values in fp32;
 *   - shapes it does not apply to are refused.
 * All of it twice: the fp32 kernels, and the bf16 ones (transformed values
 * rounded to bf16, VDPBF16PS's products: wino.h) with a bf16 bound, where
 * the avx512_bf16 kernels must give the bf16 reference's bits; the bf16
 * error is also printed beside that of autocast's direct convolution (x
 * and w rounded to bf16, exact sums) for docs/BF16.md. */
#include "gpud/cpu/wino.h"
#include "gpud/half_bits.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpud/tcheck.h"

static uint64_t s_rng = 0x2545f4914f6cdd1dull;

/* One family of kernels: its reference, its vector kernels where the CPU
 * runs them, what the plans run, its bound against the exact convolution,
 * and the largest errors seen (of the kernels; of autocast's rounding). */
typedef struct {
    const char *name;
    const wino_kern_t *ref, *vec[2], *fast;
    double bound, worst, worst_autocast;
} family_t;

static float rnd(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (float)((s_rng >> 40) & 0xffffff) / (float)0x800000 - 1.0f;
}

static float *fill(size_t n, float scale)
{
    float *a = malloc(n * sizeof *a + 64);
    REQUIRE(a, "out of memory");
    for (size_t i = 0; i < n; i++)
        a[i] = scale * rnd();
    return a;
}

static void *aligned(size_t floats)
{
    void *p = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64 + 64);
    REQUIRE(p, "out of memory");
    return p;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static int has_avx512(void)
{
    return WINO_AVX512 && __builtin_cpu_supports("avx512f");
}

static int has_avx2(void)
{
    return WINO_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
static int has_avx512(void)
{
    return 0;
}

static int has_avx2(void)
{
    return 0;
}
#endif

static int has_avx512_bf16(void)
{
    return wino_kernels_bf16() != NULL;
}

static float bf16_of(float x)
{
    return bf16_unpack(wino_bf16(x));
}

typedef struct {
    int n, c, h, w, k, pad;
} shape_t;

/* y = conv(x, w) + bias, then post, in double; res: the residual. With
 * bf16, x and w rounded to bf16 first (autocast's direct convolution, its
 * sums exact). */
static void direct(const shape_t *t, const wino_geom_t *s, const float *x, const float *w,
                   const float *bias, const float *res, double *y, double *mag, int bf16)
{
    for (int i = 0; i < t->n; i++)
        for (int oy = 0; oy < s->oh; oy++)
            for (int ox = 0; ox < s->ow; ox++)
                for (int o = 0; o < t->k; o++) {
                    double acc = bias ? bias[o] : 0.0, m = bias ? fabs(bias[o]) : 0.0;
                    for (int c = 0; c < t->c; c++)
                        for (int ky = 0; ky < 3; ky++)
                            for (int kx = 0; kx < 3; kx++) {
                                int yy = oy + ky - t->pad, xx = ox + kx - t->pad;
                                if (yy < 0 || yy >= t->h || xx < 0 || xx >= t->w)
                                    continue;
                                float a = x[(((size_t)i * t->h + yy) * t->w + xx) * t->c + c];
                                float b = w[(((size_t)o * t->c + c) * 3 + ky) * 3 + kx];
                                if (bf16)
                                    a = bf16_of(a), b = bf16_of(b);
                                acc += (double)a * b;
                                m += fabs((double)a * b);
                            }
                    size_t at = (((size_t)i * s->oh + oy) * s->ow + ox) * t->k + o;
                    for (int p = 0; p < s->post.n; p++)
                        acc = s->post.op[p] == BK_PO_RELU ? (acc > 0 ? acc : 0) : acc + res[at];
                    y[at] = acc;
                    mag[at] = m;
                }
}

/* y: fp32 holding res first, or bf16 (s->y16: no residual) */
static void run(const wino_kern_t *kn, const wino_geom_t *s, const void *u, const void *x,
                const float *bias, const float *res, void *y, int threads)
{
    size_t ny = (size_t)s->n * s->oh * s->ow * s->k;
    float *work = aligned(wino_work_floats(s, threads));
    if (!s->y16)
        memcpy(y, res, ny * sizeof(float));
    wino_conv(kn, s, u, x, bias, y, work, threads);
    free(work);
}

static const bk_post_t POSTS[] = {
    {0, {0}}, {1, {BK_PO_RELU}}, {2, {BK_PO_SUM, BK_PO_RELU}}, {2, {BK_PO_RELU, BK_PO_SUM}}};

/* The largest error of y against the exact yd, over a few ulps of the sum
 * of |terms| (the transforms' sums grow it about 4x) and of the residual. */
static double rel_error(const float *y, const double *yd, const double *yr, const double *mag,
                        const float *res, size_t ny)
{
    double worst = 0.0;
    for (size_t i = 0; i < ny; i++) {
        double err = fabs((yr ? yr[i] : y[i]) - yd[i]) / (4.0 * mag[i] + fabs(res[i]) + 1e-30);
        worst = err > worst ? err : worst;
    }
    return worst;
}

static void check_shape(family_t *f, const shape_t *t, int post_i, int with_bias)
{
    const int in[4] = {t->n, t->c, t->h, t->w};
    const int out[4] = {t->n, t->k, t->h + 2 * t->pad - 2, t->w + 2 * t->pad - 2};
    wino_geom_t s;
    REQUIRE(wino_geom(&s, in, out, t->pad, t->pad, &POSTS[post_i]) == 0,
            "geometry of %dx%dx%dx%d -> %d refused", t->n, t->c, t->h, t->w, t->k);
    size_t nx = (size_t)t->n * t->c * t->h * t->w, ny = (size_t)t->n * out[2] * out[3] * t->k;
    float *x = fill(nx, 1.0f), *w = fill((size_t)t->k * t->c * 9, 0.3f);
    float *bias = with_bias ? fill(t->k, 0.5f) : NULL, *res = fill(ny, 1.0f);
    float *u = aligned(wino_u_floats(t->k, t->c)), *y = malloc(ny * sizeof *y);
    double *yd = malloc(ny * sizeof *yd), *mag = malloc(ny * sizeof *mag);
    REQUIRE(y && yd && mag, "out of memory");
    wino_weights(f->ref, u, w, t->k, t->c);
    run(f->ref, &s, u, x, bias, res, y, 1);
    direct(t, &s, x, w, bias, res, yd, mag, 0);
    double worst = rel_error(y, yd, NULL, mag, res, ny);
    f->worst = worst > f->worst ? worst : f->worst;
    CHECK(worst < f->bound, "%dx%dx%dx%d -> %d pad %d post %d bias %d: %s scalar vs direct %.3g",
          t->n, t->c, t->h, t->w, t->k, t->pad, post_i, with_bias, f->name, worst);
    if (f->ref->esz == 2) {   /* autocast's rounding, for comparison */
        double *yb = malloc(ny * sizeof *yb), *mb = malloc(ny * sizeof *mb);
        REQUIRE(yb && mb, "out of memory");
        direct(t, &s, x, w, bias, res, yb, mb, 1);
        double a = rel_error(NULL, yd, yb, mag, res, ny);
        f->worst_autocast = a > f->worst_autocast ? a : f->worst_autocast;
        free(yb), free(mb);
    }

    float *y2 = malloc(ny * sizeof *y2);
    REQUIRE(y2, "out of memory");
    for (int v = 0; v < 2; v++)
        if (f->vec[v]) {
            run(f->vec[v], &s, u, x, bias, res, y2, 1);
            CHECK(memcmp(y, y2, ny * sizeof *y) == 0, "%dx%dx%dx%d -> %d post %d: %s vs scalar",
                  t->n, t->c, t->h, t->w, t->k, post_i, f->vec[v]->name);
        }
    const wino_kern_t *kn = f->fast;
    for (int th = 2; th <= 3; th++) {
        run(kn, &s, u, x, bias, res, y2, th);
        CHECK(memcmp(y, y2, ny * sizeof *y) == 0, "%dx%dx%dx%d -> %d: %d threads vs 1", t->n,
              t->c, t->h, t->w, t->k, th);
    }
    /* each image alone */
    size_t px = nx / t->n, py = ny / t->n;
    const int in1[4] = {1, t->c, t->h, t->w}, out1[4] = {1, t->k, out[2], out[3]};
    wino_geom_t s1;
    REQUIRE(wino_geom(&s1, in1, out1, t->pad, t->pad, &POSTS[post_i]) == 0, "geometry of one");
    for (int i = 0; i < t->n; i++) {
        run(kn, &s1, u, x + i * px, bias, res + i * py, y2, 2);
        CHECK(memcmp(y + i * py, y2, py * sizeof *y) == 0, "%dx%dx%dx%d -> %d: image %d alone",
              t->n, t->c, t->h, t->w, t->k, i);
    }
    free(x), free(w), free(bias), free(res), free(u), free(y), free(y2), free(yd), free(mag);
}

/* Backward data: gx = the transposed convolution of gy, by Winograd on the
 * flipped filter with padding 2 - pad, against its definition in double. */
static void check_bwd(family_t *f, const shape_t *t)
{
    int oh = t->h + 2 * t->pad - 2, ow = t->w + 2 * t->pad - 2;
    const int gys[4] = {t->n, t->k, oh, ow}, gxs[4] = {t->n, t->c, t->h, t->w};
    wino_geom_t s;
    REQUIRE(wino_geom(&s, gys, gxs, 2 - t->pad, 2 - t->pad, NULL) == 0,
            "backward geometry of %dx%dx%dx%d -> %d refused", t->n, t->c, t->h, t->w, t->k);
    size_t ngy = (size_t)t->n * oh * ow * t->k, ngx = (size_t)t->n * t->h * t->w * t->c;
    float *gy = fill(ngy, 1.0f), *w = fill((size_t)t->k * t->c * 9, 0.3f);
    float *u = aligned(wino_u_floats(t->c, t->k)), *gx = malloc(ngx * sizeof *gx);
    float *zero = calloc(ngx, sizeof *zero);
    REQUIRE(gx && zero, "out of memory");
    const wino_kern_t *kn = f->fast;
    wino_weights_bwd(kn, u, w, t->k, t->c);
    run(kn, &s, u, gy, NULL, zero, gx, 2);
    double worst = 0.0;
    for (int i = 0; i < t->n; i++)
        for (int yy = 0; yy < t->h; yy++)
            for (int xx = 0; xx < t->w; xx++)
                for (int c = 0; c < t->c; c++) {
                    double acc = 0.0, mag = 0.0;
                    for (int o = 0; o < t->k; o++)
                        for (int a = 0; a < 3; a++)
                            for (int b = 0; b < 3; b++) {
                                int oy = yy - a + t->pad, ox = xx - b + t->pad;
                                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow)
                                    continue;
                                double v = (double)gy[(((size_t)i * oh + oy) * ow + ox) * t->k + o] *
                                           w[(((size_t)o * t->c + c) * 3 + a) * 3 + b];
                                acc += v;
                                mag += fabs(v);
                            }
                    double got = gx[(((size_t)i * t->h + yy) * t->w + xx) * t->c + c];
                    double err = fabs(got - acc) / (4.0 * mag + 1e-30);
                    worst = err > worst ? err : worst;
                }
    f->worst = worst > f->worst ? worst : f->worst;
    CHECK(worst < f->bound, "%dx%dx%dx%d -> %d pad %d: %s backward data vs direct %.3g", t->n,
          t->c, t->h, t->w, t->k, t->pad, f->name, worst);
    free(gy), free(w), free(u), free(gx), free(zero);
}

static uint16_t *to_bf16(const float *a, size_t n)
{
    uint16_t *h = malloc(n * sizeof *h);
    REQUIRE(h, "out of memory");
    for (size_t i = 0; i < n; i++)
        h[i] = wino_bf16(a[i]);
    return h;
}

static void round_bf16(float *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = bf16_of(a[i]);
}

static double s_wgrad_worst[2];   /* of the weight gradient (fp32, bf16), over its
                                     Winograd bound's scale */

/* The scale of the weight gradient's rounding errors: for each weight, G^T
 * |.| G of the 16 points' sum over the tiles of |A gy A^T| |B^T d B|, in
 * double (each product's error is relative to it, the cancellations of the
 * transforms aside). */
static double *wgrad_magnitude(const wino_geom_t *s, const float *x, const float *gy)
{
    size_t kc = (size_t)s->k * s->c;
    double *mu = calloc(16 * kc, sizeof *mu), *mw = calloc(9 * kc, sizeof *mw);
    double *vt = malloc((size_t)16 * s->c * sizeof *vt), *gt = malloc((size_t)16 * s->k * sizeof *gt);
    REQUIRE(mu && mw && vt && gt, "out of memory");
    for (long t = 0; t < s->ntiles; t++) {
        long off[16];
        int img, y0, x0;
        wino_tile_pixels(s, t, off);
        wino_tile_at(s, t, &img, &y0, &x0);
        for (int c = 0; c < s->c; c++) {
            double d[4][4], q[4][4];
            for (int i = 0; i < 16; i++)
                d[i / 4][i % 4] = off[i] >= 0 ? x[off[i] + c] : 0.0;
            for (int j = 0; j < 4; j++) {
                q[0][j] = d[0][j] - d[2][j], q[1][j] = d[1][j] + d[2][j];
                q[2][j] = d[2][j] - d[1][j], q[3][j] = d[1][j] - d[3][j];
            }
            for (int i = 0; i < 4; i++) {
                vt[(i * 4 + 0) * s->c + c] = fabs(q[i][0] - q[i][2]);
                vt[(i * 4 + 1) * s->c + c] = fabs(q[i][1] + q[i][2]);
                vt[(i * 4 + 2) * s->c + c] = fabs(q[i][2] - q[i][1]);
                vt[(i * 4 + 3) * s->c + c] = fabs(q[i][1] - q[i][3]);
            }
        }
        for (int o = 0; o < s->k; o++) {
            double g[2][2] = {{0}}, a[4][2];
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++)
                    if (y0 + i < s->oh && x0 + j < s->ow)
                        g[i][j] = gy[(((size_t)img * s->oh + y0 + i) * s->ow + x0 + j) * s->k + o];
            for (int j = 0; j < 2; j++)
                a[0][j] = g[0][j], a[1][j] = g[0][j] + g[1][j], a[2][j] = g[0][j] - g[1][j],
                a[3][j] = -g[1][j];
            for (int i = 0; i < 4; i++) {
                gt[(i * 4 + 0) * s->k + o] = fabs(a[i][0]);
                gt[(i * 4 + 1) * s->k + o] = fabs(a[i][0] + a[i][1]);
                gt[(i * 4 + 2) * s->k + o] = fabs(a[i][0] - a[i][1]);
                gt[(i * 4 + 3) * s->k + o] = fabs(a[i][1]);
            }
        }
        for (int p = 0; p < 16; p++)
            for (int o = 0; o < s->k; o++)
                for (int c = 0; c < s->c; c++)
                    mu[p * kc + (size_t)o * s->c + c] += gt[p * s->k + o] * vt[p * s->c + c];
    }
    static const double G[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, .5, .5}, {0, 0, 1}};   /* |G| */
    for (size_t e = 0; e < kc; e++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                for (int p = 0; p < 16; p++)
                    mw[e * 9 + a * 3 + b] += G[p / 4][a] * G[p % 4][b] * mu[p * kc + e];
    free(mu), free(vt), free(gt);
    return mw;
}

static void wgrad_run(const wino_kern_t *kn, const wino_geom_t *s, const void *x, const void *gy,
                      float *gw, int threads)
{
    void *work = aligned(wino_wgrad_work_bytes(kn, s) / sizeof(float) + 1);
    wino_wgrad(kn, s, x, gy, gw, work, threads);
    free(work);
}

/* The weight gradient: gw[o][c][a][b] = sum over images and output pixels
 * of gy[o] x[c] at (oy + a - pad, ox + b - pad), against its definition
 * in double; the vector kernels and other thread counts bit for bit; x
 * and gy as bf16 buffers (x16) the bits of their values in fp32. */
static void check_wgrad(family_t *f, const shape_t *t, int with_ref)
{
    const int in[4] = {t->n, t->c, t->h, t->w};
    const int out[4] = {t->n, t->k, t->h + 2 * t->pad - 2, t->w + 2 * t->pad - 2};
    wino_geom_t s;
    REQUIRE(wino_geom(&s, in, out, t->pad, t->pad, NULL) == 0, "geometry");
    size_t nx = (size_t)t->n * t->c * t->h * t->w, ny = (size_t)t->n * out[2] * out[3] * t->k;
    size_t nw = (size_t)t->k * t->c * 9;
    float *x = fill(nx, 1.0f), *gy = fill(ny, 1.0f), *gw = malloc(nw * sizeof *gw);
    float *gw2 = malloc(nw * sizeof *gw2);
    REQUIRE(gw && gw2, "out of memory");
    if (f->ref->esz == 2)
        round_bf16(x, nx), round_bf16(gy, ny);   /* the tape's values */
    const wino_kern_t *kn = with_ref ? f->ref : f->fast;
    wgrad_run(kn, &s, x, gy, gw, 1);
    double *mw = wgrad_magnitude(&s, x, gy);
    double worst = 0.0;
    for (int o = 0; o < t->k; o++)
        for (int c = 0; c < t->c; c++)
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++) {
                    double acc = 0.0;
                    for (int i = 0; i < t->n; i++)
                        for (int oy = 0; oy < out[2]; oy++)
                            for (int ox = 0; ox < out[3]; ox++) {
                                int yy = oy + a - t->pad, xx = ox + b - t->pad;
                                if (yy < 0 || yy >= t->h || xx < 0 || xx >= t->w)
                                    continue;
                                acc += (double)gy[(((size_t)i * out[2] + oy) * out[3] + ox) *
                                                      t->k + o] *
                                       x[(((size_t)i * t->h + yy) * t->w + xx) * t->c + c];
                            }
                    size_t e = ((size_t)o * t->c + c) * 9 + a * 3 + b;
                    double err = fabs(gw[e] - acc) / (mw[e] + 1e-30);
                    worst = err > worst ? err : worst;
                }
    free(mw);
    /* bf16: each product's two operands rounded to bf16 (8 significant
     * bits: a relative error of 2^-8 each, 2^-7 for the product); fp32:
     * the transforms' few roundings of the operands (2^-24 each, against
     * their terms' magnitudes), 2^-20 with room; both: the fp32 chain over
     * the tiles */
    int b16 = f->ref->esz == 2;
    double bound = (b16 ? 0x1p-7 : 0x1p-20) + (double)s.ntiles * 0x1p-24;
    s_wgrad_worst[b16] = worst > s_wgrad_worst[b16] ? worst : s_wgrad_worst[b16];
    CHECK(worst < bound, "%dx%dx%dx%d -> %d pad %d: %s weight gradient (%s) vs direct %.3g "
          "(bound %.3g)", t->n, t->c, t->h, t->w, t->k, t->pad, f->name, kn->name, worst, bound);
    for (int vi = 0; with_ref && vi < 2; vi++) {
        if (!f->vec[vi])
            continue;
        wgrad_run(f->vec[vi], &s, x, gy, gw2, 1);
        CHECK(memcmp(gw, gw2, nw * sizeof *gw) == 0, "%dx%dx%dx%d -> %d: %s weight gradient vs "
              "scalar", t->n, t->c, t->h, t->w, t->k, f->vec[vi]->name);
    }
    for (int th = 2; th <= 3; th++) {
        wgrad_run(f->fast, &s, x, gy, gw2, th);
        CHECK(memcmp(gw, gw2, nw * sizeof *gw) == 0, "%dx%dx%dx%d -> %d: %s weight gradient, %d "
              "threads vs 1", t->n, t->c, t->h, t->w, t->k, f->name, th);
    }
    if (!b16) {   /* bf16 buffers (x16, y16) are the bf16 kernels' */
        free(x), free(gy), free(gw), free(gw2);
        return;
    }
    uint16_t *x16 = to_bf16(x, nx), *gy16 = to_bf16(gy, ny);
    wino_geom_t s16 = s;
    s16.x16 = 1;
    wgrad_run(f->fast, &s16, x16, gy16, gw2, 2);
    CHECK(memcmp(gw, gw2, nw * sizeof *gw) == 0, "%dx%dx%dx%d -> %d: weight gradient of bf16 "
          "buffers vs fp32", t->n, t->c, t->h, t->w, t->k);
    /* the forward on bf16 buffers too */
    float *u = aligned(wino_u_floats(t->k, t->c)), *y = calloc(ny, sizeof *y);
    float *y2 = calloc(ny, sizeof *y2), *zero = calloc(ny, sizeof *zero);
    REQUIRE(y && y2 && zero, "out of memory");
    float *w = fill(nw, 0.3f);
    wino_weights(f->fast, u, w, t->k, t->c);
    run(f->fast, &s, u, x, NULL, zero, y, 2);
    run(f->fast, &s16, u, x16, NULL, zero, y2, 2);
    CHECK(memcmp(y, y2, ny * sizeof *y) == 0, "%dx%dx%dx%d -> %d: forward of bf16 buffers vs "
          "fp32", t->n, t->c, t->h, t->w, t->k);
    /* and writing bf16 (y16): the engine's rounding of the fp32 output */
    uint16_t *y16 = calloc(ny, sizeof *y16);
    REQUIRE(y16, "out of memory");
    s16.y16 = 1;
    for (int kk = 0; kk < 2; kk++) {
        const wino_kern_t *k16 = kk ? f->ref : f->fast;
        run(k16, &s16, u, x16, NULL, zero, y16, 2);
        size_t bad = 0;
        for (size_t i = 0; i < ny; i++)
            bad += y16[i] != bf16_pack(y[i]);
        CHECK(bad == 0, "%dx%dx%dx%d -> %d: %s writing bf16: %zu of %zu not bf16_pack of the "
              "fp32 output", t->n, t->c, t->h, t->w, t->k, k16->name, bad, ny);
    }
    free(y16);
    free(x), free(gy), free(gw), free(gw2), free(x16), free(gy16), free(u), free(y), free(y2);
    free(zero), free(w);
}

static void nan_reaches(const family_t *f)
{
    const shape_t t = {2, 16, 6, 6, 32, 1};
    const int in[4] = {2, 16, 6, 6}, out[4] = {2, 32, 6, 6};
    wino_geom_t s;
    REQUIRE(wino_geom(&s, in, out, 1, 1, &POSTS[1]) == 0, "geometry");
    size_t nx = (size_t)2 * 16 * 36, ny = (size_t)2 * 32 * 36;
    float *x = fill(nx, 1.0f), *w = fill((size_t)32 * 16 * 9, 0.3f), *res = calloc(ny, 4);
    float *u = aligned(wino_u_floats(32, 16)), *y = malloc(ny * sizeof *y);
    REQUIRE(res && y, "out of memory");
    const wino_kern_t *kn = f->fast;
    /* a NaN pixel (image 1, row 2, column 3, channel 5): every output of
     * image 1 within one pixel of it, all channels, is NaN */
    x[((size_t)(1 * 6 + 2) * 6 + 3) * 16 + 5] = NAN;
    wino_weights(kn, u, w, 32, 16);
    run(kn, &s, u, x, NULL, res, y, 2);
    int nan_in = 0, nan_out = 0;
    for (int i = 0; i < 2; i++)
        for (int oy = 0; oy < 6; oy++)
            for (int ox = 0; ox < 6; ox++)
                for (int o = 0; o < 32; o++) {
                    int near = i == 1 && abs(oy - 2) <= 1 && abs(ox - 3) <= 1;
                    int isn = isnan(y[(((size_t)i * 6 + oy) * 6 + ox) * 32 + o]);
                    nan_in += near && isn;
                    nan_out += !near && isn;
                }
    CHECK(nan_in == 9 * 32 && nan_out == 0, "%s NaN pixel: %d of %d near outputs NaN, %d others",
          f->name, nan_in, 9 * 32, nan_out);
    /* a NaN weight of output channel 7: that channel NaN everywhere */
    x[((size_t)(1 * 6 + 2) * 6 + 3) * 16 + 5] = 0.5f;
    w[(size_t)7 * 16 * 9 + 4] = NAN;
    wino_weights(kn, u, w, 32, 16);
    run(kn, &s, u, x, NULL, res, y, 2);
    int bad = 0;
    for (size_t i = 0; i < ny; i++)
        bad += (i % 32 == 7) != (isnan(y[i]) != 0);
    CHECK(bad == 0, "%s NaN weight: %d outputs wrong (channel 7 all NaN, the rest finite)",
          f->name, bad);
    (void)t;
    free(x), free(w), free(res), free(u), free(y);
}

static void refused(void)
{
    wino_geom_t s;
    const int a[4] = {1, 16, 8, 8}, b[4] = {1, 16, 8, 8};
    const int c8[4] = {1, 8, 8, 8}, k24[4] = {1, 24, 8, 8}, small[4] = {1, 16, 7, 8};
    CHECK(wino_geom(&s, a, b, 1, 1, NULL) == 0, "16 -> 16 pad 1 refused");
    CHECK(wino_geom(&s, c8, b, 1, 1, NULL) < 0, "8 input channels taken");
    CHECK(wino_geom(&s, a, k24, 1, 1, NULL) < 0, "24 output channels taken");
    CHECK(wino_geom(&s, a, small, 1, 1, NULL) < 0, "an output size that is not 3x3's taken");
    CHECK(wino_geom(&s, a, b, 3, 3, NULL) < 0, "padding 3 taken");
}

int main(void)
{
    const shape_t shapes[] = {
        {2, 16, 5, 7, 16, 1},  {3, 32, 8, 8, 48, 1}, {1, 16, 6, 5, 32, 0},
        {2, 64, 7, 7, 64, 1},  {1, 48, 4, 9, 80, 2}, {4, 16, 1, 1, 16, 1},
        {5, 32, 14, 14, 96, 1}, {1, 128, 3, 3, 32, 1},
    };
    int ns = (int)(sizeof shapes / sizeof *shapes);
    /* fp32: a few ulps (5e-7, 2^-21); bf16: each product's operands
     * rounded to 8 significant bits (2^-8 each), against the 4x sum of
     * |terms| of the direct convolution (wino_ref's transforms' growth):
     * 2^-8, the largest seen a quarter of it */
    const wino_kern_t *fast = wino_kernels();
    family_t fams[2] = {
        {"fp32", &WINO_REF, {has_avx512() ? WINO_AVX512 : NULL, has_avx2() ? WINO_AVX2 : NULL},
         fast ? fast : &WINO_REF, 5e-7, 0, 0},
        {"bf16", &WINO_REF_BF16, {has_avx512_bf16() ? WINO_AVX512_BF16 : NULL, NULL},
         has_avx512_bf16() ? WINO_AVX512_BF16 : &WINO_REF_BF16, 1.0 / 256, 0, 0},
    };
    for (int fi = 0; fi < 2; fi++) {
        family_t *f = &fams[fi];
        for (int i = 0; i < ns; i++)
            for (int p = 0; p < 4; p++)
                check_shape(f, &shapes[i], p, (i + p) % 2 == 0);
        for (int i = 0; i < ns; i++)
            check_bwd(f, &shapes[i]);
        if (f->ref->wgemm) {
            for (int i = 0; i < ns; i++)
                check_wgrad(f, &shapes[i], 1);
            /* several chunks of tiles (wino_wgrad.c: 512 tiles for 128 + 128
             * channels in bf16, 256 in fp32; here 800) */
            const shape_t big = {2, 128, 40, 40, 128, 1};
            check_wgrad(f, &big, 0);
        }
        nan_reaches(f);
    }
    refused();
    printf("test_wino: %d shapes x 4 post-op lists, kernels: scalar%s%s%s; largest error vs "
           "direct: fp32 %.3g (bound 5e-7), bf16 %.3g (bound %.3g; autocast's rounding %.3g); "
           "weight gradient fp32 %.3g, bf16 %.3g of its Winograd-domain scale (bounds 2^-20, "
           "2^-7, + tiles x 2^-24)\n",
           ns, has_avx512() ? " + avx512" : "", has_avx2() ? " + avx2" : "",
           has_avx512_bf16() ? " + avx512_bf16" : "", fams[0].worst, fams[1].worst,
           fams[1].bound, fams[1].worst_autocast, s_wgrad_worst[0], s_wgrad_worst[1]);
    return tc_done("test_wino");
}
