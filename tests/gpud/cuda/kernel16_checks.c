/* kernel16_checks — see kernel16_checks.h. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/bf16.h"
#include "gpud/cuda/cuda_infer_kernels.h"
#include "gpud/cuda/cuda_train16_kernels.h"
#include "gpud/half_bits.h"
#include "../tcheck.h"
#include "kernel16_checks.h"

/* n values in [-scale, scale) from a fixed LCG (any values do: each
 * check compares a kernel with its formula on the same inputs) */
static float *fill(size_t n, float scale)
{
    float *v = malloc(n * sizeof *v);
    REQUIRE(v, "alloc");
    uint32_t st = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        st = st * 1664525u + 1013904223u;
        v[i] = scale * ((float)(st >> 8) / 8388608.0f - 1.0f);
    }
    return v;
}

static void eq(const char *what, const void *a, const void *b, size_t bytes)
{
    CHECK(!memcmp(a, b, bytes), "%s: the emulated cuda kernel differs from the formula", what);
}

/* bf16 bits (uint16_t here) as floats */
static void to_f(const uint16_t *h, float *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&f[i], &u, sizeof u);
    }
}

/* The 16-bit element-wise kernels (add + ReLU, ReLU, its backward, the
 * gradient accumulation) against their formula on bf16 values, bit for
 * bit: 8 elements a thread (count a multiple of 8, aligned buffers) and
 * one (a view one element in), over test_cuemu's grid stride. */
int check_elementwise16(void)
{
    int before = tc_failures;
    enum { N = 2400 };
    float *x = fill(N + 1, 2), *y = fill(N + 1, 2);
    uint16_t *hx = malloc(2 * (N + 1)), *hy = malloc(2 * (N + 1)), *hz = malloc(2 * (N + 1));
    float *rx = malloc(4 * (N + 1)), *ry = malloc(4 * (N + 1)), *t = malloc(4 * (N + 1));
    float *want = malloc(4 * (N + 1));
    REQUIRE(hx && hy && hz && rx && ry && t && want, "alloc");
    bf16_round(rx, x, N + 1);
    bf16_round(ry, y, N + 1);
    for (size_t i = 0; i <= N; i += 7)   /* a ReLU's output: exact zeros, both signs */
        rx[i] = i % 2 ? -0.0f : 0.0f;
    for (size_t i = 0; i <= N; i++) {
        hx[i] = bf16_pack(rx[i]);
        hy[i] = bf16_pack(ry[i]);
    }
    for (int off = 0; off < 2; off++) {   /* 0: the 8-wide kernels; 1: a thread an element */
        size_t n = N + (size_t)off;   /* off 1: odd count from an odd start */
        const uint16_t *a = hx + off, *b = hy + off;
        const float *fa = rx + off, *fb = ry + off;
        char what[64];
        CHECK(ckb_add(0, 0, hz, a, b, n - off, 1) == cudaSuccess, "launch");
        for (size_t i = 0; i < n - off; i++) {
            float v = fa[i] + fb[i];
            want[i] = v > 0 ? v : 0;
        }
        bf16_round(want, want, n - off);
        to_f(hz, t, n - off);
        snprintf(what, sizeof what, "bf16 add + ReLU (%s)", off ? "scalar" : "8 wide");
        eq(what, t, want, (n - off) * 4);
        CHECK(ckb_relu(0, 0, hz, a, n - off) == cudaSuccess, "launch");
        for (size_t i = 0; i < n - off; i++)
            want[i] = fa[i] > 0 ? fa[i] : 0;
        to_f(hz, t, n - off);
        snprintf(what, sizeof what, "bf16 ReLU (%s)", off ? "scalar" : "8 wide");
        eq(what, t, want, (n - off) * 4);
        CHECK(ckb_relu_bwd(0, 0, hz, a, b, n - off) == cudaSuccess, "launch");
        for (size_t i = 0; i < n - off; i++)
            want[i] = fa[i] > 0 ? fb[i] : 0;
        to_f(hz, t, n - off);
        snprintf(what, sizeof what, "bf16 ReLU backward (%s)", off ? "scalar" : "8 wide");
        eq(what, t, want, (n - off) * 4);
        memcpy(hz, a, (n - off) * 2);
        CHECK(ckb_acc(0, 0, hz, b, n - off) == cudaSuccess, "launch");
        for (size_t i = 0; i < n - off; i++)
            want[i] = fa[i] + fb[i];
        bf16_round(want, want, n - off);
        to_f(hz, t, n - off);
        snprintf(what, sizeof what, "bf16 accumulate (%s)", off ? "scalar" : "8 wide");
        eq(what, t, want, (n - off) * 4);
    }
    free(x);
    free(y);
    free(hx);
    free(hy);
    free(hz);
    free(rx);
    free(ry);
    free(t);
    free(want);
    return tc_failures - before;
}

/* The space-to-depth form of a stride-2 stem (ckb_s2d_shape, ckb_s2d,
 * ckb_weights_s2d) and its backward (ckb_s2d_back, ckb_weights_back_s2d)
 * against their formulas: 7x7/2 pad 3 over 3 channels of 9 x 11 (odd
 * padded sides: the form's last row and column half zeros), values moved
 * exactly, the backward the forward's inverse. */
int check_s2d(void)
{
    int before = tc_failures;
    enum { NB = 3, C = 3, H = 9, W = 11, O = 8, K = 7, PAD = 3, CP = 16 };
    int f[4];
    int oh = (H + 2 * PAD - K) / 2 + 1, ow = (W + 2 * PAD - K) / 2 + 1;
    REQUIRE(ckb_s2d_shape(C, H, W, K, K, 2, 2, PAD, PAD, oh, ow, f) == 1 && f[0] == 8 &&
                f[1] == 9 && f[2] == 4 && f[3] == 4,
            "s2d shape %d %d %d %d", f[0], f[1], f[2], f[3]);
    CHECK(ckb_s2d_shape(C, H, W, K, K, 1, 1, PAD, PAD, H, W, f) == 0 &&
              ckb_s2d_shape(8, H, W, K, K, 2, 2, PAD, PAD, oh, ow, f) == 0,
          "s2d taken for a stride-1 conv or 8 channels");
    ckb_s2d_shape(C, H, W, K, K, 2, 2, PAD, PAD, oh, ow, f);
    int hs = f[0], ws = f[1], k2 = f[2];
    size_t nx = (size_t)NB * H * W * C, ns = (size_t)NB * hs * ws * CP;
    uint16_t *x = malloc(nx * 2), *y = malloc(ns * 2), *back = malloc(nx * 2);
    uint16_t *w2 = malloc((size_t)O * k2 * k2 * CP * 2);
    float *w = fill((size_t)O * C * K * K, 1), *gw = malloc((size_t)O * C * K * K * 4);
    REQUIRE(x && y && back && w2 && gw, "alloc");
    for (size_t i = 0; i < nx; i++)
        x[i] = (uint16_t)(0x3f80 + i % 1000);   /* distinct bf16 values */
    CHECK(ckb_s2d(0, 0, x, NB, H, W, C, PAD, PAD, hs, ws, CP, y) == cudaSuccess, "launch");
    int bad = 0;
    for (int b = 0; b < NB; b++)
        for (int Y = 0; Y < hs; Y++)
            for (int X = 0; X < ws; X++)
                for (int ch = 0; ch < CP; ch++) {
                    uint16_t want = 0;
                    int blk = ch / C, cc = ch % C, yy = 2 * Y + blk / 2 - PAD;
                    int xx = 2 * X + blk % 2 - PAD;
                    if (ch < 4 * C && yy >= 0 && yy < H && xx >= 0 && xx < W)
                        want = x[(((size_t)b * H + yy) * W + xx) * C + cc];
                    bad += y[(((size_t)b * hs + Y) * ws + X) * CP + ch] != want;
                }
    CHECK(bad == 0, "s2d input: %d of %zu elements differ from the formula", bad, ns);
    CHECK(ckb_s2d_back(0, 0, y, NB, H, W, C, PAD, PAD, hs, ws, CP, back) == cudaSuccess, "launch");
    eq("s2d backward (the forward's inverse)", back, x, nx * 2);
    bf16_round(w, w, (size_t)O * C * K * K);
    CHECK(ckb_weights_s2d(0, 0, w, O, C, K, K, k2, k2, CP, w2) == cudaSuccess, "launch");
    bad = 0;
    for (int o = 0; o < O; o++)
        for (int dy = 0; dy < k2; dy++)
            for (int dx = 0; dx < k2; dx++)
                for (int ch = 0; ch < CP; ch++) {
                    int blk = ch / C, i = 2 * dy + blk / 2, j = 2 * dx + blk % 2;
                    float want = ch < 4 * C && i < K && j < K
                                     ? w[(((size_t)o * C + ch % C) * K + i) * K + j] : 0.0f;
                    bad += w2[(((size_t)o * k2 + dy) * k2 + dx) * CP + ch] != bf16_pack(want);
                }
    CHECK(bad == 0, "s2d filter: %d elements differ from the formula", bad);
    CHECK(ckb_weights_back_s2d(0, 0, w2, O, C, K, K, k2, k2, CP, gw) == cudaSuccess, "launch");
    eq("s2d filter gradient (the filter's inverse)", gw, w, (size_t)O * C * K * K * 4);
    free(x);
    free(y);
    free(back);
    free(w2);
    free(w);
    free(gw);
    return tc_failures - before;
}
