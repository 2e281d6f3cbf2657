/* The engine's recorded forward (gpud/tape_capture.c, bk_graph_ops_t) on a
 * fake backend: "ref" whose forward kernels, while a recording is open,
 * append their call to a list instead of running (as a CUDA stream capture
 * queues work without running it), and whose replay runs the list again
 * with the ref kernels. Against the same network on plain ref, bit for bit:
 *   - forward 1 runs op by op, forward 2 is recorded then replayed, later
 *     forwards replay (capture_begin once; no kernel runs directly after
 *     forward 1), with a new input each time;
 *   - after bk_graph_reload with changed parameters: one forward op by op,
 *     then a new recording, the new weights in both; the same when the
 *     reload comes between forward 1 and the first recording;
 *   - capture_begin refusing, capture_end failing, an op failing while
 *     recording (its error is not the graph's), a replay failing, a stale
 *     replay (recorded again): every forward still right, and a graph
 *     given up is never asked again;
 *   - a training-mode graph, and a graph switched to training after it was
 *     recorded (the recording released), are not recorded;
 *   - plain ref has no graph ops (NULL): nothing of this runs there. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend.h"
#include "gpud/backend_impl.h"
#include "tcheck.h"

/* ------------------------------------------------------- the fake backend */

typedef enum { K_CONV, K_BN, K_RELU, K_POOL, K_LINEAR, K_ADD, K_FLATTEN } kcall_t;

typedef struct {
    kcall_t kind;
    bk_ctx_t *g;
    backend_t *be;
    bk_plan_t *p;
    const void *x, *res;
    const float *w, *b, *gamma, *beta;
    float *mean, *var;
    const void *a2;
    void *y;
    size_t count;
    int flag;
    int s[4];
} call_t;

struct bk_capture {
    call_t *calls;
    size_t n;
};

#define MAX_CALLS 256

static const bk_kernels_t *REF;   /* ref's own kernels */

static struct {
    int recording;
    call_t rec[MAX_CALLS];
    size_t nrec;
    int refused;              /* a kernel that cannot be recorded was called */
    /* what the test makes fail */
    int refuse_begin, fail_end, fail_op, fail_replay, stale_once;
    /* counts */
    int begins, ends, replays, releases, direct, live;
} F;

static int recorded(const call_t *c)
{
    if (!F.recording)
        return 0;
    if (F.nrec == MAX_CALLS) {
        F.refused = 1;
        return 1;
    }
    F.rec[F.nrec++] = *c;
    return 1;
}

static int run_call(const call_t *c)
{
    const bk_kernels_t *k = REF;
    switch (c->kind) {
    case K_CONV:
        return k->conv_fwd(c->g, c->p, c->x, c->w, c->b, c->res, c->y);
    case K_BN:
        return k->bn_fwd(c->g, c->p, c->flag, c->x, c->gamma, c->beta, c->mean, c->var, c->y);
    case K_RELU:
        return k->relu_fwd(c->g, c->p, c->x, c->y);
    case K_POOL:
        return k->pool_fwd(c->g, c->p, c->x, c->y);
    case K_LINEAR:
        return k->linear_fwd(c->g, c->p, c->x, c->w, c->b, c->y);
    case K_ADD:
        k->add(c->be, c->y, c->x, c->a2, c->count, c->flag);
        return 0;
    case K_FLATTEN:
        k->flatten(c->be, c->y, c->x, c->s, c->flag);
        return 0;
    }
    return -1;
}

/* Recorded while recording, else run (and counted). */
static int call(const call_t *c)
{
    if (recorded(c))
        return 0;
    F.direct++;
    return run_call(c);
}

static int f_conv_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w, const float *b,
                      const void *res, void *y)
{
    if (F.recording && F.fail_op) {   /* as a CUDA call refused in a capture */
        bk_ctx_fail(g, "fake: this op cannot be recorded");
        return -1;
    }
    return call(&(call_t){.kind = K_CONV, .g = g, .p = p, .x = x, .w = w, .b = b, .res = res,
                          .y = y});
}

static int f_bn_fwd(bk_ctx_t *g, bk_plan_t *p, int training, const void *x, const float *gamma,
                    const float *beta, float *mean, float *var, void *y)
{
    return call(&(call_t){.kind = K_BN, .g = g, .p = p, .flag = training, .x = x,
                          .gamma = gamma, .beta = beta, .mean = mean, .var = var, .y = y});
}

static int f_relu_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y)
{
    return call(&(call_t){.kind = K_RELU, .g = g, .p = p, .x = x, .y = y});
}

static int f_pool_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y)
{
    return call(&(call_t){.kind = K_POOL, .g = g, .p = p, .x = x, .y = y});
}

static int f_linear_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                        const float *b, void *y)
{
    return call(&(call_t){.kind = K_LINEAR, .g = g, .p = p, .x = x, .w = w, .b = b, .y = y});
}

static void f_add(backend_t *be, void *y, const void *a, const void *b, size_t count, int relu)
{
    call(&(call_t){.kind = K_ADD, .be = be, .y = y, .x = a, .a2 = b, .count = count,
                   .flag = relu});
}

static void f_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward)
{
    call_t c = {.kind = K_FLATTEN, .be = be, .y = y, .x = x, .flag = backward};
    memcpy(c.s, xs, sizeof c.s);
    call(&c);
}

/* Kernels this fake cannot record: a recording that meets one is refused
 * at its end (CUDA's invalidated capture). */
static void f_zero(backend_t *be, void *y, size_t count)
{
    F.refused |= F.recording;
    REF->zero(be, y, count);
}

static int g_begin(backend_t *be, char *why, size_t len)
{
    (void)be;
    F.begins++;
    if (F.refuse_begin) {
        snprintf(why, len, "fake: refused");
        return -1;
    }
    F.recording = 1;
    F.nrec = 0;
    F.refused = 0;
    return 0;
}

static bk_capture_t *g_end(backend_t *be, int ok, char *why, size_t len)
{
    (void)be;
    F.ends++;
    F.recording = 0;
    if (!ok || F.fail_end || F.refused) {
        snprintf(why, len, "fake: %s", !ok ? "an op failed" : "capture failed");
        return NULL;
    }
    bk_capture_t *c = calloc(1, sizeof *c);
    REQUIRE(c && (c->calls = malloc(F.nrec * sizeof *c->calls)), "out of memory");
    memcpy(c->calls, F.rec, F.nrec * sizeof *c->calls);
    c->n = F.nrec;
    F.live++;
    return c;
}

static int g_replay(backend_t *be, bk_capture_t *c, char *why, size_t len)
{
    (void)be;
    if (F.stale_once) {
        F.stale_once = 0;
        snprintf(why, len, "fake: stale");
        return 1;
    }
    if (F.fail_replay) {
        snprintf(why, len, "fake: launch failed");
        return -1;
    }
    F.replays++;
    for (size_t i = 0; i < c->n; i++)
        REQUIRE(run_call(&c->calls[i]) == 0, "replayed call %zu failed", i);
    return 0;
}

static void g_release(backend_t *be, bk_capture_t *c)
{
    (void)be;
    F.releases++;
    F.live--;
    free(c->calls);
    free(c);
}

static const bk_graph_ops_t FAKE_GRAPHS = {g_begin, g_end, g_replay, g_release};
static bk_kernels_t fake_k;
static bk_ops_t fake_ops;

/* ref with the fake's graph ops and recording kernels */
static backend_t *fake_backend(void)
{
    char err[256];
    backend_t *be = backend_new("ref", 1, err, sizeof err);
    REQUIRE(be, "ref: %s", err);
    REQUIRE(be->ops->graphs == NULL, "ref has graph ops");
    REF = be->ops->train;
    fake_k = *REF;
    fake_k.conv_fwd = f_conv_fwd;
    fake_k.bn_fwd = f_bn_fwd;
    fake_k.relu_fwd = f_relu_fwd;
    fake_k.pool_fwd = f_pool_fwd;
    fake_k.linear_fwd = f_linear_fwd;
    fake_k.add = f_add;
    fake_k.flatten = f_flatten;
    fake_k.zero = f_zero;
    fake_ops = *be->ops;
    fake_ops.train = &fake_k;
    fake_ops.graphs = &FAKE_GRAPHS;
    be->ops = &fake_ops;
    return be;
}

/* ------------------------------------------------------------- the network */

#define NP 32
typedef struct {
    float *p[NP];
    int n;
} params_t;

static uint64_t rng = 1;
static float unif(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) / 16777216.0);
}

static float *fill(params_t *ps, size_t n, float lo, float hi)
{
    REQUIRE(ps->n < NP, "too many parameters");
    float *v = malloc(n * sizeof *v);
    REQUIRE(v, "out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * unif();
    return ps->p[ps->n++] = v;
}

/* The i-th parameter array: made on the first build, the same after. */
static float *param(params_t *ps, int *i, size_t n, float lo, float hi)
{
    return *i < ps->n ? ps->p[(*i)++] : ((*i)++, fill(ps, n, lo, hi));
}

static bk_tensor_t *conv_bn(bk_graph_t *g, params_t *ps, int *i, bk_tensor_t *x, int oc,
                            int stride, int relu)
{
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    bk_conv_t cp = {.ic = c, .oc = oc, .kh = 3, .kw = 3, .stride_h = stride,
                    .stride_w = stride, .pad_h = 1, .pad_w = 1,
                    .weight = param(ps, i, (size_t)oc * c * 9, -0.3f, 0.3f)};
    bk_tensor_t *y = bk_conv2d(g, x, &cp);
    bk_bn_t bp = {.c = oc, .weight = param(ps, i, (size_t)oc, 0.5f, 1.5f),
                  .bias = param(ps, i, (size_t)oc, -0.1f, 0.1f),
                  .running_mean = param(ps, i, (size_t)oc, -0.1f, 0.1f),
                  .running_var = param(ps, i, (size_t)oc, 0.5f, 2.0f), .momentum = 0.1f,
                  .eps = 1e-5f, .relu = relu};
    return bk_batchnorm(g, y, &bp);
}

/* stem conv-bn-relu, max pool, a residual block (add + relu), global
 * average pool, flatten, linear */
typedef struct {
    bk_graph_t *g;
    bk_tensor_t *x, *y;
} net_t;

#define N 2
#define C 3
#define HW 12
#define CLASSES 5
#define NX (N * C * HW * HW)
#define NY (N * CLASSES)

static net_t build(backend_t *be, params_t *ps, int forward_only)
{
    net_t t = {.g = bk_graph_new(be)};
    if (forward_only)
        bk_graph_set_forward_only(t.g);
    bk_graph_set_training(t.g, 0);
    int i = 0;
    t.x = bk_input(t.g, N, C, HW, HW, 0);
    bk_tensor_t *s = conv_bn(t.g, ps, &i, t.x, 8, 1, 1);
    bk_pool_t mp = {BK_POOL_MAX, 3, 3, 2, 2, 1, 1};
    s = bk_pool2d(t.g, s, &mp);
    bk_tensor_t *b = conv_bn(t.g, ps, &i, s, 8, 1, 1);
    b = conv_bn(t.g, ps, &i, b, 8, 1, 0);
    s = bk_relu(t.g, bk_add(t.g, b, s));
    s = bk_flatten(t.g, bk_global_avg_pool(t.g, s));
    t.y = bk_linear(t.g, s, CLASSES, param(ps, &i, (size_t)CLASSES * 8, -0.3f, 0.3f), NULL,
                    param(ps, &i, CLASSES, -0.1f, 0.1f), NULL);
    REQUIRE(t.y, "build: %s", bk_graph_error(t.g));
    return t;
}

static void input(float *x, int k)
{
    for (int i = 0; i < NX; i++)
        x[i] = sinf(0.37f * (float)i + 1.3f * (float)k);
}

static void run(net_t *t, const float *x, float *y, const char *what)
{
    REQUIRE(bk_write(t->g, t->x, x) == 0 && bk_forward(t->g) == 0 && bk_read(t->g, t->y, y) == 0,
            "%s: %s", what, bk_graph_error(t->g));
}

/* nf forwards of the fake's graph and plain ref's, new input each time:
 * the same bits every time. */
static void same(net_t *f, net_t *r, int nf, int k0, const char *what)
{
    float x[NX], yf[NY], yr[NY], prev[NY];
    for (int k = 0; k < nf; k++) {
        input(x, k0 + k);
        run(f, x, yf, what);
        run(r, x, yr, what);
        CHECK(memcmp(yf, yr, sizeof yf) == 0, "%s: forward %d differs from plain ref", what,
              k + 1);
        CHECK(k == 0 || memcmp(yf, prev, sizeof yf) != 0, "%s: forward %d ignored its input",
              what, k + 1);
        memcpy(prev, yf, sizeof prev);
    }
}

static void reset(void)
{
    memset(&F, 0, sizeof F);
}

/* ---------------------------------------------------------------- tests */

static void record_replay(backend_t *fb, backend_t *rb, params_t *ps)
{
    reset();
    net_t f = build(fb, ps, 1), r = build(rb, ps, 1);
    same(&f, &r, 1, 0, "record");
    CHECK(bk_graph_fused(f.g), "not an inference graph");
    int ops = F.direct;
    CHECK(F.begins == 0 && ops > 0, "forward 1: %d begins, %d kernels", F.begins, ops);
    same(&f, &r, 4, 1, "record");
    CHECK(F.begins == 1 && F.ends == 1 && F.replays == 4 && F.direct == ops,
          "forwards 2-5: %d begins, %d ends, %d replays, %d direct kernels (want 1, 1, 4, %d)",
          F.begins, F.ends, F.replays, F.direct, ops);
    CHECK((int)F.nrec == ops, "recorded %zu calls, forward 1 ran %d", F.nrec, ops);

    /* new weights: refolded in place, one forward op by op, then recorded again */
    for (int i = 0; i < ps->n; i++)
        ps->p[i][0] *= 0.75f;
    bk_graph_reload(f.g);
    bk_graph_reload(r.g);
    float x[NX], y0[NY], y1[NY];
    input(x, 0);
    run(&r, x, y0, "reload");
    same(&f, &r, 3, 5, "reload");
    run(&f, x, y1, "reload");
    CHECK(F.begins == 2 && F.releases == 1 && F.direct == 2 * ops,
          "after reload: %d begins, %d releases, %d direct kernels (want 2, 1, %d)", F.begins,
          F.releases, F.direct, 2 * ops);
    float yb[NY];
    run(&r, x, yb, "reload");
    CHECK(memcmp(y1, yb, sizeof y1) == 0, "after reload: differs from plain ref");

    /* switched to training mode: the recording released, the tape runs */
    bk_graph_set_training(f.g, 1);
    bk_graph_set_training(r.g, 1);
    int begins = F.begins;
    same(&f, &r, 2, 9, "training mode");
    CHECK(F.live == 0 && F.begins == begins, "training mode: %d live recordings, %d begins",
          F.live, F.begins - begins);
    bk_graph_destroy(&f.g);
    bk_graph_destroy(&r.g);
    CHECK(F.live == 0, "%d recordings not released", F.live);
}

/* Each failure: every forward right, the graph given up after one try. */
static void failures(backend_t *fb, backend_t *rb, params_t *ps)
{
    static const char *const what[] = {"capture_begin refused", "capture_end failed",
                                       "an op failed while recording", "replay failed"};
    for (int m = 0; m < 4; m++) {
        reset();
        F.refuse_begin = m == 0;
        F.fail_end = m == 1;
        F.fail_op = m == 2;
        F.fail_replay = m == 3;
        net_t f = build(fb, ps, 1), r = build(rb, ps, 1);
        same(&f, &r, 5, 20 + m, what[m]);
        CHECK(F.begins == 1, "%s: %d capture attempts, want 1", what[m], F.begins);
        CHECK(F.replays == 0 && F.live == 0, "%s: %d replays, %d live recordings", what[m],
              F.replays, F.live);
        CHECK(!bk_graph_error(f.g), "%s: the graph failed: %s", what[m], bk_graph_error(f.g));
        bk_graph_destroy(&f.g);
        bk_graph_destroy(&r.g);
    }

    /* stale: recorded again at once, the forward replayed */
    reset();
    net_t f = build(fb, ps, 1), r = build(rb, ps, 1);
    same(&f, &r, 3, 30, "stale");
    F.stale_once = 1;
    same(&f, &r, 2, 33, "stale");
    CHECK(F.begins == 2 && F.releases == 1 && F.replays == 4 && F.live == 1,
          "stale: %d begins, %d releases, %d replays, %d live (want 2, 1, 4, 1)", F.begins,
          F.releases, F.replays, F.live);
    bk_graph_destroy(&f.g);
    bk_graph_destroy(&r.g);

    /* a training graph (not forward-only) in eval mode: never recorded */
    reset();
    f = build(fb, ps, 0);
    r = build(rb, ps, 0);
    same(&f, &r, 3, 40, "training graph");
    CHECK(F.begins == 0, "a training graph was recorded");
    bk_graph_destroy(&f.g);
    bk_graph_destroy(&r.g);
}

/* Refolded between the op-by-op forward and the first recording: one more
 * forward op by op first (a plan's weight-derived work of the new version
 * runs outside any recording), then recorded. */
static void refold_while_warm(backend_t *fb, backend_t *rb, params_t *ps)
{
    reset();
    net_t f = build(fb, ps, 1), r = build(rb, ps, 1);
    same(&f, &r, 1, 50, "warm refold");
    for (int i = 0; i < ps->n; i++)
        ps->p[i][0] *= 1.25f;
    bk_graph_reload(f.g);
    bk_graph_reload(r.g);
    same(&f, &r, 1, 51, "warm refold");
    CHECK(F.begins == 0, "refolded while warm: recorded at once (%d begins)", F.begins);
    same(&f, &r, 3, 52, "warm refold");
    CHECK(F.begins == 1 && F.replays == 3 && F.live == 1,
          "after the warm refold: %d begins, %d replays, %d live (want 1, 3, 1)", F.begins,
          F.replays, F.live);
    bk_graph_destroy(&f.g);
    bk_graph_destroy(&r.g);
}

int main(void)
{
    char err[256];
    backend_t *rb = backend_new("ref", 1, err, sizeof err);
    REQUIRE(rb, "ref: %s", err);
    CHECK(rb->ops->graphs == NULL && rb->ops->timer == NULL, "ref: graph or timer ops");
    backend_t *cb = backend_new("cpu", 1, err, sizeof err);
    CHECK(!cb || (cb->ops->graphs == NULL && cb->ops->timer == NULL), "cpu: graph/timer ops");
    backend_destroy(&cb);
    backend_t *fb = fake_backend();
    params_t ps = {0};
    record_replay(fb, rb, &ps);
    failures(fb, rb, &ps);
    refold_while_warm(fb, rb, &ps);
    backend_destroy(&fb);
    backend_destroy(&rb);
    for (int i = 0; i < ps.n; i++)
        free(ps.p[i]);
    return tc_done("test_capture");
}
