/* arena_checks — see arena_checks.h. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpud/backend_arena.h"
#include "gpud/cuda/cuda_optim.h"
#include "gpud/optim/optim.h"
#include "../golden_io.h"
#include "../trand.h"
#include "arena_checks.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void)
{
    return trand(&rng);
}

/* The device optimizer against optim.c, 3 steps, several configurations. */
static void check_optim(optim_kind_t kind, double wd, double mom, bool nesterov, bool ams,
                        bool grad_avg)
{
    enum { M = 1000 };
    char err[256] = "";
    optim_cfg_t cfg = optim_cfg_default(kind);
    cfg.weight_decay = wd;
    cfg.momentum = mom;
    cfg.nesterov = nesterov;
    cfg.amsgrad = ams;
    cfg.grad_averaging = grad_avg;
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
            cudaMalloc((void **)&dsum, 8) == cudaSuccess, "cudaMalloc");
    cuda_oparam_t p = {.w = dev, .g = dev + M, .buf = dev + 2 * M, .sq = dev + 3 * M,
                       .sq_max = dev + 4 * M, .numel = M, .decay = true, .dsum = dsum};
    REQUIRE(cudaMemcpy(dev, wd_host, M * 4, cudaMemcpyHostToDevice) == cudaSuccess, "copy");
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < M; i++)
            g[i] = frand() * (i % 7 == 0 ? 0.0f : 1.0f);
        REQUIRE(cudaMemcpy(dev + M, g, M * 4, cudaMemcpyHostToDevice) == cudaSuccess, "copy");
        optim_step(o, 0.05);
        CHECK(cuda_optim_step(&cfg, &p, 0.05, NULL, err, sizeof err) == 0, "%s", err);
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
    const bk_arena_ops_t *a = &cuda_device_arena;
    float *x = a->alloc(M), *y = a->alloc(M);
    REQUIRE(x && y, "cuda_device_arena.alloc");
    for (int i = 0; i < M; i++)
        h[i] = frand();
    int64_t at = 0;
    CHECK(a->write(x, 0, M, h) == 0 && a->find_nonfinite(x, 0, M, &at) == 0 && at == -1,
          "finite data: scan gave %lld", (long long)at);
    h[4321] = INFINITY;
    h[777] = NAN;
    CHECK(a->write(x, 0, M, h) == 0 && a->find_nonfinite(x, 0, M, &at) == 0 && at == 777,
          "NaN at 777: scan gave %lld", (long long)at);
    CHECK(a->find_nonfinite(x, 1000, M - 1000, &at) == 0 && at == 4321 - 1000,
          "inf at 4321, scan from 1000: gave %lld", (long long)at);
    CHECK(a->find_nonfinite(x, 778, 4321 - 778, &at) == 0 && at == -1,
          "finite range: scan gave %lld", (long long)at);
    CHECK(a->copy(y, 10, x, 20, 100) == 0 && a->read(y, 10, 100, back) == 0 &&
          memcmp(back, h + 20, 100 * 4) == 0, "device copy differs");
    CHECK(a->zero(y, 10, 50) == 0 && a->read(y, 0, 200, back) == 0 && back[9] == 0.0f &&
          back[10] == 0.0f && back[59] == 0.0f && back[60] == h[70], "device zero");
    a->free(x);
    a->free(y);
    printf("device arena: read/write, copy, zero, non-finite scan\n");
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
