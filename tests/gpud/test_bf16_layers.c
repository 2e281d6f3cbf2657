/* Native bf16 (BK_BF16_NATIVE, docs/BF16.md "Native"): oneDNN's bf16
 * convolution and inner product against the emulated path, layer by layer.
 *
 * Convolutions (3x3 stride 1 and 2, 1x1, the 7x7 stride 2 stem) and linear
 * layers (2-D and 4-D input): forward output, input gradient, weight and
 * bias gradients of sum(y * dy), as the engine hands them out (rounded to
 * bf16 where autocast makes bf16), native against the cpu backend emulated
 * and against the reference backend (plain C) emulated.
 *
 * The bound. Inputs, weights and dy are bf16 values, so every product is
 * exact in fp32 and both paths sum the same K products in fp32, in
 * different orders (and the bf16 dot-product instructions add pairs).
 * Each fp32 sum is within (K-1)u S of the exact one (u = 2^-24, S the sum
 * of the terms' magnitudes); allowing 2u per addition for the paired
 * instructions, the two sums differ by at most 4 K u S, and rounding both
 * to bf16 adds at most one bf16 step of the larger value:
 *     |native - emulated| <= step_bf16(max) + 4 K u S      (every element)
 * S comes from the same layer run (emulated) on |x|, |w|, |b|, |dy|. Also
 * max|a-b| / max|b| <= 2^-7 (one bf16 step at the largest value: a wrong
 * operand, layout or rounding point is off by far more). These run with
 * DDPIPE_CONV_ALGO=direct (oneDNN's kernels, whose bound this is).
 *
 * Where native bf16 runs 3x3 stride-1 convolutions by Winograd (wino.h:
 * avx512_bf16 without AMX), two such layers run again on it, against
 * Winograd's bound: step_bf16(max) + 2^-5 S per element (each product's
 * transformed operands rounded to bf16, the transforms' 4x growth) and
 * max|a-b| / max|b| <= 2^-6.
 *
 * A chain (conv, relu, conv stride 2, conv 1x1, linear; training step):
 * every layer's src and diff_dst pass through the same two shared bf16
 * buffers, so a stale or misplaced one shows. Native against emulated:
 * max|a-b| / max|b| <= 1e-2 (test_bf16's TOL_EMULATED: a one-step
 * difference travels through the later layers; the reference backend, which
 * sums in yet another order, is held to it too); with f32 staging (below)
 * the primitives are the emulated ones, so bit for bit.
 *
 * The cpu-emulated vs reference comparison runs on every CPU (it checks the
 * bound's machinery). The native part needs oneDNN's bf16 primitives
 * (backend_bf16_native); where there are none, it runs the native plans
 * with f32 in place of bf16 (cpu_bf16_test_f32: their reorders, shared
 * buffers and arguments, under the sanitizers), then says so and exits 77
 * (skipped): the bf16 kernels themselves did not run. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend.h"
#include "gpud/bf16.h"
#include "gpud/cpu/dnnl_priv.h"
#include "gpud/cpu/wino.h"
#include "tcheck.h"

#define U 0x1p-24
#define GLOBAL_TOL 0x1p-7

typedef struct {
    const char *name;
    int conv;                      /* 1: conv2d, 0: linear */
    int n, c, h, w;                /* input */
    int oc, k, stride, pad, bias;  /* linear: oc = out features */
} layer_t;

/* One run's outputs, and the reduction length K of each. */
typedef struct {
    float *y, *gx, *gw, *gb;
    size_t ny, nx, nw, nb;
    double ky, kx, kw;
} res_t;

static uint32_t rng = 12345u;

static float frand(void)   /* uniform in [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) * 0x1p-23 - 1.0);
}

static float *randv(size_t n, float scale)
{
    float *v = malloc(n * sizeof *v);
    REQUIRE(v, "out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = frand() * scale;
    bf16_round(v, v, n);   /* bf16 values, as the engine's operands */
    return v;
}

static float *absv(const float *v, size_t n)
{
    float *a = malloc(n * sizeof *a);
    REQUIRE(a, "out of memory");
    for (size_t i = 0; i < n; i++)
        a[i] = fabsf(v[i]);
    return a;
}

static size_t nweights(const layer_t *L)
{
    return L->conv ? (size_t)L->oc * L->c * L->k * L->k : (size_t)L->oc * L->c * L->h * L->w;
}

static backend_t *backend(const char *name, const char *mode)
{
    char err[512] = "";
    backend_t *be = backend_new(name, 2, err, sizeof err);
    REQUIRE(be, "backend_new(%s): %s", name, err);
    setenv("DDPIPE_BF16", mode, 1);
    REQUIRE(backend_set_precision(be, "bf16", err, sizeof err) == 0, "%s %s: %s", name, mode,
            err);
    unsetenv("DDPIPE_BF16");
    return be;
}

/* L on be: y = layer(x), then the gradients of sum(y * dy). */
static void run(backend_t *be, const layer_t *L, const float *x, const float *w,
                const float *b, const float *dy, res_t *r)
{
    bk_graph_t *g = bk_graph_new(be);
    bk_tensor_t *xt = bk_input(g, L->n, L->c, L->h, L->w, 1), *yt;
    memset(r, 0, sizeof *r);
    r->nx = (size_t)L->n * L->c * L->h * L->w;
    r->nw = nweights(L);
    r->nb = (size_t)L->oc;
    r->gx = malloc(r->nx * sizeof *r->gx);
    r->gw = malloc(r->nw * sizeof *r->gw);
    r->gb = calloc(r->nb, sizeof *r->gb);
    REQUIRE(r->gx && r->gw && r->gb, "out of memory");
    if (L->conv) {
        bk_conv_t p = {L->c, L->oc, L->k, L->k, L->stride, L->stride, L->pad, L->pad,
                       (float *)w, r->gw, L->bias ? (float *)b : NULL, L->bias ? r->gb : NULL};
        yt = bk_conv2d(g, xt, &p);
    } else {
        yt = bk_linear(g, xt, L->oc, (float *)w, r->gw, L->bias ? (float *)b : NULL,
                       L->bias ? r->gb : NULL);
    }
    REQUIRE(yt, "%s: %s", L->name, bk_graph_error(g));
    int n, c, h, ww;
    bk_tensor_dims(yt, &n, &c, &h, &ww);
    r->ny = (size_t)n * c * h * ww;
    r->y = malloc(r->ny * sizeof *r->y);
    REQUIRE(r->y, "out of memory");
    int kk = L->conv ? L->k * L->k : 1;
    r->ky = (double)L->c * (L->conv ? kk : L->h * L->w) + 1;   /* + bias */
    r->kx = (double)L->oc * kk;
    r->kw = (double)n * h * ww;
    REQUIRE(bk_write(g, xt, x) == 0 && bk_forward(g) == 0 && bk_read(g, yt, r->y) == 0 &&
                bk_backward(g, yt, dy) == 0 && bk_read_grad(g, xt, r->gx) == 0,
            "%s: %s", L->name, bk_graph_error(g));
    bk_graph_destroy(&g);
}

static void res_free(res_t *r)
{
    free(r->y);
    free(r->gx);
    free(r->gw);
    free(r->gb);
}

static double bf16_step(double v)   /* one bf16 ulp at |v| (0 at 0) */
{
    int e;
    if (v == 0.0)
        return 0.0;
    frexp(v, &e);   /* v = m 2^e, m in [0.5, 1): 8 significant bits */
    return ldexp(1.0, e - 8);
}

/* Winograd's bf16 convolutions (gpud/cpu/wino.h) round the transformed
 * operands of each product to bf16: relative 2^-8 each; against the direct
 * sum of |terms| s the transforms grow that about 4x (test_wino):
 * 4 x 2 x 2^-8 = 2^-5 of s per element. 0: oneDNN's same-products bound. */
static double s_wino_rel;

/* a against b (the reference), element bound with magnitudes s. */
static void compare(const char *label, const char *what, const float *a, const float *b,
                    const float *s, size_t n, double k)
{
    double maxd = 0.0, maxb = 0.0;
    size_t differ = 0, over = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        double big = fmax(fabs((double)a[i]), fabs((double)b[i]));
        double bound = bf16_step(big) + (s_wino_rel > 0 ? s_wino_rel : 4.0 * k * U) * s[i] *
                                            1.01;   /* s is bf16-rounded */
        differ += d != 0.0;
        if (!(d <= bound) && over++ < 3)
            fprintf(stderr, "  %s %s[%zu]: %.9g vs %.9g (bound %.3g)\n", label, what, i, a[i],
                    b[i], bound);
        maxd = d > maxd || isnan(d) ? d : maxd;
        maxb = fmax(maxb, fabs((double)b[i]));
    }
    double rel = maxb > 0 ? maxd / maxb : maxd;
    printf("  %-28s %-3s max|a-b|/max|b| %.3g, %zu of %zu differ\n", label, what, rel, differ, n);
    CHECK(over == 0, "%s %s: %zu of %zu elements beyond the bound", label, what, over, n);
    /* Winograd's: two bf16 steps (its own rounding, then the output's) */
    double tol = s_wino_rel > 0 ? 2 * GLOBAL_TOL : GLOBAL_TOL;
    CHECK(rel <= tol, "%s %s: %.3g > %g", label, what, rel, tol);
}

static void compare_res(const char *label, const res_t *a, const res_t *b, const res_t *s,
                        const layer_t *L)
{
    compare(label, "y", a->y, b->y, s->y, a->ny, a->ky);
    compare(label, "gx", a->gx, b->gx, s->gx, a->nx, a->kx);
    compare(label, "gw", a->gw, b->gw, s->gw, a->nw, a->kw);
    if (L->bias)
        compare(label, "gb", a->gb, b->gb, s->gb, a->nb, a->kw);
}

static const layer_t LAYERS[] = {
    {"conv 3x3 s1 16->32 bias", 1, 2, 16, 10, 9, 32, 3, 1, 1, 1},
    {"conv 3x3 s2 16->32", 1, 3, 16, 15, 13, 32, 3, 2, 1, 0},
    {"conv 1x1 s1 64->32 bias", 1, 2, 64, 9, 9, 32, 1, 1, 0, 1},
    {"conv 1x1 s2 32->64", 1, 2, 32, 8, 8, 64, 1, 2, 0, 0},
    {"conv 7x7 s2 3->16 (stem)", 1, 2, 3, 33, 31, 16, 7, 2, 3, 0},
    {"linear 64->10 bias", 0, 5, 64, 1, 1, 10, 0, 0, 0, 1},
    {"linear 8x3x3->7 bias", 0, 4, 8, 3, 3, 7, 0, 0, 0, 1},
};

/* Where native bf16 runs 3x3 stride-1 convolutions by Winograd
 * (avx512_bf16 without AMX): forward, backward data and, without bias, the
 * weight gradient. */
static const layer_t WINO_LAYERS[] = {
    {"conv 3x3 s1 16->32 bias (Winograd)", 1, 2, 16, 10, 9, 32, 3, 1, 1, 1},
    {"conv 3x3 s1 32->16 (Winograd, weights too)", 1, 3, 32, 12, 11, 16, 3, 1, 1, 0},
};

/* Every layer: emulated cpu vs ref always; native vs both when be_nat. */
static void test_layers(backend_t *be_emu, backend_t *be_ref, backend_t *be_nat,
                        const char *what, const layer_t *layers, size_t nl)
{
    for (size_t i = 0; i < nl; i++) {
        const layer_t *L = &layers[i];
        size_t nx = (size_t)L->n * L->c * L->h * L->w, nw = nweights(L);
        double fan = (double)nw / L->oc;
        float *x = randv(nx, 2.0f), *w = randv(nw, (float)(1.0 / sqrt(fan))),
              *b = randv((size_t)L->oc, 0.5f);
        res_t emu, ref, nat, mag;
        run(be_emu, L, x, w, b, NULL, &emu);   /* for y's size: dy of ones first */
        float *dy = randv(emu.ny, 1.0f);
        res_free(&emu);
        run(be_emu, L, x, w, b, dy, &emu);
        run(be_ref, L, x, w, b, dy, &ref);
        float *ax = absv(x, nx), *aw = absv(w, nw), *ab = absv(b, (size_t)L->oc),
              *ady = absv(dy, emu.ny);
        run(be_emu, L, ax, aw, ab, ady, &mag);
        printf("%s\n", L->name);
        char label[96];
        snprintf(label, sizeof label, "cpu emulated vs ref");
        compare_res(label, &emu, &ref, &mag, L);
        if (be_nat) {
            run(be_nat, L, x, w, b, dy, &nat);
            snprintf(label, sizeof label, "%s vs cpu emulated", what);
            compare_res(label, &nat, &emu, &mag, L);
            snprintf(label, sizeof label, "%s vs ref", what);
            compare_res(label, &nat, &ref, &mag, L);
            res_free(&nat);
        }
        res_free(&emu);
        res_free(&ref);
        res_free(&mag);
        float *bufs[] = {x, w, b, dy, ax, aw, ab, ady};
        for (size_t j = 0; j < sizeof bufs / sizeof *bufs; j++)
            free(bufs[j]);
    }
}

/* The chain on be: logits, input gradient and every parameter gradient,
 * concatenated into out (CHAIN_OUT floats). */
enum { CH_N = 2, CH_X = CH_N * 3 * 12 * 12, CH_W1 = 16 * 3 * 9, CH_W2 = 32 * 16 * 9,
       CH_W3 = 32 * 32, CH_W4 = 10 * 32 * 6 * 6, CH_Y = CH_N * 10,
       CHAIN_OUT = CH_Y + CH_X + CH_W1 + 16 + CH_W2 + CH_W3 + 32 + CH_W4 + 10 };

static void chain(backend_t *be, const float *x, const float *w, const float *dy, float *out)
{
    bk_graph_t *g = bk_graph_new(be);
    float *y = out, *gx = y + CH_Y, *g1 = gx + CH_X, *gb1 = g1 + CH_W1, *g2 = gb1 + 16,
          *g3 = g2 + CH_W2, *gb3 = g3 + CH_W3, *g4 = gb3 + 32, *gb4 = g4 + CH_W4;
    float *w1 = (float *)w, *b1 = w1 + CH_W1, *w2 = b1 + 16, *w3 = w2 + CH_W2, *b3 = w3 + CH_W3,
          *w4 = b3 + 32, *b4 = w4 + CH_W4;
    bk_conv_t c1 = {3, 16, 3, 3, 1, 1, 1, 1, w1, g1, b1, gb1};
    bk_conv_t c2 = {16, 32, 3, 3, 2, 2, 1, 1, w2, g2, NULL, NULL};
    bk_conv_t c3 = {32, 32, 1, 1, 1, 1, 0, 0, w3, g3, b3, gb3};
    bk_tensor_t *xt = bk_input(g, CH_N, 3, 12, 12, 1);
    bk_tensor_t *h = bk_conv2d(g, bk_relu(g, bk_conv2d(g, xt, &c1)), &c2);
    bk_tensor_t *yt = bk_linear(g, bk_conv2d(g, h, &c3), 10, w4, g4, b4, gb4);
    REQUIRE(yt && bk_write(g, xt, x) == 0 && bk_forward(g) == 0 && bk_read(g, yt, y) == 0 &&
                bk_backward(g, yt, dy) == 0 && bk_read_grad(g, xt, gx) == 0,
            "chain: %s", bk_graph_error(g));
    bk_graph_destroy(&g);
}

/* be_b's chain against be_emu's: bit for bit (exact), else within 1e-2. */
static void test_chain(backend_t *be_emu, backend_t *be_b, const char *what, int exact)
{
    size_t nw = CHAIN_OUT - CH_Y - CH_X;   /* the parameters, in chain()'s order */
    float *x = randv(CH_X, 2.0f), *w = randv(nw, 0.2f), *dy = randv(CH_Y, 1.0f);
    float *a = malloc(CHAIN_OUT * sizeof *a), *b = malloc(CHAIN_OUT * sizeof *b);
    REQUIRE(a && b, "out of memory");
    chain(be_emu, x, w, dy, b);
    chain(be_b, x, w, dy, a);
    static const struct { const char *what; size_t off, n; } part[] = {
        {"logits", 0, CH_Y}, {"gx", CH_Y, CH_X}, {"params", CH_Y + CH_X, CHAIN_OUT - CH_Y - CH_X}};
    for (int i = 0; i < 3; i++) {
        const float *pa = a + part[i].off, *pb = b + part[i].off;
        double maxd = 0.0, maxb = 0.0;
        for (size_t j = 0; j < part[i].n; j++) {
            double d = fabs((double)pa[j] - pb[j]);
            maxd = d > maxd || isnan(d) ? d : maxd;
            maxb = fmax(maxb, fabs((double)pb[j]));
        }
        double rel = maxb > 0 ? maxd / maxb : maxd;
        printf("chain %-6s %s vs cpu emulated: max|a-b|/max|b| %.3g\n", part[i].what, what,
               rel);
        if (exact)
            CHECK(memcmp(pa, pb, part[i].n * sizeof *pa) == 0, "chain %s: %s differs from "
                  "emulated (%.3g): the staging is wrong", part[i].what, what, rel);
        else
            CHECK(rel <= 1e-2, "chain %s: %s %.3g > 1e-2", part[i].what, what, rel);
    }
    free(x);
    free(w);
    free(dy);
    free(a);
    free(b);
}

int main(void)
{
    const char *isa = NULL;
    /* oneDNN's bf16 primitives first: their bound is theirs (the same
     * products, other fp32 orders); Winograd's layers below */
    setenv("DDPIPE_CONV_ALGO", "direct", 1);
    backend_t *be_emu = backend("cpu", "emulated"), *be_ref = backend("ref", "emulated");
    int level = backend_bf16_native(be_emu, &isa);
    printf("oneDNN bf16 probe: level %d (%s)\n", level, isa);
    if (level == 0)
        cpu_bf16_test_f32(1);   /* the native plans' staging, in f32 */
    backend_t *be_nat = backend("cpu", "native");
    CHECK(backend_precision(be_nat) == BK_BF16_NATIVE &&
              strncmp(backend_precision_name(be_nat), "bf16 (native: ", 14) == 0,
          "native backend: %s", backend_precision_name(be_nat));
    printf("native backend: %s\n", backend_precision_name(be_nat));
    test_layers(be_emu, be_ref, be_nat, level > 0 ? "native" : "native (f32 staging)", LAYERS,
                sizeof LAYERS / sizeof *LAYERS);
    test_chain(be_emu, be_ref, "ref", 0);   /* another summation order: the bound's check */
    test_chain(be_emu, be_nat, level > 0 ? "native" : "native (f32 staging)", level == 0);
    unsetenv("DDPIPE_CONV_ALGO");
    const char *nisa = "";
    if (level > 0 && wino_kernels_bf16() && cpu_bf16_native(&nisa) > 0 &&
        strncmp(nisa, "amx", 3) != 0) {
        backend_t *be_w = backend("cpu", "native"), *be_we = backend("cpu", "emulated");
        s_wino_rel = 0x1p-5;
        test_layers(be_we, be_ref, be_w, "native Winograd", WINO_LAYERS,
                    sizeof WINO_LAYERS / sizeof *WINO_LAYERS);
        s_wino_rel = 0;
        backend_destroy(&be_w);
        backend_destroy(&be_we);
    } else {
        printf("native Winograd layers: not run (this CPU: %s)\n",
               level > 0 ? "AMX, or no avx512_bf16 kernels" : "no bf16 kernels");
    }
    backend_destroy(&be_emu);
    backend_destroy(&be_ref);
    backend_destroy(&be_nat);
    if (tc_failures || level > 0)
        return tc_done("test_bf16_layers");
    printf("test_bf16_layers: the emulated and f32-staging checks passed; skipped (77): oneDNN "
           "creates no bf16 convolution on this CPU (it needs avx512_core)\n");
    return 77;
}
