/* gpud_cuemu: the cuda backend's own kernels (gpud/cuda/cuda_kernels.cu)
 * run here, on the CPU, through the kernel emulator (tests/gpud/cuemu:
 * every block in turn, its threads as fibers meeting at __syncthreads), each
 * against the CPU reference it is written to follow. Bit for bit where the
 * kernel promises it (the element-wise ops, pooling, dropout's hash, the
 * bf16 rounding, BatchNorm's per-channel steps of bn_math.h, the bf16
 * inference plan's layout kernels, and, with gpud/cuda/cuda_arena.c and
 * cuda_optim.c over the emulated runtime, the device arena's ops and the
 * optimizer steps, one parameter and multi-tensor, against
 * gpud/optim/optim.c: arena_checks.c, what gpud_cuda_train_ops runs on a
 * GPU); within 1e-12 relative where a block's tree of double sums meets
 * the reference's sequential sum (channel sums). What it cannot show: the
 * device's own arithmetic (nvcc's contractions), races, speed, and
 * cuDNN/cuBLAS/NCCL: those need a GPU (gpud_cuda_*, scripts/gpu-check.sh). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/bf16.h"
#include "gpud/fp16.h"
#include "gpud/bn_math.h"
#include "gpud/cpu/host_kernels.h"
#include "gpud/cpu/ref_ops.h"
#include "gpud/cuda/cuda_infer_kernels.h"
#include "gpud/cuda/cuda_kernels.h"
#include "gpud/cuda/cuda_bn16_kernels.h"
#include "gpud/cuda/cuda_ce_kernels.h"
#include "gpud/cuda/cuda_train16_kernels.h"
#include "gpud/half_bits.h"
#include "gpud/model.h"
#include "../tcheck.h"
#include "../trand.h"
#include "arena_checks.h"
#include "xsum_checks.h"
#include "kernel16_checks.h"
#include "resize_checks.h"
#include "pack16.h"
#include "bn16_checks.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void)
{
    return trand(&rng);
}

static float *randv(size_t n, float scale, float shift)
{
    float *v = malloc(n * sizeof *v);
    REQUIRE(v, "alloc");
    for (size_t i = 0; i < n; i++)
        v[i] = shift + scale * frand();
    return v;
}

static void same(const char *what, const void *a, const void *b, size_t bytes)
{
    CHECK(!memcmp(a, b, bytes), "%s: the emulated cuda kernel differs from the reference", what);
}

static void near(const char *what, const double *a, const double *b, size_t n, double tol)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs(a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    CHECK(e <= tol * (m > 0 ? m : 1), "%s: max diff %.3g of %.3g > %g relative", what, e, m,
          tol);
}

/* ck_round_bf16 against gpud/bf16.c on ties, NaNs, infinities, overflow,
 * subnormals and random bit patterns. */
static void check_round(void)
{
    enum { N = 4096 };
    static float x[N], a[N], b[N];
    uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                          0xffc00001u, 0x7f7fffffu, 0x00000001u, 0x00008000u, 0x80018000u,
                          0x7f7f8000u, 0x3f80ffffu, 0x00000000u, 0x80000000u};
    for (size_t i = 0; i < N; i++) {
        uint32_t u = i < sizeof special / sizeof *special ? special[i] : (uint32_t)(rng >> 32);
        frand();
        memcpy(&x[i], &u, sizeof u);
    }
    CHECK(ck_round_bf16(0, x, N, a) == cudaSuccess, "launch");
    bf16_round(b, x, N);
    same("round_bf16", a, b, sizeof a);
    memcpy(a, x, sizeof a);   /* in place */
    CHECK(ck_round_bf16(0, a, N, a) == cudaSuccess, "launch");
    same("round_bf16 in place", a, b, sizeof a);
    /* fp16: the kernel's copy of fp16_math.h against the host's (fp16
     * cases: 65520 -> inf, a subnormal tie, 2^-25 -> 0) */
    uint32_t half_cases[] = {0x477ff000u, 0x477fefffu, 0x33c00000u, 0x33000000u, 0x38800000u,
                             0x387fffffu, 0x3f801000u, 0x3f803000u};
    for (size_t i = 0; i < sizeof half_cases / sizeof *half_cases; i++)
        memcpy(&x[N - 1 - i], &half_cases[i], sizeof *x);
    CHECK(ck_round_fp16(0, x, N, a) == cudaSuccess, "launch");
    fp16_round(b, x, N);
    same("round_fp16", a, b, sizeof a);
    memcpy(a, x, sizeof a);
    CHECK(ck_round_fp16(0, a, N, a) == cudaSuccess, "launch");
    same("round_fp16 in place", a, b, sizeof a);
    /* the unscale: a power of two, each float alone, as the host arena's */
    memcpy(a, x, sizeof a);
    CHECK(ck_scale(0, a, N, 0x1p-16f) == cudaSuccess, "launch");
    for (size_t i = 0; i < N; i++)
        b[i] = x[i] * 0x1p-16f;
    same("scale", a, b, sizeof a);
}

static void check_elementwise(void)
{
    enum { N = 3000 };
    float *x = randv(N, 2, 0), *y = randv(N, 2, 0), *g = randv(N, 1, 0);
    static float a[N], b[N];
    CHECK(ck_relu(0, a, x, N) == cudaSuccess, "launch");
    memcpy(b, x, sizeof b);
    ref_relu(b, N);
    same("relu", a, b, sizeof a);
    CHECK(ck_relu_bwd(0, a, y, g, N) == cudaSuccess, "launch");
    ref_relu_bwd(y, g, b, N);
    same("relu backward", a, b, sizeof a);
    backend_t one = {.threads = 1};   /* the host kernels' thread count */
    CHECK(ck_add(0, a, x, y, N, 1) == cudaSuccess, "launch");
    hk_add(&one, b, x, y, N, 1);
    same("add + relu", a, b, sizeof a);
    memcpy(a, x, sizeof a);
    memcpy(b, x, sizeof b);
    CHECK(ck_acc(0, a, y, N) == cudaSuccess, "launch");
    hk_acc(&one, b, y, N);
    same("accumulate", a, b, sizeof a);
    free(x);
    free(y);
    free(g);
}

static void check_pool16(int alg, const float *x, const float *gy, int NB, int C, int IH,
                         int IW, const ck_pool_t *p);

/* Sizes over test_cuemu's grid stride (768): the index walks take several
 * steps. C = 7: the 16-bit kernels a thread an element; C = 16 (NB = 24):
 * eight channels a thread (k_pool8, k16_pool_bwd8). */
static void check_pool(int alg, int C, int NB)
{
    enum { IH = 9, IW = 7, K = 3, S = 2, P = 1 };
    int oh = (IH + 2 * P - K) / S + 1, ow = (IW + 2 * P - K) / S + 1;
    size_t nx = (size_t)NB * C * IH * IW, ny = (size_t)NB * C * oh * ow;
    float *x = randv(nx, 1, 0), *gy = randv(ny, 1, 0);
    float *a = calloc(nx, 4), *b = calloc(nx, 4);
    REQUIRE(a && b, "alloc");
    x[5] = x[6];   /* a tie: the first maximum takes the gradient */
    ck_pool_t p = {NB * C, IH, IW, oh, ow, K, K, S, S, P, P, alg};
    CHECK(ck_pool_fwd(0, &p, x, a) == cudaSuccess, "launch");
    if (alg == 0)
        ref_maxpool2d(x, NB, C, IH, IW, K, K, S, S, P, P, b, oh, ow);
    else
        ref_avgpool2d(x, NB, C, IH, IW, K, K, S, S, P, P, alg == 1, b, oh, ow);
    same(alg ? "avg pool" : "max pool", a, b, ny * 4);
    CHECK(ck_pool_bwd(0, &p, x, gy, a) == cudaSuccess, "launch");
    if (alg == 0)
        ref_maxpool2d_bwd(x, gy, NB, C, IH, IW, K, K, S, S, P, P, b, oh, ow);
    else
        ref_avgpool2d_bwd(gy, NB, C, IH, IW, K, K, S, S, P, P, alg == 1, b, oh, ow);
    same(alg ? "avg pool backward" : "max pool backward", a, b, nx * 4);
    check_pool16(alg, x, gy, NB, C, IH, IW, &p);
    free(x);
    free(gy);
    free(a);
    free(b);
}

/* The 16-bit NHWC pooling (ckb_pool, ckb_pool_bwd) is the fp32 NCHW one
 * (ck_pool_fwd, ck_pool_bwd) on the bf16-rounded values, rounded once. */
static void nchw_to_nhwc16(const float *x, int NB, int C, int HW, uint16_t *y)
{
    for (int b = 0; b < NB; b++)
        for (int ch = 0; ch < C; ch++)
            for (int q = 0; q < HW; q++)
                y[((size_t)b * HW + q) * C + ch] = bf16_pack(x[((size_t)b * C + ch) * HW + q]);
}

static void check_pool16(int alg, const float *x, const float *gy, int NB, int C, int IH,
                         int IW, const ck_pool_t *p)
{
    size_t nx = (size_t)NB * C * IH * IW, ny = (size_t)NB * C * p->oh * p->ow;
    float *xr = malloc(nx * 4), *gyr = malloc(ny * 4), *f = malloc(nx * 4);
    uint16_t *hx = malloc(nx * 2), *hgy = malloc(ny * 2), *h = malloc(nx * 2);
    uint16_t *want = malloc(nx * 2);
    REQUIRE(xr && gyr && f && hx && hgy && h && want, "alloc");
    bf16_round(xr, x, nx);
    bf16_round(gyr, gy, ny);
    nchw_to_nhwc16(xr, NB, C, IH * IW, hx);
    nchw_to_nhwc16(gyr, NB, C, p->oh * p->ow, hgy);
    uint8_t *win = alg == 0 ? malloc(ny) : NULL;
    REQUIRE(alg != 0 || win, "alloc");
    CHECK(ck_pool_fwd(0, p, xr, f) == cudaSuccess &&
              ckb_pool(0, 0, p, C, hx, h, win) == cudaSuccess,
          "launch");
    nchw_to_nhwc16(f, NB, C, p->oh * p->ow, want);
    same(alg ? "bf16 avg pool" : "bf16 max pool", h, want, ny * 2);
    CHECK(ck_pool_bwd(0, p, xr, gyr, f) == cudaSuccess, "launch");
    nchw_to_nhwc16(f, NB, C, IH * IW, want);
    /* max: with the forward's saved choices, and finding them again */
    for (int saved = alg == 0; saved >= 0; saved--) {
        CHECK(ckb_pool_bwd(0, 0, p, C, hx, hgy, h, saved ? win : NULL) == cudaSuccess, "launch");
        same(alg ? "bf16 avg pool backward"
                 : saved ? "bf16 max pool backward (saved choices)" : "bf16 max pool backward",
             h, want, nx * 2);
    }
    free(win);
    free(xr);
    free(gyr);
    free(f);
    free(hx);
    free(hgy);
    free(h);
    free(want);
}

static void check_dropout_ce(void)
{
    enum { NB = 3, C = 4, HW = 5, K = 7 };
    size_t n = (size_t)NB * C * HW;
    float *x = randv(n, 1, 0), *a = calloc(n, 4), *b = calloc(n, 4);
    int64_t ids[NB] = {17, 4, 99};
    int s[4] = {NB, C, HW, 1};
    REQUIRE(a && b, "alloc");
    uint64_t keys[NB];
    for (int i = 0; i < NB; i++)
        keys[i] = dropout_sample_key(7, 11, ids[i]);
    CHECK(ck_dropout(0, a, x, NB, (size_t)C * HW, 0.3f, 2, keys) == cudaSuccess, "launch");
    hk_dropout(b, x, s, 0.3f, 2, keys, 0);
    same("dropout", a, b, n * 4);
    /* and the reference's key of (seed, step, id, op), composed anew */
    size_t off = 0;
    for (int i = 0; i < NB; i++)
        for (size_t e = 0; e < (size_t)C * HW; e++, off++)
            b[off] = ref_dropout_keep(ref_dropout_key(7, 11, ids[i], 2), e, 0.3f)
                         ? x[off] * (1.0f / (1.0f - 0.3f)) : 0.0f;
    same("dropout vs ref_dropout_key", a, b, n * 4);
    float *lg = randv(NB * K, 3, 0), la[NB], lb[NB], dl[NB] = {0.5f, 1, 2};
    float *ga = calloc(NB * K, 4), *gb = calloc(NB * K, 4);
    int32_t labels[NB] = {1, 6, 0};
    REQUIRE(ga && gb, "alloc");
    CHECK(ck_ce_fwd(0, lg, labels, NB, K, 0.1f, la) == cudaSuccess, "launch");
    ref_ce_fwd(lg, labels, NB, K, 0.1f, lb);
    same("cross-entropy", la, lb, sizeof la);
    CHECK(ck_ce_bwd(0, lg, labels, NB, K, 0.1f, dl, ga) == cudaSuccess, "launch");
    ref_ce_bwd(lg, labels, NB, K, 0.1f, dl, gb);
    same("cross-entropy backward", ga, gb, NB * K * 4);
    free(x);
    free(a);
    free(b);
    free(lg);
    free(ga);
    free(gb);
}

/* Training BatchNorm on the device (bk_kernels_t.bn_train_*): every kernel
 * of cuda_train.c's sequence against the host path's (tape_bn.c with the
 * ref kernels: hk_*, bn_math.h), far from zero mean to make the sums'
 * precision matter; one slice a channel, and several. */
static void check_batchnorm(int NB, int HW)
{
    enum { C = 5 };
    size_t n = (size_t)NB * C * HW;
    int s[4] = {NB, C, HW, 1};
    double cnt = (double)NB * HW;
    float *x = randv(n, 3, 40), *gy = randv(n, 1, 0), *gamma = randv(C, 0.5f, 1);
    float *beta = randv(C, 0.5f, 0), *y = calloc(n, 4), *yr = calloc(n, 4);
    float *gx = calloc(n, 4), *gxr = calloc(n, 4);
    REQUIRE(y && yr && gx && gxr, "alloc");
    double sa[2 * C], sb[2 * C], *part = malloc(2 * C * ck_sum_parts(cnt) * sizeof *part);
    REQUIRE(part, "alloc");
    float stat[2 * C], mean[C], var[C];

    CHECK(ck_chan_sums(0, x, NB, C, HW, NULL, sa, part) == cudaSuccess, "launch");
    hk_chan_sums(x, s, NULL, sb, 0, 1);
    near("channel sums", sa, sb, C, 1e-12);
    memcpy(sa, sb, sizeof sb);   /* the same sums from here: the steps must agree exactly */
    CHECK(ck_bn_stat(0, sa, C, cnt, stat) == cudaSuccess, "launch");
    for (int i = 0; i < C; i++)
        mean[i] = bnm_stat(sb[i], cnt);
    same("batch mean", stat, mean, sizeof mean);
    CHECK(ck_chan_sums(0, x, NB, C, HW, mean, sa, part) == cudaSuccess, "launch");
    hk_chan_sums(x, s, mean, sb, 0, 1);
    near("centred sums", sa, sb, C, 1e-12);
    CHECK(ck_bn_stat(0, sb, C, cnt, stat + C) == cudaSuccess, "launch");
    for (int i = 0; i < C; i++)
        var[i] = bnm_stat(sb[i], cnt);
    same("batch variance", stat + C, var, sizeof var);

    float rm[C], rv[C], rm2[C], rv2[C];
    for (int i = 0; i < C; i++)
        rm[i] = rm2[i] = frand(), rv[i] = rv2[i] = 1.0f + frand() * frand();
    CHECK(ck_bn_running(0, rm, rv, stat, C, 0.1f, bnm_unbias(cnt)) == cudaSuccess, "launch");
    for (int i = 0; i < C; i++) {
        rm2[i] = bnm_running(rm2[i], mean[i], 0.1f, 1.0);
        rv2[i] = bnm_running(rv2[i], var[i], 0.1f, bnm_unbias(cnt));
    }
    same("running mean", rm, rm2, sizeof rm);
    same("running variance", rv, rv2, sizeof rv);

    CHECK(ck_bn_apply(0, y, x, NB, C, HW, gamma, beta, mean, var, 1e-5f, 1, NULL) == cudaSuccess,
          "launch");
    ref_bn_eval_fwd(x, NB, C, HW, gamma, beta, mean, var, 1e-5f, yr);
    ref_relu(yr, n);
    double dy = 0, my = 0;
    for (size_t i = 0; i < n; i++)
        dy = fmax(dy, fabs((double)y[i] - yr[i])), my = fmax(my, fabs((double)yr[i]));
    CHECK(dy <= 1e-6 * my, "normalised (+ ReLU): max diff %.3g of %.3g", dy, my);

    CHECK(ck_bn_grad_sums(0, x, y, gy, NULL, NULL, NB, C, HW, mean, sa, part) == cudaSuccess,
          "launch");
    hk_bn_grad_sums(x, y, gy, s, 1, 1.0f, mean, sb, 0, 1);
    near("gradient sums", sa, sb, 2 * C, 1e-12);
    {   /* gy's last term (the tape's fold): ck_acc's sum, then the same kernel */
        float *g1 = malloc(n * 4), *g2 = malloc(n * 4), *go = malloc(n * 4), *go2 = malloc(n * 4);
        double s1[2 * C];
        REQUIRE(g1 && g2 && go && go2, "alloc");
        for (size_t i = 0; i < n; i++)
            g1[i] = gy[i], g2[i] = frand() - 0.5f;
        CHECK(ck_acc(0, g1, g2, n) == cudaSuccess, "launch");
        CHECK(ck_bn_grad_sums(0, x, y, g1, NULL, go2, NB, C, HW, mean, s1, part) == cudaSuccess &&
                  ck_bn_grad_sums(0, x, y, gy, g2, go, NB, C, HW, mean, sa, part) ==
                      cudaSuccess, "launch");
        same("gradient sums with gy's last term", sa, s1, sizeof s1);
        same("dy' stored with gy's last term", go, go2, n * 4);
        CHECK(ck_bn_grad_sums(0, x, y, gy, g2, NULL, NB, C, HW, mean, sa, part) ==
                  cudaErrorInvalidValue, "gy's last term taken without gout");
        free(g1), free(g2), free(go), free(go2);
    }
    memcpy(sa, sb, sizeof sb);
    float coef[3 * C], gg[C], gbt[C], co[3 * C], gg2[C], gbt2[C];
    CHECK(ck_bn_grad_finish(0, sa, C, gamma, var, 1e-5f, cnt, gg, gbt, coef) == cudaSuccess,
          "launch");
    for (int i = 0; i < C; i++) {
        sb[C + i] /= bnm_std(var[i], 1e-5f);
        gg2[i] = (float)sb[C + i];
        gbt2[i] = (float)sb[i];
        bnm_coeffs(gamma[i], var[i], 1e-5f, sb[i], sb[C + i], cnt, &co[i], &co[C + i],
                   &co[2 * C + i]);
    }
    same("gamma gradient", gg, gg2, sizeof gg);
    same("beta gradient", gbt, gbt2, sizeof gbt);
    same("input-gradient coefficients", coef, co, sizeof co);
    near("scaled gradient sums", sa, sb, 2 * C, 0);
    CHECK(ck_bn_grad_apply(0, gx, x, y, gy, NB, C, HW, mean, coef, coef + C, coef + 2 * C) ==
              cudaSuccess, "launch");
    hk_bn_grad_apply(gxr, x, y, gy, s, 1, 1.0f, mean, co, co + C, co + 2 * C, 0, 1);
    same("input gradient", gx, gxr, n * 4);
    free(x);
    free(gy);
    free(gamma);
    free(beta);
    free(y);
    free(yr);
    free(gx);
    free(gxr);
    free(part);
}

/* The bf16 inference plan's layout kernels (cuda_infer_kernels.cu): NCHW
 * floats into NHWC bf16 and back are bf16_round and a permutation; a bf16
 * add + ReLU and max pooling of bf16 values equal the fp32 ones rounded;
 * the flatten is NCHW order. bf16 is 2 bytes: uint16_t here. */
static void bf16_to_f(const uint16_t *h, float *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&f[i], &u, sizeof u);
    }
}

static void check_bf16_layout(void)
{
    enum { NB = 2, C = 3, HW = 10 };
    size_t n = (size_t)NB * C * HW;
    float *x = randv(n, 5, 0), *y = randv(n, 5, 0);
    float r[NB * C * HW], back[NB * C * HW], want[NB * C * HW], t[NB * C * HW];
    uint16_t hx[NB * C * HW], hy[NB * C * HW], hz[NB * C * HW];
    CHECK(ckb_from_nchw(0, 0, x, NB, C, HW, hx) == cudaSuccess, "launch");
    CHECK(ckb_to_nchw(0, 0, hx, NB, C, HW, back) == cudaSuccess, "launch");
    bf16_round(r, x, n);
    same("NCHW float -> NHWC bf16 -> NCHW", back, r, sizeof r);
    bf16_to_f(hx, t, n);   /* NHWC order: element (b, c, p) at (b * HW + p) * C + c */
    for (int b = 0; b < NB; b++)
        for (int c = 0; c < C; c++)
            for (int p = 0; p < HW; p++)
                want[((size_t)b * HW + p) * C + c] = r[((size_t)b * C + c) * HW + p];
    same("NHWC bf16 layout", t, want, sizeof want);
    /* uint8 pixels through a table straight into the NHWC bf16 input: the
     * bits of the host's floats (lut of each byte) through ckb_from_nchw */
    {
        uint8_t px[NB * C * HW];
        float lut[C * 256], fx[NB * C * HW];
        uint16_t hu[NB * C * HW], hf[NB * C * HW];
        for (int i = 0; i < C * 256; i++)
            lut[i] = ((float)(i % 256) / 255.0f - 0.3f * (float)(i / 256)) / 0.229f;
        for (size_t i = 0; i < n; i++)
            px[i] = (uint8_t)(i * 97u + 13u);
        for (size_t i = 0; i < n; i++)
            fx[i] = lut[(i / HW) % C * 256 + px[i]];
        CHECK(ckb_from_u8(0, 0, px, NB, C, HW, lut, hu) == cudaSuccess, "launch");
        CHECK(ckb_from_nchw(0, 0, fx, NB, C, HW, hf) == cudaSuccess, "launch");
        same("uint8 -> NHWC bf16 input", hu, hf, sizeof hu);
    }
    CHECK(ckb_flatten(0, 0, hx, NB, C, HW, hz) == cudaSuccess, "launch");
    bf16_to_f(hz, t, n);
    same("bf16 flatten (NCHW order)", t, r, sizeof r);
    CHECK(ckb_from_nchw(0, 0, y, NB, C, HW, hy) == cudaSuccess, "launch");
    CHECK(ckb_add(0, 0, hz, hx, hy, n, 1) == cudaSuccess, "launch");
    float ry[NB * C * HW];
    bf16_round(ry, y, n);
    bf16_to_f(hz, t, n);
    for (int b = 0; b < NB; b++)   /* want: NHWC of bf16(relu(bf16(x) + bf16(y))) */
        for (int c = 0; c < C; c++)
            for (int p = 0; p < HW; p++) {
                size_t i = ((size_t)b * C + c) * HW + p;
                float v = r[i] + ry[i];
                want[((size_t)b * HW + p) * C + c] = v > 0 ? v : 0;
            }
    bf16_round(want, want, n);
    same("bf16 add + ReLU", t, want, sizeof want);
    free(x);
    free(y);
}

/* Cross-entropy with a block a sample (k <= 4096) and a thread a sample
 * (past it) against ref's, bit for bit: k over the block's 128 threads,
 * ties and a signed zero at the maximum. */
static void check_ce_sizes(void)
{
    static const int ks[3] = {1000, 129, 5000};
    for (int j = 0; j < 3; j++) {
        enum { NB = 5 };
        int K = ks[j];
        float *lg = randv((size_t)NB * K, 4, 0), la[NB], lb[NB], dl[NB] = {0.5f, 1, 2, 0.25f, 3};
        float *ga = calloc((size_t)NB * K, 4), *gb = calloc((size_t)NB * K, 4);
        int32_t labels[NB] = {1, K - 1, 0, K / 2, 7};
        REQUIRE(lg && ga && gb, "alloc");
        lg[3] = lg[K - 2] = 9.0f;   /* a tie at sample 0's maximum */
        lg[K + 5] = 0.0f;            /* sample 1: its maximum a zero of each sign */
        lg[K + 9] = -0.0f;
        for (int c = 0; c < K; c++)
            if (c != 5 && c != 9)
                lg[K + c] = -1.0f - (float)c;
        char what[64];
        CHECK(ck_ce_fwd(0, lg, labels, NB, K, 0.1f, la) == cudaSuccess, "launch");
        ref_ce_fwd(lg, labels, NB, K, 0.1f, lb);
        snprintf(what, sizeof what, "cross-entropy, %d classes", K);
        same(what, la, lb, sizeof la);
        CHECK(ck_ce_bwd(0, lg, labels, NB, K, 0.1f, dl, ga) == cudaSuccess, "launch");
        ref_ce_bwd(lg, labels, NB, K, 0.1f, dl, gb);
        snprintf(what, sizeof what, "cross-entropy backward, %d classes", K);
        same(what, ga, gb, (size_t)NB * K * 4);
        free(lg);
        free(ga);
        free(gb);
    }
}

/* ck_topk_ce against model_topk_ce, ids and losses bit for bit: a block a
 * sample (1,000 classes over 128 threads, 11, 129), and a thread a sample
 * (past 4,096 classes, past 64 ids). Ties within and across threads'
 * classes, NaNs (ranked first, by id), an infinity, labels out of range. */
static void check_topk_sizes(void)
{
    static const struct {
        int classes, k;
    } cases[] = {{1000, 5}, {11, 5}, {129, 64}, {5000, 5}, {300, 65}};
    for (size_t j = 0; j < sizeof cases / sizeof cases[0]; j++) {
        enum { NB = 6 };
        int C = cases[j].classes, K = cases[j].k;
        float *lg = randv((size_t)NB * C, 4, 0), la[NB], lb[NB];
        int32_t *ta = malloc((size_t)NB * K * 4), *tb = malloc((size_t)NB * K * 4);
        int32_t labels[NB] = {0, C - 1, -1, C, C / 2, 3 % C};
        REQUIRE(lg && ta && tb, "alloc");
        for (int c = 0; c < C; c++)   /* sample 0: few distinct values, ties everywhere */
            lg[c] = (float)((c * 37) % 13) * 0.25f - 1.0f;
        lg[C + C / 3] = NAN;           /* sample 1: two NaNs, ranked first by id */
        lg[C + 2 * C / 3] = NAN;
        lg[4 * C + C - 1] = INFINITY;  /* sample 4: an infinity (its loss NaN) */
        lg[5 * C + 1] = lg[5 * C + C - 1] = 50.0f;   /* sample 5: a tie at the top */
        memset(tb, 0xa5, (size_t)NB * K * 4);
        model_topk_ce(lg, NB, C, labels, K, ta, la);
        CHECK(ck_topk_ce(0, lg, NB, C, labels, K, tb, lb) == cudaSuccess, "launch");
        CHECK(memcmp(ta, tb, (size_t)NB * K * 4) == 0, "top-%d of %d classes: ids differ from "
              "model_topk_ce's", K, C);
        char what[64];
        snprintf(what, sizeof what, "top-k loss, %d classes", C);
        same(what, la, lb, sizeof la);
        CHECK(ck_topk_ce(0, lg, NB, C, NULL, K, tb, NULL) == cudaSuccess, "launch");
        CHECK(memcmp(ta, tb, (size_t)NB * K * 4) == 0, "top-%d of %d classes without the loss",
              K, C);
        free(lg);
        free(ta);
        free(tb);
    }
}

/* The fp32 BatchNorm passes over NCHW planes (cuda_kernels.cu) against
 * their per-element formula, bit for bit: planes of HW pixels, several a
 * block (HW < THREADS), one a block, or longer than a block. */
static void check_bn_planes(int NB, int HW)
{
    enum { C = 7 };
    size_t n = (size_t)NB * C * HW;
    float *x = randv(n, 3, 1), *gy = randv(n, 1, 0), *y0 = randv(n, 1, 0);
    float *gamma = randv(C, 0.5f, 1), *beta = randv(C, 0.5f, 0), *mean = randv(C, 1, 1);
    float *var = randv(C, 1, 2), *coef = randv(3 * C, 1, 0), *out = malloc(n * 4);
    double sums[2 * C], cnt = (double)NB * HW;
    for (int i = 0; i < 2 * C; i++)
        sums[i] = 100.0 * frand();
    REQUIRE(out, "alloc");
    size_t bad = 0;
    for (int relu = 0; relu < 2; relu++) {
        CHECK(ck_bn_apply(0, out, x, NB, C, HW, gamma, beta, mean, var, 1e-5f, relu, NULL) ==
                  cudaSuccess, "launch");
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            int ch = (int)(i / HW % C);
            double inv = 1.0 / sqrt((double)var[ch] + 1e-5f);
            float v = (float)(((double)x[i] - mean[ch]) * inv * gamma[ch] + beta[ch]);
            bad += memcmp(&out[i], &(float){relu && !(v > 0.0f) ? 0.0f : v}, 4) != 0;
        }
        CHECK(bad == 0, "bn apply (relu %d, %dx%d): %zu of %zu differ", relu, NB, HW, bad, n);
        for (int training = 0; training < 2; training++) {
            const float *mask = relu ? y0 : NULL;
            CHECK(ck_bn_bwd_data(0, out, x, mask, gy, NB, C, HW, gamma, mean, var, 1e-5f,
                                 training, sums) == cudaSuccess, "launch");
            bad = 0;
            for (size_t i = 0; i < n; i++) {
                int ch = (int)(i / HW % C);
                double inv = 1.0 / sqrt((double)var[ch] + 1e-5f);
                double d = mask && !(mask[i] > 0.0f) ? 0.0f : gy[i];
                if (training) {
                    double xh = (x[i] - (double)mean[ch]) * inv;
                    d = d - sums[ch] / cnt - xh * sums[C + ch] / cnt;
                }
                bad += memcmp(&out[i], &(float){(float)(d * gamma[ch] * inv)}, 4) != 0;
            }
            CHECK(bad == 0, "bn backward data (relu %d, training %d, %dx%d): %zu of %zu differ",
                  relu, training, NB, HW, bad, n);
        }
        CHECK(ck_bn_grad_apply(0, out, x, relu ? y0 : NULL, gy, NB, C, HW, mean, coef, coef + C,
                               coef + 2 * C) == cudaSuccess, "launch");
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            int ch = (int)(i / HW % C);
            float g = relu && !(y0[i] > 0.0f) ? 0.0f : gy[i];
            float v = (float)((double)coef[ch] * g + (double)coef[C + ch] * ((double)x[i] - mean[ch]) +
                              coef[2 * C + ch]);
            bad += memcmp(&out[i], &v, 4) != 0;
        }
        CHECK(bad == 0, "bn grad apply (relu %d, %dx%d): %zu of %zu differ", relu, NB, HW, bad, n);
    }
    memcpy(out, gy, n * 4);
    CHECK(ck_chan_axpb(0, out, x, NB, C, HW, mean, coef, coef + C) == cudaSuccess, "launch");
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        int ch = (int)(i / HW % C);
        float v = gy[i];
        v += (float)((double)coef[ch] * ((double)x[i] - mean[ch]) + coef[C + ch]);
        bad += memcmp(&out[i], &v, 4) != 0;
    }
    CHECK(bad == 0, "chan axpb (%dx%d): %zu of %zu differ", NB, HW, bad, n);
    free(x);
    free(gy);
    free(y0);
    free(gamma);
    free(beta);
    free(mean);
    free(var);
    free(coef);
    free(out);
}

/* The conv epilogues (fp32 NCHW: ck_bias_post; bf16 and fp16 NHWC of
 * padded channels: ckb_epilogue) and the linear's output (ckb_linear_out)
 * against their formula, bit for bit: bias, ReLU, then the residual, over a
 * tensor many grid strides long (test_cuemu's grid cap) whose channels do
 * not divide the stride. */
static void check_epilogues(void)
{
    enum { NB = 3, C = 7, HW = 61, XC = 8 };
    size_t n = (size_t)NB * C * HW;
    float *x = randv(n, 2, 0), *res = randv(n, 2, 0), *bias = randv(C, 1, 0);
    float *y = malloc(n * 4);
    uint16_t *hx = malloc((size_t)NB * HW * XC * 2), *hres = malloc(n * 2), *hy = malloc(n * 2);
    REQUIRE(y && hx && hres && hy, "alloc");
    ck_post_t post = {2, {1, 2}};
    CHECK(ck_bias_post(0, y, x, bias, NB, C, HW, post, res) == cudaSuccess, "launch");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] + bias[i / HW % C];
        v = v > 0.0f ? v : 0.0f;
        v += res[i];
        bad += memcmp(&y[i], &v, 4) != 0;
    }
    CHECK(bad == 0, "fp32 conv epilogue: %zu of %zu differ", bad, n);
    for (int h = 0; h < 2; h++) {
        const char *f = h ? "fp16" : "bf16";
        for (size_t i = 0; i < (size_t)NB * HW * XC; i++)
            hx[i] = pack16(h, x[i % n]);
        for (size_t i = 0; i < n; i++)
            hres[i] = pack16(h, res[i]);
        CHECK(ckb_epilogue(0, h, hy, hx, XC, bias, n, C, post, hres) == cudaSuccess, "launch");
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            float v = unpack16(h, hx[(i / C) * XC + i % C]) + bias[i % C];
            v = v > 0.0f ? v : 0.0f;
            v += unpack16(h, hres[i]);
            bad += hy[i] != pack16(h, v);
        }
        CHECK(bad == 0, "%s conv epilogue: %zu of %zu differ", f, bad, n);
        /* the linear's fp32 sums [NB * HW, C] + bias, rounded once */
        CHECK(ckb_linear_out(0, h, hy, x, bias, NB * HW, C) == cudaSuccess, "launch");
        bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += hy[i] != pack16(h, x[i] + bias[i % C]);
        CHECK(bad == 0, "%s linear output: %zu of %zu differ", f, bad, n);
    }
    /* the input: uint8 NCHW pixels through each channel's table, as fp32
     * NCHW and as bf16 NHWC */
    uint8_t *px = malloc(n);
    float *lut = randv(C * 256, 2, 0);
    REQUIRE(px && lut, "alloc");
    for (size_t i = 0; i < n; i++)
        px[i] = (uint8_t)(i * 37 + i / 5);
    CHECK(ck_u8_normalize(0, px, NB, C, HW, lut, y) == cudaSuccess, "launch");
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&y[i], &lut[(i / HW % C) * 256 + px[i]], 4) != 0;
    CHECK(bad == 0, "u8 normalise: %zu of %zu differ", bad, n);
    CHECK(ckb_from_u8(0, 0, px, NB, C, HW, lut, hy) == cudaSuccess, "launch");
    bad = 0;
    for (size_t i = 0; i < n; i++) {   /* i: NHWC (b, p, ch) */
        size_t ch = i % C, p = i / C % HW, b = i / ((size_t)C * HW);
        bad += hy[i] != bf16_pack(lut[ch * 256 + px[(b * C + ch) * HW + p]]);
    }
    CHECK(bad == 0, "u8 to bf16 NHWC: %zu of %zu differ", bad, n);
    free(px);
    free(lut);
    free(x);
    free(res);
    free(bias);
    free(y);
    free(hx);
    free(hres);
    free(hy);
}

/* The one-block-a-channel statistics (ck_bn_stats, ck_bn_bwd_sums) against
 * the same sums in the same order: thread t adds elements t, t + THREADS,
 * ... of its channel, then the block's tree. */
static double block_tree(double *v)
{
    for (int k = 128; k > 0; k >>= 1)
        for (int t = 0; t < k; t++)
            v[t] += v[t + k];
    return v[0];
}

static void check_bn_stats(int NB, int HW)
{
    enum { C = 3 };
    size_t n = (size_t)NB * C * HW, cnt = (size_t)NB * HW;
    float *x = randv(n, 3, 1), *gy = randv(n, 1, 0), *mean = malloc(C * 4), *var = malloc(C * 4);
    double sums[2 * C], acc[256], acc2[256];
    REQUIRE(mean && var, "alloc");
    CHECK(ck_bn_stats(0, x, NB, C, HW, mean, var) == cudaSuccess, "launch");
    for (int ch = 0; ch < C; ch++) {
        memset(acc, 0, sizeof acc);
        for (size_t j = 0; j < cnt; j++)
            acc[j % 256] += x[((j / HW) * C + ch) * HW + j % HW];
        double m = block_tree(acc) / (double)cnt;
        memset(acc, 0, sizeof acc);
        for (size_t j = 0; j < cnt; j++) {
            double d = x[((j / HW) * C + ch) * HW + j % HW] - m;
            acc[j % 256] += d * d;
        }
        float fm = (float)m, fv = (float)(block_tree(acc) / (double)cnt);
        CHECK(!memcmp(&mean[ch], &fm, 4) && !memcmp(&var[ch], &fv, 4),
              "bn stats channel %d (%dx%d): %g %g, want %g %g", ch, NB, HW, mean[ch], var[ch],
              fm, fv);
    }
    CHECK(ck_bn_bwd_sums(0, x, x, gy, NB, C, HW, mean, var, 1e-5f, sums) == cudaSuccess,
          "launch");
    for (int ch = 0; ch < C; ch++) {
        double inv = 1.0 / sqrt((double)var[ch] + 1e-5f);
        memset(acc, 0, sizeof acc);
        memset(acc2, 0, sizeof acc2);
        for (size_t j = 0; j < cnt; j++) {
            size_t at = ((j / HW) * C + ch) * HW + j % HW;
            double g = !(x[at] > 0.0f) ? 0.0f : gy[at];
            acc[j % 256] += g;
            acc2[j % 256] += g * ((x[at] - (double)mean[ch]) * inv);
        }
        double sg = block_tree(acc), sgx = block_tree(acc2);
        CHECK(!memcmp(&sums[ch], &sg, 8) && !memcmp(&sums[C + ch], &sgx, 8),
              "bn backward sums channel %d (%dx%d)", ch, NB, HW);
    }
    free(x);
    free(gy);
    free(mean);
    free(var);
}

int main(void)
{
    check_round();
    check_elementwise();
    check_ce_sizes();
    check_topk_sizes();
    check_pool(0, 7, 6);
    check_pool(0, 16, 24);
    check_pool(1, 7, 6);
    check_pool(1, 16, 24);
    check_pool(2, 7, 6);
    check_pool(2, 16, 24);
    check_dropout_ce();
    check_batchnorm(3, 37);      /* one slice a channel */
    check_batchnorm(8, 1500);    /* 3 slices of 4000 a channel (ck_sum_parts) */
    check_epilogues();
    check_bn_stats(3, 37);      /* a thread's elements cross planes */
    check_bn_stats(2, 700);
    check_bn_planes(3, 37);     /* 6 planes a block */
    check_bn_planes(2, 1);      /* 256 planes a block, fewer in the grid */
    check_bn_planes(5, 256);    /* one plane a block */
    check_bn_planes(2, 1500);   /* a plane longer than a block */
    check_bf16_layout();
    tc_failures += check_bn16_all();
    tc_failures += check_elementwise16();
    tc_failures += check_s2d();
    tc_failures += check_device_arena();
    tc_failures += check_device_optims();
    tc_failures += check_arena_optims();
    tc_failures += check_device_xsum();
    tc_failures += check_resize_kernels();
    return tc_done("test_cuemu");
}
