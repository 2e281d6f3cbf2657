/* The graph engine's compile step and inference plan (backend.h,
 * bk_graph_compile, gpud/graph_plan.c), on backends "cpu" and "ref":
 *   - small random networks shaped like torchvision's BasicBlock and
 *     Bottleneck (with and without downsample), the seed WideResNet's block
 *     (conv-bn_relu-dropout-conv-bn_relu + a scale conv with bias) and
 *     heads of max/avg/global-average pooling, flatten and linear, built as
 *     forward-only eval-mode graphs, run as fused ops
 *     (bk_graph_fused) and agree with the same graph on the tape in eval
 *     mode: max|fused - tape| <= TOL * max|tape| (the fold rounds the
 *     weights once; float convolutions then differ in the last bits);
 *   - the fused graph is the hand-folded eval graph of the old path (BN
 *     folded by models/layers.c's arithmetic, the block's main branch
 *     taking the shortcut's sum): bit for bit the same output;
 *   - a DenseNet-like graph (bn-relu-conv, concat) stays on the tape, same
 *     output;
 *   - the fused ops snapshot the bound parameters: a changed weight
 *     changes nothing until bk_graph_reload, then the output follows;
 *   - switched to training mode, a fused graph runs on the tape;
 *   - reading a tensor fused away fails;
 *   - a description graph (bk_graph_new(NULL)) checks shapes as a graph
 *     with a backend does and refuses to run;
 *   - builders after the compile step fail. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gpud/backend.h"
#include "gpud/backend_impl.h"   /* bk_bn_fold, bk_fold_round16 */
#include "gpud/bf16.h"
#include "gpud/fp16_math.h"
#include "tcheck.h"

/* ------------------------------------------------------------ parameters */

#define MAX_PARAMS 256

#define TOL 2e-5

/* Every parameter array of a test network, random and kept for its life.
 * Building the network again (cur reset to 0) binds the same arrays. */
typedef struct {
    float *p[MAX_PARAMS];
    int n, cur;
    uint64_t seed;
} params_t;

static float uniform(params_t *ps)
{
    ps->seed = ps->seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((ps->seed >> 40) / 16777216.0);
}

/* n values in lo + (hi - lo) * U(0, 1). */
static float *param(params_t *ps, size_t n, float lo, float hi)
{
    if (ps->cur < ps->n)
        return ps->p[ps->cur++];
    REQUIRE(ps->n < MAX_PARAMS, "too many parameters");
    float *v = malloc(n * sizeof *v);
    REQUIRE(v, "out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * uniform(ps);
    ps->p[ps->n++] = v;
    ps->cur = ps->n;
    return v;
}

static void params_free(params_t *ps)
{
    for (int i = 0; i < ps->n; i++)
        free(ps->p[i]);
    ps->n = 0;
}

/* Conv of k x k, He-uniform weights, bias if has_bias. */
static bk_tensor_t *conv(bk_graph_t *g, params_t *ps, bk_tensor_t *x, int oc, int k, int stride,
                       int pad, int has_bias)
{
    int n, c, h, w;
    if (!x)
        return NULL;
    bk_tensor_dims(x, &n, &c, &h, &w);
    float a = sqrtf(6.0f / (float)(c * k * k));
    bk_conv_t p = {.ic = c, .oc = oc, .kh = k, .kw = k, .stride_h = stride,
                    .stride_w = stride, .pad_h = pad, .pad_w = pad,
                    .weight = param(ps, (size_t)oc * c * k * k, -a, a),
                    .bias = has_bias ? param(ps, (size_t)oc, -0.1f, 0.1f) : NULL};
    return bk_conv2d(g, x, &p);
}

/* BatchNorm in eval mode on random running stats, relu fused if asked. */
static bk_tensor_t *bn(bk_graph_t *g, params_t *ps, bk_tensor_t *x, int relu)
{
    int n, c, h, w;
    if (!x)
        return NULL;
    bk_tensor_dims(x, &n, &c, &h, &w);
    bk_bn_t p = {.c = c, .weight = param(ps, (size_t)c, 0.5f, 1.5f),
                  .bias = param(ps, (size_t)c, -0.1f, 0.1f),
                  .running_mean = param(ps, (size_t)c, -0.1f, 0.1f),
                  .running_var = param(ps, (size_t)c, 0.5f, 2.0f), .momentum = 0.1f,
                  .eps = 1e-5f, .relu = relu};
    return bk_batchnorm(g, x, &p);
}

static bk_tensor_t *linear(bk_graph_t *g, params_t *ps, bk_tensor_t *x, int out)
{
    int n, c, h, w;
    if (!x)
        return NULL;
    bk_tensor_dims(x, &n, &c, &h, &w);
    float a = sqrtf(1.0f / (float)(c * h * w));
    return bk_linear(g, x, out, param(ps, (size_t)out * c * h * w, -a, a), NULL,
                       param(ps, (size_t)out, -a, a), NULL);
}

static bk_tensor_t *pool(bk_graph_t *g, bk_tensor_t *x, bk_pool_alg_t alg, int k, int s, int p)
{
    bk_pool_t pl = {alg, k, k, s, s, p, p};
    return bk_pool2d(g, x, &pl);
}

/* ------------------------------------------------------------- networks */

typedef bk_tensor_t *(*net_fn)(bk_graph_t *g, params_t *ps, bk_tensor_t *x);

/* torchvision's BasicBlock: conv-bn-relu, conv-bn, + identity or
 * downsample (conv1x1-bn), relu. The first block spells relu as its own op,
 * the second fuses it into the BN. */
static bk_tensor_t *basic_block(bk_graph_t *g, params_t *ps, bk_tensor_t *x, int oc, int stride,
                              int bn_relu)
{
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    bk_tensor_t *t = bn(g, ps, conv(g, ps, x, oc, 3, stride, 1, 0), bn_relu);
    if (!bn_relu)
        t = bk_relu(g, t);
    t = bn(g, ps, conv(g, ps, t, oc, 3, 1, 1, 0), 0);
    bk_tensor_t *id = x;
    if (stride != 1 || c != oc)
        id = bn(g, ps, conv(g, ps, x, oc, 1, stride, 0, 0), 0);
    return bk_relu(g, bk_add(g, t, id));
}

static bk_tensor_t *net_basic(bk_graph_t *g, params_t *ps, bk_tensor_t *x)
{
    bk_tensor_t *t = bn(g, ps, conv(g, ps, x, 8, 3, 1, 1, 0), 1);
    t = pool(g, t, BK_POOL_MAX, 3, 2, 1);
    t = basic_block(g, ps, t, 8, 1, 0);
    t = basic_block(g, ps, t, 16, 2, 1);
    return linear(g, ps, bk_global_avg_pool(g, t), 10);
}

/* torchvision's Bottleneck: 1x1 / 3x3 (stride) / 1x1 x4, downsample. */
static bk_tensor_t *bottleneck(bk_graph_t *g, params_t *ps, bk_tensor_t *x, int planes,
                             int stride)
{
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    bk_tensor_t *t = bn(g, ps, conv(g, ps, x, planes, 1, 1, 0, 0), 1);
    t = bn(g, ps, conv(g, ps, t, planes, 3, stride, 1, 0), 1);
    t = bn(g, ps, conv(g, ps, t, 4 * planes, 1, 1, 0, 0), 0);
    bk_tensor_t *id = x;
    if (stride != 1 || c != 4 * planes)
        id = bn(g, ps, conv(g, ps, x, 4 * planes, 1, stride, 0, 0), 0);
    return bk_relu(g, bk_add(g, t, id));
}

static bk_tensor_t *net_bottleneck(bk_graph_t *g, params_t *ps, bk_tensor_t *x)
{
    bk_tensor_t *t = bn(g, ps, conv(g, ps, x, 16, 7, 2, 3, 0), 1);
    t = bottleneck(g, ps, t, 4, 1);
    t = bottleneck(g, ps, t, 4, 1);
    t = bottleneck(g, ps, t, 8, 2);
    return linear(g, ps, bk_flatten(g, bk_global_avg_pool(g, t)), 10);
}

/* The seed WideResNet's block: conv-bn_relu, dropout, conv-bn_relu, then
 * + x or + a 1x1 scale conv with bias ({RELU, SUM}: ReLU before the sum). */
static bk_tensor_t *wrn_block(bk_graph_t *g, params_t *ps, bk_tensor_t *x, int oc)
{
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    bk_tensor_t *t = bn(g, ps, conv(g, ps, x, oc, 3, 1, 1, 0), 1);
    t = bk_dropout(g, t, 0.3f);
    t = bn(g, ps, conv(g, ps, t, oc, 3, 1, 1, 0), 1);
    bk_tensor_t *res = c == oc ? x : conv(g, ps, x, oc, 1, 1, 0, 1);
    return bk_add(g, t, res);
}

static bk_tensor_t *net_wrn(bk_graph_t *g, params_t *ps, bk_tensor_t *x)
{
    bk_tensor_t *t = bn(g, ps, conv(g, ps, x, 8, 3, 1, 1, 0), 1);
    t = wrn_block(g, ps, t, 16);
    t = wrn_block(g, ps, t, 16);
    t = pool(g, t, BK_POOL_MAX, 2, 2, 0);
    t = wrn_block(g, ps, t, 24);
    t = pool(g, t, BK_POOL_AVG, 2, 2, 0);
    return linear(g, ps, bk_flatten(g, t), 10);   /* flatten of a 4x4 map */
}

/* Pooling heads and ops with no conv to fuse into: a conv-relu (relu as a
 * post-op), an add of the graph's input (an input is never a residual: a
 * plain add), a residual read again after the add (no sum post-op either),
 * an add of two pools with a relu, average pooling without the padding, a
 * linear over a spatial map. */
static bk_tensor_t *net_heads(bk_graph_t *g, params_t *ps, bk_tensor_t *x)
{
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    bk_tensor_t *u = bk_relu(g, conv(g, ps, x, c, 3, 1, 1, 1));
    bk_tensor_t *t = bk_add(g, bn(g, ps, conv(g, ps, u, c, 3, 1, 1, 0), 0), x);
    t = bk_add(g, bn(g, ps, conv(g, ps, t, c, 3, 1, 1, 0), 0), u);
    t = bk_add(g, t, u);
    bk_tensor_t *a = pool(g, t, BK_POOL_MAX, 3, 1, 1), *b = pool(g, t, BK_POOL_AVG, 3, 1, 1);
    t = bk_relu(g, bk_add(g, a, b));
    t = pool(g, t, BK_POOL_AVG_EXCLUDE_PAD, 3, 2, 1);
    t = bk_relu(g, t);
    return linear(g, ps, t, 7);
}

/* The input read by a conv with 16 channels (which picks a blocked source
 * layout: the input is reordered, and in bf16 rounded or converted first)
 * and by a pooling; their sum through a global pool into a linear. */
static bk_tensor_t *net_wide_in(bk_graph_t *g, params_t *ps, bk_tensor_t *x)
{
    bk_tensor_t *a = pool(g, x, BK_POOL_MAX, 3, 1, 1);
    bk_tensor_t *t = bk_add(g, bn(g, ps, conv(g, ps, x, 16, 3, 1, 1, 0), 1), a);
    return linear(g, ps, pool(g, t, BK_POOL_AVG, 8, 8, 0), 5);
}

/* DenseNet's layer: bn-relu-conv (a BN after a concat, not a conv), concat:
 * no fused form. */
static bk_tensor_t *net_dense(bk_graph_t *g, params_t *ps, bk_tensor_t *x)
{
    bk_tensor_t *t = pool(g, bn(g, ps, conv(g, ps, x, 8, 3, 1, 1, 0), 1), BK_POOL_MAX, 2, 2, 0);
    for (int i = 0; i < 2; i++) {
        bk_tensor_t *y = conv(g, ps, bn(g, ps, t, 1), 4, 3, 1, 1, 0);
        bk_tensor_t *xs[2] = {t, y};
        t = bk_concat(g, 2, xs);
    }
    return linear(g, ps, bk_global_avg_pool(g, bn(g, ps, t, 1)), 10);
}

typedef struct {
    const char *name;
    net_fn fn;
    int c, h, w;
    int fused;      /* expected bk_graph_fused */
} net_t;

static const net_t NETS[] = {
    {"basic", net_basic, 3, 16, 16, 1},
    {"bottleneck", net_bottleneck, 3, 32, 32, 1},
    {"wrn", net_wrn, 3, 16, 16, 1},
    {"heads", net_heads, 4, 9, 9, 1},
    {"dense", net_dense, 3, 8, 8, 0},
    {"wide_in", net_wide_in, 16, 8, 8, 1},
};

#define BATCH 2

/* A built network: the graph, its input and output. */
typedef struct {
    bk_graph_t *g;
    bk_tensor_t *x, *y;
    size_t nx, ny;
} built_t;

/* forward_only: the inference graph (fused when it can be); else the same
 * graph as a training graph, in eval mode. */
static built_t build(backend_t *be, const net_t *net, params_t *ps, int forward_only)
{
    built_t b = {.g = bk_graph_new(be)};
    if (forward_only)
        bk_graph_set_forward_only(b.g);
    bk_graph_set_training(b.g, 0);
    ps->cur = 0;
    b.x = bk_input(b.g, BATCH, net->c, net->h, net->w, 0);
    b.y = net->fn(b.g, ps, b.x);
    REQUIRE(b.y, "%s: build: %s", net->name, bk_graph_error(b.g));
    int n, c, h, w;
    bk_tensor_dims(b.y, &n, &c, &h, &w);
    b.ny = (size_t)n * c * h * w;
    b.nx = (size_t)BATCH * net->c * net->h * net->w;
    return b;
}

static void run(built_t *b, const char *what, const float *x, float *y)
{
    if (x)
        REQUIRE(bk_write(b->g, b->x, x) == 0, "%s: write: %s", what, bk_graph_error(b->g));
    REQUIRE(bk_forward(b->g) == 0 && bk_read(b->g, b->y, y) == 0, "%s: forward: %s", what,
            bk_graph_error(b->g));
}

/* max|a - b| / max|b|, and whether any value differs. */
static double rel_err(const float *a, const float *b, size_t n)
{
    double d = 0.0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

static float *input(params_t *ps, size_t n)
{
    float *x = malloc(n * sizeof *x);
    REQUIRE(x, "out of memory");
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0f * uniform(ps) - 1.0f;
    return x;
}

/* The inference graph agrees with the tape in eval mode, fused or not as
 * expected. */
static void fused_vs_tape(backend_t *be, const net_t *net, double tol)
{
    const char *bn_ = backend_name(be);
    params_t ps = {.seed = 7};
    built_t t = build(be, net, &ps, 0), f = build(be, net, &ps, 1);
    float *x = input(&ps, t.nx), *yt = malloc(t.ny * sizeof *yt), *yf = malloc(t.ny * 4);
    REQUIRE(yt && yf, "out of memory");
    run(&t, net->name, x, yt);
    run(&f, net->name, x, yf);
    double e = rel_err(yf, yt, t.ny);
    printf("  %-4s %-10s %-16s fused %d  max|fused - tape| / max|tape| %.2g\n", bn_, net->name,
           backend_precision_name(be), bk_graph_fused(f.g), e);
    CHECK(bk_graph_fused(f.g) == net->fused, "%s %s: bk_graph_fused %d, want %d", bn_,
          net->name, bk_graph_fused(f.g), net->fused);
    CHECK(!bk_graph_fused(t.g), "%s %s: a training graph is never fused", bn_, net->name);
    CHECK(e <= tol, "%s %s: fused vs tape %.3g > %g", bn_, net->name, e, tol);
    bk_graph_destroy(&t.g);
    bk_graph_destroy(&f.g);
    free(x);
    free(yt);
    free(yf);
    params_free(&ps);
}

/* The fused ops snapshot the parameters: a changed BN gamma shows only
 * after bk_graph_reload (with the input written before it kept), then as
 * on the tape. Switched to training mode, the graph runs on the tape. */
static void reload_and_modes(backend_t *be)
{
    const char *bn_ = backend_name(be);
    const net_t *net = &NETS[0];
    params_t ps = {.seed = 11};
    built_t t = build(be, net, &ps, 0), f = build(be, net, &ps, 1);
    size_t ny = t.ny;
    float *x = input(&ps, t.nx), *y0 = malloc(ny * 4), *y1 = malloc(ny * 4), *yt = malloc(ny * 4);
    REQUIRE(y0 && y1 && yt, "out of memory");
    run(&f, "reload", x, y0);
    REQUIRE(bk_graph_fused(f.g), "%s: not fused", bn_);
    float *gamma = ps.p[1];   /* the stem BN's weight (ps.p[0]: the conv's) */
    for (int i = 0; i < 8; i++)
        gamma[i] *= 1.5f;
    run(&f, "reload", NULL, y1);
    CHECK(rel_err(y1, y0, ny) == 0.0, "%s: output changed before bk_graph_reload", bn_);
    bk_graph_reload(f.g);
    run(&f, "reload", NULL, y1);
    run(&t, "reload", x, yt);
    CHECK(rel_err(y1, y0, ny) > 1e-3, "%s: bk_graph_reload did not re-read the weights", bn_);
    CHECK(rel_err(y1, yt, ny) <= TOL, "%s: after reload, fused vs tape %.3g", bn_,
          rel_err(y1, yt, ny));
    CHECK(bk_graph_fused(f.g), "%s: fused after reload", bn_);

    /* training mode: batch statistics, on the tape (the input carried over) */
    bk_graph_set_training(f.g, 1);
    bk_graph_set_training(t.g, 1);
    run(&f, "training", NULL, y1);
    run(&t, "training", NULL, yt);
    CHECK(!bk_graph_fused(f.g), "%s: fused in training mode", bn_);
    CHECK(rel_err(y1, yt, ny) == 0.0 && rel_err(y1, y0, ny) > 1e-3,
          "%s: training mode after fusing: %.3g from the tape", bn_, rel_err(y1, yt, ny));
    bk_graph_destroy(&t.g);
    bk_graph_destroy(&f.g);
    free(x);
    free(y0);
    free(y1);
    free(yt);
    params_free(&ps);
}

/* Writing the input and reading the output work on a fused graph; reading
 * a tensor that was folded away, or a residual accumulated into, fails. */
/* A frozen prefix (conv-bn-relu x 4, pool) under a trainable linear head
 * with cross-entropy: built twice, once with every activation kept
 * (bk_keep) and once planned. The planned tape keeps only what backward
 * reads (the head's input), the input and the outputs: its activation bytes
 * are at most 60 % of the kept one's, the loss, logits and the head's
 * gradients are the same bits, and a read of a reused activation fails. */
typedef struct {
    bk_graph_t *g;
    bk_tensor_t *x, *mid, *logits, *loss;
    float gw[10 * 8 * 8 * 8], gb[10];
} frozen_net_t;

static void frozen_build(backend_t *be, params_t *ps, int keep_all, frozen_net_t *f)
{
    ps->cur = 0;
    memset(f->gw, 0, sizeof f->gw);
    memset(f->gb, 0, sizeof f->gb);
    f->g = bk_graph_new(be);
    bk_graph_set_training(f->g, 0);
    f->x = bk_input(f->g, 4, 3, 16, 16, 0);
    bk_tensor_t *t = f->x, *v[8];
    int nv = 0;
    for (int i = 0; i < 4; i++) {
        t = bn(f->g, ps, conv(f->g, ps, t, 8, 3, 1, 1, 0), 0);
        v[nv++] = t;
        t = bk_relu(f->g, t);
        v[nv++] = t;
    }
    f->mid = v[3];
    t = pool(f->g, t, BK_POOL_MAX, 2, 2, 0);
    float a = 0.05f;
    f->logits = bk_linear(f->g, t, 10, param(ps, sizeof f->gw / sizeof f->gw[0], -a, a), f->gw,
                          param(ps, 10, -a, a), f->gb);
    f->loss = bk_softmax_ce(f->g, f->logits, 0.0f);
    for (int i = 0; keep_all && i < nv; i++)
        REQUIRE(bk_keep(f->g, v[i]) == 0, "bk_keep: %s", bk_graph_error(f->g));
    REQUIRE(f->loss && bk_keep(f->g, f->logits) == 0, "frozen net: %s", bk_graph_error(f->g));
}

static void frozen_run(frozen_net_t *f, float *loss, float *logits)
{
    float in[4 * 3 * 16 * 16], dl[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    int32_t labels[4] = {1, 3, 5, 7};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        in[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    REQUIRE(bk_write(f->g, f->x, in) == 0 && bk_set_labels(f->g, labels) == 0 &&
            bk_forward(f->g) == 0 && bk_backward(f->g, f->loss, dl) == 0 &&
            bk_read(f->g, f->loss, loss) == 0 && bk_read(f->g, f->logits, logits) == 0,
            "frozen net run: %s", bk_graph_error(f->g));
}

static void memory_plan(backend_t *be)
{
    const char *bn_ = backend_name(be);
    params_t ps = {.seed = 11};
    frozen_net_t kept, planned;
    float l1[4], l2[4], y1[40], y2[40], tmp[4 * 8 * 16 * 16];
    frozen_build(be, &ps, 1, &kept);
    frozen_build(be, &ps, 0, &planned);
    frozen_run(&kept, l1, y1);
    frozen_run(&planned, l2, y2);
    size_t bk = bk_graph_bytes(kept.g), bp = bk_graph_bytes(planned.g);
    printf("%s: frozen prefix: %zu activation bytes planned, %zu all kept\n", bn_, bp, bk);
    CHECK(bp > 0 && bp * 10 <= bk * 6, "%s: planned %zu bytes, kept %zu: want <= 60 %%", bn_, bp,
          bk);
    CHECK(memcmp(l1, l2, sizeof l1) == 0 && memcmp(y1, y2, sizeof y1) == 0,
          "%s: planned loss/logits differ from the kept graph's", bn_);
    CHECK(memcmp(kept.gw, planned.gw, sizeof kept.gw) == 0 &&
          memcmp(kept.gb, planned.gb, sizeof kept.gb) == 0,
          "%s: planned head gradients differ from the kept graph's", bn_);
    CHECK(bk_read(kept.g, kept.mid, tmp) == 0, "%s: read of a kept activation: %s", bn_,
          bk_graph_error(kept.g));
    CHECK(bk_read(planned.g, planned.mid, tmp) < 0 &&
          strstr(bk_graph_error(planned.g), "not kept"),
          "%s: read of a reused activation: %s", bn_, bk_graph_error(planned.g));
    CHECK(bk_keep(kept.g, kept.mid) < 0, "%s: bk_keep after compiling accepted", bn_);
    bk_graph_destroy(&kept.g);
    bk_graph_destroy(&planned.g);
    params_free(&ps);
}

static void fused_away(backend_t *be)
{
    const char *bn_ = backend_name(be);
    params_t ps = {.seed = 5};
    bk_graph_t *g = bk_graph_new(be);
    bk_graph_set_forward_only(g);
    bk_graph_set_training(g, 0);
    bk_tensor_t *x = bk_input(g, 1, 2, 4, 4, 0);
    bk_tensor_t *c = conv(g, &ps, x, 4, 3, 1, 1, 0);
    bk_tensor_t *r = bn(g, &ps, c, 1);
    bk_tensor_t *y = bk_add(g, bn(g, &ps, conv(g, &ps, r, 4, 3, 1, 1, 0), 0), r);
    float in[32], out[64];
    for (int i = 0; i < 32; i++)
        in[i] = (float)i / 32.0f;
    REQUIRE(bk_write(g, x, in) == 0 && bk_forward(g) == 0 && bk_read(g, y, out) == 0,
            "%s: fused forward: %s", bn_, bk_graph_error(g));
    CHECK(bk_graph_fused(g), "%s: conv-bn-add not fused", bn_);
    CHECK(bk_read(g, c, out) < 0 && bk_graph_error(g) &&
          strstr(bk_graph_error(g), "fused away"), "%s: read of a folded conv: %s", bn_,
          bk_graph_error(g));
    bk_graph_destroy(&g);

    /* a BasicBlock: r is the residual the last conv accumulates into */
    g = bk_graph_new(be);
    bk_graph_set_forward_only(g);
    bk_graph_set_training(g, 0);
    x = bk_input(g, 1, 2, 4, 4, 0);
    r = bn(g, &ps, conv(g, &ps, x, 4, 3, 1, 1, 0), 1);
    c = bn(g, &ps, conv(g, &ps, r, 4, 3, 1, 1, 0), 1);
    y = bk_add(g, bn(g, &ps, conv(g, &ps, c, 4, 3, 1, 1, 0), 0), r);
    REQUIRE(bk_write(g, x, in) == 0 && bk_forward(g) == 0 && bk_read(g, c, out) == 0,
            "%s: a tensor the fused ops compute: %s", bn_, bk_graph_error(g));
    CHECK(bk_read(g, r, out) < 0 && strstr(bk_graph_error(g), "fused away"),
          "%s: read of a residual accumulated into", bn_);
    bk_graph_destroy(&g);
    params_free(&ps);
}

/* A folded copy of conv weight w [oc, per] and a bias from BN arrays
 * bn[0..3], by the engine's fold, for the hand-built old-style graph. */
static void fold(const float *w, const float *bias, int oc, size_t per, float *const *bnp,
                 float *fw, float *fb)
{
    memcpy(fw, w, (size_t)oc * per * sizeof *fw);
    for (int o = 0; o < oc; o++)
        fb[o] = bias ? bias[o] : 0.0f;
    bk_bn_fold(fw, fb, oc, per, bnp[0], bnp[1], bnp[2], bnp[3], 1e-5f);
}

/* Conv of parameter index pi (its BN at pi + 1 .. pi + 4 when bn, folded
 * by hand into a copy kept in own[]) as models/ built the eval graph. */
static bk_tensor_t *old_conv(bk_graph_t *g, params_t *ps, int pi, int bn_, bk_tensor_t *x,
                             int ic, int oc, int k, int stride, float **own, int *nown)
{
    size_t per = (size_t)ic * k * k;
    float *fw = NULL, *fb = NULL;
    if (bn_) {
        fw = malloc((size_t)oc * per * sizeof *fw);
        fb = malloc((size_t)oc * sizeof *fb);
        REQUIRE(fw && fb, "out of memory");
        fold(ps->p[pi], NULL, oc, per, &ps->p[pi + 1], fw, fb);
        own[(*nown)++] = fw;
        own[(*nown)++] = fb;
    }
    bk_conv_t p = {.ic = ic, .oc = oc, .kh = k, .kw = k, .stride_h = stride,
                   .stride_w = stride, .pad_h = k / 2, .pad_w = k / 2,
                   .weight = bn_ ? fw : ps->p[pi], .bias = bn_ ? fb : ps->p[pi + 1]};
    return bk_conv2d(g, x, &p);
}

/* A stem, a BasicBlock with downsample and a WideResNet block with a scale
 * conv: tape (fused) vs the eval graph built by hand as models/ did. */
static bk_tensor_t *net_oldpath(bk_graph_t *g, params_t *ps, bk_tensor_t *x)
{
    bk_tensor_t *t = bn(g, ps, conv(g, ps, x, 8, 3, 1, 1, 0), 1);   /* params 0..4 */
    t = basic_block(g, ps, t, 16, 2, 1);                          /* 5..19 */
    return wrn_block(g, ps, t, 24);                               /* 20..31 */
}

static void same_bits_as_eval_graph(backend_t *be)
{
    const char *bn_ = backend_name(be);
    const net_t net = {"oldpath", net_oldpath, 3, 12, 12, 1};
    params_t ps = {.seed = 3};
    built_t f = build(be, &net, &ps, 1);
    REQUIRE(ps.n == 32, "net_oldpath has %d parameter arrays, the old path wants 32", ps.n);
    float *own[16];
    int nown = 0;
    bk_graph_t *g = bk_graph_new(be);
    bk_graph_set_forward_only(g);
    bk_graph_set_training(g, 0);
    bk_tensor_t *x = bk_input(g, BATCH, 3, 12, 12, 0);
    bk_tensor_t *t = bk_relu(g, old_conv(g, &ps, 0, 1, x, 3, 8, 3, 1, own, &nown));
    /* each block's main branch first: its last conv takes the sum, as the
     * old graph's did (the planner gives it to the first conv recorded) */
    bk_tensor_t *y = bk_relu(g, old_conv(g, &ps, 5, 1, t, 8, 16, 3, 2, own, &nown));
    y = old_conv(g, &ps, 10, 1, y, 16, 16, 3, 1, own, &nown);
    bk_tensor_t *id = old_conv(g, &ps, 15, 1, t, 8, 16, 1, 2, own, &nown);
    t = bk_relu(g, bk_add(g, y, id));
    y = bk_relu(g, old_conv(g, &ps, 20, 1, t, 16, 24, 3, 1, own, &nown));
    y = bk_relu(g, old_conv(g, &ps, 25, 1, y, 24, 24, 3, 1, own, &nown));
    bk_tensor_t *res = old_conv(g, &ps, 30, 0, t, 16, 24, 1, 1, own, &nown);
    t = bk_add(g, y, res);
    REQUIRE(t, "%s: old eval graph: %s", bn_, bk_graph_error(g));
    float *xin = input(&ps, f.nx), *ya = malloc(f.ny * 4), *yb = malloc(f.ny * 4);
    REQUIRE(ya && yb, "out of memory");
    REQUIRE(bk_write(g, x, xin) == 0 && bk_forward(g) == 0 && bk_read(g, t, ya) == 0, "%s: %s",
            bn_, bk_graph_error(g));
    CHECK(bk_graph_fused(g), "%s: the hand-folded graph not fused", bn_);
    run(&f, "oldpath", xin, yb);
    CHECK(bk_graph_fused(f.g), "%s: oldpath not fused", bn_);
    CHECK(memcmp(ya, yb, f.ny * sizeof *ya) == 0, "%s: fused vs the old eval graph: %.3g",
          bn_, rel_err(yb, ya, f.ny));
    printf("  %-4s oldpath    fused vs hand-built eval graph: max rel diff %.2g\n", bn_,
           rel_err(yb, ya, f.ny));
    bk_graph_destroy(&g);
    for (int i = 0; i < nown; i++)
        free(own[i]);
    bk_graph_destroy(&f.g);
    free(xin);
    free(ya);
    free(yb);
    params_free(&ps);
}

/* ------------------------------------------------------------ description */

static void description_graph(void)
{
    params_t ps = {.seed = 1};
    bk_graph_t *g = bk_graph_new(NULL);
    REQUIRE(g, "bk_graph_new(NULL)");
    bk_graph_set_name(g, "input");
    bk_tensor_t *x = bk_input(g, 2, 3, 8, 8, 0);
    bk_graph_set_name(g, "conv1");
    bk_tensor_t *y = conv(g, &ps, x, 8, 3, 1, 1, 0);
    CHECK(y && !bk_graph_error(g), "description graph: conv: %s", bk_graph_error(g));
    int n, c, h, w;
    if (y) {
        bk_tensor_dims(y, &n, &c, &h, &w);
        CHECK(n == 2 && c == 8 && h == 8 && w == 8, "conv output [%d,%d,%d,%d]", n, c, h, w);
    }
    float out[2 * 8 * 8 * 8];
    CHECK(bk_forward(g) < 0 && bk_graph_error(g) &&
          strstr(bk_graph_error(g), "description graph"),
          "forward of a description graph: %s", bk_graph_error(g));
    CHECK(bk_read(g, y, out) < 0, "read of a description graph");
    bk_graph_destroy(&g);

    /* every test network describes itself without a backend */
    for (size_t i = 0; i < sizeof NETS / sizeof NETS[0]; i++) {
        g = bk_graph_new(NULL);
        ps.cur = ps.n;   /* new arrays */
        x = bk_input(g, BATCH, NETS[i].c, NETS[i].h, NETS[i].w, 0);
        CHECK(NETS[i].fn(g, &ps, x) && !bk_graph_error(g), "description of %s: %s",
              NETS[i].name, bk_graph_error(g));
        CHECK(bk_write(g, x, out) < 0 && !bk_graph_fused(g), "description of %s ran",
              NETS[i].name);
        bk_graph_destroy(&g);
    }

    /* shape checks with the messages of a graph with a backend */
    g = bk_graph_new(NULL);
    x = bk_input(g, 2, 3, 8, 8, 0);
    bk_graph_set_name(g, "conv1");
    bk_conv_t bad = {.ic = 4, .oc = 8, .kh = 3, .kw = 3, .stride_h = 1, .stride_w = 1,
                      .weight = param(&ps, 8 * 4 * 9, -1, 1)};
    CHECK(!bk_conv2d(g, x, &bad) && bk_graph_error(g) &&
          strstr(bk_graph_error(g), "conv1: bad conv: ic 4 (input has 3)"),
          "shape check: %s", bk_graph_error(g));
    bk_graph_destroy(&g);
    params_free(&ps);
}

/* ---------------------------------------------------------------- compile */

static void build_after_compile(backend_t *be)
{
    params_t ps = {.seed = 2};
    bk_graph_t *g = bk_graph_new(be);
    bk_tensor_t *x = bk_input(g, 1, 3, 4, 4, 0);
    bk_tensor_t *y = conv(g, &ps, x, 4, 3, 1, 1, 1);
    CHECK(bk_graph_compile(g) == 0, "%s: compile: %s", backend_name(be), bk_graph_error(g));
    CHECK(!bk_relu(g, y) && bk_graph_error(g) &&
          strstr(bk_graph_error(g), "after the graph was compiled"),
          "%s: builder after compile: %s", backend_name(be), bk_graph_error(g));
    bk_graph_destroy(&g);
    params_free(&ps);
}

/* A graph on the tape gives the same bits with 1 and 2 threads: its inner
 * products run on one thread (dnnl_train.c), as the inference kernels' do. A
 * 640 -> 10 linear split over 2 threads changed logits' last bits. */
static bk_tensor_t *net_fc(bk_graph_t *g, params_t *ps, bk_tensor_t *x)
{
    return linear(g, ps, x, 10);
}

#define FC_BATCH 64

static void tape_thread_invariance(void)
{
    static const net_t fcs[] = {{"fc 640", net_fc, 640, 1, 1, 0}, {"fc 64x4x4", net_fc, 64, 4, 4, 0},
                                {"dense", net_dense, 3, 8, 8, 0}};
    for (size_t k = 0; k < sizeof fcs / sizeof fcs[0]; k++) {
        float *y[2] = {NULL, NULL}, *x = NULL;
        size_t ny = 0;
        for (int t = 0; t < 2; t++) {
            char err[256];
            backend_t *be = backend_new("cpu", t + 1, err, sizeof err);
            REQUIRE(be, "backend cpu: %s", err);
            params_t ps = {.seed = 77};
            built_t b = {.g = bk_graph_new(be)};
            bk_graph_set_training(b.g, 0);
            b.x = bk_input(b.g, FC_BATCH, fcs[k].c, fcs[k].h, fcs[k].w, 0);
            b.y = fcs[k].fn(b.g, &ps, b.x);
            REQUIRE(b.y, "%s: build: %s", fcs[k].name, bk_graph_error(b.g));
            int n, c, h, w;
            bk_tensor_dims(b.y, &n, &c, &h, &w);
            b.ny = (size_t)n * c * h * w;
            b.nx = (size_t)FC_BATCH * fcs[k].c * fcs[k].h * fcs[k].w;
            if (!x)
                x = input(&ps, b.nx);
            ny = b.ny;
            y[t] = malloc(b.ny * sizeof *y[t]);
            REQUIRE(y[t], "out of memory");
            run(&b, fcs[k].name, x, y[t]);
            bk_graph_destroy(&b.g);
            params_free(&ps);
            backend_destroy(&be);
        }
        CHECK(memcmp(y[0], y[1], ny * sizeof *y[0]) == 0,
              "%s on the tape: 1 vs 2 threads differ (rel %.3g)", fcs[k].name,
              rel_err(y[1], y[0], ny));
        free(x), free(y[0]), free(y[1]);
    }
}

/* --precision bf16 (docs/BF16.md "bf16 inference plan"): the fused
 * program (BN folded, then rounded; every op's output bf16) against the
 * bf16 tape in eval mode (autocast's rounding points: conv, round, BN,
 * round): the rounding points differ, so a few bf16 steps apart (a plan
 * reading its input in the wrong layout would be ~1 apart). */
#define TOL_BF16 3e-2

static void fused_vs_tape_bf16(void)
{
    char err[256];
    backend_t *be = backend_new("cpu", 2, err, sizeof err);
    REQUIRE(be && backend_set_precision(be, "bf16", err, sizeof err) == 0, "bf16: %s", err);
    for (size_t k = 0; k < sizeof NETS / sizeof NETS[0]; k++)
        fused_vs_tape(be, &NETS[k], TOL_BF16);
    backend_destroy(&be);
}

/* The plan's 16-bit copies of folded parameters (bk_fold_round16): each
 * rounded to the format, but an fp16 bias past 65504 kept fp32, and a
 * weight past it refused. */
static void fold_round16_range(void)
{
    float w[3] = {1.0f / 3.0f, -2.5e-3f, 60000.0f}, b[3] = {1e5f, -7.0f / 3.0f, -65519.0f};
    float want_w[3], want_b[3] = {1e5f, fp16_round1(-7.0f / 3.0f), -65504.0f};
    for (int i = 0; i < 3; i++)
        want_w[i] = fp16_round1(w[i]);
    CHECK(bk_fold_round16(BK_HALF_FP16, w, 3, b, 3) == 0, "fp16: finite weights refused");
    CHECK(memcmp(w, want_w, sizeof w) == 0, "fp16 weights: %g %g %g", w[0], w[1], w[2]);
    CHECK(memcmp(b, want_b, sizeof b) == 0, "fp16 bias (1e5 kept fp32, -65519 -> -65504): "
          "%g %g %g", b[0], b[1], b[2]);
    float w2[2] = {1.0f, 70000.0f}, b2 = 1e5f, want_b2;
    CHECK(bk_fold_round16(BK_HALF_FP16, w2, 2, NULL, 0) == -1,
          "fp16: a weight rounding to an infinity not refused");
    bf16_round(&want_b2, &b2, 1);
    w2[1] = 70000.0f;   /* the refused call's arrays are not to be used */
    CHECK(bk_fold_round16(BK_HALF_BF16, w2, 2, &b2, 1) == 0 && b2 == want_b2 && w2[1] != 70000.0f,
          "bf16: 70000 and 1e5 are bf16-range values, rounded: %g %g", w2[1], b2);
}

int main(void)
{
    log_init("test_graph_plan", -1, 1);   /* the plan's debug lines: what fused */
    fold_round16_range();
    description_graph();
    tape_thread_invariance();
    const char *names[2] = {"cpu", "ref"};
    for (int i = 0; i < 2; i++) {
        char err[256];
        backend_t *be = backend_new(names[i], 2, err, sizeof err);
        REQUIRE(be, "backend %s: %s", names[i], err);
        build_after_compile(be);
        for (size_t k = 0; k < sizeof NETS / sizeof NETS[0]; k++)
            fused_vs_tape(be, &NETS[k], TOL);
        same_bits_as_eval_graph(be);
        reload_and_modes(be);
        fused_away(be);
        memory_plan(be);
        backend_destroy(&be);
    }
    fused_vs_tape_bf16();
    return tc_done("test_graph_plan");
}
