/* Every inference kernel on oneDNN ("cpu") against the plain C reference
 * ("ref"), on random data, as forward-only eval-mode graphs that the
 * planner rewrites into fused ops (checked: bk_graph_fused), over shapes
 * that hit the awkward cases: channels that are not a multiple of 8 or 16,
 * odd sizes with stride 2 (floor-mode output), 7x7 stems, 1x1 strided
 * projections, both post-op orders with an in-place residual, padding in
 * max and average pooling (with and without count_include_pad), linear on
 * 4-D and 2-D inputs, chained layers that keep oneDNN's blocked layout.
 * Also: BN folding against an explicit BatchNorm, and the graph's error
 * reporting. Metric: max|cpu - ref| / max(|ref|, 1e-3) <= 1e-5 per output
 * tensor. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend.h"
#include "gpud/cpu/ref_ops.h"
#include "gpud/models/layers.h"
#include "gpud/backend_impl.h"   /* bk_bn_fold, bk_postop_t */
#include "tcheck.h"

#define TOL 1e-5

static uint32_t rng = 7;

static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *rand_buf(size_t n)
{
    float *b = malloc(n * sizeof *b);
    REQUIRE(b, "alloc");
    for (size_t i = 0; i < n; i++)
        b[i] = frand();
    return b;
}

static size_t numel(const bk_tensor_t *t)
{
    int n, c, h, w;
    bk_tensor_dims(t, &n, &c, &h, &w);
    return (size_t)n * c * h * w;
}

/* A forward-only eval-mode graph: the inference plan's. */
static bk_graph_t *eval_graph(backend_t *be)
{
    bk_graph_t *g = bk_graph_new(be);
    REQUIRE(g, "graph");
    bk_graph_set_forward_only(g);
    bk_graph_set_training(g, 0);
    return g;
}

/* A test case builds its ops on g from the input x; returns the output. */
typedef bk_tensor_t *(*build_fn)(bk_graph_t *g, bk_tensor_t *x, const void *arg);

/* Build + run on one backend; returns the output (malloc'd) and its size. */
static float *run_on(backend_t *be, build_fn build, const void *arg, const int in[4],
                     const float *x, size_t *count)
{
    bk_graph_t *g = eval_graph(be);
    bk_tensor_t *xt = bk_input(g, in[0], in[1], in[2], in[3], 0);
    bk_tensor_t *y = build(g, xt, arg);
    REQUIRE(y, "%s build: %s", backend_name(be), bk_graph_error(g));
    *count = numel(y);
    float *out = malloc(*count * sizeof *out);
    REQUIRE(out, "alloc");
    /* run twice: a graph must be re-runnable with the same result */
    for (int i = 0; i < 2; i++) {
        REQUIRE(bk_write(g, xt, x) == 0 && bk_forward(g) == 0 && bk_read(g, y, out) == 0,
                "%s run: %s", backend_name(be), bk_graph_error(g));
    }
    CHECK(bk_graph_fused(g), "%s: the graph did not run fused", backend_name(be));
    bk_graph_destroy(&g);
    return out;
}

static backend_t *cpu, *ref;

static void compare(const char *what, build_fn build, const void *arg, int n, int c, int h,
                    int w)
{
    int in[4] = {n, c, h, w};
    size_t cnt = (size_t)n * c * h * w, na, nb;
    float *x = rand_buf(cnt);
    float *a = run_on(cpu, build, arg, in, x, &na);
    float *b = run_on(ref, build, arg, in, x, &nb);
    REQUIRE(na == nb, "%s: output sizes %zu vs %zu", what, na, nb);
    double maxd = 0, maxr = 1e-3;
    for (size_t i = 0; i < na; i++) {
        double d = fabs((double)a[i] - b[i]);
        maxd = d > maxd || isnan(d) ? d : maxd;
        maxr = fabs((double)b[i]) > maxr ? fabs((double)b[i]) : maxr;
    }
    printf("%-44s %7zu outputs  rel err %.2g\n", what, na, maxd / maxr);
    CHECK(maxd / maxr <= TOL, "%s: cpu vs ref relative error %.3g", what, maxd / maxr);
    free(x);
    free(a);
    free(b);
}

/* ----------------------------------------------------------------- convs */

typedef struct {
    int oc, k, stride, pad, bias, n_post;
    bk_postop_t post[2];
    float *w, *b;
} conv_case_t;

static bk_tensor_t *conv(bk_graph_t *g, bk_tensor_t *x, int oc, int k, int stride, int pad,
                         float *w, float *b)
{
    int n, c, h, wd;
    bk_tensor_dims(x, &n, &c, &h, &wd);
    bk_conv_t p = {.ic = c, .oc = oc, .kh = k, .kw = k, .stride_h = stride,
                   .stride_w = stride, .pad_h = pad, .pad_w = pad, .weight = w, .bias = b};
    return bk_conv2d(g, x, &p);
}

/* conv, then its post-ops as the ops the planner fuses into it: a ReLU,
 * or an add of the residual (summed in place into the residual's buffer) */
static bk_tensor_t *build_conv(bk_graph_t *g, bk_tensor_t *x, const void *arg)
{
    const conv_case_t *cc = arg;
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    bk_tensor_t *res = NULL;
    int has_sum = 0;
    for (int i = 0; i < cc->n_post; i++)
        has_sum |= cc->post[i] == BK_PO_SUM;
    if (has_sum) {
        /* the residual: a 1x1 projection of x with the conv's stride, made
         * with the same weights (first ic of each filter) to keep it simple */
        int oh = (h + 2 * cc->pad - cc->k) / cc->stride + 1;
        int ow = (w + 2 * cc->pad - cc->k) / cc->stride + 1;
        /* a 1x1 conv without padding must give the same size as the k x k */
        if ((h - 1) / cc->stride + 1 != oh || (w - 1) / cc->stride + 1 != ow)
            return bk_fail(g, "test shape mismatch");
        bk_graph_set_name(g, "residual");
        res = conv(g, x, cc->oc, 1, cc->stride, 0, cc->w, NULL);
    }
    bk_graph_set_name(g, "conv");
    bk_tensor_t *y = conv(g, x, cc->oc, cc->k, cc->stride, cc->pad, cc->w, cc->bias ? cc->b : NULL);
    for (int i = 0; i < cc->n_post; i++)
        y = cc->post[i] == BK_PO_RELU ? bk_relu(g, y) : bk_add(g, y, res);
    return y;
}

static void conv_case(const char *what, int n, int ic, int h, int w, int oc, int k, int stride,
                      int pad, int bias, int n_post, bk_postop_t p0, bk_postop_t p1)
{
    conv_case_t cc = {.oc = oc, .k = k, .stride = stride, .pad = pad, .bias = bias,
                      .n_post = n_post, .post = {p0, p1}};
    cc.w = rand_buf((size_t)cc.oc * ic * cc.k * cc.k);
    cc.b = rand_buf((size_t)cc.oc);
    compare(what, build_conv, &cc, n, ic, h, w);
    free(cc.w);
    free(cc.b);
}

static void test_convs(void)
{
    const bk_postop_t R = BK_PO_RELU, S = BK_PO_SUM, N = BK_PO_RELU; /* N: unused slot */
    conv_case("conv 7x7 s2 p3 3->8 +bias relu", 2, 3, 33, 29,
              8, 7, 2, 3, 1, 1, R, N);
    conv_case("conv 3x3 s1 p1 16->32 no bias", 2, 16, 14, 14, 32, 3, 1, 1, 0, 0, N, N);
    conv_case("conv 3x3 s2 p1 5->7 odd", 3, 5, 15, 13, 7, 3, 2, 1, 1, 1, R, N);
    conv_case("conv 1x1 s2 24->16 (floor)", 2, 24, 9, 11, 16, 1, 2, 0, 1, 0, N, N);
    conv_case("conv 3x3 sum,relu (BasicBlock)", 2, 16, 10, 10,
              16, 3, 1, 1, 1, 2, S, R);
    conv_case("conv 3x3 relu,sum (seed WRN)", 2, 16, 10, 10,
              16, 3, 1, 1, 1, 2, R, S);
    conv_case("conv 3x3 s2 sum only, 20->40", 1, 20, 8, 8, 40, 3, 2, 1, 0, 1, S, N);
    conv_case("conv 3x3 1->10 single channel", 4, 1, 28, 28, 10, 3, 1, 1, 0, 1, R, N);
}

/* ----------------------------------------------------------------- pools */

static bk_tensor_t *build_pool(bk_graph_t *g, bk_tensor_t *x, const void *arg)
{
    bk_graph_set_name(g, "pool");
    return bk_pool2d(g, x, (const bk_pool_t *)arg);
}

static bk_tensor_t *build_gap(bk_graph_t *g, bk_tensor_t *x, const void *arg)
{
    (void)arg;
    return bk_global_avg_pool(g, x);
}

static void test_pools(void)
{
    bk_pool_t p;
    p = (bk_pool_t){BK_POOL_MAX, 3, 3, 2, 2, 1, 1};
    compare("maxpool 3x3 s2 p1 (resnet stem) 19x17", build_pool, &p, 2, 20, 19, 17);
    p = (bk_pool_t){BK_POOL_MAX, 2, 2, 2, 2, 0, 0};
    compare("maxpool 2x2 s2 on 7x7 (floor)", build_pool, &p, 2, 16, 7, 7);
    p = (bk_pool_t){BK_POOL_AVG, 7, 7, 7, 7, 0, 0};
    compare("avgpool 7x7 (seed WRN)", build_pool, &p, 3, 24, 7, 7);
    p = (bk_pool_t){BK_POOL_AVG, 3, 3, 2, 2, 1, 1};
    compare("avgpool 3x3 s2 p1 count_include_pad", build_pool, &p, 1, 8, 9, 10);
    p = (bk_pool_t){BK_POOL_AVG_EXCLUDE_PAD, 3, 3, 2, 2, 1, 1};
    compare("avgpool 3x3 s2 p1 exclude pad", build_pool, &p, 1, 8, 9, 10);
    compare("global avgpool 5x6", build_gap, NULL, 2, 33, 5, 6);
}

/* ------------------------------------------------- linear, relu, add, chains */

typedef struct {
    int out, out2;
    float *w, *b, *w2;
} lin_case_t;

static bk_tensor_t *build_linear(bk_graph_t *g, bk_tensor_t *x, const void *arg)
{
    const lin_case_t *lc = arg;
    bk_graph_set_name(g, "fc");
    bk_tensor_t *y = bk_linear(g, x, lc->out, lc->w, NULL, lc->b, NULL);
    if (lc->out2)   /* a second linear on the 2-D output, no bias */
        y = bk_linear(g, y, lc->out2, lc->w2, NULL, NULL, NULL);
    return y;
}

static bk_tensor_t *build_relu(bk_graph_t *g, bk_tensor_t *x, const void *arg)
{
    (void)arg;
    return bk_relu(g, x);
}

typedef struct {
    float *w;
    int relu;
} add_case_t;

/* add(relu(x), maxpool 3x3 s1 p1 (x)) [+ relu]: operands from two
 * different producers, neither a conv (the add stays an add) */
static bk_tensor_t *build_add(bk_graph_t *g, bk_tensor_t *x, const void *arg)
{
    const add_case_t *ac = arg;
    bk_pool_t mp = {BK_POOL_MAX, 3, 3, 1, 1, 1, 1};
    bk_tensor_t *y = bk_add(g, bk_relu(g, x), bk_pool2d(g, x, &mp));
    return ac->relu ? bk_relu(g, y) : y;
}

/* add(relu(x), conv1x1(x)): the conv takes the add as a sum post-op */
static bk_tensor_t *build_add_conv(bk_graph_t *g, bk_tensor_t *x, const void *arg)
{
    const add_case_t *ac = arg;
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    bk_tensor_t *a = bk_relu(g, x), *b = conv(g, x, c, 1, 1, 0, ac->w, NULL);
    bk_tensor_t *y = bk_add(g, a, b);
    return ac->relu ? bk_relu(g, y) : y;
}

/* conv -> maxpool -> conv(sum) -> gap -> fc: layouts flow between ops */
typedef struct {
    float *w1, *b1, *w2, *fw, *fb;
} chain_case_t;

/* a conv whose add's other operand is its own input: never summed in place
 * (the sum would overwrite the input while the conv reads it) */
static bk_tensor_t *build_chain_self(bk_graph_t *g, bk_tensor_t *x, const void *arg)
{
    const chain_case_t *cc = arg;
    bk_pool_t mp = {BK_POOL_MAX, 2, 2, 2, 2, 0, 0};
    bk_tensor_t *t = bk_relu(g, conv(g, x, 16, 3, 1, 1, cc->w1, cc->b1));
    t = bk_pool2d(g, t, &mp);
    return bk_relu(g, bk_add(g, conv(g, t, 16, 3, 1, 1, cc->w2, NULL), t));
}

static bk_tensor_t *build_chain_ok(bk_graph_t *g, bk_tensor_t *x, const void *arg)
{
    const chain_case_t *cc = arg;
    bk_pool_t mp = {BK_POOL_MAX, 2, 2, 2, 2, 0, 0};
    bk_tensor_t *t = bk_relu(g, conv(g, x, 16, 3, 1, 1, cc->w1, cc->b1));
    t = bk_pool2d(g, t, &mp);
    bk_tensor_t *r = bk_relu(g, t);
    t = bk_relu(g, bk_add(g, conv(g, t, 16, 3, 1, 1, cc->w2, NULL), r));
    t = bk_global_avg_pool(g, t);
    return bk_linear(g, t, 5, cc->fw, NULL, cc->fb, NULL);
}

static void test_misc_ops(void)
{
    lin_case_t lc = {10, 0, rand_buf(10 * 8 * 3 * 2), rand_buf(10), NULL};
    compare("linear on [2,8,3,2] (flatten CHW)", build_linear, &lc, 2, 8, 3, 2);
    free(lc.w);
    free(lc.b);
    lc = (lin_case_t){1000, 7, rand_buf(1000 * 512), rand_buf(1000), rand_buf(7 * 1000)};
    compare("linear 512->1000 then 1000->7 (2-D input)", build_linear, &lc, 16, 512, 1, 1);
    free(lc.w);
    free(lc.b);
    free(lc.w2);
    compare("relu", build_relu, NULL, 2, 17, 5, 3);
    add_case_t ac = {rand_buf(32 * 32), 0};
    compare("add", build_add, &ac, 2, 32, 6, 6);
    compare("add (conv sum)", build_add_conv, &ac, 2, 32, 6, 6);
    ac.relu = 1;
    compare("add + relu", build_add, &ac, 2, 32, 6, 6);
    compare("add + relu (conv sum, relu)", build_add_conv, &ac, 2, 32, 6, 6);
    free(ac.w);
    chain_case_t cc = {rand_buf(16 * 3 * 9), rand_buf(16), rand_buf(16 * 16 * 9), rand_buf(5 * 16),
                       rand_buf(5)};
    compare("chain conv-pool-conv(sum)-gap-fc", build_chain_ok, &cc, 2, 3, 12, 12);

    /* a conv cannot accumulate into its own input */
    compare("chain conv + its own input (no in-place sum)", build_chain_self, &cc, 2, 3, 12, 12);
    free(cc.w1);
    free(cc.b1);
    free(cc.w2);
    free(cc.fw);
    free(cc.fb);
}

/* BN folding: conv then BatchNorm (reference ops) == folded conv. */
static void test_bn_fold(void)
{
    int n = 2, ic = 6, oc = 5, k = 3, h = 9, w = 9;
    float *x = rand_buf((size_t)n * ic * h * w), *wt = rand_buf((size_t)oc * ic * k * k);
    float *b = rand_buf((size_t)oc), *gamma = rand_buf((size_t)oc), *beta = rand_buf((size_t)oc);
    float *mean = rand_buf((size_t)oc), *var = rand_buf((size_t)oc);
    for (int i = 0; i < oc; i++)
        var[i] = var[i] * var[i] + 0.1f;
    size_t outn = (size_t)n * oc * h * w;
    float *y1 = malloc(outn * 4), *y2 = malloc(outn * 4);
    REQUIRE(y1 && y2, "alloc");
    ref_conv2d(x, n, ic, h, w, wt, b, oc, k, k, 1, 1, 1, 1, y1, h, w);
    ref_batchnorm(y1, n, oc, h * w, gamma, beta, mean, var, BN_EPS);
    bk_bn_fold(wt, b, oc, (size_t)ic * k * k, gamma, beta, mean, var, BN_EPS);
    ref_conv2d(x, n, ic, h, w, wt, b, oc, k, k, 1, 1, 1, 1, y2, h, w);
    double maxd = 0, maxr = 1e-3;
    for (size_t i = 0; i < outn; i++) {
        maxd = fmax(maxd, fabs((double)y1[i] - y2[i]));
        maxr = fmax(maxr, fabs((double)y1[i]));
    }
    printf("%-44s rel err %.2g\n", "BN fold vs conv + BatchNorm", maxd / maxr);
    CHECK(maxd / maxr <= 1e-5, "bn fold rel err %.3g", maxd / maxr);
    free(x), free(wt), free(b), free(gamma), free(beta), free(mean), free(var), free(y1), free(y2);
}

/* Argument and shape errors are reported, named, and sticky. */
static void test_errors(void)
{
    float wt[8 * 3 * 9] = {0};
    bk_graph_t *g = eval_graph(cpu);
    bk_tensor_t *x = bk_input(g, 1, 3, 8, 8, 0);
    bk_conv_t p = {.ic = 4, .oc = 8, .kh = 3, .kw = 3, .stride_h = 1, .stride_w = 1,
                   .pad_h = 1, .pad_w = 1, .weight = wt};
    bk_graph_set_name(g, "layer9.conv1");
    CHECK(bk_conv2d(g, x, &p) == NULL, "ic mismatch accepted");
    const char *e = bk_graph_error(g);
    CHECK(e && strstr(e, "layer9.conv1") && strstr(e, "ic 4 (input has 3)"), "error: %s", e);
    p.ic = 3;
    CHECK(bk_conv2d(g, x, &p) == NULL, "graph stays failed");
    CHECK(bk_forward(g) < 0, "failed graph does not run");
    bk_graph_destroy(&g);

    g = eval_graph(cpu);
    x = bk_input(g, 1, 3, 8, 8, 0);
    bk_tensor_t *y8 = bk_conv2d(g, x, &p);
    CHECK(y8 && bk_add(g, y8, x) == NULL && strstr(bk_graph_error(g), "different shapes"),
          "add of a [1,8,8,8] and a [1,3,8,8]: %s", bk_graph_error(g));
    bk_graph_destroy(&g);

    g = eval_graph(ref);
    x = bk_input(g, 1, 3, 4, 4, 0);
    bk_conv_t big = {.ic = 3, .oc = 8, .kh = 7, .kw = 7, .stride_h = 1, .stride_w = 1,
                     .weight = wt};
    CHECK(bk_conv2d(g, x, &big) == NULL && strstr(bk_graph_error(g), "too small"),
          "kernel larger than input: %s", bk_graph_error(g));
    bk_graph_destroy(&g);

    g = eval_graph(cpu);
    x = bk_input(g, 1, 3, 4, 4, 0);
    bk_tensor_t *y = bk_relu(g, x);
    float buf[48] = {0};
    CHECK(bk_write(g, y, buf) < 0 && strstr(bk_graph_error(g), "input"), "write to non-input");
    bk_graph_destroy(&g);

    /* a residual is consumed: the fused conv summed into it, reading it fails */
    g = eval_graph(cpu);
    x = bk_input(g, 1, 3, 8, 8, 0);
    p = (bk_conv_t){.ic = 3, .oc = 3, .kh = 1, .kw = 1, .stride_h = 1, .stride_w = 1,
                    .weight = wt};
    bk_tensor_t *r = bk_relu(g, x);
    y = bk_add(g, bk_conv2d(g, x, &p), r);
    float out[3 * 64] = {0};
    CHECK(y && bk_write(g, x, out) == 0 && bk_forward(g) == 0 && bk_graph_fused(g) &&
          bk_read(g, y, out) == 0, "sum conv: %s", bk_graph_error(g));
    CHECK(bk_read(g, r, out) < 0 && strstr(bk_graph_error(g), "fused away"), "reuse: %s",
          bk_graph_error(g));
    bk_graph_destroy(&g);

    char err[256];
    CHECK(backend_new("tpu", 1, err, sizeof err) == NULL && strstr(err, "tpu"), "%s", err);
    CHECK(backend_new("cpu", -1, err, sizeof err) == NULL && strstr(err, "threads"), "%s", err);
}

int main(void)
{
    char err[256];
    cpu = backend_new("cpu", 2, err, sizeof err);
    REQUIRE(cpu, "%s", err);
    ref = backend_new("ref", 2, err, sizeof err);
    REQUIRE(ref, "%s", err);
    test_convs();
    test_pools();
    test_misc_ops();
    test_bn_fold();
    test_errors();
    backend_destroy(&cpu);
    backend_destroy(&ref);
    return tc_done("test_ops");
}
