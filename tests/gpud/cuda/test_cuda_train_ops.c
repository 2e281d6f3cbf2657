/* gpud_cuda_train_ops (GPU): training graphs on the cuda backend against
 * the plain-C reference backend ("ref"): one graph that uses every op
 * (conv with bias and stride, BN training + fused ReLU, frozen eval BN,
 * ReLU, max/avg pooling, add, concat, dropout, global pooling, flatten,
 * linear, label-smoothed CE). The cuda graph's parameters and gradients are
 * device memory (the backend's arena ops, as a model's arenas on cuda), the
 * ref graph's host arrays. Two steps (weights updated in between, so the
 * re-read of bound parameters is checked too): per-sample losses, logits,
 * every parameter gradient, the input gradient and the running statistics
 * agree to max|a-b|/max|b| <= 1e-4. Training BatchNorm runs on the device
 * (bn_train_fwd/bwd); a third graph on cuda with a one-rank SyncBatchNorm
 * hook runs it on the host path (sums down, coefficients up) and must give
 * the same bits (gpud/bn_math.h). First the device arena's ops (copy,
 * zero, the non-finite scan); after the graph the optimizer kernels against
 * gpud/optim/optim.c over 3 steps. Exits 77 without a CUDA device. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend.h"
#include "gpud/backend_arena.h"
#include "gpud/cuda/cuda_backend.h"
#include "../golden_io.h"
#include "../trand.h"
#include "arena_checks.h"
#include "xsum_checks.h"

#define TOL 1e-4
enum { N = 4, C = 3, H = 11, W = 9, K = 5 };

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void)
{
    return trand(&rng);
}

/* Every parameter array of the net, one set per backend: host arrays, or
 * device memory (dev) reached through the arena's read/write. */
#define NP 13
#define MAXP 256
typedef struct {
    float *p[NP], *gp[NP];
    size_t n[NP];
    int dev;
} params_t;

/* the cuda backend's arena (cuda_arena.c: its ops on the backend's stream) */
static const bk_arena_ops_t *DEV;

static const size_t SIZES[NP] = {
    6 * C * 3 * 3, 6,       /* conv1 w, b */
    6, 6, 6, 6,             /* bn1 gamma, beta, rmean, rvar */
    8 * 6 * 1 * 1,          /* conv2 w (no bias) */
    8, 8, 8, 8,             /* bn2 (frozen, eval mode) */
    K * 14, K               /* fc (concat 6 + 8 channels, global pooled) */
};

/* a's parameter i (grad: its gradient) into dst / from src */
static void get(const params_t *a, int i, int grad, float *dst)
{
    const float *v = grad ? a->gp[i] : a->p[i];
    if (a->dev)
        REQUIRE(DEV->read(DEV->ctx, v, 0, a->n[i], dst) == 0, "device read of param %d", i);
    else
        memcpy(dst, v, a->n[i] * 4);
}

static void put(params_t *a, int i, const float *src)
{
    if (a->dev)
        REQUIRE(DEV->write(DEV->ctx, a->p[i], 0, a->n[i], src) == 0,
                "device write of param %d", i);
    else
        memcpy(a->p[i], src, a->n[i] * 4);
}

/* a: device memory (for cuda), b: host (for ref), the same values */
static void params_init(params_t *a, params_t *b)
{
    a->dev = 1;
    b->dev = 0;
    for (int i = 0; i < NP; i++) {
        REQUIRE(SIZES[i] <= MAXP, "MAXP");
        a->n[i] = b->n[i] = SIZES[i];
        a->p[i] = DEV->alloc(DEV->ctx, SIZES[i]);
        a->gp[i] = DEV->alloc(DEV->ctx, SIZES[i]);   /* zeroed */
        b->p[i] = malloc(SIZES[i] * 4);
        b->gp[i] = calloc(SIZES[i], 4);
        REQUIRE(a->p[i] && b->p[i] && a->gp[i] && b->gp[i], "alloc");
        for (size_t j = 0; j < SIZES[i]; j++) {
            float v = frand();
            if (i == 5 || i == 10)
                v = 1.0f + 0.5f * v * v;   /* running variances: positive */
            b->p[i][j] = v;
        }
        put(a, i, b->p[i]);
    }
}

/* A device copy of host set b. */
static void params_dev(params_t *a, const params_t *b)
{
    a->dev = 1;
    for (int i = 0; i < NP; i++) {
        a->n[i] = SIZES[i];
        a->p[i] = DEV->alloc(DEV->ctx, SIZES[i]);
        a->gp[i] = DEV->alloc(DEV->ctx, SIZES[i]);
        REQUIRE(a->p[i] && a->gp[i], "alloc");
        put(a, i, b->p[i]);
    }
}

/* SyncBatchNorm over one rank: the sums as they are (the host path). */
static int one_rank(void *ctx, double *data, size_t n, char *err, size_t errlen)
{
    (void)ctx, (void)data, (void)n, (void)err, (void)errlen;
    return 0;
}

static void same_bits(const char *what, const float *a, const float *b, size_t n)
{
    CHECK(!memcmp(a, b, n * sizeof *a), "%s: BatchNorm on the device differs from the host path",
          what);
}

static void params_free(params_t *a)
{
    for (int i = 0; i < NP; i++) {
        if (a->dev) {
            DEV->free(DEV->ctx, a->p[i]);
            DEV->free(DEV->ctx, a->gp[i]);
        } else {
            free(a->p[i]);
            free(a->gp[i]);
        }
    }
}

typedef struct {
    bk_graph_t *g;
    bk_tensor_t *x, *logits, *loss;
} net_t;

static net_t build(backend_t *be, params_t *P)
{
    net_t t = {.g = bk_graph_new(be)};
    bk_graph_t *g = t.g;
    t.x = bk_input(g, N, C, H, W, 1);
    bk_conv_t c1 = {C, 6, 3, 3, 2, 2, 1, 1, P->p[0], P->gp[0], P->p[1], P->gp[1]};
    bk_tensor_t *a = bk_conv2d(g, t.x, &c1);
    bk_bn_t bn1 = {6, P->p[2], P->gp[2], P->p[3], P->gp[3], P->p[4], P->p[5], 0.1f, 1e-5f,
                    1, 0, NULL};
    a = bk_batchnorm(g, a, &bn1);                       /* training, fused ReLU */
    bk_pool_t mp = {BK_POOL_MAX, 3, 3, 2, 2, 1, 1};
    bk_tensor_t *p = bk_pool2d(g, a, &mp);
    bk_conv_t c2 = {6, 8, 1, 1, 1, 1, 0, 0, P->p[6], P->gp[6], NULL, NULL};
    bk_tensor_t *b = bk_conv2d(g, p, &c2);
    bk_bn_t bn2 = {8, P->p[7], P->gp[7], P->p[8], P->gp[8], P->p[9], P->p[10], 0.1f, 1e-5f,
                    0, 1, NULL};
    b = bk_relu(g, bk_batchnorm(g, b, &bn2));        /* frozen BN, separate ReLU */
    bk_pool_t ap = {BK_POOL_AVG_EXCLUDE_PAD, 3, 3, 1, 1, 1, 1};
    bk_pool_t ai = {BK_POOL_AVG, 3, 3, 1, 1, 1, 1};
    bk_tensor_t *q = bk_add(g, bk_pool2d(g, p, &ap), bk_pool2d(g, p, &ai));
    q = bk_dropout(g, q, 0.25f);
    bk_tensor_t *cat[2] = {q, b};
    bk_tensor_t *y = bk_flatten(g, bk_global_avg_pool(g, bk_concat(g, 2, cat)));
    t.logits = bk_linear(g, y, K, P->p[11], P->gp[11], P->p[12], P->gp[12]);
    t.loss = bk_softmax_ce(g, t.logits, 0.1f);
    REQUIRE(!bk_graph_error(g), "build on %s: %s", backend_name(be), bk_graph_error(g));
    return t;
}

static void step(net_t *t, const float *x, const int32_t *labels, const int64_t *ids,
                 uint64_t stepno)
{
    float dy[N];
    for (int i = 0; i < N; i++)
        dy[i] = 1.0f / N;
    bk_graph_t *g = t->g;
    CHECK(bk_write(g, t->x, x) == 0 && bk_set_labels(g, labels) == 0 &&
          bk_set_step(g, 7, stepno, ids) == 0 && bk_forward(g) == 0 &&
          bk_backward(g, t->loss, dy) == 0, "step: %s",
          bk_graph_error(g) ? bk_graph_error(g) : "");
}

static void compare(const char *what, const float *a, const float *b, size_t n)
{
    double e = golden_rel_err(a, b, n);
    printf("  %-22s rel err %.2g\n", what, e);
    CHECK(e <= TOL, "%s: cuda vs ref %.3g > %g", what, e, TOL);
}

/* A conv bias followed by training-mode BatchNorm gets a gradient that is 0
 * in exact arithmetic (BN's input gradient sums to 0 over each channel): the
 * two backends' values are rounding noise of the same sums, so their
 * relative error means nothing. Checked instead: the difference, against
 * the scale of the gradient BN received (its beta gradient, one sum of the
 * same elements per channel). */
static void compare_noise(const char *what, const float *a, const float *b, size_t n,
                          const float *scale_of, size_t ns)
{
    double d = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    for (size_t i = 0; i < ns; i++)
        s = fmax(s, fabs((double)scale_of[i]));
    printf("  %-22s max diff %.2g (scale %.2g)\n", what, d, s);
    CHECK(d <= TOL * s, "%s: cuda vs ref max diff %.3g > %g x %.3g", what, d, TOL, s);
}

static void check_graph(void)
{
    char err[512] = "";
    backend_t *bc = backend_new("cuda", 1, err, sizeof err), *br = backend_new("ref", 2, err, sizeof err);
    REQUIRE(bc && br, "backends: %s", err);
    DEV = backend_arena_ops(bc);
    params_t pc, pr, ph;
    params_init(&pc, &pr);
    params_dev(&ph, &pr);
    net_t tc = build(bc, &pc), tr = build(br, &pr), th = build(bc, &ph);
    bk_graph_set_allreduce(th.g, one_rank, NULL);
    float x[N * C * H * W], a[N * C * H * W], b[N * C * H * W], lc[N * K], lr[N * K];
    int32_t labels[N] = {1, 4, 0, 2};
    int64_t ids[N] = {10, 11, 12, 99};
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < sizeof x / 4; i++)
            x[i] = frand();
        step(&tc, x, labels, ids, (uint64_t)s);
        step(&tr, x, labels, ids, (uint64_t)s);
        step(&th, x, labels, ids, (uint64_t)s);
        printf("step %d\n", s);
        float hl[N * K], hx[N * C * H * W];
        CHECK(bk_read(tc.g, tc.logits, lc) == 0 && bk_read(tr.g, tr.logits, lr) == 0 &&
              bk_read(th.g, th.logits, hl) == 0, "read");
        compare("logits", lc, lr, N * K);
        same_bits("logits", lc, hl, N * K);
        CHECK(bk_read(tc.g, tc.loss, lc) == 0 && bk_read(tr.g, tr.loss, lr) == 0, "read");
        compare("per-sample CE", lc, lr, N);
        CHECK(bk_read_grad(tc.g, tc.x, a) == 0 && bk_read_grad(tr.g, tr.x, b) == 0 &&
              bk_read_grad(th.g, th.x, hx) == 0, "grad");
        compare("input gradient", a, b, sizeof a / 4);
        same_bits("input gradient", a, hx, sizeof a / 4);
        float hp[MAXP], hg[MAXP], pp[MAXP];
        for (int i = 0; i < 13; i++) {
            char name[32];
            snprintf(name, sizeof name, "param %d", i);
            get(&pc, i, 0, hp);
            compare(name, hp, pr.p[i], SIZES[i]);   /* running stats included */
            get(&ph, i, 0, pp);
            same_bits(name, hp, pp, SIZES[i]);
            get(&ph, i, 1, pp);
            get(&pc, i, 1, hg);
            snprintf(name, sizeof name, "grad of param %d", i);
            same_bits(name, hg, pp, SIZES[i]);
            if (i == 1) {   /* conv1's bias, before training BN (params 2, 3) */
                compare_noise("grad of param 1", hg, pr.gp[1], SIZES[1], pr.gp[3], SIZES[3]);
            } else if (i != 4 && i != 5 && i != 9 && i != 10) {
                snprintf(name, sizeof name, "grad of param %d", i);
                compare(name, hg, pr.gp[i], SIZES[i]);
            }
        }
        /* an SGD step on both sets: the next forward must read the new weights */
        for (int i = 0; i < 13; i++) {
            get(&pc, i, 0, hp);
            get(&pc, i, 1, hg);
            for (size_t j = 0; j < SIZES[i]; j++) {
                hp[j] -= 0.1f * hg[j];
                pr.p[i][j] = hp[j];
            }
            put(&pc, i, hp);
            put(&ph, i, hp);
        }
    }
    bk_graph_destroy(&tc.g);
    bk_graph_destroy(&tr.g);
    bk_graph_destroy(&th.g);
    params_free(&pc);
    params_free(&pr);
    params_free(&ph);
    backend_destroy(&bc);
    backend_destroy(&br);
}

int main(void)
{
    if (cuda_device_count() == 0) {
        printf("test_cuda_train_ops: no CUDA device, skipped\n");
        return 77;
    }
    tc_failures += check_device_arena();
    check_graph();
    tc_failures += check_device_optims();
    tc_failures += check_arena_optims();
    tc_failures += check_device_xsum();
    return tc_done("test_cuda_train_ops");
}
