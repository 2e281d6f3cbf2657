/* graph_plan_bench — the inference plan's speed: a ResNet-18-shaped network
 * with random weights run (a) as the hand-folded eval graph, BatchNorm
 * folded into the conv weights by hand (conv with bias, relu, add), and (b)
 * as the one description (conv, batchnorm, relu, add, as for training);
 * both forward-only in eval mode, which the engine rewrites into fused
 * convs with post-ops (graph_plan.c). Repetitions
 * alternate in one process, a b, b a, a b ..., so that machine load and
 * cache warmth favour neither.
 *
 *   graph_plan_bench [--backend cpu] [--batch 8] [--size 224] [--threads 2]
 *                    [--reps 5]
 *
 * Prints per repetition and a summary: best and median seconds per
 * forward, the ratio fused / old, and max|a - b| / max|a| of the logits. */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/flags.h"
#include "gpud/backend.h"

#define MAX_ARRAYS 512
#define CLASSES 1000

typedef struct {
    const char *backend;
    long batch, size, threads, reps;
} opts_t;

/* Every parameter array, random, kept for the run. */
typedef struct {
    float *p[MAX_ARRAYS];
    int n;
    uint64_t seed;
} arena_t;

static float *arr(arena_t *a, size_t n, float lo, float hi)
{
    float *v = malloc(n * sizeof *v);
    if (!v || a->n == MAX_ARRAYS) {
        fprintf(stderr, "graph_plan_bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        a->seed = a->seed * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = lo + (hi - lo) * (float)((a->seed >> 40) / 16777216.0);
    }
    a->p[a->n++] = v;
    return v;
}

/* One conv + its BatchNorm: unfolded parameters (the tape binds them) and
 * the folded copy of the old path. */
typedef struct {
    bk_conv_t c;
    bk_bn_t bn;
    float *fw, *fb;
} cbn_t;

/* models/layers.c's bn_fold (double, rounded once per value), copied here so
 * the bench needs nothing from the models. */
static void fold(cbn_t *u)
{
    int oc = u->c.oc;
    size_t per = (size_t)u->c.ic * u->c.kh * u->c.kw;
    u->fw = malloc((size_t)oc * per * sizeof *u->fw);
    u->fb = calloc((size_t)oc, sizeof *u->fb);
    if (!u->fw || !u->fb)
        exit(1);
    memcpy(u->fw, u->c.weight, (size_t)oc * per * sizeof *u->fw);
    for (int o = 0; o < oc; o++) {
        double s = (double)u->bn.weight[o] / sqrt((double)u->bn.running_var[o] + u->bn.eps);
        for (size_t i = 0; i < per; i++)
            u->fw[(size_t)o * per + i] = (float)(u->fw[(size_t)o * per + i] * s);
        u->fb[o] = (float)(((double)u->fb[o] - u->bn.running_mean[o]) * s + u->bn.bias[o]);
    }
}

static cbn_t cbn_new(arena_t *a, int ic, int oc, int k, int stride, int pad)
{
    float r = sqrtf(6.0f / (float)(ic * k * k));
    cbn_t u = {.c = {.ic = ic, .oc = oc, .kh = k, .kw = k, .stride_h = stride,
                     .stride_w = stride, .pad_h = pad, .pad_w = pad,
                     .weight = arr(a, (size_t)oc * ic * k * k, -r, r)},
               .bn = {.c = oc, .weight = arr(a, (size_t)oc, 0.5f, 1.5f),
                      .bias = arr(a, (size_t)oc, -0.1f, 0.1f),
                      .running_mean = arr(a, (size_t)oc, -0.1f, 0.1f),
                      .running_var = arr(a, (size_t)oc, 0.5f, 2.0f), .momentum = 0.1f,
                      .eps = 1e-5f}};
    fold(&u);
    return u;
}

/* ResNet-18: stem, 4 layers of 2 BasicBlocks, fc. */
typedef struct {
    cbn_t stem, c1[8], c2[8], ds[8];
    int has_ds[8];
    float *fc_w, *fc_b;
} net_t;

static void net_init(net_t *m, arena_t *a)
{
    m->stem = cbn_new(a, 3, 64, 7, 2, 3);
    int in = 64;
    for (int l = 0, b = 0; l < 4; l++)
        for (int i = 0; i < 2; i++, b++) {
            int planes = 64 << l, stride = l > 0 && i == 0 ? 2 : 1;
            m->c1[b] = cbn_new(a, in, planes, 3, stride, 1);
            m->c2[b] = cbn_new(a, planes, planes, 3, 1, 1);
            m->has_ds[b] = stride != 1 || in != planes;
            if (m->has_ds[b])
                m->ds[b] = cbn_new(a, in, planes, 1, stride, 0);
            in = planes;
        }
    m->fc_w = arr(a, (size_t)CLASSES * 512, -0.04f, 0.04f);
    m->fc_b = arr(a, CLASSES, -0.04f, 0.04f);
}

static void net_free(net_t *m)
{
    free(m->stem.fw);
    free(m->stem.fb);
    for (int b = 0; b < 8; b++) {
        free(m->c1[b].fw);
        free(m->c1[b].fb);
        free(m->c2[b].fw);
        free(m->c2[b].fb);
        free(m->ds[b].fw);   /* NULL without a downsample */
        free(m->ds[b].fb);
    }
}

/* ---------------------------------------------------- the old eval graph */

/* conv with the folded weights as its bias, then what followed it */
static bk_tensor_t *old_conv(bk_graph_t *g, const cbn_t *u, bk_tensor_t *x, int relu)
{
    bk_conv_t c = u->c;
    c.weight = u->fw;
    c.bias = u->fb;
    bk_tensor_t *y = bk_conv2d(g, x, &c);
    return relu ? bk_relu(g, y) : y;
}

static bk_tensor_t *old_build(bk_graph_t *g, const net_t *m, bk_tensor_t *x)
{
    bk_tensor_t *t = old_conv(g, &m->stem, x, 1);
    bk_pool_t mp = {BK_POOL_MAX, 3, 3, 2, 2, 1, 1};
    t = bk_pool2d(g, t, &mp);
    for (int b = 0; b < 8; b++) {
        bk_tensor_t *y = old_conv(g, &m->c2[b], old_conv(g, &m->c1[b], t, 1), 0);
        bk_tensor_t *id = m->has_ds[b] ? old_conv(g, &m->ds[b], t, 0) : t;
        t = bk_relu(g, bk_add(g, y, id));
    }
    return bk_linear(g, bk_global_avg_pool(g, t), CLASSES, m->fc_w, NULL, m->fc_b, NULL);
}

/* ---------------------------------------------------- the tape description */

static bk_tensor_t *tape_cbn(bk_graph_t *g, const cbn_t *u, bk_tensor_t *x, int relu)
{
    bk_bn_t bn = u->bn;
    bn.relu = relu;
    return bk_batchnorm(g, bk_conv2d(g, x, &u->c), &bn);
}

static bk_tensor_t *tape_build(bk_graph_t *g, const net_t *m, bk_tensor_t *x)
{
    bk_tensor_t *t = tape_cbn(g, &m->stem, x, 1);
    bk_pool_t mp = {BK_POOL_MAX, 3, 3, 2, 2, 1, 1};
    t = bk_pool2d(g, t, &mp);
    for (int b = 0; b < 8; b++) {
        bk_tensor_t *y = tape_cbn(g, &m->c2[b], tape_cbn(g, &m->c1[b], t, 1), 0);
        bk_tensor_t *id = m->has_ds[b] ? tape_cbn(g, &m->ds[b], t, 0) : t;
        t = bk_relu(g, bk_add(g, y, id));
    }
    return bk_linear(g, bk_global_avg_pool(g, t), CLASSES, m->fc_w, NULL, m->fc_b, NULL);
}

/* ------------------------------------------------------------------ run */

static int parse(int argc, char **argv, opts_t *o)
{
    static const struct option longs[] = {
        {"backend", required_argument, 0, 'k'}, {"batch", required_argument, 0, 'b'},
        {"size", required_argument, 0, 's'},    {"threads", required_argument, 0, 't'},
        {"reps", required_argument, 0, 'r'},    {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'k': o->backend = optarg; break;
        case 'b': rc = flags_long("batch", optarg, 1, 1024, &o->batch); break;
        case 's': rc = flags_long("size", optarg, 32, 1024, &o->size); break;
        case 't': rc = flags_long("threads", optarg, 0, 1024, &o->threads); break;
        case 'r': rc = flags_long("reps", optarg, 1, 1000, &o->reps); break;
        default:
            fprintf(stderr, "usage: graph_plan_bench [--backend cpu] [--batch 8] "
                    "[--size 224] [--threads 2] [--reps 5]\n");
            return -1;
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, const char *err)
{
    fprintf(stderr, "graph_plan_bench: %s: %s\n", what, err ? err : "failed");
    exit(1);
}

int main(int argc, char **argv)
{
    opts_t o = {"cpu", 8, 224, 2, 5};
    if (parse(argc, argv, &o) < 0)
        return 2;
    char err[512];
    backend_t *be = backend_new(o.backend, (int)o.threads, err, sizeof err);
    if (!be)
        die("backend", err);
    arena_t a = {.seed = 42};
    static net_t m;
    net_init(&m, &a);
    int n = (int)o.batch, s = (int)o.size;
    size_t nx = (size_t)n * 3 * s * s, ny = (size_t)n * CLASSES;
    float *x = arr(&a, nx, -2.0f, 2.0f), *ya = malloc(ny * 4), *yb = malloc(ny * 4);

    double t0 = clock_mono_s();
    bk_graph_t *og = bk_graph_new(be);
    bk_graph_set_forward_only(og);
    bk_graph_set_training(og, 0);
    bk_tensor_t *ox = bk_input(og, n, 3, s, s, 0), *oy = old_build(og, &m, ox);
    if (!oy || bk_graph_compile(og) < 0)
        die("old eval graph", bk_graph_error(og));
    double t_old = clock_mono_s() - t0;
    t0 = clock_mono_s();
    bk_graph_t *tg = bk_graph_new(be);
    bk_graph_set_forward_only(tg);
    bk_graph_set_training(tg, 0);
    bk_tensor_t *tx = bk_input(tg, n, 3, s, s, 0), *ty = tape_build(tg, &m, tx);
    if (!ty || bk_graph_compile(tg) < 0)
        die("tape graph", bk_graph_error(tg));
    double t_new = clock_mono_s() - t0;
    printf("build+compile: old %.3f s, tape (fused %d) %.3f s\n", t_old, bk_graph_fused(tg),
           t_new);

    double *ta = calloc((size_t)o.reps, sizeof *ta), *tb = calloc((size_t)o.reps, sizeof *tb);
    for (long r = -1; r < o.reps; r++) {   /* r = -1: warm-up */
        double da = 0, db = 0;
        for (int k = 0; k < 2; k++) {
            int old_now = (k == 0) == (r % 2 == 0);
            double c = clock_mono_s();
            if (old_now && (bk_write(og, ox, x) < 0 || bk_forward(og) < 0 ||
                            bk_read(og, oy, ya) < 0))
                die("old forward", bk_graph_error(og));
            if (!old_now && (bk_write(tg, tx, x) < 0 || bk_forward(tg) < 0 ||
                             bk_read(tg, ty, yb) < 0))
                die("tape forward", bk_graph_error(tg));
            *(old_now ? &da : &db) = clock_mono_s() - c;
        }
        if (r < 0)
            continue;
        ta[r] = da;
        tb[r] = db;
        printf("rep %ld: old %.4f s  fused %.4f s  ratio %.3f\n", r, da, db, db / da);
    }
    double dmax = 0.0, ymax = 1e-30;
    for (size_t i = 0; i < ny; i++) {
        dmax = fmax(dmax, fabs((double)ya[i] - yb[i]));
        ymax = fmax(ymax, fabs((double)ya[i]));
    }
    qsort(ta, (size_t)o.reps, sizeof *ta, cmp_double);
    qsort(tb, (size_t)o.reps, sizeof *tb, cmp_double);
    printf("%s resnet18-shaped batch=%d size=%d threads=%ld reps=%ld: old best %.4f median "
           "%.4f s, fused best %.4f median %.4f s, fused/old best %.3f median %.3f, "
           "max|old - fused|/max|old| %.2g\n", o.backend, n, s, o.threads, o.reps, ta[0],
           ta[o.reps / 2], tb[0], tb[o.reps / 2], tb[0] / ta[0], tb[o.reps / 2] / ta[o.reps / 2],
           dmax / ymax);
    bk_graph_destroy(&og);
    bk_graph_destroy(&tg);
    backend_destroy(&be);
    net_free(&m);
    for (int i = 0; i < a.n; i++)
        free(a.p[i]);
    free(ya);
    free(yb);
    free(ta);
    free(tb);
    return 0;
}
