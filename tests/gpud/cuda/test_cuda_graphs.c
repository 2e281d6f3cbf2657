/* gpud_cuda_graphs (GPU): the eval forward recorded as a CUDA graph and
 * replayed (gpud/tape_capture.c, gpud/cuda/cuda_graph.c) gives the same
 * bits as op by op. Two resnet18 models (golden weights, opened for
 * training so that their parameters can be changed), one with graphs on,
 * one with DDPIPE_CUDA_GRAPHS=0 (set around its calls: it is read at every
 * recording attempt):
 *   - 6 eval forwards with a different input each: identical logits, and
 *     the logits follow the input (a replay reads the new input);
 *   - the parameters scaled in both arenas, model_sync_eval (the refold
 *     into the same device addresses): 4 more forwards, identical, and
 *     different from before (the new weights are used);
 *   - with graphs on, the process recorded at least twice (before and after
 *     the refold), replayed, and no recording failed.
 * Then a training pass (gpud/tape_pass.c: forward and backward recorded as
 * one graph, labels and the loss gradient staged before it): two small
 * WideResNets from the same seed, graphs on and off, 6 SGD steps on
 * changing inputs, labels and loss gradients: every step's per-sample
 * losses (finite) and then the whole params arena (weights
 * and BatchNorm's running statistics) identical, the losses changing with
 * the step, the model's num_batches_tracked counted once a step on both
 * (it is the model's, outside the recording), and at least
 * one recording and 4 replays of the pass with none failed.
 * fp16's eval, on the tape (DDPIPE_FP16_EVAL=tape) and as its inference
 * plan, recorded and replayed alike: 3 forwards, the same logits as op by
 * op.
 * The pass with a grad queue (NCCL's gradient buckets) recorded in segments
 * cut where the queue flushes: the same marks and flushes as op by op,
 * every flushed gradient final when flushed, the same weights; a changed
 * cut recorded again (check_grad_queue).
 * And an eval call of several micro-batches (model_forward.c stages micro-
 * batch i + 1's bytes before it reads micro-batch i's logits): 19 uint8
 * samples, three micro-batches, the last one short, give the logits of
 * DDPIPE_EVAL_OVERLAP=0 (each written, run and read in turn) and of one
 * call per micro-batch, bit for bit.
 * Exits 77 (skipped) when no CUDA device is present. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DDP_CUEMU
#include "cuemu_counts.h"
#endif
#include "gpud/backend_arena.h"
#include "gpud/cuda/cuda_backend.h"
#include "gpud/cuda/cuda_graph.h"
#include "gpud/cuda/cuda_infer.h"
#include "gpud/model.h"
#include "bench/bench_model.h"
#include "../tcheck.h"

#define MB 8
#define HW 32

/* fp16: eval as the fp16 inference plan (DDPIPE_FP16_EVAL=tape: on the
 * tape, fp16 NHWC buffers) */
static model_t *open_model_as(int fp16)
{
    char path[1024], err[512] = "";
    model_opts_t o = {.arch = "resnet18", .threads = 1, .micro_batch = MB, .train = 1,
                      .fp16 = fp16};
    model_t *m = model_new(&o, "cuda",
                           tc_src("tests/golden/resnet18.safetensors", path, sizeof path), err,
                           sizeof err);
    REQUIRE(m, "model_new(resnet18, cuda%s): %s", fp16 ? ", fp16" : "", err);
    return m;
}

static model_t *open_model(void)
{
    return open_model_as(0);
}

/* graphs 0: the forward with DDPIPE_CUDA_GRAPHS=0 */
static void forward(model_t *m, int graphs, const float *x, float *logits)
{
    char err[512] = "";
    if (!graphs)
        setenv("DDPIPE_CUDA_GRAPHS", "0", 1);
    int rc = model_forward_f32(m, x, MB, 3, HW, HW, logits, err, sizeof err);
    unsetenv("DDPIPE_CUDA_GRAPHS");
    REQUIRE(rc == 0, "forward (graphs %s): %s", graphs ? "on" : "off", err);
}

static void input(float *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f * 4.0f - 2.0f;
    }
}

/* Every float of the params arena times s (running variances stay > 0). */
static void scale_params(model_t *m, float s)
{
    const bk_arena_t *a = model_params_arena(m);
    REQUIRE(a, "no params arena");
    size_t n = a->floats;
    float *h = malloc(n * sizeof *h);
    REQUIRE(h && bk_arena_read(a, 0, n, h) == 0, "reading the params arena");
    for (size_t i = 0; i < n; i++)
        h[i] *= s;
    REQUIRE(bk_arena_write(a, 0, n, h) == 0, "writing the params arena");
    free(h);
    char err[512] = "";
    REQUIRE(model_sync_eval(m, err, sizeof err) == 0, "model_sync_eval: %s", err);
}

static void same(model_t *on, model_t *off, int k0, int nf, const float *before, int *changed)
{
    size_t nx = (size_t)MB * 3 * HW * HW, ny = (size_t)MB * model_num_classes(on);
    float *x = malloc(nx * sizeof *x), *a = malloc(ny * 4), *b = malloc(ny * 4),
          *prev = malloc(ny * 4);
    REQUIRE(x && a && b && prev, "out of memory");
    for (int k = k0; k < k0 + nf; k++) {
        input(x, nx, (uint32_t)(k % 3));   /* inputs repeat: k and k + 3 meet other weights */
        forward(on, 1, x, a);
        forward(off, 0, x, b);
        CHECK(memcmp(a, b, ny * 4) == 0, "forward %d: graphs on and off differ", k);
        CHECK(k == k0 || memcmp(a, prev, ny * 4) != 0, "forward %d: logits ignore the input", k);
        if (before && k % 3 == 0)
            *changed += memcmp(a, before, ny * 4) != 0;
        memcpy(prev, a, ny * 4);
    }
    free(x);
    free(a);
    free(b);
    free(prev);
}

/* --- the training pass */

#define TB 8
#define TC 10

static model_t *open_wrn(void)
{
    char err[512] = "";
    model_opts_t o = {.arch = "wideresnet", .train = 1, .init = 1, .init_seed = 3, .threads = 1,
                      .num_classes = TC, .channels = {4, 8, 8, 12}, .n_channels = 4};
    model_t *m = model_new(&o, "cuda", NULL, err, sizeof err);
    REQUIRE(m, "model_new(wideresnet, cuda): %s", err);
    return m;
}

/* tk: the step's top-5 ids; ranked on the device with graphs on (only the
 * ids come back), on the host from the logits read with graphs off */
static void train_step(model_t *m, optim_t *sgd, int graphs, int step, float *loss,
                       int32_t *tk)
{
    float logits[TB * TC];
    static const float mean[1] = {0.5f}, std[1] = {0.25f};
    uint8_t px[TB * 28 * 28];
    int32_t labels[TB];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 37u + 11u + (unsigned)step * 101u);
    for (int i = 0; i < TB; i++)
        labels[i] = (i * 7 + step * 3) % TC;
    /* the seed's dropout (p 0.01) draws a new mask each step from the
     * step's sample keys (put on the device before the pass: a replay reads
     * them there), over ids that change with the step; the loss gradient
     * changes too (a loss scale of 2 on odd steps): a replay reads the one
     * staged for its step */
    int64_t ids[TB];
    for (int i = 0; i < TB; i++)
        ids[i] = 1000 + i * 13 + step * 5;
    model_step_t st = {.global_batch = TB, .seed = 1, .step = (uint64_t)step, .ids = ids,
                       .loss_scale = step % 2 ? 2.0f : 0.0f, .topk = tk, .k = 5};
    char err[512] = "";
    /* off: not recorded, and the pass as two calls (bk_forward, then
     * bk_backward writing the loss gradient itself): a timed graph is run
     * that way (tape_pass.c), so its staging is not what is compared */
    if (!graphs) {
        setenv("DDPIPE_CUDA_GRAPHS", "0", 1);
        setenv("DDPIPE_TRAIN_PROFILE", "1", 1);
    }
    int rc = model_train_step_u8(m, px, TB, 1, 28, 28, mean, std, labels, &st, loss,
                                 graphs ? NULL : logits, err, sizeof err);
    unsetenv("DDPIPE_CUDA_GRAPHS");
    unsetenv("DDPIPE_TRAIN_PROFILE");
    REQUIRE(rc == 0, "train step %d (graphs %s): %s", step, graphs ? "on" : "off", err);
    bench_sgd(sgd, 0.01f);
}

static float *params(const model_t *m, size_t *n)
{
    const bk_arena_t *a = model_params_arena(m);
    *n = a->floats;
    float *h = malloc(*n * sizeof *h);
    REQUIRE(h && bk_arena_read(a, 0, *n, h) == 0, "reading the params arena");
    return h;
}

/* Whether the two models' params arenas hold the same bits. */
static int same_params(const model_t *a, const model_t *b)
{
    size_t na, nb;
    float *pa = params(a, &na), *pb = params(b, &nb);
    int same = na == nb && memcmp(pa, pb, na * sizeof *pa) == 0;
    free(pa);
    free(pb);
    return same;
}

#ifdef DDP_CUEMU
/* 3 more steps of m (graphs on or off): no device-wide wait, no allocation */
static void steady_counts(model_t *m, optim_t *sgd, int graphs, const char *what)
{
    float loss[TB];
    int32_t top[TB * 5];
    cuemu_counts_t k0 = cuemu_counts();
    for (int step = 6; step < 9; step++)
        train_step(m, sgd, graphs, step, loss, top);
    cuemu_counts_t k1 = cuemu_counts();
    printf("3 %s training steps: %lu launches, %lu device-wide waits, %lu stream waits, "
           "%lu cudaMalloc, %lu cudaFree\n", what, k1.launches - k0.launches,
           k1.device_syncs - k0.device_syncs, k1.stream_syncs - k0.stream_syncs,
           k1.malloc_calls - k0.malloc_calls, k1.free_calls - k0.free_calls);
    CHECK(k1.device_syncs == k0.device_syncs && k1.malloc_calls == k0.malloc_calls &&
          k1.free_calls == k0.free_calls, "a %s training step waits for the whole device or "
          "allocates (%lu waits, %lu cudaMalloc, %lu cudaFree in 3 steps)", what,
          k1.device_syncs - k0.device_syncs, k1.malloc_calls - k0.malloc_calls,
          k1.free_calls - k0.free_calls);
}
#endif

static void check_training_pass(void)
{
    cuda_graph_counts_t c0 = cuda_graph_counts();
    model_t *on = open_wrn(), *off = open_wrn();
    optim_t *s_on = bench_sgd_new(on), *s_off = bench_sgd_new(off);
    REQUIRE(s_on && s_off, "SGD");
    float a[TB], b[TB], prev[TB];
    int32_t ta[TB * 5], tb[TB * 5];
    for (int step = 0; step < 6; step++) {
        train_step(on, s_on, 1, step, a, ta);
        train_step(off, s_off, 0, step, b, tb);
        CHECK(memcmp(a, b, sizeof a) == 0, "step %d: losses differ, graphs on and off", step);
        CHECK(memcmp(ta, tb, sizeof ta) == 0, "step %d: the top-5 ranked on the device differs "
              "from the host's ranking of the logits", step);
        CHECK(step == 0 || memcmp(a, prev, sizeof a) != 0, "step %d: the losses did not change",
              step);
        for (int i = 0; i < TB; i++)
            CHECK(isfinite(a[i]), "step %d: loss %d is %g", step, i, (double)a[i]);
        memcpy(prev, a, sizeof a);
        CHECK(same_params(on, off), "step %d: the params arenas differ, graphs on and off",
              step);
    }
    model_i64_t ca, cb;
    CHECK(model_i64_at(on, 0, &ca) == 0 && model_i64_at(off, 0, &cb) == 0 &&
          *ca.value == 6 && *cb.value == 6, "num_batches_tracked after 6 steps: %lld / %lld",
          (long long)*ca.value, (long long)*cb.value);
#ifdef DDP_CUEMU
    /* the steady state (the pass replayed, the optimizer one multi-tensor
     * launch, the arena's ops on the backend's stream), and op by op (what
     * a timed pass, an NCCL job whose buckets overlap backward, or
     * DDPIPE_CUDA_GRAPHS=0 runs): what a step asks of the runtime. A
     * device-wide wait or an allocation per step is time a GPU loses that
     * the emulator cannot show: it is counted instead. */
    steady_counts(on, s_on, 1, "steady");
    steady_counts(off, s_off, 0, "op-by-op");
#endif
    cuda_graph_counts_t c1 = cuda_graph_counts();
    printf("training pass: recorded %lu, replayed %lu, failed %lu\n", c1.captured - c0.captured,
           c1.replayed - c0.replayed, c1.failed - c0.failed);
    CHECK(c1.captured > c0.captured && c1.replayed >= c0.replayed + 4 && c1.failed == c0.failed,
          "training pass: recorded %lu, replayed %lu, failed %lu (want >= 1, >= 4, 0)",
          c1.captured - c0.captured, c1.replayed - c0.replayed, c1.failed - c0.failed);
    optim_destroy(&s_on);
    optim_destroy(&s_off);
    model_destroy(&on);
    model_destroy(&off);
}

/* The pipelined training step (model_train_begin_u8, _stage_u8, _end): the
 * next step's batch staged while a recorded step runs (its normalise
 * queued behind the pass) gives each step's losses and weights as
 * model_train_step_u8 in turn does. Two batches alternate, the next one
 * made while the step before runs, as gpud's messages. */
static void check_train_overlap(void)
{
    model_t *a = open_wrn(), *b = open_wrn();
    optim_t *sa = bench_sgd_new(a), *sb = bench_sgd_new(b);
    REQUIRE(sa && sb, "SGD");
    static const float mean[1] = {0.5f}, std[1] = {0.25f};
    static uint8_t px[2][TB * 28 * 28];
    int32_t labels[TB];
    float la[TB], lb[TB];
    char err[512] = "";
    int staged = 0;
    for (size_t i = 0; i < sizeof px[0]; i++)
        px[0][i] = (uint8_t)(i * 29u + 7u);
    for (int step = 0; step < 6; step++) {
        uint8_t *cur = px[step % 2], *next = px[(step + 1) % 2];
        for (int i = 0; i < TB; i++)
            labels[i] = (i * 7 + step * 3) % TC;
        model_step_t st = {.global_batch = TB, .seed = 1, .step = (uint64_t)step};
        REQUIRE(model_train_begin_u8(b, cur, TB, 1, 28, 28, mean, std, labels, &st, lb, NULL,
                                     err, sizeof err) == 0, "begin %d: %s", step, err);
        for (size_t i = 0; i < sizeof px[0]; i++)   /* the next batch arrives meanwhile */
            next[i] = (uint8_t)(i * 29u + 7u + (unsigned)(step + 1) * 53u);
        int got = model_train_stage_u8(b, next, TB, 1, 28, 28, mean, std, err, sizeof err);
        REQUIRE(got >= 0 && model_train_end(b, err, sizeof err) == 0, "stage, end %d: %s", step,
                err);
        staged += got;
        bench_sgd(sb, 0.01f);
        REQUIRE(model_train_step_u8(a, cur, TB, 1, 28, 28, mean, std, labels, &st, la, NULL, err,
                                    sizeof err) == 0, "step %d: %s", step, err);
        bench_sgd(sa, 0.01f);
        CHECK(memcmp(la, lb, sizeof la) == 0, "step %d: losses differ with the batch staged "
              "while the step before ran", step);
        CHECK(same_params(a, b), "step %d: the params arenas differ with the batch staged "
              "ahead", step);
    }
    CHECK(staged == 6, "%d of 6 batches staged into the step in flight", staged);
    printf("train overlap: 6 steps, each next batch staged while the step before ran: the same "
           "losses and weights\n");
    optim_destroy(&sa);
    optim_destroy(&sb);
    model_destroy(&a);
    model_destroy(&b);
}

/* --- the grad queue (bk_graph_set_grad_queue): NCCL's buckets, recordable */

enum { GQ_MAX = 4096 };

/* A stand-in for the trainer's buckets: a mark says 1 once `every`
 * gradients wait unflushed (state, as bucket_issue_mark); a flush reads
 * the waiting gradients from the device, as NCCL would sum them there. */
typedef struct {
    const model_t *m;
    int every, waiting;
    int wait_ix[GQ_MAX];
    int log[GQ_MAX], nlog;   /* the calls: a parameter's index marked, or -1 a flush */
    float *snap;             /* grads arena floats as each gradient was at its flush */
    int flushed[GQ_MAX];
} gq_t;

static int gq_index(const gq_t *q, const float *grad, model_param_t *out)
{
    for (int i = 0; i < model_param_count(q->m); i++) {
        model_param_t p;
        if (model_param_at(q->m, i, &p) == 0 && p.grad == grad) {
            *out = p;
            return i;
        }
    }
    return -1;
}

static int gq_mark(void *ctx, const float *grad)
{
    gq_t *q = ctx;
    model_param_t p;
    int i = gq_index(q, grad, &p);
    REQUIRE(i >= 0 && q->nlog < GQ_MAX && q->waiting < GQ_MAX, "mark of an unknown gradient");
    q->log[q->nlog++] = i;
    q->wait_ix[q->waiting++] = i;
    return q->waiting >= q->every;
}

static void gq_flush(void *ctx)
{
    gq_t *q = ctx;
    const bk_arena_t *ga = model_grads_arena(q->m);
    for (int j = 0; j < q->waiting; j++) {
        model_param_t p;
        REQUIRE(model_param_at(q->m, q->wait_ix[j], &p) == 0 &&
                    bk_arena_read(ga, p.grad_offset, p.numel, q->snap + p.grad_offset) == 0,
                "reading a flushed gradient");
        q->flushed[q->wait_ix[j]] = 1;
    }
    q->waiting = 0;
    REQUIRE(q->nlog < GQ_MAX, "grad queue log full");
    q->log[q->nlog++] = -1;
}

static void gq_begin(gq_t *q, model_t *m, int every)
{
    q->m = m;
    q->every = every;
    q->waiting = q->nlog = 0;
    memset(q->flushed, 0, sizeof q->flushed);
    if (!q->snap)
        REQUIRE((q->snap = calloc(model_grads_arena(m)->floats, sizeof *q->snap)), "memory");
    REQUIRE(model_set_grad_queue(m, gq_mark, gq_flush, q) == 0, "model_set_grad_queue");
}

/* The same marks in the same order, whatever the flushes between. */
static int same_marks(const gq_t *a, const gq_t *b)
{
    int i = 0, j = 0;
    for (;;) {
        while (i < a->nlog && a->log[i] < 0)
            i++;
        while (j < b->nlog && b->log[j] < 0)
            j++;
        if (i == a->nlog || j == b->nlog)
            return i == a->nlog && j == b->nlog;
        if (a->log[i++] != b->log[j++])
            return 0;
    }
}

/* Every gradient flushed had its final value at its flush (what the sum
 * would have read); the count of flushed ones. */
static int gq_final(const gq_t *q, int step, const char *what)
{
    size_t n;
    const bk_arena_t *ga = model_grads_arena(q->m);
    float *g = malloc(ga->floats * sizeof *g);
    REQUIRE(g && bk_arena_read(ga, 0, ga->floats, g) == 0, "reading the grads arena");
    int count = 0;
    for (int i = 0; i < model_param_count(q->m); i++) {
        model_param_t p;
        if (!q->flushed[i] || model_param_at(q->m, i, &p) != 0)
            continue;
        count++;
        n = p.numel;
        CHECK(memcmp(g + p.grad_offset, q->snap + p.grad_offset, n * sizeof *g) == 0,
              "step %d (%s): %s's gradient was flushed before its kernels were queued", step,
              what, p.name);
    }
    free(g);
    return count;
}

/* The pass recorded with a grad queue (NCCL's buckets, gpud/trainer.c):
 * in segments cut where the queue flushes, its marks and flushes made
 * between them. Two WideResNets, graphs on and off, 7 steps: the same
 * calls in the same order (marks, flushes between), every flushed gradient
 * final when flushed (the replay of its segment queued before the flush:
 * on the emulator, run), the same losses and weights; the queue's cut
 * changed at step 4 (another bucket size) is found stale there (that
 * step's flushes come at its old segments' ends, the marks the same),
 * learned op by op at step 5 and recorded at step 6. */
static void check_grad_queue(void)
{
    model_t *on = open_wrn(), *off = open_wrn();
    optim_t *s_on = bench_sgd_new(on), *s_off = bench_sgd_new(off);
    REQUIRE(s_on && s_off, "SGD");
    static gq_t qa, qb;
    float a[TB], b[TB];
    int32_t ta[TB * 5], tb[TB * 5];
    cuda_graph_counts_t c0 = cuda_graph_counts(), c4 = c0;
    int flushes = 0;
#ifdef DDP_CUEMU
    unsigned long launches[2] = {0, 0};   /* the last step's, graphs on and off */
#endif
    for (int step = 0; step < 7; step++) {
        int every = step < 4 ? 7 : 11;
        gq_begin(&qa, on, every);
        gq_begin(&qb, off, every);
        if (step == 4)
            c4 = cuda_graph_counts();
#ifdef DDP_CUEMU
        cuemu_counts_t k0 = cuemu_counts();
        train_step(on, s_on, 1, step, a, ta);
        cuemu_counts_t k1 = cuemu_counts();
        train_step(off, s_off, 0, step, b, tb);
        cuemu_counts_t k2 = cuemu_counts();
        launches[0] = k1.launches - k0.launches;
        launches[1] = k2.launches - k1.launches;
#else
        train_step(on, s_on, 1, step, a, ta);
        train_step(off, s_off, 0, step, b, tb);
#endif
        CHECK(memcmp(a, b, sizeof a) == 0, "step %d: losses differ, graphs on and off", step);
        if (step != 4)
            CHECK(qa.nlog == qb.nlog &&
                      memcmp(qa.log, qb.log, (size_t)qa.nlog * sizeof *qa.log) == 0,
                  "step %d: the grad queue's calls differ, graphs on (%d) and off (%d)", step,
                  qa.nlog, qb.nlog);
        else   /* replayed on the old cuts: the same marks, flushes at segment ends */
            CHECK(same_marks(&qa, &qb), "step 4: the grad queue's marks differ");
        int fa = gq_final(&qa, step, "graphs on"), fb = gq_final(&qb, step, "graphs off");
        /* step 4: the last ones wait for the step's end (the trainer's finish) */
        CHECK((fa == fb || step == 4) && fa > 0, "step %d: %d / %d gradients flushed", step, fa,
              fb);
        flushes = 0;
        for (int j = 0; j < qa.nlog; j++)
            flushes += qa.log[j] < 0;
        CHECK(same_params(on, off), "step %d: the params arenas differ, graphs on and off", step);
    }
    cuda_graph_counts_t c1 = cuda_graph_counts();
    printf("grad queue: %d flushes a step; segments recorded %lu (%lu after the cut changed), "
           "replayed %lu, failed %lu\n", flushes, c1.captured - c0.captured,
           c1.captured - c4.captured, c1.replayed - c0.replayed, c1.failed - c0.failed);
#ifdef DDP_CUEMU
    /* what the runtime is asked for a step (a graph launch counts once): the
     * op-by-op step's are profiled ones (DDPIPE_TRAIN_PROFILE, as train_step
     * runs graphs off), the same kernels */
    printf("grad queue: the last step %lu launches recorded in segments, %lu op by op\n",
           launches[0], launches[1]);
    CHECK(launches[0] > 0 && launches[0] * 4 < launches[1], "a step recorded in segments asked "
          "for %lu launches, op by op %lu", launches[0], launches[1]);
#endif
    /* a recording before step 4 and one after, each of flushes + 1 segments
     * at most (the last flush may fall on the pass's last op) */
    CHECK(flushes >= 3 && c4.captured - c0.captured >= (unsigned long)flushes &&
          c1.captured - c4.captured >= (unsigned long)flushes - 1 &&
          c1.replayed - c0.replayed >= 4 * (unsigned long)flushes && c1.failed == c0.failed,
          "grad queue: %d flushes, segments recorded %lu then %lu, replayed %lu, failed %lu",
          flushes, c4.captured - c0.captured, c1.captured - c4.captured,
          c1.replayed - c0.replayed, c1.failed - c0.failed);
    model_set_grad_queue(on, NULL, NULL, NULL);
    model_set_grad_queue(off, NULL, NULL, NULL);
    free(qa.snap);
    free(qb.snap);
    optim_destroy(&s_on);
    optim_destroy(&s_off);
    model_destroy(&on);
    model_destroy(&off);
}

/* DDPIPE_CUDA_PROFILE times a training pass op by op (tape_pass.c): the
 * timer is made before the first pass, which is then never recorded (a
 * recorded pass has no per-op events: before, a training graph never made
 * its timer and printed no profile line) */
static void check_profiled_training(void)
{
    setenv("DDPIPE_CUDA_PROFILE", "1", 1);
    model_t *m = open_wrn();
    optim_t *sgd = bench_sgd_new(m);
    REQUIRE(sgd, "SGD");
    cuda_graph_counts_t c0 = cuda_graph_counts();
    float loss[TB];
    int32_t tk[TB * 5];
    for (int step = 0; step < 4; step++)
        train_step(m, sgd, 1, step, loss, tk);
    cuda_graph_counts_t c1 = cuda_graph_counts();
    printf("profiled training: recorded %lu, replayed %lu\n", c1.captured - c0.captured,
           c1.replayed - c0.replayed);
    CHECK(c1.captured == c0.captured && c1.replayed == c0.replayed && c1.failed == c0.failed,
          "DDPIPE_CUDA_PROFILE=1: the training pass was recorded (%lu) or replayed (%lu): "
          "it is not timed op by op", c1.captured - c0.captured, c1.replayed - c0.replayed);
    optim_destroy(&sgd);
    model_destroy(&m);
    unsetenv("DDPIPE_CUDA_PROFILE");
}

/* model_forward_u8 over n samples: overlap 0 with DDPIPE_EVAL_OVERLAP=0 */
static void forward_u8(model_t *m, int overlap, const uint8_t *px, int n, float *logits)
{
    char err[512] = "";
    if (!overlap)
        setenv("DDPIPE_EVAL_OVERLAP", "0", 1);
    int rc = model_forward_u8(m, px, n, 3, HW, HW, BENCH_MEAN, BENCH_STD, logits, err,
                              sizeof err);
    unsetenv("DDPIPE_EVAL_OVERLAP");
    REQUIRE(rc == 0, "forward_u8 (overlap %d, %d samples): %s", overlap, n, err);
}

/* fp16 eval, on the tape (DDPIPE_FP16_EVAL=tape: autocast's rounding
 * points, fp16 NHWC buffers of the 16-bit table) and as the fp16 inference
 * plan: its forward is recorded and replayed, the same bits as op by op,
 * following the input, none failed. */
static void check_fp16_eval(int tape)
{
    const char *how = tape ? "on the tape" : "as its plan";
    if (tape)   /* read when the graphs compile, at their first forward */
        setenv("DDPIPE_FP16_EVAL", "tape", 1);
    model_t *on = open_model_as(1), *off = open_model_as(1);
    cuda_graph_counts_t c0 = cuda_graph_counts();
    unsigned long plans0 = cuinf_conv_plans(1);
    same(on, off, 0, 3, NULL, NULL);   /* recorded, then replayed twice */
#ifdef DDP_CUEMU
    /* what an op-by-op forward asks of the runtime: the plan's fused ops
     * against the tape's (a figure, not a check: cuDNN's calls are not
     * kernels of ours, the emulator counts only those) */
    size_t nx = (size_t)MB * 3 * HW * HW, ny = (size_t)MB * model_num_classes(off);
    float *x = malloc(nx * sizeof *x), *y = malloc(ny * sizeof *y);
    REQUIRE(x && y, "out of memory");
    input(x, nx, 0);
    cuemu_counts_t k0 = cuemu_counts();
    forward(off, 0, x, y);
    printf("fp16 eval %s: %lu kernel launches an op-by-op forward\n", how,
           cuemu_counts().launches - k0.launches);
    free(x);
    free(y);
#endif
    unsetenv("DDPIPE_FP16_EVAL");
    cuda_graph_counts_t c1 = cuda_graph_counts();
    unsigned long plans = cuinf_conv_plans(1) - plans0;
    printf("fp16 eval %s: recorded %lu, replayed %lu, failed %lu; %lu convolutions of the plan\n",
           how, c1.captured - c0.captured, c1.replayed - c0.replayed, c1.failed - c0.failed,
           plans);
    CHECK(c1.captured > c0.captured && c1.replayed >= c0.replayed + 2 && c1.failed == c0.failed,
          "fp16 eval %s: recorded %lu, replayed %lu, failed %lu (want >= 1, >= 2, 0)", how,
          c1.captured - c0.captured, c1.replayed - c0.replayed, c1.failed - c0.failed);
    CHECK(tape ? plans == 0 : plans > 0, "fp16 eval %s: %lu convolutions of the plan", how,
          plans);
    model_destroy(&on);
    model_destroy(&off);
}

static void check_eval_overlap(void)
{
    enum { N = 2 * MB + 3 };
    model_t *m = open_model();
    size_t per = (size_t)3 * HW * HW, nc = (size_t)model_num_classes(m);
    uint8_t *px = malloc(N * per);
    float *a = malloc(N * nc * sizeof *a), *b = malloc(N * nc * sizeof *b);
    float *c = malloc(N * nc * sizeof *c);
    REQUIRE(px && a && b && c, "out of memory");
    bench_pixels(px, N * per);
    for (int round = 0; round < 2; round++) {   /* the second replays the recording */
        forward_u8(m, 1, px, N, a);
        forward_u8(m, 0, px, N, b);
        for (int first = 0; first < N; first += MB)
            forward_u8(m, 1, px + (size_t)first * per, N - first < MB ? N - first : MB,
                       c + (size_t)first * nc);
        CHECK(memcmp(a, b, N * nc * sizeof *a) == 0, "round %d: %d samples in micro-batches "
              "of %d: the logits differ with the next micro-batch staged ahead", round, N, MB);
        CHECK(memcmp(a, c, N * nc * sizeof *a) == 0, "round %d: %d samples in one call differ "
              "from one call per micro-batch", round, N);
    }
    CHECK(memcmp(a, a + MB * nc, MB * nc * sizeof *a) != 0, "two micro-batches' logits equal: "
          "the input does not reach them");
    printf("eval overlap: %d samples, micro-batch %d: the same logits staged ahead, in turn and "
           "one call a micro-batch\n", N, MB);
    free(px);
    free(a);
    free(b);
    free(c);
    model_destroy(&m);
}

int main(void)
{
    if (cuda_device_count() == 0) {
        printf("gpud_cuda_graphs: no CUDA device, skipped\n");
        return 77;
    }
    unsetenv("DDPIPE_CUDA_PROFILE");   /* profiling turns recording off */
    model_t *on = open_model(), *off = open_model();
    size_t nx = (size_t)MB * 3 * HW * HW, ny = (size_t)MB * model_num_classes(on);
    float *x = malloc(nx * sizeof *x), *first = malloc(ny * 4);
    REQUIRE(x && first, "out of memory");
    same(on, off, 0, 6, NULL, NULL);
    input(x, nx, 0);
    forward(on, 1, x, first);   /* input 0 with the old weights */
    cuda_graph_counts_t c0 = cuda_graph_counts();
    printf("before the refold: recorded %lu, replayed %lu, failed %lu\n", c0.captured,
           c0.replayed, c0.failed);
    CHECK(c0.captured >= 1 && c0.replayed >= 5 && c0.failed == 0,
          "graphs on: recorded %lu, replayed %lu, failed %lu (want >= 1, >= 5, 0)", c0.captured,
          c0.replayed, c0.failed);

    scale_params(on, 0.9f);
    scale_params(off, 0.9f);
    int changed = 0;
    same(on, off, 6, 4, first, &changed);
    CHECK(changed > 0, "after model_sync_eval the logits did not change");
    cuda_graph_counts_t c1 = cuda_graph_counts();
    printf("after the refold: recorded %lu, replayed %lu, failed %lu\n", c1.captured,
           c1.replayed, c1.failed);
    CHECK(c1.captured > c0.captured && c1.replayed > c0.replayed && c1.failed == 0,
          "after the refold: recorded %lu, replayed %lu, failed %lu", c1.captured, c1.replayed,
          c1.failed);
    model_destroy(&on);
    model_destroy(&off);
    free(x);
    free(first);
    check_fp16_eval(1);
    check_fp16_eval(0);
    check_eval_overlap();
    check_training_pass();
    check_train_overlap();
    check_grad_queue();
    check_profiled_training();
    return tc_done("gpud_cuda_graphs");
}
