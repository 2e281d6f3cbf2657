/* Training ops (backend.h, bk_t*): every case of tests/golden/grads/
 * ops.safetensors (made by gen_grads.py with PyTorch 1.13 autograd) is
 * built from its metadata and run on both backends ("cpu" = oneDNN, "ref"
 * = plain C):
 *   - forward output, running stats, input and parameter gradients of
 *     sum(y * dy) against PyTorch: max|ours - torch| / max|torch| <= 1e-4;
 *   - finite differences on "ref" (float kernels with double accumulators):
 *     central differences with step h = 1e-2 (1e-3 for fused BN+ReLU,
 *     whose kinks a whole-channel shift crosses) of the objective computed in
 *     double, at 6 coordinates of the input and of every parameter:
 *     |fd - analytic| <= 1e-3 * max(max|analytic|, 1e-2) (float rounding
 *     of each output over h bounds the noise near 1e-5 relative here);
 *     not for the "ties=1" cases, which sit on purpose where the op has no
 *     derivative (equal maxima in overlapping max-pool windows, BN+ReLU
 *     pre-activations exactly 0) to pin PyTorch's choice there.
 * Also: dropout masks depend on the sample id, not the batch position. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "gpud/backend.h"
#include "golden_io.h"

#define TOL 1e-4
#define FD_H 1e-2
#define FD_H_KINK 1e-3   /* fused BN+ReLU: a channel shift moves many outputs near 0 */
#define FD_TOL 1e-3
#define FD_POINTS 6

static const safetensors_t *gold;

/* "op k=v k=v": the value of key, or def. */
static double arg(const char *meta, const char *key, double def)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(meta, pat);
    return p ? atof(p + strlen(pat)) : def;
}

static float *load(const char *c, const char *what, size_t *n)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", c, what);
    const st_tensor_t *t = safetensors_get(gold, name);
    if (!t)
        return NULL;
    float *v = malloc((size_t)t->numel * sizeof *v);
    REQUIRE(v && st_tensor_to_f32(t, v, (size_t)t->numel) == 0, "%s", name);
    if (n)
        *n = (size_t)t->numel;
    return v;
}

static const st_tensor_t *tensor(const char *c, const char *what)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", c, what);
    return safetensors_get(gold, name);
}

/* The op's parameters: values (copies) and gradient outputs. */
typedef struct {
    float *w, *gw, *b, *gb, *rm, *rv;
    size_t nw, nb, nc;
} params_t;

static void params_load(params_t *p, const char *c)
{
    memset(p, 0, sizeof *p);
    p->w = load(c, "w", &p->nw);
    p->b = load(c, "b", &p->nb);
    p->rm = load(c, "rm", &p->nc);
    p->rv = load(c, "rv", NULL);
    p->gw = p->w ? calloc(p->nw, sizeof(float)) : NULL;
    p->gb = p->b ? calloc(p->nb, sizeof(float)) : NULL;
}

static void params_free(params_t *p)
{
    free(p->w);
    free(p->gw);
    free(p->b);
    free(p->gb);
    free(p->rm);
    free(p->rv);
}

static bk_tensor_t *build_op(bk_graph_t *g, bk_tensor_t *x, const char *meta, params_t *p)
{
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    if (strncmp(meta, "conv ", 5) == 0) {
        int k = (int)arg(meta, "k", 1), s = (int)arg(meta, "s", 1), pd = (int)arg(meta, "p", 0);
        bk_conv_t cv = {.ic = c, .oc = (int)arg(meta, "oc", 1), .kh = k, .kw = k,
                         .stride_h = s, .stride_w = s, .pad_h = pd, .pad_w = pd,
                         .weight = p->w, .grad_weight = p->gw, .bias = p->b,
                         .grad_bias = p->gb};
        return bk_conv2d(g, x, &cv);
    }
    if (strncmp(meta, "bn ", 3) == 0) {
        bk_bn_t bn = {.c = c, .weight = p->w, .grad_weight = p->gw, .bias = p->b,
                       .grad_bias = p->gb, .running_mean = p->rm, .running_var = p->rv,
                       .momentum = (float)arg(meta, "momentum", 0.1), .eps = 1e-5f,
                       .relu = (int)arg(meta, "relu", 0)};
        bk_graph_set_training(g, (int)arg(meta, "training", 1));
        return bk_batchnorm(g, x, &bn);
    }
    if (strcmp(meta, "relu") == 0)
        return bk_relu(g, x);
    if (strncmp(meta, "pool ", 5) == 0) {
        int k = (int)arg(meta, "k", 1), s = (int)arg(meta, "s", 1), pd = (int)arg(meta, "p", 0);
        bk_pool_t pl = {(bk_pool_alg_t)(int)arg(meta, "alg", 0), k, k, s, s, pd, pd};
        return bk_pool2d(g, x, &pl);
    }
    if (strcmp(meta, "gap") == 0)
        return bk_global_avg_pool(g, x);
    if (strncmp(meta, "linear ", 7) == 0)
        return bk_linear(g, x, (int)arg(meta, "out", 1), p->w, p->gw, p->b, p->gb);
    if (strcmp(meta, "flatten") == 0)
        return bk_flatten(g, x);
    if (strcmp(meta, "add") == 0)
        return bk_add(g, bk_relu(g, x), x);
    if (strcmp(meta, "concat") == 0) {
        bk_tensor_t *xs[2] = {x, bk_relu(g, x)};
        return bk_concat(g, 2, xs);
    }
    if (strncmp(meta, "dropout ", 8) == 0)
        return bk_dropout(g, x, (float)arg(meta, "p", 0));
    if (strncmp(meta, "ce ", 3) == 0)
        return bk_softmax_ce(g, x, (float)arg(meta, "smoothing", 0));
    return NULL;
}

typedef struct {
    bk_graph_t *g;
    bk_tensor_t *x, *y;
    size_t nx, ny;
} built_t;

static void build_case(built_t *b, backend_t *be, const char *c, const char *meta, params_t *p)
{
    const st_tensor_t *xt = tensor(c, "x");
    REQUIRE(xt && xt->ndim == 4, "%s.x", c);
    b->g = bk_graph_new(be);
    b->x = bk_input(b->g, (int)xt->shape[0], (int)xt->shape[1], (int)xt->shape[2],
                      (int)xt->shape[3], 1);
    b->y = build_op(b->g, b->x, meta, p);
    REQUIRE(b->y, "%s on %s: build failed: %s", c, backend_name(be), bk_graph_error(b->g));
    int n, ch, h, w;
    bk_tensor_dims(b->y, &n, &ch, &h, &w);
    b->ny = (size_t)n * ch * h * w;
    b->nx = (size_t)xt->numel;
    const st_tensor_t *lt = tensor(c, "labels");
    if (lt) {
        int32_t lab[16];
        REQUIRE(lt->numel <= 16, "labels");
        memcpy(lab, lt->data, (size_t)lt->numel * sizeof *lab);
        REQUIRE(bk_set_labels(b->g, lab) == 0, "labels: %s", bk_graph_error(b->g));
    }
    int64_t ids[2] = {(int64_t)arg(meta, "id0", 0), (int64_t)arg(meta, "id1", 1)};
    int drop = strncmp(meta, "dropout ", 8) == 0;
    REQUIRE(!drop || n == 2, "the dropout case has 2 samples");
    REQUIRE(bk_set_step(b->g, (uint64_t)arg(meta, "seed", 0), (uint64_t)arg(meta, "step", 0),
                          drop ? ids : NULL) == 0, "set_step");
}

/* sum(y * dy) in double after a forward with the current x and params. */
static double objective(built_t *b, const float *x, const float *dy, float *ybuf)
{
    REQUIRE(bk_write(b->g, b->x, x) == 0 && bk_forward(b->g) == 0 &&
            bk_read(b->g, b->y, ybuf) == 0, "forward: %s", bk_graph_error(b->g));
    double s = 0.0;
    for (size_t i = 0; i < b->ny; i++)
        s += (double)ybuf[i] * dy[i];
    return s;
}

static void cmp(const char *c, const char *be, const char *what, const float *got,
                size_t n)
{
    size_t nw = 0;
    float *want = load(c, what, &nw);
    if (!want)
        return;
    REQUIRE(nw == n, "%s.%s: %zu values, golden has %zu", c, what, n, nw);
    double e = golden_rel_err(got, want, n);
    CHECK(e <= TOL, "%s on %s: %s relative error %.3g > %g", c, be, what, e, TOL);
    printf("  %-4s %-6s rel err %.2g\n", be, what, e);
    free(want);
}

/* Central differences of the objective at FD_POINTS coordinates of v. */
static void fd_check(built_t *b, const char *c, const char *what, float *v, size_t n,
                     const float *analytic, float *x, const float *dy, float *ybuf, double h)
{
    double amax = 1e-2;
    for (size_t i = 0; i < n; i++)
        amax = fabs(analytic[i]) > amax ? fabs(analytic[i]) : amax;
    double worst = 0.0;
    for (int k = 0; k < FD_POINTS && k < (int)n; k++) {
        size_t i = (size_t)k * 7919u % n;
        float keep = v[i];
        v[i] = (float)(keep + h);
        double up = objective(b, x, dy, ybuf);
        v[i] = (float)(keep - h);
        double dn = objective(b, x, dy, ybuf);
        v[i] = keep;
        double fd = (up - dn) / (2 * h), e = fabs(fd - analytic[i]) / amax;
        worst = e > worst ? e : worst;
        CHECK(e <= FD_TOL, "%s: finite difference of %s[%zu] = %.6g, analytic %.6g", c, what,
              i, fd, (double)analytic[i]);
    }
    printf("  fd   %-6s worst %.2g\n", what, worst);
}

static void run_case(backend_t *be, const char *c, const char *meta, int fd)
{
    params_t p;
    params_load(&p, c);
    built_t b;
    build_case(&b, be, c, meta, &p);
    float *x = load(c, "x", NULL), *dy = load(c, "dy", NULL);
    float *y = malloc(b.ny * sizeof *y), *gx = malloc(b.nx * sizeof *gx);
    REQUIRE(x && dy && y && gx, "alloc");
    objective(&b, x, dy, y);
    const char *bn = backend_name(be);
    cmp(c, bn, "y", y, b.ny);
    if (p.rm) {
        cmp(c, bn, "rm_out", p.rm, p.nc);
        cmp(c, bn, "rv_out", p.rv, p.nc);
    }
    REQUIRE(bk_backward(b.g, b.y, dy) == 0 && bk_read_grad(b.g, b.x, gx) == 0,
            "%s backward: %s", c, bk_graph_error(b.g));
    cmp(c, bn, "gx", gx, b.nx);
    if (p.w)
        cmp(c, bn, "gw", p.gw, p.nw);
    if (p.b)
        cmp(c, bn, "gb", p.gb, p.nb);
    if (fd && !arg(meta, "ties", 0)) {   /* ties: non-differentiable on purpose */
        double h = arg(meta, "relu", 0) ? FD_H_KINK : FD_H;
        fd_check(&b, c, "x", x, b.nx, gx, x, dy, y, h);
        if (p.w)
            fd_check(&b, c, "w", p.w, p.nw, p.gw, x, dy, y, h);
        if (p.b)
            fd_check(&b, c, "b", p.b, p.nb, p.gb, x, dy, y, h);
    }
    bk_graph_destroy(&b.g);
    params_free(&p);
    free(x);
    free(dy);
    free(y);
    free(gx);
}

/* Sample 42's dropout mask is the same wherever it sits in the batch. */
static void dropout_ids(backend_t *be)
{
    int c = 3, h = 4, w = 5, per = c * h * w;
    bk_graph_t *g2 = bk_graph_new(be), *g1 = bk_graph_new(be);
    bk_tensor_t *x2 = bk_input(g2, 2, c, h, w, 0), *x1 = bk_input(g1, 1, c, h, w, 0);
    bk_tensor_t *y2 = bk_dropout(g2, x2, 0.5f), *y1 = bk_dropout(g1, x1, 0.5f);
    REQUIRE(y1 && y2, "dropout build");
    float ones[2 * 60], a[2 * 60], b[60];
    for (int i = 0; i < 2 * per; i++)
        ones[i] = 1.0f;
    int64_t ids2[2] = {7, 42}, ids1[1] = {42};
    REQUIRE(bk_set_step(g2, 1, 9, ids2) == 0 && bk_set_step(g1, 1, 9, ids1) == 0 &&
            bk_write(g2, x2, ones) == 0 && bk_write(g1, x1, ones) == 0 &&
            bk_forward(g2) == 0 && bk_forward(g1) == 0 && bk_read(g2, y2, a) == 0 &&
            bk_read(g1, y1, b) == 0, "dropout run");
    CHECK(memcmp(a + per, b, (size_t)per * sizeof *b) == 0,
          "%s: dropout mask of sample 42 depends on its batch position", backend_name(be));
    int kept = 0;
    for (int i = 0; i < per; i++)
        kept += b[i] != 0.0f;
    CHECK(kept > per / 5 && kept < per * 4 / 5, "dropout kept %d of %d at p=0.5", kept, per);
    bk_graph_destroy(&g1);
    bk_graph_destroy(&g2);
}

/* An add's input that feeds only that add shares the add's gradient
 * buffer (tape_compile.c share_add_grads): r1, r2, r3 and y below read
 * back the add's gradient exactly, x (three branches) their sum through
 * the ReLUs, twice in a row, and the graph holds gradient buffers for x
 * and z only (plus the temporary) beside its six values. */
static void add_shared_grads(backend_t *be)
{
    enum { N = 2 * 3 * 4 * 5 };
    bk_graph_t *g = bk_graph_new(be);
    bk_tensor_t *x = bk_input(g, 2, 3, 4, 5, 1);
    bk_tensor_t *r1 = bk_relu(g, x), *r2 = bk_relu(g, x), *r3 = bk_relu(g, x);
    bk_tensor_t *y = bk_add(g, r1, r2), *z = bk_add(g, y, r3);
    REQUIRE(z, "shared-gradient graph: %s", bk_graph_error(g));
    float xv[N], dy[N], got[N];
    for (int i = 0; i < N; i++) {
        xv[i] = (float)(i % 7) - 3.0f;   /* zeros and negatives: the ReLUs' mask */
        dy[i] = (float)(i % 5) - 2.0f;
    }
    for (int step = 0; step < 2; step++) {
        REQUIRE(bk_write(g, x, xv) == 0 && bk_forward(g) == 0 && bk_backward(g, z, dy) == 0,
                "shared-gradient step %d: %s", step, bk_graph_error(g));
        bk_tensor_t *shared[4] = {r1, r2, r3, y};
        for (int k = 0; k < 4; k++)
            CHECK(bk_read_grad(g, shared[k], got) == 0 && memcmp(got, dy, sizeof got) == 0,
                  "%s step %d: an add input's gradient is not the add's (input %d)",
                  backend_name(be), step, k);
        REQUIRE(bk_read_grad(g, x, got) == 0, "read x's gradient");
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += got[i] != (xv[i] > 0.0f ? 3.0f * dy[i] : 0.0f);
        CHECK(bad == 0, "%s step %d: %d of x's gradients wrong", backend_name(be), step, bad);
    }
    size_t want = (6 + 2 + 1) * (size_t)N * sizeof(float);
    CHECK(bk_graph_bytes(g) == want, "%s: the graph holds %zu bytes, %zu with shared add "
          "gradients", backend_name(be), bk_graph_bytes(g), want);
    bk_graph_destroy(&g);
}

int main(void)
{
    char path[512], err[512];
    setvbuf(stdout, NULL, _IOLBF, 0);
    safetensors_t *st = safetensors_open(tc_src("tests/golden/grads/ops.safetensors", path,
                                                sizeof path), err, sizeof err);
    REQUIRE(st, "%s", err);
    gold = st;
    backend_t *cpu = backend_new("cpu", 2, err, sizeof err);
    backend_t *ref = backend_new("ref", 2, err, sizeof err);
    REQUIRE(cpu && ref, "%s", err);
    size_t nm = safetensors_meta_count(st);
    REQUIRE(nm >= 20, "only %zu cases in the golden file", nm);
    for (size_t i = 0; i < nm; i++) {
        const char *c, *meta;
        REQUIRE(safetensors_meta_at(st, i, &c, &meta) == 0, "metadata %zu", i);
        printf("%s: %s\n", c, meta);
        run_case(cpu, c, meta, 0);
        run_case(ref, c, meta, 1);
    }
    dropout_ids(cpu);
    dropout_ids(ref);
    add_shared_grads(cpu);
    add_shared_grads(ref);
    backend_destroy(&cpu);
    backend_destroy(&ref);
    safetensors_destroy(&st);
    return tc_done("test_train_ops");
}
