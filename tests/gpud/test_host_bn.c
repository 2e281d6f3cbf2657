/* Training BatchNorm's host loops (host_kernels.c: hk_chan_sums,
 * hk_bn_grad_sums, hk_bn_grad_apply, NHWC) against their definition, bit
 * for bit: every channel adds its rows in order within each of the fixed
 * row chunks, and the chunks' partial sums in chunk order (the order that
 * makes SyncBatchNorm's W ranks equal one rank's); the gradient is one
 * double expression rounded once. dy' is the ReLU's masked dy times gscale
 * in float (1, or a fused dropout's 1 / (1 - p): tape_fuse.c), which with
 * 1 must be dy itself. Run twice by ctest: on the CPU's AVX2
 * intrinsics (host_bn_avx2.c) and with DDPIPE_HOST_SIMD=generic on the
 * generic vector code, so both give the definition's bits. Channel counts
 * cover whole 16-channel blocks, 8-channel vectors and scalar tails. */
#include "gpud/cpu/host_kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpud/tcheck.h"

#define CHUNKS 32   /* host_kernels.c SUM_CHUNKS: part of the contract */

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;

static float rnd(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (float)((double)(s_rng >> 11) / 9007199254740992.0) * 4.0f - 1.5f;
}

/* kind 0: sum x; 1: sum (x - center)^2; 2: [sum dy', sum dy' (x - center)] */
static void reference(int kind, const float *x, const float *y, const float *gy, size_t rows,
                      int c, const float *center, int relu, float gscale, double *out)
{
    size_t chunks = rows < CHUNKS ? rows : CHUNKS, width = (size_t)c * (kind == 2 ? 2 : 1);
    memset(out, 0, width * sizeof *out);
    double *part = calloc(width, sizeof *part);
    for (size_t k = 0; k < chunks; k++) {
        memset(part, 0, width * sizeof *part);
        for (size_t r = rows * k / chunks; r < rows * (k + 1) / chunks; r++)
            for (int j = 0; j < c; j++) {
                size_t at = r * (size_t)c + (size_t)j;
                if (kind == 0) {
                    part[j] += x[at];
                } else if (kind == 1) {
                    double d = (double)x[at] - center[j];
                    part[j] += d * d;
                } else {
                    float g = (!relu || y[at] > 0.0f ? gy[at] : 0.0f) * gscale;
                    part[j] += g;
                    part[c + j] += (double)g * ((double)x[at] - center[j]);
                }
            }
        for (size_t j = 0; j < width; j++)
            out[j] += part[j];
    }
    free(part);
}

static size_t differ(const void *a, const void *b, size_t n, size_t es)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp((const char *)a + i * es, (const char *)b + i * es, es) != 0;
    return bad;
}

static void check_case(int n, int c, int h, int threads)
{
    int s[4] = {n, c, h, h};
    size_t rows = (size_t)n * h * h, cnt = rows * (size_t)c;
    float *x = malloc(cnt * sizeof *x), *y = malloc(cnt * sizeof *y);
    float *gy = malloc(cnt * sizeof *gy), *gx = malloc(cnt * sizeof *gx);
    float *want_gx = malloc(cnt * sizeof *want_gx);
    float *center = malloc((size_t)c * 4 * sizeof *center);
    float *scale = center + c, *a = center + 2 * c, *b = center + 3 * c;
    double *got = malloc(2 * (size_t)c * sizeof *got), *want = malloc(2 * (size_t)c * sizeof *want);
    for (size_t i = 0; i < cnt; i++) {
        x[i] = rnd() * 3.0f + 0.25f;
        y[i] = rnd();   /* about a third <= 0: the ReLU's mask */
        gy[i] = rnd();
    }
    y[0] = 0.0f;
    y[1] = -0.0f;
    y[2] = NAN;   /* masks, as y > 0 is false */
    for (int j = 0; j < c; j++) {
        center[j] = rnd();
        scale[j] = rnd();
        a[j] = rnd() * 1e-3f;
        b[j] = rnd() * 1e-2f;
    }
    hk_chan_sums(x, s, NULL, got, 1, threads);
    reference(0, x, y, gy, rows, c, center, 0, 1.0f, want);
    CHECK(!differ(got, want, (size_t)c, sizeof *got), "sum x: n %d c %d h %d, %d threads", n,
          c, h, threads);
    hk_chan_sums(x, s, center, got, 1, threads);
    reference(1, x, y, gy, rows, c, center, 0, 1.0f, want);
    CHECK(!differ(got, want, (size_t)c, sizeof *got), "sum (x - c)^2: n %d c %d h %d", n, c, h);
    const float gscales[2] = {1.0f, 1.0f / (1.0f - 0.3f)};
    for (int k = 0; k < 4; k++) {
        int relu = k & 1;
        float gs = gscales[k >> 1];
        hk_bn_grad_sums(x, y, gy, s, relu, gs, center, got, 1, threads);
        reference(2, x, y, gy, rows, c, center, relu, gs, want);
        CHECK(!differ(got, want, 2 * (size_t)c, sizeof *got), "gradient sums: n %d c %d h %d "
              "relu %d gscale %g", n, c, h, relu, (double)gs);
        hk_bn_grad_apply(gx, x, y, gy, s, relu, gs, center, scale, a, b, 1, threads);
        for (size_t i = 0; i < cnt; i++) {
            size_t j = i % (size_t)c;
            double g = (!relu || y[i] > 0.0f ? gy[i] : 0.0f) * gs;
            want_gx[i] = (float)((double)scale[j] * g + (double)a[j] * ((double)x[i] - center[j]) +
                                 (double)b[j]);
        }
        size_t bad = differ(gx, want_gx, cnt, sizeof *gx);
        CHECK(bad == 0, "input gradient: %zu of %zu differ (n %d c %d h %d relu %d gscale %g)",
              bad, cnt, n, c, h, relu, (double)gs);
    }
    free(x);
    free(y);
    free(gy);
    free(gx);
    free(want_gx);
    free(center);
    free(got);
    free(want);
}

int main(void)
{
    const char *e = getenv("DDPIPE_HOST_SIMD");
    printf("test_host_bn: %s loops\n", e && strcmp(e, "generic") == 0 ? "generic" : "the CPU's");
    const int cases[][3] = {{4, 16, 5}, {3, 37, 4}, {2, 48, 7}, {2, 128, 3}, {1, 8, 1},
                            {5, 3, 6}, {2, 64, 9}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int t = 1; t <= 2; t++)
            check_case(cases[i][0], cases[i][1], cases[i][2], t);
    return tc_done("test_host_bn");
}
