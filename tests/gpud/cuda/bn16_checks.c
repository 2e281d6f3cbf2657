/* bn16_checks — see bn16_checks.h. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/bf16.h"
#include "gpud/bn_math.h"
#include "gpud/cuda/cuda_bn16_kernels.h"
#include "gpud/cuda/cuda_train16_kernels.h"
#include "gpud/fp16.h"
#include "gpud/half_bits.h"
#include "../tcheck.h"
#include "../trand.h"
#include "bn16_checks.h"
#include "pack16.h"

static uint64_t rng = 0x243F6A8885A308D3ull;

static float *randv(size_t n, float scale, float shift)
{
    float *v = malloc(n * sizeof *v);
    REQUIRE(v, "alloc");
    for (size_t i = 0; i < n; i++)
        v[i] = shift + scale * trand(&rng);
    return v;
}

static void same(const char *what, const void *a, const void *b, size_t bytes)
{
    CHECK(!memcmp(a, b, bytes), "%s: the emulated cuda kernel differs from the reference", what);
}

/* The 16-bit BatchNorm passes on NHWC (cuda_train16_kernels.cu) against
 * their per-element formula, bit for bit, for bf16 and fp16: C channels
 * that fill one lane group and part of another, pixels over one or many
 * slices. */
static void check_bn16(int fp16, int npix, int C)
{
    size_t n = (size_t)npix * C;
    float *xf = randv(n, 3, 1), *gyf = randv(n, 1, 0), *gamma = randv(C, 0.5f, 1);
    float *beta = randv(C, 0.5f, 0), *mean = randv(C, 1, 1), *var = randv(C, 1, 2);
    float *coef = randv(3 * C, 1, 0);
    uint16_t *x = malloc(n * 2), *gy = malloc(n * 2), *y = malloc(n * 2), *gx = malloc(n * 2);
    uint16_t *zero = calloc(n, 2);
    uint8_t *bits = malloc(n / 8 + 1), *bits2 = malloc(n / 8 + 1);
    REQUIRE(x && gy && y && gx && zero && bits && bits2, "alloc");
    for (size_t i = 0; i < n; i++)
        x[i] = pack16(fp16, xf[i]), gy[i] = pack16(fp16, gyf[i]);
    for (int relu = 0; relu < 2; relu++) {
        /* with the ReLU's signs as bits (8 channels a thread only) */
        int masked = -1, masked2 = -1;
        CHECK(ckb_bn_apply(0, fp16, y, x, npix, C, gamma, beta, mean, var, 1e-5f, relu, NULL,
                           bits, &masked) == cudaSuccess, "launch");
        CHECK(masked == (relu && C % 8 == 0), "%s bn apply (relu %d, %d channels): mask %s "
              "written", fp16 ? "fp16" : "bf16", relu, C, masked ? "" : "not");
        size_t bad = 0;
        for (size_t i = 0; masked && i < n; i++)
            bad += ((bits[i / 8] >> (i % 8)) & 1) != (unpack16(fp16, y[i]) > 0.0f);
        CHECK(bad == 0, "%s bn apply's mask (%d x %d): %zu of %zu bits are not y > 0",
              fp16 ? "fp16" : "bf16", npix, C, bad, n);
        for (size_t i = 0; i < n; i++) {
            int ch = (int)(i % C);
            double inv = 1.0 / sqrt((double)var[ch] + 1e-5f);
            float v = (float)(((double)unpack16(fp16, x[i]) - mean[ch]) * inv * gamma[ch] +
                              beta[ch]);
            bad += y[i] != pack16(fp16, relu && !(v > 0.0f) ? 0.0f : v);
        }
        CHECK(bad == 0, "%s bn apply (relu %d, %d pixels x %d): %zu of %zu elements differ",
              fp16 ? "fp16" : "bf16", relu, npix, C, bad, n);
        /* with a residual (the block end fused): the value stored without
         * it, plus the residual (gy's values stand in), rounded again */
        CHECK(ckb_bn_apply(0, fp16, gx, x, npix, C, gamma, beta, mean, var, 1e-5f, relu, gy,
                           bits2, &masked2) == cudaSuccess && masked2 == masked, "launch");
        bad = 0;
        for (size_t i = 0; masked2 && i < n; i++)
            bad += ((bits2[i / 8] >> (i % 8)) & 1) != (unpack16(fp16, gx[i]) > 0.0f);
        CHECK(bad == 0, "%s bn apply + residual's mask (%d x %d): %zu of %zu bits are not its "
              "output > 0", fp16 ? "fp16" : "bf16", npix, C, bad, n);
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            int ch = (int)(i % C);
            double inv = 1.0 / sqrt((double)var[ch] + 1e-5f);
            float v = (float)(((double)unpack16(fp16, x[i]) - mean[ch]) * inv * gamma[ch] +
                              beta[ch]);
            v = unpack16(fp16, pack16(fp16, v)) + unpack16(fp16, gy[i]);
            bad += gx[i] != pack16(fp16, relu && !(v > 0.0f) ? 0.0f : v);
        }
        CHECK(bad == 0, "%s bn apply + residual (relu %d, %d pixels x %d): %zu of %zu elements "
              "differ", fp16 ? "fp16" : "bf16", relu, npix, C, bad, n);
        /* with the mask, y is not read: zeros in its place must not drop a lane */
        CHECK(ckb_bn_grad_apply(0, fp16, gx, x, relu ? (masked ? zero : y) : NULL,
                                masked ? bits : NULL, gy, npix, C, mean, coef, coef + C,
                                coef + 2 * C) == cudaSuccess, "launch");
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            int ch = (int)(i % C);
            float g = relu && !(unpack16(fp16, y[i]) > 0.0f) ? 0.0f : unpack16(fp16, gy[i]);
            float v = (float)((double)coef[ch] * g +
                              (double)coef[C + ch] * ((double)unpack16(fp16, x[i]) - mean[ch]) +
                              coef[2 * C + ch]);
            bad += gx[i] != pack16(fp16, v);
        }
        CHECK(bad == 0, "%s bn grad apply (relu %d%s, %d pixels x %d): %zu of %zu elements "
              "differ", fp16 ? "fp16" : "bf16", relu, masked ? ", its mask" : "", npix, C, bad,
              n);
    }
    free(zero);
    free(bits);
    free(bits2);
    free(xf);
    free(gyf);
    free(gamma);
    free(beta);
    free(mean);
    free(var);
    free(coef);
    free(x);
    free(gy);
    free(y);
    free(gx);
}

/* ckb_chan_sums and ckb_bn_grad_sums against a host replica of their
 * order, bit for bit: a channel's npix values cut into ckb_sum_parts(npix)
 * slices, each slice's values strided over the block's 8 rows, each row's
 * partial in pixel order, the rows of a slice summed in order, then the
 * slices as k16_sum_slices adds them (lane l of 32: slices l, l + 32, ...
 * in order; the 32 lanes' sums in lane order): the same whichever
 * threads hold a channel (1 or 8 channels a thread, several slices side by
 * side in a block where the channels are few). 70,000 pixels take 547
 * slices: lanes of 17 and 18, 8 of them in flight and the rest one by one. */
static double slices16(int fp16, const uint16_t *x, const uint16_t *y, const uint16_t *gy,
                       int npix, int c, int ch, double center, int what)
{
    enum { ROWS16 = 256 / 32 };
    int parts = ckb_sum_parts((size_t)npix);
    size_t len = ((size_t)npix + parts - 1) / parts;
    double lane[32] = {0};
    for (int sl = 0; sl < parts; sl++) {
        size_t lo = sl * len, hi = lo + len < (size_t)npix ? lo + len : (size_t)npix;
        double s = 0.0;
        for (int r = 0; r < ROWS16; r++) {
            double acc = 0.0;
            for (size_t j = lo + r; j < hi; j += ROWS16) {
                size_t at = j * c + ch;
                double v = unpack16(fp16, x[at]);
                if (what == 0)
                    acc += v;
                else if (what == 1)
                    acc += (v - center) * (v - center);
                else {
                    double g = y && !(unpack16(fp16, y[at]) > 0.0f) ? 0.0 : unpack16(fp16, gy[at]);
                    acc += what == 2 ? g : g * (v - center);
                }
            }
            s += acc;
        }
        lane[sl % 32] += s;
    }
    double total = lane[0];
    for (int l = 1; l < 32; l++)
        total += lane[l];
    return total;
}

static void check_bn16_sums(int fp16, int npix, int C)
{
    size_t n = (size_t)npix * C;
    int parts = ckb_sum_parts((size_t)npix);
    float *xf = randv(n, 3, 1), *gyf = randv(n, 1, 0), *center = randv(C, 1, 1);
    uint16_t *x = malloc(n * 2), *gy = malloc(n * 2);
    double *out = malloc(2 * C * sizeof *out), *part = malloc(2 * C * (size_t)parts * sizeof *part);
    REQUIRE(x && gy && out && part, "alloc");
    for (size_t i = 0; i < n; i++)
        x[i] = pack16(fp16, xf[i]), gy[i] = pack16(fp16, gyf[i]);
    size_t bad = 0;
    for (int centred = 0; centred < 2; centred++) {
        CHECK(ckb_chan_sums(0, fp16, x, npix, C, centred ? center : NULL, out, part) ==
                  cudaSuccess, "launch");
        for (int ch = 0; ch < C; ch++) {
            double want = slices16(fp16, x, NULL, NULL, npix, C, ch, centred ? center[ch] : 0.0,
                                   centred);
            bad += memcmp(&out[ch], &want, 8) != 0;
        }
    }
    /* the fused ReLU's mask: x's own sign stands in for y; masked, dy' is
     * stored too (the block end's ReLU backward fused, tape_fuse.c) and
     * must be ckb_relu_bwd's bits */
    uint16_t *gout = malloc(n * 2), *relu = malloc(n * 2);
    REQUIRE(gout && relu, "alloc");
    CHECK(ckb_relu_bwd(0, fp16, relu, x, gy, n) == cudaSuccess, "launch");
    for (int masked = 0; masked < 2; masked++) {
        memset(gout, 0xa5, n * 2);
        CHECK(ckb_bn_grad_sums(0, fp16, x, masked ? x : NULL, gy, masked ? gout : NULL, npix, C,
                               center, out, part) == cudaSuccess, "launch");
        if (masked)
            CHECK(memcmp(gout, relu, n * 2) == 0, "%s bn sums (%d x %d): the stored dy' is not "
                  "the ReLU backward's bits", fp16 ? "fp16" : "bf16", npix, C);
        for (int ch = 0; ch < C; ch++) {
            const uint16_t *y = masked ? x : NULL;
            double sg = slices16(fp16, x, y, gy, npix, C, ch, center[ch], 2);
            double sgx = slices16(fp16, x, y, gy, npix, C, ch, center[ch], 3);
            bad += memcmp(&out[ch], &sg, 8) != 0;
            bad += memcmp(&out[C + ch], &sgx, 8) != 0;
        }
    }
    CHECK(bad == 0, "%s bn sums (%d pixels x %d, %d slices): %zu of %d sums differ from the "
          "slices' order", fp16 ? "fp16" : "bf16", npix, C, parts, bad, 6 * C);
    free(xf);
    free(gyf);
    free(center);
    free(x);
    free(gy);
    free(gout);
    free(relu);
    free(out);
    free(part);
}

/* ckb_bn_stats and ckb_bn_grad (the per-channel finish inside the sums'
 * last launch) against the unfused launches and bn_math.h on the host,
 * bit for bit: the mean, the variance, the running statistics, the
 * gradient sums and the three coefficients a channel. */
static void check_bn16_fused(int fp16, int npix, int C)
{
    size_t n = (size_t)npix * C;
    int parts = ckb_sum_parts((size_t)npix);
    double count = (double)npix, mom = 0.1, unbias = bnm_unbias(count);
    float *xf = randv(n, 3, 1), *gyf = randv(n, 1, 0), *gamma = randv(C, 1, 1);
    uint16_t *x = malloc(n * 2), *gy = malloc(n * 2);
    double *sums = malloc(2 * C * sizeof *sums), *want = malloc(2 * C * sizeof *want);
    double *part = malloc(2 * C * (size_t)parts * sizeof *part);
    float *stat = malloc(2 * C * sizeof *stat), *st2 = malloc(2 * C * sizeof *st2);
    float *rm = randv(C, 1, 0), *rv = randv(C, 1, 1), *rm2 = malloc(C * 4), *rv2 = malloc(C * 4);
    float *coef = malloc(3 * C * sizeof *coef), *coef2 = malloc(3 * C * sizeof *coef2);
    float *gg = malloc(C * 4), *gb = malloc(C * 4), *gg2 = malloc(C * 4), *gb2 = malloc(C * 4);
    REQUIRE(x && gy && sums && want && part && stat && st2 && rm2 && rv2 && coef && coef2 && gg &&
                gb && gg2 && gb2, "alloc");
    for (size_t i = 0; i < n; i++)
        x[i] = pack16(fp16, xf[i]), gy[i] = pack16(fp16, gyf[i]);
    memcpy(rm2, rm, C * 4);
    memcpy(rv2, rv, C * 4);
    /* the unfused launches, the per-channel steps on the host */
    CHECK(ckb_chan_sums(0, fp16, x, npix, C, NULL, want, part) == cudaSuccess, "launch");
    for (int ch = 0; ch < C; ch++)
        st2[ch] = bnm_stat(want[ch], count);
    CHECK(ckb_chan_sums(0, fp16, x, npix, C, st2, want, part) == cudaSuccess, "launch");
    for (int ch = 0; ch < C; ch++) {
        st2[C + ch] = bnm_stat(want[ch], count);
        rm2[ch] = bnm_running(rm2[ch], st2[ch], mom, 1.0);
        rv2[ch] = bnm_running(rv2[ch], st2[C + ch], mom, unbias);
    }
    CHECK(ckb_bn_stats(0, fp16, x, npix, C, count, stat, rm, rv, mom, unbias, sums, part) ==
              cudaSuccess, "launch");
    char what[96];
    snprintf(what, sizeof what, "%s batch statistics fused (%d x %d)", fp16 ? "fp16" : "bf16",
             npix, C);
    same(what, stat, st2, 2 * C * sizeof *stat);
    same(what, rm, rm2, C * 4);
    same(what, rv, rv2, C * 4);
    /* x's signs as the forward's mask would hold them (8 channels a
     * thread read it in place of y: zeros stand in for y there) */
    uint8_t *bits = calloc(n / 8 + 1, 1);
    uint16_t *zero = calloc(n, 2);
    REQUIRE(bits && zero, "alloc");
    for (size_t i = 0; i < n; i++)
        bits[i / 8] |= (uint8_t)((unpack16(fp16, x[i]) > 0.0f) << (i % 8));
    for (int masked = 0; masked < 3; masked++) {
        const uint16_t *y = masked ? x : NULL;
        const uint8_t *mk = masked == 2 && C % 8 == 0 ? bits : NULL;
        CHECK(ckb_bn_grad_sums(0, fp16, x, y, gy, NULL, npix, C, stat, want, part) ==
                  cudaSuccess, "launch");
        for (int ch = 0; ch < C; ch++) {
            double sdyxh = want[C + ch] / bnm_std(stat[C + ch], 1e-5f);
            want[C + ch] = sdyxh;
            gg2[ch] = (float)sdyxh;
            gb2[ch] = (float)want[ch];
            bnm_coeffs(gamma[ch], stat[C + ch], 1e-5f, want[ch], sdyxh, count, &coef2[ch],
                       &coef2[C + ch], &coef2[2 * C + ch]);
        }
        CHECK(ckb_bn_grad(0, fp16, x, mk ? zero : y, mk, gy, NULL, NULL, npix, C, stat, gamma,
                          stat + C, 1e-5f, count, gg, gb, coef, sums, part) == cudaSuccess,
              "launch");
        snprintf(what, sizeof what, "%s batch-norm gradient fused (%d x %d, %s)",
                 fp16 ? "fp16" : "bf16", npix, C,
                 masked == 2 ? "ReLU, its mask" : masked ? "ReLU" : "plain");
        same(what, sums, want, 2 * C * sizeof *sums);
        same(what, coef, coef2, 3 * C * sizeof *coef);
        same(what, gg, gg2, C * 4);
        same(what, gb, gb2, C * 4);
    }
    free(bits), free(zero);
    free(xf), free(gyf), free(gamma), free(x), free(gy), free(sums), free(want), free(part);
    free(stat), free(st2), free(rm), free(rv), free(rm2), free(rv2), free(coef), free(coef2);
    free(gg), free(gb), free(gg2), free(gb2);
}

/* ckb_bn_grad with gy2 (the tape's fold of a gradient's last term,
 * tape_fuse.c) against ckb_acc's sum then ckb_bn_grad without it, bit for
 * bit: the sums, the coefficients, the gamma/beta gradients and the
 * stored dy'; gy itself untouched; gy2 without gout refused. */
static void check_bn16_fold(int fp16, int npix, int C)
{
    size_t n = (size_t)npix * C;
    int parts = ckb_sum_parts((size_t)npix);
    float *xf = randv(n, 3, 1), *gyf = randv(n, 1, 0), *g2f = randv(n, 1, 0);
    float *gamma = randv(C, 1, 1), *stat = randv(2 * C, 1, 1);
    uint16_t *x = malloc(n * 2), *gy = malloc(n * 2), *gy2 = malloc(n * 2), *whole = malloc(n * 2);
    uint16_t *gout = malloc(n * 2), *gout2 = malloc(n * 2);
    double *sums = malloc(2 * C * sizeof *sums), *want = malloc(2 * C * sizeof *want);
    double *part = malloc(2 * C * (size_t)parts * sizeof *part);
    float *coef = malloc(3 * C * 4), *coef2 = malloc(3 * C * 4);
    float *gg = malloc(C * 4), *gb = malloc(C * 4), *gg2 = malloc(C * 4), *gb2 = malloc(C * 4);
    REQUIRE(x && gy && gy2 && whole && gout && gout2 && sums && want && part && coef && coef2 &&
                gg && gb && gg2 && gb2, "alloc");
    for (size_t i = 0; i < n; i++) {
        x[i] = pack16(fp16, xf[i]), gy[i] = pack16(fp16, gyf[i]);
        gy2[i] = pack16(fp16, g2f[i]);
    }
    for (int ch = 0; ch < C; ch++)
        stat[C + ch] = fabsf(stat[C + ch]);   /* a variance */
    memcpy(whole, gy, n * 2);
    CHECK(ckb_acc(0, fp16, whole, gy2, n) == cudaSuccess, "launch");
    memset(gout2, 0xa5, n * 2);
    CHECK(ckb_bn_grad(0, fp16, x, x, NULL, whole, NULL, gout2, npix, C, stat, gamma, stat + C, 1e-5f,
                      (double)npix, gg2, gb2, coef2, want, part) == cudaSuccess, "launch");
    memcpy(whole, gy, n * 2);   /* now gy's copy: the fold must leave gy as it was */
    memset(gout, 0x5a, n * 2);
    CHECK(ckb_bn_grad(0, fp16, x, x, NULL, gy, gy2, gout, npix, C, stat, gamma, stat + C, 1e-5f,
                      (double)npix, gg, gb, coef, sums, part) == cudaSuccess, "launch");
    char what[96];
    snprintf(what, sizeof what, "%s batch-norm gradient with gy's last term (%d x %d)",
             fp16 ? "fp16" : "bf16", npix, C);
    same(what, sums, want, 2 * C * sizeof *sums);
    same(what, coef, coef2, 3 * C * sizeof *coef);
    same(what, gg, gg2, C * 4);
    same(what, gb, gb2, C * 4);
    same(what, gout, gout2, n * 2);
    CHECK(memcmp(whole, gy, n * 2) == 0, "%s: gy was written", what);
    CHECK(ckb_bn_grad(0, fp16, x, x, NULL, gy, gy2, NULL, npix, C, stat, gamma, stat + C, 1e-5f,
                      (double)npix, gg, gb, coef, sums, part) == cudaErrorInvalidValue,
          "%s: taken without gout, where dy' is not stored", what);
    free(xf), free(gyf), free(g2f), free(gamma), free(stat), free(x), free(gy), free(gy2);
    free(whole), free(gout), free(gout2), free(sums), free(want), free(part), free(coef);
    free(coef2), free(gg), free(gb), free(gg2), free(gb2);
}

int check_bn16_all(void)
{
    for (int fp16 = 0; fp16 < 2; fp16++) {
        /* 40 channels: 5 units of 8 (8 columns, 4 slices a block); 20: one
         * a thread (32 columns); 264: 33 units of 8, two groups of 32 */
        static const int chans[] = {40, 20, 264};
        for (int k = 0; k < 3; k++) {
            int C = chans[k];
            check_bn16(fp16, 37, C);       /* one slice a channel */
            check_bn16(fp16, C > 64 ? 3000 : 20000, C);    /* several slices (apply_parts) */
            check_bn16_sums(fp16, 37, C);      /* one slice a channel */
            check_bn16_sums(fp16, C > 64 ? 9000 : 70000, C);   /* 71 or 547 slices */
            check_bn16_fused(fp16, C > 64 ? 9000 : 70000, C);
            check_bn16_fold(fp16, C > 64 ? 9000 : 37, C);
        }
    }
    return tc_failures;
}
