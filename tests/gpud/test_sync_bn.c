/* test_sync_bn — SyncBatchNorm (model_set_sync_bn) and num_batches_tracked.
 *
 * W model instances ("ranks") run in threads, each on its shard of a
 * global batch — one shard empty — with an in-process all-reduce (a
 * barrier, then every rank sums the slots in rank order) for the BatchNorm
 * statistics and, after each step, for the parameter gradients (as DDP).
 * One more instance without sync trains on the whole batch. After each SGD
 * step (2 for the WideResNet, 1 for resnet18), relative to each tensor's
 * largest value:
 *   - the all-reduced gradients equal the single instance's within TOL,
 *     and are bit-identical on every rank;
 *   - every rank's running_mean/var (empty rank included) and weights equal
 *     the single instance's within TOL;
 *   - each sample's loss equals the single instance's within TOL.
 * Also: every rank made the same all-reduce calls (3 per BatchNorm and
 * step), num_batches_tracked counts steps on every rank, BN layers frozen
 * in eval mode neither sync nor count, n = 0 without sync gives zero
 * gradients, a failing hook fails the step with its message.
 *
 * Models: the small WideResNet (tests/golden/wrn_small.safetensors, dropout
 * on, keyed by sample id) on "cpu" with W = 2 and 3 and on "ref" with W = 2;
 * resnet18 (tests/golden/resnet18.safetensors, 3x64x64) on "cpu" with W = 3.
 * A one-rank job with shards {0, 7} would be bit-identical to the single
 * instance: training BatchNorm runs the same code with or without a hook. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/model.h"
#include "common/errbuf.h"
#include "golden_io.h"

#define TOL 1e-5
#define MAXW 3
#define LR 0.05f

static const float MEAN[3] = {0.485f, 0.456f, 0.406f}, STD[3] = {0.229f, 0.224f, 0.225f};

/* ------------------------------------------------ in-process all-reduce */

typedef struct {
    int w;
    pthread_barrier_t bar;
    double *slot[MAXW];
    size_t n[MAXW];
    long calls[MAXW];
} group_t;

typedef struct {
    group_t *g;
    int rank;
} member_t;

/* model_allreduce_fn: every rank adds the W slots in rank order, so all get
 * the same doubles. */
static int group_sum(void *ctx, double *data, size_t n, char *err, size_t errlen)
{
    member_t *me = ctx;
    group_t *g = me->g;
    g->slot[me->rank] = data;
    g->n[me->rank] = n;
    g->calls[me->rank]++;
    pthread_barrier_wait(&g->bar);
    int same = 1;
    for (int r = 0; r < g->w; r++)
        same &= g->n[r] == n;
    double *sum = same ? calloc(n ? n : 1, sizeof *sum) : NULL;
    for (size_t i = 0; sum && i < n; i++)
        for (int r = 0; r < g->w; r++)
            sum[i] += g->slot[r][i];
    pthread_barrier_wait(&g->bar);   /* nobody reads the slots any more */
    if (!sum) {
        err_set(err, errlen, same ? "out of memory" : "ranks disagree on the size (%zu here)",
                 n);
        return -1;
    }
    memcpy(data, sum, n * sizeof *data);
    free(sum);
    return 0;
}

/* The gradients' all-reduce (floats): group_sum of their doubles, each sum
 * rounded once, as the float ring's two-rank sums are. */
static int group_sum_f32(void *ctx, float *data, size_t n, char *err, size_t errlen)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (!d) {
        err_set(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        d[i] = data[i];
    int rc = group_sum(ctx, d, n, err, errlen);
    for (size_t i = 0; rc == 0 && i < n; i++)
        data[i] = (float)d[i];
    free(d);
    return rc;
}

static int failing_sum(void *ctx, double *data, size_t n, char *err, size_t errlen)
{
    (void)ctx;
    (void)data;
    err_set(err, errlen, "peer 7 is silent (%zu values)", n);
    return -1;
}

/* ------------------------------------------------------------- the job */

typedef struct {
    const char *arch, *backend, *weights;
    int c, h, w, normalise;
    int steps;
} spec_t;

/* A global batch: G samples of (c, h, w) bytes with labels and ids. */
typedef struct {
    uint8_t *px;
    int32_t *labels;
    int64_t ids[64];
    int g;
    size_t per;
} batch_t;

typedef struct {
    member_t me;
    model_t *m;
    const spec_t *sp;
    const batch_t *b;
    int lo, n;
    uint64_t step;
    float loss[64];
    int rc;
    char err[512];
} rank_t;

static model_t *open_model(const spec_t *sp)
{
    char path[512], err[512];
    model_opts_t o = {.arch = sp->arch, .threads = 1, .train = 1};
    if (strcmp(sp->arch, "wideresnet") == 0) {
        o.n_channels = 4;
        memcpy(o.channels, (int[4]){8, 16, 24, 32}, sizeof o.channels);
    }
    model_t *m = model_new(&o, sp->backend, tc_src(sp->weights, path, sizeof path), err,
                           sizeof err);
    REQUIRE(m, "%s: %s", sp->weights, err);
    return m;
}

static int train(model_t *m, const spec_t *sp, const batch_t *b, int lo, int n, uint64_t step,
                 float *loss, char *err, size_t errlen)
{
    model_step_t s = {.global_batch = b->g, .seed = 5, .step = step, .ids = b->ids + lo};
    return model_train_step_u8(m, b->px + (size_t)lo * b->per, n, sp->c, sp->h, sp->w,
                               sp->normalise ? MEAN : NULL, sp->normalise ? STD : NULL,
                               b->labels + lo, &s, loss, NULL, err, errlen);
}

/* w -= LR * g for every trainable parameter. */
static void sgd(model_t *m)
{
    for (int i = 0; i < model_param_count(m); i++) {
        model_param_t p;
        REQUIRE(model_param_at(m, i, &p) == 0, "param %d", i);
        for (size_t j = 0; p.grad && j < p.numel; j++)
            p.value[j] -= LR * p.grad[j];
    }
}

/* A rank's step: its shard, the gradient all-reduce, SGD. */
static void *rank_main(void *arg)
{
    rank_t *r = arg;
    r->rc = train(r->m, r->sp, r->b, r->lo, r->n, r->step, r->loss, r->err, sizeof r->err);
    for (int i = 0; r->rc == 0 && i < model_param_count(r->m); i++) {
        model_param_t p;
        if (model_param_at(r->m, i, &p) == 0 && p.grad)
            r->rc = group_sum_f32(&r->me, p.grad, p.numel, r->err, sizeof r->err);
    }
    if (r->rc == 0)
        sgd(r->m);
    return NULL;
}

static void batch_fill(batch_t *b, const spec_t *sp, int g, int classes, unsigned seed)
{
    b->g = g;
    b->per = (size_t)sp->c * sp->h * sp->w;
    b->px = malloc((size_t)g * b->per);
    b->labels = malloc((size_t)g * sizeof *b->labels);
    REQUIRE(b->px && b->labels && g <= 64, "alloc");
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < (size_t)g * b->per; i++) {
        x = x * 1664525u + 1013904223u;
        b->px[i] = (uint8_t)(x >> 24);
    }
    for (int i = 0; i < g; i++) {
        b->labels[i] = (int32_t)((i * 7 + seed) % (unsigned)classes);
        b->ids[i] = 1000 + i;
    }
}

typedef struct {
    double grad, stats, weight, loss;
} worst_t;

/* Rank models against the single instance after a step. */
static void compare(const char *tag, int step, model_t *single, rank_t *rk, int w,
                    const float *loss, worst_t *wo)
{
    for (int i = 0; i < model_param_count(single); i++) {
        model_param_t s;
        REQUIRE(model_param_at(single, i, &s) == 0, "param %d", i);
        for (int r = 0; r < w; r++) {
            model_param_t p;
            REQUIRE(model_param_at(rk[r].m, i, &p) == 0 && strcmp(p.name, s.name) == 0, "%d",
                    i);
            double e = golden_rel_err(p.value, s.value, s.numel);
            double *slot = s.grad ? &wo->weight : &wo->stats;
            *slot = fmax(*slot, e);
            CHECK(e <= TOL, "%s step %d rank %d: %s off by %.3g", tag, step, r, s.name, e);
            if (!s.grad)
                continue;
            e = golden_rel_err(p.grad, s.grad, s.numel);
            wo->grad = fmax(wo->grad, e);
            CHECK(e <= TOL, "%s step %d rank %d: gradient of %s off by %.3g", tag, step, r,
                  s.name, e);
            model_param_t p0;
            REQUIRE(model_param_at(rk[0].m, i, &p0) == 0, "%d", i);
            CHECK(memcmp(p.grad, p0.grad, s.numel * sizeof(float)) == 0,
                  "%s step %d: all-reduced gradient of %s differs between ranks 0 and %d", tag,
                  step, s.name, r);
        }
    }
    for (int r = 0; r < w; r++)
        if (rk[r].n) {
            double e = golden_rel_err(rk[r].loss, loss + rk[r].lo, (size_t)rk[r].n);
            wo->loss = fmax(wo->loss, e);
            CHECK(e <= TOL, "%s step %d rank %d: losses off by %.3g", tag, step, r, e);
        }
}

#define MAX_BN 128

/* The num_batches_tracked values of m (the weights file has 1000). */
static int counts(model_t *m, int64_t *v)
{
    int n = model_i64_count(m);
    REQUIRE(n > 0 && n <= MAX_BN, "%d num_batches_tracked", n);
    for (int i = 0; i < n; i++) {
        model_i64_t q;
        REQUIRE(model_i64_at(m, i, &q) == 0 && q.numel == 1 && q.ndim == 0 &&
                strstr(q.name, ".num_batches_tracked"), "%d", i);
        v[i] = *q.value;
    }
    return n;
}

/* Every counter of m is base + steps. */
static void check_counts(const char *tag, model_t *m, const int64_t *base, int64_t steps)
{
    int64_t v[MAX_BN];
    for (int i = 0, n = counts(m, v); i < n; i++)
        CHECK(v[i] == base[i] + steps, "%s: num_batches_tracked[%d] = %lld, want %lld", tag, i,
              (long long)v[i], (long long)(base[i] + steps));
}

/* W ranks with shards `sizes` vs one instance, STEPS steps. */
static void run_job(const spec_t *sp, int w, const int *sizes)
{
    char tag[96], err[512];
    int g = 0;
    for (int r = 0; r < w; r++)
        g += sizes[r];
    snprintf(tag, sizeof tag, "%s/%s W=%d", sp->arch, sp->backend, w);
    group_t grp = {.w = w};
    REQUIRE(pthread_barrier_init(&grp.bar, NULL, (unsigned)w) == 0, "barrier");
    rank_t rk[MAXW];
    model_t *single = open_model(sp);
    for (int r = 0, lo = 0; r < w; lo += sizes[r], r++) {
        rk[r] = (rank_t){.me = {&grp, r}, .sp = sp, .lo = lo, .n = sizes[r]};
        rk[r].m = open_model(sp);
        REQUIRE(model_set_sync_bn(rk[r].m, group_sum, &rk[r].me) == 0, "set sync");
    }
    int64_t base[MAX_BN];
    int nbn = counts(single, base);
    worst_t wo = {0};
    for (int k = 0; k < sp->steps; k++) {
        batch_t b;
        batch_fill(&b, sp, g, model_num_classes(single), (unsigned)k + 1);
        float loss[64];
        REQUIRE(train(single, sp, &b, 0, g, (uint64_t)k, loss, err, sizeof err) == 0,
                "%s single: %s", tag, err);
        sgd(single);
        pthread_t th[MAXW];
        for (int r = 0; r < w; r++) {
            rk[r].b = &b;
            rk[r].step = (uint64_t)k;
            REQUIRE(pthread_create(&th[r], NULL, rank_main, &rk[r]) == 0, "thread");
        }
        for (int r = 0; r < w; r++)
            pthread_join(th[r], NULL);
        for (int r = 0; r < w; r++)
            REQUIRE(rk[r].rc == 0, "%s rank %d (n %d): %s", tag, r, rk[r].n, rk[r].err);
        compare(tag, k + 1, single, rk, w, loss, &wo);
        free(b.px);
        free(b.labels);
    }
    long params = 0;
    for (int i = 0; i < model_param_count(single); i++) {
        model_param_t p;
        params += model_param_at(single, i, &p) == 0 && p.grad;
    }
    for (int r = 0; r < w; r++) {   /* 3 per BN per step + the gradient all-reduces */
        CHECK(grp.calls[r] == sp->steps * (3L * nbn + params), "%s rank %d: %ld all-reduce "
              "calls, want %ld", tag, r, grp.calls[r], sp->steps * (3L * nbn + params));
        check_counts(tag, rk[r].m, base, sp->steps);
    }
    check_counts(tag, single, base, sp->steps);
    printf("%-22s shards", tag);
    for (int r = 0; r < w; r++)
        printf(" %d", sizes[r]);
    printf(", %d steps: worst rel. error grads %.2g, running stats %.2g, weights %.2g, "
           "losses %.2g (%d BN layers)\n", sp->steps, wo.grad, wo.stats, wo.weight, wo.loss, nbn);
    for (int r = 0; r < w; r++)
        model_destroy(&rk[r].m);
    model_destroy(&single);
    pthread_barrier_destroy(&grp.bar);
}

/* One rank alone: frozen-BN layers do not sync, a failing hook fails the
 * step, n = 0 without sync gives zero gradients and counts. */
static void edge_cases(const spec_t *sp)
{
    char err[512];
    model_t *m = open_model(sp);
    int64_t base[MAX_BN], v[MAX_BN];
    int nbn = counts(m, base);
    int frozen = model_freeze_bn(m, "block1", 1);
    REQUIRE(frozen > 0 && frozen < nbn, "freeze_bn block1: %d of %d", frozen, nbn);
    group_t grp = {.w = 1};
    REQUIRE(pthread_barrier_init(&grp.bar, NULL, 1) == 0, "barrier");
    member_t me = {&grp, 0};
    REQUIRE(model_set_sync_bn(m, group_sum, &me) == 0, "set sync");
    batch_t b;
    batch_fill(&b, sp, 3, model_num_classes(m), 9);
    REQUIRE(train(m, sp, &b, 0, 3, 0, NULL, err, sizeof err) == 0, "step: %s", err);
    CHECK(grp.calls[0] == 3L * (nbn - frozen), "%ld calls with %d of %d BN frozen",
          grp.calls[0], frozen, nbn);
    /* the only rank is empty: the global count is 0, the variance call is
     * skipped (alike on every rank), the backward's still made */
    REQUIRE(train(m, sp, &b, 0, 0, 1, NULL, err, sizeof err) == 0, "empty step: %s", err);
    CHECK(grp.calls[0] == 5L * (nbn - frozen), "%ld calls after an empty step", grp.calls[0]);
    int at0 = 0, at2 = 0;
    counts(m, v);
    for (int i = 0; i < nbn; i++) {
        model_i64_t q;
        REQUIRE(model_i64_at(m, i, &q) == 0, "%d", i);
        int is_frozen = strncmp(q.name, "block1.", 7) == 0;
        at0 += is_frozen && v[i] == base[i];
        at2 += !is_frozen && v[i] == base[i] + 2;
    }
    CHECK(at0 == frozen && at2 == nbn - frozen, "num_batches_tracked: %d frozen unchanged, "
          "%d + 2", at0, at2);
    CHECK(model_i64_at(m, nbn, &(model_i64_t){0}) == -1, "index past the end accepted");

    REQUIRE(model_set_sync_bn(m, failing_sum, NULL) == 0, "set failing");
    CHECK(train(m, sp, &b, 0, 3, 2, NULL, err, sizeof err) == -1 &&
          strstr(err, "peer 7 is silent"), "failing hook: %s", err);
    CHECK(train(m, sp, &b, 0, 0, 2, NULL, err, sizeof err) == -1 &&
          strstr(err, "peer 7 is silent"), "failing hook, empty shard: %s", err);

    REQUIRE(model_set_sync_bn(m, NULL, NULL) == 0, "sync off");
    REQUIRE(train(m, sp, &b, 0, 3, 3, NULL, err, sizeof err) == 0, "step: %s", err);
    REQUIRE(train(m, sp, &b, 0, 0, 4, NULL, err, sizeof err) == 0, "empty step: %s", err);
    size_t nonzero = 0;
    for (int i = 0; i < model_param_count(m); i++) {
        model_param_t p;
        REQUIRE(model_param_at(m, i, &p) == 0, "%d", i);
        for (size_t j = 0; p.grad && j < p.numel; j++)
            nonzero += p.grad[j] != 0.0f;
    }
    CHECK(nonzero == 0, "n = 0 without sync: %zu non-zero gradient values", nonzero);
    free(b.px);
    free(b.labels);
    model_destroy(&m);
    pthread_barrier_destroy(&grp.bar);
    printf("edge cases: frozen BN not synced/counted, failing hook, n = 0 without sync: done\n");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *only = argc > 1 ? argv[1] : "";
    spec_t wrn = {"wideresnet", "cpu", "tests/golden/wrn_small.safetensors", 1, 28, 28, 0, 2};
    /* resnet18: one step. On noise images a second step, from weights that
     * differ by float rounding, flips a ReLU somewhere (the kink effect
     * test_train_optim.c describes) and moves gradients by percents. */
    spec_t wrn_ref = wrn, r18 = {"resnet18", "cpu", "tests/golden/resnet18.safetensors", 3, 64,
                                 64, 1, 1};
    wrn_ref.backend = "ref";
    if (!*only || strcmp(only, "wrn") == 0) {
        run_job(&wrn, 2, (int[]){4, 3});
        run_job(&wrn, 3, (int[]){3, 0, 4});
        run_job(&wrn_ref, 2, (int[]){2, 3});
        edge_cases(&wrn);
    }
    if (!*only || strcmp(only, "resnet18") == 0)
        run_job(&r18, 3, (int[]){2, 4, 0});
    return tc_done("test_sync_bn");
}
