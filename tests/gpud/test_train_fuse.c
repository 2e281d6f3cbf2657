/* test_train_fuse — a training graph's forward fusions (gpud/tape_fuse.c)
 * give the unfused graph's bits, and do fuse.
 *
 * A graph of residual blocks as torchvision ends them, relu(bn(conv) + r):
 * an identity block (whose first BatchNorm + ReLU is followed by a dropout,
 * as WideResNet's blocks: the BatchNorm + dropout fusion where the backend
 * has bn_relu_drop, fp32 on cpu and ref), a downsample block (the 1x1 conv's BatchNorm is
 * recorded after the branch: it is the one fused, the branch's output the
 * residual), and an add -> relu whose add has no BatchNorm input (the
 * add + ReLU fusion only) and whose shortcut another conv reads between
 * the add's inputs (its gradient may not share the add's buffer). Its input wants its gradient. It is trained 3
 * SGD steps twice from the same weights, with DDPIPE_TRAIN_FUSE=0 and with
 * the fusions, for each precision and storage the backend has, with local
 * and SyncBatchNorm statistics, through bk_forward + bk_backward and
 * bk_forward_backward (a recorded pass on cuda):
 *   - the losses, logits, the input's gradient and every parameter and
 *     running statistic after every step are the same bits;
 *   - on cuda both block ends' ReLU backward is done by their BatchNorm's
 *     gradient-sums pass (bk_graph_bwd_fusions; tape_fuse.c), which stores
 *     the ReLU's gradient for the add's inputs, and adds the last term of
 *     the ReLU's output gradient (its next conv's) as it reads it
 *     (bk_graph_grad_folds): t1's and t2's first convs each write theirs
 *     after another reader's;
 *   - the fused graph holds exactly the activations it no longer stores
 *     fewer (each fused BatchNorm's output and sum, each fused add's sum,
 *     and the identity shortcut's gradient, which shares its add's:
 *     tape_compile.c share_add_grads): the fusions happened, the BatchNorm
 *     ones where the backend has bn_add_relu (fp32 everywhere, the 16-bit
 *     buffers on cuda).
 * Both nets set to eval after a training step (bk_graph_set_training: the
 * BatchNorms on their running statistics, the dropout the identity), fp32
 * and bf16: two steps of the same bits (the fused BatchNorm's output is not
 * stored; its fused ReLU backward must run as the ReLU's own).
 * On cuda also a recorded pass whose 16-bit BatchNorms would make their
 * ReLU's mask while recorded (they read y then): the bits of a net with
 * masks throughout.
 * Then the model API (not on the emulator, where it takes minutes): resnet18
 * at 32x32 and a narrow wideresnet (dropout on) trained 2 steps, plain and
 * bitwise (--chunk: its chunk graphs normalise through the same fused
 * pass), with and without the fusions: the same parameter, buffer and
 * gradient bytes.
 *
 * argv[1]: the backend (default ref); cuda runs on the kernel emulator
 * (tests/gpud/cuda: gpud_test_train_fuse_emu, DDPIPE_TEST_EMULATED=1) or
 * on a device (gpud_cuda_train_fuse, label gpu: exits 77 without one),
 * where it runs the model API's plain case too; ref-device (parameters in
 * its arenas only) runs the model API's cases. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend.h"
#include "gpud/backend_arena.h"
#include "gpud/model.h"
#include "exact_grads.h"
#include "tcheck.h"
#include "trand.h"

#define N 4
#define CI 8
#define H 8
#define K 5
#define STEPS 3
#define LR 0.05f
#define MAXP 64

static const char *test_backend = "ref";

typedef struct {
    float *val[MAXP], *grad[MAXP];   /* grad NULL: a running statistic */
    size_t len[MAXP];
    int n;
} wset_t;

static float *weight(wset_t *m, size_t n, uint64_t *rs, float scale, float offset, int grad,
                     float **g)
{
    REQUIRE(m->n < MAXP, "too many arrays");
    float *v = malloc(n * sizeof *v);
    REQUIRE(v, "alloc");
    for (size_t i = 0; i < n; i++)
        v[i] = offset + scale * trand(rs);
    m->val[m->n] = v;
    m->grad[m->n] = grad ? calloc(n, sizeof(float)) : NULL;
    REQUIRE(!grad || m->grad[m->n], "alloc");
    m->len[m->n++] = n;
    if (g)
        *g = m->grad[m->n - 1];
    return v;
}

typedef struct {
    backend_t *be;
    bk_graph_t *g;
    wset_t m;
    bk_conv_t cv[8];
    bk_bn_t bn[8];
    int ncv, nbn;
    bk_tensor_t *x, *logits, *loss;
} net_t;

static int channels_of(const bk_tensor_t *x)
{
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    return c;
}

static bk_tensor_t *conv(net_t *t, bk_tensor_t *x, int oc, int k, int stride, int bias,
                         uint64_t *rs)
{
    bk_conv_t *c = &t->cv[t->ncv++];
    int ic = channels_of(x);
    *c = (bk_conv_t){.ic = ic, .oc = oc, .kh = k, .kw = k, .stride_h = stride,
                     .stride_w = stride, .pad_h = k / 2, .pad_w = k / 2};
    c->weight = weight(&t->m, (size_t)oc * ic * k * k, rs, 0.3f, 0.0f, 1, &c->grad_weight);
    if (bias)
        c->bias = weight(&t->m, (size_t)oc, rs, 0.1f, 0.0f, 1, &c->grad_bias);
    return bk_conv2d(t->g, x, c);
}

static bk_tensor_t *bn(net_t *t, bk_tensor_t *x, int relu, uint64_t *rs)
{
    bk_bn_t *b = &t->bn[t->nbn++];
    int c = channels_of(x);
    *b = (bk_bn_t){.c = c, .momentum = 0.1f, .eps = 1e-5f, .relu = relu};
    b->weight = weight(&t->m, (size_t)c, rs, 0.1f, 1.0f, 1, &b->grad_weight);
    b->bias = weight(&t->m, (size_t)c, rs, 0.1f, 0.0f, 1, &b->grad_bias);
    b->running_mean = weight(&t->m, (size_t)c, rs, 0.0f, 0.0f, 0, NULL);
    b->running_var = weight(&t->m, (size_t)c, rs, 0.0f, 1.0f, 0, NULL);
    return bk_batchnorm(t->g, x, b);
}

static int one_rank_sum(void *ctx, double *data, size_t n, char *err, size_t errlen)
{
    (void)ctx, (void)data, (void)n, (void)err, (void)errlen;
    return 0;
}

/* The bytes a fusion no longer stores: [0] with BatchNorm fusions, [1] with
 * the add + ReLU ones only, [2] what the BatchNorm + dropout fusion adds
 * (per element; times the element size). */
static size_t saved_elems[3];

static void net_build(net_t *t, const char *precision, int sync, int half_act, int fuse)
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
    uint64_t rs = 0x2545f4914f6cdd1dull;   /* the same weights for both nets */
    t->x = bk_input(g, N, CI, H, H, 1);
    bk_tensor_t *t0 = bn(t, conv(t, t->x, 16, 3, 1, 0, &rs), 1, &rs);
    /* identity block: bn2 fused, t0 the residual */
    bk_tensor_t *a = bk_dropout(g, bn(t, conv(t, t0, 16, 3, 1, 0, &rs), 1, &rs), 0.25f);
    bk_tensor_t *t1 = bk_relu(g, bk_add(g, bn(t, conv(t, a, 16, 3, 1, 0, &rs), 0, &rs), t0));
    /* downsample block: its BatchNorm (recorded last) fused, the branch the residual */
    bk_tensor_t *a2 = bn(t, conv(t, t1, 32, 3, 2, 0, &rs), 1, &rs);
    bk_tensor_t *b2 = bn(t, conv(t, a2, 32, 3, 1, 0, &rs), 0, &rs);
    bk_tensor_t *d = bn(t, conv(t, t1, 32, 1, 2, 0, &rs), 0, &rs);
    bk_tensor_t *t2 = bk_relu(g, bk_add(g, b2, d));
    /* add -> relu without a BatchNorm input (a conv with bias): the pair.
     * t2 is read by another conv after that one and before the add: its
     * gradient must not share the add's (that conv's backward would add to
     * the buffer before the first conv's backward reads it) */
    bk_tensor_t *c3 = conv(t, t2, 32, 3, 1, 1, &rs), *v3 = conv(t, t2, 32, 1, 1, 0, &rs);
    bk_tensor_t *t3 = bk_add(g, bk_relu(g, bk_add(g, c3, t2)), v3);
    bk_pool_t av = {BK_POOL_AVG, 4, 4, 4, 4, 0, 0};
    float *lw_g, *lb_g;
    float *lw = weight(&t->m, (size_t)K * 32, &rs, 0.2f, 0.0f, 1, &lw_g);
    float *lb = weight(&t->m, K, &rs, 0.1f, 0.0f, 1, &lb_g);
    t->logits = bk_linear(g, bk_flatten(g, bk_pool2d(g, t3, &av)), K, lw, lw_g, lb, lb_g);
    t->loss = bk_softmax_ce(g, t->logits, 0.1f);
    REQUIRE(bk_keep(g, t->logits) == 0, "keep");
    size_t blk = (size_t)N * 16 * H * H, blk2 = (size_t)N * 32 * (H / 2) * (H / 2);
    /* bn2 + sum, d + sum, the pair's sum; and t0's gradient (it shares the
     * identity block's add's: t0's other reader, conv1, comes before bn2).
     * t2's stays its own: its other reader is the conv whose output is the
     * add's other input, so it reads the add's gradient while adding to t2's */
    saved_elems[0] = 2 * blk + 2 * blk2 + blk2 + blk;
    saved_elems[1] = blk + blk2 + blk2 + blk;   /* the three sums, t0's gradient */
    saved_elems[2] = 2 * blk;   /* the fused BatchNorm's output and its unused gradient */
    if (!half_act)
        setenv("DDPIPE_HALF_ACTIVATIONS", "0", 1);
    if (!fuse)
        setenv("DDPIPE_TRAIN_FUSE", "0", 1);
    REQUIRE(bk_graph_compile(g) == 0, "compile: %s", bk_graph_error(g));
    unsetenv("DDPIPE_HALF_ACTIVATIONS");
    unsetenv("DDPIPE_TRAIN_FUSE");
}

static void net_free(net_t *t)
{
    bk_graph_destroy(&t->g);
    backend_destroy(&t->be);
    for (int i = 0; i < t->m.n; i++) {
        free(t->m.val[i]);
        free(t->m.grad[i]);
    }
}

typedef struct {
    float loss[N], logits[N * K], gx[N * CI * H * H];
} outs_t;

static void net_step(net_t *t, int step, int pass, outs_t *o)
{
    static const int32_t labels[N] = {1, 4, 0, 2};
    static const int64_t ids[N] = {21, 22, 23, 24};
    float in[N * CI * H * H], dy[N];
    uint64_t rs = 77 + (uint64_t)step;
    for (size_t i = 0; i < sizeof in / sizeof *in; i++)
        in[i] = 2.0f * trand(&rs);
    for (int i = 0; i < N; i++)
        dy[i] = 1.0f / N;
    bk_graph_t *g = t->g;
    REQUIRE(bk_set_labels(g, labels) == 0 && bk_set_step(g, 3, (uint64_t)step, ids) == 0 &&
            bk_write(g, t->x, in) == 0, "inputs: %s", bk_graph_error(g));
    int rc = pass ? bk_forward_backward(g, t->loss, dy)
                  : (bk_forward(g) < 0 ? -1 : bk_backward(g, t->loss, dy));
    REQUIRE(rc == 0, "step %d: %s", step, bk_graph_error(g));
    REQUIRE(bk_read(g, t->loss, o->loss) == 0 && bk_read(g, t->logits, o->logits) == 0 &&
            bk_read_grad(g, t->x, o->gx) == 0, "read: %s", bk_graph_error(g));
    for (int i = 0; i < t->m.n; i++)
        for (size_t j = 0; t->m.grad[i] && j < t->m.len[i]; j++)
            t->m.val[i][j] -= LR * t->m.grad[i][j];
}

/* Step st gave nets a and b the same bits: losses, logits, the input's
 * gradient, and every parameter and running statistic after it. */
static void check_same_step(const char *tag, int st, const net_t *a, const net_t *b,
                            const outs_t *oa, const outs_t *ob)
{
    CHECK(memcmp(oa->loss, ob->loss, sizeof oa->loss) == 0, "%s step %d: losses differ "
          "(%.9g vs %.9g)", tag, st, oa->loss[0], ob->loss[0]);
    CHECK(memcmp(oa->logits, ob->logits, sizeof oa->logits) == 0, "%s step %d: logits differ",
          tag, st);
    CHECK(memcmp(oa->gx, ob->gx, sizeof oa->gx) == 0, "%s step %d: input gradients differ",
          tag, st);
    for (int i = 0; i < a->m.n; i++)
        CHECK(memcmp(a->m.val[i], b->m.val[i], a->m.len[i] * sizeof(float)) == 0,
              "%s step %d: array %d differs", tag, st, i);
}

/* bn_fused: whether this backend, precision and storage fuse the
 * BatchNorms too; esize: the activations' element size. The BatchNorm +
 * dropout fusion: fp32 where the backend has bn_relu_drop. */
static void run_case(const char *precision, int half_act, int sync, int pass, int bn_fused,
                     size_t esize)
{
    int cuda = strcmp(test_backend, "cuda") == 0;
    int drop_fused = strcmp(precision, "fp32") == 0 && !cuda;
    net_t a, b;
    net_build(&a, precision, sync, half_act, 0);
    net_build(&b, precision, sync, half_act, 1);
    char tag[96];
    snprintf(tag, sizeof tag, "%s %s%s sync %d pass %d", test_backend, precision,
             half_act ? "" : " (fp32 buffers)", sync, pass);
    size_t ba = bk_graph_bytes(a.g), bb = bk_graph_bytes(b.g);
    size_t want = (saved_elems[bn_fused ? 0 : 1] + (drop_fused ? saved_elems[2] : 0)) * esize;
    CHECK(ba > bb && ba - bb == want, "%s: the fused graph holds %zu bytes, the unfused %zu: "
          "%zu fewer, not the %zu of the %s%s fusions", tag, bb, ba, ba - bb, want,
          bn_fused ? "BatchNorm + add + ReLU" : "add + ReLU",
          drop_fused ? ", BatchNorm + dropout" : "");
    printf("%s: activation bytes %zu fused, %zu unfused\n", tag, bb, ba);
    /* the two block ends' ReLU backward marked for their BatchNorm's where
     * it can run on the device (cuda; with SyncBatchNorm's host sums the
     * ReLU's own backward runs at run time: sync 1 checks that path) */
    int want_bwd = cuda && bn_fused ? 2 : 0;
    CHECK(bk_graph_bwd_fusions(b.g) == want_bwd && bk_graph_bwd_fusions(a.g) == 0,
          "%s: %d block ends' ReLU backward fused (unfused graph %d), want %d", tag,
          bk_graph_bwd_fusions(b.g), bk_graph_bwd_fusions(a.g), want_bwd);
    /* ... each also adding the last term of its ReLU's output gradient (the
     * next conv's, t1's and t2's first readers) as it reads it: no acc pass */
    CHECK(bk_graph_grad_folds(b.g) == want_bwd && bk_graph_grad_folds(a.g) == 0,
          "%s: %d gradients' last terms folded into a BatchNorm (unfused graph %d), want %d",
          tag, bk_graph_grad_folds(b.g), bk_graph_grad_folds(a.g), want_bwd);
    for (int st = 0; st < STEPS; st++) {
        outs_t oa, ob;
        net_step(&a, st, pass, &oa);
        net_step(&b, st, pass, &ob);
        check_same_step(tag, st, &a, &b, &oa, &ob);
    }
    net_free(&a);
    net_free(&b);
}

/* A recorded pass whose BatchNorms would make their ReLU's mask inside
 * the recording (cuda's 16-bit BatchNorm makes it at the first forward
 * that wants it: here the switch is off for the first pass, op by op, and
 * on from the second, the recorded one): they read y there instead, and
 * every step gives the bits of a net with the switch on throughout. */
static void check_mask_first_recorded(void)
{
    net_t a, b;
    net_build(&a, "bf16", 0, 1, 1);
    net_build(&b, "bf16", 0, 1, 1);
    for (int st = 0; st < STEPS; st++) {
        outs_t oa, ob;
        net_step(&a, st, 1, &oa);
        if (st == 0)
            setenv("DDPIPE_CUDA_BN_MASK", "0", 1);
        net_step(&b, st, 1, &ob);
        unsetenv("DDPIPE_CUDA_BN_MASK");
        check_same_step("cuda bf16, the mask first made in a recorded pass", st, &a, &b, &oa,
                        &ob);
    }
    net_free(&a);
    net_free(&b);
}

/* A training graph set to eval after its fusions were made (bk_forward +
 * bk_backward: the gradients of a model in eval mode, its BatchNorms on
 * their running statistics, its dropout the identity): a trained step
 * first, then two eval steps, the fused net's bits equal the unfused
 * net's. The fused BatchNorm stores no output (the add's fusion) and does
 * not do its ReLU's backward in eval mode: the ReLU's own runs. */
static void check_eval_backward(const char *precision, int half_act)
{
    net_t a, b;
    net_build(&a, precision, 0, half_act, 0);
    net_build(&b, precision, 0, half_act, 1);
    char tag[96];
    snprintf(tag, sizeof tag, "%s %s, set to eval after step 0", test_backend, precision);
    for (int st = 0; st < 3; st++) {
        if (st == 1) {
            bk_graph_set_training(a.g, 0);
            bk_graph_set_training(b.g, 0);
        }
        outs_t oa, ob;
        net_step(&a, st, 0, &oa);
        net_step(&b, st, 0, &ob);
        check_same_step(tag, st, &a, &b, &oa, &ob);
    }
    net_free(&a);
    net_free(&b);
}

/* resnet18 (3x32x32) or wideresnet (1x28x28, narrow, its dropouts on)
 * through the model API, 2 steps (chunk > 0: bitwise, in chunks of that
 * many samples, the gradients summed exactly), each followed by SGD where
 * sgd (host arenas): both arenas (every parameter and BatchNorm buffer,
 * every gradient) after. */
enum { MB = 4, MS = 32 };
static size_t run_model(const char *arch, int chunk, int fuse, int sgd, float **out)
{
    int wrn = strcmp(arch, "wideresnet") == 0, ic = wrn ? 1 : 3, side = wrn ? 28 : MS;
    uint8_t px[MB * 3 * MS * MS];
    int32_t labels[MB] = {3, 1, 4, 1};
    int64_t ids[MB] = {5, 9, 2, 6};
    uint32_t r = 4242;
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)((r = r * 1664525u + 1013904223u) >> 24);
    char err[512];
    model_opts_t o = {.arch = arch, .threads = 1, .train = 1, .init = 1, .init_seed = 3,
                      .num_classes = 10, .channels = {4, 8, 8, 16}, .n_channels = wrn ? 4 : 0};
    if (!fuse)   /* read when the training graphs compile: at the first step */
        setenv("DDPIPE_TRAIN_FUSE", "0", 1);
    model_t *m = model_new(&o, test_backend, NULL, err, sizeof err);
    REQUIRE(m, "%s: %s", arch, err);
    exact_grads_t eg;
    exact_grads_open(&eg, m);
    REQUIRE(!chunk || (model_set_exact(m, NULL, NULL, 0) == 0 &&
                       model_set_grad_ready(m, exact_grads_hook, &eg) == 0), "bitwise mode");
    for (int st = 0; st < 2; st++) {
        model_step_t s = {.global_batch = MB, .seed = 1, .step = (uint64_t)st, .ids = ids,
                          .chunk = chunk};
        xsum_clear(eg.x);
        REQUIRE(model_train_step_u8(m, px, MB, ic, side, side, NULL, NULL, labels, &s, NULL,
                                    NULL, err, sizeof err) == 0, "%s step %d: %s", arch, st, err);
        if (chunk) {
            exact_grads_write(&eg);
            REQUIRE(model_running_sums(m) && model_running_apply(m, err, sizeof err) == 0,
                    "running stats: %s", err);
        }
        for (int i = 0; sgd && i < model_param_count(m); i++) {
            model_param_t p;
            REQUIRE(model_param_at(m, i, &p) == 0, "param %d", i);
            for (size_t j = 0; p.grad && j < p.numel; j++)
                p.value[j] -= LR * p.grad[j];
        }
    }
    unsetenv("DDPIPE_TRAIN_FUSE");
    const bk_arena_t *a = model_params_arena(m), *ga = model_grads_arena(m);
    size_t n = a->floats + ga->floats;
    *out = malloc(n * sizeof **out);
    REQUIRE(*out && bk_arena_read(a, 0, a->floats, *out) == 0 &&
            bk_arena_read(ga, 0, ga->floats, *out + a->floats) == 0, "read the arenas");
    exact_grads_close(&eg);
    model_destroy(&m);
    return n;
}

static void model_cases(int max_chunk, int sgd)
{
    static const char *const arch[] = {"resnet18", "wideresnet"};
    for (int k = 0; k < 2; k++)
        for (int chunk = 0; chunk <= max_chunk; chunk += 2) {
            float *a, *b;
            size_t na = run_model(arch[k], chunk, 0, sgd, &a);
            size_t nb = run_model(arch[k], chunk, 1, sgd, &b);
            CHECK(na == nb && memcmp(a, b, na * sizeof *a) == 0, "%s %s chunk %d: the "
                  "parameters after 2 steps differ with the fusions", test_backend, arch[k],
                  chunk);
            free(a);
            free(b);
        }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        test_backend = argv[1];
    int cuda = strcmp(test_backend, "cuda") == 0;
    const char *emu = getenv("DDPIPE_TEST_EMULATED");
    int emulated = emu && strcmp(emu, "1") == 0;
    if (cuda && !emulated) {   /* gpud_cuda_train_fuse: the device's own kernels */
        char err[256];
        backend_t *be = backend_new("cuda", 1, err, sizeof err);
        if (!be) {
            printf("test_train_fuse: no cuda backend (%s), skipped\n", err);
            return 77;
        }
        backend_destroy(&be);
    }
    if (strcmp(test_backend, "ref-device") == 0) {   /* parameters in its arenas only */
        model_cases(0, 0);   /* the exact sums read gradients on the host */
        return tc_done("test_train_fuse");
    }
    for (int sync = 0; sync <= 1; sync++)
        for (int pass = 0; pass <= 1; pass++)
            run_case("fp32", 1, sync, pass, 1, 4);
    /* bf16 on fp32 buffers: its rounding of the BatchNorm's output is a
     * pass of its own, so the add + ReLU fusion only */
    run_case("bf16", 0, 0, 1, 0, 4);
    /* 16-bit buffers: cuda's table fuses BatchNorm (16-bit kernels), the
     * cpu's and ref's have no bn_add_relu there */
    run_case("bf16", 1, 0, 0, cuda, 2);
    if (cuda)
        check_mask_first_recorded();
    run_case("bf16", 1, 1, 1, cuda, 2);
    /* the same kernels with fp16's rounding (the cpu keeps fp16 in fp32 buffers) */
    run_case("fp16", 1, 0, 1, cuda, strcmp(test_backend, "cpu") == 0 ? 4 : 2);
    check_eval_backward("fp32", 1);
    check_eval_backward("bf16", 1);
    if (!cuda)
        model_cases(2, 1);
    else if (!emulated)   /* on the emulator a resnet18 step takes minutes */
        model_cases(0, 0);   /* device arenas, bitwise training is the host's */
    return tc_done("test_train_fuse");
}
