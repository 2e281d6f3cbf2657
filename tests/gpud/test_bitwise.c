/* test_bitwise — bitwise training in the engine (model_step_t.chunk,
 * model_set_exact; docs/TRAINING.md "Bitwise training").
 *
 * W model instances ("ranks") run in threads, each on a run of whole
 * chunks of a global batch, with an in-process exact all-reduce of xsums
 * (a barrier, the segments' tops maxed, every rank aligned, the int64
 * limbs summed) for the BatchNorm sums and, after each step, for the
 * parameter gradients (each chunk's gradient added into the rank's xsum
 * by the grad-ready hook). After every SGD step, every rank's parameters
 * and buffers must be the BYTES of the one-rank job's, for:
 *   - W = 1, 2, 3, 4 with even and uneven chunk counts, an empty rank, and
 *     a short last chunk;
 *   - ghost BatchNorm (per chunk) and SyncBatchNorm (global statistics);
 *   - the cpu (oneDNN) backend; the ref one with SyncBatchNorm on one
 *     uneven split (its plain loops are slow under the sanitizers).
 * Also: ghost batch norm's chunked gradients are the sums of each chunk's
 * own ordinary step (within rounding); one chunk holding the whole batch
 * with SyncBatchNorm gives the
 * bytes of the ordinary step (so the chunked arithmetic is the engine's
 * usual one), and summing the gradients as floats in rank order instead
 * (the old all-reduce) does NOT give the same bytes for W = 2 and 3, so
 * the comparison can tell. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errbuf.h"
#include "common/xsum.h"
#include "gpud/backend_arena.h"
#include "gpud/model.h"
#include "exact_grads.h"
#include "golden_io.h"

#define MAXW 4
#define MAXG 32
#define LR 0.05f
#define STEPS 3

/* ------------------------------------------- in-process exact all-reduce */

typedef struct {
    int w;
    int float_grads;          /* the negative control: gradients as floats */
    pthread_barrier_t bar;
    xsum_t *slot[MAXW];
    float *fslot[MAXW];
    long calls[MAXW];
} group_t;

/* model_xreduce_fn: tops maxed over the ranks, each rank aligned, then the
 * limbs summed (read by everyone before anyone writes). */
static int group_xsum(group_t *g, int rank, xsum_t *x)
{
    int nseg = xsum_segments(x);
    size_t nl = xsum_count(x) * XSUM_LIMBS;
    int32_t *tops = malloc((size_t)nseg * sizeof *tops);
    int64_t *sum = calloc(nl ? nl : 1, sizeof *sum);
    REQUIRE(tops && sum, "alloc");
    g->slot[rank] = x;
    g->calls[rank]++;
    pthread_barrier_wait(&g->bar);
    for (int s = 0; s < nseg; s++) {
        tops[s] = XSUM_EMPTY;
        for (int r = 0; r < g->w; r++) {
            REQUIRE(xsum_segments(g->slot[r]) == nseg, "ranks disagree on the call");
            int32_t t = xsum_tops(g->slot[r])[s];
            tops[s] = t > tops[s] ? t : tops[s];
        }
    }
    pthread_barrier_wait(&g->bar);   /* every rank read the tops */
    xsum_align(x, tops);
    pthread_barrier_wait(&g->bar);
    for (int r = 0; r < g->w; r++) {
        const int64_t *l = xsum_limbs(g->slot[r]);
        for (size_t i = 0; i < nl; i++)
            sum[i] += l[i];
    }
    pthread_barrier_wait(&g->bar);   /* every rank read every limb */
    memcpy(xsum_limbs(x), sum, nl * sizeof *sum);
    free(tops);
    free(sum);
    return 0;
}

typedef struct {
    group_t *g;
    int rank;
} member_t;

static int member_xsum(void *ctx, struct xsum *x, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    member_t *me = ctx;
    return group_xsum(me->g, me->rank, x);
}

/* The old way, for the negative control: float sums in rank order. */
static void group_float_sum(group_t *g, int rank, float *data, size_t n)
{
    float *sum = calloc(n ? n : 1, sizeof *sum);
    REQUIRE(sum, "alloc");
    g->fslot[rank] = data;
    pthread_barrier_wait(&g->bar);
    for (int r = 0; r < g->w; r++)
        for (size_t i = 0; i < n; i++)
            sum[i] += g->fslot[r][i];
    pthread_barrier_wait(&g->bar);
    memcpy(data, sum, n * sizeof *sum);
    free(sum);
}

/* ------------------------------------------------------------- the job */

typedef struct {
    const char *backend;
    int chunk;      /* 0: the ordinary step */
    int sync;
} mode_t_;

typedef struct {
    uint8_t *px;
    int32_t labels[MAXG];
    int64_t ids[MAXG];
    int g;
    size_t per;
} batch_t;

typedef struct {
    member_t me;
    model_t *m;
    const mode_t_ *mode;
    const batch_t *b;
    int lo, n;
    uint64_t step;
    exact_grads_t eg;       /* the step's gradient sums, a segment per parameter */
    int rc;
    char err[512];
} rank_t;

static model_t *open_model(const char *backend)
{
    char path[512], err[512];
    model_opts_t o = {.arch = "wideresnet", .threads = 1, .train = 1, .n_channels = 4};
    memcpy(o.channels, (int[4]){8, 16, 24, 32}, sizeof o.channels);
    model_t *m = model_new(&o, backend, tc_src("tests/golden/wrn_small.safetensors", path,
                                               sizeof path), err, sizeof err);
    REQUIRE(m, "wrn_small: %s", err);
    return m;
}

static void rank_open(rank_t *r)
{
    r->m = open_model(r->mode->backend);
    exact_grads_open(&r->eg, r->m);
    if (r->mode->chunk > 0) {
        REQUIRE(model_set_exact(r->m, r->me.g->w > 1 ? member_xsum : NULL, &r->me,
                                r->mode->sync) == 0, "model_set_exact");
        REQUIRE(model_set_grad_ready(r->m, exact_grads_hook, &r->eg) == 0, "grad hook");
    }
}

static void rank_close(rank_t *r)
{
    model_destroy(&r->m);
    exact_grads_close(&r->eg);
}

/* A rank's step: its chunks, the exact gradient all-reduce, SGD. */
static void *rank_main(void *arg)
{
    rank_t *r = arg;
    const batch_t *b = r->b;
    model_step_t s = {.global_batch = b->g, .seed = 5, .step = r->step,
                      .ids = b->ids + r->lo, .chunk = r->mode->chunk};
    xsum_clear(r->eg.x);
    r->rc = model_train_step_u8(r->m, b->px + (size_t)r->lo * b->per, r->n, 1, 28, 28, NULL,
                                NULL, b->labels + r->lo, &s, NULL, NULL, r->err,
                                sizeof r->err);
    if (r->rc == 0 && r->mode->chunk > 0) {
        if (r->me.g->float_grads) {
            exact_grads_write(&r->eg);   /* this rank's sums, then floats over the ranks */
            for (int i = 0; i < r->eg.n; i++)
                group_float_sum(r->me.g, r->me.rank, r->eg.grad[i], r->eg.numel[i]);
        } else {
            if (r->me.g->w > 1)
                group_xsum(r->me.g, r->me.rank, r->eg.x);
            exact_grads_write(&r->eg);
        }
        /* ghost batch norm's running-stat sums, as gpud's trainer does */
        xsum_t *run = model_running_sums(r->m);
        REQUIRE((run != NULL) == !r->mode->sync, "running sums %s with sync %d",
                run ? "given" : "missing", r->mode->sync);
        if (run && r->me.g->w > 1)
            group_xsum(r->me.g, r->me.rank, run);
        r->rc = model_running_apply(r->m, r->err, sizeof r->err);
    }
    for (int i = 0; r->rc == 0 && i < model_param_count(r->m); i++) {
        model_param_t p;
        REQUIRE(model_param_at(r->m, i, &p) == 0, "param %d", i);
        for (size_t j = 0; p.grad && j < p.numel; j++)
            p.value[j] -= LR * p.grad[j];
    }
    return NULL;
}

static void batch_fill(batch_t *b, int g, unsigned seed)
{
    b->g = g;
    b->per = 28 * 28;
    b->px = malloc((size_t)g * b->per);
    REQUIRE(b->px && g <= MAXG, "alloc");
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < (size_t)g * b->per; i++) {
        x = x * 1664525u + 1013904223u;
        b->px[i] = (uint8_t)(x >> 24);
    }
    for (int i = 0; i < g; i++) {
        b->labels[i] = (int32_t)((i * 7 + seed) % 10u);
        b->ids[i] = 1000 + i;
    }
}

/* Every parameter and buffer of the job's rank 0 after each step, and
 * every rank equal to rank 0. */
typedef struct {
    int steps;                /* 0: STEPS */
    float *after[STEPS];
    size_t floats;
} trace_t;

static void run_job(const mode_t_ *mode, const batch_t *b, int w, const int *sizes,
                    int float_grads, trace_t *tr)
{
    group_t grp = {.w = w, .float_grads = float_grads};
    REQUIRE(pthread_barrier_init(&grp.bar, NULL, (unsigned)w) == 0, "barrier");
    rank_t rk[MAXW];
    memset(rk, 0, sizeof rk);
    for (int r = 0, lo = 0; r < w; lo += sizes[r], r++) {
        rk[r] = (rank_t){.me = {&grp, r}, .mode = mode, .b = b, .lo = lo, .n = sizes[r]};
        rank_open(&rk[r]);
    }
    const bk_arena_t *a0 = model_params_arena(rk[0].m);
    tr->floats = a0->floats;
    float *before = malloc(a0->floats * sizeof *before);   /* the running stats must move */
    REQUIRE(before, "alloc");
    memcpy(before, a0->base, a0->floats * sizeof *before);
    if (tr->steps <= 0 || tr->steps > STEPS)
        tr->steps = STEPS;
    for (int st = 0; st < tr->steps; st++) {
        pthread_t th[MAXW];
        for (int r = 0; r < w; r++) {
            rk[r].step = (uint64_t)st;
            REQUIRE(pthread_create(&th[r], NULL, rank_main, &rk[r]) == 0, "thread");
        }
        for (int r = 0; r < w; r++)
            pthread_join(th[r], NULL);
        for (int r = 0; r < w; r++)
            REQUIRE(rk[r].rc == 0, "rank %d step %d: %s", r, st, rk[r].err);
        tr->after[st] = malloc(a0->floats * sizeof(float));
        REQUIRE(tr->after[st], "alloc");
        memcpy(tr->after[st], a0->base, a0->floats * sizeof(float));
        for (int r = 1; r < w; r++)
            REQUIRE(memcmp(model_params_arena(rk[r].m)->base, a0->base,
                           a0->floats * sizeof(float)) == 0,
                    "%s chunk %d sync %d W=%d: rank %d's parameters differ from rank 0's "
                    "after step %d", mode->backend, mode->chunk, mode->sync, w, r, st);
    }
    int moved = 0, stats = 0;
    for (int i = 0; i < model_param_count(rk[0].m); i++) {
        model_param_t p;
        REQUIRE(model_param_at(rk[0].m, i, &p) == 0, "param");
        if (!strstr(p.name, ".running_"))
            continue;
        stats++;
        moved += memcmp(before + p.offset, tr->after[0] + p.offset,
                        p.numel * sizeof(float)) != 0;
    }
    CHECK(stats > 0 && moved == stats, "%s chunk %d sync %d W=%d: %d of %d running stats moved "
          "in the first step", mode->backend, mode->chunk, mode->sync, w, moved, stats);
    free(before);
    for (int r = 0; r < w; r++)
        rank_close(&rk[r]);
    pthread_barrier_destroy(&grp.bar);
}

static void trace_free(trace_t *t)
{
    for (int s = 0; s < t->steps; s++)
        free(t->after[s]);
}

/* The first step whose bytes differ, or -1. */
static int first_diff(const trace_t *a, const trace_t *b)
{
    if (a->floats != b->floats || a->steps != b->steps)
        return 0;
    for (int s = 0; s < a->steps; s++)
        if (memcmp(a->after[s], b->after[s], a->floats * sizeof(float)) != 0)
            return s;
    return -1;
}

typedef struct {
    int w;
    int sizes[MAXW];
} split_t;

/* Every split of the batch in whole chunks gives the one-rank bytes. */
static void check_splits(const mode_t_ *mode, const batch_t *b, const split_t *sp, int nsp)
{
    trace_t one = {0};
    int all[1] = {b->g};
    run_job(mode, b, 1, all, 0, &one);
    for (int i = 0; i < nsp; i++) {
        trace_t t = {0};
        run_job(mode, b, sp[i].w, sp[i].sizes, 0, &t);
        int d = first_diff(&one, &t);
        char shape[64] = "";
        for (int r = 0; r < sp[i].w; r++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%d", r ? "," : "",
                     sp[i].sizes[r]);
        CHECK(d < 0, "%s G=%d chunk %d %s: W=%d {%s} differs from W=1 after step %d",
              mode->backend, b->g, mode->chunk, mode->sync ? "sync-bn" : "ghost-bn", sp[i].w,
              shape, d);
        printf("  %s G=%d chunk %d %s W=%d {%s}: %s\n", mode->backend, b->g, mode->chunk,
               mode->sync ? "sync-bn" : "ghost-bn", sp[i].w, shape, d < 0 ? "same bytes"
                                                                           : "DIFFERENT");
        trace_free(&t);
    }
    trace_free(&one);
}

/* Ghost batch norm means: each chunk's step as if it were a batch of its
 * own (its statistics), the gradients summed. The chunked step's gradients
 * against ordinary steps on each chunk alone, summed in double: equal up
 * to rounding. */
static void ghost_vs_separate(const char *backend, const batch_t *b)
{
    group_t one = {.w = 1};
    mode_t_ mode = {backend, 4, 0};
    rank_t r = {.me = {&one, 0}, .mode = &mode, .b = b, .n = 12};
    rank_open(&r);
    model_step_t s = {.global_batch = 12, .seed = 5, .ids = b->ids, .chunk = 4};
    char err[512];
    xsum_clear(r.eg.x);
    REQUIRE(model_train_step_u8(r.m, b->px, 12, 1, 28, 28, NULL, NULL, b->labels, &s, NULL,
                                NULL, err, sizeof err) == 0, "chunked step: %s", err);
    model_t *m = open_model(backend);
    size_t total = 0;
    for (int i = 0; i < r.eg.n; i++)
        total += r.eg.numel[i];
    double *want = calloc(total, sizeof *want);
    REQUIRE(want, "alloc");
    for (int first = 0; first < 12; first += 4) {
        model_step_t t = {.global_batch = 12, .seed = 5, .ids = b->ids + first};
        REQUIRE(model_train_step_u8(m, b->px + (size_t)first * b->per, 4, 1, 28, 28, NULL, NULL,
                                    b->labels + first, &t, NULL, NULL, err, sizeof err) == 0,
                "chunk alone: %s", err);
        size_t at = 0;
        for (int i = 0; i < model_param_count(m); i++) {
            model_param_t p;
            REQUIRE(model_param_at(m, i, &p) == 0, "param");
            for (size_t j = 0; p.grad && j < p.numel; j++)
                want[at++] += p.grad[j];
        }
        REQUIRE(at == total, "parameter lists differ");
    }
    double maxd = 0.0, maxw = 0.0;
    size_t at = 0;
    float *got = malloc(total * sizeof *got);
    REQUIRE(got, "alloc");
    for (int i = 0; i < r.eg.n; i++) {
        xsum_get_f32(r.eg.x, i, got + at);
        at += r.eg.numel[i];
    }
    for (size_t j = 0; j < total; j++) {
        double d = got[j] - want[j];
        maxd = d > maxd ? d : -d > maxd ? -d : maxd;
        maxw = want[j] > maxw ? want[j] : -want[j] > maxw ? -want[j] : maxw;
    }
    CHECK(maxd <= 1e-5 * maxw, "%s: ghost-BN chunked gradients differ from the chunks' own "
          "steps by %.3g of %.3g", backend, maxd, maxw);
    printf("  %s ghost-bn: chunked gradients vs each chunk's own step, summed: %.2g relative\n",
           backend, maxw > 0 ? maxd / maxw : maxd);
    free(got);
    free(want);
    model_destroy(&m);
    rank_close(&r);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *only = argc > 1 ? argv[1] : "";
    batch_t b24, b22;
    batch_fill(&b24, 24, 3);
    batch_fill(&b22, 22, 4);
    /* G = 24, chunks of 4: 6 chunks; G = 22: 5 of 4 and one of 2 */
    const split_t s24[] = {{2, {12, 12}}, {3, {8, 8, 8}}, {4, {8, 8, 4, 4}}, {3, {12, 0, 12}}};
    const split_t s22[] = {{2, {12, 10}}, {3, {8, 8, 6}}, {4, {4, 4, 8, 6}}};
    for (int be = 0; be < 2; be++) {
        const char *backend = be ? "ref" : "cpu";
        if (*only && strcmp(only, backend) != 0)
            continue;
        for (int sync = be; sync < 2; sync++) {   /* ref (plain loops): sync, one split */
            mode_t_ mode = {backend, 4, sync};
            check_splits(&mode, &b24, s24 + 2 * be, (int)(sizeof s24 / sizeof *s24) - 3 * be);
            if (!be)
                check_splits(&mode, &b22, s22, (int)(sizeof s22 / sizeof *s22));
        }
        ghost_vs_separate(backend, &b24);
        /* one chunk of the whole batch = the ordinary step, to the bit: on
         * ref one step (its plain loops under ASan were a third of this
         * test's time; cpu runs all STEPS through the same chunk code) */
        mode_t_ whole = {backend, 24, 1}, plain = {backend, 0, 0};
        trace_t a = {.steps = be ? 1 : STEPS}, c = {.steps = be ? 1 : STEPS};
        int all[1] = {24};
        run_job(&whole, &b24, 1, all, 0, &a);
        run_job(&plain, &b24, 1, all, 0, &c);
        int d = first_diff(&a, &c);
        CHECK(d < 0, "%s: one chunk of 24 differs from the ordinary step after step %d",
              backend, d);
        trace_free(&a);
        trace_free(&c);
        if (be)
            continue;   /* the negative control on cpu */
        /* the negative control: float sums in rank order depend on W */
        mode_t_ ghost = {backend, 4, 0};
        trace_t f2 = {0}, f3 = {0};
        run_job(&ghost, &b24, 2, (int[]){12, 12}, 1, &f2);
        run_job(&ghost, &b24, 3, (int[]){8, 8, 8}, 1, &f3);
        d = first_diff(&f2, &f3);
        CHECK(d >= 0, "%s: float gradient sums gave the same bytes for W = 2 and 3: the "
              "comparison cannot tell exact sums from float ones", backend);
        printf("  %s: float gradient sums, W=2 vs W=3: %s (step %d)\n", backend,
               d >= 0 ? "differ, as expected" : "SAME", d);
        trace_free(&f2);
        trace_free(&f3);
    }
    free(b24.px);
    free(b22.px);
    return tc_done("test_bitwise");
}
