/* gpud's NCCL path on a one-rank communicator (docs/CUDA.md "NCCL in
 * gpud"; issue 30 item 4: "a one-rank communicator always"), on one GPU:
 *   - collective_t makes the generation's id on rank 0 and its communicator
 *     at the first sum; a device sum and a host-double sum (SyncBatchNorm's)
 *     of one rank give the values back bit for bit; a new generation aborts
 *     the communicator and makes a new one that sums again; a ring
 *     generation (nccl false) sums doubles on the ring, as before;
 *   - training steps whose gradients go through NCCL_GRAD_SUM's functions
 *     (trainer_set_device_sum: the grads arena summed where it lives, no
 *     host mirror), as one sum after backward and as buckets queued while
 *     backward runs (trainer_set_overlap), end with the same checkpoint
 *     bytes as the same steps on the host ring's path, and copy no
 *     gradient to the host.
 * One rank checks init, the stream order, abort and re-init, not the
 * arithmetic of a sum over ranks (that needs two: gpu-check's two-gpud
 * step). Exits 77 without a device or without NCCL in the build. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend_arena.h"
#include "gpud/collective.h"
#include "gpud/trainer.h"
#include "../tcheck.h"

#define N 4
#define HW 28
#define CLASSES 10

static void sums(void)
{
    char err[512];
    allreduce_t *ar = allreduce_new(0, 1, NULL, NULL, err, sizeof err);
    REQUIRE(ar, "ring of one: %s", err);
    collective_t *c = collective_new(ar);
    REQUIRE(c, "collective_new");
    size_t n = 1000;
    float *host = malloc(n * sizeof *host), *back = malloc(n * sizeof *back), *dev = NULL;
    REQUIRE(host && back && cudaMalloc((void **)&dev, n * sizeof *dev) == cudaSuccess, "alloc");
    for (size_t i = 0; i < n; i++)
        host[i] = (float)i * 0.37f - 100.0f;
    for (uint32_t gen = 0; gen < 2; gen++) {   /* the second aborts the first's communicator */
        ddp_ncclid_t id;
        int rc = collective_generation(c, gen, 0, 1, true, &id, err, sizeof err);
        REQUIRE(rc == 1 && id.gen == gen && id.world == 1, "generation %u: rc %d: %s", gen, rc,
                err);
        CHECK(collective_nccl(c) && !collective_failed(c), "generation %u: not NCCL", gen);
        REQUIRE(cudaMemcpy(dev, host, n * sizeof *dev, cudaMemcpyHostToDevice) == cudaSuccess,
                "upload");
        CHECK(collective_sum_device(c, dev, n, 20000, err, sizeof err) == 0,
              "generation %u device sum: %s", gen, err);
        REQUIRE(cudaMemcpy(back, dev, n * sizeof *dev, cudaMemcpyDeviceToHost) == cudaSuccess,
                "download");
        CHECK(!memcmp(host, back, n * sizeof *host), "generation %u: a one-rank sum changed "
              "the values", gen);
        double d[3] = {1.5, -2.25, 1e300}, e[3];
        memcpy(e, d, sizeof d);
        CHECK(collective_sum_f64(c, e, 3, 20000, err, sizeof err) == 0 && !memcmp(d, e, sizeof d),
              "generation %u double sum: %s", gen, err);
    }
    ddp_ncclid_t none;
    CHECK(collective_generation(c, 2, 0, 1, false, &none, err, sizeof err) == 0 &&
              !collective_nccl(c), "a ring generation");
    double d = 3.0;
    CHECK(collective_sum_f64(c, &d, 1, 1000, err, sizeof err) == 0 && d == 3.0,
          "ring double sum: %s", err);
    cudaFree(dev);
    free(host);
    free(back);
    collective_destroy(&c);
    allreduce_destroy(&ar);
}

typedef struct {
    model_t *m;
    trainer_t *t;
} run_t;

static run_t open_run(void)
{
    model_opts_t o = {.arch = "wideresnet", .train = 1, .init = 1, .init_seed = 3, .threads = 1,
                      .num_classes = CLASSES, .channels = {8, 16, 16, 32}, .n_channels = 4};
    char err[512];
    run_t r;
    r.m = model_new(&o, "cuda", NULL, err, sizeof err);
    REQUIRE(r.m, "model_new(cuda): %s", err);
    trainer_cfg_t cfg = {.optim = optim_cfg_default(OPTIM_SGD), .lr = 0.05, .seed = 5};
    cfg.optim.momentum = 0.9;
    r.t = trainer_new(r.m, &cfg, err, sizeof err);
    REQUIRE(r.t, "trainer_new: %s", err);
    return r;
}

static uint8_t *image(run_t *r, size_t *len)
{
    char err[512];
    uint8_t *img = NULL;
    ckpt_info_t info = {.epoch = 0, .step = 2};
    REQUIRE(trainer_save_to(r->t, NULL, &img, len, &info, err, sizeof err) == 0, "save: %s", err);
    return img;
}

static void trainer_path(void)
{
    char err[512];
    allreduce_t *ar = allreduce_new(0, 1, NULL, NULL, err, sizeof err);
    REQUIRE(ar, "ring of one: %s", err);
    collective_t *c = collective_new(ar);
    ddp_ncclid_t id;
    REQUIRE(c && collective_generation(c, 0, 0, 1, true, &id, err, sizeof err) == 1,
            "NCCL generation: %s", err);
    run_t ring = open_run(), nccl = open_run(), bucketed = open_run();
    static const trainer_dsum_t one = {.sum = collective_trainer_sum},
                                buckets = {.sum = collective_trainer_sum,
                                           .enqueue = collective_trainer_enqueue,
                                           .wait = collective_trainer_wait};
    trainer_set_device_sum(nccl.t, &one, c);
    trainer_set_device_sum(bucketed.t, &buckets, c);
    REQUIRE(trainer_set_overlap(bucketed.t, ar, 20000) == 0, "overlap");
    static uint8_t px[N * HW * HW];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 37u + 11u);
    int32_t labels[N] = {1, 7, 3, 0};
    uint64_t ids[N] = {10, 11, 12, 13};
    for (int s = 0; s < 2; s++) {
        trainer_batch_t b = {.pixels = px, .n = N, .c = 1, .h = HW, .w = HW, .labels = labels,
                             .ids = ids, .global_count = N, .step = (uint64_t)s};
        run_t *runs[3] = {&ring, &nccl, &bucketed};
        static const char *names[3] = {"ring", "nccl", "nccl buckets"};
        for (int k = 0; k < 3; k++) {
            uint64_t before = model_traffic(runs[k]->m)->params;
            REQUIRE(trainer_forward_backward(runs[k]->t, &b, NULL, NULL, err, sizeof err) == 0,
                    "step %d: %s", s, err);
            REQUIRE(trainer_reduce(runs[k]->t, ar, 20000, err, sizeof err) == 0, "reduce %s: %s",
                    names[k], err);
            trainer_apply(runs[k]->t, 0, N);
            CHECK(model_traffic(runs[k]->m)->params == before,
                  "%s step %d: %llu parameter bytes crossed to the host", names[k], s,
                  (unsigned long long)(model_traffic(runs[k]->m)->params - before));
        }
    }
    size_t na, nb, nc;
    uint8_t *a = image(&ring, &na), *b = image(&nccl, &nb), *d = image(&bucketed, &nc);
    CHECK(na == nb && !memcmp(a, b, na), "the NCCL path's checkpoint differs from the ring's");
    CHECK(na == nc && !memcmp(a, d, na),
          "the NCCL buckets' checkpoint differs from the ring's");
    free(a);
    free(b);
    free(d);
    run_t *all[3] = {&ring, &nccl, &bucketed};
    for (int k = 0; k < 3; k++) {
        trainer_destroy(&all[k]->t);
        model_destroy(&all[k]->m);
    }
    collective_destroy(&c);
    allreduce_destroy(&ar);
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("test_cuda_collective: no CUDA device, skipped\n");
        return 77;
    }
#ifndef DDPIPE_HAVE_NCCL
    printf("test_cuda_collective: built without NCCL, skipped\n");
    return 77;
#else
    sums();
    trainer_path();
    return tc_done("test_cuda_collective");
#endif
}
