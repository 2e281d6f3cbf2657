/* test_half_store — 16-bit activation buffers (bk_ops_t.train16,
 * docs/BF16.md "16-bit activations") against the fp32 buffers with the
 * engine's rounding points, on the reference backend.
 *
 * One small graph with every op kind the tape has (conv with and without
 * bias, training BatchNorm with and without its fused ReLU, ReLU, the
 * residual add, max and average pooling, concat, dropout, flatten of a map,
 * linear, label-smoothed cross-entropy), an input that wants its gradient,
 * and two tensors that feed two ops each (their gradients are summed), is
 * trained 4 SGD steps twice from the same weights: once with
 * DDPIPE_HALF_ACTIVATIONS=0 (fp32 buffers holding 16-bit values) and once
 * on 16-bit buffers. For bf16 and fp16, with local and SyncBatchNorm
 * statistics, through bk_forward + bk_backward and bk_forward_backward
 * (and with the first BatchNorm frozen: eval mode in the training graph):
 *   - the losses, the logits, the input's gradient and every parameter
 *     after every step are the same bits;
 *   - every logit and input-gradient element is a value of the format;
 *   - the 16-bit graph's activation memory is at most 55 % of the fp32
 *     graph's (the loss stays fp32): the 16-bit buffers were used.
 * The wrong storage (a kernel reading a 16-bit buffer as floats) overruns
 * the buffer under ASan; a rounding point the two paths do not share
 * changes the bits.
 * Bitwise training (model_step_t.chunk: chunk graphs run op by op, ghost
 * BatchNorm's exact sums, or SyncBatchNorm's over the chunks) on the
 * seed WideResNet through the model API, bf16, one rank: the parameters
 * and buffers after each of 2 steps are the same bytes on both storages,
 * as are an ordinary step's; and one chunk with SyncBatchNorm gives the
 * ordinary step's bytes (a rounding point one path skips shows there: a
 * training BatchNorm's output went unrounded in bitwise mode until the
 * storage comparison found it).
 * Also half_bits.h: packing a float gives the 16 bits whose unpacked value
 * is bf16_round's / fp16_round1's float (2^22 bit patterns spread over all
 * 2^32, and the specials), and every non-NaN 16-bit pattern survives
 * unpack then pack. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend.h"
#include "gpud/backend_arena.h"
#include "gpud/model.h"
#include "gpud/bf16.h"
#include "gpud/fp16_math.h"
#include "gpud/half_bits.h"
#include "exact_grads.h"
#include "golden_io.h"
#include "tcheck.h"
#include "trand.h"

#define N 4
#define C 3
#define H 12
#define K 5
#define STEPS 4
#define LR 0.05f

typedef struct {
    float *p[32];
    size_t n[32];
    int count;
} params_t;

static float *param(params_t *ps, size_t n, uint64_t *rs, float scale, float offset)
{
    float *v = malloc(n * sizeof *v);
    REQUIRE(v && ps->count < 32, "alloc");
    for (size_t i = 0; i < n; i++)
        v[i] = offset + scale * trand(rs);
    ps->p[ps->count] = v;
    ps->n[ps->count++] = n;
    return v;
}

/* Weights and their gradients, in pairs: p[2i] a value, p[2i + 1] its grad
 * (running stats have no gradient and are compared as values). */
typedef struct {
    params_t w;          /* every array, compared after each step */
    float *val[16], *grad[16];
    size_t len[16];
    int n;
} wset_t;

static float *weight(wset_t *m, size_t n, uint64_t *rs, float scale, float offset,
                     float **grad)
{
    float *v = param(&m->w, n, rs, scale, offset);
    *grad = calloc(n, sizeof **grad);
    REQUIRE(*grad && m->n < 16, "alloc");
    m->val[m->n] = v;
    m->grad[m->n] = *grad;
    m->len[m->n++] = n;
    return v;
}

static void bn_init(wset_t *m, bk_bn_t *bn, int c, int relu, uint64_t *rs)
{
    *bn = (bk_bn_t){.c = c, .momentum = 0.1f, .eps = 1e-5f, .relu = relu};
    bn->weight = weight(m, (size_t)c, rs, 0.1f, 1.0f, &bn->grad_weight);
    bn->bias = weight(m, (size_t)c, rs, 0.1f, 0.0f, &bn->grad_bias);
    bn->running_mean = param(&m->w, (size_t)c, rs, 0.0f, 0.0f);
    bn->running_var = param(&m->w, (size_t)c, rs, 0.0f, 1.0f);
}

static void conv_init(wset_t *m, bk_conv_t *cv, int ic, int oc, int k, int bias,
                      uint64_t *rs)
{
    *cv = (bk_conv_t){.ic = ic, .oc = oc, .kh = k, .kw = k, .stride_h = 1, .stride_w = 1,
                      .pad_h = k / 2, .pad_w = k / 2};
    cv->weight = weight(m, (size_t)oc * ic * k * k, rs, 0.4f, 0.0f, &cv->grad_weight);
    if (bias)
        cv->bias = weight(m, (size_t)oc, rs, 0.1f, 0.0f, &cv->grad_bias);
}

typedef struct {
    backend_t *be;
    bk_graph_t *g;
    wset_t m;
    bk_tensor_t *x, *logits, *loss;
} net_t;

static int one_rank_sum(void *ctx, double *data, size_t n, char *err, size_t errlen)
{
    (void)ctx, (void)data, (void)n, (void)err, (void)errlen;
    return 0;   /* one rank: its sums are the global ones */
}

static const char *test_backend = "ref";
/* 1: the first BatchNorm (its ReLU fused) frozen, eval mode in the training
 * graph (bk_bn_t.eval, --freeze-bn): its backward's ReLU mask comes from
 * its output; the cpu's 16-bit eval forward normalises without oneDNN, so
 * a mask taken from oneDNN's workspace was never written there */
static int frozen_bn;

static void net_build(net_t *t, const char *precision, int sync, int store16)
{
    char err[256];
    memset(t, 0, sizeof *t);
    t->be = backend_new(test_backend, 1, err, sizeof err);
    REQUIRE(t->be, "%s backend: %s", test_backend, err);
    REQUIRE(backend_set_precision(t->be, precision, err, sizeof err) == 0, "%s: %s", precision,
            err);
    bk_graph_t *g = t->g = bk_graph_new(t->be);
    REQUIRE(g, "graph");
    if (sync)
        bk_graph_set_allreduce(g, one_rank_sum, NULL);
    uint64_t rs = 0x9e3779b97f4a7c15ull;   /* the same weights for both nets */
    bk_conv_t c1, c2, c3;   /* the graph keeps copies */
    bk_bn_t b1, b2;
    conv_init(&t->m, &c1, C, 8, 3, 0, &rs);   /* cuda: native, 3 channels padded to 8 */
    bn_init(&t->m, &b1, 8, 1, &rs);
    b1.eval = frozen_bn;
    conv_init(&t->m, &c2, 8, 8, 3, 0, &rs);
    bn_init(&t->m, &b2, 8, 0, &rs);
    conv_init(&t->m, &c3, 8, 4, 1, 1, &rs);   /* bias, 4 outputs: cuda's generic conv */
    float *lw_g, *lb_g;
    float *lw = weight(&t->m, (size_t)K * 48, &rs, 0.2f, 0.0f, &lw_g);
    float *lb = weight(&t->m, K, &rs, 0.1f, 0.0f, &lb_g);
    t->x = bk_input(g, N, C, H, H, 1);
    bk_tensor_t *a = bk_batchnorm(g, bk_conv2d(g, t->x, &c1), &b1);       /* fused ReLU */
    bk_tensor_t *b = bk_relu(g, bk_batchnorm(g, bk_conv2d(g, a, &c2), &b2));
    bk_tensor_t *s = bk_add(g, a, b);                                     /* a: two readers */
    bk_pool_t mx = {BK_POOL_MAX, 3, 3, 2, 2, 1, 1};   /* ResNet's: overlapping windows */
    bk_tensor_t *p = bk_pool2d(g, s, &mx);
    bk_tensor_t *parts[2] = {p, bk_conv2d(g, p, &c3)};                   /* p: two readers */
    bk_tensor_t *cat = bk_dropout(g, bk_concat(g, 2, parts), 0.25f);
    bk_pool_t av = {BK_POOL_AVG, 3, 3, 2, 2, 1, 1};
    bk_pool_t av2 = {BK_POOL_AVG, 2, 2, 1, 1, 0, 0};
    bk_tensor_t *map = bk_pool2d(g, bk_pool2d(g, cat, &av), &av2);   /* 12 x 2 x 2 */
    t->logits = bk_linear(g, bk_flatten(g, map), K, lw, lw_g, lb, lb_g);   /* NHWC reordered */
    t->loss = bk_softmax_ce(g, t->logits, 0.1f);
    REQUIRE(bk_keep(g, t->logits) == 0, "keep");
    if (!store16)
        setenv("DDPIPE_HALF_ACTIVATIONS", "0", 1);
    REQUIRE(bk_graph_compile(g) == 0, "compile: %s", bk_graph_error(g));
    unsetenv("DDPIPE_HALF_ACTIVATIONS");
}

static void net_free(net_t *t)
{
    bk_graph_destroy(&t->g);
    backend_destroy(&t->be);
    for (int i = 0; i < t->m.w.count; i++)
        free(t->m.w.p[i]);
    for (int i = 0; i < t->m.n; i++)
        free(t->m.grad[i]);
}

typedef struct {
    float loss[N], logits[N * K], gx[N * C * H * H];
} outs_t;

static void net_step(net_t *t, int step, int pass, outs_t *o)
{
    static const int32_t labels[N] = {0, 3, 4, 1};
    static const int64_t ids[N] = {11, 12, 13, 14};
    float in[N * C * H * H], dy[N];
    uint64_t rs = 1000 + (uint64_t)step;
    for (size_t i = 0; i < sizeof in / sizeof *in; i++)
        in[i] = 2.0f * trand(&rs);
    for (int i = 0; i < N; i++)
        dy[i] = 1.0f / N;
    bk_graph_t *g = t->g;
    REQUIRE(bk_set_labels(g, labels) == 0 && bk_set_step(g, 7, (uint64_t)step, ids) == 0 &&
            bk_write(g, t->x, in) == 0, "inputs: %s", bk_graph_error(g));
    int rc = pass ? bk_forward_backward(g, t->loss, dy)
                  : (bk_forward(g) < 0 ? -1 : bk_backward(g, t->loss, dy));
    REQUIRE(rc == 0, "step %d: %s", step, bk_graph_error(g));
    REQUIRE(bk_read(g, t->loss, o->loss) == 0 && bk_read(g, t->logits, o->logits) == 0 &&
            bk_read_grad(g, t->x, o->gx) == 0, "read: %s", bk_graph_error(g));
    for (int i = 0; i < t->m.n; i++)
        for (size_t j = 0; j < t->m.len[i]; j++)
            t->m.val[i][j] -= LR * t->m.grad[i][j];
}

static int is_half(float v, int fp16)
{
    if (isnan(v))
        return 1;
    if (fp16)
        return fp16_round1(v) == v;
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (u & 0xffffu) == 0;
}

static int same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void run_case(const char *precision, int sync, int pass)
{
    net_t a, b;
    net_build(&a, precision, sync, 0);
    net_build(&b, precision, sync, 1);
    size_t ba = bk_graph_bytes(a.g), bb = bk_graph_bytes(b.g);
    CHECK(bb > 0 && (double)bb <= 0.55 * (double)ba,
          "%s: 16-bit graph holds %zu bytes of activations, the fp32 one %zu", precision, bb,
          ba);
    printf("%s sync %d pass %d: activation bytes %zu on 16-bit buffers, %zu on fp32 (%.3f)\n",
           precision, sync, pass, bb, ba, (double)bb / (double)ba);
    int fp16 = strcmp(precision, "fp16") == 0;
    for (int st = 0; st < STEPS; st++) {
        outs_t oa, ob;
        net_step(&a, st, pass, &oa);
        net_step(&b, st, pass, &ob);
        const char *tag = precision;
        CHECK(same_bits(oa.loss, ob.loss, N), "%s sync %d pass %d step %d: losses differ "
              "(%.9g vs %.9g)", tag, sync, pass, st, oa.loss[0], ob.loss[0]);
        CHECK(same_bits(oa.logits, ob.logits, N * K), "%s sync %d pass %d step %d: logits "
              "differ", tag, sync, pass, st);
        CHECK(same_bits(oa.gx, ob.gx, sizeof oa.gx / sizeof *oa.gx), "%s sync %d pass %d "
              "step %d: input gradients differ", tag, sync, pass, st);
        int bad = 0;
        for (int i = 0; i < N * K; i++)
            bad += !is_half(ob.logits[i], fp16);
        for (size_t i = 0; i < sizeof ob.gx / sizeof *ob.gx; i++)
            bad += !is_half(ob.gx[i], fp16);
        CHECK(bad == 0, "%s step %d: %d logits / input gradients are not %s values", tag, st,
              bad, precision);
        for (int i = 0; i < a.m.w.count; i++)
            CHECK(same_bits(a.m.w.p[i], b.m.w.p[i], a.m.w.n[i]), "%s sync %d pass %d step "
                  "%d: parameter array %d differs", tag, sync, pass, st, i);
    }
    net_free(&a);
    net_free(&b);
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void test_bits(void)
{
    int bad_bf = 0, bad_fp = 0, bad_rt = 0;
    for (uint64_t i = 0; i < (1u << 22) + 8; i++) {
        static const uint32_t special[8] = {0, 0x80000000u, 0x7f800000u, 0xff800000u,
                                            0x7fc00000u, 0x7f7fffffu, 0x477ff000u, 1};
        uint32_t u = i < 8 ? special[i] : (uint32_t)((i - 8) * 1023u + (i >> 3));
        float x, r;
        memcpy(&x, &u, sizeof x);
        bf16_round(&r, &x, 1);
        float b = bf16_unpack(bf16_pack(x));
        bad_bf += bits_of(b) != bits_of(r);
        float f = fp16_unpack(fp16_pack(x)), e = fp16_round1(x);
        bad_fp += isnan(e) ? !isnan(f) : bits_of(f) != bits_of(e);
    }
    for (uint32_t h = 0; h < 65536; h++) {
        float b = bf16_unpack((uint16_t)h), f = fp16_unpack((uint16_t)h);
        bad_rt += !isnan(b) && bf16_pack(b) != h;
        bad_rt += !isnan(f) && fp16_pack(f) != h;
    }
    CHECK(bad_bf == 0 && bad_fp == 0 && bad_rt == 0, "half_bits: %d bf16, %d fp16 packs off "
          "the rounding, %d 16-bit patterns not restored", bad_bf, bad_fp, bad_rt);
}

/* The seed WideResNet trained 2 steps through the model API in bf16 on
 * the test's backend: the parameters and buffers after each (after[st], floats each). */
enum { MG = 8 };
static size_t run_model(int sync, int chunk, int store16, float *after[2])
{
    uint8_t px[MG * 28 * 28];
    int32_t labels[MG];
    int64_t ids[MG];
    uint32_t r = 12345;
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)((r = r * 1664525u + 1013904223u) >> 24);
    for (int i = 0; i < MG; i++) {
        labels[i] = (i * 3) % 10;
        ids[i] = 500 + i;
    }
    char path[512], err[512];
    model_opts_t o = {.arch = "wideresnet", .threads = 1, .train = 1, .n_channels = 4,
                      .bf16 = 1};
    memcpy(o.channels, (int[4]){8, 16, 24, 32}, sizeof o.channels);
    if (!store16)   /* read when the graphs compile: at the first step */
        setenv("DDPIPE_HALF_ACTIVATIONS", "0", 1);
    model_t *m = model_new(&o, test_backend, tc_src("tests/golden/wrn_small.safetensors", path,
                                             sizeof path), err, sizeof err);
    REQUIRE(m, "wrn_small: %s", err);
    exact_grads_t eg;
    exact_grads_open(&eg, m);
    REQUIRE(!chunk || (model_set_exact(m, NULL, NULL, sync) == 0 &&
                       model_set_grad_ready(m, exact_grads_hook, &eg) == 0), "bitwise mode");
    size_t floats = 0;
    for (int st = 0; st < 2; st++) {
        model_step_t s = {.global_batch = MG, .seed = 9, .step = (uint64_t)st, .ids = ids,
                          .chunk = chunk};
        xsum_clear(eg.x);
        REQUIRE(model_train_step_u8(m, px, MG, 1, 28, 28, NULL, NULL, labels, &s, NULL, NULL,
                                    err, sizeof err) == 0, "step %d: %s", st, err);
        if (chunk)
            exact_grads_write(&eg);
        if (chunk && !sync)
            REQUIRE(model_running_sums(m) && model_running_apply(m, err, sizeof err) == 0,
                    "running stats: %s", err);
        for (int i = 0; i < model_param_count(m); i++) {
            model_param_t p;
            REQUIRE(model_param_at(m, i, &p) == 0, "param %d", i);
            for (size_t j = 0; p.grad && j < p.numel; j++)
                p.value[j] -= LR * p.grad[j];
        }
        const bk_arena_t *a = model_params_arena(m);
        floats = a->floats;
        after[st] = malloc(floats * sizeof(float));
        REQUIRE(after[st], "alloc");
        memcpy(after[st], a->base, floats * sizeof(float));
    }
    unsetenv("DDPIPE_HALF_ACTIVATIONS");
    exact_grads_close(&eg);
    model_destroy(&m);
    return floats;
}

static void compare_runs(const char *what, float *a[2], float *b[2], size_t floats)
{
    for (int st = 0; st < 2; st++) {
        CHECK(same_bits(a[st], b[st], floats), "%s, step %d: the parameters differ", what, st);
        free(a[st]);
        free(b[st]);
    }
}

/* Ordinary and bitwise (chunk 3 of 8: 3, 3, 2) training on both storages;
 * and bitwise training with one chunk and SyncBatchNorm is the ordinary
 * step (on fp32 buffers: the rounding points of the two paths agree). */
static void model_cases(void)
{
    float *a[2], *b[2];
    size_t n = run_model(0, 0, 0, a);
    CHECK(run_model(0, 0, 1, b) == n, "arena sizes");
    compare_runs("ordinary step, 16-bit vs fp32 buffers", a, b, n);
    for (int sync = 0; sync < 2; sync++) {
        run_model(sync, 3, 0, a);
        run_model(sync, 3, 1, b);
        compare_runs(sync ? "bitwise, SyncBatchNorm, 16-bit vs fp32 buffers"
                          : "bitwise, ghost BatchNorm, 16-bit vs fp32 buffers", a, b, n);
    }
    run_model(0, 0, 0, a);
    run_model(1, MG, 0, b);
    compare_runs("one chunk with SyncBatchNorm vs the ordinary step, fp32 buffers", a, b, n);
}

/* The cpu backend stores bf16 only (fp16 graphs keep fp32 buffers there):
 * native bf16 where oneDNN has the kernels (DDPIPE_BF16=native: the
 * default picks it on AMX only), then emulated. Its native
 * convolutions run NHWC on both storages here (DDPIPE_BF16_LAYOUT=nhwc; the
 * fp32 buffers' default lets oneDNN pick, another fp32 sum order), so they
 * must give the same bits too. */
static void cpu_cases(void)
{
    setenv("DDPIPE_BF16_LAYOUT", "nhwc", 1);
    char err[256];
    backend_t *be = backend_new("cpu", 1, err, sizeof err);
    REQUIRE(be, "cpu: %s", err);
    int level = backend_bf16_native(be, NULL);
    backend_destroy(&be);
    for (int emulated = level == 0; emulated < 2; emulated++) {
        setenv("DDPIPE_BF16", emulated ? "emulated" : "native", 1);
        be = backend_new("cpu", 1, err, sizeof err);
        REQUIRE(be && backend_set_precision(be, "bf16", err, sizeof err) == 0, "cpu: %s", err);
        printf("cpu %s\n", backend_precision_name(be));
        backend_destroy(&be);
        run_case("bf16", 0, 0);
        run_case("bf16", 0, 1);
        run_case("bf16", 1, 0);
        frozen_bn = 1;
        run_case("bf16", 0, 0);
        frozen_bn = 0;
        model_cases();
    }
    unsetenv("DDPIPE_BF16");
    unsetenv("DDPIPE_BF16_LAYOUT");
}

/* argv[1]: the backend (default ref); cuda runs on the kernel emulator
 * (tests/gpud/cuda: gpud_test_half_store_emu), where cuDNN's fake sums in
 * double both ways, so its bf16 and fp16 NHWC tables must give the fp32
 * buffers' bits too (bitwise training is the cpu's and ref's). */
int main(int argc, char **argv)
{
    if (argc > 1)
        test_backend = argv[1];
    if (strcmp(test_backend, "cpu") == 0) {
        cpu_cases();
        return tc_done("test_half_store cpu");
    }
    if (strcmp(test_backend, "ref") == 0) {
        test_bits();
        model_cases();
    }
    run_case("bf16", 0, 0);
    run_case("bf16", 0, 1);
    run_case("bf16", 1, 0);
    run_case("fp16", 0, 1);
    run_case("fp16", 1, 0);
    frozen_bn = 1;
    run_case("bf16", 0, 1);
    run_case("fp16", 0, 0);
    frozen_bn = 0;
    return tc_done("test_half_store");
}
