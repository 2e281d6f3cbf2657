/* arena_checks — see arena_checks.h. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpud/backend_arena.h"
#include "gpud/cuda/cuda_arena.h"
#include "gpud/cuda/cuda_optim.h"
#include "gpud/cuda/cuda_optim_kernels.h"
#include "gpud/optim/optim_host.h"
#include "gpud/optim/optim.h"
#include "../golden_io.h"
#include "../trand.h"
#include "arena_checks.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void)
{
    return trand(&rng);
}

static optim_cfg_t cfg_of(optim_kind_t kind, double wd, double mom, bool nesterov, bool ams,
                          bool grad_avg)
{
    optim_cfg_t cfg = optim_cfg_default(kind);
    cfg.weight_decay = wd;
    cfg.momentum = mom;
    cfg.nesterov = nesterov;
    cfg.amsgrad = ams;
    cfg.grad_averaging = grad_avg;
    return cfg;
}

/* The device optimizer against optim.c, 3 steps, several configurations. */
static void check_optim(optim_kind_t kind, double wd, double mom, bool nesterov, bool ams,
                        bool grad_avg)
{
    enum { M = 1000 };
    char err[256] = "";
    optim_cfg_t cfg = cfg_of(kind, wd, mom, nesterov, ams, grad_avg);
    optim_t *o = optim_new(&cfg, err, sizeof err);
    REQUIRE(o, "%s", err);
    static float w[M], g[M], wd_host[M];
    for (int i = 0; i < M; i++)
        w[i] = wd_host[i] = frand();
    int64_t shape[1] = {M};
    REQUIRE(optim_add_param(o, "p", w, g, 1, shape, true, err, sizeof err) == 0, "%s", err);
    float *dev = NULL;
    double *dsum = NULL;
    REQUIRE(cudaMalloc((void **)&dev, 5 * M * 4) == cudaSuccess &&
            cudaMemset(dev, 0, 5 * M * 4) == cudaSuccess &&
            cudaMalloc((void **)&dsum, 16) == cudaSuccess, "cudaMalloc");
    bk_oparam_t p = {.w = dev, .g = dev + M, .buf = dev + 2 * M, .sq = dev + 3 * M,
                     .sq_max = dev + 4 * M, .numel = M, .decay = true};
    REQUIRE(cudaMemcpy(dev, wd_host, M * 4, cudaMemcpyHostToDevice) == cudaSuccess, "copy");
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < M; i++)
            g[i] = frand() * (i % 7 == 0 ? 0.0f : 1.0f);
        REQUIRE(cudaMemcpy(dev + M, g, M * 4, cudaMemcpyHostToDevice) == cudaSuccess, "copy");
        optim_step(o, 0.05);
        CHECK(cuda_optim_step(&cfg, &p, 0.05, dsum, NULL, err, sizeof err) == 0, "%s", err);
    }
    REQUIRE(cudaMemcpy(wd_host, dev, M * 4, cudaMemcpyDeviceToHost) == cudaSuccess, "copy");
    double e = golden_rel_err(wd_host, w, M);
    int exact = memcmp(wd_host, w, sizeof w) == 0;
    printf("optim %-8s wd %.0e mom %.1f nesterov %d amsgrad %d: rel err %.2g%s\n",
           optim_kind_name(kind), wd, mom, nesterov, ams, e, exact ? " (bit-exact)" : "");
    /* element-wise kernels are bit-exact; NovoGrad's norm is a parallel sum */
    CHECK(kind == OPTIM_NOVOGRAD ? e <= 1e-6 : exact, "optimizer %s differs: %.3g",
          optim_kind_name(kind), e);
    cudaFree(dev);
    cudaFree(dsum);
    optim_destroy(&o);
}

/* The device arena's own ops: write/read, copy (device to device), zero,
 * and the non-finite scan (first bad index from off, -1 when none). */
int check_device_arena(void)
{
    int before = tc_failures;
    enum { M = 5000 };
    static float h[M], back[M];
    char err[256] = "";
    cuda_arena_t *arena = cuda_arena_new(NULL, err, sizeof err);
    REQUIRE(arena, "cuda_arena_new: %s", err);
    const bk_arena_ops_t *a = cuda_arena_ops(arena);
    void *cx = a->ctx;
    float *x = a->alloc(cx, M), *y = a->alloc(cx, M);
    REQUIRE(x && y, "cuda arena alloc");
    CHECK(a->read(cx, x, 0, M, back) == 0 && back[0] == 0.0f && back[M - 1] == 0.0f,
          "a new arena is not zero");
    for (int i = 0; i < M; i++)
        h[i] = frand();
    int64_t at = 0;
    CHECK(a->write(cx, x, 0, M, h) == 0 && a->find_nonfinite(cx, x, 0, M, &at) == 0 && at == -1,
          "finite data: scan gave %lld", (long long)at);
    h[4321] = INFINITY;
    h[777] = NAN;
    CHECK(a->write(cx, x, 0, M, h) == 0 && a->find_nonfinite(cx, x, 0, M, &at) == 0 &&
          at == 777, "NaN at 777: scan gave %lld", (long long)at);
    CHECK(a->find_nonfinite(cx, x, 1000, M - 1000, &at) == 0 && at == 4321 - 1000,
          "inf at 4321, scan from 1000: gave %lld", (long long)at);
    CHECK(a->find_nonfinite(cx, x, 778, 4321 - 778, &at) == 0 && at == -1,
          "finite range: scan gave %lld", (long long)at);
    CHECK(a->copy(cx, y, 10, x, 20, 100) == 0 && a->read(cx, y, 10, 100, back) == 0 &&
          memcmp(back, h + 20, 100 * 4) == 0, "device copy differs");
    CHECK(a->zero(cx, y, 10, 50) == 0 && a->read(cx, y, 0, 200, back) == 0 && back[9] == 0.0f &&
          back[10] == 0.0f && back[59] == 0.0f && back[60] == h[70], "device zero");
    CHECK(a->scale(cx, y, 60, 10, 0.25f) == 0 && a->read(cx, y, 60, 10, back) == 0 &&
          back[0] == h[70] * 0.25f && back[9] == h[79] * 0.25f, "device scale");
    a->free(cx, x);
    a->free(cx, y);
    cuda_arena_destroy(&arena);
    printf("device arena: read/write, copy, zero, scale, non-finite scan\n");
    return tc_failures - before;
}

/* The arena's optimizer step (cuda_optim_run: SGD and Adam as one
 * multi-tensor launch) against the host arena's, over parameters of
 * several sizes around the chunk (CK_CHUNK), with and without weight
 * decay, 4 steps; with skip, at the third one parameter has no gradient
 * (skipped: its step lags, a group of its own from then on), without it
 * the chunk table is uploaded once (not per step). steps0: each parameter's
 * step count before the first step (distinct counts: more groups than
 * CK_GROUPS, the per-parameter launches). */
static void check_arena_optim(optim_kind_t kind, double wd, double mom, bool nesterov,
                              bool ams, bool steps0, bool skip, cuda_arena_t *arena)
{
    enum { P = 10 };
    static const int64_t SZ[P] = {1, 7, CK_CHUNK, CK_CHUNK + 1, 3 * CK_CHUNK + 5, 1000, 64, 2,
                                  CK_CHUNK - 1, 300};
    char err[256] = "";
    optim_cfg_t cfg = cfg_of(kind, wd, mom, nesterov, ams, false);
    const bk_arena_ops_t *a = cuda_arena_ops(arena);
    void *cx = a->ctx;
    bk_oparam_t hp[P], dp[P];
    float *hv[P][5], *dv[P][5];
    for (int i = 0; i < P; i++) {
        size_t n = (size_t)SZ[i];
        for (int k = 0; k < 5; k++) {
            hv[i][k] = calloc(n, sizeof(float));
            dv[i][k] = a->alloc(cx, n);
            REQUIRE(hv[i][k] && dv[i][k], "alloc");
        }
        for (size_t j = 0; j < n; j++)
            hv[i][0][j] = frand();
        REQUIRE(a->write(cx, dv[i][0], 0, n, hv[i][0]) == 0, "write");
        hp[i] = (bk_oparam_t){.w = hv[i][0], .g = hv[i][1], .buf = hv[i][2], .sq = hv[i][3],
                              .sq_max = ams ? hv[i][4] : NULL, .numel = SZ[i],
                              .decay = i % 3 != 1, .step = steps0 ? i : 0};
        dp[i] = (bk_oparam_t){.w = dv[i][0], .g = dv[i][1], .buf = dv[i][2], .sq = dv[i][3],
                              .sq_max = ams ? dv[i][4] : NULL, .numel = SZ[i],
                              .decay = i % 3 != 1, .step = steps0 ? i : 0};
    }
    cuda_optim_counts_t c0 = cuda_arena_optim_counts(arena);
    for (int s = 0; s < 4; s++) {
        for (int i = 0; i < P; i++) {
            for (int64_t j = 0; j < SZ[i]; j++)
                hv[i][1][j] = frand() * (j % 5 == 0 ? 0.0f : 1.0f);
            REQUIRE(a->write(cx, dv[i][1], 0, (size_t)SZ[i], hv[i][1]) == 0, "write");
            hp[i].g = skip && s == 2 && i == 4 ? NULL : hv[i][1];
            dp[i].g = skip && s == 2 && i == 4 ? NULL : dv[i][1];
        }
        REQUIRE(bk_arena_host.optim_step(NULL, &cfg, 0.05, hp, P, err, sizeof err) == 0, "%s",
                err);
        CHECK(a->optim_step(cx, &cfg, 0.05, dp, P, err, sizeof err) == 0, "%s", err);
    }
    cuda_optim_counts_t c1 = cuda_arena_optim_counts(arena);
    int exact = 1, states = 1;
    double worst = 0;
    static float back[3 * CK_CHUNK + 5];
    for (int i = 0; i < P; i++) {
        REQUIRE(a->read(cx, dv[i][0], 0, (size_t)SZ[i], back) == 0, "read");
        exact &= memcmp(back, hv[i][0], (size_t)SZ[i] * 4) == 0;
        double e = golden_rel_err(back, hv[i][0], (size_t)SZ[i]);
        worst = e > worst ? e : worst;
        states &= hp[i].step == dp[i].step && hp[i].have_buf == dp[i].have_buf;
    }
    unsigned long multi = c1.multi_launches - c0.multi_launches,
                  single = c1.param_launches - c0.param_launches,
                  uploads = c1.table_uploads - c0.table_uploads;
    printf("arena optim %-8s wd %.0e mom %.1f nesterov %d amsgrad %d steps0 %d: rel err %.2g%s, "
           "%lu multi-tensor launches, %lu per-parameter, %lu table uploads\n",
           optim_kind_name(kind), wd, mom, nesterov, ams, steps0, worst,
           exact ? " (bit-exact)" : "", multi, single, uploads);
    CHECK(kind == OPTIM_NOVOGRAD ? worst <= 1e-6 : exact, "arena optimizer %s differs: %.3g",
          optim_kind_name(kind), worst);
    CHECK(states, "arena optimizer %s: step counts differ from the host's",
          optim_kind_name(kind));
    if (kind == OPTIM_NOVOGRAD || steps0)
        CHECK(multi == 0 && single > 0, "%s: expected per-parameter launches (multi %lu)",
              optim_kind_name(kind), multi);
    else
        CHECK(multi == 4 && single == 0, "%s: expected 4 multi-tensor launches, got %lu (and "
              "%lu per parameter)", optim_kind_name(kind), multi, single);
    /* one upload for four steps of one set, or none: a device allocator
     * that hands this set the addresses the last call's set had (a real
     * one does) makes its table the one already there */
    if (!skip && multi)
        CHECK(uploads <= 1, "%s: %lu chunk table uploads for one parameter set",
              optim_kind_name(kind), uploads);
    for (int i = 0; i < P; i++)
        for (int k = 0; k < 5; k++) {
            free(hv[i][k]);
            a->free(cx, dv[i][k]);
        }
}

int check_arena_optims(void)
{
    int before = tc_failures;
    char err[256] = "";
    cuda_arena_t *arena = cuda_arena_new(NULL, err, sizeof err);
    REQUIRE(arena, "cuda_arena_new: %s", err);
    check_arena_optim(OPTIM_SGD, 5e-4, 0.9, false, false, false, true, arena);
    check_arena_optim(OPTIM_SGD, 5e-4, 0.9, true, false, false, false, arena);
    check_arena_optim(OPTIM_SGD, 1e-3, 0.0, false, false, false, true, arena);
    check_arena_optim(OPTIM_ADAM, 1e-2, 0, false, false, false, true, arena);
    check_arena_optim(OPTIM_ADAMW, 1e-2, 0, false, true, false, false, arena);
    check_arena_optim(OPTIM_ADAM, 1e-2, 0, false, false, true, true, arena);
    check_arena_optim(OPTIM_NOVOGRAD, 1e-3, 0, false, true, false, true, arena);
    cuda_arena_destroy(&arena);
    return tc_failures - before;
}

int check_device_optims(void)
{
    int before = tc_failures;
    check_optim(OPTIM_SGD, 5e-4, 0.9, false, false, false);
    check_optim(OPTIM_SGD, 0.0, 0.9, true, false, false);
    check_optim(OPTIM_ADAM, 1e-2, 0, false, false, false);
    check_optim(OPTIM_ADAMW, 1e-2, 0, false, true, false);
    check_optim(OPTIM_NOVOGRAD, 1e-3, 0, false, false, true);
    return tc_failures - before;
}
